//! End to end on a test bed: real packets through real kernels (root).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::*;
use fastpath_testbed::{Testbed, TestbedConfig};
use serde_json::Value;

/// A test bed without IPv6, so the kernels send nothing of their own across the veth (no MLD
/// reports after link-up): every frame on the wire is ours.
fn bed() -> Testbed {
    Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed")
}

/// One traffic test of this file at a time. They pin receivers to CPU 1 and two of them flood
/// both CPUs at full rate; run side by side (cargo runs a file's tests in parallel) a flood
/// starves the paced tests' receivers, which then lose frames their exact checks do not allow
/// (`l2fwd_round_trip` got 1,376 of 20,000 back once).
/// 100,000 sequence-numbered frames at a paced rate (AF_XDP TX, 64 frames per burst) arrive
/// exactly once each, bytes intact (IPv4 and UDP checksums, payload magic), and the program is
/// gone after SIGTERM.
fn exactly_once(xdp_mode: &str) {
    let bed = bed();
    let rx = Running::start(&[
        "bench",
        "rxdrop",
        "--netns",
        bed.ns_b(),
        "-i",
        bed.iface_b(),
        "--xdp-mode",
        xdp_mode,
        "--copy-mode",
        "copy",
        "--verify",
        "--json",
        "--duration",
        "120",
        "--interval",
        "100",
        "--poll",
        // 80 ms of buffering at the paced rate: the receiver shares 2 CPUs with a parallel test.
        "--ring-size",
        "8192",
        "--frame-count",
        "16384",
        "--frame-size",
        "2048",
    ]);
    assert_eq!(rx.ready["path"]["xdp_mode"], xdp_mode, "mode read back after attach");
    assert_eq!(rx.ready["path"]["copy_mode"], "copy");
    assert_json_keys(&format!("bench_rxdrop_ready_{xdp_mode}"), &rx.ready);
    let rx0 = rx_packets(bed.ns_b(), bed.iface_b());
    let g = gen_xsk(&bed, &["--count", "100000", "--rate", "100000", "--json", "--duration", "60", "--cpu", "0"]);
    assert!(g.status.success(), "gen failed: {}", stderr(&g));
    let gs = last_json(&g);
    assert_json_keys("gen", &gs);
    assert_eq!(n(&gs["totals"]["tx_packets"]), 100_000);
    assert_eq!(n(&gs["totals"]["tx_completed"]), 100_000, "every TX frame completed");
    assert_eq!(n(&gs["delivered"]), 100_000, "the receiving veth accepted every frame (refused: {})", gs["refused"]);
    wait_rx_packets(bed.ns_b(), bed.iface_b(), rx0, 100_000);
    let (s, status) = rx.terminate();
    assert_json_keys(&format!("bench_rxdrop_{xdp_mode}"), &s);
    assert!(status.success(), "rxdrop exit {status:?}");
    let v = &s["verify"];
    eprintln!("receiver summary: {s}\nsender summary: {gs}");
    assert_eq!(n(&v["corrupt"]), 0, "damaged frames: {v}");
    assert_eq!(n(&v["duplicates"]), 0, "duplicates: {v}");
    let st = v["streams"].as_array().expect("streams");
    assert_eq!(st.len(), 1, "{v}");
    assert_eq!(n(&v["foreign"]), 0, "only our frames on the wire: {v}");
    assert_eq!(n(&st[0]["unique"]), 100_000, "{v}");
    assert_eq!(n(&st[0]["max_seq"]), 100_000, "{v}");
    assert_eq!(n(&st[0]["missing"]), 0, "{v}");
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none(), "XDP program left attached after SIGTERM");
}

#[test]
fn exactly_once_skb_mode() {
    if privileged("exactly_once_skb_mode") {
        let _serial = serial();
        exactly_once("skb");
    }
}

#[test]
fn exactly_once_native_copy_mode() {
    if privileged("exactly_once_native_copy_mode") {
        let _serial = serial();
        exactly_once("native");
    }
}

