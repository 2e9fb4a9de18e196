//! The per-packet path allocates nothing: rxdrop, l2fwd and txonly on AF_XDP run for a second
//! under traffic on a test bed with a counting global allocator, and the allocations made by
//! the run loop's thread while it runs are counted. Each loop runs once first (warm-up: the
//! port's first template copy, lazily built state), then again, counted.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use fastpath::bpf::XdpMode;
use fastpath::io::afxdp::AfXdpPort;
use fastpath::packet::{build_udp_frame, UdpFrameSpec};
use fastpath::xsk::{CopyMode, XskConfig};
use fastpath_testbed::{Testbed, TestbedConfig};
use fastpath_tools::bench::{self, LoopOpts, SendLimits, TxPlan, Wait};
use fastpath_tools::stats::{Counters, Ctr};

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting the allocations of threads that turned counting on.
struct Counting;

// SAFETY: every call is forwarded unchanged to the system allocator; the thread-locals are
// const-initialised `Cell`s, so touching them allocates nothing and cannot recurse.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded; `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: forwarded; `ptr` came from this allocator with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn note() {
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `run` until 1 s has passed, counting this thread's allocations meanwhile.
fn counted(mut run: impl FnMut(&AtomicBool)) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let timer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        s2.store(true, Ordering::Relaxed);
    });
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|c| c.set(true));
    run(&stop);
    COUNTING.with(|c| c.set(false));
    timer.join().unwrap();
    ALLOCATIONS.with(|n| n.get())
}

fn port(iface: &str) -> AfXdpPort {
    let mut cfg = XskConfig::default();
    (cfg.socket.copy_mode, cfg.socket.tx_skb_budget) = (CopyMode::Copy, Some(256));
    AfXdpPort::open(
        &fastpath::netdev::Iface::resolve(iface).unwrap(),
        0,
        &cfg,
        fastpath::bpf::AttachOpts::mode(Some(XdpMode::Native)),
    )
    .expect("AF_XDP port")
}

#[test]
fn run_loops_allocate_nothing_per_packet() {
    if !privileged("run_loops_allocate_nothing_per_packet") {
        return;
    }
    let bed = Testbed::up(&TestbedConfig::default()).expect("test bed");
    let (ns_b, if_b) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    let opts = LoopOpts { batch_size: 64, wait: Wait::Spin };
    // Receivers in ns b, while gen sends from ns a for as long as they run.
    let traffic = |bed: &Testbed| {
        let dst = mac(bed.mac_b());
        let (ns, ifa) = (bed.ns_a().to_string(), bed.iface_a().to_string());
        std::thread::spawn(move || {
            run(&["gen", "--netns", &ns, "-i", &ifa, "--dst-mac", &dst, "--rate", "300000", "--duration", "4"])
        })
    };
    for mode in ["rxdrop", "l2fwd"] {
        let g = traffic(&bed);
        let (ns, ifb) = (ns_b.clone(), if_b.clone());
        let (warm, allocs) = fastpath_testbed::spawn_in_netns(&ns, move || {
            let mut p = port(&ifb);
            let c = Counters::default();
            let mut once = |stop: &AtomicBool| match mode {
                "rxdrop" => bench::rxdrop(&mut p, opts, &c, stop, |_| {}).unwrap(),
                _ => bench::l2fwd(&mut p, opts, &c, stop).unwrap(),
            };
            // Warm-up: a quarter of a second.
            let s = AtomicBool::new(false);
            std::thread::scope(|sc| {
                sc.spawn(|| {
                    std::thread::sleep(Duration::from_millis(250));
                    s.store(true, Ordering::Relaxed)
                });
                once(&s);
            });
            let warm = c.get(Ctr::RxPackets);
            let allocs = counted(|stop| once(stop));
            (c.get(Ctr::RxPackets) - warm, allocs)
        })
        .join()
        .unwrap()
        .unwrap();
        let _ = g.join();
        // Not a speed: enough packets (16 batches of 64) that an allocation per packet or per
        // batch would show. gen is asked for 300 kpps; a machine with a CPU hog on each core
        // still delivers far more than 1,000 in the second.
        assert!(warm >= 1_000, "{mode}: the counted second saw too little traffic ({warm} packets)");
        assert_eq!(allocs, 0, "{mode}: {allocs} allocations while receiving {warm} packets");
    }
    // txonly from ns a.
    let (ns_a, if_a, dst) = (bed.ns_a().to_string(), bed.iface_a().to_string(), bed.mac_b());
    let (sent, allocs) = fastpath_testbed::spawn_in_netns(&ns_a, move || {
        let mut p = port(&if_a);
        let dev = fastpath::netdev::NetDev::by_name(&if_a).unwrap();
        let spec = UdpFrameSpec {
            src_mac: dev.mac().unwrap(),
            dst_mac: dst,
            src_ip: fastpath_testbed::IP4_A.into(),
            dst_ip: fastpath_testbed::IP4_B.into(),
            src_port: 9000,
            dst_port: 9,
            frame_len: 64,
        };
        let mut frame = vec![0u8; 64];
        build_udp_frame(&spec, &mut frame);
        let c = Counters::default();
        let limits = SendLimits { count: None, rate_pps: Some(300_000) };
        let warm_up = TxPlan { limits: SendLimits { count: Some(1000), rate_pps: None }, ..TxPlan::new(&frame, opts) };
        bench::txonly(&mut p, &warm_up, &c, &AtomicBool::new(false)).unwrap();
        let before = c.get(Ctr::TxPackets);
        let allocs = counted(|stop| {
            bench::txonly(&mut p, &TxPlan { limits, ..TxPlan::new(&frame, opts) }, &c, stop).unwrap();
        });
        (c.get(Ctr::TxPackets) - before, allocs)
    })
    .join()
    .unwrap()
    .unwrap();
    // As above: enough batches to show a per-packet or per-batch allocation, not a speed.
    assert!(sent >= 1_000, "txonly: the counted second sent too little ({sent} packets)");
    assert_eq!(allocs, 0, "txonly: {allocs} allocations while sending {sent} packets");
}
