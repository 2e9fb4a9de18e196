//! `fastpath compare --peers`: fastpath beside the tools a data-plane engineer already runs, on
//! the test bed, generator and pinning of `compare`'s own rows, in the same run. The drivers of
//! those tools live here: DPDK's `dpdk-testpmd` (Debian `dpdk-dev`; the net_af_xdp,
//! net_af_packet and net_tap PMDs, `--no-huge --no-pci`) and xdp-tools (`xdp-bench drop`,
//! `xdp-trafficgen udp`, `xdp-filter`), each started inside a test-bed namespace with
//! `ip netns exec` ([`fastpath_testbed::ns_command`]).
//!
//! Groups (each fastpath row beside its peers; every peer row also as a share of the run's
//! in-kernel XDP_DROP):
//! - XDP_DROP: `compare`'s own row vs `xdp-bench drop`;
//! - AF_XDP rxonly: `compare`'s "AF_XDP native copy" vs testpmd rxonly over net_af_xdp
//!   (busy_budget default, and busy_budget=0);
//! - AF_PACKET rxonly: `compare`'s TPACKET_V3 row vs testpmd rxonly over net_af_packet;
//! - AF_XDP txonly and l2fwd: fastpath's loops (CPU 1) vs testpmd txonly and macswap;
//!   what arrives is counted by an in-kernel XDP_DROP at the far end;
//! - TAP txonly: fastpath's TAP port (writev) vs testpmd txonly over net_tap, counted by
//!   XDP_DROP on the TAP device;
//! - generator, 2 threads: `fastpath gen`'s xdp-live engine vs `xdp-trafficgen udp -t 2`;
//! - classifier, 1 / 100 / 10,000 rules: fastpath's classifier vs `xdp-filter` with the same
//!   rules (only what xdp-filter can express: source addresses and one port), in-kernel drops.
//!
//! A peer that is missing or fails is a row with the reason (its first error line), never a
//! gap; [`check_installed`] refuses to start when a peer is missing and `CI=true`.
//!
//! Privileges: root (namespaces, XDP, AF_XDP, testpmd's PMDs).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fastpath::bpf::{AttachOpts, XdpDrop, XdpMode};
use fastpath::io::afxdp::AfXdpPort;
use fastpath::io::tap::{TapOptions, TapPort};
use fastpath::netdev::{Iface, NetDev};
use fastpath::rules::compile::compile;
use fastpath::xsk::{CopyMode, XskConfig};
use fastpath_testbed::{ns_command, spawn_in_netns, Testbed};
use fastpath_tools::bench::{self, LoopOpts, TxPlan, Wait};
use fastpath_tools::stats::{median, Counters};

/// The CPU of fastpath's loops and of testpmd's forwarding lcore; testpmd's main lcore and
/// the generator use CPU 0.
const APP_CPU: usize = 1;
const GEN_CPU: usize = 0;

/// The peer programs; [`check_installed`] looks for each.
pub const PEER_PROGRAMS: [&str; 4] = ["dpdk-testpmd", "xdp-bench", "xdp-trafficgen", "xdp-filter"];

/// The rule counts of the classifier groups.
pub const RULE_COUNTS: [usize; 3] = [1, 100, 10_000];

/// One row of one run: who ran, its exact command line, its rate (Mpps) or why there is none.
#[derive(Debug, Clone)]
pub struct PeerResult {
    /// The group it belongs to (e.g. "AF_XDP rxonly").
    pub group: String,
    /// "fastpath" or the peer's name and variant.
    pub who: String,
    /// The exact command line (fastpath's rows: the equivalent `fastpath` command).
    pub command: String,
    /// Frames per second, in millions, or the reason there is no rate.
    pub mpps: Result<f64, String>,
}

/// The installed version of Debian package `pkg` (dpkg-query), or "not installed".
pub fn package_version(pkg: &str) -> String {
    std::process::Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", pkg])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "not installed".into())
}

/// The version string of a row's tool: "dpdk-dev 22.11..." for testpmd, "xdp-tools 1.3.1..."
/// for xdp-tools, "this build" for fastpath.
pub fn version_of(who: &str) -> String {
    if who.starts_with("testpmd") {
        format!("dpdk-dev {}", package_version("dpdk-dev"))
    } else if who.starts_with("xdp-") {
        format!("xdp-tools {}", package_version("xdp-tools"))
    } else {
        "this build".into()
    }
}

/// The peer programs that cannot be found on `PATH`.
pub fn missing_programs() -> Vec<&'static str> {
    PEER_PROGRAMS.into_iter().filter(|p| !on_path(p)).collect()
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file())).unwrap_or(false)
}

/// Refuses to run without every peer when `ci` (CI=true: a missing peer fails, it is never a
/// quiet gap); elsewhere a missing peer becomes a row that says so.
///
/// # Errors
///
/// A one-line message naming the missing programs and the packages that carry them.
pub fn check_installed(ci: bool) -> Result<(), String> {
    let missing = missing_programs();
    if ci && !missing.is_empty() {
        return Err(format!(
            "--peers: {} not installed (CI=true needs every peer; `make deps` installs Debian's dpdk-dev and xdp-tools)",
            missing.join(", ")
        ));
    }
    Ok(())
}

