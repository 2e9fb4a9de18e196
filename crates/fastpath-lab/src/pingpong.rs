//! The experiment of `fastpath bench pingpong`: round-trip latency with one packet in flight,
//! AF_XDP against the kernel's UDP socket, on a test bed of its own (or a named one).
//!
//! ```text
//!   namespace <bed>-a, CPU 0 (client)                 namespace <bed>-b, CPU 1 (echo server)
//!   send one 64-byte UDP frame, stamp seq  ==veth==>  receive, swap MAC / IP / ports, send back
//!   wait for that seq; RTT = CLOCK_MONOTONIC after - before; repeat
//! ```
//!
//! Modes ([`Mode`]), each measured on both ends alike:
//!
//! - `xsk-softirq`: AF_XDP copy mode behind `xsk_redirect` on both veth ends, both sides
//!   spinning on their RX ring; the receive runs in the sender's softirq (veth with threaded
//!   NAPI off: the run's first note says what it found on both ends), inside its `sendto` kick.
//! - `xsk-busy-poll`: the same with busy polling: `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL` 20 us,
//!   `SO_BUSY_POLL_BUDGET` 64 on each socket and the NAPI profile
//!   ([`NapiSettings::BUSY_POLL`]: defer-hard-irqs 100, gro-flush-timeout 200 us) on each veth
//!   end, restored afterwards: each side's `recvfrom` busy polls the NAPI its socket's RX
//!   queue is linked to, if the driver links one (veth does not: see the run's notes, which
//!   say what netdev `queue-get` found).
//! - `xsk-irq-suspend`: busy poll plus IRQ suspension ([`NapiSettings::IRQ_SUSPEND`],
//!   irq-suspend-timeout 20 ms, kernel >= 6.14), each side waiting in `epoll_wait` with
//!   `EPIOCSPARAMS` busy polling and `prefer_busy_poll` ([`BusyPollEpoll`]).
//! - `udp`: the same program over kernel UDP sockets (22-byte payload, the same 64-byte
//!   frame), both sides spinning on non-blocking `recv`.
//! - `sockperf-udp`: sockperf ping-pong / server over UDP (22-byte messages, `--full-rtt`),
//!   pinned the same way, for whole seconds ([`SockperfRun`]); its row is sockperf's own report
//!   (observations, messages sent and not answered, valid duration); its percentiles have
//!   microsecond resolution.
//!
//! The AF_XDP echo server answers only the client's frames ([`EchoFilter`]) and counts the
//! others.
//!
//! Runs are interleaved (run 1 of every mode, then run 2, ...) in one sitting; each row is the
//! median over runs of each percentile, with the spread of p50 and p99 across runs. A round
//! trip not answered within 100 ms counts as lost (and ends the wait for it); 10 lost in a row
//! end the run with an error naming the mode, as does a run with no round trip answered. The
//! warm-up before each run is 1,000 round trips or 2 s, whichever comes first.
//!
//! Privileges: root (namespaces, XDP, AF_XDP, netdev `napi-set`). Kernel: AF_XDP copy mode
//! (>= 5.4 with need_wakeup), busy poll socket options (>= 5.11), `napi-set` (>= 6.13, else
//! the per-device sysfs knobs), IRQ suspension (>= 6.14), `EPIOCSPARAMS` (>= 6.9).

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath::bpf::AttachOpts;
use fastpath::clock::monotonic_ns;
use fastpath::features::{check, Feature};
use fastpath::io::afxdp::AfXdpPort;
use fastpath::io::epoll::BusyPollEpoll;
use fastpath::io::Port;
use fastpath::netdev::napi::{napis, rx_queue_napi, NapiProfile, NapiSettings};
use fastpath::netdev::Iface;
use fastpath::packet::{self, Payload, UdpFrameSpec};
use fastpath::xsk::{BusyPoll, CopyMode, XskConfig};
use fastpath_testbed::{spawn_in_netns, Testbed, TestbedConfig, IP4_A, IP4_B};
use fastpath_tools::stats::median;
use serde::Serialize;

use crate::error::{env, kernel, runtime, usage, LabError, LabResult};
use crate::tools;

/// One way of making the round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// AF_XDP, receive in the sender's softirq, both sides spinning on the RX ring.
    XskSoftirq,
    /// AF_XDP with socket busy polling and the NAPI busy-poll profile.
    XskBusyPoll,
    /// AF_XDP with busy polling through epoll and IRQ suspension.
    XskIrqSuspend,
    /// Kernel UDP sockets, the same program.
    Udp,
    /// sockperf ping-pong over UDP.
    SockperfUdp,
}

impl Mode {
    /// Every mode, in table order.
    pub const ALL: [Mode; 5] = [Mode::XskSoftirq, Mode::XskBusyPoll, Mode::XskIrqSuspend, Mode::Udp, Mode::SockperfUdp];

    /// The name on the command line and in JSON.
    pub fn key(self) -> &'static str {
        match self {
            Mode::XskSoftirq => "xsk-softirq",
            Mode::XskBusyPoll => "xsk-busy-poll",
            Mode::XskIrqSuspend => "xsk-irq-suspend",
            Mode::Udp => "udp",
            Mode::SockperfUdp => "sockperf-udp",
        }
    }

    /// The row's label in the table.
    pub fn label(self) -> &'static str {
        match self {
            Mode::XskSoftirq => "AF_XDP, softirq (spin on ring)",
            Mode::XskBusyPoll => "AF_XDP, busy poll",
            Mode::XskIrqSuspend => "AF_XDP, busy poll + IRQ suspension (epoll)",
            Mode::Udp => "kernel UDP socket (spin on recv)",
            Mode::SockperfUdp => "kernel UDP socket (sockperf)",
        }
    }

    /// The mode named `s` ([`Mode::key`]).
    pub fn parse(s: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.key() == s)
    }

    fn is_xsk(self) -> bool {
        matches!(self, Mode::XskSoftirq | Mode::XskBusyPoll | Mode::XskIrqSuspend)
    }

    /// The NAPI profile the mode applies on both veth ends.
    pub fn napi(self) -> Option<NapiSettings> {
        match self {
            Mode::XskBusyPoll => Some(NapiSettings::BUSY_POLL),
            Mode::XskIrqSuspend => Some(NapiSettings::IRQ_SUSPEND),
            _ => None,
        }
    }
}

