//! `fastpath bench pingpong`: every mode answers every round trip asked (sockperf: every message
//! it sent, by its own report), with a median a veth round trip can have; the notes say what the
//! bed's devices have (threaded NAPI, GRO), not what a default bed would; the busy-poll NAPI
//! profile is on while the client runs and put back afterwards, also when the run is
//! interrupted (SIGINT) and when the far end fails after the near end applied its profile; bad
//! values are one-line refusals (exit 2). Privileged (root: namespaces, XDP, napi-set).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{assert_one_line_refusal, fastpath, last_json, n, privileged, run, serial, stderr, Running};
use fastpath::netdev::napi::{napi_set, napis, Napi, NapiError, NapiProfile, NapiSettings};
use fastpath::netdev::Iface;
use fastpath_lab::pingpong::napi_settings;
use fastpath_testbed::{Testbed, TestbedConfig};

fn bed() -> Testbed {
    Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed")
}

/// Both ends' NAPI settings, by NAPI id; never empty (the bed has GRO on: a veth NAPI exists).
fn settings(bed: &Testbed) -> Vec<(u32, NapiSettings)> {
    let mut v = napi_settings(bed.ns_a(), bed.iface_a()).expect("napi-get a");
    v.extend(napi_settings(bed.ns_b(), bed.iface_b()).expect("napi-get b"));
    assert!(!v.is_empty(), "the bed's veths have NAPI instances");
    v
}

#[test]
fn every_mode_answers_every_round_trip_and_the_napi_profile_is_restored() {
    if !privileged("every_mode_answers_every_round_trip_and_the_napi_profile_is_restored") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let before = settings(&bed);
    let count = 2000u64;
    let wall = Instant::now();
    let o = run(&[
        "bench",
        "pingpong",
        "--testbed",
        bed.name(),
        "--count",
        &count.to_string(),
        "--runs",
        "1",
        "--duration",
        "10",
        "--json",
    ]);
    let wall_ns = wall.elapsed().as_nanos() as f64;
    assert!(o.status.success(), "pingpong failed: {}", stderr(&o));
    let v = last_json(&o);
    assert_eq!(v["bench"], "pingpong");
    let rows = v["report"]["rows"].as_array().expect("rows");
    let modes: Vec<&str> = rows.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["xsk-softirq", "xsk-busy-poll", "xsk-irq-suspend", "udp", "sockperf-udp"]);
    let sockperf_secs = n(&v["report"]["sockperf_run"]["secs"]);
    assert_eq!(sockperf_secs, 1, "2,000 x 15 us rounded up to whole seconds: {}", v["report"]["sockperf_run"]);
    for r in rows {
        let m = r["mode"].as_str().unwrap();
        let (p50, p99, p999, max) = (n(&r["p50_ns"]), n(&r["p99_ns"]), n(&r["p999_ns"]), n(&r["max_ns"]));
        assert!(p50 <= p99 && p99 <= p999 && p999 <= max, "{m}: percentiles {p50} {p99} {p999} {max}");
        // The slowest mode's median (busy poll on veth waits for the 200 us watchdog each way) is
        // under 1 ms; 10 ms would be something else (a timer, a retransmission, a stall).
        assert!(p50 > 0 && p50 < 10_000_000, "{m}: p50 {p50} ns is not a veth round trip");
        assert_eq!(n(&r["lost"]), 0, "{m}: every round trip answered");
        let run = &r["runs"][0];
        // The round trips are back to back: together they fill most of the measured run (its
        // `secs`, timed apart from them; half of it in xsk-softirq, over 90% in the others), and fit
        // in this test's own clock of the whole command.
        // Wide factors (a loaded machine); a unit slip (us, ps) is a factor 1000.
        let (secs, sum_ns) =
            (run["secs"].as_f64().expect("secs"), (n(&run["mean_ns"]) * n(&run["round_trips"])) as f64);
        assert!(
            sum_ns >= secs * 1e9 / 50.0 && sum_ns <= wall_ns,
            "{m}: {} round trips of mean {} ns sum to {sum_ns} ns: not within a {secs} s run and a {wall_ns} ns command",
            run["round_trips"],
            run["mean_ns"]
        );
        if m == "sockperf-udp" {
            // sockperf's own counts: every message it sent in its valid duration answered, the
            // row's round trips its observations (not a rate times a guessed duration).
            let sp = &run["sockperf"];
            assert_eq!(n(&sp["sent"]), n(&sp["received"]), "{m}: {sp}");
            assert_eq!(n(&sp["dropped"]) + n(&sp["duplicated"]) + n(&sp["out_of_order"]), 0, "{m}: {sp}");
            assert_eq!(n(&r["round_trips"]), n(&sp["observations"]), "{m}: {r}");
            assert!(n(&r["round_trips"]) >= 1000, "{m}: {r}");
            let secs = run["secs"].as_f64().expect("secs");
            assert!(
                secs > 0.0 && secs <= sockperf_secs as f64,
                "{m}: valid duration {secs} s of a {sockperf_secs} s run"
            );
        } else {
            assert_eq!(n(&r["round_trips"]), count, "{m}: every round trip asked answered: {r}");
            assert!(run["sockperf"].is_null(), "{m}: {run}");
        }
        if m.starts_with("xsk") {
            n(&r["echo_ignored"]);
        }
        let napi = &r["napi"];
        assert_eq!(napi.is_null(), !(m == "xsk-busy-poll" || m == "xsk-irq-suspend"), "{m}: {napi}");
    }
    // The default bed, as read: veth, threaded NAPI off, GRO on, both ends.
    let devices = v["report"]["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), 2);
    for (d, iface) in devices.iter().zip([bed.iface_a(), bed.iface_b()]) {
        assert_eq!((d["dev"].as_str(), d["driver"].as_str()), (Some(iface), Some("veth")), "{d}");
        assert_eq!((d["threaded"].as_str(), d["gro"].as_str()), (Some("0"), Some("on")), "{d}");
    }
    assert!(v["report"]["ratios"].as_array().is_some_and(|a| !a.is_empty()));
    assert_eq!(settings(&bed), before, "NAPI settings restored after the run");
}

