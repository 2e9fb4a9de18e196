//! `fastpath filter` and the classifier on a test bed (root).

mod common;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use fastpath::bpf::{Classifier, XdpMode};
use fastpath::rules::compile::compile;
use fastpath::rules::parse_toml;
use fastpath_testbed::{Testbed, TestbedConfig};
use serde_json::Value;

fn quiet_bed() -> Testbed {
    Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed")
}

/// Unloads the classifier pinned on `iface` in `ns` when dropped (declare it after the test
/// bed, so it drops first): a failing test leaves no pins in /sys/fs/bpf/fastpath.
struct Pinned<'a>(&'a str, &'a str);

impl Drop for Pinned<'_> {
    fn drop(&mut self) {
        let _ = run(&["filter", "unload", "--netns", self.0, "-i", self.1]);
    }
}

fn write(dir: &tempdir::Dir, name: &str, text: &str) -> String {
    let p = dir.0.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new(tag: &str) -> Dir {
            let p = std::env::temp_dir().join(format!("fastpath-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// 100 reloads while packets flow: every packet is counted by exactly one rule set, and none is
/// ever classified by a half-written set (which would show as no_match: both sets drop all of
/// the generator's frames by a rule, the default is pass).
#[test]
fn hot_reload_under_traffic_loses_and_half_classifies_nothing() {
    if !privileged("hot_reload_under_traffic_loses_and_half_classifies_nothing") {
        return;
    }
    let bed = quiet_bed();
    let mut a = String::from("default = \"pass\"\n");
    for i in 0..50 {
        a.push_str(&format!(
            "[[rule]]\nname = \"filler {i}\"\nproto = \"udp\"\ndst_port = {}\naction = \"pass\"\n",
            20000 + i
        ));
    }
    a.push_str("[[rule]]\nname = \"a\"\nsrc = \"10.99.0.0/24\"\nproto = \"udp\"\ndst_port = 9\naction = \"drop\"\n");
    let b = "default = \"pass\"\n[[rule]]\nname = \"b\"\nproto = \"udp\"\ndst_port = \"1-100\"\naction = \"drop\"\n";
    let sets =
        [compile("a", &parse_toml("a", &a).unwrap()).unwrap(), compile("b", &parse_toml("b", b).unwrap()).unwrap()];
    let (ns_b, if_b) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    let running = Arc::new(AtomicBool::new(true));
    let (tx, rx) = std::sync::mpsc::channel();
    let r2 = running.clone();
    let reloader = fastpath_testbed::spawn_in_netns(&ns_b, move || {
        let dev = fastpath::netdev::Iface::resolve(&if_b).unwrap();
        let cls = Classifier::load().unwrap();
        cls.swap_in(&sets[0]).unwrap();
        let cls = cls.attach(&dev, fastpath::bpf::AttachOpts::mode(Some(XdpMode::Native))).unwrap().prog;
        tx.send(()).unwrap();
        let (mut counted, mut no_match, mut reloads) = (0u64, 0u64, 0u32);
        let mut harvest = |cls: &Classifier, set: fastpath::bpf::SetIndex| {
            let t = cls.totals(set).unwrap();
            counted += t.counters.iter().take(6).map(|c| c.1).sum::<u64>();
            no_match += t.packets("no_match") + t.packets("malformed");
        };
        while r2.load(Ordering::Relaxed) || reloads < 100 {
            let old = cls.active().unwrap();
            cls.swap_in(&sets[(reloads as usize + 1) % 2]).unwrap();
            reloads += 1;
            // Let packets that read the old index before the flip finish, then read its totals
            // (they stay until the next install into that set zeroes them).
            std::thread::sleep(Duration::from_millis(5));
            harvest(&cls, old);
        }
        std::thread::sleep(Duration::from_millis(200));
        harvest(&cls, cls.active().unwrap());
        (counted, no_match, reloads)
    });
    rx.recv_timeout(Duration::from_secs(30)).expect("classifier attached");
    let g = run(&[
        "gen",
        "--netns",
        bed.ns_a(),
        "-i",
        bed.iface_a(),
        "--count",
        "1000000",
        "--rate",
        "100000",
        "--json",
        "--duration",
        "60",
        "--cpu",
        "0",
    ]);
    assert!(g.status.success(), "{}", stderr(&g));
    running.store(false, Ordering::Relaxed);
    let (counted, no_match, reloads) = reloader.join().unwrap().unwrap();
    let gs = last_json(&g);
    let sent = n(&gs["streams"][0]["frames"]);
    let xmit_err: u64 =
        gs["ethtool"].as_object().unwrap().iter().filter(|(k, _)| k.contains("xmit_err")).map(|(_, v)| n(v)).sum();
    assert!(reloads >= 100, "{reloads} reloads");
    assert_eq!(no_match, 0, "a packet fell through to the default: classified by a half-written set?");
    assert_eq!(
        sent,
        counted + xmit_err,
        "sent {sent} = counted by a rule set {counted} + sender xdp_xmit_err {xmit_err}"
    );
}

/// Selective bypass: UDP 5000-5999 reaches the AF_XDP socket and nothing else does; ping and a
/// TCP connection to the host keep working meanwhile.
#[test]
fn selective_bypass_steers_only_the_chosen_flows() {
    if !privileged("selective_bypass_steers_only_the_chosen_flows") {
        return;
    }
    let bed = Testbed::up(&TestbedConfig::default()).expect("bed");
    let dir = tempdir::Dir::new("bypass");
    let rules = write(
        &dir,
        "bypass.toml",
        "default = \"pass\"\n[[rule]]\nname = \"app\"\nproto = \"udp\"\ndst_port = \"5000-5999\"\naction = \"xsk\"\n",
    );
    let rx = Running::start(&[
        "bench",
        "rxdrop",
        "--rules",
        &rules,
        "--netns",
        bed.ns_b(),
        "-i",
        bed.iface_b(),
        "--verify",
        "--json",
        "--duration",
        "120",
        "--poll",
    ]);
    // A TCP service on the host side of ns b.
    let listener =
        fastpath_testbed::run_in_netns(bed.ns_b(), || std::net::TcpListener::bind("10.99.0.2:8080").unwrap()).unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&buf).unwrap();
    });
    for (port, count) in [("5500", "10000"), ("6000", "10000"), ("4999", "1000")] {
        let g = gen_xsk(&bed, &["--dst-port", port, "--count", count, "--rate", "50000", "--json", "--duration", "30"]);
        assert!(g.status.success(), "{}", stderr(&g));
    }
    let ping = fastpath_testbed::ns_command(bed.ns_a(), "ping")
        .args(["-c", "3", "-i", "0.2", "-W", "2", "10.99.0.2"])
        .output()
        .expect("ping (iputils-ping)");
    assert!(ping.status.success(), "ping through the classifier: {}", String::from_utf8_lossy(&ping.stdout));
    let echoed = fastpath_testbed::run_in_netns(bed.ns_a(), || {
        let mut c =
            std::net::TcpStream::connect_timeout(&"10.99.0.2:8080".parse().unwrap(), Duration::from_secs(5)).unwrap();
        c.write_all(b"hello").unwrap();
        let mut buf = [0u8; 5];
        c.read_exact(&mut buf).unwrap();
        buf
    })
    .unwrap();
    assert_eq!(&echoed, b"hello", "TCP to the host works through the classifier");
    server.join().unwrap();
    wait_rx_settled(bed.ns_b(), bed.iface_b());
    let (s, status) = rx.terminate();
    assert!(status.success());
    let v = &s["verify"];
    assert_eq!(n(&v["unique"]), 10_000, "exactly the port-5500 frames reached the socket: {v}");
    assert_eq!(n(&v["frames"]), 10_000, "and nothing else did (no ping, no TCP, no other port): {v}");
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none());
}