/// Round trips per run by default.
pub const DEFAULT_COUNT: u64 = 100_000;
/// Most round trips per run.
pub const MAX_COUNT: u64 = 100_000_000;
/// Most runs per mode.
pub const MAX_RUNS: u32 = 50;
/// Round trips before each run's measured ones (caches, the epoll's NAPI id).
pub const WARMUP: u64 = 1_000;
/// A round trip not answered within this long is lost.
pub const LOSS_TIMEOUT_NS: u64 = 100_000_000;
/// The frame on the wire, bytes (without FCS), every mode.
pub const FRAME_LEN: usize = 64;
/// The UDP payload that makes a [`FRAME_LEN`]-byte frame (14 + 20 + 8 + 22).
pub const UDP_PAYLOAD: usize = FRAME_LEN - 42;
const CLIENT_PORT: u16 = 9000;
const SERVER_PORT: u16 = 9001;
const SOCKPERF_PORT: u16 = 11111;
/// SO_BUSY_POLL (us) and SO_BUSY_POLL_BUDGET of the busy-poll modes.
pub const BUSY_POLL: BusyPoll = BusyPoll::new(20, 64);

/// What to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingpongOpts {
    /// Modes, in the order each run measures them.
    pub modes: Vec<Mode>,
    /// Round trips per run (after [`WARMUP`]), 1..=[`MAX_COUNT`].
    pub count: u64,
    /// Longest a run may take; a run stops at `count` round trips or here.
    pub max_run: Duration,
    /// Runs per mode, interleaved, 1..=[`MAX_RUNS`].
    pub runs: u32,
    /// CPU of the client (namespace a).
    pub client_cpu: usize,
    /// CPU of the echo server (namespace b).
    pub server_cpu: usize,
    /// An existing test bed to use (`fastpath testbed up`); None: one of its own, removed after.
    pub testbed: Option<String>,
}

impl PingpongOpts {
    /// Checks every value and that the kernel and the machine have what the modes need, before
    /// anything is created.
    ///
    /// # Errors
    ///
    /// [`LabError::Usage`] naming the value (count, runs, CPUs, no mode);
    /// [`LabError::Unsupported`] for a mode the kernel cannot run (busy poll < 5.11, IRQ
    /// suspension < 6.14); [`LabError::Environment`] when sockperf is not installed.
    pub fn validate(&self) -> LabResult<()> {
        if self.modes.is_empty() {
            return Err(usage(anyhow!("--modes is empty: name one or more of {}", mode_keys())));
        }
        if !(1..=MAX_COUNT).contains(&self.count) {
            return Err(usage(anyhow!("--count {} is not accepted: use 1 to {MAX_COUNT}", self.count)));
        }
        if !(1..=MAX_RUNS).contains(&self.runs) {
            return Err(usage(anyhow!("--runs {} is not accepted: use 1 to {MAX_RUNS}", self.runs)));
        }
        let online = fastpath::workers::online_cpus();
        for (what, cpu) in [("--client-cpu", self.client_cpu), ("--server-cpu", self.server_cpu)] {
            if cpu >= online {
                return Err(usage(anyhow!("{what} {cpu} is not accepted: this machine has CPUs 0 to {}", online - 1)));
            }
        }
        if self.client_cpu == self.server_cpu && online > 1 {
            return Err(usage(anyhow!(
                "--client-cpu and --server-cpu are both {}: give the two ends different CPUs",
                self.client_cpu
            )));
        }
        let unsupported = |e: fastpath::features::Unsupported| LabError::Unsupported(e.into());
        if self.modes.iter().any(|m| matches!(m, Mode::XskBusyPoll | Mode::XskIrqSuspend)) {
            check(Feature::BusyPoll).map_err(unsupported)?;
        }
        if self.modes.contains(&Mode::XskIrqSuspend) {
            check(Feature::IrqSuspend).map_err(unsupported)?;
        }
        if self.modes.contains(&Mode::SockperfUdp) && !tools::installed("sockperf") {
            return Err(env(anyhow!("mode sockperf-udp needs sockperf (scripts/deps.sh installs it)")));
        }
        Ok(())
    }
}

/// The accepted mode names, comma-separated.
pub fn mode_keys() -> String {
    Mode::ALL.iter().map(|m| m.key()).collect::<Vec<_>>().join(", ")
}

/// One run of one mode. Latencies are whole round trips, nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RunStats {
    /// Round trips measured (answered).
    pub round_trips: u64,
    /// Round trips sent and not answered within [`LOSS_TIMEOUT_NS`].
    pub lost: u64,
    /// Seconds the measured round trips took.
    pub secs: f64,
    /// Fastest round trip.
    pub min_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// False with fewer than 1,000 samples: then p99.9 is the slowest sample or next to it,
    /// not a 99.9th percentile.
    pub p999_meaningful: bool,
    /// Slowest.
    pub max_ns: u64,
    /// Mean.
    pub mean_ns: u64,
    /// Packets busy polling received over the run, both namespaces (TcpExt BusyPollRxPackets
    /// of /proc/net/netstat, LINUX_MIB_BUSYPOLLRXPACKETS); None where not read (sockperf).
    pub busy_poll_rx_packets: Option<u64>,
    /// Frames the AF_XDP echo server received and did not echo because they were not the
    /// client's ([`EchoFilter`]); None for the modes without an AF_XDP echo server.
    pub echo_ignored: Option<u64>,
    /// sockperf's own report of the run (sockperf-udp only): `round_trips`, `lost` and `secs`
    /// above are its observations, its unanswered messages and its valid duration.
    pub sockperf: Option<tools::SockperfPingPong>,
}

/// Nearest-rank percentiles of `rtts` (sorted here); all zero for none.
pub fn stats_of(rtts: &mut [u64], lost: u64, secs: f64) -> RunStats {
    rtts.sort_unstable();
    let n = rtts.len();
    let at = |p: f64| if n == 0 { 0 } else { rtts[((p * n as f64).ceil() as usize).clamp(1, n) - 1] };
    RunStats {
        round_trips: n as u64,
        lost,
        secs,
        min_ns: rtts.first().copied().unwrap_or(0),
        p50_ns: at(0.50),
        p99_ns: at(0.99),
        p999_ns: at(0.999),
        p999_meaningful: n >= 1000,
        max_ns: rtts.last().copied().unwrap_or(0),
        mean_ns: if n == 0 { 0 } else { rtts.iter().sum::<u64>() / n as u64 },
        busy_poll_rx_packets: None,
        echo_ignored: None,
        sockperf: None,
    }
}

