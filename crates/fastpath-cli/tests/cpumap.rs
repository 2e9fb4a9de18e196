//! CPUMAP end to end on a 2-queue test bed (root): `bench redirect-cpu` delivers every frame to
//! the CPU it names, a full CPUMAP queue's refusals are exactly what the `xdp_cpumap_enqueue`
//! tracepoint counts, the classifier's `cpu` action moves real traffic to its CPU, and bad
//! values attach nothing.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fastpath_testbed::{Testbed, TestbedConfig};
use serde_json::Value;

/// Two queues per veth end (native XDP on veth needs rx queues >= the peer's tx queues, and the
/// xdp-live generator uses one per thread); no IPv6, so every frame on the wire is ours.
fn bed() -> Testbed {
    Testbed::up(&TestbedConfig { queues: 2, ipv6: false, ..Default::default() }).expect("test bed")
}

/// One test of this file at a time: one of them floods both CPUs.
/// This machine has a CPU 1 (the tests send to it); CI=true fails without one.
fn two_cpus(test: &str) -> bool {
    if fastpath::workers::online_cpus() >= 2 {
        return true;
    }
    assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "{test}: needs 2 CPUs and CI=true forbids skipping");
    eprintln!("SKIPPED {test}: needs 2 CPUs");
    false
}

fn redirect_cpu(bed: &Testbed, extra: &[&str]) -> Running {
    let mut args = vec![
        "bench",
        "redirect-cpu",
        "--netns",
        bed.ns_b(),
        "-i",
        bed.iface_b(),
        "--xdp-mode",
        "native",
        "--json",
        "--duration",
        "120",
        "--interval",
        "100",
    ];
    args.extend_from_slice(extra);
    let r = Running::start(&args);
    assert_eq!(r.ready["path"]["xdp_mode"], "native", "{}", r.ready);
    r
}

/// `fastpath gen` (xdp-live) from ns a to the receiving veth, to completion; its summary.
fn gen(bed: &Testbed, extra: &[&str]) -> Value {
    let dst = mac(bed.mac_b());
    let mut args = vec!["gen", "--netns", bed.ns_a(), "-i", bed.iface_a(), "--dst-mac", dst.as_str(), "--json"];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(o.status.success(), "gen failed: {}", stderr(&o));
    last_json(&o)
}