/// Bad rule files: one line naming file:line:col and what is accepted, exit 2, and the rule set
/// already on the interface stays in force untouched.
#[test]
fn bad_rules_are_refused_and_the_set_in_force_stays() {
    if !privileged("bad_rules_are_refused_and_the_set_in_force_stays") {
        return;
    }
    let bed = quiet_bed();
    let dir = tempdir::Dir::new("badrules");
    let good =
        write(&dir, "good.toml", "[[rule]]\nname = \"nine\"\nproto = \"udp\"\ndst_port = 9\naction = \"drop\"\n");
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let o = run(&["filter", "load", &good, "--netns", ns, "-i", i, "--detach"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let _pins = Pinned(ns, i);
    let stats = || last_json(&run(&["filter", "stats", "--netns", ns, "-i", i, "--duration", "0", "--json", "-e"]));
    let before = stats();
    assert_json_keys("filter_stats", &before);
    let mut many = String::new();
    for k in 0..131_073 {
        many.push_str(&format!("[[rule]]\ndst_port = {}\naction = \"drop\"\n", k % 65536));
    }
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        ("syntax.toml", "[[rule]\naction = \"drop\"\n".into(), vec!["syntax.toml:1:"]),
        (
            "unknown.toml",
            "[[rule]]\naction = \"drop\"\ncolour = \"red\"\n".into(),
            vec!["unknown.toml:3:1:", "unknown field `colour`", "expected one of"],
        ),
        (
            "prefix.toml",
            "[[rule]]\nsrc = \"10.0.0.0/33\"\naction = \"drop\"\n".into(),
            vec!["prefix.toml:2:7:", "10.0.0.0/33", "IPv4 or IPv6 prefix"],
        ),
        (
            "range.toml",
            "[[rule]]\ndst_port = \"2000-1000\"\naction = \"drop\"\n".into(),
            vec!["range.toml:2:12:", "upside down"],
        ),
        (
            "redirect.toml",
            "[[rule]]\naction = \"redirect\"\niface = \"nosuch9\"\n".into(),
            vec!["redirect.toml:3:9:", "nosuch9", "no such interface"],
        ),
        ("many.toml", many, vec!["many.toml", "at most 131072"]),
    ];
    for (name, text, needles) in &cases {
        let p = write(&dir, name, text);
        for verb in ["reload", "check"] {
            let o = match verb {
                "reload" => run(&["filter", "reload", &p, "--netns", ns, "-i", i]),
                _ => run(&["filter", "check", &p]),
            };
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{verb} {name}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{verb} {name}: one line: {err}");
            for nd in needles {
                assert!(err.contains(nd), "{verb} {name}: {err:?} lacks {nd:?}");
            }
        }
        let after = stats();
        assert_eq!(after["rule_set"], before["rule_set"], "{name}: the set in force was not swapped");
        assert_eq!(after["rules"], before["rules"], "{name}: the set in force is untouched");
    }
    // A bad file on load attaches nothing (on another, clean bed).
    let bed2 = quiet_bed();
    let bad = write(&dir, "bad2.toml", "[[rule]]\nproto = \"sctp\"\naction = \"drop\"\n");
    let o = run(&["filter", "load", &bad, "--netns", bed2.ns_b(), "-i", bed2.iface_b()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("bad2.toml:2:9: proto \"sctp\""), "{}", stderr(&o));
    assert!(attached(bed2.ns_b(), bed2.iface_b()).is_none());
    let o = run(&["filter", "unload", "--netns", ns, "-i", i]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(attached(ns, i).is_none(), "unload detached it");
}

/// `filter stats --json` lists every rule with its counters, rules without hits included.
#[test]
fn stats_json_lists_every_rule_with_its_counters() {
    if !privileged("stats_json_lists_every_rule_with_its_counters") {
        return;
    }
    let bed = quiet_bed();
    let dir = tempdir::Dir::new("statsjson");
    let rules = write(
        &dir,
        "two.toml",
        "[[rule]]\nname = \"nine\"\nproto = \"udp\"\ndst_port = 9\naction = \"drop\"\n\
         [[rule]]\nname = \"ten\"\nproto = \"udp\"\ndst_port = 10\naction = \"drop\"\n",
    );
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let o = run(&["filter", "load", &rules, "--netns", ns, "-i", i, "--detach"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let _pins = Pinned(ns, i);
    let stats = || {
        let o = run(&["filter", "stats", "--netns", ns, "-i", i, "--duration", "0", "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        last_json(&o)
    };
    let rule = |s: &Value, name: &str| -> (u64, u64) {
        let r = s["rules"]
            .as_array()
            .expect("key rules")
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("rule {name} missing from {s}"));
        (r["packets"].as_u64().expect("key packets"), r["bytes"].as_u64().expect("key bytes"))
    };
    // Nothing sent yet: both rules, zero counters.
    let s = stats();
    assert_eq!((rule(&s, "nine"), rule(&s, "ten")), ((0, 0), (0, 0)), "{s}");
    let g = gen_xsk(&bed, &["--dst-port", "9", "--count", "100", "--rate", "10000", "--duration", "30"]);
    assert!(g.status.success(), "{}", stderr(&g));
    wait_rx_settled(ns, i);
    let s = stats();
    assert_eq!(rule(&s, "nine"), (100, 6400), "{s}");
    assert_eq!(rule(&s, "ten"), (0, 0), "the rule without hits is listed too: {s}");
    let o = run(&["filter", "unload", "--netns", ns, "-i", i]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `filter reload` on a classifier that no longer runs on the interface (another program
/// replaced it; the interface was deleted and recreated) is refused: one line naming the
/// interface and what happened, exit 3, nothing written; `stats` says so too; `unload` still
/// cleans up.
#[test]
fn reload_refuses_a_classifier_no_longer_attached() {
    if !privileged("reload_refuses_a_classifier_no_longer_attached") {
        return;
    }
    let rule = "proto=udp,dst_port=9,action=drop";
    for case in ["replaced", "recreated"] {
        let bed = quiet_bed();
        let (ns, i) = (bed.ns_b(), bed.iface_b());
        let o = run(&["filter", "load", "--netns", ns, "-i", i, "--rule", rule, "--detach"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let _pins = Pinned(ns, i);
        let stats = || run(&["filter", "stats", "--netns", ns, "-i", i, "--duration", "0", "--json"]);
        let before = last_json(&stats());
        let mut holder = None;
        match case {
            "replaced" => {
                let (ns2, i2) = (ns.to_string(), i.to_string());
                let (tx, rx) = std::sync::mpsc::channel();
                let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
                let h = fastpath_testbed::spawn_in_netns(ns, move || {
                    let dev = fastpath::netdev::Iface::resolve(&i2).unwrap();
                    let p = fastpath::bpf::XdpDrop::load()
                        .unwrap()
                        .attach(&dev, fastpath::bpf::AttachOpts::mode(Some(XdpMode::Native)).force(true))
                        .unwrap()
                        .prog;
                    tx.send(()).unwrap();
                    let _ = done_rx.recv();
                    drop(p);
                });
                rx.recv().unwrap();
                let _ = ns2;
                holder = Some((done_tx, h));
            }
            _ => {
                let peer = format!("{i}x");
                for args in [
                    vec!["-n", ns, "link", "del", "dev", i],
                    vec!["-n", ns, "link", "add", i, "type", "veth", "peer", "name", &peer],
                ] {
                    let o = std::process::Command::new("ip").args(&args).output().unwrap();
                    assert!(o.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&o.stderr));
                }
            }
        }
        let o = run(&["filter", "reload", "--netns", ns, "-i", i, "--rule", "proto=udp,dst_port=10,action=drop"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(3), "{case}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{case}: one line: {err}");
        let what = if case == "replaced" { "not ours" } else { "deleted" };
        assert!(err.contains(i) && err.contains("no longer attached") && err.contains(what), "{case}: {err}");
        let o = stats();
        assert_eq!(o.status.code(), Some(3), "{case}: stats: {}", stderr(&o));
        assert!(stderr(&o).contains("no longer attached"), "{case}: {}", stderr(&o));
        let after = last_json(&o);
        assert_eq!(after["rule_set"], before["rule_set"], "{case}: nothing was written: {after}");
        let o = run(&["filter", "unload", "--netns", ns, "-i", i]);
        assert!(o.status.success(), "{case}: unload: {}", stderr(&o));
        let iface = i.to_string();
        let dir = fastpath_testbed::run_in_netns(ns, move || fastpath::bpf::classifier::pin_dir(&iface)).unwrap();
        assert!(std::fs::symlink_metadata(&dir).is_err(), "{case}: pins left at {}", dir.display());
        if let Some((done, h)) = holder {
            done.send(()).unwrap();
            h.join().unwrap().unwrap();
        }
    }
}

/// Runs `script` with `sh` in a private mount namespace on a bpffs of its own mounted at
/// /sys/fs/bpf (so planting files there touches nobody else), with $FP the binary under test.
fn in_private_bpffs(script: &str) -> std::process::Output {
    let bin = std::env::var("FASTPATH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_fastpath").to_string());
    std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!("set -e; mount -t bpf bpf /sys/fs/bpf; {script}"))
        .env("FP", bin)
        .output()
        .expect("unshare (util-linux)")
}

/// bpffs is mode 1777: a /sys/fs/bpf/fastpath that is a symlink, not root's, or group/world
/// writable is refused (one line, exit 3, nothing attached or followed), as is a symlink inside
/// a pin directory; a fresh one is made mode 0700.
#[test]
fn untrusted_pin_directories_are_refused() {
    if !privileged("untrusted_pin_directories_are_refused") {
        return;
    }
    let bed = quiet_bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let iface = i.to_string();
    let dir = fastpath_testbed::run_in_netns(ns, move || fastpath::bpf::classifier::pin_dir(&iface)).unwrap();
    let sub = dir.file_name().unwrap().to_string_lossy().into_owned();
    let bait = std::env::temp_dir().join(format!("fastpath-bait-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&bait);
    std::fs::create_dir_all(&bait).unwrap();
    std::fs::write(bait.join("file"), "x").unwrap();
    let load = format!("\"$FP\" filter load --netns {ns} -i {i} --rule proto=udp,action=drop --detach");
    let cases = [
        ("symlink", format!("ln -s {} /sys/fs/bpf/fastpath; {load}", bait.display()), "symlink"),
        ("foreign owner", format!("mkdir -m 700 /sys/fs/bpf/fastpath; chown 65534 /sys/fs/bpf/fastpath; {load}"), "uid 65534"),
        ("world writable", format!("mkdir -m 1777 /sys/fs/bpf/fastpath; {load}"), "writable"),
        (
            "symlink entry",
            format!(
                "mkdir -m 700 /sys/fs/bpf/fastpath /sys/fs/bpf/fastpath/{sub}; ln -s {} /sys/fs/bpf/fastpath/{sub}/link; \"$FP\" filter unload --netns {ns} -i {i}",
                bait.join("file").display()
            ),
            "symlink",
        ),
    ];
    for (name, script, needle) in &cases {
        let o = in_private_bpffs(script);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(3), "{name}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{name}: one line: {err}");
        assert!(err.contains("/sys/fs/bpf/fastpath") && err.contains(needle), "{name}: {err}");
        assert!(attached(ns, i).is_none(), "{name}: left a program attached");
        let planted: Vec<_> = std::fs::read_dir(&bait).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(planted.len(), 1, "{name}: wrote through the symlink: {planted:?}");
        assert!(bait.join("file").exists(), "{name}: removed the symlink's target");
    }
    // A fresh directory: made mode 0700, used, and the classifier unloads.
    let o = in_private_bpffs(&format!(
        "{load} >/dev/null; stat -c %a /sys/fs/bpf/fastpath; \"$FP\" filter unload --netns {ns} -i {i} >/dev/null"
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "700");
    assert!(attached(ns, i).is_none());
    let _ = std::fs::remove_dir_all(&bait);
}

/// A `filter reload` waiting for another reload's lock stops at Ctrl-C (every wait loop checks
/// the stop flag) instead of blocking in flock() until the other one is done.
#[test]
fn reload_waiting_for_the_lock_stops_on_sigint() {
    if !privileged("reload_waiting_for_the_lock_stops_on_sigint") {
        return;
    }
    let bed = quiet_bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let o = run(&["filter", "load", "--netns", ns, "-i", i, "--rule", "proto=udp,dst_port=9,action=drop", "--detach"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let _pins = Pinned(ns, i);
    let iface = i.to_string();
    let dir = fastpath_testbed::run_in_netns(ns, move || fastpath::bpf::classifier::pin_dir(&iface)).unwrap();
    let lock = format!("/run/fastpath/{}.lock", dir.file_name().unwrap().to_string_lossy());
    // Another holder of the lock: one process this test starts and ends by its pid (the shell
    // takes the lock on fd 9, says so, then becomes `sleep`, which keeps it). A reload still
    // waiting 5 s after SIGINT fails (a wide bound; it ends at once on an idle machine).
    let mut holder = std::process::Command::new("sh")
        .args(["-c", &format!("exec 9>{lock}; flock 9; echo locked; exec sleep 60")])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sh + flock (util-linux)");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(holder.stdout.take().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), "locked", "the holder took the lock");
    let mut reload = fastpath()
        .args(["filter", "reload", "--netns", ns, "-i", i, "--rule", "proto=udp,dst_port=10,action=drop"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(reload.try_wait().unwrap().is_none(), "reload waits for the lock");
    let t = std::time::Instant::now();
    let _ = std::process::Command::new("kill").args(["-INT", &reload.id().to_string()]).status();
    let st = loop {
        if let Some(st) = reload.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(5) {
            let _ = reload.kill();
            let _ = holder.kill();
            let _ = holder.wait();
            panic!("reload still waiting for the lock 5 s after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(st.code().is_some() && !st.success(), "a clean failure, not killed by the signal: {st:?}");
    let _ = holder.kill();
    let _ = holder.wait();
    let o = run(&["filter", "unload", "--netns", ns, "-i", i]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `filter unload` while a reload holds the reload lock: unload waits for it, and the lock
/// file stays (deleting it would let a reload waiting on the old file and one creating a new
/// file both hold "the" lock). (Before: unload deleted the lock file at once.)
#[test]
fn unload_waits_for_a_reload_holding_the_lock_and_keeps_the_file() {
    if !privileged("unload_waits_for_a_reload_holding_the_lock_and_keeps_the_file") {
        return;
    }
    let bed = quiet_bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let o = run(&["filter", "load", "--netns", ns, "-i", i, "--rule", "proto=udp,dst_port=9,action=drop", "--detach"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let _pins = Pinned(ns, i);
    let iface = i.to_string();
    let dir = fastpath_testbed::run_in_netns(ns, move || fastpath::bpf::classifier::pin_dir(&iface)).unwrap();
    let lock = format!("/run/fastpath/{}.lock", dir.file_name().unwrap().to_string_lossy());
    // The holder (as a reload would): a shell takes the lock on fd 9, says so, sleeps, and leaves
    // a marker file just before it exits (which releases the lock).
    let marker = std::env::temp_dir().join(format!("fp-unload-marker-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let mut holder = std::process::Command::new("sh")
        .args(["-c", &format!("exec 9>{lock}; flock 9; echo locked; sleep 1; touch {}", marker.display())])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sh + flock (util-linux)");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(holder.stdout.take().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), "locked", "the holder took the lock");
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&lock).unwrap());
    let o = run(&["filter", "unload", "--netns", ns, "-i", i]);
    // The marker is written before the holder exits and releases the lock: an unload that did
    // not wait returns before it exists, whatever the machine's load.
    let waited = marker.exists();
    let _ = holder.wait();
    let _ = std::fs::remove_file(&marker);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(waited, "unload returned while the holder still held the lock");
    let still = std::fs::metadata(&lock).map(|m| std::os::unix::fs::MetadataExt::ino(&m)).ok();
    assert_eq!(still, Some(ino), "the lock file was deleted");
    assert!(attached(ns, i).is_none(), "unload detached it");
}

/// `filter show` prints the rule set in force of a pinned classifier, as `nft list ruleset`
/// does: its source, rule set, default and malformed actions, and each rule's name, text and
/// counters; after a reload, the new set's.
#[test]
fn show_prints_the_rule_set_in_force_with_texts_and_counters() {
    if !privileged("show_prints_the_rule_set_in_force_with_texts_and_counters") {
        return;
    }
    let bed = quiet_bed();
    let dir = tempdir::Dir::new("show");
    let rules = write(
        &dir,
        "two.toml",
        "default = \"pass\"\n[[rule]]\nname = \"nine\"\nproto = \"udp\"\ndst_port = 9\naction = \"drop\"\n\
         [[rule]]\ndst = \"10.99.7.0/24\"\ntcp_flags = \"syn,!ack\"\naction = \"drop\"\nrate = 10\n",
    );
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let o = run(&["filter", "load", &rules, "--netns", ns, "-i", i, "--detach"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let _pins = Pinned(ns, i);
    let g = gen_xsk(&bed, &["--dst-port", "9", "--count", "100", "--rate", "10000", "--duration", "30"]);
    assert!(g.status.success(), "{}", stderr(&g));
    wait_rx_settled(ns, i);
    let o = run(&["filter", "show", "--netns", ns, "-i", i, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = last_json(&o);
    assert_json_keys("filter_show", &s);
    assert_eq!(
        (s["source"].as_str(), s["default"].as_str(), s["malformed"].as_str()),
        (Some(rules.as_str()), Some("pass"), Some("drop")),
        "{s}"
    );
    let r = &s["rules"];
    assert_eq!(r.as_array().map(Vec::len), Some(2), "{s}");
    assert_eq!(
        (r[0]["name"].as_str(), r[0]["text"].as_str(), n(&r[0]["packets"]), n(&r[0]["bytes"])),
        (Some("nine"), Some("proto=udp,dst_port=9,action=drop"), 100, 6400),
        "{s}"
    );
    assert_eq!(
        (r[1]["name"].as_str(), r[1]["text"].as_str(), n(&r[1]["packets"])),
        (Some("rule 2"), Some("dst=10.99.7.0/24,tcp_flags=syn+!ack,action=drop,rate=10"), 0),
        "{s}"
    );
    let first_set = n(&s["rule_set"]);
    let text = run(&["filter", "show", "--netns", ns, "-i", i]);
    let out = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(text.status.success(), "{}", stderr(&text));
    for want in [
        format!("# 2 rules from {rules}; rule set {first_set} in force"),
        "default pass".to_string(),
        "malformed drop".to_string(),
        "rule 0 \"nine\" proto=udp,dst_port=9,action=drop counter packets 100 bytes 6400".to_string(),
    ] {
        assert!(out.lines().any(|l| l.starts_with(&want)), "no line {want:?} in:\n{out}");
    }
    // After a reload: the new set, its source and its texts.
    let o = run(&["filter", "reload", "--netns", ns, "-i", i, "--rule", "proto=udp,dst_port=10-20,action=pass"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = last_json(&run(&["filter", "show", "--netns", ns, "-i", i, "--json"]));
    assert_eq!(s["source"], "--rule", "{s}");
    assert_ne!(n(&s["rule_set"]), first_set, "{s}");
    assert_eq!(s["rules"][0]["text"], "proto=udp,dst_port=10-20,action=pass", "{s}");
    assert_eq!(s["rules"].as_array().map(Vec::len), Some(1), "{s}");
}

/// A command that finds fastpath's own pinned classifier on its interface says so, with the
/// commands that change, take over or remove it (carrying --netns), never `--force`; the hint `load
/// --detach` prints carries --netns too, and works pasted.
#[test]
fn the_pinned_classifier_is_named_with_commands_that_carry_netns() {
    if !privileged("the_pinned_classifier_is_named_with_commands_that_carry_netns") {
        return;
    }
    let bed = quiet_bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let o = run(&["filter", "load", "--netns", ns, "-i", i, "--rule", "proto=udp,dst_port=9,action=drop", "--detach"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let _pins = Pinned(ns, i);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let unload = format!("fastpath filter unload -i {i} --netns {ns}");
    assert!(out.contains(&format!("`{unload}` removes it")), "{out}");
    let reload = format!("`fastpath filter reload FILE -i {i} --netns {ns}` changes its rules");
    for (what, args) in [
        ("bench rxdrop", vec!["bench", "rxdrop", "--netns", ns, "-i", i, "--duration", "0"]),
        // Without --pin/--detach (which adopt it): refused, naming it.
        (
            "filter load",
            vec!["filter", "load", "--netns", ns, "-i", i, "--rule", "proto=udp,action=drop", "--duration", "0"],
        ),
    ] {
        let o = run(&args);
        let err = assert_one_line_refusal(
            what,
            &o,
            3,
            &[
                "fastpath's classifier",
                "pinned at /sys/fs/bpf/fastpath/",
                i,
                &reload,
                &format!("`{unload}` removes it"),
            ],
        );
        assert!(!err.contains("--force"), "{what}: {err}");
    }
    let o = run(&["bench", "rxdrop", "--netns", ns, "-i", i, "--duration", "0"]);
    assert!(stderr(&o).contains(&format!("runs on {i} (XDP program id")), "{}", stderr(&o));
    // The printed hint, pasted.
    let args: Vec<&str> = unload.split_whitespace().skip(1).collect();
    let o = run(&args);
    assert!(o.status.success(), "{unload}: {}", stderr(&o));
    assert!(attached(ns, i).is_none(), "{unload} left a program on {i}");
}

/// "No such interface here" names the network namespace where an interface of that name
/// exists, with the --netns that reaches it.
#[test]
fn no_such_interface_names_the_namespace_where_it_exists() {
    if !privileged("no_such_interface_names_the_namespace_where_it_exists") {
        return;
    }
    let bed = quiet_bed();
    let (ns_a, ns_b, i) = (bed.ns_a(), bed.ns_b(), bed.iface_b());
    let there = format!("an interface named {i} exists in network namespace {ns_b} (--netns {ns_b})");
    let o = run(&["bench", "rxdrop", "--netns", ns_a, "-i", i, "--duration", "0"]);
    let err = assert_one_line_refusal("bench rxdrop", &o, 2, &["does not exist in this network namespace", &there]);
    assert!(!err.contains(&format!("--netns {ns_a}")), "{err}");
    let o = run(&["filter", "stats", "-i", i, "--duration", "0"]);
    assert_one_line_refusal("filter stats", &o, 3, &["nothing pinned", &there]);
}

/// Runs fastpath to completion, killed (and the test failed) if it takes over 10 s.
fn run_bounded(args: &[&str]) -> std::process::Output {
    let mut c = fastpath()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while c.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(10) {
            let _ = c.kill(); // the process this test started
            let _ = c.wait();
            panic!("{args:?} still running after 10 s (reading a FIFO or a device?)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    c.wait_with_output().unwrap()
}

/// A rules file that is a FIFO, a device (a symlink to /dev/zero) or larger than 64 MiB is
/// refused at once by `filter check`, `filter load` and `filter reload` in one line naming the
/// file and what is accepted (exit 2), never waited on or read without bound; 100,000 rules
/// (6.5 MB as the benchmarks write them) are well under the cap.
#[test]
fn rule_files_that_are_not_regular_or_too_large_are_refused_in_one_line() {
    let dir = tempdir::Dir::new("rulefile-kinds");
    let fifo = dir.0.join("fifo.toml");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let fifo = fifo.display().to_string();
    // `filter load` and `filter reload` read the file once their privileges are checked (root).
    let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0;
    let mut cmds = vec![&["filter", "check"][..]];
    if root {
        cmds.extend([&["filter", "load", "-i", "lo"][..], &["filter", "reload", "-i", "lo"]]);
    }
    for cmd in cmds {
        let o = run_bounded(&[cmd, &[fifo.as_str()]].concat());
        assert_one_line_refusal(
            &format!("{cmd:?} FIFO"),
            &o,
            2,
            &[&fifo, "a FIFO is not accepted: give a regular file"],
        );
    }
    let zero = dir.0.join("zero.toml");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let zero = zero.display().to_string();
    let o = run_bounded(&["filter", "check", &zero]);
    assert_one_line_refusal("/dev/zero", &o, 2, &[&zero, "a character device is not accepted"]);
    let big = dir.0.join("big.toml");
    std::fs::File::create(&big).unwrap().set_len((64 << 20) + 1).unwrap(); // sparse
    let big = big.display().to_string();
    let o = run_bounded(&["filter", "check", &big]);
    assert_one_line_refusal("64 MiB + 1", &o, 2, &[&big, "67108865 bytes is not accepted: at most 67108864 bytes"]);
}
