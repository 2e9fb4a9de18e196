//! The AF_XDP engine on a real kernel: a UMEM shared by two sockets in both kernel modes, and
//! `bench --queues 2` with and without `--shared-umem`.
//!
//! Shared UMEM (Documentation/networking/af_xdp.rst, XDP_SHARED_UMEM):
//! - same queue: two sockets on queue 0 share one FILL and one COMPLETION ring; xsk_redirect
//!   sends queue 0's frames round robin to both;
//! - other queues: a socket on queue 0 and one on queue 1 of a 2-queue veth, each with its own
//!   FILL and COMPLETION ring over the same frames.
//!
//! In both, of 200,000 frames (100,000 per socket) each arrives exactly once or is counted by
//! its socket's XDP_STATISTICS drop counters, exactly per socket, and a checker that tracks
//! every frame address user space holds sees no frame handed out twice.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::*;
use fastpath::bpf::{AttachOpts, XdpMode, XskRedirect, XskRedirectOpts};
use fastpath::xsk::{CopyMode, Frame, Sharing, SocketConfig, Umem, UmemConfig, XskSocket};
use fastpath_testbed::{Testbed, TestbedConfig};
use fastpath_tools::payload::SeqTracker;

const PER_SOCKET: u64 = 100_000;

/// Frame addresses user space holds: a frame handed out while held is a double ownership.
#[derive(Default)]
struct Checker {
    held: HashSet<u64>,
    double: u64,
    frame_size: u64,
}

impl Checker {
    fn take(&mut self, f: &Frame) {
        if !self.held.insert(f.addr() & !(self.frame_size - 1)) {
            self.double += 1;
        }
    }
    fn give(&mut self, f: &Frame) {
        assert!(self.held.remove(&(f.addr() & !(self.frame_size - 1))), "gave a frame the checker did not see taken");
    }
}

struct Outcome {
    per_socket: Vec<SeqTracker>,
    double: u64,
    sharing: Vec<Sharing>,
    /// Per socket: frames the kernel directed to it but dropped (XDP_STATISTICS rx_dropped,
    /// rx_ring_full, rx_invalid_descs).
    drops: Vec<u64>,
}