/// One mode over every run: the median of each figure, and the spread of p50 and p99.
#[derive(Debug, Clone, Serialize)]
pub struct ModeRow {
    /// [`Mode::key`].
    pub mode: Mode,
    /// [`Mode::label`].
    pub label: &'static str,
    /// The NAPI settings applied on both veth ends during the runs (None: none changed).
    pub napi: Option<NapiSettings>,
    /// Each run, in order.
    pub runs: Vec<RunStats>,
    /// Median over runs of p50.
    pub p50_ns: u64,
    /// Median over runs of p99.
    pub p99_ns: u64,
    /// Median over runs of p99.9.
    pub p999_ns: u64,
    /// False if a run had fewer than 1,000 samples ([`RunStats::p999_meaningful`]).
    pub p999_meaningful: bool,
    /// Median over runs of the maximum.
    pub max_ns: u64,
    /// Lowest and highest p50 of the runs.
    pub p50_range_ns: (u64, u64),
    /// Lowest and highest p99 of the runs.
    pub p99_range_ns: (u64, u64),
    /// Round trips answered over all runs.
    pub round_trips: u64,
    /// Round trips lost over all runs.
    pub lost: u64,
    /// Packets busy polling received over all runs, both namespaces.
    pub busy_poll_rx_packets: Option<u64>,
    /// Frames the AF_XDP echo server ignored (not the client's) over all runs.
    pub echo_ignored: Option<u64>,
}

/// TcpExt BusyPollRxPackets of both of the bed's namespaces, summed (None if unreadable).
fn busy_poll_rx(bed: &Testbed) -> Option<u64> {
    let one = |ns: &str| {
        let text = tools::ns_run(ns, "cat", &["/proc/net/netstat"], "cat /proc/net/netstat").ok()?;
        netstat_value(&text, "TcpExt:", "BusyPollRxPackets")
    };
    Some(one(bed.ns_a())? + one(bed.ns_b())?)
}

/// The value of `field` in the `prefix` section of /proc/net/netstat (a names line followed
/// by a values line).
pub fn netstat_value(text: &str, prefix: &str, field: &str) -> Option<u64> {
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with(prefix)).collect();
    let (names, values) = (lines.first()?, lines.get(1)?);
    let i = names.split_whitespace().position(|n| n == field)?;
    values.split_whitespace().nth(i)?.parse().ok()
}

fn med(v: impl Iterator<Item = u64>) -> u64 {
    median(&v.map(|x| x as f64).collect::<Vec<_>>()).round() as u64
}

impl ModeRow {
    fn of(mode: Mode, runs: Vec<RunStats>) -> Self {
        let range =
            |f: fn(&RunStats) -> u64| (runs.iter().map(f).min().unwrap_or(0), runs.iter().map(f).max().unwrap_or(0));
        Self {
            mode,
            label: mode.label(),
            napi: mode.napi(),
            p50_ns: med(runs.iter().map(|r| r.p50_ns)),
            p99_ns: med(runs.iter().map(|r| r.p99_ns)),
            p999_ns: med(runs.iter().map(|r| r.p999_ns)),
            p999_meaningful: runs.iter().all(|r| r.p999_meaningful),
            max_ns: med(runs.iter().map(|r| r.max_ns)),
            p50_range_ns: range(|r| r.p50_ns),
            p99_range_ns: range(|r| r.p99_ns),
            round_trips: runs.iter().map(|r| r.round_trips).sum(),
            lost: runs.iter().map(|r| r.lost).sum(),
            busy_poll_rx_packets: runs.iter().map(|r| r.busy_poll_rx_packets).sum(),
            echo_ignored: runs.iter().map(|r| r.echo_ignored).sum(),
            runs,
        }
    }
}

/// An AF_XDP mode against a UDP baseline, as ratios of the medians (below 1: AF_XDP faster).
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    /// The AF_XDP mode.
    pub mode: Mode,
    /// The baseline mode (`udp` or `sockperf-udp`).
    pub baseline: Mode,
    /// p50 of `mode` / p50 of `baseline`; None when either has no samples.
    pub p50: Option<f64>,
    /// p99 of `mode` / p99 of `baseline`; None when either has no samples.
    pub p99: Option<f64>,
}

/// Round-trip time per `--count` that sets sockperf's run length: sockperf ping-pong runs for
/// whole seconds (`-t`), not for a number of round trips.
pub const SOCKPERF_NS_PER_ROUND_TRIP: u64 = 15_000;

/// How long sockperf ping-pong runs, and the rule that chose it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SockperfRun {
    /// `sockperf ping-pong -t`, seconds.
    pub secs: u64,
    /// How `secs` was chosen, in words.
    pub rule: String,
}

impl SockperfRun {
    /// sockperf's run length for `count` round trips and runs of at most `max_run`: `count` x
    /// [`SOCKPERF_NS_PER_ROUND_TRIP`] rounded up to whole seconds, at least 1 s, at most
    /// `max_run` (rounded down, at least 1 s).
    pub fn of(count: u64, max_run: Duration) -> Self {
        let want = count.saturating_mul(SOCKPERF_NS_PER_ROUND_TRIP).div_ceil(1_000_000_000);
        let cap = max_run.as_secs().max(1);
        let secs = want.clamp(1, cap);
        Self {
            secs,
            rule: format!(
                "sockperf ping-pong -t {secs} s: --count {count} x {} us rounded up to whole seconds, at least 1 s, at most --duration ({cap} s); sockperf counts its own round trips (its 400 ms warm-up and its last moments not measured), so its row's round trips are what sockperf reported, not --count",
                SOCKPERF_NS_PER_ROUND_TRIP / 1000
            ),
        }
    }
}

/// What `fastpath bench pingpong` measured.
#[derive(Debug, Clone, Serialize)]
pub struct PingpongReport {
    /// Kernel release.
    pub kernel: String,
    /// The client's CPU.
    pub client_cpu: usize,
    /// The echo server's CPU.
    pub server_cpu: usize,
    /// Bytes per frame on the wire.
    pub frame_len: usize,
    /// Round trips asked per run.
    pub count: u64,
    /// Runs per mode.
    pub runs: u32,
    /// How long each sockperf ping-pong runs (`-t`, seconds) and why; None without
    /// sockperf-udp.
    pub sockperf_run: Option<SockperfRun>,
    /// The state of both veth ends, read before the runs ([`tools::dev_state`]).
    pub devices: Vec<tools::DevState>,
    /// One row per mode, in the order asked.
    pub rows: Vec<ModeRow>,
    /// Each AF_XDP mode over each UDP baseline measured.
    pub ratios: Vec<Ratio>,
    /// Facts the figures depend on.
    pub notes: Vec<String>,
}