/// Where frames arrive is where the distribution says, every frame exactly once, counted by
/// the CPUMAP program on the CPU it ran on (one UDP flow, paced, from a generator on CPU 0, so
/// the veth's NAPI runs on CPU 0 only):
/// - `--cpus 1`: all on CPU 1, nothing on CPU 0 (with `--remote-action pass` too: the kthread
///   reports the verdicts as xdp_pass);
/// - `--cpus 0,1 --cpu-dist proto`: UDP goes to the list's second CPU, 1;
/// - `--cpus 0,1 --cpu-dist hash`: one flow, one CPU (either);
/// - `--cpus 0,1` (round robin from one receiving CPU): exactly half on each.
#[test]
fn frames_arrive_on_the_cpus_the_distribution_picks() {
    let t = "frames_arrive_on_the_cpus_the_distribution_picks";
    if !privileged(t) || !two_cpus(t) {
        return;
    }
    let _serial = serial();
    const N: u64 = 30_000;
    // (arguments, frames expected on CPU 0 and CPU 1 (None: all on one of them), verdict).
    type Case = (&'static [&'static str], Option<(u64, u64)>, &'static str);
    let cases: [Case; 5] = [
        (&["--cpus", "1"], Some((0, N)), "xdp_drop"),
        (&["--cpus", "1", "--remote-action", "pass"], Some((0, N)), "xdp_pass"),
        (&["--cpus", "0,1", "--cpu-dist", "proto"], Some((0, N)), "xdp_drop"),
        (&["--cpus", "0,1", "--cpu-dist", "hash"], None, "xdp_drop"),
        (&["--cpus", "0,1", "--cpu-dist", "round-robin"], Some((N / 2, N / 2)), "xdp_drop"),
    ];
    for (case, want, verdict) in cases {
        let bed = bed();
        // A queue that holds the whole paced burst: nothing may be refused here.
        let mut args = case.to_vec();
        args.extend_from_slice(&["--qsize", "16384", "-e"]);
        let rx = redirect_cpu(&bed, &args);
        let rx0 = rx_packets(bed.ns_b(), bed.iface_b());
        let g = gen(&bed, &["--count", "30000", "--rate", "20000", "--duration", "60", "--cpu", "0"]);
        assert_eq!(n(&g["totals"]["tx_packets"]), N, "{g}");
        assert_eq!(n(&g["delivered"]), N, "the receiving veth took every frame: {g}");
        wait_rx_packets(bed.ns_b(), bed.iface_b(), rx0, N);
        let (s, status) = rx.terminate();
        assert!(status.success(), "redirect-cpu {case:?} exit {status:?}: {s}");
        eprintln!("{case:?}: {s}");
        assert_eq!(n(&s["redirected"]), N, "{case:?}: {s}");
        assert_eq!(n(&s["delivered"]), N, "{case:?}: {s}");
        let got = (n(&s["delivered_per_cpu"]["0"]), n(&s["delivered_per_cpu"]["1"]));
        match want {
            Some(w) => assert_eq!(got, w, "{case:?}: frames on CPU 0 and CPU 1: {s}"),
            None => assert!(got == (N, 0) || got == (0, N), "{case:?}: one flow on one CPU: {s}"),
        }
        let tp = &s["tracepoints"];
        let mut kthread = 0;
        for (cpu, frames) in [("0", got.0), ("1", got.1)] {
            if frames == 0 {
                assert!(tp["cpumap_enqueue"].get(cpu).is_none(), "{case:?}: nothing enqueued to CPU {cpu}: {tp}");
                continue;
            }
            assert_eq!(n(&tp["cpumap_enqueue"][cpu]["processed"]), frames, "{case:?}: {tp}");
            assert_eq!(n(&tp["cpumap_enqueue"][cpu]["drops"]), 0, "{case:?}: {tp}");
            assert_eq!(n(&tp["cpumap_kthread"][cpu][verdict]), frames, "{case:?}: {tp}");
            kthread += n(&tp["cpumap_kthread"][cpu]["processed"]);
        }
        assert_eq!(kthread, N, "{case:?}: {tp}");
        assert_eq!(s["unaccounted"].as_i64(), Some(0), "{case:?}: {s}");
        assert!(attached(bed.ns_b(), bed.iface_b()).is_none(), "XDP program left attached after SIGTERM");
    }
}

/// `--qsize 8` under a full-rate flood (xdp-live, two threads): the CPUMAP refuses frames and
/// the `xdp_cpumap_enqueue` tracepoint counts exactly those: sent = delivered by the CPUMAP
/// program + cpumap enqueue drops + redirect errors + refused by the veth.
#[test]
fn full_cpumap_queue_drops_are_counted_by_the_tracepoint() {
    let t = "full_cpumap_queue_drops_are_counted_by_the_tracepoint";
    if !privileged(t) || !two_cpus(t) {
        return;
    }
    let _serial = serial();
    let bed = bed();
    let rx = redirect_cpu(&bed, &["--cpus", "1", "--qsize", "8", "-e"]);
    let g = gen(&bed, &["--threads", "2", "--duration", "2"]);
    wait_rx_settled(bed.ns_b(), bed.iface_b());
    let (s, status) = rx.terminate();
    assert!(status.success(), "redirect-cpu exit {status:?}: {s}");
    eprintln!("gen: {g}\nredirect-cpu: {s}");
    let sent = n(&g["totals"]["tx_packets"]);
    let refused = n(&g["refused"]);
    let (redirected, delivered) = (n(&s["redirected"]), n(&s["delivered"]));
    let tp = &s["tracepoints"];
    let enqueue_drops = n(&tp["cpumap_enqueue"]["1"]["drops"]);
    let redirect_errors: u64 =
        tp["redirect_errors"].as_object().unwrap_or_else(|| panic!("no redirect_errors: {tp}")).values().map(n).sum();
    // How fast the flood is is not the claim (a loaded machine sends less); that it overran the
    // queue of 8 is the premise, and every frame is accounted for exactly below.
    assert!(sent > 0, "the flood sent nothing: {g}");
    assert!(enqueue_drops > 0, "a queue of 8 frames under a flood refused nothing: {s}");
    assert_eq!(n(&s["delivered_per_cpu"]["1"]), delivered, "{s}");
    assert_eq!(n(&tp["cpumap_enqueue"]["1"]["processed"]), redirected - redirect_errors, "{tp}");
    assert_eq!(redirected, delivered + enqueue_drops + redirect_errors, "redirected = delivered + named drops: {s}");
    assert_eq!(sent, delivered + enqueue_drops + redirect_errors + refused, "sent = delivered + named drops: {s}\n{g}");
    assert_eq!(s["unaccounted"].as_i64(), Some(0), "{s}");
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none(), "XDP program left attached after SIGTERM");
}

