//! The phases of `bench ddos` ([`DdosBed::run`]): per phase a fresh service, its connect probe,
//! the flood, sockperf's clients, and the accounting around them (the defence's counter, the
//! victim's UDP layer, the receiving veth's counters, the service CPU's softirq time and the
//! NAPI thread's CPU time); one [`Phase`] each.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath_testbed::Testbed;
use serde::Serialize;

use super::bed::DdosBed;
use super::clients_xdp::ClientsXdp;
use super::defence::{Defence, Installed};
use super::flood::{start_flood, Flood, FloodRate, Model};
use super::service::{spawn_connect_probe, start_server, EchoServer, PORT_FIRST, PROBE_OFFSET, SERVICE_CPU};
use crate::coalesce::Coalescer;
use crate::error::{env, runtime, LabResult};
use crate::tools;

/// One phase's result.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// The flood model of the row set ("per-frame", "coalesced"; [`Model::name`]).
    pub model: &'static str,
    /// "none" for the no-flood phase and the unfiltered floods, else the defence's name.
    pub defence: &'static str,
    /// The offered rate as given ("250k", "max"), or "" with no flood.
    pub offered: String,
    /// The offered rate in frames/s: the nominal one, or for "max" the generator's measured.
    pub offered_pps: f64,
    /// 0 when the service was unreachable (see `service_error`).
    pub transactions_per_s: f64,
    /// sockperf's latency: half the TCP round trip, microseconds (None: unreachable).
    pub latency_p50_us: Option<f64>,
    /// 99th percentile, microseconds (None: unreachable).
    pub latency_p99_us: Option<f64>,
    /// 99.9th percentile, microseconds (None: unreachable).
    pub latency_p999_us: Option<f64>,
    /// Maximum, microseconds (None: unreachable).
    pub latency_max_us: Option<f64>,
    /// sockperf's last line when it measured nothing (e.g. its connection timed out).
    pub service_error: Option<String>,
    /// Flood frames the generator sent per second (over the whole flood).
    pub flood_sent_pps: f64,
    /// Frames per second the receiving veth accepted during the service's window (its
    /// rx_queue_*_xdp_packets): the load the victim's CPU saw.
    pub reaching_victim_pps: f64,
    /// Flood frames generated over the whole flood ...
    pub flood_sent: u64,
    /// ... of which the receiving veth accepted (the sender's `tx_queue_*_xdp_xmit`) ...
    pub flood_accepted: u64,
    /// ... and refused (`tx_queue_*_xdp_xmit_errors`: its 256-slot ring was full).
    pub flood_refused: u64,
    /// Share of the paced flood's 1 ms windows that held the nominal rate within 20%
    /// (None for "max" and no flood).
    pub paced_windows_within_20pct: Option<f64>,
    /// The service CPU's time in softirq, % (/proc/stat), during the service's window.
    pub service_cpu_softirq_pct: f64,
    /// The receiving NAPI thread's CPU time, % of one CPU (/proc/PID/stat), same window.
    pub napi_thread_cpu_pct: f64,
    /// Frames the defence dropped during the phase, by its own counter (nft/iptables rule
    /// counter, the classifier's rule counter); 0 without a defence.
    pub dropped_by_defence: u64,
    /// UDP flood: flood frames that got past the defence to the victim's UDP layer during the
    /// phase (Udp NoPorts + InErrors of its namespace: nothing listens on port 9), so that
    /// flood_accepted = dropped_by_defence + this; None for the SYN flood and without a flood.
    pub flood_reached_stack: Option<u64>,
    /// Coalesced model: share of the service's window, %, in which the controller held the
    /// victim's NAPI at a coalescing level (polls every rx-usecs); None in the per-frame model.
    pub napi_coalescing_pct: Option<f64>,
    /// `fastpath-syncookie`: SYN-ACKs with cookies the classifier sent per second during the
    /// phase (its `syncookie_synack` counter between the phase's two counter reads, before the
    /// flood starts and after it ends; the service's handshakes included); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syncookie_synack_per_s: Option<f64>,
    /// `fastpath-syncookie`: the SYN-ACKs of `syncookie_synack_per_s`, counted (every flood SYN
    /// the victim accepted and did not drop, plus the clients' own SYNs and retransmissions);
    /// absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syncookie_synack_sent: Option<u64>,
    /// The connect probe (from ns a, on the service's CPU): new TCP connections attempted during
    /// the service's window, paced evenly, to an echo server on the service's port + 5000.
    pub connects_attempted: u32,
    /// Those that connected within 1 s and had their one byte echoed within 1 s more.
    pub connects_succeeded: u32,
    /// Connect time (connect() called to established) of the successful ones, ms, median;
    /// None if none succeeded.
    pub connect_p50_ms: Option<f64>,
    /// The same, 99th percentile (nearest rank).
    pub connect_p99_ms: Option<f64>,
}