/// Runs the experiment. `stop` (set by a signal) ends it early with an error; every NAPI setting
/// changed is restored and the test bed (if its own) removed on every path.
///
/// # Errors
///
/// Those of [`PingpongOpts::validate`]; [`LabError::Testbed`] (building or opening the bed);
/// [`LabError::Kernel`] for a refused attach, bind or NAPI setting; [`LabError::Runtime`] when
/// interrupted or when a side fails while running.
pub fn run(opts: &PingpongOpts, stop: &Arc<AtomicBool>) -> LabResult<PingpongReport> {
    opts.validate()?;
    let bed = match &opts.testbed {
        Some(name) => Testbed::open(name)?,
        None => Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() })?,
    };
    let devices = vec![tools::dev_state(bed.ns_a(), bed.iface_a()), tools::dev_state(bed.ns_b(), bed.iface_b())];
    let sockperf = opts.modes.contains(&Mode::SockperfUdp).then(|| SockperfRun::of(opts.count, opts.max_run));
    let mut per_mode: Vec<Vec<RunStats>> = vec![Vec::new(); opts.modes.len()];
    for _ in 0..opts.runs {
        for (i, &mode) in opts.modes.iter().enumerate() {
            if stop.load(Ordering::Relaxed) {
                return Err(runtime(anyhow!("interrupted")));
            }
            let r = match mode {
                Mode::SockperfUdp => sockperf_run(&bed, opts, sockperf.as_ref().map_or(1, |s| s.secs), stop)?,
                _ => {
                    let before = busy_poll_rx(&bed);
                    let mut r = pair_run(&bed, mode, opts, stop)?;
                    r.busy_poll_rx_packets = busy_poll_rx(&bed).zip(before).map(|(a, b)| a.saturating_sub(b));
                    r
                }
            };
            per_mode[i].push(r);
        }
    }
    if stop.load(Ordering::Relaxed) {
        return Err(runtime(anyhow!("interrupted")));
    }
    let rows: Vec<ModeRow> = opts.modes.iter().zip(per_mode).map(|(&m, runs)| ModeRow::of(m, runs)).collect();
    let mut ratios = Vec::new();
    for base in [Mode::Udp, Mode::SockperfUdp] {
        let Some(b) = rows.iter().find(|r| r.mode == base) else { continue };
        for r in rows.iter().filter(|r| r.mode.is_xsk()) {
            let q = |x: u64, y: u64| {
                (x > 0 && y > 0 && r.round_trips > 0 && b.round_trips > 0).then(|| x as f64 / y as f64)
            };
            ratios.push(Ratio { mode: r.mode, baseline: base, p50: q(r.p50_ns, b.p50_ns), p99: q(r.p99_ns, b.p99_ns) });
        }
    }
    let mut notes = vec![
        format!(
            "client on CPU {} in {}, echo server on CPU {} in {}; found before the runs: {}; {}; AF_XDP copy mode, native XDP",
            opts.client_cpu,
            bed.ns_a(),
            opts.server_cpu,
            bed.ns_b(),
            devices[0],
            devices[1]
        ),
        format!(
            "busy poll: SO_PREFER_BUSY_POLL, SO_BUSY_POLL {} us, SO_BUSY_POLL_BUDGET {}; NAPI defer-hard-irqs {}, gro-flush-timeout {} ns (irq-suspend-timeout {} ns with IRQ suspension), restored after each run",
            BUSY_POLL.timeout_us,
            BUSY_POLL.budget,
            NapiSettings::BUSY_POLL.defer_hard_irqs.unwrap_or(0),
            NapiSettings::BUSY_POLL.gro_flush_timeout_ns.unwrap_or(0),
            NapiSettings::IRQ_SUSPEND.irq_suspend_timeout_ns.unwrap_or(0)
        ),
        "sockperf reports microseconds with 3 decimals (--full-rtt: whole round trips)".into(),
    ];
    if let Some(s) = &sockperf {
        notes.push(s.rule.clone());
    }
    for r in rows.iter().filter(|r| r.echo_ignored.is_some_and(|n| n > 0)) {
        notes.push(format!(
            "{}: the echo server ignored {} frames that were not the client's (destination MAC, IPv4 address or UDP port not the server's)",
            r.mode.key(),
            r.echo_ignored.unwrap_or(0)
        ));
    }
    if rows.iter().any(|r| r.napi.is_some() && r.busy_poll_rx_packets == Some(0)) {
        let links = [(bed.ns_a(), bed.iface_a()), (bed.ns_b(), bed.iface_b())].map(|(ns, i)| (i, rx_queue_link(ns, i)));
        for r in rows.iter().filter(|r| r.napi.is_some() && r.busy_poll_rx_packets == Some(0)) {
            notes.push(format!(
                "{}: busy polling received no packet (BusyPollRxPackets 0); {}",
                r.mode.key(),
                busy_poll_finding(&links)
            ));
        }
    }
    Ok(PingpongReport {
        kernel: fastpath::features::probe().kernel.clone(),
        client_cpu: opts.client_cpu,
        server_cpu: opts.server_cpu,
        frame_len: FRAME_LEN,
        count: opts.count,
        runs: opts.runs,
        sockperf_run: sockperf,
        devices,
        rows,
        ratios,
        notes,
    })
}

/// The NAPI id RX queue 0 of `iface` in namespace `ns` is linked to (netdev `queue-get`), or
/// why it could not be read.
fn rx_queue_link(ns: &str, iface: &str) -> Result<Option<u32>, String> {
    let name = iface.to_string();
    fastpath_testbed::run_in_netns(ns, move || -> Result<Option<u32>, String> {
        let i = Iface::resolve(&name).map_err(|e| e.to_string())?;
        rx_queue_napi(i.ifindex(), 0).map_err(|e| e.to_string())
    })
    .map_err(|e| e.to_string())?
}

/// What `queue-get` found on RX queue 0 of each end, and what it means for busy polling: an
/// AF_XDP socket takes its NAPI id from the queue it binds (`xsk_bind`, `rxq->napi`, copy and
/// zero-copy mode alike since 6.15), so a queue linked to no NAPI leaves it nothing to poll.
pub fn busy_poll_finding(links: &[(&str, Result<Option<u32>, String>)]) -> String {
    let each: Vec<String> = links
        .iter()
        .map(|(i, l)| match l {
            Ok(Some(id)) => format!("{i} rx queue 0 napi-id {id}"),
            Ok(None) => format!("{i} rx queue 0 has no napi-id"),
            Err(e) => format!("{i} rx queue 0 unknown ({e})"),
        })
        .collect();
    let found = format!("queue-get: {}", each.join(", "));
    if links.iter().all(|(_, l)| matches!(l, Ok(None))) {
        format!("{found}: the driver links no NAPI to its RX queues, so the AF_XDP sockets (whose NAPI id xsk_bind takes from the bound queue, copy mode included) have no NAPI to busy poll, and the NAPI profile leaves each packet to the gro-flush-timeout watchdog")
    } else if links.iter().all(|(_, l)| matches!(l, Ok(Some(_)))) {
        format!("{found}: the queues are linked to NAPIs, yet the sockets' busy polling received nothing")
    } else {
        format!("{found}: a socket bound to a queue without napi-id has no NAPI to busy poll")
    }
}