/// At full rate, with the receiver on the generator's CPU so it must drop: every frame sent is
/// received or counted by a named kernel counter, exactly. Nothing is unaccounted for.
fn full_rate_accounting(xdp_mode: &str) {
    let bed = bed();
    let rx = Running::start(&[
        "bench",
        "rxdrop",
        "--netns",
        bed.ns_b(),
        "-i",
        bed.iface_b(),
        "--xdp-mode",
        xdp_mode,
        "--copy-mode",
        "copy",
        "--verify",
        "--json",
        "--duration",
        "120",
        "--interval",
        "100",
        "--cpu",
        "0",
    ]);
    let g = run(&[
        "gen",
        "--netns",
        bed.ns_a(),
        "-i",
        bed.iface_a(),
        "--dst-mac",
        &mac(bed.mac_b()),
        "--count",
        "2000000",
        "--json",
        "--duration",
        "60",
        "--cpu",
        "0",
        "-e",
    ]);
    assert!(g.status.success(), "gen failed: {}", stderr(&g));
    let gs = last_json(&g);
    wait_rx_settled(bed.ns_b(), bed.iface_b());
    let (s, status) = rx.terminate();
    assert!(status.success());
    let sent = n(&gs["streams"][0]["frames"]);
    assert_eq!(sent, 2_000_000);
    let v = &s["verify"];
    assert_eq!(n(&v["corrupt"]), 0);
    assert_eq!(n(&v["duplicates"]), 0);
    let received = n(&v["unique"]);
    let x = &s["xdp_statistics"];
    let xsk_drops = n(&x["rx_dropped"]) + n(&x["rx_ring_full"]) + n(&x["rx_invalid_descs"]);
    let sum_matching = |obj: &Value, pat: &[&str]| -> u64 {
        obj.as_object()
            .map(|o| o.iter().filter(|(k, _)| pat.iter().any(|p| k.contains(p))).map(|(_, v)| n(v)).sum())
            .unwrap_or_else(|| panic!("expected a JSON object of counters, got {obj} (missing key?)"))
    };
    let xmit_err = sum_matching(&gs["ethtool"], &["xmit_err"]);
    assert_eq!(n(&v["foreign"]), 0, "only our frames on the wire: {v}");
    let named = xsk_drops + xmit_err;
    eprintln!("{xdp_mode}: sent {sent} received {received} xsk drops {xsk_drops} ({x}) sender xmit_err {xmit_err}");
    assert_eq!(
        sent,
        received + named,
        "sent {sent} != received {received} + drops {named} (xsk {x}, sender {}, receiver {})",
        gs["ethtool"],
        s["ethtool"]
    );
    // The premise, so that the drop counters above are exercised: an unpaced generator on the
    // receiver's CPU overruns it (69 % to 84 % of the frames dropped here, idle or with a CPU
    // hog on each core; the two share CPU 0 however loaded the machine is). Was
    // `xsk_drops > 0 || received == sent`, which could fail only with sender xmit errors.
    assert!(xsk_drops > 0, "the receiver was meant to be overrun: {x}");
}

#[test]
fn full_rate_accounting_native() {
    if privileged("full_rate_accounting_native") {
        let _serial = serial();
        full_rate_accounting("native");
    }
}

#[test]
fn full_rate_accounting_skb() {
    if privileged("full_rate_accounting_skb") {
        let _serial = serial();
        full_rate_accounting("skb");
    }
}

/// l2fwd sends every frame back with source and destination MACs swapped and payload intact.
#[test]
fn l2fwd_round_trip() {
    if !privileged("l2fwd_round_trip") {
        return;
    }
    let _serial = serial();
    let bed = bed();
    let (ns_a, if_a, mac_a, mac_b) = (bed.ns_a().to_string(), bed.iface_a().to_string(), bed.mac_a(), bed.mac_b());
    let fwd = Running::start(&[
        "bench",
        "l2fwd",
        "--netns",
        bed.ns_b(),
        "-i",
        bed.iface_b(),
        "--json",
        "--duration",
        "120",
        "--cpu",
        "1",
    ]);
    // Receiver of the returning frames: an AF_XDP socket on the sender's own interface.
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let s2 = stop.clone();
    let if_a2 = if_a.clone();
    let back = fastpath_testbed::spawn_in_netns(&ns_a, move || {
        use fastpath::io::afxdp::AfXdpPort;
        use fastpath::xsk::{CopyMode, XskConfig};
        let mut cfg = XskConfig::default();
        cfg.socket.copy_mode = CopyMode::Copy;
        let mut sock = AfXdpPort::open(
            &fastpath::netdev::Iface::resolve(&if_a2).unwrap(),
            0,
            &cfg,
            fastpath::bpf::AttachOpts::mode(Some(fastpath::bpf::XdpMode::Native)),
        )
        .unwrap();
        ready_tx.send(()).unwrap();
        let mut frames: Vec<Vec<u8>> = Vec::new();
        let c = fastpath_tools::stats::Counters::default();
        let opts = fastpath_tools::bench::LoopOpts { batch_size: 64, wait: fastpath_tools::bench::Wait::Poll(50) };
        fastpath_tools::bench::rxdrop(&mut sock, opts, &c, &s2, |p| {
            if fastpath::packet::payload(p).is_some() {
                frames.push(p.to_vec())
            }
        })
        .unwrap();
        frames
    });
    ready_rx.recv_timeout(Duration::from_secs(20)).expect("receiver ready");
    let back0 = rx_packets(&ns_a, &if_a);
    let g = run(&[
        "gen",
        "--netns",
        &ns_a,
        "-i",
        &if_a,
        "--dst-mac",
        &mac(mac_b),
        "--count",
        "20000",
        "--rate",
        "50000",
        "--json",
        "--duration",
        "60",
    ]);
    assert!(g.status.success(), "gen: {}", stderr(&g));
    // Every frame l2fwd sent back has reached the sender's veth (and its socket) before we stop.
    wait_rx_packets(&ns_a, &if_a, back0, 20_000);
    stop.store(true, Ordering::Relaxed);
    let frames = back.join().unwrap().unwrap();
    let (s, status) = fwd.terminate();
    assert_json_keys("bench_l2fwd", &s);
    assert!(status.success());
    assert_eq!(n(&s["totals"]["tx_packets"]), n(&s["totals"]["rx_packets"]), "l2fwd sends what it receives: {s}");
    let mut t = fastpath_tools::payload::SeqTracker::default();
    for f in &frames {
        assert_eq!(&f[0..6], &mac_a, "destination MAC is the original source");
        assert_eq!(&f[6..12], &mac_b, "source MAC is the original destination");
        t.record(f);
    }
    assert_eq!((t.corrupt, t.duplicates), (0, 0));
    assert_eq!(t.unique(), 20_000, "every frame came back once");
}

