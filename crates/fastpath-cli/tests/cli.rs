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
    assert_one_line_refusal(&format!("{args:?}"), &run(args), code, needles);
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
    assert_refused(
        &bed,
        &call(&base(&["--frame-size", "4097", "--unaligned-chunks"])),
        2,
        &["frame size 4097", "unaligned", "2048 to 4096"],
    );
    assert_refused(
        &bed,
        &call(&base(&["--frame-size", "4001", "--unaligned-chunks", "--copy-mode", "zero-copy"])),
        2,
        &["zero-copy", "4001", "cross page boundaries"],
    );
    assert_refused(
        &bed,
        &call(&base(&["--frame-size", "4096", "--headroom", "3393"])),
        2,
        &["headroom 3393", "at most 3392"],
    );
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
    // bench ddos: flood rates and defences are checked before any test bed exists.
    for (rates, want) in [("0", "\"0\""), ("1G", "\"1G\""), ("2M,2M", "2M is listed twice"), ("nan", "\"nan\"")] {
        assert_refused(&bed, &["bench", "ddos", "--flood-rates", rates, "--duration", "1"], 2, &[want, "max"]);
    }
    // --flood-sources: 1..=8388608 (10.128.0.0/9), a number.
    for n in ["0", "8388609", "64k", "-5", "abc"] {
        let named = format!("--flood-sources {n} is not accepted");
        assert_refused(&bed, &["bench", "ddos", "--flood-sources", n, "--duration", "1"], 2, &[&named, "1..=8388608"]);
    }
    let o = run(&["bench", "ddos", "--defences", "none,pf", "--duration", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("pf") && stderr(&o).contains("fastpath-10k"), "{}", stderr(&o));
    assert_refused(&bed, &["bench", "ddos", "--defences", "nft,nft", "--duration", "1"], 2, &["nft is listed twice"]);
    // The coalesced model's rx-usecs: in range, and only with that model.
    for us in ["0", "1001"] {
        let named = format!("--rx-usecs {us} is not accepted");
        assert_refused(&bed, &["bench", "ddos", "--rx-usecs", us, "--duration", "1"], 2, &[named.as_str(), "1..=1000"]);
    }
    assert_refused(
        &bed,
        &["bench", "ddos", "--model", "per-frame", "--rx-usecs", "20", "--duration", "1"],
        2,
        &["--rx-usecs", "--model per-frame"],
    );
    let o = run(&["bench", "ddos", "--model", "nic", "--duration", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nic") && stderr(&o).contains("coalesced"), "{}", stderr(&o));
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
        let p = fastpath::bpf::XdpDrop::load()
            .unwrap()
            .attach(
                &fastpath::netdev::Iface::resolve(&iface).unwrap(),
                fastpath::bpf::AttachOpts::mode(Some(fastpath::bpf::XdpMode::Native)),
            )
            .unwrap()
            .prog;
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
    // A new file each run (an existing one is refused without --overwrite).
    let svg_path = std::env::temp_dir().join(format!("fastpath-smoke-{}.svg", std::process::id()));
    let _ = std::fs::remove_file(&svg_path);
    let svg = svg_path.display().to_string();
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
        vec!["bench", "l2fwd", "--netns", nb, "-i", ib, "--queues", "2", "--spin", "--duration", "0"],
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
        vec!["compare", "--duration", "0", "--runs", "1", "--pin", "same", "--svg", &svg],
    ];
    for c in &cases {
        let o = run(c);
        assert!(o.status.success(), "{c:?}: {}", stderr(&o));
        assert!(attached(nb, ib).is_none(), "{c:?} left a program attached");
    }
    let _ = std::fs::remove_file(&rules_path);
    let _ = std::fs::remove_file(&svg_path);
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

/// Holds someone else's XDP program on `iface` in `ns` (attached by this test process) until
/// the returned sender is dropped or sent to.
fn hold_foreign(
    ns: &str,
    iface: &str,
    mode: fastpath::bpf::XdpMode,
    force: bool,
) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<Result<(), fastpath_testbed::TestbedError>>) {
    let (ns, iface) = (ns.to_string(), iface.to_string());
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let holder = fastpath_testbed::spawn_in_netns(&ns, move || {
        let dev = fastpath::netdev::Iface::resolve(&iface).unwrap();
        let p = fastpath::bpf::XdpDrop::load()
            .unwrap()
            .attach(&dev, fastpath::bpf::AttachOpts::mode(Some(mode)).force(force))
            .unwrap()
            .prog;
        tx.send(()).unwrap();
        let _ = done_rx.recv();
        drop(p);
    });
    rx.recv().expect("foreign program attached");
    (done_tx, holder)
}

fn ip(args: &[&str]) {
    let o = std::process::Command::new("ip").args(args).output().expect("ip (iproute2)");
    assert!(o.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// `--xdp-mode auto` when every mode is refused (a macvlan on top of the veth holds an XDP program,
/// so the kernel refuses the veth in both modes): one line listing each mode's error, exit 4,
/// nothing attached and nothing pinned; `--detach` does not panic.
#[test]
fn auto_mode_with_every_mode_refused_lists_each_and_leaves_nothing() {
    if !privileged("auto_mode_with_every_mode_refused_lists_each_and_leaves_nothing") {
        return;
    }
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    ip(&["-n", ns, "link", "add", "link", i, "name", "fpvl10", "type", "macvlan", "mode", "bridge"]);
    ip(&["-n", ns, "link", "set", "dev", "fpvl10", "up"]);
    let (done, holder) = hold_foreign(ns, "fpvl10", fastpath::bpf::XdpMode::Skb, false);
    let rule = "proto=udp,dst_port=9,action=drop";
    for args in [
        vec!["filter", "load", "--netns", ns, "-i", i, "--rule", rule, "--xdp-mode", "auto", "--detach"],
        vec!["filter", "load", "--netns", ns, "-i", i, "--rule", rule, "--xdp-mode", "auto", "--duration", "0"],
        vec!["bench", "rxdrop", "--netns", ns, "-i", i, "--xdp-mode", "auto", "--duration", "0"],
        vec!["bench", "xdpdrop", "--netns", ns, "-i", i, "--xdp-mode", "auto", "--duration", "0"],
    ] {
        assert_refused(&bed, &args, 4, &[i, "native: ", "skb: "]);
    }
    let iface = i.to_string();
    let dir = fastpath_testbed::run_in_netns(ns, move || fastpath::bpf::classifier::pin_dir(&iface)).unwrap();
    assert!(std::fs::symlink_metadata(&dir).is_err(), "{} left behind", dir.display());
    done.send(()).unwrap();
    holder.join().unwrap().unwrap();
}

/// Interface names are checked like the kernel's dev_valid_name before they become part of a
/// path or a system call: one line naming the value and what is accepted, exit 2.
#[test]
fn bad_interface_names_are_refused_before_use() {
    for name in ["../x", "abcdefghijklmnop", "a/b", ".", "a:b", "a b"] {
        for args in [
            vec!["bench", "rxdrop", "-i", name, "--duration", "0"],
            vec!["bench", "txonly", "--path", "tap", "-i", name, "--duration", "0"],
            vec!["gen", "-i", name, "--duration", "0"],
            vec!["filter", "load", "-i", name, "--rule", "proto=udp,action=drop", "--duration", "0"],
            vec!["filter", "load", "-i", name, "--rule", "proto=udp,action=drop", "--detach"],
            vec!["filter", "reload", "-i", name, "--rule", "proto=udp,action=drop"],
            vec!["filter", "stats", "-i", name, "--duration", "0"],
            vec!["filter", "unload", "-i", name],
        ] {
            let o = run(&args);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: one line: {err}");
            assert!(err.contains(&format!("{name:?}")) && err.contains("1 to 15 bytes"), "{args:?}: {err}");
        }
    }
}

/// `--duration`/`--interval` out of range (or a busy-loop interval) are refused by the parser:
/// one line naming the value and the accepted range, exit 2, no panic.
#[test]
fn out_of_range_seconds_are_refused_without_panic() {
    if !privileged("out_of_range_seconds_are_refused_without_panic") {
        return;
    }
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    for (extra, needles) in [
        (vec!["--duration", "1e20"], vec!["1e20", "0..=31536000"]),
        (vec!["--duration", "0.3", "--interval", "1e19"], vec!["1e19", "0.1..=3600"]),
        (vec!["--duration", "0.3", "--interval", "1e-9"], vec!["1e-9", "0.1..=3600"]),
        (vec!["--duration=-1"], vec!["-1", "0..=31536000"]),
    ] {
        let mut args = vec!["bench", "rxdrop", "--netns", ns, "-i", i];
        args.extend(&extra);
        assert_refused(&bed, &args, 2, &needles);
        let mut args = vec!["filter", "load", "--netns", ns, "-i", i, "--rule", "proto=udp,action=drop"];
        args.extend(&extra);
        assert_refused(&bed, &args, 2, &needles);
    }
    assert_refused(&bed, &["demo", "--duration", "1e20"], 2, &["1e20", "0..=31536000"]);
    assert_refused(&bed, &["compare", "--duration", "inf"], 2, &["inf", "0..=31536000"]);
}

/// Waits up to `limit` for the child to exit; returns its exit code, stderr, and when it ended.
fn wait_exit(mut child: std::process::Child, limit: std::time::Duration) -> (Option<i32>, String, std::time::Instant) {
    use std::io::Read;
    let t0 = std::time::Instant::now();
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            let end = std::time::Instant::now();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return (st.code(), err, end);
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running {limit:?} after the event");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A bench or a foreground `filter load` whose interface is deleted or set down stops within
/// about a second with one line naming the interface and what happened, exit 3, and nothing
/// of ours stays on the interface.
#[test]
fn runs_stop_when_their_interface_is_deleted_or_down() {
    if !privileged("runs_stop_when_their_interface_is_deleted_or_down") {
        return;
    }
    let cases = ["rxdrop", "l2fwd", "txonly", "filter"]
        .into_iter()
        .flat_map(|k| [(k, "down"), (k, "deleted")])
        .chain([("rxdrop", "down-up-down"), ("filter", "down-up-down")]);
    for (kind, event) in cases {
        let bed = bed();
        let (ns, i) = (bed.ns_b(), bed.iface_b());
        if event == "down-up-down" {
            // Down at the start is the user's choice and no loss; going down later is.
            ip(&["-n", ns, "link", "set", "dev", i, "down"]);
        }
        let mut args = match kind {
            "filter" => vec!["filter", "load", "--rule", "proto=udp,dst_port=9,action=drop"],
            m => vec!["bench", m],
        };
        args.extend(["--netns", ns, "-i", i, "--duration", "60", "--json"]);
        let child = if kind == "filter" {
            let c = fastpath()
                .args(&args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn");
            let t = std::time::Instant::now();
            while attached(ns, i).is_none() {
                assert!(t.elapsed() < std::time::Duration::from_secs(20), "filter load never attached");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
            c
        } else {
            // Keep reading stdout so the process never blocks on a full pipe nor hits a closed one.
            Running::start(&args).into_child()
        };
        if event == "down-up-down" {
            ip(&["-n", ns, "link", "set", "dev", i, "up"]);
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        let t_event = std::time::Instant::now();
        match event {
            "deleted" => ip(&["-n", ns, "link", "del", "dev", i]),
            _ => ip(&["-n", ns, "link", "set", "dev", i, "down"]),
        }
        let (code, err, end) = wait_exit(child, std::time::Duration::from_secs(10));
        let took = end - t_event;
        assert!(took < std::time::Duration::from_secs(3), "{kind}/{event}: exited {took:?} after the event");
        assert_eq!(code, Some(3), "{kind}/{event}: {err}");
        // The event's one line is the final error (the operator log's info lines aside).
        let lines: Vec<&str> = err.lines().filter(|l| !l.starts_with("fastpath: info: ")).collect();
        assert_eq!(lines.len(), 1, "{kind}/{event}: one line: {err}");
        assert!(lines[0].starts_with("fastpath: error: "), "{kind}/{event}: {err}");
        let what = if event == "deleted" { "deleted" } else { "down" };
        assert!(err.contains(i) && err.contains(what), "{kind}/{event}: {err}");
        if event != "deleted" {
            assert!(attached(ns, i).is_none(), "{kind}/{event}: left an XDP program");
        }
    }
}

/// On a veth with MTU 9000 the kernel refuses native XDP for a single-buffer program (ERANGE),
/// so every program fastpath attaches there is frags-aware: rxdrop's sockets are multi-buffer
/// (XDP_USE_SG) behind the `xdp.frags` variant of xsk_redirect, and xdp_drop and the classifier
/// attach natively too. The path says why multi-buffer is on.
#[test]
fn jumbo_mtu_attaches_frags_aware_programs_natively() {
    if !privileged("jumbo_mtu_attaches_frags_aware_programs_natively") {
        return;
    }
    let bed = bed();
    bed.set_mtu(9000).expect("mtu 9000");
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let o = run(&["bench", "rxdrop", "--netns", ns, "-i", i, "--xdp-mode", "native", "--duration", "0", "--json"]);
    assert!(o.status.success(), "rxdrop native at MTU 9000: {}", stderr(&o));
    let s = last_json(&o);
    assert_eq!(s["path"]["xdp_mode"], "native", "{s}");
    assert_eq!(s["path"]["multi_buffer"], true, "{s}");
    assert!(s["path"]["notes"].to_string().contains("MTU 9000 > 3822"), "multi-buffer is explained: {s}");
    assert!(attached(ns, i).is_none());
    let o = run(&["bench", "xdpdrop", "--netns", ns, "-i", i, "--xdp-mode", "native", "--duration", "0", "--json"]);
    assert!(o.status.success(), "xdpdrop is frags-aware: native at MTU 9000: {}", stderr(&o));
    assert_eq!(last_json(&o)["path"]["xdp_mode"], "native");
    assert_json_keys("bench_xdpdrop_smoke", &last_json(&o));
    let o = run(&[
        "filter",
        "load",
        "--netns",
        ns,
        "-i",
        i,
        "--rule",
        "proto=udp,action=drop",
        "--xdp-mode",
        "native",
        "--duration",
        "0",
    ]);
    assert!(o.status.success(), "the classifier is frags-aware: native at MTU 9000: {}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("(native)"), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(attached(ns, i).is_none());
}

/// SIGHUP and SIGQUIT get the clean shutdown of SIGINT/SIGTERM: a summary, exit 0, prompt, no
/// program left attached; a command that built a test bed (demo) removes it.
#[test]
fn sighup_and_sigquit_shut_down_cleanly() {
    if !privileged("sighup_and_sigquit_shut_down_cleanly") {
        return;
    }
    let bed = bed();
    for sig in ["-HUP", "-QUIT"] {
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
        assert!(attached(bed.ns_b(), bed.iface_b()).is_some());
        let t = std::time::Instant::now();
        let pid = r.child.id().to_string();
        let _ = std::process::Command::new("kill").args([sig, &pid]).status();
        let (summary, status) = r.finish();
        assert!(t.elapsed() < std::time::Duration::from_secs(3), "{sig}: took {:?}", t.elapsed());
        assert!(status.success(), "{sig}: {status:?}");
        assert_eq!(summary["type"], "summary", "{sig}: a summary at exit");
        assert!(attached(bed.ns_b(), bed.iface_b()).is_none(), "{sig} left the program attached");
    }
    for sig in ["-HUP", "-QUIT"] {
        let child = fastpath()
            .args(["demo", "--duration", "30", "--json"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn demo");
        let prefix = fastpath_testbed::default_name_prefix(child.id());
        let mine = || fastpath_testbed::list().unwrap().into_iter().filter(|b| b.starts_with(&prefix)).count();
        let t = std::time::Instant::now();
        while mine() == 0 {
            assert!(t.elapsed() < std::time::Duration::from_secs(20), "demo never built its test bed");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
        let t = std::time::Instant::now();
        let _ = std::process::Command::new("kill").args([sig, &child.id().to_string()]).status();
        let (code, err, _) = wait_exit(child, std::time::Duration::from_secs(15));
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "demo {sig}: took {:?}", t.elapsed());
        // Demo reports an interrupted run as a runtime failure (exit 5); what matters is that it
        // ran its shutdown (not killed by the signal) and removed its bed.
        assert!(code.is_some() && err.contains("interrupted"), "demo {sig}: {code:?} {err}");
        assert_eq!(mine(), 0, "demo {sig} left its test bed");
    }
}

/// Runs fastpath with its stdout a pipe whose reader is gone: (exit status, stderr, seconds).
fn with_closed_stdout(args: &[&str]) -> (std::process::ExitStatus, String, f64) {
    use std::os::fd::{FromRawFd, OwnedFd};
    // The pipe's reader is gone before the command starts (`| true`), so its first write fails
    // with EPIPE whatever the timing. (Dropping the reader after spawn raced a fast command:
    // `ss` wrote its header into the pipe first and ended 0.)
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0, "pipe2");
    // SAFETY: pipe2 succeeded: both are open descriptors that nothing else owns.
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(reader);
    let t = std::time::Instant::now();
    let c = fastpath()
        .args(args)
        .stdout(std::process::Stdio::from(writer))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn fastpath");
    let o = c.wait_with_output().unwrap();
    (o.status, stderr(&o), t.elapsed().as_secs_f64())
}

/// Every subcommand that prints, with stdout a closed pipe (`fastpath probe | true`): it ends
/// quietly with exit status 141 (what a shell shows for a tool killed by SIGPIPE), no panic, a
/// long-running one stops at its first line instead of running on, and nothing is left
/// attached. (Before: exit 101 and "panicked ... failed printing to stdout: Broken pipe".)
#[test]
fn a_closed_stdout_ends_every_subcommand_quietly() {
    if !privileged("a_closed_stdout_ends_every_subcommand_quietly") {
        return;
    }
    let bed = bed();
    let (nb, ib, na, ia) = (bed.ns_b(), bed.iface_b(), bed.ns_a(), bed.iface_a());
    let dir = std::env::temp_dir().join(format!("fastpath-epipe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("c.pcapng").to_string_lossy().into_owned();
    let dst = mac(bed.mac_b());
    let tb = format!("fpep{}", std::process::id() % 100000);
    let rule = "proto=udp,dst_port=9,action=drop";
    let cases: Vec<Vec<&str>> = vec![
        vec!["probe"],
        vec!["testbed", "up", "--name", &tb],
        vec!["testbed", "info"],
        vec!["testbed", "info", &tb, "--json"],
        vec!["filter", "check", "--rule", rule],
        vec!["filter", "load", "--netns", nb, "-i", ib, "--rule", rule, "--duration", "30"],
        vec!["filter", "load", "--netns", nb, "-i", ib, "--rule", rule, "--detach"],
        vec!["filter", "reload", "--netns", nb, "-i", ib, "--rule", rule],
        // --interval: interval lines on a pipe only when asked for (the first write fails).
        vec!["filter", "stats", "--netns", nb, "-i", ib, "--duration", "30", "--interval", "1"],
        vec!["filter", "unload", "--netns", nb, "-i", ib],
        vec!["bench", "rxdrop", "--netns", nb, "-i", ib, "--duration", "30", "--interval", "1"],
        vec![
            "gen",
            "--netns",
            na,
            "-i",
            ia,
            "--dst-mac",
            &dst,
            "--duration",
            "30",
            "--rate",
            "1000",
            "--interval",
            "1",
        ],
        vec!["fwd", "--netns", nb, "-i", ib, "-i", "lo", "--mode", "l2", "--duration", "30", "--interval", "1"],
        vec!["ss", "--netns", nb],
        vec!["doctor", "--netns", nb, "-i", ib, "--window", "0.2"],
        vec!["capture", "--netns", nb, "-i", ib, "-w", &pcap, "--duration", "0.5"],
        vec!["demo", "--duration", "0"],
        vec!["compare", "--duration", "0", "--runs", "1"],
    ];
    let mut bad = Vec::new();
    for args in &cases {
        let (st, err, secs) = with_closed_stdout(args);
        if st.code() != Some(141) || err.contains("panicked") || secs > 20.0 {
            bad.push(format!("{args:?}: {st:?} after {secs:.1} s, stderr: {err}"));
        }
        // load --detach leaves the classifier attached (by design) until unload.
        let pinned = args.contains(&"--detach") || args.contains(&"reload") || args.contains(&"stats");
        assert!(pinned || attached(nb, ib).is_none(), "{args:?} left an XDP program attached");
    }
    let _ = run(&["testbed", "down", &tb]); // (prints nothing)
    let _ = run(&["filter", "unload", "--netns", nb, "-i", ib]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// `doctor -q Q` with a queue the interface does not have, and `gen --rate 0` (sends nothing):
/// refused in one line. (Before: doctor said "OK" for queue 4294967295 of a one-queue veth;
/// gen --rate 0 ran, sent nothing and exited 0.)
#[test]
fn a_queue_out_of_range_and_a_zero_rate_are_refused() {
    if !privileged("a_queue_out_of_range_and_a_zero_rate_are_refused") {
        return;
    }
    let bed = bed();
    let (nb, ib) = (bed.ns_b(), bed.iface_b());
    for q in ["1", "4294967295"] {
        let o = run(&["doctor", "--netns", nb, "-i", ib, "-q", q, "--window", "0.2"]);
        assert_one_line_refusal("doctor -q", &o, 2, &[&format!("-q {q}"), "1 receive queue", "0..=0"]);
    }
    let dst = mac(bed.mac_b());
    let o =
        run(&["gen", "--netns", bed.ns_a(), "-i", bed.iface_a(), "--dst-mac", &dst, "--duration", "1", "--rate", "0"]);
    assert_one_line_refusal("gen --rate 0", &o, 2, &["--rate", "0"]);
}

/// `doctor -q Q` on an interface whose driver reports no channels (ETHTOOL_GCHANNELS answers
/// EOPNOTSUPP, e.g. `lo`): the queue is still checked against the kernel's receive queue count
/// (real_num_rx_queues, /sys/class/net/IFACE/queues/rx-*). (Review finding: doctor -q
/// 4294967295 -i lo said OK and exited 0, the range check being skipped when the driver reports
/// no channels.)
#[test]
fn a_queue_out_of_range_is_refused_without_ethtool_channels() {
    if !privileged("a_queue_out_of_range_is_refused_without_ethtool_channels") {
        return;
    }
    let bed = bed();
    for q in ["1", "4294967295"] {
        let o = run(&["doctor", "--netns", bed.ns_b(), "-i", "lo", "-q", q, "--window", "0.2"]);
        assert_one_line_refusal("doctor -i lo -q", &o, 2, &[&format!("-q {q}"), "lo", "0..=0"]);
    }
}

/// TX- and RX-metadata flags on a mode or path that would ignore them are refused in one line
/// before anything is set up (bench ddos, redirect-cpu and gen --pcap are dispatched apart).
#[test]
fn metadata_flags_are_refused_where_they_would_be_ignored() {
    let cases: [(&str, &[&str], &[&str]); 4] = [
        ("ddos --tx-csum", &["bench", "ddos", "--tx-csum", "--duration", "1"], &["--tx-csum", "txonly", "ddos"]),
        (
            "redirect-cpu --tx-timestamp",
            &["bench", "redirect-cpu", "-i", "lo", "--tx-timestamp", "--duration", "1"],
            &["--tx-timestamp", "txonly", "redirect-cpu"],
        ),
        ("ddos --rx-meta", &["bench", "ddos", "--rx-meta", "--duration", "1"], &["--rx-meta", "rxdrop", "ddos"]),
        (
            "gen --pcap --tx-csum",
            &["gen", "-i", "lo", "--pcap", "/nonexistent.pcap", "--tx-csum"],
            &["--tx-csum", "--pcap"],
        ),
    ];
    for (what, args, needles) in cases {
        assert_one_line_refusal(what, &run(args), 2, needles);
    }
}