/// What the client thread holds between set-up and the go signal.
type Ready = mpsc::Sender<LabResult<()>>;

/// One run of a mode both sides of which are this process's threads: the client (namespace a)
/// sets up first (port, NAPI profile) and waits; then the echo server (namespace b) sets up;
/// then the client measures. Any side's set-up failure stops the other before it measures; each
/// side's NAPI profile is restored when its thread ends, whatever the outcome.
fn pair_run(bed: &Testbed, mode: Mode, opts: &PingpongOpts, stop: &Arc<AtomicBool>) -> LabResult<RunStats> {
    let (ready_tx, ready_rx) = mpsc::channel::<LabResult<()>>();
    let (go_tx, go_rx) = mpsc::channel::<bool>();
    let (iface_a, iface_b) = (bed.iface_a().to_string(), bed.iface_b().to_string());
    let (mac_a, mac_b) = (bed.mac_a(), bed.mac_b());
    let (count, max_run, ccpu, scpu) = (opts.count, opts.max_run, opts.client_cpu, opts.server_cpu);
    let client_stop = stop.clone();
    let client = spawn_in_netns(bed.ns_a(), move || -> LabResult<RunStats> {
        fastpath::workers::pin_current_thread(ccpu)
            .map_err(|e| env(anyhow!("pinning the client to CPU {ccpu}: {e}")))?;
        let side = Side::open(mode, &iface_a, &ready_tx)?;
        if !go_rx.recv().unwrap_or(false) {
            return Err(runtime(anyhow!("the echo server failed")));
        }
        side.client(mac_a, mac_b, mode, count, max_run, &client_stop)
    });
    let failed =
        |h: std::thread::JoinHandle<Result<LabResult<RunStats>, fastpath_testbed::TestbedError>>| match h.join() {
            Ok(Ok(Err(e))) => e,
            Ok(Err(e)) => e.into(),
            Ok(Ok(Ok(_))) => runtime(anyhow!("the client ended before it was told to measure")),
            Err(_) => runtime(anyhow!("the client thread panicked")),
        };
    match ready_rx.recv() {
        Ok(Ok(())) => {}
        _ => return Err(failed(client)),
    }
    let server_stop = Arc::new(AtomicBool::new(false));
    let (sready_tx, sready_rx) = mpsc::channel::<LabResult<()>>();
    let ss = server_stop.clone();
    let to = EchoFilter { mac: mac_b, ip: IP4_B, port: SERVER_PORT };
    let server = spawn_in_netns(bed.ns_b(), move || -> LabResult<Option<u64>> {
        fastpath::workers::pin_current_thread(scpu)
            .map_err(|e| env(anyhow!("pinning the server to CPU {scpu}: {e}")))?;
        let side = Side::open(mode, &iface_b, &sready_tx)?;
        side.serve(&to, &ss)
    });
    let server_ok = matches!(sready_rx.recv(), Ok(Ok(())));
    let _ = go_tx.send(server_ok);
    let client_result = client.join();
    server_stop.store(true, Ordering::Relaxed);
    let server_result = server.join();
    let (ignored, server_err) = match server_result {
        Ok(Ok(Ok(n))) => (n, None),
        Ok(Ok(Err(e))) => (None, Some(e)),
        Ok(Err(e)) => (None, Some(e.into())),
        Err(_) => (None, Some(runtime(anyhow!("the echo server thread panicked")))),
    };
    if !server_ok {
        return Err(server_err.unwrap_or_else(|| runtime(anyhow!("the echo server failed to start"))));
    }
    let mut stats = match client_result {
        Ok(Ok(r)) => r?,
        Ok(Err(e)) => return Err(e.into()),
        Err(_) => return Err(runtime(anyhow!("the client thread panicked"))),
    };
    if let Some(e) = server_err {
        return Err(e);
    }
    stats.echo_ignored = ignored;
    Ok(stats)
}

/// One side's endpoint: an AF_XDP port (with its NAPI profile and epoll) or a UDP socket.
enum Side {
    Xsk {
        // Field order is drop order: the profile is restored before the port (and its XDP
        // program, whose removal may delete the veth's NAPI) goes.
        _profile: Option<NapiProfile>,
        ep: Option<BusyPollEpoll>,
        port: Box<AfXdpPort>,
    },
    Udp(UdpSocket),
}

impl Side {
    /// Sets up this side on `iface` (in the calling thread's namespace) and reports the outcome
    /// on `ready` (the error itself is returned too).
    fn open(mode: Mode, iface: &str, ready: &Ready) -> LabResult<Side> {
        let r = Self::open_inner(mode, iface);
        let _ = ready.send(match &r {
            Ok(_) => Ok(()),
            Err(e) => Err(runtime(anyhow!("{e}"))),
        });
        r
    }

    fn open_inner(mode: Mode, iface: &str) -> LabResult<Side> {
        if !mode.is_xsk() {
            let (local, peer) = if iface.ends_with('a') {
                ((IP4_A, CLIENT_PORT), (IP4_B, SERVER_PORT))
            } else {
                ((IP4_B, SERVER_PORT), (IP4_A, CLIENT_PORT))
            };
            let s = UdpSocket::bind(local).map_err(|e| env(anyhow!("UDP bind {}:{}: {e}", local.0, local.1)))?;
            s.connect(peer).map_err(|e| env(anyhow!("UDP connect {}:{}: {e}", peer.0, peer.1)))?;
            s.set_nonblocking(true).map_err(|e| env(anyhow!("UDP O_NONBLOCK: {e}")))?;
            return Ok(Side::Udp(s));
        }
        let ifc = Iface::resolve(iface).map_err(|e| env(anyhow!("{e}")))?;
        let busy = mode != Mode::XskSoftirq;
        let mut cfg = XskConfig::default();
        cfg.umem.frame_count = 256;
        cfg.umem.fill_size = 128;
        cfg.umem.comp_size = 128;
        cfg.socket.ring_size = 128;
        cfg.socket.copy_mode = CopyMode::Copy;
        cfg.socket.busy_poll = busy.then_some(BUSY_POLL);
        let port =
            AfXdpPort::open(&ifc, 0, &cfg, AttachOpts::default()).map_err(|e| kernel(anyhow!("{iface}: {e}")))?;
        let profile = match mode.napi() {
            Some(s) => Some(NapiProfile::apply(&ifc, &s).map_err(|e| kernel(anyhow!("{iface}: {e}")))?),
            None => None,
        };
        let ep = if mode == Mode::XskIrqSuspend {
            Some(
                BusyPollEpoll::new(port.socket().as_raw_fd(), BUSY_POLL.timeout_us, BUSY_POLL.budget as u16, true)
                    .map_err(|e| kernel(anyhow!("{iface}: {e}")))?,
            )
        } else {
            None
        };
        Ok(Side::Xsk { _profile: profile, ep, port: Box::new(port) })
    }