/// Udp NoPorts + InErrors of namespace `ns` (/proc/net/snmp): where a UDP datagram to a port
/// nobody listens on, or a damaged one, ends in the stack.
fn udp_unwanted(ns: &str) -> LabResult<u64> {
    let out = tools::ns_snmp(ns)?;
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("Udp:")).collect();
    let [names, values, ..] = lines.as_slice() else {
        return Err(runtime(anyhow!("no Udp lines in /proc/net/snmp of {ns}")));
    };
    let v: Vec<(&str, u64)> =
        names.split_whitespace().zip(values.split_whitespace()).map(|(n, v)| (n, v.parse().unwrap_or(0))).collect();
    Ok(v.iter().filter(|(n, _)| *n == "NoPorts" || *n == "InErrors").map(|(_, v)| v).sum())
}

/// (busy-or-not total, softirq) jiffies of one CPU from /proc/stat.
fn cpu_jiffies(cpu: usize) -> (u64, u64) {
    let name = format!("cpu{cpu}");
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.split_whitespace().next() == Some(name.as_str())).map(|l| {
                let v: Vec<u64> = l.split_whitespace().skip(1).take(8).filter_map(|x| x.parse().ok()).collect();
                (v.iter().sum(), v.get(6).copied().unwrap_or(0))
            })
        })
        .unwrap_or((0, 0))
}

/// CPU time of the threads `pids` so far, ns (/proc/PID/schedstat, first field: time spent
/// running; Documentation/scheduler/sched-stats.rst).
fn thread_run_ns(pids: &[i32]) -> u64 {
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

struct Ctx<'a> {
    bed: &'a Testbed,
    model: Model,
    /// The coalesced model's controller (None: per frame).
    coalescer: Option<&'a Coalescer>,
    kind: Flood,
    /// Spoofed source addresses of the flood ([`super::flood_spread`]).
    flood_sources: u32,
    /// Phases started so far: phase i's service listens on PORT_FIRST + i.
    phases: std::sync::atomic::AtomicU32,
    napi_pids: Vec<i32>,
    flood_cpus: Vec<usize>,
    secs: f64,
    stop: &'a Arc<AtomicBool>,
}