/// In ns b of `bed`: one UMEM, a socket per entry of `queues` (queue ids; repeats share the
/// queue), xsk_redirect with `queues.len() / distinct queues` sockets per queue. Receives until
/// every socket's PER_SOCKET frames are received or named as dropped, `stop`, or 30 s; every
/// frame goes back to a FILL ring (the shared one, or the receiving socket's own).
fn receive(
    ns: &str,
    iface: &str,
    queues: Vec<u32>,
    stop: Arc<AtomicBool>,
    ready: mpsc::Sender<()>,
) -> std::thread::JoinHandle<Result<Outcome, fastpath_testbed::TestbedError>> {
    let iface = iface.to_string();
    fastpath_testbed::spawn_in_netns(ns, move || {
        let mut cfg = UmemConfig::default();
        (cfg.frame_count, cfg.fill_size, cfg.comp_size) = (8192, 8192, 2048);
        let (umem, mut frames) = Umem::new(&cfg).expect("UMEM");
        let mut sc = SocketConfig::default();
        (sc.copy_mode, sc.ring_size) = (CopyMode::Copy, 4096);
        let iface = fastpath::netdev::Iface::resolve(&iface).unwrap();
        let mut socks: Vec<XskSocket> =
            queues.iter().map(|&q| XskSocket::bind(&umem, &iface, q, &sc).expect("bind")).collect();
        let distinct: HashSet<u32> = queues.iter().copied().collect();
        let spq = (queues.len() / distinct.len()) as u32;
        let prog = XskRedirect::load(XskRedirectOpts::default().with_socks_per_queue(spq))
            .and_then(|p| p.attach(&iface, AttachOpts::mode(Some(XdpMode::Native))))
            .expect("attach")
            .prog;
        let mut slot_of_queue = std::collections::HashMap::<u32, u32>::new();
        for s in &socks {
            let k = slot_of_queue.entry(s.queue_id()).or_insert(0);
            prog.insert(s.queue_id() * spq + *k, s.as_raw_fd()).expect("XSKMAP");
            *k += 1;
        }
        // Frames onto the FILL rings there are, in equal shares.
        let fills = socks.iter().filter(|s| s.fill.is_some()).count();
        let share = frames.len() / fills;
        for s in socks.iter_mut() {
            if let Some(fill) = s.fill.as_mut() {
                let mut b = fill.reserve(share as u32);
                while b.room() > 0 {
                    b.push(frames.pop().unwrap());
                }
            }
        }
        ready.send(()).unwrap();
        let mut checker = Checker { frame_size: cfg.frame_size as u64, ..Default::default() };
        let mut trackers: Vec<SeqTracker> = socks.iter().map(|_| SeqTracker::default()).collect();
        let mut received = vec![0u64; socks.len()];
        let mut held: Vec<Frame> = Vec::with_capacity(8192);
        let sock_drops = |socks: &[XskSocket]| -> Vec<u64> {
            socks
                .iter()
                .map(|s| s.stats().unwrap())
                .map(|x| x.rx_dropped + x.rx_ring_full + x.rx_invalid_descs)
                .collect()
        };
        let mut dropped = 0u64; // read when the rings are idle
        let t0 = Instant::now();
        while !stop.load(Ordering::Relaxed)
            && received.iter().sum::<u64>() + dropped < PER_SOCKET * received.len() as u64
            && t0.elapsed() < Duration::from_secs(30)
        {
            let mut got = 0;
            for i in 0..socks.len() {
                for f in socks[i].rx.peek(64) {
                    checker.take(&f);
                    trackers[i].record(umem.data(&f));
                    received[i] += 1;
                    got += 1;
                    held.push(f);
                }
                // Back to a FILL ring: this socket's own, or the one it shares (socket 0's on
                // its queue, which owns the rings).
                let owner = if socks[i].fill.is_some() {
                    i
                } else {
                    socks.iter().position(|s| s.queue_id() == socks[i].queue_id() && s.fill.is_some()).unwrap()
                };
                let fill = socks[owner].fill.as_mut().unwrap();
                let mut b = fill.reserve(held.len() as u32);
                while b.room() > 0 {
                    let f = held.pop().unwrap();
                    checker.give(&f);
                    b.push(f);
                }
            }
            if got == 0 {
                for s in &socks {
                    s.kick_rx();
                }
                dropped = sock_drops(&socks).iter().sum();
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let drops = sock_drops(&socks);
        drop(prog);
        Outcome {
            per_socket: trackers,
            double: checker.double,
            sharing: socks.iter().map(|s| s.sharing()).collect(),
            drops,
        }
    })
}

fn shared_umem(queues_on_bed: u32, sockets: Vec<u32>, gen_args: &[&str], want_sharing: &[Sharing]) {
    // No IPv6: the kernel's own neighbour discovery frames would take turns in the round robin.
    let bed =
        Testbed::up(&TestbedConfig { queues: queues_on_bed, ipv6: false, ..Default::default() }).expect("test bed");
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let h = receive(bed.ns_b(), bed.iface_b(), sockets, stop.clone(), tx);
    rx.recv_timeout(Duration::from_secs(20)).expect("receiver ready");
    let g = gen_xsk(&bed, gen_args);
    if !g.status.success() {
        stop.store(true, Ordering::Relaxed);
        panic!("gen: {}", stderr(&g));
    }
    let out = h.join().expect("receiver thread").expect("network namespace");
    assert_eq!(out.sharing, want_sharing);
    assert_eq!(out.double, 0, "a frame was handed to user space while user space held it");
    // Each socket is directed exactly its 100,000 (the round robin takes its turn before the
    // socket's rings are looked at): received once each, or named as dropped by the kernel.
    // Whether a receiver sharing the CPUs with other work drops is the machine's business (was:
    // nothing dropped at 200 kpps); at least half arriving only keeps the test from passing
    // vacuously, and a receiver sharing each core with a CPU hog drops nothing here.
    let mut all = SeqTracker::default();
    for (i, t) in out.per_socket.iter().enumerate() {
        let d = out.drops[i];
        assert_eq!((t.frames, t.duplicates, t.corrupt), (t.unique(), 0, 0), "socket {i}: each frame once, intact");
        assert_eq!(t.unique() + d, PER_SOCKET, "socket {i}: received {} + dropped {d} = its share", t.unique());
        assert!(t.unique() >= PER_SOCKET / 2, "socket {i}: received only {} (dropped {d})", t.unique());
        all.merge(t);
    }
    let dropped: u64 = out.drops.iter().sum();
    assert_eq!(
        (all.unique() + dropped, all.duplicates),
        (2 * PER_SOCKET, 0),
        "200,000 distinct frames over both sockets"
    );
}

#[test]
fn shared_umem_same_queue_two_sockets_share_fill_and_completion() {
    if !privileged("shared_umem_same_queue_two_sockets_share_fill_and_completion") {
        return;
    }
    let _g = serial();
    // One sending CPU: the veth's NAPI runs there, so the per-CPU round robin alternates exactly.
    shared_umem(
        1,
        vec![0, 0],
        &["--count", "200000", "--rate", "200000", "--cpu", "0", "--duration", "60"],
        &[Sharing::Owner, Sharing::SameQueue],
    );
}

#[test]
fn shared_umem_two_queues_each_with_own_fill_and_completion() {
    if !privileged("shared_umem_two_queues_each_with_own_fill_and_completion") {
        return;
    }
    let _g = serial();
    // gen --queues 2: stream 0 on queue 0, stream 1 on queue 1, 100,000 each.
    shared_umem(
        2,
        vec![0, 1],
        &["--queues", "2", "--count", "200000", "--rate", "200000", "--duration", "60"],
        &[Sharing::Owner, Sharing::OtherQueue],
    );
}

/// `bench rxdrop --queues 2` (per-queue UMEMs and `--shared-umem`) on a 2-queue test bed while
/// `gen --queues 2` sends 100,000 frames on each queue: each queue's socket receives its
/// 100,000 exactly once, the per-queue lines and XDP_STATISTICS add up to the totals, and
/// sent = received + named drops, exactly, in total and per queue. No IPv6 on the test bed: the
/// kernels send nothing of their own, so every frame received or dropped is ours.
#[test]
fn bench_two_queues_receive_each_queue_exactly_once() {
    if !privileged("bench_two_queues_receive_each_queue_exactly_once") {
        return;
    }
    let _g = serial();
    let bed = Testbed::up(&TestbedConfig { queues: 2, ipv6: false, ..Default::default() }).expect("test bed");
    for shared in [false, true] {
        let mut args = vec![
            "bench",
            "rxdrop",
            "--netns",
            bed.ns_b(),
            "-i",
            bed.iface_b(),
            "--queues",
            "2",
            "--verify",
            "--json",
            "--duration",
            "60",
        ];
        if shared {
            args.push("--shared-umem");
        }
        let r = Running::start(&args);
        let base = rx_packets(bed.ns_b(), bed.iface_b());
        let g =
            gen_xsk(&bed, &["--queues", "2", "--count", "200000", "--rate", "200000", "--duration", "60", "--json"]);
        assert!(g.status.success(), "gen: {}", stderr(&g));
        let sent = last_json(&g)["totals"]["tx_packets"].as_u64().unwrap();
        assert_eq!(sent, 200_000);
        wait_rx_packets(bed.ns_b(), bed.iface_b(), base, sent);
        let (s, status) = r.terminate();
        assert!(status.success(), "bench --queues 2 (shared {shared}) failed: {s}");
        assert_eq!(s["path"]["shared_umem"], shared);
        assert_eq!(s["path"]["sockets"].as_array().map(|v| v.len()), Some(2));
        let pq = s["per_queue"].as_array().expect("per_queue in the summary");
        assert_eq!(pq.len(), 2);
        let received = s["totals"]["rx_packets"].as_u64().unwrap();
        let mut sum_rx = 0;
        let mut sum_xsk = 0;
        for q in pq {
            sum_rx += q["totals"]["rx_packets"].as_u64().unwrap();
            sum_xsk += xsk_drops(&q["xdp_statistics"]);
        }
        let drops = xsk_drops(&s["xdp_statistics"]);
        assert_eq!(sum_rx, received, "per-queue rx_packets add up to the total");
        assert_eq!(sum_xsk, drops, "per-queue XDP_STATISTICS add up to the total");
        let v = &s["verify"];
        let unique = v["unique"].as_u64().unwrap();
        assert_eq!((v["duplicates"].as_u64(), v["corrupt"].as_u64()), (Some(0), Some(0)));
        assert_eq!(v["foreign"].as_u64(), Some(0), "only our frames on the wire: {v}");
        assert_eq!(unique, received, "every frame received once");
        assert_eq!(unique + drops, sent, "sent {sent} = received {unique} + named drops {drops} (shared {shared})");
        // gen --queues 2 sends half of the frames on each queue: each queue's socket receives
        // or names as dropped exactly its 100,000.
        for q in pq {
            let got = q["totals"]["rx_packets"].as_u64().unwrap() + xsk_drops(&q["xdp_statistics"]);
            assert_eq!(got, 100_000, "each queue gets its stream, received or named as dropped: {q}");
        }
    }
}

/// The XDP_STATISTICS counters of frames a socket lost on receive.
fn xsk_drops(x: &serde_json::Value) -> u64 {
    ["rx_ring_full", "rx_dropped", "rx_invalid_descs"]
        .iter()
        .map(|k| x[k].as_u64().unwrap_or_else(|| panic!("no {k} in {x}")))
        .sum()
}

#[test]
fn queue_and_cpu_options_are_checked_before_anything_is_attached() {
    for (args, want) in [
        (vec!["--queues", "0"], "--queues 0 is not accepted"),
        (vec!["--queues", "2", "--cpus", "0"], "--cpus 0 is not accepted: give one CPU per queue (2)"),
        (vec!["--queues", "2", "--cpus", "0,999"], "--cpus 0,999 is not accepted"),
        (vec!["--queues", "2", "--queue", "1"], "--queues N uses queues 0..N-1"),
        (vec!["--queues", "2", "--shared-umem", "--frame-count", "64"], "at least 64 frames per queue"),
    ] {
        let mut a = vec!["bench", "rxdrop", "-i", "lo", "--duration", "1"];
        a.extend(args.iter());
        assert_one_line_refusal(&format!("{a:?}"), &run(&a), 2, &[want]);
    }
}

/// `--shared-umem` over two queues where the kernel (here: the feature table, told to refuse it
/// with FASTPATH_DENY_FEATURES) has no shared UMEM across queues: one line naming the feature
/// and its minimum kernel, exit 6, and no XDP program left on the interface.
#[test]
fn shared_umem_refused_names_the_feature_and_leaves_nothing() {
    if !privileged("shared_umem_refused_names_the_feature_and_leaves_nothing") {
        return;
    }
    let _g = serial();
    let bed = Testbed::up(&TestbedConfig { queues: 2, ..Default::default() }).expect("test bed");
    let o = fastpath()
        .env("FASTPATH_DENY_FEATURES", "shared_umem_other_queue")
        .args(["bench", "rxdrop", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--queues", "2", "--shared-umem"])
        .args(["--duration", "1"])
        .output()
        .unwrap();
    assert_one_line_refusal("--shared-umem refused", &o, 6, &["shared UMEM", "5.10"]);
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none(), "no XDP program left after the refusal");
    // Busy polling on a kernel without it: the same, named.
    let o = fastpath()
        .env("FASTPATH_DENY_FEATURES", "busy_poll")
        .args(["bench", "rxdrop", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--busy-poll", "--duration", "1"])
        .output()
        .unwrap();
    assert_one_line_refusal("--busy-poll refused", &o, 6, &["busy poll", "5.11"]);
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none(), "no XDP program left after the refusal");
    // Without --shared-umem the same run works: one UMEM per queue needs no sharing.
    let o = fastpath()
        .env("FASTPATH_DENY_FEATURES", "shared_umem_other_queue")
        .args(["bench", "rxdrop", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--queues", "2", "--duration", "0.5"])
        .arg("--json")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `bench rxdrop --queues 2`'s wait (issue 22): two workers (CPU 0 and 1 by default) on a 2-CPU
/// machine would leave no CPU for the receive softirq if they spun, so by default they wait in
/// poll() there, say so in one line on stderr, and the JSON's `path.wait` records the wait
/// used; `--spin` keeps spinning (with the note), `--poll` polls quietly, one queue still spins,
/// and `--spin --poll` is refused.
#[test]
fn two_queue_default_waits_in_poll_where_workers_cover_every_cpu() {
    if !privileged("two_queue_default_waits_in_poll_where_workers_cover_every_cpu") {
        return;
    }
    let _g = serial();
    let bed = Testbed::up(&TestbedConfig { queues: 2, ..Default::default() }).expect("test bed");
    let o = fastpath()
        .args(["bench", "rxdrop", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--queues", "2", "--duration", "0.5"])
        .arg("--json")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let every = fastpath::workers::online_cpus() <= 2;
    let v = last_json(&o);
    assert_eq!(v["path"]["wait"], if every { "poll" } else { "spin" }, "{v}");
    let says = stderr(&o).lines().filter(|l| l.contains("workers on every CPU (0,1)") && l.contains("--spin")).count();
    assert_eq!(says, usize::from(every), "{}", stderr(&o));
    assert!(!v.to_string().contains("spinning workers"), "{v}");
    // --spin keeps spinning, with the note; --poll polls, quietly.
    let o = fastpath()
        .args(["bench", "rxdrop", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--queues", "2", "--spin"])
        .args(["--duration", "0", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v = last_json(&o);
    assert_eq!(v["path"]["wait"], "spin", "{v}");
    assert_eq!(v.to_string().contains("2 spinning workers on every CPU (0,1)"), every, "{v}");
    assert!(!stderr(&o).contains("poll()"), "{}", stderr(&o));
    let o = fastpath()
        .args(["bench", "rxdrop", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--queues", "2", "--poll"])
        .args(["--duration", "0.5"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && !out.contains("spinning workers"), "{out} {}", stderr(&o));
    assert!(!stderr(&o).contains("poll()"), "{}", stderr(&o));
    // One queue keeps its default: one worker, spinning.
    let o = fastpath()
        .args(["bench", "rxdrop", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--duration", "0", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(last_json(&o)["path"]["wait"], "spin");
    // --spin and --poll together are refused.
    let o = run(&["bench", "rxdrop", "-i", bed.iface_b(), "--spin", "--poll"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// `compare --queues 2` adds the two-queue rows (AF_XDP over a shared UMEM and XDP_DROP, on a
/// 2-queue test bed with a generator thread per queue) next to the single-queue ones, each
/// against the XDP_DROP of its own test bed.
#[test]
fn compare_adds_two_queue_rows() {
    if !privileged("compare_adds_two_queue_rows") {
        return;
    }
    let _g = serial();
    let o = run(&["compare", "--runs", "1", "--duration", "1", "--queues", "2", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = last_json(&o);
    let rows = v["rows"].as_array().expect("rows");
    let find = |p: &str| rows.iter().find(|r| r["path"] == p).unwrap_or_else(|| panic!("no row {p}: {v}"));
    for p in ["AF_XDP native copy, 2 queues", "in-kernel XDP_DROP, 2 queues"] {
        let r = find(p);
        assert_eq!(r["queues"], 2, "{r}");
        let (sent, received) = (r["sent"][0].as_u64().unwrap(), r["received"][0].as_u64().unwrap());
        // Not a speed: how much a 2-CPU machine receives varies; every frame is accounted for.
        assert!(received > 0, "{p}: received nothing of {sent}: {r}");
        assert_eq!(r["unaccounted"][0].as_i64(), Some(0), "{p}: sent = received + refused + drops: {r}");
    }
    assert_eq!(find("in-kernel XDP_DROP, 2 queues")["pct_of_xdp_drop"], 100.0);
    assert_eq!(find("in-kernel XDP_DROP")["queues"], 1);
    let o = run(&["compare", "--queues", "1", "--duration", "0"]);
    assert_one_line_refusal("compare --queues 1", &o, 2, &["--queues 1 is not accepted", "2..="]);
}

/// Frames that came in at an offset (received, then not forwarded) are free frames from their
/// start again: a full-size transmit on them works instead of panicking halfway through a batch.
#[test]
fn received_frames_reused_for_tx_have_their_whole_room() {
    if !privileged("received_frames_reused_for_tx_have_their_whole_room") {
        return;
    }
    let _g = serial();
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    let (ns, iface) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    let (tx, rx) = mpsc::channel();
    let h = fastpath_testbed::spawn_in_netns(&ns, move || {
        use fastpath::io::afxdp::AfXdpPort;
        use fastpath::io::Port;
        let mut cfg = fastpath::xsk::XskConfig::default();
        (cfg.umem.frame_count, cfg.umem.fill_size, cfg.umem.comp_size) = (256, 128, 128);
        (cfg.socket.copy_mode, cfg.socket.ring_size) = (CopyMode::Copy, 128);
        let mut p = AfXdpPort::open(
            &fastpath::netdev::Iface::resolve(&iface).unwrap(),
            0,
            &cfg,
            fastpath::bpf::AttachOpts::mode(Some(XdpMode::Native)),
        )
        .expect("port");
        tx.send(()).unwrap();
        // Receive (at the kernel's offset) and keep every frame: none forwarded.
        let dropped = |p: &mut AfXdpPort| -> usize {
            let s = p.stats().expect("stats");
            s.drops.iter().filter(|(k, _)| k == "rx_dropped" || k == "rx_ring_full").map(|(_, v)| *v as usize).sum()
        };
        let (mut got, t0) = (0, Instant::now());
        while got + dropped(&mut p) < 1000 && t0.elapsed() < Duration::from_secs(20) {
            got += p.fwd_burst(64, 10, |_| false).expect("fwd_burst").0;
        }
        let named = dropped(&mut p);
        // Every free frame, offset or not, takes a frame-size packet.
        let big = vec![0x5au8; 4096];
        let mut sent = 0;
        while sent < 300 {
            sent += p.tx_burst(&[&big[..]]).expect("tx_burst");
            let _ = p.tx_reap();
        }
        (got, named)
    });
    rx.recv_timeout(Duration::from_secs(20)).expect("port ready");
    let g = gen_xsk(&bed, &["--count", "1000", "--rate", "20000", "--duration", "30"]);
    assert!(g.status.success(), "gen: {}", stderr(&g));
    let (got, named) = h.join().unwrap().unwrap();
    // On a loaded machine the small rings may overflow: every frame is received or named.
    assert_eq!(got + named, 1000, "received {got} + named drops {named}");
    assert!(got >= 300, "enough received frames ({got}) to reuse for the 300 transmits");
}