    /// Echoes the client's frames back until `stop`; returns how many frames it ignored (AF_XDP:
    /// not addressed as `to` says; None over UDP, whose connected socket the kernel filters).
    fn serve(self, to: &EchoFilter, stop: &AtomicBool) -> LabResult<Option<u64>> {
        match self {
            Side::Xsk { ep, mut port, _profile } => {
                let mut ignored = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if let Some(ep) = &ep {
                        ep.wait(10).map_err(|e| runtime(anyhow!("server: {e}")))?;
                    }
                    port.fwd_burst(64, 0, |f| {
                        let echo = echo_in_place(f, to);
                        ignored += u64::from(!echo);
                        echo
                    })
                    .map_err(|e| runtime(anyhow!("server: {e}")))?;
                }
                Ok(Some(ignored))
            }
            Side::Udp(s) => {
                let mut buf = [0u8; 2048];
                while !stop.load(Ordering::Relaxed) {
                    match s.recv(&mut buf) {
                        Ok(n) => {
                            let _ = s.send(&buf[..n]);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) => return Err(runtime(anyhow!("server: UDP recv: {e}"))),
                    }
                }
                Ok(None)
            }
        }
    }

    /// Sends one frame at a time and waits for its echo: a warm-up ([`Tally`]), then up to
    /// `count` measured round trips (or until `max_run` passed).
    fn client(
        self,
        mac_a: [u8; 6],
        mac_b: [u8; 6],
        mode: Mode,
        count: u64,
        max_run: Duration,
        stop: &AtomicBool,
    ) -> LabResult<RunStats> {
        let mut t = Tally::new(mode, count, max_run);
        match self {
            Side::Xsk { ep, mut port, _profile } => {
                let spec = UdpFrameSpec {
                    src_mac: mac_a,
                    dst_mac: mac_b,
                    src_ip: IP4_A.into(),
                    dst_ip: IP4_B.into(),
                    src_port: CLIENT_PORT,
                    dst_port: SERVER_PORT,
                    frame_len: FRAME_LEN,
                };
                let mut frame = vec![0u8; FRAME_LEN];
                packet::build_udp_frame(&spec, &mut frame);
                for seq in 1u64.. {
                    if stop.load(Ordering::Relaxed) {
                        return Err(runtime(anyhow!("interrupted")));
                    }
                    t.before();
                    packet::stamp(&mut frame, &Payload { stream: 0, seq, tstamp_ns: 0 });
                    let t0 = monotonic_ns();
                    while port.tx_burst(&[&frame]).map_err(|e| runtime(anyhow!("client: {e}")))? == 0 {
                        if monotonic_ns() - t0 > LOSS_TIMEOUT_NS {
                            return Err(runtime(anyhow!("client: the TX ring stayed full for 100 ms")));
                        }
                    }
                    let mut got = false;
                    loop {
                        if let Some(ep) = &ep {
                            ep.wait(100).map_err(|e| runtime(anyhow!("client: {e}")))?;
                        }
                        port.rx_burst(8, 0, |b| got |= packet::payload(b).is_some_and(|p| p.seq == seq))
                            .map_err(|e| runtime(anyhow!("client: {e}")))?;
                        if got || monotonic_ns() - t0 > LOSS_TIMEOUT_NS {
                            break;
                        }
                    }
                    let t1 = monotonic_ns();
                    if t.after(got, t1 - t0)? {
                        break;
                    }
                }
            }
            Side::Udp(s) => {
                let mut msg = [0u8; UDP_PAYLOAD];
                let mut buf = [0u8; 2048];
                for seq in 1u64.. {
                    if stop.load(Ordering::Relaxed) {
                        return Err(runtime(anyhow!("interrupted")));
                    }
                    t.before();
                    msg[..8].copy_from_slice(&seq.to_le_bytes());
                    let t0 = monotonic_ns();
                    s.send(&msg).map_err(|e| runtime(anyhow!("client: UDP send: {e}")))?;
                    let mut got = false;
                    loop {
                        match s.recv(&mut buf) {
                            Ok(n) => got = n >= 8 && buf[..8] == seq.to_le_bytes(),
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                            Err(e) => return Err(runtime(anyhow!("client: UDP recv: {e}"))),
                        }
                        if got || monotonic_ns() - t0 > LOSS_TIMEOUT_NS {
                            break;
                        }
                    }
                    let t1 = monotonic_ns();
                    if t.after(got, t1 - t0)? {
                        break;
                    }
                }
            }
        }
        t.stats()
    }
}

/// Most consecutive round trips not answered before a run is abandoned.
pub const MAX_LOST_IN_A_ROW: u64 = 10;
/// Longest the warm-up may take (it ends at [`WARMUP`] round trips or here).
pub const WARMUP_MAX: Duration = Duration::from_secs(2);

/// The client's bookkeeping: warm-up (up to [`WARMUP`] round trips or [`WARMUP_MAX`]), then
/// up to `count` measured round trips or `max_run`; [`MAX_LOST_IN_A_ROW`] losses in a row end
/// the run with an error.
struct Tally {
    mode: Mode,
    count: u64,
    max_run: Duration,
    begun: Instant,
    warm: u64,
    started: Option<Instant>,
    rtts: Vec<u64>,
    lost: u64,
    in_a_row: u64,
}

impl Tally {
    fn new(mode: Mode, count: u64, max_run: Duration) -> Self {
        // The reservation is capped: a long run's samples grow as they come.
        let rtts = Vec::with_capacity(count.min(1 << 20) as usize);
        Self { mode, count, max_run, begun: Instant::now(), warm: 0, started: None, rtts, lost: 0, in_a_row: 0 }
    }