/// The first line of `text` that says why a peer failed; a missing kernel BTF type (a peer
/// program the kernel cannot load: xdp-tools 1.3.1 on Linux >= 6.x, whose objects carry a
/// tp_btf program for the removed `xdp_redirect_map_err` tracepoint) before any other.
pub fn first_error(text: &str) -> Option<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            ["error", "fail", "cannot", "couldn't", "refus", "unable"].iter().any(|w| l.contains(w))
        })
        .collect();
    lines.iter().find(|l| l.contains("kernel BTF")).or(lines.first()).map(|l| l.to_string())
}

/// The last "RX-packets: N" of testpmd's port statistics in `text`.
pub fn testpmd_rx_packets(text: &str) -> Option<u64> {
    last_number_after(text, "RX-packets:")
}

fn last_number_after(text: &str, key: &str) -> Option<u64> {
    text.rsplit(key).next().filter(|_| text.contains(key))?.split_whitespace().next()?.parse().ok()
}

/// Packets of "XDP_DROP  N pkts" in `xdp-filter status`.
pub fn xdp_filter_drops(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next() == Some("XDP_DROP")).then(|| w.next()?.parse().ok())?
    })
}

/// The largest per-second rate `xdp-bench drop` printed, in packets/s ("12,345,678 pkt/s").
pub fn xdp_bench_pps(text: &str) -> Option<u64> {
    text.lines()
        .filter_map(|l| {
            let i = l.find(" pkt/s")?;
            l[..i].split_whitespace().last()?.replace(',', "").parse::<u64>().ok()
        })
        .max()
}

/// A peer process in a namespace, its output in a file of its own; interrupted (SIGINT, as a
/// user's Ctrl-C: testpmd and xdp-tools detach and print their totals) and reaped on drop.
struct PeerProc {
    child: Child,
    log: PathBuf,
}

impl PeerProc {
    /// Starts `program args` in `ns` (through `sh -c` with bpffs mounted first when `bpffs`:
    /// `ip netns exec` gives the program a /sys of its own, without one).
    fn start(ns: &str, program: &str, args: &[String], bpffs: bool) -> Result<PeerProc, String> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let log = std::env::temp_dir().join(format!(
            "fastpath-peer-{}-{}.log",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&log)
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = if bpffs {
            let mut c = ns_command(ns, "sh");
            c.arg("-c").arg("mount -t bpf bpf /sys/fs/bpf 2>/dev/null; exec \"$@\"").arg("sh").arg(program);
            c
        } else {
            ns_command(ns, program)
        };
        let child = cmd
            .args(args)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("{program}: {e}"))?;
        Ok(PeerProc { child, log })
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The reason it ended early, if it has.
    fn exited(&mut self) -> Option<String> {
        let st = self.child.try_wait().ok().flatten()?;
        let out = self.output();
        Some(
            first_error(&out)
                .unwrap_or_else(|| format!("exited ({st}): {}", out.lines().last().unwrap_or("no output").trim())),
        )
    }

    /// Waits up to `timeout` for `ready(output)`; the reason when it exits or times out.
    fn wait_for(&mut self, timeout: Duration, ready: impl Fn(&str) -> bool) -> Result<(), String> {
        self.wait_until(timeout, false, ready)
    }

    /// As [`Self::wait_for`], but `idle` counts from the last time the output grew: for a set-up
    /// that reports its progress (10,000 `xdp-filter ip` calls take minutes on a loaded machine,
    /// so a fixed bound fails a run that is only slow).
    fn wait_for_progress(&mut self, idle: Duration, ready: impl Fn(&str) -> bool) -> Result<(), String> {
        self.wait_until(idle, true, ready)
    }

