//! Helpers of the privileged end-to-end tests: the root check, running the `fastpath` binary,
//! and asking the kernel what is attached.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// True if the test can run. Without root the test FAILS, unless the unprivileged subset is
/// asked for (FASTPATH_TEST_UNPRIVILEGED=1, never under CI=true): then it prints a loud SKIPPED
/// line (on the real stderr, not the captured one), is logged for `make test`'s count, and
/// returns false (`fastpath_testbed::gate`).
pub fn privileged(test: &str) -> bool {
    fastpath_testbed::gate::privileged(test)
}

/// The binary under test; `FASTPATH_BIN` overrides it (e.g. to run a test against an older
/// build and see it fail).
pub fn fastpath() -> Command {
    Command::new(std::env::var("FASTPATH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_fastpath").to_string()))
}

/// Runs fastpath to completion.
pub fn run(args: &[&str]) -> Output {
    fastpath().args(args).output().expect("run fastpath")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The last JSON object line of stdout.
pub fn last_json(o: &Output) -> Value {
    let s = String::from_utf8_lossy(&o.stdout);
    s.lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON in output: {s}\nstderr: {}", stderr(o)))
}

/// A fastpath process started with --json, past its `{"type":"ready"}` line.
pub struct Running {
    pub child: Child,
    out: BufReader<ChildStdout>,
    pub ready: Value,
}

impl Running {
    // The child is waited for on the error path and by `terminate`/`finish` otherwise.
    #[allow(clippy::zombie_processes)]
    pub fn start(args: &[&str]) -> Running {
        let mut c = fastpath();
        c.args(args).stderr(Stdio::piped());
        Running::start_cmd(c)
    }

    /// As [`Running::start`], for a command built by the caller (e.g. fastpath run through
    /// `setpriv` in a namespace); its stderr is left as the caller set it.
    #[allow(clippy::zombie_processes)]
    pub fn start_cmd(mut cmd: Command) -> Running {
        let args = format!("{cmd:?}");
        let mut child = cmd.stdout(Stdio::piped()).spawn().expect("spawn fastpath");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap_or(0) == 0 || Instant::now() > deadline {
                let o = child.wait_with_output().expect("wait");
                panic!("{args} exited before it was ready: {}", stderr(&o));
            }
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if v["type"] == "ready" {
                    return Running { child, out, ready: v };
                }
            }
        }
    }

    /// The child process, with its stdout still drained by a thread (dropping the reader would
    /// close the pipe, and the process's next print would fail with EPIPE).
    pub fn into_child(self) -> Child {
        let mut out = self.out;
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut out, &mut std::io::sink());
        });
        self.child
    }

    /// The child, and every JSON line it prints from now on with the time it arrived, collected
    /// by a thread (joined when the process exits and its stdout closes).
    #[allow(clippy::type_complexity)]
    pub fn stream(self) -> (Child, Arc<Mutex<Vec<(Instant, Value)>>>, std::thread::JoinHandle<()>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let l2 = lines.clone();
        let mut out = self.out;
        let h = std::thread::spawn(move || {
            let mut line = String::new();
            while out.read_line(&mut line).unwrap_or(0) > 0 {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    l2.lock().unwrap().push((Instant::now(), v));
                }
                line.clear();
            }
        });
        (self.child, lines, h)
    }

    /// SIGTERM (the process we started, by its PID), then the summary object and the exit status.
    pub fn terminate(self) -> (Value, std::process::ExitStatus) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        self.finish()
    }

    /// Waits for exit; returns the last JSON object and the status.
    pub fn finish(mut self) -> (Value, std::process::ExitStatus) {
        let mut last = Value::Null;
        let mut line = String::new();
        while self.out.read_line(&mut line).unwrap_or(0) > 0 {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                last = v;
            }
            line.clear();
        }
        let status = self.child.wait().expect("wait");
        (last, status)
    }
}