/// `gen --engine xsk --count N` sends, completes and reports exactly N frames, every time, and
/// the receiver gets every frame the sender's veth says it delivered. Small UMEMs and no pacing
/// make the worker send its frames within microseconds of starting: before the fix the monitor
/// took its baseline after the first frames had gone and reported 0 or 436 of 500 (between 1 in
/// 3 and 1 in 14 runs here, so 30 runs). The paced runs are the path of `exactly_once_*` (which
/// failed ~1 in 8 in CI).
#[test]
fn gen_count_is_exact_every_time() {
    if !privileged("gen_count_is_exact_every_time") {
        return;
    }
    let _serial = serial();
    let bed = bed();
    let rx = Running::start(&[
        "bench",
        "xdpdrop",
        "--netns",
        bed.ns_b(),
        "-i",
        bed.iface_b(),
        "--json",
        "--duration",
        "120",
        "--interval",
        "100",
    ]);
    let rx0 = rx_packets(bed.ns_b(), bed.iface_b());
    let mut delivered_total = 0;
    let runs: Vec<(&str, Option<&str>)> =
        (0..30).map(|_| ("500", None)).chain((0..2).map(|_| ("20000", Some("100000")))).collect();
    let mut summaries = Vec::new();
    for (count, rate) in &runs {
        let mut args = vec![
            "--count",
            count,
            "--frame-count",
            "64",
            "--ring-size",
            "64",
            "--json",
            "--duration",
            "30",
            "--cpu",
            "0",
        ];
        if let Some(r) = rate {
            args.extend(["--rate", r]);
        }
        let g = gen_xsk(&bed, &args);
        assert!(g.status.success(), "gen failed: {}", stderr(&g));
        summaries.push(last_json(&g));
    }
    // The counts of every run first (the race), then the delivery accounting.
    let counts: Vec<(u64, u64)> =
        summaries.iter().map(|s| (n(&s["totals"]["tx_packets"]), n(&s["totals"]["tx_completed"]))).collect();
    let want: Vec<(u64, u64)> = runs.iter().map(|(c, _)| (c.parse().unwrap(), c.parse().unwrap())).collect();
    assert_eq!(counts, want, "(tx_packets, tx_completed) of each run");
    for (i, s) in summaries.iter().enumerate() {
        let (delivered, refused) = (n(&s["delivered"]), n(&s["refused"]));
        assert_eq!(delivered + refused, want[i].0, "run {i}: delivered + refused = sent: {s}");
        delivered_total += delivered;
    }
    wait_rx_packets(bed.ns_b(), bed.iface_b(), rx0, delivered_total);
    let (s, status) = rx.terminate();
    assert!(status.success(), "xdpdrop exit {status:?}");
    assert_eq!(n(&s["totals"]["drop_packets"]), delivered_total, "the receiver dropped every delivered frame: {s}");
}
