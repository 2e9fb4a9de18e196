//! `fastpath bench pingpong`: every mode answers every round trip with ordered, nonzero
//! percentiles; the busy-poll NAPI profile is put back afterwards, also when the run is
//! interrupted (SIGINT) and when the far end fails after the near end applied its profile; bad
//! values are one-line refusals (exit 2). Privileged (root: namespaces, XDP, napi-set).

mod common;

use std::time::{Duration, Instant};

use common::{assert_one_line_refusal, fastpath, last_json, n, privileged, run, serial, stderr, Running};
use fastpath::netdev::napi::NapiSettings;
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
fn bad_values_are_one_line_refusals() {
    for (args, needle) in [
        (&["--modes", "xsk,udp"][..], "--modes xsk"),
        (&["--modes", "udp,udp"][..], "listed twice"),
        (&["--runs", "0"][..], "--runs 0"),
        (&["--count", "0"][..], "--count 0"),
        (&["--client-cpu", "999"][..], "--client-cpu 999"),
        (&["--client-cpu", "1", "--server-cpu", "1"][..], "different CPUs"),
        (&["-i", "eth0"][..], "-i eth0"),
    ] {
        let mut a = vec!["bench", "pingpong"];
        a.extend_from_slice(args);
        let o = run(&a);
        assert_one_line_refusal(&format!("{args:?}"), &o, 2, &[needle]);
    }
}
