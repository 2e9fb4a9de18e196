//! l2fwd on two queues over ONE shared UMEM: a socket and a pinned thread per queue, each
//! swapping MAC addresses and sending every frame back out of its queue from the same UMEM
//! frame (no copy). The second socket shares the first one's UMEM with its own FILL and
//! COMPLETION rings (XDP_SHARED_UMEM, kernel >= 5.10).
//!
//!     l2fwd_shared IFACE [SECONDS]        (root; IFACE needs 2 queues)
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fastpath::bpf::XskRedirect;
use fastpath::io::afxdp::{open_queues, QueueSetup};
use fastpath::io::Port;
use fastpath::netdev::Iface;
use fastpath::xsk::RxQueues;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let iface = args.get(1).ok_or("usage: l2fwd_shared IFACE [SECONDS]")?.clone();
    let seconds: f64 = args.get(2).map_or(Ok(5.0), |s| s.parse())?;
    // Resolved once; everything below works by its ifindex.
    let dev = Iface::resolve(&iface)?;
    let queues = RxQueues::check(&dev, vec![0, 1])?;
    let mut setup = QueueSetup::new(dev, queues); // XskConfig and AttachOpts defaults, FILL rings full
    setup.shared_umem = true;
    let q = open_queues(&setup, Some(XskRedirect::load(Default::default())?))?;
    let mode = q.attached.as_ref().map_or("none", |a| a.mode.name());
    for p in &q.ports {
        let i = p.info();
        println!("l2fwd_shared: {iface} queue {} xdp {mode} {} umem {:?}", i.queue, i.copy_mode, i.sharing);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let forwarded = Arc::new(AtomicU64::new(0));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers: Vec<_> = q
        .ports
        .into_iter()
        .enumerate()
        .map(|(i, mut port)| {
            let (stop, forwarded) = (stop.clone(), forwarded.clone());
            std::thread::spawn(move || -> Result<(u64, u64), fastpath::io::PortError> {
                fastpath::workers::pin_current_thread(i % cpus)?;
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let (_, sent) = port.fwd_burst(64, 10, |frame| {
                        fastpath::packet::swap_macs(frame);
                        true
                    })?;
                    n += sent as u64;
                    forwarded.fetch_add(sent as u64, Ordering::Relaxed);
                }
                // Frames the kernel could not hand over (RX ring full, no FILL frame).
                let drops = port
                    .stats()?
                    .drops
                    .iter()
                    .filter(|(k, _)| k == "rx_dropped" || k == "rx_ring_full")
                    .map(|(_, v)| v)
                    .sum();
                Ok((n, drops))
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    for (i, w) in workers.into_iter().enumerate() {
        let (n, drops) = w.join().expect("worker")?;
        println!("l2fwd_shared: queue {i} forwarded {n} dropped {drops}");
    }
    println!("l2fwd_shared: total forwarded {}", forwarded.load(Ordering::Relaxed));
    drop(q.attached); // detaches the program
    Ok(())
}
