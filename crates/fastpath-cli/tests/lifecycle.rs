//! `fastpath filter load` as a service (root): it runs until signalled, reloads on SIGHUP,
//! detaches on SIGTERM, and with --pin survives restarts and program changes with no flood
//! frame let through.

mod common;

use std::io::Read;
use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use fastpath_testbed::{Testbed, TestbedConfig};
use serde_json::Value;

fn bed() -> Testbed {
    Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed")
}

fn rules(name: &str, ports: &str) -> String {
    format!(
        "default = \"pass\"\n[[rule]]\nname = \"{name}\"\nproto = \"udp\"\ndst_port = \"{ports}\"\naction = \"drop\"\n"
    )
}

fn tmp(tag: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("fastpath-lifecycle-{tag}-{}.toml", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn signal(pid: u32, sig: &str) {
    assert!(Command::new("kill").args([sig, &pid.to_string()]).status().unwrap().success());
}

/// The rule set index of the newest interval line, waiting up to 5 s for one newer than `after`.
fn rule_set_after(lines: &std::sync::Mutex<Vec<(Instant, Value)>>, after: Instant) -> Option<u64> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let l = lines.lock().unwrap();
        if let Some((_, v)) = l.iter().rev().find(|(t, v)| *t > after && v["type"] == "interval") {
            return v["rule_set"].as_u64();
        }
        drop(l);
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// Without --duration `filter load` stays up (here 16 s, past the old 10 s default); SIGHUP
/// re-reads the file and flips to it; a bad file on SIGHUP leaves the rules in force with one
/// error line; SIGTERM detaches it and exits 0.
#[test]
fn load_runs_until_signalled_reloads_on_sighup_and_detaches_on_sigterm() {
    if !privileged("load_runs_until_signalled_reloads_on_sighup_and_detaches_on_sigterm") {
        return;
    }
    let bed = bed();
    let (ns, ifb) = (bed.ns_b(), bed.iface_b());
    let file = tmp("hup");
    std::fs::write(&file, rules("first", "9")).unwrap();
    let f = file.display().to_string();
    let mut cmd = fastpath();
    cmd.args(["filter", "load", &f, "--netns", ns, "-i", ifb, "--json", "--interval", "0.2"]).stderr(Stdio::piped());
    let running = Running::start_cmd(cmd);
    let (mut child, lines, reader) = running.stream();
    let pid = child.id();
    let on = attached(ns, ifb).expect("attached after ready");
    std::thread::sleep(Duration::from_secs(16));
    assert!(child.try_wait().unwrap().is_none(), "filter load without --duration ended by itself");
    assert_eq!(attached(ns, ifb).map(|p| p.id), Some(on.id), "the classifier left the interface");
    let t0 = Instant::now();
    let before = rule_set_after(&lines, t0 - Duration::from_millis(500)).expect("interval lines");
    std::fs::write(&file, rules("second", "9-10")).unwrap();
    let t1 = Instant::now();
    signal(pid, "-HUP");
    std::thread::sleep(Duration::from_millis(600));
    let after = rule_set_after(&lines, t1 + Duration::from_millis(500)).expect("interval lines after SIGHUP");
    assert_ne!(before, after, "SIGHUP did not flip to the new rules");
    assert!(child.try_wait().unwrap().is_none(), "SIGHUP ended filter load");
    // A file that does not parse: the rules in force stay, the process stays.
    std::fs::write(&file, "default = \"pass\"\n[[rule]]\nproto = \"udp\"\ndst_port = 70000\naction = \"drop\"\n")
        .unwrap();
    let t2 = Instant::now();
    signal(pid, "-HUP");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(rule_set_after(&lines, t2 + Duration::from_millis(500)), Some(after), "a bad file replaced the set");
    assert!(child.try_wait().unwrap().is_none(), "a bad file on SIGHUP ended filter load");
    signal(pid, "-TERM");
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "SIGTERM: {status}; stderr: {err}");
    assert_eq!(attached(ns, ifb), None, "SIGTERM left an XDP program attached");
    let summary = lines.lock().unwrap().iter().rev().find(|(_, v)| v["type"] == "summary").map(|(_, v)| v.clone());
    let summary = summary.expect("summary line");
    assert_eq!(summary["rules"][0]["name"], "second", "summary: {summary}");
    let refusals: Vec<&str> = err.lines().filter(|l| l.contains("refused") && l.contains("70000")).collect();
    assert_eq!(refusals.len(), 1, "one error line for the bad file, naming the value; stderr:\n{err}");
    let _ = std::fs::remove_file(&file);
}

/// A UDP socket in `ns` at `addr`, counting what reaches it until `stop`.
fn counter(ns: &str, addr: &'static str, stop: Arc<AtomicBool>) -> (Arc<AtomicU64>, std::thread::JoinHandle<()>) {
    let sock = fastpath_testbed::run_in_netns(ns, move || UdpSocket::bind(addr).unwrap()).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let n = Arc::new(AtomicU64::new(0));
    let n2 = n.clone();
    let h = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if sock.recv(&mut buf).is_ok() {
                n2.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    (n, h)
}

/// `filter load --pin` in the receiver's namespace, past its ready line (returned: its
/// `adopted`); its stdout drained.
fn start_pinned(ns: &str, ifb: &str, file: &str, extra: &[&str]) -> (std::process::Child, Value) {
    let mut args = vec!["filter", "load", file, "--netns", ns, "-i", ifb, "--pin", "--json"];
    args.extend_from_slice(extra);
    let r = Running::start(&args);
    let adopted = r.ready["adopted"].clone();
    (r.into_child(), adopted)
}

/// Replaces the pin of map `name` of the classifier pinned on `ifb` with a map of another shape,
/// as pins of a fastpath with another map layout look (the program keeps its own map).
fn plant_other_layout(ns: &str, ifb: &str, name: &'static str) {
    let ifb = ifb.to_string();
    fastpath_testbed::run_in_netns(ns, move || {
        let p = fastpath::bpf::classifier::pin_dir(&ifb).join(name);
        std::fs::remove_file(&p).unwrap();
        let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        };
        let mut m = libbpf_rs::MapHandle::create(libbpf_rs::MapType::Array, Some(name), 4, 8, 1, &opts).unwrap();
        m.pin(&p).unwrap();
    })
    .unwrap();
}

fn stop_pinned(mut c: std::process::Child) {
    signal(c.id(), "-TERM");
    let s = c.wait().unwrap();
    assert!(s.success(), "filter load --pin on SIGTERM: {s}");
}

/// A flood (UDP to port 9, dropped by the rules) and a probe flow (UDP to port 7, passed) run
/// while the pinned classifier is handed from one `filter load --pin` to the next: a restart
/// (the pinned maps reused, counters carried) and a program replaced with maps of its own
/// (`--fresh-maps`), and pins of another map layout (an older fastpath's: one pin replaced by a
/// map of another shape), adopted with maps of its own unasked; each time with the process gone
/// in between. Not one flood frame reaches the socket at port 9; the probe keeps flowing; the
/// program under the link did change.
#[test]
fn restart_and_upgrade_let_no_flood_frame_through() {
    if !privileged("restart_and_upgrade_let_no_flood_frame_through") {
        return;
    }
    let bed = bed();
    let (ns, ifb) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    let _unload = Unload(ns.clone(), ifb.clone());
    let file = tmp("pin");
    std::fs::write(&file, rules("flood", "9")).unwrap();
    let f = file.display().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let (flood_rx, h1) = counter(&ns, "10.99.0.2:9", stop.clone());
    let (probe_rx, h2) = counter(&ns, "10.99.0.2:7", stop.clone());
    let (a, adopted) = start_pinned(&ns, &ifb, &f, &[]);
    assert!(adopted.is_null(), "nothing to adopt at first: {adopted}");
    let first = attached(&ns, &ifb).expect("attached").id;
    // The probe: one datagram per millisecond from the sender's namespace.
    let probe_sock = fastpath_testbed::run_in_netns(bed.ns_a(), || UdpSocket::bind("10.99.0.1:0").unwrap()).unwrap();
    let s2 = stop.clone();
    let prober = std::thread::spawn(move || {
        let mut sent = 0u64;
        while !s2.load(Ordering::Relaxed) {
            if probe_sock.send_to(b"probe", "10.99.0.2:7").is_ok() {
                sent += 1;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        sent
    });
    let mb = mac(bed.mac_b());
    let gen_args: Vec<String> = [
        "gen",
        "--netns",
        bed.ns_a(),
        "-i",
        bed.iface_a(),
        "--dst-mac",
        &mb,
        "--src-ip",
        "10.99.0.1",
        "--dst-ip",
        "10.99.0.2",
        "--dst-port",
        "9",
        "--rate",
        "100000",
        // Until stopped below, after the last phase: a fixed duration ran out before the
        // fresh-maps phase on a loaded CI machine (each start of `filter load` took seconds;
        // the new program then counted 0 drops because no flood came any more).
        "--duration",
        "120",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let flood = fastpath().args(&gen_args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("gen");
    std::thread::sleep(Duration::from_secs(1));
    let p0 = probe_rx.load(Ordering::Relaxed);
    // Restart: the process goes, the pinned classifier stays, the next one adopts it.
    stop_pinned(a);
    std::thread::sleep(Duration::from_millis(300));
    let (b, adopted) = start_pinned(&ns, &ifb, &f, &[]);
    assert_eq!(adopted["maps_kept"], true, "a restart reuses the pinned maps: {adopted}");
    let second = attached(&ns, &ifb).expect("attached").id;
    std::thread::sleep(Duration::from_secs(1));
    let p1 = probe_rx.load(Ordering::Relaxed);
    let drops_b = drops(&ns, &ifb);
    // A new program on maps of its own, under the same link.
    stop_pinned(b);
    let (c, adopted) = start_pinned(&ns, &ifb, &f, &["--fresh-maps"]);
    assert_eq!(adopted["maps_kept"], false, "--fresh-maps: {adopted}");
    let third = attached(&ns, &ifb).expect("attached").id;
    let drops_c0 = drops(&ns, &ifb);
    std::thread::sleep(Duration::from_secs(1));
    let p2 = probe_rx.load(Ordering::Relaxed);
    let drops_c = drops(&ns, &ifb);
    let stats_c = run(&["filter", "stats", "--netns", &ns, "-i", &ifb, "--duration", "0", "--json"]);
    let stats_c = String::from_utf8_lossy(&stats_c.stdout).to_string();
    let link_c = attached(&ns, &ifb).map(|l| l.id);
    // Pins of another map layout (an older fastpath's): adopted on maps of its own, unasked.
    stop_pinned(c);
    plant_other_layout(&ns, &ifb, "cls_cache");
    let (d, adopted) = start_pinned(&ns, &ifb, &f, &[]);
    assert_eq!(adopted["maps_kept"], false, "pins of another layout: {adopted}");
    let fourth = attached(&ns, &ifb).expect("attached").id;
    std::thread::sleep(Duration::from_millis(700));
    let p3 = probe_rx.load(Ordering::Relaxed);
    signal(flood.id(), "-INT");
    let g = flood.wait_with_output().unwrap();
    assert!(g.status.success(), "gen: {}", stderr(&g));
    stop_pinned(d);
    stop.store(true, Ordering::Relaxed);
    let probes_sent = prober.join().unwrap();
    h1.join().unwrap();
    h2.join().unwrap();
    let sent = n(&last_json(&g)["streams"][0]["frames"]);
    let flood_passed = flood_rx.load(Ordering::Relaxed);
    eprintln!(
        "flood sent {sent}, passed {flood_passed}; probes sent {probes_sent}, received {}; drops seen {drops_b} (restart, maps kept), {drops_c0} then {drops_c} (fresh maps); programs {first} {second} {third} {fourth}",
        probe_rx.load(Ordering::Relaxed)
    );
    assert!(sent > 300_000, "the flood was not sent: {sent} frames");
    assert_eq!(flood_passed, 0, "flood frames reached the socket across the restarts");
    assert!(p0 > 0 && p1 > p0 && p2 > p1 && p3 > p2, "the probe flow stopped: {p0} {p1} {p2} {p3}");
    assert!(
        first != second && second != third && third != fourth,
        "the program was not replaced: {first} {second} {third} {fourth}"
    );
    // Counters carried over the restart (about 2 s of flood at 100k/s, the first run's
    // included), restarted from zero with fresh maps, then counting.
    assert!(drops_b > 120_000, "drops after the restart: {drops_b}");
    assert!(drops_c0 < drops_b / 2, "fresh maps kept the counters: {drops_c0} (before {drops_b})");
    assert!(
        drops_c > drops_c0,
        "the new program did not count: {drops_c0} then {drops_c}; program under the link {link_c:?} (attached as {third}); gen {}; filter stats {stats_c}",
        String::from_utf8_lossy(&g.stdout)
    );
}

/// The drops the classifier pinned on `ifb` counted (`filter stats`): the set in force and the
/// one the last reload replaced (an adoption flips to the new rules as a reload does).
fn drops(ns: &str, ifb: &str) -> u64 {
    let o = run(&["filter", "stats", "--netns", ns, "-i", ifb, "--duration", "0", "--json"]);
    assert!(o.status.success(), "filter stats: {}", stderr(&o));
    let v = last_json(&o);
    v["totals"]["drop"]["packets"].as_u64().unwrap_or(0)
        + v["previous"]["totals"]["drop"]["packets"].as_u64().unwrap_or(0)
}

/// Unloads the classifier pinned on the interface when dropped (declared after the test bed).
struct Unload(String, String);

impl Drop for Unload {
    fn drop(&mut self) {
        let _ = run(&["filter", "unload", "--netns", &self.0, "-i", &self.1]);
    }
}

/// An adoption whose rules the kernel refuses (a syncookie rule with tcp_syncookies=0 in the
/// namespace) fails in one line and leaves what ran: the same program under the link, the same
/// rules, the pins in place.
#[test]
fn a_refused_adoption_leaves_the_program_and_rules_in_force() {
    if !privileged("a_refused_adoption_leaves_the_program_and_rules_in_force") {
        return;
    }
    let bed = bed();
    let (ns, ifb) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    let _unload = Unload(ns.clone(), ifb.clone());
    let file = tmp("refused");
    std::fs::write(&file, rules("flood", "9")).unwrap();
    let f = file.display().to_string();
    let o = run(&["filter", "load", &f, "--netns", &ns, "-i", &ifb, "--detach"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let before = attached(&ns, &ifb).expect("attached").id;
    let sysctl = |v: &str| {
        let o = Command::new("ip")
            .args(["netns", "exec", &ns, "sysctl", "-qw", &format!("net.ipv4.tcp_syncookies={v}")])
            .output()
            .unwrap();
        assert!(o.status.success(), "sysctl: {}", String::from_utf8_lossy(&o.stderr));
    };
    sysctl("0");
    let sc = "proto=tcp,dst_port=80,action=syncookie";
    let o = run(&["filter", "load", "--netns", &ns, "-i", &ifb, "--rule", sc, "--detach"]);
    sysctl("1");
    let err = stderr(&o);
    // The exit code of the same refusal on a first load (2: the value named is not accepted).
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains("tcp_syncookies"), "{err}");
    assert_eq!(attached(&ns, &ifb).map(|p| p.id), Some(before), "the old program was not put back");
    let o = run(&["filter", "stats", "--netns", &ns, "-i", &ifb, "--duration", "0", "--json"]);
    assert!(o.status.success(), "stats: {}", stderr(&o));
    let v = last_json(&o);
    assert_eq!(v["rules"][0]["name"], "flood", "the rules in force changed: {v}");
    let _ = std::fs::remove_file(&file);
}

/// `ip -n NS ARGS...`, which must succeed.
fn ip(ns: &str, args: &[&str]) {
    let o = Command::new("ip").args(["-n", ns]).args(args).output().unwrap();
    assert!(o.status.success(), "ip -n {ns} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// A veth pair of the test's in `ns`, deleted when dropped.
struct Veth(String, String);

impl Veth {
    fn new(ns: &str, a: &str, b: &str) -> Veth {
        ip(ns, &["link", "add", a, "type", "veth", "peer", "name", b]);
        ip(ns, &["link", "set", a, "up"]);
        ip(ns, &["link", "set", b, "up"]);
        Veth(ns.to_string(), a.to_string())
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["-n", &self.0, "link", "del", &self.1]).status();
    }
}

/// The pin directory of `iface` in `ns` (as `filter load --detach` there names it).
fn pin_dir_in(ns: &str, iface: &str) -> std::path::PathBuf {
    let iface = iface.to_string();
    fastpath_testbed::run_in_netns(ns, move || fastpath::bpf::classifier::pin_dir(&iface)).unwrap()
}

/// A staging directory as an upgrade of `x` that died after pinning its new maps leaves it:
/// a whole classifier's pins (those of one pinned on `y` for the purpose, moved) at
/// `<pin dir of x>:new`. Returns that path.
fn plant_staging(ns: &str, x: &str, y: &str) -> std::path::PathBuf {
    let o = run(&["filter", "load", "--netns", ns, "-i", y, "--rule", "proto=udp,dst_port=9,action=drop", "--detach"]);
    assert!(o.status.success(), "load --detach on {y}: {}", stderr(&o));
    let staging = std::path::PathBuf::from(format!("{}:new", pin_dir_in(ns, x).display()));
    std::fs::rename(pin_dir_in(ns, y), &staging).unwrap();
    staging
}

/// Upgrades stage their new pins under a name no interface has: `--fresh-maps` on X leaves the
/// classifier of an interface named `X_new` attached and pinned (it once staged under
/// `<X's pin dir>_new`, that interface's pin directory, and removed it). A staging directory
/// left by an upgrade that died (`<X's pin dir>:new`, a whole set of pins) is no interface to
/// `filter export`, is removed by the next adoption on X (the program its link pin held goes
/// with it), and by `filter unload -i X`.
#[test]
fn staging_dirs_are_no_interfaces_pins_and_do_not_outlive_the_next_adoption_or_unload() {
    if !privileged("staging_dirs_are_no_interfaces_pins_and_do_not_outlive_the_next_adoption_or_unload") {
        return;
    }
    let bed = bed();
    let (ns, x) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    let (xn, y) = (format!("{x}_new"), format!("{x}y"));
    let _veth = Veth::new(&ns, &xn, &y);
    let _unload = (Unload(ns.clone(), x.clone()), Unload(ns.clone(), xn.clone()), Unload(ns.clone(), y.clone()));
    let rule = "proto=udp,dst_port=9,action=drop";
    let load = |i: &str, extra: &[&str]| {
        let mut a = vec!["filter", "load", "--netns", &ns, "-i", i, "--rule", rule, "--detach"];
        a.extend_from_slice(extra);
        let o = run(&a);
        assert!(o.status.success(), "load {extra:?} on {i}: {}", stderr(&o));
    };
    load(&xn, &[]);
    load(&x, &[]);
    let on_xn = attached(&ns, &xn).expect("attached on X_new").id;
    load(&x, &["--fresh-maps"]);
    assert_eq!(attached(&ns, &xn).map(|p| p.id), Some(on_xn), "--fresh-maps on {x} detached {xn}'s classifier");
    let o = run(&["filter", "show", "--netns", &ns, "-i", &xn]);
    assert!(o.status.success(), "{xn}'s pins after --fresh-maps on {x}: {}", stderr(&o));
    assert!(!std::path::Path::new(&format!("{}:new", pin_dir_in(&ns, &x).display())).exists(), "staging dir left");

    // A staging directory left by a crash: not an interface to the exporter.
    let staging = plant_staging(&ns, &x, &y);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let log = tmp("export-log");
    let mut ex = fastpath()
        .args(["filter", "export", "--netns", &ns, "--metrics", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    signal(ex.id(), "-TERM");
    let st = ex.wait().unwrap();
    let err = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert!(st.success() && err.contains(&format!("{x}: exporting")), "{st:?}: {err}");
    assert!(!err.contains(":new"), "the exporter took a staging directory for an interface: {err}");

    // The next adoption on X removes it (it held the link of the program on Y: detached).
    assert!(attached(&ns, &y).is_some());
    load(&x, &[]);
    assert!(!staging.exists(), "the adoption left the staging directory {}", staging.display());
    assert_eq!(attached(&ns, &y), None, "the staging directory's link pin was not removed");

    // And `filter unload -i X`.
    let staging = plant_staging(&ns, &x, &y);
    let o = run(&["filter", "unload", "--netns", &ns, "-i", &x]);
    assert!(o.status.success(), "unload: {}", stderr(&o));
    assert!(!staging.exists(), "unload left the staging directory {}", staging.display());
    assert!(attached(&ns, &xn).is_some(), "{xn} lost its classifier");
}

/// A service (`filter load --pin`) keeps serving the classifier another process adopted with
/// maps of its own (`--detach --fresh-maps`): it follows the new pins (a warning line says so),
/// and its SIGHUP reload goes into the maps the program runs on: frames to the new file's port
/// are dropped and counted, and `filter show` prints the reloaded rule.
#[test]
fn a_pinned_service_follows_pins_another_process_replaced() {
    if !privileged("a_pinned_service_follows_pins_another_process_replaced") {
        return;
    }
    let bed = bed();
    let (ns, ifb) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    let _unload = Unload(ns.clone(), ifb.clone());
    let file = tmp("follow");
    std::fs::write(&file, rules("nine", "9")).unwrap();
    let f = file.display().to_string();
    let log = tmp("follow-log");
    let mut cmd = fastpath();
    cmd.args(["filter", "load", &f, "--netns", &ns, "-i", &ifb, "--pin", "--json"]);
    cmd.stderr(std::fs::File::create(&log).unwrap());
    let a = Running::start_cmd(cmd).into_child();
    let o = run(&[
        "filter",
        "load",
        "--netns",
        &ns,
        "-i",
        &ifb,
        "--rule",
        "name=seven,proto=udp,dst_port=7,action=drop",
        "--detach",
        "--fresh-maps",
    ]);
    assert!(o.status.success(), "the other process's adoption: {}", stderr(&o));
    std::fs::write(&file, rules("five", "5")).unwrap();
    signal(a.id(), "-HUP");
    let t = Instant::now();
    while !std::fs::read_to_string(&log).unwrap_or_default().contains("reloaded") {
        assert!(t.elapsed() < Duration::from_secs(10), "no reload line: {}", std::fs::read_to_string(&log).unwrap());
        std::thread::sleep(Duration::from_millis(50));
    }
    let rx0 = rx_packets(&ns, &ifb);
    let g = run(&[
        "gen",
        "--netns",
        bed.ns_a(),
        "-i",
        bed.iface_a(),
        "--dst-mac",
        &mac(bed.mac_b()),
        "--dst-port",
        "5",
        "--count",
        "200",
        "--rate",
        "10000",
        "--duration",
        "10",
    ]);
    assert!(g.status.success(), "gen: {}", stderr(&g));
    wait_rx_packets(&ns, &ifb, rx0, 200);
    let o = run(&["filter", "show", "--netns", &ns, "-i", &ifb, "--json"]);
    assert!(o.status.success(), "show: {}", stderr(&o));
    let v = last_json(&o);
    stop_pinned(a);
    let err = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert_eq!(v["rules"][0]["name"], "five", "the rules in force are not the reloaded file's: {v}\n{err}");
    assert_eq!(n(&v["rules"][0]["packets"]), 200, "frames to udp/5 dropped and counted: {v}");
    assert!(err.contains("was replaced by another process"), "no line about following the pins: {err}");
    let _ = std::fs::remove_file(&file);
}

/// A rules file replaced by a FIFO: SIGHUP refuses it in one error line naming the file (the
/// rules in force stay) instead of waiting on it, and SIGTERM then stops the command within 2 s.
#[test]
fn a_fifo_rules_file_on_sighup_is_refused_and_sigterm_still_stops() {
    if !privileged("a_fifo_rules_file_on_sighup_is_refused_and_sigterm_still_stops") {
        return;
    }
    let bed = bed();
    let (ns, ifb) = (bed.ns_b(), bed.iface_b());
    let file = tmp("fifo");
    std::fs::write(&file, rules("first", "9")).unwrap();
    let f = file.display().to_string();
    let mut cmd = fastpath();
    cmd.args(["filter", "load", &f, "--netns", ns, "-i", ifb, "--json"]).stderr(Stdio::piped());
    let mut child = Running::start_cmd(cmd).into_child();
    std::fs::remove_file(&file).unwrap();
    assert!(Command::new("mkfifo").arg(&file).status().unwrap().success());
    signal(child.id(), "-HUP");
    std::thread::sleep(Duration::from_millis(500));
    signal(child.id(), "-TERM");
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(2) {
            let _ = child.kill(); // the process this test started
            let _ = child.wait();
            let _ = std::fs::remove_file(&file);
            panic!("still running 2 s after SIGTERM (waiting on the FIFO?)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(status.success(), "{status}: {err}");
    let refusals: Vec<&str> = err.lines().filter(|l| l.contains("refused") && l.contains(&f)).collect();
    assert_eq!(refusals.len(), 1, "one error line naming the file: {err}");
    assert!(refusals[0].contains("a FIFO is not accepted: give a regular file"), "{err}");
    assert_eq!(attached(ns, ifb), None, "SIGTERM left an XDP program attached");
}