fn phase(cx: &Ctx, defence: Defence, inst: &Installed, rate: Option<FloodRate>) -> LabResult<Phase> {
    let bed = cx.bed;
    let n = cx.phases.fetch_add(1, Ordering::Relaxed);
    let port = PORT_FIRST + (n % u32::from(PROBE_OFFSET)) as u16;
    let _server = start_server(bed, port)?;
    let echo = EchoServer::start(bed, port + PROBE_OFFSET)?;
    // The defence's counter, and the victim's UDP layer, before any flood frame.
    let (drop0, synack0) = inst.counters()?;
    let t_counters = Instant::now();
    let udp_flood = rate.is_some() && cx.kind == Flood::Udp;
    let stack0 = if udp_flood { Some(udp_unwanted(bed.ns_b())?) } else { None };
    let flood = match rate {
        Some(r) => Some(start_flood(bed, cx.kind, cx.flood_sources, &cx.flood_cpus, r, port)?),
        None => None,
    };
    // Let the paced flood settle into its schedule before the service's window.
    std::thread::sleep(Duration::from_millis(200));
    let accepted = |bed: &Testbed| -> u64 {
        Testbed::ethtool_stats(bed.ns_b(), bed.iface_b())
            .unwrap_or_default()
            .iter()
            .filter(|(k, _)| k.ends_with("xdp_packets"))
            .map(|(_, v)| *v)
            .sum()
    };
    let acc0 = accepted(bed);
    let coalescing_ns = || cx.coalescer.map(|c| c.stats().coalescing_ns.load(Ordering::Relaxed));
    let co0 = coalescing_ns();
    let (cpu0, napi0, t_acc) = (cpu_jiffies(SERVICE_CPU), thread_run_ns(&cx.napi_pids), Instant::now());
    // The connect probe, from ns a, beside the service's clients.
    let probe = spawn_connect_probe(bed, port + PROBE_OFFSET, cx.secs);
    // The service's clients, from ns a.
    // `timeout -s KILL`: a client whose SYN was lost at the full ring would retry its connect
    // for minutes; after the window and a margin the service counts as unreachable.
    let out = tools::sockperf_ping_pong_pinned(
        bed.ns_a(),
        SERVICE_CPU,
        "10.99.0.2",
        port,
        cx.secs as u64,
        cx.secs as u64 + 5,
    );
    let elapsed = t_acc.elapsed().as_secs_f64();
    let probe = probe.join().map_err(|_| runtime(anyhow!("the connect probe panicked")))??;
    drop(echo);
    let (cpu1, napi1) = (cpu_jiffies(SERVICE_CPU), thread_run_ns(&cx.napi_pids));
    let coalescing_pct = match (co0, coalescing_ns()) {
        (Some(a), Some(b)) => Some((100.0 * b.saturating_sub(a) as f64 / 1e9 / elapsed).min(100.0)),
        _ => None,
    };
    let reaching = accepted(bed).saturating_sub(acc0) as f64 / elapsed;
    let softirq_pct = 100.0 * (cpu1.1 - cpu0.1) as f64 / (cpu1.0 - cpu0.0).max(1) as f64;
    let napi_pct = 100.0 * napi1.saturating_sub(napi0) as f64 / 1e9 / elapsed;
    let (sent, flood_secs, link, paced) = match flood {
        Some(f) => f.finish()?,
        None => (0, 1.0, Default::default(), None),
    };
    let (drop1, synack1) = inst.counters()?;
    let dropped = drop1.saturating_sub(drop0);
    let synack_sent = match (synack0, synack1) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let synack_per_s = synack_sent.map(|s| s as f64 / t_counters.elapsed().as_secs_f64());
    let reached_stack = match stack0 {
        Some(s0) => Some(udp_unwanted(bed.ns_b())?.saturating_sub(s0)),
        None => None,
    };
    let text = out.map_err(|e| env(anyhow!("running sockperf (Debian package sockperf): {e}")))?;
    if cx.stop.load(Ordering::Relaxed) {
        return Err(runtime(anyhow!("interrupted")));
    }
    let label = match rate {
        Some(r) => format!("{} flood {r}", defence.name()),
        None => "no flood".into(),
    };
    // Under a flood the service may be unreachable (its SYN lost at the full ring): that is a
    // result, 0 transactions/s; without a flood it is an error.
    let (tps, p50, p99, p999, max) = match tools::parse_sockperf(&text) {
        Some(s) => (s.transactions_per_s, Some(s.p50_us), Some(s.p99_us), Some(s.p999_us), Some(s.max_us)),
        None if rate.is_some() => (0.0, None, None, None, None),
        None => {
            return Err(runtime(anyhow!(
                "sockperf printed no statistics ({label}): {}",
                text.lines().last().unwrap_or("")
            )))
        }
    };
    let unreachable = (tps == 0.0).then(|| text.lines().last().unwrap_or("").trim().to_string());
    let sent_pps = sent as f64 / flood_secs;
    Ok(Phase {
        model: cx.model.name(),
        defence: if rate.is_some() { defence.name() } else { "none" },
        offered: rate.map(|r| r.to_string()).unwrap_or_default(),
        offered_pps: match rate {
            Some(FloodRate::Pps(p)) => p as f64,
            Some(FloodRate::Max) => sent_pps,
            None => 0.0,
        },
        transactions_per_s: tps,
        latency_p50_us: p50,
        latency_p99_us: p99,
        latency_p999_us: p999,
        latency_max_us: max,
        service_error: unreachable,
        flood_sent_pps: sent_pps,
        reaching_victim_pps: if rate.is_some() { reaching } else { 0.0 },
        flood_sent: sent,
        flood_accepted: link.0,
        flood_refused: link.1,
        paced_windows_within_20pct: paced,
        service_cpu_softirq_pct: softirq_pct,
        napi_thread_cpu_pct: napi_pct,
        dropped_by_defence: dropped,
        flood_reached_stack: reached_stack,
        napi_coalescing_pct: coalescing_pct,
        syncookie_synack_per_s: synack_per_s,
        syncookie_synack_sent: synack_sent,
        connects_attempted: probe.attempted,
        connects_succeeded: probe.succeeded,
        connect_p50_ms: probe.p50_ms,
        connect_p99_ms: probe.p99_ms,
    })
}

