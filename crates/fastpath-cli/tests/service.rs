//! fastpath as a systemd service: the shipped unit (dist/systemd/fastpath-filter@.service)
//! verifies, and its own ExecStart/ExecReload lines, run with the unit's capability bounding set
//! and a NOTIFY_SOCKET this test reads, speak the sd_notify protocol (READY=1 once attached,
//! STATUS= with the drop rate, RELOADING=1 then READY=1 on reload, STOPPING=1 on SIGTERM); and
//! the operator log's shape under the journal (JOURNAL_STREAM). No systemd as PID 1 is needed.

mod common;

use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fastpath_testbed::{Testbed, TestbedConfig};

const UNIT: &str = "fastpath-filter@.service";

const EXPORTER: &str = "fastpath-exporter.service";

/// A unit of dist/systemd, as text.
fn dist(unit: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/systemd").join(unit);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn unit_text() -> String {
    dist(UNIT)
}

/// The value of the unit's one `key=` line.
fn directive(unit: &str, key: &str) -> String {
    let v: Vec<&str> = unit.lines().filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('=')).collect();
    assert_eq!(v.len(), 1, "{key}= once in the unit: {v:?}");
    v[0].trim().to_string()
}

fn bin() -> String {
    std::env::var("FASTPATH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_fastpath").to_string())
}

/// A scratch directory, removed when dropped.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("fastpath-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `systemd-analyze verify` accepts both units without a word: no unknown key, no bad value, an
/// executable ExecStart (the units' /usr/bin/fastpath becomes the binary under test in a copy).
#[test]
fn the_units_verify_without_warnings() {
    let dir = Dir::new("unit-verify");
    for unit in [UNIT, EXPORTER] {
        let copy = dir.path(unit);
        std::fs::write(&copy, dist(unit).replace("/usr/bin/fastpath", &bin())).unwrap();
        let o = Command::new("systemd-analyze").args(["verify", &copy]).output().expect("systemd-analyze (systemd)");
        let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        // Lines about other units of this machine are not ours to judge.
        let stem = unit.trim_end_matches(".service").trim_end_matches('@');
        let ours: Vec<&str> = text.lines().filter(|l| l.contains(stem)).collect();
        assert!(o.status.success() && ours.is_empty(), "systemd-analyze verify {unit}: {:?}\n{text}", o.status);
    }
}

/// The unit's ExecStart, run as systemd would run it (bounding set and no_new_privs from the
/// unit), in the test bed's network namespace; dropped: SIGKILL, and the pins removed.
struct Service {
    child: Child,
    ns: String,
    iface: String,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill(); // the process this test started
        let _ = self.child.wait();
        let _ = run(&["filter", "unload", "--netns", &self.ns, "-i", &self.iface]);
    }
}

/// The notification socket a service manager listens on: every datagram, as text.
struct Notify {
    sock: UnixDatagram,
    seen: Vec<String>,
}

impl Notify {
    fn bind(path: &str) -> Notify {
        let sock = UnixDatagram::bind(path).expect("bind the notify socket");
        sock.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        Notify { sock, seen: Vec::new() }
    }

    /// Reads datagrams until one satisfies `want` (returned), or `limit` passes or the service
    /// has exited with nothing more sent (panics with everything seen and its stderr).
    fn until(
        &mut self,
        svc: &mut Service,
        what: &str,
        limit: Duration,
        log: &str,
        want: impl Fn(&str) -> bool,
    ) -> String {
        let t = Instant::now();
        let mut b = [0u8; 4096];
        let mut exited = None;
        while t.elapsed() < limit && exited.is_none() {
            match self.sock.recv(&mut b) {
                Ok(n) => {
                    let m = String::from_utf8_lossy(&b[..n]).into_owned();
                    self.seen.push(m.clone());
                    if want(&m) {
                        return m;
                    }
                }
                // Nothing queued: a service that has ended sends nothing more.
                Err(_) => exited = svc.child.try_wait().unwrap(),
            }
        }
        let err = std::fs::read_to_string(log).unwrap_or_default();
        panic!(
            "no {what} in {limit:?} (service exit: {exited:?}); notifications: {:?}\nservice stderr:\n{err}",
            self.seen
        );
    }
}

fn has(m: &str, line: &str) -> bool {
    m.lines().any(|l| l == line)
}

