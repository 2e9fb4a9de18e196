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