    fn wait_until(&mut self, timeout: Duration, progress: bool, ready: impl Fn(&str) -> bool) -> Result<(), String> {
        let (t0, mut since, mut seen) = (Instant::now(), Instant::now(), 0);
        loop {
            let out = self.output();
            if ready(&out) {
                return Ok(());
            }
            if let Some(why) = self.exited() {
                return Err(why);
            }
            if progress && out.len() != seen {
                (since, seen) = (Instant::now(), out.len());
            }
            if since.elapsed() > timeout {
                let last = out.lines().last().unwrap_or("no output").trim().to_string();
                let what = if progress { "no progress" } else { "not ready" };
                return Err(first_error(&out).unwrap_or_else(|| {
                    format!(
                        "{what} for {} s after {} s (last output: {last})",
                        timeout.as_secs(),
                        t0.elapsed().as_secs()
                    )
                }));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGINT, then up to 20 s to exit (then SIGKILL); its output.
    fn stop(mut self) -> String {
        self.interrupt();
        self.output()
    }

    fn interrupt(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            // The `ip netns exec` process execs the program (and `sh -c` execs it): same pid.
            let _ = fastpath_tools::signal::interrupt_child(&self.child);
            let t0 = Instant::now();
            while self.child.try_wait().ok().flatten().is_none() {
                if t0.elapsed() > Duration::from_secs(20) {
                    let _ = self.child.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = self.child.wait();
    }
}

impl Drop for PeerProc {
    fn drop(&mut self) {
        self.interrupt();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// An in-kernel XDP_DROP on `iface` in `ns` that counts what arrives (the independent counter
/// of the TX, forwarding and generator rows), sampled every 10 ms.
struct Sink {
    count: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<Result<(), String>, fastpath_testbed::TestbedError>>>,
}

impl Sink {
    /// Attaches (native mode) once `iface` exists (up to 10 s: a TAP a peer creates).
    fn start(ns: &str, iface: &str) -> Result<Sink, String> {
        let (count, stop) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
        let (c, s, name) = (count.clone(), stop.clone(), iface.to_string());
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = spawn_in_netns(ns, move || -> Result<(), String> {
            let t0 = Instant::now();
            let dev = loop {
                match Iface::resolve(&name) {
                    Ok(d) => break d,
                    Err(e) if t0.elapsed() > Duration::from_secs(10) => {
                        let _ = tx.send(Err(e.to_string()));
                        return Err(e.to_string());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            };
            let p = match XdpDrop::load().and_then(|p| p.attach(&dev, AttachOpts::mode(Some(XdpMode::Native)))) {
                Ok(p) => p,
                Err(e) => {
                    let _ = tx.send(Err(format!("XDP_DROP counter on {name}: {e}")));
                    return Err(e.to_string());
                }
            };
            let _ = tx.send(Ok(()));
            while !s.load(Ordering::Relaxed) {
                c.store(p.prog.counters().map(|x| x.0).unwrap_or(0), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(())
        });
        let mut sink = Sink { count, stop, thread: Some(thread) };
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(Ok(())) => {
                std::thread::sleep(Duration::from_millis(20));
                Ok(sink)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => {
                sink.finish();
                Err("XDP_DROP counter did not start".into())
            }
        }
    }

    fn now(&self) -> (u64, Instant) {
        (self.count.load(Ordering::Relaxed), Instant::now())
    }

    /// Frames per second over `secs` seconds from now (Mpps).
    fn window(&self, secs: f64) -> f64 {
        let (n0, t0) = self.now();
        std::thread::sleep(Duration::from_secs_f64(secs));
        let (n1, t1) = self.now();
        (n1 - n0) as f64 / (t1 - t0).as_secs_f64() / 1e6
    }

    fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.finish();
    }
}

/// What every peer measurement needs: the bed, the seconds of traffic, the generator.
pub struct Bench<'a> {
    /// The run's test bed (one queue).
    pub bed: &'a Testbed,
    /// Seconds of traffic per row.
    pub secs: f64,
    /// Runs the generator (xdp-live, from ns a) with this many threads for `secs` and returns
    /// the seconds it ran.
    pub generate: &'a dyn Fn(u32) -> Result<f64, String>,
    /// Makes testpmd's `--file-prefix` unique per start.
    pub run: u32,
}

impl Bench<'_> {
    fn testpmd_args(&self, vdev: &str, mode: &str, extra: &[String]) -> Vec<String> {
        static N: AtomicU64 = AtomicU64::new(0);
        let mut a: Vec<String> = [
            "-l",
            &format!("{GEN_CPU},{APP_CPU}"),
            "--main-lcore",
            &GEN_CPU.to_string(),
            "--no-huge",
            "--no-pci",
            "-m",
            "1024",
            "--file-prefix",
            &format!("fpcmp{}-{}-{}", std::process::id(), self.run, N.fetch_add(1, Ordering::Relaxed)),
            "--vdev",
            vdev,
            "--",
            &format!("--forward-mode={mode}"),
            "--nb-cores",
            "1",
            "--total-num-mbufs",
            "16384",
            "--stats-period",
            "1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().cloned());
        a
    }

    fn start_testpmd(&self, ns: &str, args: &[String]) -> Result<PeerProc, String> {
        let mut p = PeerProc::start(ns, "dpdk-testpmd", args, false)?;
        p.wait_for(Duration::from_secs(30), |o| testpmd_rx_packets(o).is_some())?;
        Ok(p)
    }

    /// testpmd rxonly in ns b: RX-packets gained while the generator ran, per generator second.
    fn testpmd_rx(&self, vdev: &str) -> Result<f64, String> {
        let p = self.start_testpmd(self.bed.ns_b(), &self.testpmd_args(vdev, "rxonly", &[]))?;
        let before = testpmd_rx_packets(&p.output()).unwrap_or(0);
        let secs = (self.generate)(1)?;
        std::thread::sleep(Duration::from_millis(1500)); // one more statistics period
        let after = testpmd_rx_packets(&p.stop()).unwrap_or(before);
        Ok(after.saturating_sub(before) as f64 / secs / 1e6)
    }

    /// Frames a TX peer in `ns` puts on the wire, counted at the sink `(sink_ns, sink_iface)` over
    /// a window after a 0.5 s warm-up.
    fn tx_window(&self, mut p: PeerProc, sink_ns: &str, sink_iface: &str) -> Result<f64, String> {
        let sink = Sink::start(sink_ns, sink_iface)?;
        std::thread::sleep(Duration::from_millis(500));
        let rate = sink.window(self.secs);
        if let Some(why) = p.exited() {
            return Err(why);
        }
        drop(sink);
        p.stop();
        Ok(rate)
    }

    fn testpmd_tx(&self, vdev: &str, sink_ns: &str, sink_iface: &str, peer_mac: &str) -> Result<f64, String> {
        let args = self.testpmd_args(vdev, "txonly", &[format!("--eth-peer=0,{peer_mac}")]);
        let p = self.start_testpmd(self.bed.ns_a(), &args)?;
        self.tx_window(p, sink_ns, sink_iface)
    }

    fn testpmd_tap_tx(&self, tap: &str) -> Result<f64, String> {
        let args = self.testpmd_args(&format!("net_tap0,iface={tap}"), "txonly", &[]);
        let p = self.start_testpmd(self.bed.ns_b(), &args)?;
        self.tx_window(p, self.bed.ns_b(), tap)
    }

    /// Frames the forwarder in ns b (testpmd macswap or fastpath l2fwd) sends back, counted in
    /// ns a, per generator second.
    fn fwd_rate(&self, testpmd_vdev: Option<&str>) -> Result<f64, String> {
        let sink = Sink::start(self.bed.ns_a(), self.bed.iface_a())?;
        let (n0, _) = sink.now();
        let secs = match testpmd_vdev {
            Some(vdev) => {
                let p = self.start_testpmd(self.bed.ns_b(), &self.testpmd_args(vdev, "macswap", &[]))?;
                let secs = (self.generate)(1)?;
                std::thread::sleep(Duration::from_millis(300));
                p.stop();
                secs
            }
            None => {
                let fwd = Loop::start(self.bed.ns_b(), LoopKind::L2fwd(self.bed.iface_b().to_string()))?;
                let secs = (self.generate)(1);
                std::thread::sleep(Duration::from_millis(300));
                fwd.finish()?;
                secs?
            }
        };
        std::thread::sleep(Duration::from_millis(100));
        let (n1, _) = sink.now();
        Ok((n1 - n0) as f64 / secs / 1e6)
    }

    fn xdp_bench_drop(&self) -> Result<f64, String> {
        let args = vec!["drop".into(), self.bed.iface_b().to_string(), "-i".into(), "1".into()];
        let mut p = PeerProc::start(self.bed.ns_b(), "xdp-bench", &args, true)?;
        std::thread::sleep(Duration::from_millis(1500));
        if let Some(why) = p.exited() {
            return Err(why);
        }
        (self.generate)(1)?;
        let out = p.stop();
        xdp_bench_pps(&out)
            .map(|pps| pps as f64 / 1e6)
            .ok_or_else(|| first_error(&out).unwrap_or_else(|| "xdp-bench printed no rate".into()))
    }

    fn trafficgen(&self, threads: u32) -> Result<f64, String> {
        let args: Vec<String> = vec![
            "udp".into(),
            self.bed.iface_a().into(),
            "-m".into(),
            mac_string(self.bed.mac_b()),
            "-t".into(),
            threads.to_string(),
        ];
        let mut p = PeerProc::start(self.bed.ns_a(), "xdp-trafficgen", &args, true)?;
        std::thread::sleep(Duration::from_millis(1500));
        if let Some(why) = p.exited() {
            return Err(why);
        }
        self.tx_window(p, self.bed.ns_b(), self.bed.iface_b())
    }

    fn gen_threads(&self, threads: u32) -> Result<f64, String> {
        let sink = Sink::start(self.bed.ns_b(), self.bed.iface_b())?;
        let (n0, _) = sink.now();
        let secs = (self.generate)(threads)?;
        std::thread::sleep(Duration::from_millis(100));
        Ok((sink.now().0 - n0) as f64 / secs / 1e6)
    }

    fn fastpath_tx(&self, kind: LoopKind, sink_ns: &str, sink_iface: &str) -> Result<f64, String> {
        let ns = if matches!(kind, LoopKind::TapTx(_)) { self.bed.ns_b() } else { self.bed.ns_a() };
        let l = Loop::start(ns, kind)?;
        let sink = Sink::start(sink_ns, sink_iface);
        let rate = sink.map(|s| {
            std::thread::sleep(Duration::from_millis(500));
            s.window(self.secs)
        });
        l.finish()?;
        rate
    }

    /// xdp-filter in ns b with `n` rules (n-1 source addresses that never match, then the
    /// generator's port 9): frames it dropped per generator second.
    fn xdp_filter(&self, n: usize) -> Result<f64, String> {
        let iface = self.bed.iface_b();
        // The EXIT trap unloads whatever happens after the load (a rule refused, an interrupt).
        let mut script = format!(
            "mount -t bpf bpf /sys/fs/bpf 2>/dev/null\ntrap 'exit 1' INT TERM\n\
             xdp-filter load -m native -p allow -f ipv4,udp {iface} || exit 1\n\
             trap 'xdp-filter unload {iface} >/dev/null 2>&1' EXIT\n"
        );
        for i in 0..n.saturating_sub(1) {
            script += &format!("xdp-filter ip {} -m src || exit 1\n", decoy_src(i));
            if (i + 1) % 250 == 0 {
                script += &format!("echo added {} rules\n", i + 1);
            }
        }
        script += "xdp-filter port 9 -m dst || exit 1\necho READY\nread _ignored\nxdp-filter status\n";
        // 10,000 rules do not fit one argument (128 KiB): the script goes into a file of our own.
        let path = std::env::temp_dir().join(format!("fastpath-xdp-filter-{}-{n}.sh", std::process::id()));
        let _ = std::fs::remove_file(&path);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut f| f.write_all(script.as_bytes()))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let _cleanup = RemoveOnDrop(path.clone());
        // Its output goes to a file (`xdp-filter status` lists every rule: a pipe could fill).
        let mut p = PeerProc::start(self.bed.ns_b(), "sh", &[path.display().to_string()], false)?;
        // The set-up reports every 250 rules: 120 s without one is a hang, not a slow machine.
        p.wait_for_progress(Duration::from_secs(120), |o| o.lines().any(|l| l == "READY"))?;
        let secs = (self.generate)(1);
        if let Some(stdin) = p.child.stdin.as_mut() {
            let _ = stdin.write_all(b"\n");
        }
        // `xdp-filter status` lists every rule: wait for its end while it prints.
        let (mut since, mut seen) = (Instant::now(), 0);
        while p.child.try_wait().ok().flatten().is_none() && since.elapsed() < Duration::from_secs(60) {
            let len = std::fs::metadata(&p.log).map(|m| m.len()).unwrap_or(0);
            if len != seen {
                (since, seen) = (Instant::now(), len);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = p.stop();
        let secs = secs?;
        xdp_filter_drops(&out)
            .map(|n| n as f64 / secs / 1e6)
            .ok_or_else(|| first_error(&out).unwrap_or_else(|| "xdp-filter status printed no XDP_DROP count".into()))
    }

    /// fastpath's classifier in ns b with the same `n` rules as [`Self::xdp_filter`]: frames
    /// its `drop` counter gained per generator second.
    fn classifier(&self, n: usize) -> Result<f64, String> {
        let l = Loop::start(self.bed.ns_b(), LoopKind::Classifier(self.bed.iface_b().to_string(), n))?;
        let c0 = l.counter.load(Ordering::Relaxed);
        let secs = (self.generate)(1);
        std::thread::sleep(Duration::from_millis(100));
        let c1 = l.counter.load(Ordering::Relaxed);
        l.finish()?;
        Ok((c1 - c0) as f64 / secs? / 1e6)
    }
}

/// A file of ours, removed on drop.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Source address `i` of the rules that never match (172.16.0.0/12; the generator sends from
/// 10.99.0.1).
fn decoy_src(i: usize) -> String {
    format!("172.{}.{}.{}", 16 + (i >> 16) % 16, (i >> 8) & 255, i & 255)
}

/// The classifier's rule set of the classifier groups: `n - 1` never-matching source
/// addresses, then UDP destination port 9, all `drop`.
pub fn classifier_rules(n: usize) -> String {
    let mut t = String::from("default = \"pass\"\n");
    for i in 0..n.saturating_sub(1) {
        t += &format!("[[rule]]\nsrc = \"{}/32\"\naction = \"drop\"\n", decoy_src(i));
    }
    t + "[[rule]]\nname = \"port9\"\nproto = \"udp\"\ndst_port = 9\naction = \"drop\"\n"
}

fn mac_string(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// fastpath's side of a group, run in a thread of its own inside a namespace.
enum LoopKind {
    /// AF_XDP txonly (native, copy) out of this interface, to the bed's far end.
    AfXdpTx(String, [u8; 6]),
    /// AF_XDP l2fwd (native, copy; MACs swapped) on this interface.
    L2fwd(String),
    /// TAP txonly (writev) into a TAP of this name.
    TapTx(String),
    /// The classifier (native) with [`classifier_rules`]`(n)` on this interface; `counter`
    /// follows its `drop` total.
    Classifier(String, usize),
}

/// A running [`LoopKind`]: stopped and joined by [`Loop::finish`] (or on drop).
struct Loop {
    stop: Arc<AtomicBool>,
    counter: Arc<AtomicU64>,
    thread: Option<JoinHandle<Result<Result<(), String>, fastpath_testbed::TestbedError>>>,
}

impl Loop {
    fn start(ns: &str, kind: LoopKind) -> Result<Loop, String> {
        let (stop, counter) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let (s, c) = (stop.clone(), counter.clone());
        let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let thread = spawn_in_netns(ns, move || {
            let r = run_loop(kind, &s, &c, &tx);
            if let Err(e) = &r {
                let _ = tx.send(Err(e.clone()));
            }
            r
        });
        let mut l = Loop { stop, counter, thread: Some(thread) };
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(())) => Ok(l),
            Ok(Err(e)) => {
                let _ = l.join();
                Err(e)
            }
            Err(_) => Err(l.join().err().unwrap_or_else(|| "did not start".into())),
        }
    }

    fn join(&mut self) -> Result<(), String> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| "panicked".to_string())?.map_err(|e| e.to_string())?,
            None => Ok(()),
        }
    }

    fn finish(mut self) -> Result<(), String> {
        self.join()
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = self.join();
    }
}

fn run_loop(
    kind: LoopKind,
    stop: &AtomicBool,
    counter: &AtomicU64,
    ready: &std::sync::mpsc::Sender<Result<(), String>>,
) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let mut cfg = XskConfig::default();
    cfg.socket.copy_mode = CopyMode::Copy;
    let native = AttachOpts::mode(Some(XdpMode::Native));
    let opts = LoopOpts { batch_size: 64, wait: Wait::Spin };
    let c = Counters::default();
    match kind {
        LoopKind::AfXdpTx(iface, dst_mac) => {
            let dev = Iface::resolve(&iface).map_err(|x| e(&x))?;
            let frame = crate::frame::testbed_udp_frame(
                NetDev::by_name(&iface).and_then(|d| d.mac()).map_err(|x| e(&x))?,
                dst_mac,
            );
            let mut port = AfXdpPort::open(&dev, 0, &cfg, native).map_err(|x| e(&x))?;
            fastpath::workers::pin_current_thread(APP_CPU).map_err(|x| e(&x))?;
            let _ = ready.send(Ok(()));
            bench::txonly(&mut port, &TxPlan::new(&frame, opts), &c, stop).map_err(|x| e(&x))?;
        }
        LoopKind::L2fwd(iface) => {
            let dev = Iface::resolve(&iface).map_err(|x| e(&x))?;
            let mut port = AfXdpPort::open(&dev, 0, &cfg, native).map_err(|x| e(&x))?;
            fastpath::workers::pin_current_thread(APP_CPU).map_err(|x| e(&x))?;
            let _ = ready.send(Ok(()));
            bench::l2fwd(&mut port, opts, &c, stop).map_err(|x| e(&x))?;
        }
        LoopKind::TapTx(name) => {
            let mut port = TapPort::open(&name, TapOptions::default()).map_err(|x| e(&x))?;
            fastpath::netdev::set_link_up(port.ifname()).map_err(|x| e(&x))?;
            let frame = crate::frame::testbed_udp_frame([2, 0, 0, 0, 0, 1], port.mac().map_err(|x| e(&x))?);
            fastpath::workers::pin_current_thread(APP_CPU).map_err(|x| e(&x))?;
            let _ = ready.send(Ok(()));
            bench::txonly(&mut port, &TxPlan::new(&frame, opts), &c, stop).map_err(|x| e(&x))?;
        }
        LoopKind::Classifier(iface, n) => {
            let set = fastpath::rules::parse_toml("peers", &classifier_rules(n)).map_err(|x| e(&x))?;
            let compiled = compile("peers", &set).map_err(|x| e(&x))?;
            let dev = Iface::resolve(&iface).map_err(|x| e(&x))?;
            let loaded = fastpath::bpf::Classifier::load().map_err(|x| e(&x))?;
            let set_index = loaded.swap_in(&compiled).map_err(|x| e(&x))?;
            let cls = loaded.attach(&dev, native).map_err(|x| e(&x))?;
            let _ = ready.send(Ok(()));
            while !stop.load(Ordering::Relaxed) {
                counter.store(cls.prog.totals(set_index).map(|t| t.packets("drop")).unwrap_or(0), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    Ok(())
}

/// Measures every peer row and fastpath's own rows that `compare`'s receive rows do not
/// already give (txonly, l2fwd, TAP txonly, the 2-thread generator, the classifier groups),
/// on `b.bed`, one after another. Never fails: a row that cannot be measured carries its
/// reason.
pub fn measure(b: &Bench, stop: &AtomicBool) -> Vec<PeerResult> {
    let (ib, ia) = (b.bed.iface_b(), b.bed.iface_a());
    let ns_b = b.bed.ns_b().to_string();
    let mac_b = mac_string(b.bed.mac_b());
    let xdp = format!("net_af_xdp0,iface={ib},start_queue=0,queue_count=1");
    let xdp_a = format!("net_af_xdp0,iface={ia},start_queue=0,queue_count=1");
    let tap = format!("fpt{}", std::process::id() % 100_000);
    let tpmd = |vdev: &str, mode: &str, extra: &[String]| {
        format!("dpdk-testpmd {}", b.testpmd_args(vdev, mode, extra).join(" "))
    };
    type Measure<'m> = Box<dyn Fn() -> Result<f64, String> + 'm>;
    let mut rows: Vec<(&str, String, String, Measure)> = vec![
        ("XDP_DROP", "xdp-bench drop".into(), format!("xdp-bench drop {ib} -i 1"), Box::new(|| b.xdp_bench_drop())),
        ("AF_XDP rxonly", "testpmd net_af_xdp".into(), tpmd(&xdp, "rxonly", &[]), Box::new(|| b.testpmd_rx(&xdp))),
        (
            "AF_XDP rxonly",
            "testpmd net_af_xdp busy_budget=0".into(),
            tpmd(&format!("{xdp},busy_budget=0"), "rxonly", &[]),
            Box::new(|| b.testpmd_rx(&format!("{xdp},busy_budget=0"))),
        ),
        (
            "AF_PACKET rxonly",
            "testpmd net_af_packet".into(),
            tpmd(&format!("net_af_packet0,iface={ib}"), "rxonly", &[]),
            Box::new(|| b.testpmd_rx(&format!("net_af_packet0,iface={ib}"))),
        ),
        (
            "AF_XDP txonly",
            "fastpath".into(),
            format!(
                "fastpath bench txonly --xdp-mode native --copy-mode copy --cpu {APP_CPU} -i {ia} --dst-mac {mac_b}"
            ),
            Box::new(|| b.fastpath_tx(LoopKind::AfXdpTx(ia.to_string(), b.bed.mac_b()), &ns_b, ib)),
        ),
        (
            "AF_XDP txonly",
            "testpmd txonly".into(),
            tpmd(&xdp_a, "txonly", &[format!("--eth-peer=0,{mac_b}")]),
            Box::new(|| b.testpmd_tx(&xdp_a, &ns_b, ib, &mac_b)),
        ),
        (
            "AF_XDP l2fwd",
            "fastpath".into(),
            format!("fastpath bench l2fwd --xdp-mode native --copy-mode copy --cpu {APP_CPU} -i {ib}"),
            Box::new(|| b.fwd_rate(None)),
        ),
        ("AF_XDP l2fwd", "testpmd macswap".into(), tpmd(&xdp, "macswap", &[]), Box::new(|| b.fwd_rate(Some(&xdp)))),
        (
            "TAP txonly",
            "fastpath".into(),
            format!("fastpath bench txonly --path tap -i {tap} --cpu {APP_CPU}"),
            Box::new(|| b.fastpath_tx(LoopKind::TapTx(tap.clone()), &ns_b, &tap)),
        ),
        (
            "TAP txonly",
            "testpmd net_tap".into(),
            tpmd(&format!("net_tap0,iface={tap}"), "txonly", &[]),
            Box::new(|| b.testpmd_tap_tx(&tap)),
        ),
        (
            "generator, 2 threads",
            "fastpath".into(),
            format!("fastpath gen --engine xdp-live --threads 2 -i {ia} --dst-mac {mac_b}"),
            Box::new(|| b.gen_threads(2)),
        ),
        (
            "generator, 2 threads",
            "xdp-trafficgen".into(),
            format!("xdp-trafficgen udp {ia} -m {mac_b} -t 2"),
            Box::new(|| b.trafficgen(2)),
        ),
    ];
    for n in RULE_COUNTS {
        let group: &str = match n {
            1 => "classifier, 1 rule",
            100 => "classifier, 100 rules",
            _ => "classifier, 10,000 rules",
        };
        rows.push((
            group,
            "fastpath".into(),
            format!("fastpath filter load -i {ib} --rules RULES (n-1 src /32 drop, then udp dst_port 9 drop)"),
            Box::new(move || b.classifier(n)),
        ));
        rows.push((
            group,
            "xdp-filter".into(),
            format!(
                "xdp-filter load -m native -p allow -f ipv4,udp {ib}; xdp-filter ip ADDR -m src (x{}); xdp-filter port 9 -m dst",
                n - 1
            ),
            Box::new(move || b.xdp_filter(n)),
        ));
    }
    let mut out = Vec::new();
    for (group, who, command, m) in rows {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let program = if who.starts_with("testpmd") { "dpdk-testpmd" } else { who.split(' ').next().unwrap_or("") };
        let mpps = if who != "fastpath" && !on_path(program) {
            Err(format!("{program} not installed (`make deps`: {})", version_of(&who)))
        } else {
            m()
        };
        out.push(PeerResult { group: group.into(), who, command, mpps });
    }
    out
}

/// `rows` with each of `own` (fastpath's rows that `compare` measured itself) placed before the
/// first row of its group.
pub fn with_own(own: Vec<PeerResult>, rows: Vec<PeerResult>) -> Vec<PeerResult> {
    let mut out: Vec<PeerResult> = Vec::with_capacity(own.len() + rows.len());
    let mut own = own;
    for r in rows {
        if let Some(i) = own.iter().position(|o| o.group == r.group) {
            out.push(own.remove(i));
        }
        out.push(r);
    }
    out.extend(own);
    out
}

/// One row per (group, who) over the runs: `group`, `who`, `command`, `version`,
/// `mpps_median` (null without a rate), `runs` (Mpps per run, null where it failed),
/// `of_xdp_drop` (median over runs of the rate / that run's in-kernel XDP_DROP),
/// `fastpath_over_peer` (median over runs of the group's fastpath rate / this rate; null for
/// fastpath's own rows and where either is missing), `error` (the first run's reason when a run
/// failed, else null). `xdp_drop_mpps[i]` is run i's XDP_DROP reference.
pub fn summarise(runs: &[Vec<PeerResult>], xdp_drop_mpps: &[f64]) -> Vec<serde_json::Value> {
    let Some(first) = runs.first() else { return Vec::new() };
    first
        .iter()
        .map(|row| {
            let at = |run: &Vec<PeerResult>, who: &str| -> Option<f64> {
                run.iter().find(|r| r.group == row.group && r.who == who).and_then(|r| r.mpps.clone().ok())
            };
            let vals: Vec<Option<f64>> = runs.iter().map(|r| at(r, &row.who)).collect();
            let ok: Vec<f64> = vals.iter().flatten().copied().collect();
            let of_xdp: Vec<f64> =
                vals.iter().zip(xdp_drop_mpps).filter_map(|(v, x)| v.filter(|_| *x > 0.0).map(|v| v / x)).collect();
            let vs: Vec<f64> =
                runs.iter().filter_map(|r| Some(at(r, "fastpath")? / at(r, &row.who).filter(|v| *v > 0.0)?)).collect();
            let error = runs
                .iter()
                .find_map(|r| r.iter().find(|x| x.group == row.group && x.who == row.who)?.mpps.clone().err());
            let median_or_null = |v: &[f64]| if v.is_empty() { serde_json::Value::Null } else { median(v).into() };
            serde_json::json!({
                "group": row.group, "who": row.who, "command": row.command, "version": version_of(&row.who),
                "mpps_median": median_or_null(&ok), "runs": vals, "of_xdp_drop": median_or_null(&of_xdp),
                "fastpath_over_peer": if row.who == "fastpath" { serde_json::Value::Null } else { median_or_null(&vs) },
                "error": error,
            })
        })
        .collect()
}

/// The table of [`summarise`]'s rows, then every row's command line; each line ends in a
/// newline.
pub fn table(rows: &[serde_json::Value]) -> String {
    let num = |v: &serde_json::Value, f: &dyn Fn(f64) -> String| v.as_f64().map(f).unwrap_or_else(|| "-".into());
    let mut s = format!(
        "{:<26} {:<32} {:>7} {:>11} {:>13}  {}\n",
        "fastpath vs peers", "who", "Mpps", "of XDP_DROP", "fastpath/peer", "version or why not"
    );
    for r in rows {
        let why = r["error"].as_str().filter(|_| r["mpps_median"].is_null());
        s += &format!(
            "{:<26} {:<32} {:>7} {:>11} {:>13}  {}\n",
            r["group"].as_str().unwrap_or(""),
            r["who"].as_str().unwrap_or(""),
            num(&r["mpps_median"], &|x| format!("{x:.2}")),
            num(&r["of_xdp_drop"], &|x| format!("{x:.2}")),
            num(&r["fastpath_over_peer"], &|x| format!("{x:.2}x")),
            why.map(|w| format!("{}: {w}", r["version"].as_str().unwrap_or("")))
                .unwrap_or_else(|| r["version"].as_str().unwrap_or("").to_string())
        );
    }
    s += "command lines:\n";
    for r in rows {
        s += &format!(
            "  {} / {}: {}\n",
            r["group"].as_str().unwrap_or(""),
            r["who"].as_str().unwrap_or(""),
            r["command"].as_str().unwrap_or("")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn testpmd_statistics_give_the_last_rx_count() {
        let out = "  RX-packets: 10         RX-missed: 0\n...\n  RX-packets: 12345      RX-missed: 0 \n";
        assert_eq!(testpmd_rx_packets(out), Some(12345));
        assert_eq!(testpmd_rx_packets("Port 0: link up"), None);
    }

    #[test]
    fn xdp_tools_outputs_parse() {
        let status = "Aggregate per-action statistics:\n  XDP_ABORTED   0 pkts  0 KiB\n  XDP_DROP   \
                      9876543 pkts  12 KiB\n  XDP_PASS  3 pkts 0 KiB\n";
        assert_eq!(xdp_filter_drops(status), Some(9_876_543));
        assert_eq!(xdp_filter_drops("Filtered ports:"), None);
        let bench = "Summary  1,234,567 rx/s\n  rx_XDP_DROP   4,000,001 pkt/s  0 err/s\n  rx  3,999,000 pkt/s\n";
        assert_eq!(xdp_bench_pps(bench), Some(4_000_001));
    }

    #[test]
    fn the_btf_reason_comes_first() {
        let out = "libbpf: prog 'x': failed to load\nlibbpf: failed to find kernel BTF type ID of \
                   'xdp_redirect_map_err': -3\nERROR: cannot load\n";
        assert_eq!(
            first_error(out).as_deref(),
            Some("libbpf: failed to find kernel BTF type ID of 'xdp_redirect_map_err': -3")
        );
        assert_eq!(first_error("all well"), None);
    }

    #[test]
    fn classifier_rules_match_what_xdp_filter_is_given() {
        let t = classifier_rules(100);
        let set = fastpath::rules::parse_toml("t", &t).unwrap();
        assert_eq!(set.rules.len(), 100);
        assert!(t.contains("172.16.0.98/32") && !t.contains("172.16.0.99/32"));
        assert_eq!(decoy_src(70_000), "172.17.17.112");
    }

    #[test]
    fn fastpath_over_peer_pairs_rates_of_the_same_run() {
        let r = |group: &str, who: &str, mpps: Result<f64, String>| PeerResult {
            group: group.into(),
            who: who.into(),
            command: String::new(),
            mpps,
        };
        let runs = vec![
            with_own(
                vec![r("g", "fastpath", Ok(2.0))],
                vec![r("g", "testpmd", Ok(1.0)), r("h", "x", Err("no".into()))],
            ),
            with_own(
                vec![r("g", "fastpath", Ok(3.0))],
                vec![r("g", "testpmd", Ok(2.0)), r("h", "x", Err("no".into()))],
            ),
            with_own(
                vec![r("g", "fastpath", Ok(9.0))],
                vec![r("g", "testpmd", Err("gone".into())), r("h", "x", Err("no".into()))],
            ),
        ];
        let s = summarise(&runs, &[4.0, 4.0, 4.0]);
        assert_eq!(s[0]["who"], "fastpath");
        assert_eq!(s[1]["fastpath_over_peer"].as_f64(), Some(1.75)); // median of 2.0 and 1.5
        assert_eq!(s[1]["of_xdp_drop"].as_f64(), Some(0.375));
        assert_eq!(s[1]["error"], "gone");
        assert!(s[2]["mpps_median"].is_null());
        let t = table(&s);
        assert!(t.lines().any(|l| l.starts_with("h ") && l.ends_with(": no")), "{t}");
    }
}