    /// Called before each round trip: starts the measured part when the warm-up is over.
    fn before(&mut self) {
        if self.started.is_none() && (self.warm >= WARMUP || self.begun.elapsed() >= WARMUP_MAX) {
            self.started = Some(Instant::now());
        }
    }

    /// One round trip's outcome; Ok(true) when the run is complete.
    fn after(&mut self, got: bool, rtt_ns: u64) -> LabResult<bool> {
        if got {
            self.in_a_row = 0;
        } else {
            self.in_a_row += 1;
            if self.in_a_row >= MAX_LOST_IN_A_ROW {
                return Err(runtime(anyhow!(
                    "mode {}: {MAX_LOST_IN_A_ROW} round trips in a row not answered within {} ms: the echo does not come back",
                    self.mode.key(),
                    LOSS_TIMEOUT_NS / 1_000_000
                )));
            }
        }
        let Some(started) = self.started else {
            self.warm += 1;
            return Ok(false);
        };
        if got {
            self.rtts.push(rtt_ns);
        } else {
            self.lost += 1;
        }
        Ok(self.rtts.len() as u64 + self.lost >= self.count || started.elapsed() >= self.max_run)
    }

    fn stats(mut self) -> LabResult<RunStats> {
        if self.rtts.is_empty() {
            return Err(runtime(anyhow!("mode {}: no round trip answered ({} lost)", self.mode.key(), self.lost)));
        }
        let secs = self.started.map_or(0.0, |s| s.elapsed().as_secs_f64());
        Ok(stats_of(&mut self.rtts, self.lost, secs))
    }
}

/// What the AF_XDP echo server answers: frames addressed to it (its port's MAC, its IPv4
/// address, the UDP port the client sends to); everything else on the port is counted and
/// dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoFilter {
    /// The server's port's MAC.
    pub mac: [u8; 6],
    /// The server's IPv4 address.
    pub ip: std::net::Ipv4Addr,
    /// The UDP port the client sends to.
    pub port: u16,
}

/// The echo: for an option-less IPv4/UDP frame addressed as `to` says, swaps Ethernet, IPv4
/// and UDP source and destination in place (checksums are unchanged by a swap) and returns
/// true; false (not sent back) for anything else.
pub fn echo_in_place(f: &mut [u8], to: &EchoFilter) -> bool {
    if f.len() < 42 || f[12..14] != [0x08, 0x00] || f[14] != 0x45 || f[23] != 17 {
        return false;
    }
    if f[..6] != to.mac || f[30..34] != to.ip.octets() || f[36..38] != to.port.to_be_bytes() {
        return false;
    }
    packet::swap_macs(f);
    let (src, dst) = f[26..34].split_at_mut(4);
    src.swap_with_slice(dst);
    let (sp, dp) = f[34..38].split_at_mut(2);
    sp.swap_with_slice(dp);
    true
}

