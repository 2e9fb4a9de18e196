//! `fastpath bench pingpong`: every mode answers every round trip with ordered, nonzero
//! percentiles; the busy-poll NAPI profile is put back afterwards, also when the run is
//! interrupted (SIGINT) and when the far end fails after the near end applied its profile; bad
//! values are one-line refusals (exit 2). Privileged (root: namespaces, XDP, napi-set).

mod common;

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
    assert!(o.status.success(), "pingpong failed: {}", stderr(&o));
    let v = last_json(&o);
    assert_eq!(v["bench"], "pingpong");
    let rows = v["report"]["rows"].as_array().expect("rows");
    let modes: Vec<&str> = rows.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["xsk-softirq", "xsk-busy-poll", "xsk-irq-suspend", "udp", "sockperf-udp"]);
    for r in rows {
        let m = r["mode"].as_str().unwrap();
        let (p50, p99, p999, max) = (n(&r["p50_ns"]), n(&r["p99_ns"]), n(&r["p999_ns"]), n(&r["max_ns"]));
        assert!(p50 > 0 && p50 <= p99 && p99 <= p999 && p999 <= max, "{m}: percentiles {p50} {p99} {p999} {max}");
        assert_eq!(n(&r["lost"]), 0, "{m}: every round trip answered");
        if m == "sockperf-udp" {
            assert!(n(&r["round_trips"]) > 0, "{m}: {r}");
        } else {
            assert_eq!(n(&r["round_trips"]), count, "{m}: {r}");
        }
        let napi = &r["napi"];
        assert_eq!(napi.is_null(), !(m == "xsk-busy-poll" || m == "xsk-irq-suspend"), "{m}: {napi}");
    }
    assert!(v["report"]["ratios"].as_array().is_some_and(|a| !a.is_empty()));
    assert_eq!(settings(&bed), before, "NAPI settings restored after the run");
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

#[test]
fn a_failing_echo_server_leaves_the_client_profile_restored() {
    if !privileged("a_failing_echo_server_leaves_the_client_profile_restored") {
        return;
    }
    let _s = serial();
    let bed = bed();
    let before = settings(&bed);
    // Another program holds b's XDP hook: the echo server's attach is refused after the client
    // (namespace a) has bound its socket and applied its NAPI profile.
    let holder =
        Running::start(&["bench", "rxdrop", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--duration", "60", "--json"]);
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
    let (_, _) = holder.terminate();
    let err = stderr(&o);
    assert!(!o.status.success(), "pingpong must fail: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(bed.iface_b()), "names the interface: {err}");
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
        let other = NapiSettings { irq_suspend_timeout_ns: Some(7_000), ..Default::default() };
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
