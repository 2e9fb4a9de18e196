//! `fastpath doctor`: on a test bed, each check names a deliberately broken set-up (one test
//! per check), and says OK once it is mended.

mod common;

use std::time::Duration;

use common::*;
use fastpath_testbed::{Testbed, TestbedConfig};
use serde_json::Value;

fn bed(queues: u32) -> Testbed {
    Testbed::up(&TestbedConfig { ipv6: false, queues, ..Default::default() }).expect("test bed")
}

/// `doctor --json`: the check named `name`.
fn doctor(ns: &str, iface: &str, extra: &[&str], name: &str) -> Value {
    let mut args = vec!["doctor", "--netns", ns, "-i", iface, "--json", "--window", "1"];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(o.status.success(), "doctor: {}", stderr(&o));
    let v = last_json(&o);
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no {name}: {v}"))
}

fn ip(ns: &str, args: &str) {
    let mut full = vec!["-n", ns];
    full.extend(args.split_whitespace());
    let o = std::process::Command::new("ip").args(&full).output().unwrap();
    assert!(o.status.success(), "ip {args}: {}", String::from_utf8_lossy(&o.stderr));
}

fn is(c: &Value, status: &str, needles: &[&str]) {
    assert_eq!(c["status"], status, "{c}");
    let text = format!("{} {}", c["detail"], c["fix"]);
    for n in needles {
        assert!(text.contains(n), "{c} does not mention {n:?}");
    }
}

#[test]
fn doctor_link_down() {
    if !privileged("doctor_link_down") {
        return;
    }
    let bed = bed(1);
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    is(&doctor(ns, i, &[], "link"), "ok", &["up"]);
    ip(ns, &format!("link set dev {i} down"));
    is(&doctor(ns, i, &[], "link"), "problem", &["down", &format!("ip -n {ns} link set dev {i} up")]);
    let o = run(&["doctor", "--netns", ns, "-i", "fpnosuch0"]);
    assert_one_line_refusal("no such interface", &o, 3, &["fpnosuch0"]);
}

/// `fastpath gen` from a to b's MAC with `extra` options, in a thread.
fn gen_from_a(bed: &Testbed, extra: &[&str]) -> std::thread::JoinHandle<std::process::Output> {
    let (na, ia, mb) = (bed.ns_a().to_string(), bed.iface_a().to_string(), mac(bed.mac_b()));
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    std::thread::spawn(move || {
        let mut a = vec!["gen", "--netns", &na, "-i", &ia, "--dst-mac", &mb];
        a.extend(extra.iter().map(String::as_str));
        run(&a)
    })
}

/// `gen --engine xsk` from a on `queues` queues, 60,000 frames at 20,000/s, in a thread.
fn gen_on_queues(bed: &Testbed, queues: &str) -> std::thread::JoinHandle<std::process::Output> {
    let a = ["--engine", "xsk", "--queues", queues, "--rate", "20000", "--count", "60000", "--duration", "30"];
    gen_from_a(bed, &a)
}

/// Two queues, rxdrop bound to queue 0, the generator sending on both: doctor -q 0 names queue 1.
#[test]
fn doctor_traffic_on_another_queue() {
    if !privileged("doctor_traffic_on_another_queue") {
        return;
    }
    let _s = serial();
    let bed = bed(2);
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let rx = Running::start(&["bench", "rxdrop", "--netns", ns, "-i", i, "--queue", "0", "--json", "--duration", "60"]);
    let g = gen_on_queues(&bed, "2");
    std::thread::sleep(Duration::from_millis(500));
    is(&doctor(ns, i, &["-q", "0"], "queues"), "problem", &["queue 1", "--queues"]);
    assert!(g.join().unwrap().status.success());
    // Mended: the generator sends on one queue only, the one rxdrop is bound to.
    let g = gen_on_queues(&bed, "1");
    std::thread::sleep(Duration::from_millis(500));
    is(&doctor(ns, i, &["-q", "0"], "queues"), "ok", &["queue 0 only"]);
    assert!(g.join().unwrap().status.success());
    let (_, st) = rx.terminate();
    assert!(st.success());
}

/// Loopback has no native XDP: doctor says AF_XDP would run in skb mode.
#[test]
fn doctor_no_native_xdp() {
    if !privileged("doctor_no_native_xdp") {
        return;
    }
    let bed = bed(1);
    is(&doctor(bed.ns_b(), bed.iface_b(), &[], "xdp_mode"), "ok", &["natively"]);
    is(&doctor(bed.ns_b(), "lo", &[], "xdp_mode"), "problem", &["skb"]);
}