#[test]
fn the_notes_say_what_the_bed_has_not_what_a_default_bed_would() {
    if !privileged("the_notes_say_what_the_bed_has_not_what_a_default_bed_would") {
        return;
    }
    let _s = serial();
    let bed = bed();
    // Unlike the default bed: b's NAPI in a kernel thread, GRO off on a.
    bed.set_rx_napi_cpu(Some(1)).expect("threaded NAPI on b");
    let o = std::process::Command::new("ip")
        .args(["netns", "exec", bed.ns_a(), "ethtool", "-K", bed.iface_a(), "gro", "off"])
        .output()
        .expect("ethtool");
    assert!(o.status.success(), "ethtool -K gro off: {}", String::from_utf8_lossy(&o.stderr));
    let o = run(&["bench", "pingpong", "--testbed", bed.name(), "--modes", "udp", "--count", "200", "--runs", "1"]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "pingpong failed: {}", stderr(&o));
    let want_a = format!("{} driver veth, threaded NAPI off, GRO off", bed.iface_a());
    let want_b = format!("{} driver veth, threaded NAPI on, GRO on", bed.iface_b());
    assert!(out.contains(&want_a) && out.contains(&want_b), "{out}");
    assert!(!out.contains("threaded NAPI off, GRO on;"), "no claim of the default bed: {out}");
    bed.set_rx_napi_cpu(None).expect("threaded NAPI off");
}