/// The unit's Exec lines under a NOTIFY_SOCKET: READY=1 (with a STATUS= naming the interface)
/// once the XDP program is attached, STATUS= with the drop rate while a 5,000 frames/s flood is
/// dropped (and the flood's log line), ExecReload with a changed file: RELOADING=1 (with
/// MONOTONIC_USEC=) then READY=1 and the new rules in force; SIGTERM: STOPPING=1 and exit 0.
#[test]
fn the_units_exec_lines_notify_ready_status_reloading_and_stopping() {
    if !privileged("the_units_exec_lines_notify_ready_status_reloading_and_stopping") {
        return;
    }
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    let (ns, iface) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    let dir = Dir::new("unit-exec");
    let rules = dir.path("rules.toml");
    let v1 = "[[rule]]\nname = \"v1\"\nproto = \"udp\"\ndst_port = 9\naction = \"drop\"\n";
    std::fs::write(&rules, v1).unwrap();
    let unit = unit_text();
    let line = |key: &str| {
        directive(&unit, key)
            .replace("/etc/fastpath/filter/%i.toml", &rules)
            .replace("%i", &iface)
            .replace("/usr/bin/fastpath", &bin())
    };
    let start = line("ExecStart");
    // CapabilityBoundingSet=CAP_BPF CAP_NET_ADMIN -> setpriv's -all,+bpf,+net_admin.
    let caps: Vec<String> = directive(&unit, "CapabilityBoundingSet")
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    let sock_path = dir.path("notify.sock");
    let mut notify = Notify::bind(&sock_path);
    let log = dir.path("stderr.log");
    // nsenter --net keeps this mount namespace (and its /sys/fs/bpf); both it and setpriv exec,
    // so the child's pid is the service's $MAINPID.
    let spawn = || {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/var/run/netns/{ns}")).arg("setpriv");
        if directive(&unit, "NoNewPrivileges") == "yes" {
            cmd.arg("--no-new-privs");
        }
        cmd.args(["--bounding-set", &format!("-all,{}", caps.join(",")), "--"]);
        cmd.args(start.split_whitespace());
        cmd.env("NOTIFY_SOCKET", &sock_path).env_remove("JOURNAL_STREAM");
        cmd.stdout(Stdio::null()).stderr(std::fs::File::create(&log).unwrap());
        Service { child: cmd.spawn().expect("nsenter, setpriv (util-linux)"), ns: ns.clone(), iface: iface.clone() }
    };
    let mut svc = spawn();
    let pid = svc.child.id();

    // READY=1 once the program is attached: the kernel reports it when READY=1 is read.
    let ready = notify.until(&mut svc, "READY=1", Duration::from_secs(30), &log, |m| has(m, "READY=1"));
    assert!(attached(&ns, &iface).is_some(), "READY=1 before the XDP program was attached: {ready:?}");
    // The program is pinned beside the link: an adoption under the unit (no CAP_SYS_ADMIN to
    // find it by id) takes it from there, to replace it with BPF_F_REPLACE.
    let i2 = iface.clone();
    let prog_pin =
        fastpath_testbed::run_in_netns(&ns, move || fastpath::bpf::classifier::pin_dir(&i2).join("prog")).unwrap();
    assert!(prog_pin.exists(), "the program under the link is not pinned at {}", prog_pin.display());
    assert!(ready.contains(&format!("STATUS={iface} (")) && ready.contains("1 rules"), "{ready:?}");

    // A flood the rules drop: STATUS= says the drop rate, the log says the flood.
    let mac = mac(bed.mac_b());
    let g = run(&[
        "gen",
        "--netns",
        bed.ns_a(),
        "-i",
        bed.iface_a(),
        "--dst-mac",
        &mac,
        "--rate",
        "5000",
        "--duration",
        "8",
    ]);
    assert!(g.status.success(), "gen: {}", stderr(&g));
    let pps = |m: &str| -> Option<u64> {
        let s = m.lines().find_map(|l| l.strip_prefix("STATUS="))?;
        let r = s.split(", dropping ").nth(1)?.split(" pps").next()?;
        r.replace(',', "").parse().ok()
    };
    let status =
        notify.until(&mut svc, "STATUS= with drops", Duration::from_secs(10), &log, |m| pps(m).is_some_and(|p| p > 0));
    let seen_pps = notify.seen.iter().filter_map(|m| pps(m)).max().unwrap_or(0);
    // 5,000 frames/s sent for 8 s, every one dropped; a 5 s STATUS window wholly inside the
    // flood says about 5,000. Loaded machines send slower: above 1,000 is the claim.
    assert!(seen_pps > 1000, "STATUS= drop rate {seen_pps} pps during a 5,000/s flood: {status:?} {:?}", notify.seen);
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(err.contains(&format!("fastpath: warning: {iface}: dropping ")) && err.contains("above 1,000/s"), "{err}");

    // ExecReload with a changed file: RELOADING=1, then READY=1, and the new rules in force.
    let v2 = "[[rule]]\nname = \"v2\"\nproto = \"udp\"\ndst_port = 10\naction = \"drop\"\n";
    std::fs::write(&rules, v2).unwrap();
    let reload = line("ExecReload").replace("$MAINPID", &pid.to_string());
    let argv: Vec<&str> = reload.split_whitespace().collect();
    let o = Command::new(argv[0]).args(&argv[1..]).output().expect("ExecReload");
    assert!(o.status.success(), "{reload}: {}", stderr(&o));
    let r = notify.until(&mut svc, "RELOADING=1", Duration::from_secs(10), &log, |m| has(m, "RELOADING=1"));
    assert!(r.lines().any(|l| l.starts_with("MONOTONIC_USEC=")), "RELOADING=1 without MONOTONIC_USEC: {r:?}");
    notify.until(&mut svc, "READY=1 after the reload", Duration::from_secs(10), &log, |m| has(m, "READY=1"));
    assert!(svc.child.try_wait().unwrap().is_none(), "the service ended on SIGHUP");
    let s = run(&["filter", "stats", "--netns", &ns, "-i", &iface, "--duration", "0", "--json"]);
    let v = last_json(&s);
    assert_eq!(v["rules"][0]["name"], "v2", "the reloaded rules are in force: {v}");

    // SIGTERM (systemctl stop): STOPPING=1, exit 0.
    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    notify.until(&mut svc, "STOPPING=1", Duration::from_secs(10), &log, |m| has(m, "STOPPING=1"));
    let t = Instant::now();
    let st = loop {
        if let Some(st) = svc.child.try_wait().unwrap() {
            break st;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "still running 10 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(st.success(), "{st:?}: {}", std::fs::read_to_string(&log).unwrap_or_default());
    // The unit's --pin: the classifier stays; a restart (the same ExecStart, the same bounding
    // set) adopts it under its link: READY=1 again, another program, the rules of the file.
    let before = attached(&ns, &iface).expect("the pinned classifier stays after SIGTERM").id;
    std::mem::forget(svc); // exited; its Drop would unload the pins
    let mut svc = spawn();
    notify.until(&mut svc, "READY=1 after a restart", Duration::from_secs(30), &log, |m| has(m, "READY=1"));
    let after = attached(&ns, &iface).expect("attached after the restart").id;
    assert_ne!(before, after, "the restart did not replace the program under the link");
    let err = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(err.contains("adopted the classifier pinned on"), "{err}");

    // Without the `prog` pin (pins of an older fastpath, a crash before it was written) the
    // unit, which has no CAP_SYS_ADMIN to find the old program by id, still adopts.
    let _ = Command::new("kill").args(["-TERM", &svc.child.id().to_string()]).status();
    let st = svc.child.wait().unwrap();
    assert!(st.success(), "{st:?}: {}", std::fs::read_to_string(&log).unwrap_or_default());
    let before = attached(&ns, &iface).expect("the pinned classifier stays after SIGTERM").id;
    std::fs::remove_file(&prog_pin).expect("the prog pin");
    std::mem::forget(svc);
    let mut svc = spawn();
    notify.until(&mut svc, "READY=1 without the prog pin", Duration::from_secs(30), &log, |m| has(m, "READY=1"));
    let after = attached(&ns, &iface).expect("attached after the restart").id;
    assert_ne!(before, after, "the restart without the prog pin did not replace the program under the link");
    let err = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(err.contains("adopted the classifier pinned on"), "{err}");
    assert!(prog_pin.exists(), "the adoption did not pin the program it put under the link");
    drop(svc);
    bed.down().unwrap();
}

/// The unit starts with its interface and not before: it is bound to the interface's device
/// unit and ordered after it (systemd.device(5): `sys-subsystem-net-devices-%i.device`), and
/// wanted by it, so an interface that appears late (after network-pre.target) gets its filter
/// when it appears instead of a failed start; still ordered before network.target.
#[test]
fn the_unit_starts_with_its_interface_device() {
    let unit = unit_text();
    let dev = "sys-subsystem-net-devices-%i.device";
    let words = |key: &str| -> Vec<String> {
        unit.lines()
            .filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
            .flat_map(|v| v.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .collect()
    };
    assert!(words("BindsTo").iter().any(|w| w == dev), "BindsTo={dev} missing:\n{unit}");
    assert!(words("After").iter().any(|w| w == dev), "After={dev} missing:\n{unit}");
    assert!(words("WantedBy").iter().any(|w| w == dev), "WantedBy={dev} missing:\n{unit}");
    assert!(words("Before").iter().any(|w| w == "network.target"), "Before=network.target missing:\n{unit}");
}

/// Under the journal (JOURNAL_STREAM names stdout and stderr, as systemd sets it) a foreground
/// `filter load --json` logs with sd-daemon priorities (`<6>attached ...`) and prints no
/// interval lines, only the ready line and the summary; --interval brings them back. On a pipe
/// without --json or --interval: the summary, no interval line.
#[test]
fn in_the_journal_logs_carry_priorities_and_interval_lines_are_asked_for() {
    if !privileged("in_the_journal_logs_carry_priorities_and_interval_lines_are_asked_for") {
        return;
    }
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    let (ns, iface) = (bed.ns_b(), bed.iface_b());
    let dir = Dir::new("journal");
    let rule = "proto=udp,dst_port=9,action=drop";
    let load = |extra: &[&str], journal: bool| -> String {
        let out = dir.path("journal.log");
        let f = std::fs::File::create(&out).unwrap();
        let m = f.metadata().unwrap();
        let mut c = fastpath();
        c.args(["filter", "load", "--netns", ns, "-i", iface, "--rule", rule, "--duration", "2.5"]).args(extra);
        if journal {
            c.env("JOURNAL_STREAM", format!("{}:{}", m.dev(), m.ino()));
            c.stdout(f.try_clone().unwrap()).stderr(f);
        } else {
            c.env_remove("JOURNAL_STREAM").stdout(Stdio::piped()).stderr(f);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{extra:?}: {}", std::fs::read_to_string(&out).unwrap());
        String::from_utf8_lossy(&o.stdout).into_owned() + &std::fs::read_to_string(&out).unwrap()
    };
    let intervals =
        |t: &str| t.lines().filter(|l| l.contains("\"type\":\"interval\"") || l.contains(" drop/s")).count();

    let j = load(&["--json"], true);
    assert!(j.lines().any(|l| l.starts_with(&format!("<6>attached the classifier to {iface} (netns {ns})"))), "{j}");
    assert!(j.lines().any(|l| l.starts_with("<6>detached the classifier")), "{j}");
    assert!(j.contains("\"type\":\"ready\"") && j.contains("\"type\":\"summary\""), "{j}");
    assert_eq!(intervals(&j), 0, "interval lines in the journal without --interval: {j}");

    let j = load(&["--json", "--interval", "1"], true);
    assert_eq!(intervals(&j), 2, "--interval 1 over 2.5 s: {j}");

    let p = load(&[], false);
    assert!(
        p.contains(&format!("Summary  {iface}"))
            && p.contains(&format!("fastpath: info: attached the classifier to {iface}")),
        "{p}"
    );
    assert_eq!(intervals(&p), 0, "interval lines on a pipe without --interval or --json: {p}");
    let p = load(&["--interval", "1"], false);
    assert_eq!(intervals(&p), 2, "--interval 1 over 2.5 s on a pipe: {p}");
    bed.down().unwrap();
}

fn scrape(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    let (head, body) = r.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// The value of `name{labels}` (labels as the text format writes them, sorted by name).
fn sample(body: &str, name: &str, labels: &str) -> Option<u64> {
    body.lines().find_map(|l| l.strip_prefix(&format!("{name}{{{labels}}} "))?.trim().parse().ok())
}

/// Polls the endpoint until `want(body)` or `limit` passes; the last body either way.
fn scrape_until(port: u16, limit: Duration, want: impl Fn(&str) -> bool) -> String {
    let t = Instant::now();
    loop {
        let body = scrape(port).unwrap_or_default();
        if want(&body) || t.elapsed() > limit {
            return body;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The exporter and what the test pinned: all gone when dropped, whatever happened.
struct Exporter {
    child: Child,
    pins: Vec<(String, String)>,
    veth: Option<(String, String)>,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill(); // the process this test started
        let _ = self.child.wait();
        for (ns, i) in &self.pins {
            let _ = run(&["filter", "unload", "--netns", ns, "-i", i]);
        }
        if let Some((ns, i)) = &self.veth {
            let _ = Command::new("ip").args(["-n", ns, "link", "del", i]).status();
        }
    }
}

/// `filter export --netns B`: serves every classifier pinned in B, each under its `iface`
/// label (two at once), with the kernel's counts (1,000 frames dropped: 1,000 in the series);
/// picks up a classifier pinned after it started and drops one unpinned; never serves one
/// pinned in another namespace; prints nothing on stdout, and on stderr only its info lines.
#[test]
fn the_exporter_serves_every_classifier_pinned_in_its_namespace() {
    if !privileged("the_exporter_serves_every_classifier_pinned_in_its_namespace") {
        return;
    }
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    let (nsa, ia, nsb, ib) = (bed.ns_a(), bed.iface_a(), bed.ns_b(), bed.iface_b());
    let dir = Dir::new("export");
    let log = dir.path("stderr.log");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = fastpath()
        .args(["filter", "export", "--netns", nsb, "--metrics", &port.to_string()])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // A second interface in B (a veth pair of this test's), for two classifiers at once.
    let (x, y) = (format!("{ib}x"), format!("{ib}y"));
    let mut ex = Exporter { child, pins: Vec::new(), veth: Some((nsb.to_string(), x.clone())) };
    for args in [
        vec!["link", "add", &x, "type", "veth", "peer", "name", &y],
        vec!["link", "set", &x, "up"],
        vec!["link", "set", &y, "up"],
    ] {
        let o = Command::new("ip").args(["-n", nsb]).args(&args).output().unwrap();
        assert!(o.status.success(), "ip {args:?}: {}", stderr(&o));
    }
    let body = scrape_until(port, Duration::from_secs(10), |b| b.contains("fastpath_filter_attached"));
    assert!(scrape(port).is_some(), "the endpoint answers before anything is pinned");
    assert!(!body.contains("fastpath_filter_action_packets_total{"), "nothing pinned yet: {body}");

    let rule = "proto=udp,dst_port=9,action=drop";
    let pin = |ns: &str, i: &str| {
        let o = run(&["filter", "load", "--netns", ns, "-i", i, "--rule", rule, "--detach"]);
        assert!(o.status.success(), "load --detach on {i}: {}", stderr(&o));
    };
    pin(nsb, ib);
    ex.pins.push((nsb.to_string(), ib.to_string()));
    pin(nsb, &x);
    ex.pins.push((nsb.to_string(), x.clone()));
    let drops =
        |b: &str, i: &str| sample(b, "fastpath_filter_action_packets_total", &format!("action=\"drop\",iface=\"{i}\""));
    let body = scrape_until(port, Duration::from_secs(5), |b| drops(b, ib).is_some() && drops(b, &x).is_some());
    assert!(drops(&body, ib) == Some(0) && drops(&body, &x) == Some(0), "both pinned classifiers exported: {body}");
    assert_eq!(sample(&body, "fastpath_filter_attached", &format!("iface=\"{ib}\"")), Some(1), "{body}");

    let g = run(&[
        "gen",
        "--netns",
        nsa,
        "-i",
        ia,
        "--dst-mac",
        &mac(bed.mac_b()),
        "--count",
        "1000",
        "--rate",
        "10000",
        "--duration",
        "10",
    ]);
    assert!(g.status.success(), "gen: {}", stderr(&g));
    let body = scrape_until(port, Duration::from_secs(5), |b| drops(b, ib) >= Some(1000));
    assert_eq!(drops(&body, ib), Some(1000), "the 1,000 frames the rule dropped: {body}");
    assert_eq!(drops(&body, &x), Some(0), "{body}");

    // Another namespace's classifier is not this exporter's.
    pin(nsa, ia);
    ex.pins.push((nsa.to_string(), ia.to_string()));
    std::thread::sleep(Duration::from_millis(2500));
    let body = scrape(port).unwrap_or_default();
    assert!(!body.contains(&format!("iface=\"{ia}\"")), "{ia} is pinned in {nsa}, not {nsb}: {body}");

    // Unpinned: gone from the endpoint within a scan or two.
    let o = run(&["filter", "unload", "--netns", nsb, "-i", ib]);
    assert!(o.status.success(), "unload: {}", stderr(&o));
    let body = scrape_until(port, Duration::from_secs(5), |b| drops(b, ib).is_none());
    assert!(drops(&body, ib).is_none() && drops(&body, &x) == Some(0), "{ib} unpinned, {x} still: {body}");

    let _ = Command::new("kill").args(["-TERM", &ex.child.id().to_string()]).status();
    let t = Instant::now();
    while ex.child.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < Duration::from_secs(5), "still running 5 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut out = String::new();
    std::io::Read::read_to_string(ex.child.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(ex.child.wait().unwrap().success() && out.is_empty(), "quiet on stdout: {out:?}");
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(err.lines().all(|l| l.starts_with("fastpath: info: ")), "only info lines: {err}");
    assert!(err.contains(&format!("{ib}: exporting")) && err.contains(&format!("{ib}: classifier unpinned")), "{err}");
    drop(ex);
    bed.down().unwrap();
}