/// The classifier's `cpu` action with traffic: every frame of the rule reaches CPU 1, as the
/// classifier's own counter, the `xdp_cpumap_enqueue` and `xdp_cpumap_kthread` tracepoints
/// (`filter stats -e`, filtered to the classifier's CPUMAP) all say.
#[test]
fn classifier_cpu_action_moves_traffic_to_its_cpu() {
    let t = "classifier_cpu_action_moves_traffic_to_its_cpu";
    if !privileged(t) || !two_cpus(t) {
        return;
    }
    let _serial = serial();
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let o = run(&[
        "filter",
        "load",
        "--netns",
        ns,
        "-i",
        i,
        "--rule",
        "proto=udp,dst_port=9,action=cpu,cpus=1",
        "--detach",
    ]);
    assert!(o.status.success(), "filter load: {}", stderr(&o));
    let mut stats = fastpath()
        .args(["filter", "stats", "--netns", ns, "-i", i, "-e", "--json", "--duration", "120", "--interval", "0.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn filter stats");
    let mut out = BufReader::new(stats.stdout.take().expect("stdout"));
    let mut next = || -> Value {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap_or(0) > 0, "filter stats ended early");
        serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"))
    };
    // The first interval line comes after the baselines were taken.
    assert_eq!(next()["type"], "interval");
    let g = gen(&bed, &["--count", "20000", "--rate", "20000", "--duration", "60", "--cpu", "0"]);
    assert_eq!(n(&g["delivered"]), 20_000, "{g}");
    // Wait on the counters: the kthread on CPU 1 has processed every frame.
    let (t0, mut on_cpu1) = (Instant::now(), 0);
    while on_cpu1 < 20_000 {
        assert!(t0.elapsed() < Duration::from_secs(10), "CPU 1 processed {on_cpu1} of 20,000 in 10 s");
        let v = next();
        on_cpu1 += v["tracepoints"]["cpumap_kthread"]["1"]["processed"].as_u64().unwrap_or(0);
    }
    let _ = Command::new("kill").args(["-TERM", &stats.id().to_string()]).status();
    let mut last = Value::Null;
    let mut line = String::new();
    while out.read_line(&mut line).unwrap_or(0) > 0 {
        if let Ok(v) = serde_json::from_str::<Value>(&line) {
            last = v;
        }
        line.clear();
    }
    assert!(stats.wait().expect("wait").success());
    eprintln!("filter stats: {last}");
    assert_eq!(last["type"], "summary", "{last}");
    assert_eq!(n(&last["totals"]["cpu"]["packets"]), 20_000, "{last}");
    let tp = &last["tracepoints"];
    assert_eq!(n(&tp["cpumap_enqueue"]["1"]["processed"]), 20_000, "{tp}");
    assert_eq!(n(&tp["cpumap_enqueue"]["1"]["drops"]), 0, "{tp}");
    assert!(tp["cpumap_enqueue"].get("0").is_none(), "nothing enqueued to CPU 0: {tp}");
    assert_eq!(n(&tp["cpumap_kthread"]["1"]["processed"]), 20_000, "{tp}");
    assert!(tp["cpumap_kthread"].get("0").is_none(), "no CPUMAP work on CPU 0: {tp}");
    let o = run(&["filter", "unload", "--netns", ns, "-i", i]);
    assert!(o.status.success(), "filter unload: {}", stderr(&o));
    assert!(attached(ns, i).is_none(), "classifier left attached after unload");
}