/// MTU 9000 on a kernel without multi-buffer (the feature table told to refuse it).
#[test]
fn doctor_mtu_beyond_the_mode() {
    if !privileged("doctor_mtu_beyond_the_mode") {
        return;
    }
    let bed = bed(1);
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    bed.set_mtu(9000).unwrap();
    is(&doctor(ns, i, &[], "mtu"), "ok", &["multi-buffer"]);
    let o = fastpath()
        .env("FASTPATH_DENY_FEATURES", "multi_buffer")
        .args(["doctor", "--netns", ns, "-i", i, "--json", "--window", "0.2"])
        .output()
        .unwrap();
    let v = last_json(&o);
    assert_json_keys("doctor", &v);
    let c = v["checks"].as_array().unwrap().iter().find(|c| c["check"] == "mtu").unwrap().clone();
    is(&c, "problem", &["MTU 9000", "6.6", "mtu 3822"]);
}

/// A foreign XDP program (built here with clang, attached with iproute2) is named; fastpath's
/// own is recognised.
#[test]
fn doctor_foreign_program() {
    if !privileged("doctor_foreign_program") {
        return;
    }
    let _s = serial();
    let bed = bed(1);
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let dir = std::env::temp_dir().join(format!("fpdoc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (c, o) = (dir.join("foreign.c"), dir.join("foreign.o"));
    std::fs::write(
        &c,
        "#include <linux/bpf.h>\n#define SEC(n) __attribute__((section(n), used))\nSEC(\"xdp\") int foreign_pass(struct xdp_md *c) { return XDP_PASS; }\nchar l[] SEC(\"license\") = \"GPL\";\n",
    )
    .unwrap();
    let arch = std::env::consts::ARCH;
    let cc = std::process::Command::new("clang")
        .args(["-O2", "-g", "-target", "bpf", &format!("-I/usr/include/{arch}-linux-gnu"), "-c"])
        .arg(&c)
        .arg("-o")
        .arg(&o)
        .output()
        .expect("clang");
    assert!(cc.status.success(), "clang: {}", String::from_utf8_lossy(&cc.stderr));
    ip(ns, &format!("link set dev {i} xdpgeneric obj {} sec xdp", o.display()));
    is(&doctor(ns, i, &[], "xdp_program"), "problem", &["foreign", "foreign_pass", "--force"]);
    ip(ns, &format!("link set dev {i} xdpgeneric off"));
    is(&doctor(ns, i, &[], "xdp_program"), "ok", &["no XDP program"]);
    let rx = Running::start(&["bench", "rxdrop", "--netns", ns, "-i", i, "--json", "--duration", "60"]);
    is(&doctor(ns, i, &[], "xdp_program"), "ok", &["fastpath", "xsk_redirect"]);
    let (_, st) = rx.terminate();
    assert!(st.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A veth whose peer has neither GRO nor an XDP program (no NAPI), then with GRO on.
#[test]
fn doctor_veth_peer_without_napi() {
    if !privileged("doctor_veth_peer_without_napi") {
        return;
    }
    let bed = bed(1);
    let ns = bed.ns_b();
    ip(ns, "link add fpdv0 type veth peer name fpdv1");
    ip(ns, "link set dev fpdv0 up");
    ip(ns, "link set dev fpdv1 up");
    let eth = |args: &[&str]| fastpath_testbed::ns_command(ns, "ethtool").args(args).output().unwrap();
    assert!(eth(&["-K", "fpdv1", "gro", "off"]).status.success());
    is(&doctor(ns, "fpdv0", &[], "veth_peer"), "problem", &["fpdv1", "no NAPI", "gro on"]);
    assert!(eth(&["-K", "fpdv1", "gro", "on"]).status.success());
    is(&doctor(ns, "fpdv0", &[], "veth_peer"), "ok", &["fpdv1", "GRO"]);
    // The test bed's own veth: its peer is in another namespace.
    is(&doctor(ns, bed.iface_b(), &[], "veth_peer"), "skip", &["another network namespace"]);
}

/// `doctor --json` run now: its checks by name.
fn checks(ns: &str, iface: &str) -> Vec<Value> {
    let o = run(&["doctor", "--netns", ns, "-i", iface, "--json", "--window", "1"]);
    assert!(o.status.success(), "doctor: {}", stderr(&o));
    last_json(&o)["checks"].as_array().unwrap().clone()
}

fn check<'a>(all: &'a [Value], name: &str) -> &'a Value {
    all.iter().find(|c| c["check"] == name).unwrap_or_else(|| panic!("no {name}: {all:?}"))
}

/// rxdrop with `extra` options under a 3 s full-rate flood: doctor's checks during the flood,
/// with rxdrop's pid; then mended: rxdrop without `extra` (the options that broke it) under a
/// paced stream it keeps up with, doctor's checks while the stream flows (and the frames it
/// received then, so a check that looked at an idle socket cannot pass).
fn under_flood(bed: &Testbed, extra: &[&str]) -> (Vec<Value>, Vec<Value>, String) {
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let base = ["bench", "rxdrop", "--netns", ns, "-i", i, "--json", "--duration", "60", "--cpu", "1"];
    let mut args = base.to_vec();
    args.extend_from_slice(extra);
    let gen = |rate: Option<&str>| {
        let mut a = vec!["--cpu", "0", "--duration", "3"];
        if let Some(r) = rate {
            a.extend(["--rate", r]);
        }
        gen_from_a(bed, &a)
    };
    let rx = Running::start(&args);
    let pid = rx.child.id().to_string();
    let g = gen(None);
    std::thread::sleep(Duration::from_millis(300));
    let during = checks(ns, i);
    assert!(g.join().unwrap().status.success());
    let (_, st) = rx.terminate();
    assert!(st.success());
    let rx = Running::start(&base);
    let g = gen(Some("50000"));
    std::thread::sleep(Duration::from_millis(300));
    let mended = checks(ns, i);
    // doctor's window lay inside the stream: it started before and still flowed after.
    let flowing = !g.is_finished();
    let go = g.join().unwrap();
    assert!(go.status.success());
    let (summary, st) = rx.terminate();
    assert!(st.success());
    assert!(flowing, "the 3 s stream ended before doctor's window did");
    assert!(n(&summary["totals"]["rx_packets"]) >= 50_000, "the mended receiver received the stream: {summary}");
    (during, mended, pid)
}

/// rxdrop with `extra` under a flood: doctor names `problem` (with rxdrop's pid and `needles`)
/// and says the other two socket checks are OK; mended (rxdrop without `extra`, a paced stream
/// flowing), all three are OK.
fn only_problem(extra: &[&str], problem: &str, needles: &[&str]) {
    let _s = serial();
    let bed = bed(1);
    let (during, mended, pid) = under_flood(&bed, extra);
    let mut want: Vec<&str> = needles.to_vec();
    want.push(&pid);
    is(check(&during, problem), "problem", &want);
    for c in ["fill_ring", "rx_ring", "polling"] {
        if c != problem {
            is(check(&during, c), "ok", &[]);
        }
        is(check(&mended, c), "ok", &[]);
    }
}

/// 64 UMEM frames behind a 2,048-entry RX ring under a full-rate flood: the kernel finds the
/// FILL ring empty (the RX ring cannot fill with 64 frames); doctor names the FILL ring and
/// the process, says the RX ring and polling are fine, and all three OK once mended (default
/// frame count, a paced stream flowing).
#[test]
fn doctor_fill_ring_empty() {
    if !privileged("doctor_fill_ring_empty") {
        return;
    }
    only_problem(
        &["--ring-size", "2048", "--frame-count", "64"],
        "fill_ring",
        &["FILL ring was empty", "--frame-count"],
    );
}

/// A 64-entry RX ring read one frame per batch, with 4,096 frames to fill from, under a
/// full-rate flood: the RX ring overflows while the FILL ring stays stocked; doctor names the
/// RX ring and the process, the FILL ring and polling are fine, all OK once mended (default ring
/// and batch, a paced stream flowing).
#[test]
fn doctor_rx_ring_full() {
    if !privileged("doctor_rx_ring_full") {
        return;
    }
    only_problem(
        &["--ring-size", "64", "--frame-count", "4096", "--batch-size", "1"],
        "rx_ring",
        &["RX ring is full", "rx_ring_full", "--ring-size"],
    );
}

/// The application stopped (SIGSTOP) while frames arrive: its RX ring overflows and it uses no
/// CPU, so doctor says it is not polling; once it runs again (SIGCONT), polling and both rings
/// are OK.
#[test]
fn doctor_process_not_polling() {
    if !privileged("doctor_process_not_polling") {
        return;
    }
    let _s = serial();
    let bed = bed(1);
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let rx = Running::start(&["bench", "rxdrop", "--netns", ns, "-i", i, "--json", "--duration", "60", "--cpu", "1"]);
    let pid = rx.child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    let g = gen_from_a(&bed, &["--rate", "50000", "--count", "400000", "--duration", "10"]);
    std::thread::sleep(Duration::from_millis(500));
    let c = doctor(ns, i, &[], "polling");
    let _ = std::process::Command::new("kill").args(["-CONT", &pid]).status();
    is(&c, "problem", &["not polling", "RX ring overflows", &pid]);
    // Mended: the process runs again and keeps up with 50,000 frames/s (after it has drained
    // what waited in its rings).
    std::thread::sleep(Duration::from_millis(1000));
    let all = checks(ns, i);
    for c in ["polling", "rx_ring", "fill_ring"] {
        is(check(&all, c), "ok", &[]);
    }
    assert!(g.join().unwrap().status.success());
    let (_, st) = rx.terminate();
    assert!(st.success());
}