#[test]
fn sigint_mid_run_restores_the_napi_profile() {
    if !privileged("sigint_mid_run_restores_the_napi_profile") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let before = settings(&bed);
    let busy = NapiSettings::BUSY_POLL;
    let child = fastpath()
        .args(["bench", "pingpong", "--testbed", bed.name(), "--modes", "xsk-busy-poll", "--count", "100000000"])
        .args(["--runs", "1", "--duration", "60"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // Wait until the profile is on (both ends), then interrupt the process we started.
    let t = Instant::now();
    loop {
        let now = settings(&bed);
        if now.iter().all(|(_, s)| s.defer_hard_irqs == busy.defer_hard_irqs) {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "the profile never came on: {now:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let o = child.wait_with_output().expect("wait");
    assert!(!o.status.success(), "interrupted run must not exit 0");
    let err = stderr(&o);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains("interrupted"), "{err}");
    assert_eq!(settings(&bed), before, "NAPI settings restored after SIGINT");
}

#[test]
fn sigterm_during_sockperf_ends_the_run_promptly_and_not_with_0() {
    if !privileged("sigterm_during_sockperf_ends_the_run_promptly_and_not_with_0") {
        return;
    }
    let _s = serial();
    let bed = bed();
    // sockperf runs up to --duration (60 s) for this many round trips.
    let child = fastpath()
        .args(["bench", "pingpong", "--testbed", bed.name(), "--modes", "sockperf-udp", "--count", "100000000"])
        .args(["--runs", "1", "--duration", "60"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // Until sockperf ping-pong runs (its server bound, the client started).
    let t = Instant::now();
    while !std::process::Command::new("pgrep").args(["-P", &child.id().to_string()]).status().unwrap().success() {
        assert!(t.elapsed() < Duration::from_secs(20), "sockperf never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let pid = child.id().to_string();
    let t = Instant::now();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let o = child.wait_with_output().expect("wait");
    assert!(t.elapsed() < Duration::from_secs(10), "ended {:?} after SIGTERM", t.elapsed());
    assert!(!o.status.success(), "interrupted run must not exit 0: {}", String::from_utf8_lossy(&o.stdout));
    let err = stderr(&o);
    assert!(err.contains("interrupted"), "{err}");
}

/// Watches the NAPIs of `iface` in namespace `ns` (napi-get in a loop, on a thread of its own)
/// until the returned flag is set; the thread returns every distinct setting it saw.
fn watch_napis(ns: &str, iface: &str) -> (Arc<AtomicBool>, std::thread::JoinHandle<Vec<NapiSettings>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let (ns, iface, st) = (ns.to_string(), iface.to_string(), stop.clone());
    let h = std::thread::spawn(move || {
        in_ns(&ns, move || {
            let ifc = Iface::resolve(&iface).expect("iface");
            let mut seen: Vec<NapiSettings> = Vec::new();
            while !st.load(Ordering::Relaxed) {
                for s in napis(ifc.ifindex()).unwrap_or_default().iter().map(Napi::settings) {
                    if !seen.contains(&s) {
                        seen.push(s);
                    }
                }
            }
            seen
        })
    });
    (stop, h)
}

#[test]
fn a_failing_echo_server_leaves_the_client_profile_restored() {
    if !privileged("a_failing_echo_server_leaves_the_client_profile_restored") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let before = settings(&bed);
    let busy = NapiSettings::BUSY_POLL;
    let is_busy = |s: &NapiSettings| {
        s.defer_hard_irqs == busy.defer_hard_irqs && s.gro_flush_timeout_ns == busy.gro_flush_timeout_ns
    };
    assert!(!before.iter().any(|(_, s)| is_busy(s)), "the profile is not on before: {before:?}");
    // Another program holds b's XDP hook: the echo server's attach is refused after the client
    // (namespace a) has bound its socket and applied its NAPI profile.
    let holder =
        Running::start(&["bench", "rxdrop", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--duration", "60", "--json"]);
    // The profile is on a's NAPI from the client's apply until the server's refusal reaches it
    // (milliseconds: the server's program load): a watcher sees it on one of a few attempts, so
    // "restored" below is a restore, not a profile never applied.
    let mut seen_on = false;
    for attempt in 1..=5 {
        let (stop, watcher) = watch_napis(bed.ns_a(), bed.iface_a());
        let o = run(&[
            "bench",
            "pingpong",
            "--testbed",
            bed.name(),
            "--modes",
            "xsk-busy-poll",
            "--count",
            "1000",
            "--runs",
            "1",
        ]);
        stop.store(true, Ordering::Relaxed);
        let seen = watcher.join().expect("watcher");
        let err = stderr(&o);
        assert!(!o.status.success(), "pingpong must fail: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        assert!(err.contains(bed.iface_b()), "names the interface: {err}");
        assert_eq!(settings(&bed), before, "attempt {attempt}: NAPI settings restored after the failure");
        if seen.iter().any(is_busy) {
            seen_on = true;
            break;
        }
    }
    let (_, _) = holder.terminate();
    assert!(seen_on, "the client's NAPI profile was never seen on while the client ran");
    assert_eq!(settings(&bed), before, "NAPI settings restored after the failure");
}

#[test]
fn a_mode_whose_round_trips_all_vanish_fails_promptly_naming_it() {
    if !privileged("a_mode_whose_round_trips_all_vanish_fails_promptly_naming_it") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let nft = |rules: &str| {
        let o = std::process::Command::new("ip").args(["netns", "exec", bed.ns_b(), "nft", rules]).output().unwrap();
        assert!(o.status.success(), "nft {rules}: {}", String::from_utf8_lossy(&o.stderr));
    };
    nft("add table inet fptest; add chain inet fptest in { type filter hook input priority 0; }; add rule inet fptest in udp dport 9001 drop");
    let t = Instant::now();
    let o = run(&["bench", "pingpong", "--testbed", bed.name(), "--modes", "udp", "--count", "1000", "--runs", "1"]);
    let took = t.elapsed();
    nft("delete table inet fptest");
    let err = stderr(&o);
    assert!(!o.status.success(), "every round trip lost must fail: {}", String::from_utf8_lossy(&o.stdout));
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains("mode udp") && err.contains("not answered"), "{err}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

/// Runs `f` on a thread in namespace `ns`.
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    fastpath_testbed::run_in_netns(ns, f).expect("enter the namespace")
}

/// The first NAPI of `iface` (in the calling thread's namespace).
fn first_napi(iface: &Iface) -> Napi {
    napis(iface.ifindex()).expect("napi-get").into_iter().next().expect("a NAPI (GRO is on)")
}

#[test]
fn two_profiles_dropped_out_of_order_leave_what_was_there_and_only_touch_what_they_set() {
    if !privileged("two_profiles_dropped_out_of_order_leave_what_was_there_and_only_touch_what_they_set") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let iface = bed.iface_a().to_string();
    in_ns(bed.ns_a(), move || {
        let ifc = Iface::resolve(&iface).expect("iface");
        let before = first_napi(&ifc);
        let a = NapiProfile::apply(&ifc, &NapiSettings::BUSY_POLL).expect("profile a");
        let b = NapiProfile::apply(&ifc, &NapiSettings::BUSY_POLL).expect("profile b");
        // Something else sets a value neither profile set.
        let mut other = NapiSettings::default();
        other.irq_suspend_timeout_ns = Some(7_000);
        napi_set(before.id, &other).expect("napi-set irq-suspend-timeout");
        // a goes first (not the last applied): it finds its values and puts back those of before.
        assert_eq!(a.restore().expect("restore a"), Vec::<String>::new());
        // b finds a's restore, not its own values: it leaves them, with a warning.
        let w = b.restore().expect("restore b");
        assert_eq!(w.len(), 2, "{w:?}");
        let now = first_napi(&ifc);
        assert_eq!(now.defer_hard_irqs, before.defer_hard_irqs);
        assert_eq!(now.gro_flush_timeout_ns, before.gro_flush_timeout_ns);
        assert_eq!(now.irq_suspend_timeout_ns, Some(7_000), "a setting no profile set is not rewritten");
        napi_set(before.id, &before.settings()).expect("put irq-suspend-timeout back");
    });
}

#[test]
fn a_napi_gone_before_the_restore_is_an_error_not_done() {
    if !privileged("a_napi_gone_before_the_restore_is_an_error_not_done") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let (ns, iface) = (bed.ns_a().to_string(), bed.iface_a().to_string());
    let link = move |up: &str| {
        let st = std::process::Command::new("ip").args(["-n", &ns, "link", "set", "dev", &iface, up]).status();
        assert!(st.expect("ip").success(), "ip link set {up}");
    };
    let iface = bed.iface_a().to_string();
    let (l1, l2, l3, l4) = (link.clone(), link.clone(), link.clone(), link);
    in_ns(bed.ns_a(), move || {
        let ifc = Iface::resolve(&iface).expect("iface");
        // Link down: the NAPI is gone and nothing carries it: not restorable now.
        let p = NapiProfile::apply(&ifc, &NapiSettings::BUSY_POLL).expect("profile");
        let id = p.previous()[0].id;
        l1("down");
        let e = p.restore().expect_err("a NAPI gone before the restore is an error");
        assert!(matches!(e, NapiError::NotRestored { .. }), "{e}");
        assert!(e.to_string().contains(&id.to_string()), "names the NAPI: {e}");
        l2("up");
        // Down and up: a fresh instance with the device's values replaced it: nothing to undo.
        let p = NapiProfile::apply(&ifc, &NapiSettings::BUSY_POLL).expect("profile");
        l3("down");
        l4("up");
        assert_eq!(p.restore().expect("replaced instance"), Vec::<String>::new());
        let now = first_napi(&ifc);
        assert_ne!(now.defer_hard_irqs, NapiSettings::BUSY_POLL.defer_hard_irqs, "{now:?}");
    });
}

#[test]
fn a_profile_applied_in_a_namespace_is_restored_from_outside_and_refused_across() {
    if !privileged("a_profile_applied_in_a_namespace_is_restored_from_outside_and_refused_across") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let before = settings(&bed);
    let iface = bed.iface_a().to_string();
    let p = in_ns(bed.ns_a(), move || {
        NapiProfile::apply(&Iface::resolve(&iface).expect("iface"), &NapiSettings::BUSY_POLL).expect("profile")
    });
    let on = settings(&bed);
    assert!(on.iter().any(|(_, s)| s.defer_hard_irqs == Some(100)), "applied first: {on:?}");
    drop(p); // on this thread, in the test's own namespace
    assert_eq!(settings(&bed), before, "restored from another namespace");
    let iface = bed.iface_a().to_string();
    let ifc = in_ns(bed.ns_a(), move || Iface::resolve(&iface).expect("iface"));
    let e = NapiProfile::apply(&ifc, &NapiSettings::BUSY_POLL).expect_err("another namespace");
    assert!(matches!(e, NapiError::OtherNetns { .. }), "{e}");
    assert_eq!(settings(&bed), before);
}

#[test]
fn bad_values_are_one_line_refusals() {
    for (args, needle) in [
        (&["--modes", "xsk,udp"][..], "--modes xsk"),
        (&["--modes", "udp,udp"][..], "listed twice"),
        (&["--runs", "0"][..], "--runs 0"),
        (&["--count", "0"][..], "--count 0"),
        (&["--client-cpu", "999"][..], "--client-cpu 999"),
        (&["--client-cpu", "1", "--server-cpu", "1"][..], "different CPUs"),
        (&["-i", "eth0"][..], "-i eth0"),
        (&["--frame-len", "1500"][..], "--frame-len is not accepted"),
        (&["--busy-poll"][..], "--busy-poll is not accepted"),
        (&["--copy-mode", "zero-copy"][..], "--copy-mode is not accepted"),
        (&["--queues", "2"][..], "--queues is not accepted"),
        (&["--rate", "10"][..], "--rate is not accepted"),
        (&["--duration", "0"][..], "--duration 0"),
    ] {
        let mut a = vec!["bench", "pingpong"];
        a.extend_from_slice(args);
        let o = run(&a);
        assert_one_line_refusal(&format!("{args:?}"), &o, 2, &[needle]);
    }
}
