//! The other programs the experiments drive, each behind a small typed function: nft,
//! iptables, sockperf, iperf3, and ethtool / ip / ss / cat / timeout / taskset inside a network
//! namespace (`ip netns exec`, [`fastpath_testbed::ns_command`]). At the bottom of the lab's
//! modules: it uses only [`crate::error`].
//!
//! Every function that runs a program inside a namespace needs root (entering a namespace with
//! `ip netns exec`).

use std::io::Write;
use std::process::{Child, Output, Stdio};

use anyhow::anyhow;
use fastpath_testbed::ns_command;
use serde::Serialize;

use crate::error::{env, runtime, LabResult};

/// A program we started, killed and reaped on drop (a server of an experiment).
#[derive(Debug)]
pub struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How running a program failed.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// It could not be started (not installed, or `ip netns exec` failed to).
    #[error("{0}")]
    Start(std::io::Error),
    /// Writing its input or reading its output failed.
    #[error("{0}")]
    Io(std::io::Error),
    /// It ran and failed: its standard error, as printed (untrimmed).
    #[error("{0}")]
    Failed(String),
}

/// True when `program --version` can be started (whatever it exits with): the program is
/// installed. Runs in the caller's namespace; needs no privileges.
pub fn installed(program: &str) -> bool {
    std::process::Command::new(program).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// Runs `program args` in namespace `ns` and returns its standard output.
///
/// # Errors
///
/// [`crate::LabError::Environment`] "(what): ..." when it cannot be started,
/// [`crate::LabError::Runtime`] "(what) failed: (its stderr)" when it exits non-zero.
pub fn ns_run(ns: &str, program: &str, args: &[&str], what: &str) -> LabResult<String> {
    let o = ns_command(ns, program).args(args).output().map_err(|e| env(anyhow!("{what}: {e}")))?;
    if !o.status.success() {
        return Err(runtime(anyhow!("{what} failed: {}", String::from_utf8_lossy(&o.stderr).trim())));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// `ip <args>` in namespace `ns` (`args` split at white space).
///
/// # Errors
///
/// The start error's text, or "ip (args): (its stderr)".
pub fn ip(ns: &str, args: &str) -> Result<(), String> {
    let o = ns_command(ns, "ip").args(args.split_whitespace()).output().map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(format!("ip {args}: {}", String::from_utf8_lossy(&o.stderr).trim()));
    }
    Ok(())
}

/// `ethtool -K <dev> <features>` in namespace `ns` (`features` such as "tso off gso off").
///
/// # Errors
///
/// The start error's text, or "ethtool (args): (its stderr)".
pub fn ethtool_features(ns: &str, dev: &str, features: &str) -> Result<(), String> {
    let mut args = vec!["-K", dev];
    args.extend(features.split_whitespace());
    let o = ns_command(ns, "ethtool").args(&args).output().map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(format!("ethtool {args:?}: {}", String::from_utf8_lossy(&o.stderr)));
    }
    Ok(())
}

/// `nft -f -` in namespace `ns` with `script` on its input; returns its standard output.
///
/// # Errors
///
/// [`ToolError`]: not started (nft is in Debian's package nftables), input/output failed, or
/// nft refused the script.
pub fn nft_apply(ns: &str, script: &str) -> Result<String, ToolError> {
    let mut c = ns_command(ns, "nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(ToolError::Start)?;
    if let Some(mut stdin) = c.stdin.take() {
        stdin.write_all(script.as_bytes()).map_err(ToolError::Io)?;
    }
    let o = c.wait_with_output().map_err(ToolError::Io)?;
    if !o.status.success() {
        return Err(ToolError::Failed(String::from_utf8_lossy(&o.stderr).into_owned()));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The script of an nftables table `table` (family inet) with one chain hooked at prerouting,
/// priority raw, holding `rules` (each line ending in "\n"). `policy`: also say "policy
/// accept;" (the chain's default either way).
pub fn nft_raw_table(table: &str, rules: &str, policy: bool) -> String {
    let policy = if policy { " policy accept;" } else { "" };
    format!(
        "table inet {table} {{\n chain pre {{\n  type filter hook prerouting priority raw;{policy}\n{rules} }}\n}}\n"
    )
}

/// `nft delete table inet <table>` in namespace `ns`; failures ignored (the table may be gone
/// with its namespace).
pub fn nft_delete_table(ns: &str, table: &str) {
    let _ = ns_command(ns, "nft").args(["delete", "table", "inet", table]).output();
}

/// The packets counted by every `counter` of table `table` (family inet) in namespace `ns`,
/// summed; 0 when nft cannot be run or prints nothing readable.
pub fn nft_packets_or_zero(ns: &str, table: &str) -> u64 {
    let o = ns_command(ns, "nft").args(["-j", "list", "table", "inet", table]).output();
    let Ok(o) = o else { return 0 };
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    nft_counter_packets(&v)
}

/// The packets counted by every `counter` of table `table` (family inet) in namespace `ns`.
///
/// # Errors
///
/// As [`ns_run`]; [`crate::LabError::Runtime`] when nft's JSON cannot be read.
pub fn nft_packets(ns: &str, table: &str) -> LabResult<u64> {
    let out = ns_run(ns, "nft", &["-j", "list", "table", "inet", table], "nft -j list table")?;
    let v: serde_json::Value = serde_json::from_str(&out).map_err(|e| runtime(anyhow!("nft -j output: {e}")))?;
    Ok(nft_counter_packets(&v))
}

/// The sum of `counter.packets` over the rules of `nft -j list` output.
fn nft_counter_packets(v: &serde_json::Value) -> u64 {
    v["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["rule"]["expr"].as_array())
        .flatten()
        .filter_map(|x| x["counter"]["packets"].as_u64())
        .sum()
}

/// `iptables -t raw -A PREROUTING <rule>` in namespace `ns`.
///
/// # Errors
///
/// As [`ns_run`].
pub fn iptables_raw_append(ns: &str, rule: &[String]) -> LabResult<()> {
    let mut args = vec!["-t", "raw", "-A", "PREROUTING"];
    args.extend(rule.iter().map(String::as_str));
    ns_run(ns, "iptables", &args, "iptables -t raw -A PREROUTING").map(|_| ())
}

/// `iptables -t raw -D PREROUTING <rule>` in namespace `ns`; failures ignored.
pub fn iptables_raw_delete(ns: &str, rule: &[String]) {
    let _ = ns_command(ns, "iptables").args(["-t", "raw", "-D", "PREROUTING"]).args(rule).output();
}

/// The listing of the raw table's PREROUTING chain in namespace `ns` with exact counters
/// (`iptables -t raw -L PREROUTING -v -x -n`).
///
/// # Errors
///
/// As [`ns_run`].
pub fn iptables_raw_listing(ns: &str) -> LabResult<String> {
    ns_run(ns, "iptables", &["-t", "raw", "-L", "PREROUTING", "-v", "-x", "-n"], "iptables -t raw -L PREROUTING")
}

/// `/proc/net/snmp` as namespace `ns` sees it (`cat` inside it).
///
/// # Errors
///
/// As [`ns_run`].
pub fn ns_snmp(ns: &str) -> LabResult<String> {
    ns_run(ns, "cat", &["/proc/net/snmp"], "cat /proc/net/snmp")
}

/// Starts `sockperf server --tcp -i <ip> -p <port>` in namespace `ns`, pinned to `cpu` with
/// taskset when given; output discarded. Killed when the returned value drops.
///
/// # Errors
///
/// The start error (sockperf, or taskset, not installed).
pub fn sockperf_server(ns: &str, cpu: Option<usize>, ip: &str, port: u16) -> std::io::Result<Running> {
    let port = port.to_string();
    let server = ["server", "--tcp", "-i", ip, "-p", &port];
    let mut c = match cpu {
        Some(cpu) => {
            let mut c = ns_command(ns, "taskset");
            c.args(["-c", &cpu.to_string(), "sockperf"]).args(server);
            c
        }
        None => {
            let mut c = ns_command(ns, "sockperf");
            c.args(server);
            c
        }
    };
    c.stdout(Stdio::null()).stderr(Stdio::null()).spawn().map(Running)
}

/// Starts `sockperf server -i <ip> -p <port>` (UDP) in namespace `ns`, pinned to `cpu` with
/// taskset; output discarded. Killed when the returned value drops.
///
/// # Errors
///
/// The start error (sockperf or taskset not installed).
pub fn sockperf_udp_server(ns: &str, cpu: usize, ip: &str, port: u16) -> std::io::Result<Running> {
    ns_command(ns, "taskset")
        .args(["-c", &cpu.to_string(), "sockperf", "server", "-i", ip, "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(Running)
}

/// True once a UDP socket is bound to `port` in namespace `ns` (`ss -Huln`).
pub fn udp_bound(ns: &str, port: u16) -> bool {
    let o = ns_command(ns, "ss").args(["-Huln", &format!("sport = :{port}")]).output();
    o.is_ok_and(|o| !o.stdout.is_empty())
}

/// `sockperf ping-pong -i <ip> -p <port> -m <msg_bytes> -t <secs> --full-rtt` (UDP, one
/// message in flight, round trips reported) in namespace `ns`, pinned to `cpu` with taskset
/// and killed (`timeout -s KILL`) after `secs + 10` seconds; returns its standard output
/// followed by its standard error (read them with [`parse_sockperf`]: with `--full-rtt` its
/// figures are whole round trips), or `None` when `stop` was set meanwhile: then the child (the
/// `timeout` process, by its PID, which passes the signal on to sockperf) got SIGTERM, and
/// SIGKILL 2 s later if still there.
///
/// # Errors
///
/// The start error (sockperf, taskset or timeout not installed), or waiting for it failing.
pub fn sockperf_udp_ping_pong(
    ns: &str,
    cpu: usize,
    ip: &str,
    port: u16,
    msg_bytes: usize,
    secs: u64,
    stop: &std::sync::atomic::AtomicBool,
) -> std::io::Result<Option<String>> {
    use std::io::Read;
    let mut child = ns_command(ns, "timeout")
        .args(["-s", "KILL", &format!("{}", secs + 10), "taskset", "-c", &cpu.to_string(), "sockperf", "ping-pong"])
        .args(["-i", ip, "-p", &port.to_string(), "-m", &msg_bytes.to_string(), "-t", &secs.to_string(), "--full-rtt"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut t = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut t);
            }
            t
        })
    };
    let out = drain(child.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let err = drain(child.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let mut stopped_at: Option<std::time::Instant> = None;
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            match stopped_at {
                None => {
                    // Our own child, by its PID (not reaped yet: the PID is still its).
                    let _ = std::process::Command::new("kill")
                        .args(["-TERM", &child.id().to_string()])
                        .stderr(Stdio::null())
                        .status();
                    stopped_at = Some(std::time::Instant::now());
                }
                Some(t) if t.elapsed() > std::time::Duration::from_secs(2) => {
                    let _ = child.kill();
                }
                Some(_) => {}
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let text = out.join().unwrap_or_default() + &err.join().unwrap_or_default();
    Ok(if stopped_at.is_some() { None } else { Some(text) })
}

/// True once a TCP socket listens on `port` in namespace `ns` (`ss -Hltn`).
pub fn tcp_listening(ns: &str, port: u16) -> bool {
    let o = ns_command(ns, "ss").args(["-Hltn", &format!("sport = :{port}")]).output();
    o.is_ok_and(|o| !o.stdout.is_empty())
}

/// `sockperf ping-pong --tcp -i <ip> -p <port> -t <secs>` in namespace `ns`, pinned to `cpu`
/// with taskset and killed (`timeout -s KILL`) after `kill_after_s` seconds; returns its
/// standard output followed by its standard error (read them with [`parse_sockperf`]).
///
/// # Errors
///
/// The start error (sockperf, taskset or timeout not installed).
pub fn sockperf_ping_pong_pinned(
    ns: &str,
    cpu: usize,
    ip: &str,
    port: u16,
    secs: u64,
    kill_after_s: u64,
) -> std::io::Result<String> {
    let o = ns_command(ns, "timeout")
        .args([
            "-s",
            "KILL",
            &format!("{kill_after_s}"),
            "taskset",
            "-c",
            &cpu.to_string(),
            "sockperf",
            "ping-pong",
            "--tcp",
            "-i",
            ip,
            "-p",
            &port.to_string(),
            "-t",
            &format!("{secs}"),
        ])
        .output()?;
    Ok(text(&o))
}

/// `sockperf ping-pong --tcp -i <ip> -p <port> -t <secs>` in namespace `ns`; returns its
/// standard output followed by its standard error.
///
/// # Errors
///
/// The start error.
pub fn sockperf_ping_pong(ns: &str, ip: &str, port: u16, secs: u64) -> std::io::Result<String> {
    let o = ns_command(ns, "sockperf")
        .args(["ping-pong", "--tcp", "-i", ip, "-p", &port.to_string(), "-t", &format!("{secs}")])
        .output()?;
    Ok(text(&o))
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// What sockperf ping-pong measured: transactions/s and the latency percentiles, half round
/// trips in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SockperfStats {
    /// Messages received per second of its valid duration.
    pub transactions_per_s: f64,
    /// Median latency, us.
    pub p50_us: f64,
    /// 99th percentile, us.
    pub p99_us: f64,
    /// 99.9th percentile, us.
    pub p999_us: f64,
    /// Maximum, us.
    pub max_us: f64,
}

/// The value after "=" on the first line of sockperf's output containing `label` (such as
/// "percentile 50.000"); NaN when there is none.
pub fn sockperf_value(out: &str, label: &str) -> f64 {
    out.lines()
        .find(|l| l.contains(label))
        .and_then(|l| l.split('=').nth(1))
        .and_then(|s| s.trim().trim_matches(|c: char| !c.is_ascii_digit() && c != '.').parse::<f64>().ok())
        .unwrap_or(f64::NAN)
}

/// Reads sockperf ping-pong's output; None when it printed no full set of statistics (e.g. its
/// connection timed out).
pub fn parse_sockperf(out: &str) -> Option<SockperfStats> {
    let mut tps = None;
    let (mut p50, mut p99, mut p999, mut max) = (None, None, None, None);
    let num = |s: &str| s.trim().trim_matches(|c: char| !c.is_ascii_digit() && c != '.').parse::<f64>().ok();
    for l in out.lines() {
        if l.contains("[Valid Duration]") {
            let rt = l.split("RunTime=").nth(1).and_then(|s| s.split_whitespace().next()).and_then(num);
            let rx = l.split("ReceivedMessages=").nth(1).and_then(num);
            if let (Some(rt), Some(rx)) = (rt, rx) {
                tps = Some(rx / rt);
            }
        }
        let val = || l.split('=').nth(1).and_then(num);
        if l.contains("percentile 50.000") {
            p50 = val();
        } else if l.contains("percentile 99.000") {
            p99 = val();
        } else if l.contains("percentile 99.900") {
            p999 = val();
        } else if l.contains("<MAX>") {
            max = val();
        }
    }
    Some(SockperfStats { transactions_per_s: tps?, p50_us: p50?, p99_us: p99?, p999_us: p999?, max_us: max? })
}

/// Starts `iperf3 -s -1 -B <ip>` (one test, then it exits) in namespace `ns`; output
/// discarded. Killed when the returned value drops.
///
/// # Errors
///
/// The start error (iperf3 is in Debian's package iperf3).
pub fn iperf3_server(ns: &str, ip: &str) -> std::io::Result<Running> {
    ns_command(ns, "iperf3")
        .args(["-s", "-1", "-B", ip])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(Running)
}

/// An iperf3 client running (`iperf3 -c <ip> -t <secs> -J`); [`Iperf3Client::bits_per_s`]
/// waits for its result.
#[derive(Debug)]
pub struct Iperf3Client(Child);

/// Starts `iperf3 -c <ip> -t <secs> -J` in namespace `ns`.
///
/// # Errors
///
/// The start error.
pub fn iperf3_client(ns: &str, ip: &str, secs: u64) -> std::io::Result<Iperf3Client> {
    ns_command(ns, "iperf3")
        .args(["-c", ip, "-t", &format!("{secs}"), "-J"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map(Iperf3Client)
}

impl Iperf3Client {
    /// Waits for the client to end; the bits per second the server received.
    ///
    /// # Errors
    ///
    /// Waiting failed, its JSON cannot be read ("iperf3 output: ..."), or it reported an error
    /// ("iperf3: (its error)").
    pub fn bits_per_s(self) -> Result<f64, String> {
        let out = self.0.wait_with_output().map_err(|e| e.to_string())?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("iperf3 output: {e}"))?;
        v["end"]["sum_received"]["bits_per_second"].as_f64().ok_or_else(|| format!("iperf3: {}", v["error"]))
    }
}

/// What one `sockperf ping-pong` (UDP, `--full-rtt`) reported for its valid duration (the run
/// less its warm-up and its last moments): its own counts, not estimates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SockperfPingPong {
    /// Seconds of the valid duration ("[Valid Duration] RunTime=").
    pub valid_secs: f64,
    /// Messages sent in the valid duration ("SentMessages=").
    pub sent: u64,
    /// Replies received in the valid duration ("ReceivedMessages=").
    pub received: u64,
    /// Round trips the percentiles are taken over ("Total N observations").
    pub observations: u64,
    /// Sequence gaps among the replies ("# dropped messages = N").
    pub dropped: u64,
    /// Replies received twice ("# duplicated messages = N").
    pub duplicated: u64,
    /// Replies out of order ("# out-of-order messages = N").
    pub out_of_order: u64,
    /// Fastest round trip, us (`<MIN> observation`).
    pub min_us: f64,
    /// Mean round trip, us ("avg-rtt=").
    pub mean_us: f64,
    /// Median, us.
    pub p50_us: f64,
    /// 99th percentile, us.
    pub p99_us: f64,
    /// 99.9th percentile, us.
    pub p999_us: f64,
    /// Slowest round trip, us (`<MAX> observation`).
    pub max_us: f64,
}

impl SockperfPingPong {
    /// Messages sent in the valid duration and never answered (sent - received, which covers
    /// the sequence gaps of `dropped`; at least `dropped`).
    pub fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.received).max(self.dropped)
    }
}

/// `text` without ANSI escape sequences (sockperf colours some of its lines).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// Reads the report `sockperf ping-pong` (3.x, UDP) prints: the "[Valid Duration]" line's
/// run time and message counts, the dropped / duplicated / out-of-order counts, the number of
/// observations and the percentiles.
///
/// # Errors
///
/// What is missing, with sockperf's own complaint when it printed one (e.g. "No valid
/// observations found": a reply it never got stalls its ping-pong, which waits for each reply
/// without a timeout, so the valid duration may hold no round trip at all).
pub fn parse_sockperf_ping_pong(out: &str) -> Result<SockperfPingPong, String> {
    let text = strip_ansi(out);
    let int = |s: &str| s.trim_start().split(|c: char| !c.is_ascii_digit()).next().and_then(|d| d.parse::<u64>().ok());
    let float = |s: &str| {
        let s = s.trim_start();
        let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        s[..end].parse::<f64>().ok()
    };
    let after = |line: &str, key: &str| line.split_once(key).map(|(_, v)| v.to_string());
    let find = |key: &str| text.lines().find(|l| l.contains(key)).map(str::to_string);
    let complaint = || {
        text.lines()
            .map(|l| l.trim_start_matches("sockperf:").trim())
            .find(|l| l.starts_with("No ") || l.contains("ERROR") || l.contains("error"))
            .map_or(String::new(), |l| format!(" (sockperf: {l})"))
    };
    let missing = |what: &str| format!("sockperf ping-pong printed no {what}{}", complaint());
    let valid = find("[Valid Duration]").ok_or_else(|| missing("[Valid Duration] line"))?;
    let valid_secs = after(&valid, "RunTime=").as_deref().and_then(float).ok_or_else(|| missing("valid RunTime"))?;
    let sent = after(&valid, "SentMessages=").as_deref().and_then(int).ok_or_else(|| missing("SentMessages"))?;
    let received =
        after(&valid, "ReceivedMessages=").as_deref().and_then(int).ok_or_else(|| missing("ReceivedMessages"))?;
    let counts = find("dropped messages").ok_or_else(|| missing("dropped-messages line"))?;
    let count = |key: &str| after(&counts, key).and_then(|v| v.split_once('=').and_then(|(_, n)| int(n)));
    let dropped = count("dropped messages").ok_or_else(|| missing("dropped messages count"))?;
    let duplicated = count("duplicated messages").ok_or_else(|| missing("duplicated messages count"))?;
    let out_of_order = count("out-of-order messages").ok_or_else(|| missing("out-of-order messages count"))?;
    let observations = find(" observations;")
        .and_then(|l| after(&l, "Total "))
        .as_deref()
        .and_then(int)
        .ok_or_else(|| missing("observation count"))?;
    let value = |key: &str| {
        find(key).and_then(|l| l.split_once(key).and_then(|(_, v)| v.split_once('=').and_then(|(_, n)| float(n))))
    };
    let mean_us = find("avg-rtt=")
        .or_else(|| find("avg-lat="))
        .and_then(|l| l.split_once("avg-").and_then(|(_, v)| v.split_once('=').and_then(|(_, n)| float(n))))
        .ok_or_else(|| missing("avg-rtt"))?;
    Ok(SockperfPingPong {
        valid_secs,
        sent,
        received,
        observations,
        dropped,
        duplicated,
        out_of_order,
        min_us: value("<MIN> observation").ok_or_else(|| missing("<MIN>"))?,
        mean_us,
        p50_us: value("percentile 50.000").ok_or_else(|| missing("percentile 50"))?,
        p99_us: value("percentile 99.000").ok_or_else(|| missing("percentile 99"))?,
        p999_us: value("percentile 99.900").ok_or_else(|| missing("percentile 99.9"))?,
        max_us: value("<MAX> observation").ok_or_else(|| missing("<MAX>"))?,
    })
}

/// The state of a device in namespace `ns` that latency depends on: its driver (`ethtool
/// -i`), whether its NAPI runs in a kernel thread (`/sys/class/net/DEV/threaded`, read inside
/// the namespace) and whether GRO is on (`ethtool -k`); each field the value found or
/// "unknown (why)".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DevState {
    /// The device.
    pub dev: String,
    /// `driver:` of `ethtool -i`.
    pub driver: String,
    /// The sysfs `threaded` value ("0": NAPI in softirq, "1": in a kernel thread).
    pub threaded: String,
    /// `generic-receive-offload:` of `ethtool -k` (`on`, `off`, `off [fixed]`, ...).
    pub gro: String,
}

/// Reads [`DevState`] of `dev` in namespace `ns`.
pub fn dev_state(ns: &str, dev: &str) -> DevState {
    let unknown = |e: crate::error::LabError| format!("unknown ({})", e.to_string().trim());
    let field = |text: &str, key: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| format!("unknown (no \"{key}\")"))
    };
    let driver = ns_run(ns, "ethtool", &["-i", dev], "ethtool -i").map_or_else(unknown, |t| field(&t, "driver:"));
    let path = format!("/sys/class/net/{dev}/threaded");
    let threaded = ns_run(ns, "cat", &[path.as_str()], "cat threaded").map_or_else(unknown, |t| t.trim().to_string());
    let gro = ns_run(ns, "ethtool", &["-k", dev], "ethtool -k")
        .map_or_else(unknown, |t| field(&t, "generic-receive-offload:"));
    DevState { dev: dev.to_string(), driver, threaded, gro }
}

impl std::fmt::Display for DevState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let threaded = match self.threaded.as_str() {
            "0" => "threaded NAPI off".to_string(),
            "1" => "threaded NAPI on".to_string(),
            v => format!("threaded NAPI {v}"),
        };
        write!(f, "{} driver {}, {threaded}, GRO {}", self.dev, self.driver, self.gro)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sockperf ping-pong -i 10.99.77.2 -p 11177 -m 22 -t 2 --full-rtt` (sockperf 3.7, this
    /// VM, veth between two namespaces), as printed, escapes included.
    const PING_PONG: &str = "sockperf: \u{1b}[2;35m== version #3.7-no.git == \u{1b}[0m
sockperf[CLIENT] send on:sockperf: using recvfrom() to block on socket(s)

[ 0] IP = 10.99.77.2      PORT = 11177 # UDP
sockperf: Warmup stage (sending a few dummy messages)...
sockperf: Starting test...
sockperf: Test end (interrupted by timer)
sockperf: Test ended
sockperf: [Total Run] RunTime=2.000 sec; Warm up time=400 msec; SentMessages=31284; ReceivedMessages=31283
sockperf: ========= Printing statistics for Server No: 0
sockperf: [Valid Duration] RunTime=1.550 sec; SentMessages=23891; ReceivedMessages=23891
sockperf: \u{1b}[2;35m====> avg-rtt=64.855 (std-dev=314.253)\u{1b}[0m
sockperf: # dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0
sockperf: Summary: Round trip is 64.855 usec
sockperf: \u{1b}[2;35mTotal 23891 observations\u{1b}[0m; each percentile contains 238.91 observations
sockperf: ---> <MAX> observation = 8070.791
sockperf: ---> percentile 99.999 = 8070.791
sockperf: ---> percentile 99.990 = 4920.154
sockperf: ---> percentile 99.900 = 3971.821
sockperf: ---> percentile 99.000 = 1655.017
sockperf: ---> percentile 90.000 =   33.149
sockperf: ---> percentile 75.000 =   31.196
sockperf: ---> percentile 50.000 =   30.635
sockperf: ---> percentile 25.000 =   30.265
sockperf: ---> <MIN> observation =   23.645
";

    /// The same with one reply dropped (nft, in the server's namespace) 2.5 s into a 4 s run:
    /// sockperf waits for it until its timer ends the run.
    const STALLED: &str = "sockperf: \u{1b}[2;35m== version #3.7-no.git == \u{1b}[0m
sockperf[CLIENT] send on:sockperf: using recvfrom() to block on socket(s)

[ 0] IP = 10.99.77.2      PORT = 11177 # UDP
sockperf: Warmup stage (sending a few dummy messages)...
sockperf: Starting test...
sockperf: Test end (interrupted by timer)
sockperf: Test ended
sockperf: [Total Run] RunTime=4.001 sec; Warm up time=400 msec; SentMessages=4736; ReceivedMessages=4735
sockperf: ========= Printing statistics for Server No: 0
sockperf: No valid observations found. Try tune parameters: --time/--mps/--reply-every
";

    #[test]
    fn sockperf_ping_pong_report_is_read_not_estimated() {
        let s = parse_sockperf_ping_pong(PING_PONG).expect("a full report");
        assert_eq!((s.sent, s.received, s.observations), (23891, 23891, 23891));
        assert_eq!((s.dropped, s.duplicated, s.out_of_order, s.lost()), (0, 0, 0, 0));
        assert_eq!(s.valid_secs, 1.55);
        assert_eq!((s.min_us, s.mean_us, s.p50_us), (23.645, 64.855, 30.635));
        assert_eq!((s.p99_us, s.p999_us, s.max_us), (1655.017, 3971.821, 8070.791));
        // Counts that say something was lost are read as such.
        let lossy = PING_PONG
            .replace("SentMessages=23891; ReceivedMessages=23891", "SentMessages=23891; ReceivedMessages=23889")
            .replace("# dropped messages = 0", "# dropped messages = 1");
        assert_eq!(parse_sockperf_ping_pong(&lossy).expect("lossy").lost(), 2);
        let gaps = PING_PONG.replace("# dropped messages = 0", "# dropped messages = 5");
        assert_eq!(parse_sockperf_ping_pong(&gaps).expect("gaps").lost(), 5);
        let e = parse_sockperf_ping_pong(STALLED).expect_err("no valid duration");
        assert!(e.contains("[Valid Duration]") && e.contains("No valid observations found"), "{e}");
        let e = parse_sockperf_ping_pong(&PING_PONG.replace("percentile 99.900", "pct")).expect_err("no p99.9");
        assert!(e.contains("percentile 99.9"), "{e}");
    }

    #[test]
    fn device_state_reads_as_found() {
        let d = DevState { dev: "va".into(), driver: "veth".into(), threaded: "0".into(), gro: "on".into() };
        assert_eq!(d.to_string(), "va driver veth, threaded NAPI off, GRO on");
        let d = DevState { threaded: "1".into(), gro: "off [fixed]".into(), ..d };
        assert_eq!(d.to_string(), "va driver veth, threaded NAPI on, GRO off [fixed]");
        let d = DevState { threaded: "unknown (cat threaded failed: x)".into(), ..d };
        assert!(d.to_string().contains("threaded NAPI unknown (cat threaded failed: x)"));
    }
}