/// The XDP program attached to `iface` in netns `ns`, as the kernel reports it.
pub fn attached(ns: &str, iface: &str) -> Option<fastpath::bpf::AttachedProg> {
    let iface = iface.to_string();
    fastpath_testbed::run_in_netns(ns, move || {
        let dev = fastpath::netdev::NetDev::by_name(&iface).expect("iface");
        fastpath::bpf::query_xdp(dev.ifindex).expect("query")
    })
    .expect("netns")
}

pub fn mac(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The interface's rx_packets (as the kernel counts them in namespace `ns`).
pub fn rx_packets(ns: &str, iface: &str) -> u64 {
    let o = fastpath_testbed::ns_command(ns, "cat")
        .arg(format!("/sys/class/net/{iface}/statistics/rx_packets"))
        .output()
        .expect("cat rx_packets");
    String::from_utf8_lossy(&o.stdout).trim().parse().unwrap_or_else(|_| panic!("rx_packets of {iface} in {ns}"))
}

/// Waits (up to 10 s) until `iface` in `ns` has received at least `want` packets since `base`,
/// then a little longer for the receiving program to count the last of them. Frames the sender
/// reports delivered may still sit in the veth's ring for a while on a loaded machine; a fixed
/// sleep before reading the receiver's summary loses them.
pub fn wait_rx_packets(ns: &str, iface: &str, base: u64, want: u64) {
    let t0 = Instant::now();
    while rx_packets(ns, iface).wrapping_sub(base) < want {
        assert!(t0.elapsed() < Duration::from_secs(10), "{iface} received fewer than {want} packets in 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
}

/// Waits (up to 10 s) until `iface` in `ns` has received nothing new for 300 ms: the frames in
/// flight have landed (for senders whose own count of what reached the veth is not exact).
pub fn wait_rx_settled(ns: &str, iface: &str) {
    let t0 = Instant::now();
    let (mut last, mut still) = (rx_packets(ns, iface), 0);
    while still < 3 {
        assert!(t0.elapsed() < Duration::from_secs(10), "{iface} still receiving after 10 s");
        std::thread::sleep(Duration::from_millis(100));
        let now = rx_packets(ns, iface);
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
}

/// Runs `fastpath gen --engine xsk` from the sending side of `bed` to its receiving veth, with
/// `extra` arguments (count, rate, ports, ...), to completion.
pub fn gen_xsk(bed: &fastpath_testbed::Testbed, extra: &[&str]) -> Output {
    let dst = mac(bed.mac_b());
    let mut args =
        vec!["gen", "--engine", "xsk", "--netns", bed.ns_a(), "-i", bed.iface_a(), "--dst-mac", dst.as_str()];
    args.extend_from_slice(extra);
    run(&args)
}

/// One test bed at a time within a test binary: these tests send at full rate and count exactly.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A counter from JSON output; a missing key FAILS the test (it must never read as 0).
#[track_caller]
pub fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("expected a JSON counter, got {v} (missing key?)"))
}

/// A refusal as the CLI must give it: exit code `code` and one line on stderr naming every
/// needle. Returns that line.
#[track_caller]
pub fn assert_one_line_refusal(what: &str, o: &Output, code: i32, needles: &[&str]) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{what}: exit {:?}, stderr: {err}", o.status);
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: one line expected, got: {err}");
    for n in needles {
        assert!(err.contains(n), "{what}: {err:?} does not mention {n:?}");
    }
    err
}

/// A host's UDP counters (`Udp:` of /proc/net/snmp, or the `Udp6` lines of /proc/net/snmp6, in
/// `ns`): {"RcvbufErrors": n, "InCsumErrors": n, ...}.
pub fn udp_counters(ns: &str, v6: bool) -> std::collections::HashMap<String, u64> {
    let file = if v6 { "/proc/net/snmp6" } else { "/proc/net/snmp" };
    let o = fastpath_testbed::ns_command(ns, "cat").arg(file).output().expect("cat snmp");
    let t = String::from_utf8_lossy(&o.stdout).into_owned();
    if v6 {
        return t
            .lines()
            .filter_map(|l| l.strip_prefix("Udp6"))
            .filter_map(|l| l.split_once(char::is_whitespace))
            .map(|(k, v)| (k.to_string(), v.trim().parse().unwrap_or(0)))
            .collect();
    }
    let rows: Vec<&str> = t.lines().filter(|l| l.starts_with("Udp:")).collect();
    rows[0]
        .split_whitespace()
        .zip(rows[1].split_whitespace())
        .skip(1)
        .map(|(k, v)| (k.to_string(), v.parse().unwrap_or(0)))
        .collect()
}

/// Every key path of a JSON value, one per line, sorted: `a.b` for object keys, `a[]` for array
/// elements (all elements merged), leaves only (an empty object or array is a leaf); a test
/// bed's interface name used as a key is written `<testbed-iface>`.
pub fn key_paths(v: &Value) -> std::collections::BTreeSet<String> {
    fn walk(v: &Value, path: String, out: &mut std::collections::BTreeSet<String>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, x) in m {
                    // A test bed's interface name (`fp` + pid + counter + a/b, random per run)
                    // in a key (alone, or before a dot as in "IFACE.counter") stands as
                    // <testbed-iface>.
                    let (head, tail) = k.split_once('.').map_or((k.as_str(), None), |(h, t)| (h, Some(t)));
                    let bed = head.len() >= 8
                        && head.starts_with("fp")
                        && head.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
                    let k = match (bed, tail) {
                        (true, Some(t)) => format!("<testbed-iface>.{t}"),
                        (true, None) => "<testbed-iface>".to_string(),
                        (false, _) => k.clone(),
                    };
                    walk(x, if path.is_empty() { k } else { format!("{path}.{k}") }, out);
                }
            }
            Value::Array(a) if !a.is_empty() => {
                for x in a {
                    walk(x, format!("{path}[]"), out);
                }
            }
            _ => {
                out.insert(path);
            }
        }
    }
    let mut out = std::collections::BTreeSet::new();
    walk(v, String::new(), &mut out);
    out
}

