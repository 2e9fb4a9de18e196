//! The command line: mode reporting, bad input, lifecycle, and every subcommand and option once
//! with `--duration 0` (root; a test bed per test).

mod common;

use common::*;
use fastpath_testbed::{Testbed, TestbedConfig};

fn bed() -> Testbed {
    Testbed::up(&TestbedConfig::default()).expect("test bed")
}

/// One line on stderr, naming `needle`, exit code `code`, nothing attached afterwards.
fn assert_refused(bed: &Testbed, args: &[&str], code: i32, needles: &[&str]) {
    let o = run(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(code), "{args:?}: exit {:?}, stderr: {err}", o.status);
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: one line expected, got: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: {err:?} does not mention {n:?}");
    }
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none(), "{args:?} left an XDP program attached");
}

#[test]
fn zero_copy_on_veth_is_refused_with_the_fallback_named() {
    if !privileged("zero_copy_on_veth_is_refused_with_the_fallback_named") {
        return;
    }
    let bed = bed();
    assert_refused(
        &bed,
        &["bench", "rxdrop", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--copy-mode", "zero-copy", "--duration", "0"],
        4,
        &["no AF_XDP zero-copy", "veth", "--copy-mode copy"],
    );
}

#[test]
fn auto_mode_reports_copy_read_back_from_the_kernel() {
    if !privileged("auto_mode_reports_copy_read_back_from_the_kernel") {
        return;
    }
    let bed = bed();
    let o = run(&["bench", "rxdrop", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--duration", "0", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = last_json(&o);
    assert_eq!(s["path"]["copy_mode"], "copy", "{s}");
    assert_eq!(s["path"]["xdp_mode"], "native", "{s}");
    assert!(s["path"]["notes"].to_string().contains("zero-copy refused"), "the fallback is explained: {s}");
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none());
}

#[test]
fn bad_input_gets_one_line_and_leaves_nothing() {
    if !privileged("bad_input_gets_one_line_and_leaves_nothing") {
        return;
    }
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let base = |extra: &[&'static str]| -> Vec<String> {
        let mut v: Vec<String> =
            ["bench", "rxdrop", "--netns", ns, "-i", i, "--duration", "0"].iter().map(|s| s.to_string()).collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    fn call(v: &[String]) -> Vec<&str> {
        v.iter().map(|s| s.as_str()).collect()
    }
    assert_refused(
        &bed,
        &["bench", "rxdrop", "--netns", ns, "-i", "nosuch0", "--duration", "0"],
        2,
        &["\"nosuch0\"", "does not exist"],
    );
    assert_refused(&bed, &call(&base(&["-q", "5"])), 2, &["queue id 5", "0..=0"]);
    assert_refused(
        &bed,
        &call(&base(&["--frame-size", "3000"])),
        2,
        &["frame size 3000", "power of two", "2048", "4096"],
    );
    assert_refused(&bed, &call(&base(&["--frame-size", "8192"])), 2, &["frame size 8192", "2048", "4096"]);
    assert_refused(&bed, &call(&base(&["--ring-size", "1000"])), 2, &["ring size 1000", "power of two"]);
    assert_refused(&bed, &call(&base(&["--cpu", "64"])), 2, &["--cpu 64"]);
    assert_refused(&bed, &["bench", "rxdrop", "--netns", "fpnosuchns", "-i", i, "--duration", "0"], 3, &["fpnosuchns"]);
    // Port backends: a missing interface, a TAP name too long.
    assert_refused(
        &bed,
        &["bench", "rxdrop", "--path", "tpacket", "--netns", ns, "-i", "nosuch1", "--duration", "0"],
        2,
        &["\"nosuch1\"", "does not exist"],
    );
    assert_refused(
        &bed,
        &["bench", "rxdrop", "--path", "tap", "--netns", ns, "-i", "averyveryverylongname", "--duration", "0"],
        2,
        &["averyveryverylongname", "at most 15 bytes"],
    );
    // An unknown port backend.
    let o = run(&["bench", "rxdrop", "--path", "dpdk", "-i", i]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("dpdk") && stderr(&o).contains("tap-uring"), "{}", stderr(&o));
    // clap's own refusals: a bad enum value names the value and the accepted ones.
    let o = run(&call(&base(&["--xdp-mode", "turbo"])));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("turbo") && stderr(&o).contains("native"), "{}", stderr(&o));
}

#[test]
fn missing_privileges_are_named() {
    if !privileged("missing_privileges_are_named") {
        return;
    }
    let bed = bed();
    for args in [
        vec!["bench", "rxdrop", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--duration", "0"],
        vec!["gen", "--netns", bed.ns_a(), "-i", bed.iface_a(), "--duration", "0"],
        vec!["testbed", "info"],
    ] {
        let o = std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                env!("CARGO_BIN_EXE_fastpath"),
            ])
            .args(&args)
            .output()
            .expect("setpriv (util-linux)");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {err}");
        assert!(err.contains("needs root") && err.contains("CAP_BPF"), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none());
}

#[test]
fn foreign_program_is_refused_unless_forced() {
    if !privileged("foreign_program_is_refused_unless_forced") {
        return;
    }
    let bed = bed();
    // Someone else's program: attached by this test process, held by its link fd.
    let (ns, iface) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let holder = fastpath_testbed::spawn_in_netns(&ns, move || {
        let dev = fastpath::netdev::NetDev::by_name(&iface).unwrap();
        let p = fastpath::bpf::XdpDrop::attach(&iface, dev.ifindex, fastpath::bpf::XdpMode::Native, false).unwrap();
        tx.send(fastpath::bpf::query_xdp(dev.ifindex).unwrap().unwrap().id).unwrap();
        let _ = done_rx.recv();
        drop(p);
    });
    let id = rx.recv().unwrap();
    let args = ["bench", "rxdrop", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--duration", "0"];
    let o = run(&args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains(&format!("program id {id}")) && err.contains("--force"), "{err}");
    assert_eq!(attached(bed.ns_b(), bed.iface_b()).map(|p| p.id), Some(id), "the foreign program stays");
    let mut forced = args.to_vec();
    forced.push("--force");
    let o = run(&forced);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none(), "replaced, then detached at exit");
    done_tx.send(()).unwrap();
    holder.join().unwrap().unwrap();
}

#[test]
fn lifecycle_nothing_left_and_immediate_rebind() {
    if !privileged("lifecycle_nothing_left_and_immediate_rebind") {
        return;
    }
    let bed = bed();
    let args = ["bench", "rxdrop", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--duration", "0"];
    // Normal exit, twice in a row on the same queue.
    for _ in 0..3 {
        let o = run(&args);
        assert!(o.status.success(), "re-bind right after close: {}", stderr(&o));
        assert!(attached(bed.ns_b(), bed.iface_b()).is_none());
    }
    // SIGTERM while running, then bind again at once.
    for mode in ["rxdrop", "l2fwd", "xdpdrop"] {
        let r = Running::start(&[
            "bench",
            mode,
            "--netns",
            bed.ns_b(),
            "-i",
            bed.iface_b(),
            "--duration",
            "60",
            "--json",
            "--poll",
        ]);
        assert!(attached(bed.ns_b(), bed.iface_b()).is_some(), "{mode} attached while running");
        let (summary, status) = r.terminate();
        assert!(status.success(), "{mode}: {status:?}");
        assert_eq!(summary["type"], "summary", "a summary at exit after SIGTERM");
        assert!(attached(bed.ns_b(), bed.iface_b()).is_none(), "{mode} left its program after SIGTERM");
        let o = run(&args);
        assert!(o.status.success(), "bind after SIGTERM: {}", stderr(&o));
    }
    // SIGKILL: the kernel closes the bpf_link fd and detaches for us.
    let r = Running::start(&[
        "bench",
        "rxdrop",
        "--netns",
        bed.ns_b(),
        "-i",
        bed.iface_b(),
        "--duration",
        "60",
        "--json",
        "--poll",
    ]);
    let mut child = r.child;
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none(), "left attached after SIGKILL");
    // Error during set-up after the program was attached (zero-copy bind fails): nothing left.
    let o = run(&[
        "bench",
        "rxdrop",
        "--netns",
        bed.ns_b(),
        "-i",
        bed.iface_b(),
        "--xdp-mode",
        "native",
        "--copy-mode",
        "zero-copy",
        "--duration",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(4));
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none());
}

#[test]
fn smoke_every_subcommand_and_option() {
    if !privileged("smoke_every_subcommand_and_option") {
        return;
    }
    let bed = Testbed::up(&TestbedConfig { queues: 2, ..Default::default() }).expect("bed");
    let (na, nb, ia, ib) = (bed.ns_a(), bed.ns_b(), bed.iface_a(), bed.iface_b());
    let mb = mac(bed.mac_b());
    let rules_path = std::env::temp_dir().join(format!("fastpath-smoke-{}.toml", std::process::id()));
    std::fs::write(&rules_path, "[[rule]]\nproto = \"udp\"\ndst_port = \"5000-5999\"\naction = \"xsk\"\n").unwrap();
    let rules = rules_path.display().to_string();
    let cases: Vec<Vec<&str>> = vec![
        vec!["bench", "rxdrop", "--netns", nb, "-i", ib, "--duration", "0"],
        vec!["bench", "rxdrop", "--netns", nb, "-i", ib, "-q", "1", "--duration", "0", "--json"],
        vec![
            "bench",
            "rxdrop",
            "--netns",
            nb,
            "-i",
            ib,
            "--xdp-mode",
            "skb",
            "--copy-mode",
            "copy",
            "--duration",
            "0",
            "-e",
        ],
        vec![
            "bench",
            "rxdrop",
            "--netns",
            nb,
            "-i",
            ib,
            "--xdp-mode",
            "native",
            "--copy-mode",
            "auto",
            "--duration",
            "0",
        ],
        vec![
            "bench",
            "rxdrop",
            "--netns",
            nb,
            "-i",
            ib,
            "--xdp-mode",
            "auto",
            "--frame-size",
            "2048",
            "--frame-count",
            "8192",
            "--headroom",
            "256",
            "--duration",
            "0",
        ],
        vec![
            "bench",
            "rxdrop",
            "--netns",
            nb,
            "-i",
            ib,
            "--ring-size",
            "512",
            "--batch-size",
            "32",
            "--busy-poll",
            "--no-need-wakeup",
            "--duration",
            "0",
        ],
        vec![
            "bench",
            "rxdrop",
            "--netns",
            nb,
            "-i",
            ib,
            "--poll",
            "--cpu",
            "1",
            "--interval",
            "0.5",
            "--verify",
            "--duration",
            "0",
        ],
        vec!["bench", "l2fwd", "--netns", nb, "-i", ib, "--duration", "0", "--tx-budget", "64"],
        vec![
            "bench",
            "txonly",
            "--netns",
            na,
            "-i",
            ia,
            "--dst-mac",
            &mb,
            "--src-mac",
            "02:00:00:00:00:01",
            "--src-ip",
            "10.99.0.1",
            "--dst-ip",
            "10.99.0.2",
            "--src-port",
            "1000",
            "--dst-port",
            "2000",
            "--frame-len",
            "128",
            "--count",
            "10",
            "--rate",
            "1000",
            "--duration",
            "0",
        ],
        vec!["bench", "xdpdrop", "--netns", nb, "-i", ib, "--duration", "0", "--json"],
        vec!["bench", "xdpdrop", "--netns", nb, "-i", ib, "--xdp-mode", "skb", "--force", "--duration", "0"],
        vec![
            "gen",
            "--engine",
            "xdp-live",
            "--netns",
            na,
            "-i",
            ia,
            "--threads",
            "2",
            "--rate",
            "1000",
            "--count",
            "10",
            "--duration",
            "0",
        ],
        vec!["gen", "--engine", "xsk", "--netns", na, "-i", ia, "--duration", "0", "--json"],
        vec!["testbed", "info"],
        vec!["testbed", "info", bed.name(), "--json"],
        vec!["demo", "--duration", "0", "--json", "--threads", "1", "--app-cpu", "1", "--gen-cpu", "0"],
        vec!["filter", "check", "--rule", "proto=udp,dst_port=9,action=drop", "--json"],
        vec![
            "filter",
            "load",
            "--netns",
            nb,
            "-i",
            ib,
            "--rule",
            "proto=udp,dst_port=9,action=drop",
            "--rule",
            "tcp_flags=syn+!ack,action=pass",
            "--xdp-mode",
            "skb",
            "--duration",
            "0",
            "--json",
        ],
        vec![
            "filter",
            "load",
            "--netns",
            nb,
            "-i",
            ib,
            "--rule",
            "proto=udp,dst_port=5000-5999,action=xsk",
            "--duration",
            "0",
            "-e",
        ],
        vec!["bench", "rxdrop", "--netns", nb, "-i", ib, "--rules", &rules, "--duration", "0"],
        vec!["bench", "l2fwd", "--netns", nb, "-i", ib, "--rules", &rules, "--duration", "0", "--json"],
        vec!["bench", "ddos", "--duration", "0"],
        vec!["compare", "--duration", "0", "--runs", "1", "--json"],
        vec!["compare", "--inject", "--duration", "0", "--runs", "1"],
        vec!["bench", "rxdrop", "--path", "tpacket", "--netns", nb, "-i", ib, "--duration", "0"],
        vec!["bench", "txonly", "--path", "tpacket", "--netns", na, "-i", ia, "--duration", "0.2", "--count", "10"],
        vec!["bench", "rxdrop", "--path", "tap", "--netns", nb, "-i", "fpsmoketap", "--duration", "0", "--json"],
        vec![
            "bench",
            "txonly",
            "--path",
            "tap-uring",
            "--netns",
            nb,
            "-i",
            "fpsmoketap",
            "--duration",
            "0.2",
            "--count",
            "10",
        ],
        vec!["compare", "--duration", "0", "--runs", "1", "--pin", "same", "--svg", "/dev/null"],
    ];
    for c in &cases {
        let o = run(c);
        assert!(o.status.success(), "{c:?}: {}", stderr(&o));
        assert!(attached(nb, ib).is_none(), "{c:?} left a program attached");
    }
    let _ = std::fs::remove_file(&rules_path);
    // filter load --detach / stats / reload / unload.
    let o = run(&["filter", "load", "--netns", nb, "-i", ib, "--rule", "proto=udp,dst_port=9,action=drop", "--detach"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(attached(nb, ib).is_some(), "--detach leaves it attached");
    for c in [
        vec!["filter", "stats", "--netns", nb, "-i", ib, "--duration", "0", "--json"],
        vec!["filter", "reload", "--netns", nb, "-i", ib, "--rule", "proto=udp,dst_port=10,action=drop"],
        vec!["filter", "unload", "--netns", nb, "-i", ib],
    ] {
        let o = run(&c);
        assert!(o.status.success(), "{c:?}: {}", stderr(&o));
    }
    assert!(attached(nb, ib).is_none(), "unload detached it");
    // testbed up / down of a named bed.
    let name = format!("sm{}", std::process::id() % 100000);
    let o = run(&["testbed", "up", "--name", &name, "--queues", "2", "--napi-cpu", "1", "--sender-qdisc", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(last_json(&o)["name"], name.as_str());
    let o = run(&["testbed", "down", &name]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!fastpath_testbed::list().unwrap().contains(&name), "testbed down removed it");
}