impl DdosBed {
    /// The phases: no flood first, then per defence one per offered rate. `progress` gets one
    /// line as each phase starts, with the time left ([`crate::progress`]), and one at the end.
    /// Stops with an error when `stop` is raised.
    ///
    /// Needs root: attaches XDP programs, drives nft, iptables and sockperf in the namespaces.
    ///
    /// # Errors
    ///
    /// [`LabError::Environment`](crate::LabError::Environment) when sockperf cannot be run,
    /// [`LabError::Kernel`](crate::LabError::Kernel) when the flood or the classifier cannot be
    /// loaded, [`LabError::Runtime`](crate::LabError::Runtime) when a program fails, the service
    /// answers nothing without a flood, or `stop` is raised.
    pub fn run(&self, stop: &Arc<AtomicBool>, progress: &mut dyn FnMut(&str)) -> LabResult<Vec<Phase>> {
        let mut phases = Vec::new();
        // Planned: the phase's seconds and some 3 s of set-up (server, defence, flood) each.
        let per_model = 1 + self.defences.len() * self.rates.len();
        let mut pr = crate::progress::Progress::new(
            "bench ddos",
            vec![self.secs + 3.0; per_model * self.models.len()],
            progress,
        );
        // TCP floods: the victim answers them (SYN-ACKs, RSTs; the classifier's SYN-ACKs with
        // XDP_TX), so every phase, the no-flood one too, runs with the clients' veth dropping
        // frames to the spoofed sources (see ClientsXdp); the UDP flood is answered only by
        // rate-limited ICMP, but fastpath-syncookie's SYN-ACKs to the service's client need it
        // there too (so a UDP run's rows depend on whether that defence is in it: the model
        // line says which).
        let _clients = if self.clients_xdp() { Some(ClientsXdp::start(&self.bed)?) } else { None };
        for m in &self.models {
            // The controller runs through the model's phases; dropped (settings restored) on
            // an error.
            let co = match m {
                Model::PerFrame => None,
                Model::Coalesced => Some(self.coalescer()?),
            };
            let cx = Ctx {
                bed: &self.bed,
                model: *m,
                coalescer: co.as_ref(),
                kind: self.flood,
                flood_sources: self.flood_sources,
                phases: std::sync::atomic::AtomicU32::new(phases.len() as u32),
                napi_pids: self.napi_pids.clone(),
                flood_cpus: self.flood_cpus.clone(),
                secs: self.secs,
                stop,
            };
            pr.phase(&format!("{}, no flood", m.name()));
            phases.push(phase(&cx, Defence::None, &Installed::None, None)?);
            for d in &self.defences {
                let inst = Installed::install(*d, &self.bed, self.flood)?;
                for r in &self.rates {
                    pr.phase(&format!("{}, {} against {r}", m.name(), d.name()));
                    phases.push(phase(&cx, *d, &inst, Some(*r))?);
                }
            }
            if let Some(c) = co {
                c.stop()?;
            }
        }
        pr.finish();
        Ok(phases)
    }
}