/// Bad values: one line naming the value and what is accepted, exit 2, nothing attached.
#[test]
fn bad_values_attach_nothing() {
    if !privileged("bad_values_attach_nothing") {
        return;
    }
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    for (args, value, accepted) in [
        (&["--qsize", "0"][..], "'0'", "1..=16384"),
        (&["--cpus", "99"][..], "99", "0..="),
        (&["--cpus", "1,1"][..], "1,1", "0..="),
        (&["--cpu-dist", "random"][..], "random", "round-robin, hash, proto"),
        (&["--remote-action", "tx"][..], "tx", "drop, pass"),
    ] {
        let mut a = vec!["bench", "redirect-cpu", "--netns", ns, "-i", i, "--duration", "1", "-e"];
        a.extend_from_slice(args);
        let o = run(&a);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.contains(value) && err.contains(accepted), "{args:?}: names {value} and {accepted}: {err}");
        assert!(attached(ns, i).is_none(), "{args:?}: something attached");
    }
    // The smoke mode sets everything up and takes it down again.
    let o = run(&["bench", "redirect-cpu", "--netns", ns, "-i", i, "--duration", "0", "--cpus", "0,1", "--json", "-e"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(last_json(&o)["tracepoints"].is_object(), "{}", String::from_utf8_lossy(&o.stdout));
    assert_json_keys("bench_redirect_cpu_smoke", &last_json(&o));
    assert!(attached(ns, i).is_none(), "left attached after --duration 0");
}

/// The monitor's interface filter is the ifindex AND its namespace: two test beds whose sending
/// veths have the same ifindex, traffic out of both, and `-e` on one counts only its own
/// `xdp_devmap_xmit` frames.
#[test]
fn tracepoint_filter_tells_namespaces_apart() {
    if !privileged("tracepoint_filter_tells_namespaces_apart") {
        return;
    }
    let _serial = serial();
    let (x, y) = (bed(), bed());
    let ifindex = |ns: &str, i: &str| -> u32 {
        let i = i.to_string();
        fastpath_testbed::run_in_netns(ns, move || fastpath::netdev::NetDev::by_name(&i).expect("iface").ifindex)
            .expect("netns")
    };
    assert_eq!(ifindex(x.ns_a(), x.iface_a()), ifindex(y.ns_a(), y.iface_a()), "same ifindex in both beds");
    let sink = |b: &Testbed| {
        Running::start(&["bench", "xdpdrop", "--netns", b.ns_b(), "-i", b.iface_b(), "--json", "--duration", "60"])
    };
    let (sx, sy) = (sink(&x), sink(&y));
    let mon = Running::start(&[
        "bench",
        "xdpdrop",
        "--netns",
        x.ns_a(),
        "-i",
        x.iface_a(),
        "-e",
        "--json",
        "--duration",
        "60",
        "--interval",
        "100",
    ]);
    let gy = gen(&y, &["--count", "50000", "--rate", "100000", "--duration", "60"]);
    let gx = gen(&x, &["--count", "1000", "--rate", "10000", "--duration", "60"]);
    assert_eq!(n(&gy["delivered"]), 50_000, "{gy}");
    assert_eq!(n(&gx["delivered"]), 1_000, "{gx}");
    // xdp_devmap_xmit fires in the sender's own flush: the counts are final once gen returned.
    let (s, status) = mon.terminate();
    assert!(status.success(), "{s}");
    for r in [sx, sy] {
        let _ = r.terminate();
    }
    let d = &s["tracepoints"]["devmap_xmit"];
    assert_eq!(n(&d["sent"]), 1_000, "only this namespace's device: {d}");
    assert_eq!(n(&d["drops"]), 0, "{d}");
}