/// One sockperf run: its UDP server in namespace b on the server CPU, ping-pong in namespace a
/// on the client CPU for `secs` seconds ([`SockperfRun`]); the figures are sockperf's own
/// report ([`tools::parse_sockperf_ping_pong`]): its observations, its messages sent and not
/// answered, its valid duration.
fn sockperf_run(bed: &Testbed, opts: &PingpongOpts, secs: u64, stop: &AtomicBool) -> LabResult<RunStats> {
    let ip = IP4_B.to_string();
    let _server = tools::sockperf_udp_server(bed.ns_b(), opts.server_cpu, &ip, SOCKPERF_PORT)
        .map_err(|e| env(anyhow!("sockperf server: {e}")))?;
    let t = Instant::now();
    while !tools::udp_bound(bed.ns_b(), SOCKPERF_PORT) {
        if stop.load(Ordering::Relaxed) {
            return Err(runtime(anyhow!("interrupted")));
        }
        if t.elapsed() > Duration::from_secs(5) {
            return Err(runtime(anyhow!("sockperf server did not bind UDP port {SOCKPERF_PORT} within 5 s")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = tools::sockperf_udp_ping_pong(bed.ns_a(), opts.client_cpu, &ip, SOCKPERF_PORT, UDP_PAYLOAD, secs, stop)
        .map_err(|e| env(anyhow!("sockperf ping-pong: {e}")))?
        .ok_or_else(|| runtime(anyhow!("interrupted")))?;
    let s = tools::parse_sockperf_ping_pong(&out).map_err(|e| runtime(anyhow!("mode sockperf-udp: {e}")))?;
    Ok(sockperf_stats(&s))
}

/// A run's figures from sockperf's report (microseconds to nanoseconds).
pub fn sockperf_stats(s: &tools::SockperfPingPong) -> RunStats {
    let ns = |us: f64| (us * 1000.0).round() as u64;
    RunStats {
        round_trips: s.observations,
        lost: s.lost(),
        secs: s.valid_secs,
        min_ns: ns(s.min_us),
        p50_ns: ns(s.p50_us),
        p99_ns: ns(s.p99_us),
        p999_ns: ns(s.p999_us),
        p999_meaningful: s.observations >= 1000,
        max_ns: ns(s.max_us),
        mean_ns: ns(s.mean_us),
        busy_poll_rx_packets: None,
        echo_ignored: None,
        sockperf: Some(*s),
    }
}

/// The NAPI settings of every NAPI of `iface` in namespace `ns` now (for checks that a profile
/// was restored): `(id, defer-hard-irqs, gro-flush-timeout ns, irq-suspend-timeout ns)`.
///
/// # Errors
///
/// [`LabError::Testbed`] entering the namespace; [`LabError::Kernel`] from `napi-get`.
pub fn napi_settings(ns: &str, iface: &str) -> LabResult<Vec<(u32, NapiSettings)>> {
    let iface = iface.to_string();
    fastpath_testbed::run_in_netns(ns, move || -> LabResult<Vec<(u32, NapiSettings)>> {
        let i = Iface::resolve(&iface).map_err(|e| env(anyhow!("{e}")))?;
        Ok(napis(i.ifindex()).map_err(|e| kernel(anyhow!("{e}")))?.into_iter().map(|n| (n.id, n.settings())).collect())
    })?
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// The table: one row per mode (medians over runs, microseconds, with the range of p50 and p99
/// over runs), then each AF_XDP mode over each UDP baseline.
pub fn table(r: &PingpongReport) -> String {
    let mut s = String::from(
        "| path | p50 us | p99 us | p99.9 us | max us | round trips (lost) | busy-poll rx packets |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for row in &r.rows {
        s += &format!(
            "| {} | {} ({}-{}) | {} ({}-{}) | {} | {} | {} ({}) | {} |\n",
            row.label,
            us(row.p50_ns),
            us(row.p50_range_ns.0),
            us(row.p50_range_ns.1),
            us(row.p99_ns),
            us(row.p99_range_ns.0),
            us(row.p99_range_ns.1),
            us(row.p999_ns) + if row.p999_meaningful { "" } else { " (< 1,000 samples: not meaningful)" },
            us(row.max_ns),
            fastpath_tools::stats::thousands(row.round_trips),
            row.lost,
            row.busy_poll_rx_packets.map_or("-".to_string(), fastpath_tools::stats::thousands)
        );
    }
    if !r.ratios.is_empty() {
        s += "\n| AF_XDP mode / kernel UDP | p50 ratio | p99 ratio |\n|---|---:|---:|\n";
        for q in &r.ratios {
            let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
            s += &format!("| {} / {} | {} | {} |\n", q.mode.key(), q.baseline.key(), f(q.p50), f(q.p99));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_and_ordered() {
        let mut v: Vec<u64> = (1..=1000).rev().collect();
        let s = stats_of(&mut v, 2, 1.0);
        assert_eq!((s.min_ns, s.p50_ns, s.p99_ns, s.p999_ns, s.max_ns), (1, 500, 990, 999, 1000));
        assert_eq!((s.round_trips, s.lost, s.mean_ns), (1000, 2, 500));
        let e = stats_of(&mut [], 0, 0.0);
        assert_eq!((e.p50_ns, e.max_ns), (0, 0));
        let one = stats_of(&mut [7], 0, 0.0);
        assert_eq!((one.p50_ns, one.p999_ns, one.max_ns), (7, 7, 7));
        assert!(s.p999_meaningful && !one.p999_meaningful && !stats_of(&mut [1; 999], 0, 0.0).p999_meaningful);
    }

    #[test]
    fn echo_swaps_addresses_and_keeps_checksums_valid() {
        let spec = UdpFrameSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: IP4_A.into(),
            dst_ip: IP4_B.into(),
            src_port: CLIENT_PORT,
            dst_port: SERVER_PORT,
            frame_len: FRAME_LEN,
        };
        let mut f = vec![0u8; FRAME_LEN];
        packet::build_udp_frame(&spec, &mut f);
        packet::stamp(&mut f, &Payload { stream: 0, seq: 42, tstamp_ns: 0 });
        let to = EchoFilter { mac: [2, 0, 0, 0, 0, 2], ip: IP4_B, port: SERVER_PORT };
        // Not the client's: another MAC, another address, another port; left as they were.
        for (what, at, v) in [("mac", 5, 9u8), ("ip", 33, 9), ("port", 37, 9)] {
            let mut g = f.clone();
            g[at] = v;
            let kept = g.clone();
            assert!(!echo_in_place(&mut g, &to), "{what}");
            assert_eq!(g, kept, "{what}: not rewritten");
        }
        assert!(echo_in_place(&mut f, &to));
        assert_eq!(&f[..6], &[2, 0, 0, 0, 0, 1]);
        assert_eq!(&f[26..30], &IP4_B.octets());
        assert_eq!(u16::from_be_bytes([f[36], f[37]]), CLIENT_PORT);
        assert_eq!(packet::verify(&f).expect("still a valid frame").seq, 42);
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!echo_in_place(&mut arp, &to));
    }

    #[test]
    fn sockperf_runs_whole_seconds_by_a_stated_rule_and_its_row_is_its_report() {
        let r = SockperfRun::of(100_000, Duration::from_secs(5));
        assert_eq!(r.secs, 2, "100,000 x 15 us = 1.5 s, rounded up");
        assert!(r.rule.contains("-t 2 s") && r.rule.contains("--count 100000 x 15 us"), "{}", r.rule);
        assert_eq!(SockperfRun::of(1, Duration::from_secs(5)).secs, 1);
        assert_eq!(SockperfRun::of(100_000_000, Duration::from_secs(60)).secs, 60);
        assert_eq!(SockperfRun::of(100_000_000, Duration::from_millis(300)).secs, 1);
        let s = tools::SockperfPingPong {
            valid_secs: 1.55,
            sent: 23891,
            received: 23889,
            observations: 23889,
            dropped: 0,
            duplicated: 0,
            out_of_order: 0,
            min_us: 23.645,
            mean_us: 64.855,
            p50_us: 30.635,
            p99_us: 1655.017,
            p999_us: 3971.821,
            max_us: 8070.791,
        };
        let r = sockperf_stats(&s);
        assert_eq!((r.round_trips, r.lost, r.secs), (23889, 2, 1.55));
        assert_eq!(
            (r.min_ns, r.p50_ns, r.p99_ns, r.p999_ns, r.max_ns, r.mean_ns),
            (23645, 30635, 1655017, 3971821, 8070791, 64855)
        );
        assert!(r.p999_meaningful && r.sockperf == Some(s));
    }

    #[test]
    fn netstat_fields_by_name() {
        let t = "TcpExt: SyncookiesSent BusyPollRxPackets\nTcpExt: 0 42\nIpExt: InNoRoutes\nIpExt: 3\n";
        assert_eq!(netstat_value(t, "TcpExt:", "BusyPollRxPackets"), Some(42));
        assert_eq!(netstat_value(t, "IpExt:", "InNoRoutes"), Some(3));
        assert_eq!(netstat_value(t, "TcpExt:", "Nope"), None);
    }

    #[test]
    fn the_busy_poll_note_says_what_queue_get_found() {
        let none = busy_poll_finding(&[("va", Ok(None)), ("vb", Ok(None))]);
        assert!(none.contains("va rx queue 0 has no napi-id, vb rx queue 0 has no napi-id"), "{none}");
        assert!(none.contains("links no NAPI") && !none.contains("zero-copy only"), "{none}");
        let linked = busy_poll_finding(&[("va", Ok(Some(257))), ("vb", Ok(Some(258)))]);
        assert!(linked.contains("napi-id 257") && linked.contains("yet"), "{linked}");
        let err = busy_poll_finding(&[("va", Err("EPERM".into())), ("vb", Ok(None))]);
        assert!(err.contains("unknown (EPERM)"), "{err}");
    }

    #[test]
    fn modes_parse_by_key() {
        for m in Mode::ALL {
            assert_eq!(Mode::parse(m.key()), Some(m));
        }
        assert_eq!(Mode::parse("xsk"), None);
    }
}