/// The JSON key set a command printed equals its committed snapshot
/// (tests/snapshots/json/NAME.txt, one key path per line as [`key_paths`] gives them; a line
/// `? path` marks a key the command prints only sometimes, e.g. an error field). A
/// restructuring that must not change behaviour proves here that no JSON key moved or went.
/// `UPDATE_SNAPSHOTS=1` rewrites the snapshot (keeping its `?` marks; refused under CI=true).
#[track_caller]
pub fn assert_json_keys(name: &str, v: &Value) {
    let file = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/snapshots/json/{name}.txt"));
    let now = key_paths(v);
    let old = std::fs::read_to_string(&file).unwrap_or_default();
    let optional: std::collections::BTreeSet<String> =
        old.lines().filter_map(|l| l.strip_prefix("? ")).map(str::to_string).collect();
    let required: std::collections::BTreeSet<String> =
        old.lines().filter(|l| !l.starts_with("? ") && !l.is_empty()).map(str::to_string).collect();
    if std::env::var("UPDATE_SNAPSHOTS").as_deref() == Ok("1") {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "UPDATE_SNAPSHOTS=1 is refused under CI=true");
        let mut lines: Vec<String> =
            now.iter().map(|k| if optional.contains(k) { format!("? {k}") } else { k.clone() }).collect();
        lines.extend(optional.iter().filter(|k| !now.contains(*k)).map(|k| format!("? {k}")));
        lines.sort_by(|a, b| a.trim_start_matches("? ").cmp(b.trim_start_matches("? ")));
        std::fs::create_dir_all(file.parent().unwrap()).expect("snapshot dir");
        std::fs::write(&file, lines.join("\n") + "\n").expect("write snapshot");
        return;
    }
    assert!(!required.is_empty(), "{name}: no snapshot {} (UPDATE_SNAPSHOTS=1 writes it)", file.display());
    let missing: Vec<_> = required.difference(&now).collect();
    let extra: Vec<_> = now.iter().filter(|k| !required.contains(*k) && !optional.contains(*k)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{name}: JSON keys differ from {}: missing {missing:?}, new {extra:?}\n{v}",
        file.display()
    );
}
