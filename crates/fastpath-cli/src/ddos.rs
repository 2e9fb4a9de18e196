//! `fastpath bench ddos`: the end host keeps serving under attack. A test bed of its own; a TCP
//! request/response service (sockperf server) in the receiving namespace; three phases of
//! `--duration` seconds each: no flood, a UDP port-9 flood from the xdp-live generator with no
//! filter, and the same flood with a classifier rule `proto=udp,dst_port=9,action=drop`.
//! Reports TCP transactions/s and latency percentiles per phase.
//!
//! On two CPUs the attacker shares the machine with its victim, so the set-up separates them:
//! the generator runs on CPU 0; the receiving veth's NAPI (threaded, pinned), the sockperf
//! server and its clients all run on CPU 1, so the flood's processing lands on the service's
//! CPU as it would on a NIC queue's. `--rate` paces the flood (the
//! same offered load in both flood phases); without it the generator floods as fast as it can,
//! which on veth means as fast as the receiving side lets it (they share the softirq CPU).

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use anyhow::anyhow;
use fastpath::bench::{self, SendLimits};
use fastpath::bpf::{Classifier, XdpGen, XdpMode};
use fastpath::netdev::NetDev;
use fastpath::rules::compile::compile;
use fastpath::rules::{parse_cli_rules, Action};
use fastpath::stats::{thousands, Counters};
use fastpath_testbed::{ns_command, spawn_in_netns, Testbed, TestbedConfig};
use serde::Serialize;
use serde_json::json;

use crate::args::BenchArgs;
use crate::error::{env, require_privileges, runtime, CliError, CliResult};

const PORT: &str = "11111";
const SERVICE_CPU: &str = "1";

/// The flood of a phase: threads and optional rate.
#[derive(Debug, Clone, Copy)]
struct Flood {
    on: bool,
    threads: u32,
    rate: Option<u64>,
}

/// One phase's result.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub phase: &'static str,
    pub transactions_per_s: f64,
    /// sockperf's latency: half the TCP round trip, microseconds.
    pub latency_p50_us: f64,
    pub latency_p99_us: f64,
    pub latency_p999_us: f64,
    pub latency_max_us: f64,
    pub flood_sent_pps: f64,
    /// Frames the receiving veth accepted per second (its rx_queue_*_xdp_packets): on veth a
    /// full 256-slot ring refuses the rest at the sender (xdp_xmit_errors), so this, not the
    /// generator's rate, is the load the victim's CPU saw.
    pub reaching_victim_pps: f64,
    pub flood_dropped_by_rule: u64,
    /// Flood frames generated over the whole flood (not only the sockperf window).
    pub flood_sent: u64,
    /// Of those, frames the receiving veth accepted (the sender's `tx_queue_*_xdp_xmit`: only
    /// XDP-redirected frames, so the service's TCP is not in it) ...
    pub flood_accepted: u64,
    /// ... and frames it refused (`tx_queue_*_xdp_xmit_errors`: its 256-slot ring was full).
    /// flood_sent = flood_accepted + flood_refused; with the filter, every accepted flood frame
    /// is counted by the rule.
    pub flood_refused: u64,
}

/// Kills the child (a process we started) on drop.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn parse_sockperf(out: &str) -> Option<(f64, f64, f64, f64, f64)> {
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
    Some((tps?, p50?, p99?, p999?, max?))
}

fn phase(
    bed: &Testbed,
    name: &'static str,
    fl: Flood,
    filter: bool,
    secs: f64,
    stop: &Arc<AtomicBool>,
) -> CliResult<Phase> {
    let (flood, threads, rate) = (fl.on, fl.threads, fl.rate);
    let done = Arc::new(AtomicBool::new(false));
    // Set once the flood has stopped, so the rule's counter is read after its last frame.
    let filter_done = Arc::new(AtomicBool::new(false));
    // The filter, held by a thread in ns b for the phase.
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let filter_thread = if filter {
        let (iface, d) = (bed.iface_b().to_string(), filter_done.clone());
        Some(spawn_in_netns(bed.ns_b(), move || -> u64 {
            let r = (|| -> Result<Classifier, String> {
                let set = parse_cli_rules(&["proto=udp,dst_port=9,action=drop".to_string()], Action::Pass)
                    .map_err(|e| e.to_string())?;
                let c = compile("--rule", &set).map_err(|e| e.to_string())?;
                let dev = NetDev::by_name(&iface).map_err(|e| e.to_string())?;
                let mut cls = Classifier::load().map_err(|e| format!("{e:#}"))?;
                cls.swap_in(&c, &|i| fastpath::host::if_nametoindex(i)).map_err(|e| format!("{e:#}"))?;
                cls.attach(&iface, dev.ifindex, XdpMode::Native, false).map_err(|e| format!("{e:#}"))?;
                Ok(cls)
            })();
            match r {
                Ok(cls) => {
                    let _ = ready_tx.send(Ok(()));
                    while !d.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let set = cls.active().unwrap_or(0);
                    cls.rule_counters(set, 1).ok().and_then(|v| v.first().map(|c| c.0)).unwrap_or(0)
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    0
                }
            }
        }))
    } else {
        let _ = ready_tx.send(Ok(()));
        None
    };
    if let Err(e) =
        ready_rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| Err("filter did not start".into()))
    {
        done.store(true, Ordering::Relaxed);
        filter_done.store(true, Ordering::Relaxed);
        return Err(crate::error::kernel(anyhow!("{e}")));
    }
    // The flood, from ns a.
    let flood_thread = if flood {
        let (iface, mac_b, d) = (bed.iface_a().to_string(), bed.mac_b(), done.clone());
        Some(spawn_in_netns(bed.ns_a(), move || -> Result<(u64, f64, (u64, u64)), String> {
            let dev = NetDev::by_name(&iface).map_err(|e| e.to_string())?;
            let eth0 = dev.ethtool_stats().map_err(|e| e.to_string())?;
            let frame = crate::bench_cmd::testbed_frame(&dev, mac_b).map_err(|e| e.to_string())?;
            let gen = Arc::new(XdpGen::load(dev.ifindex).map_err(|e| format!("{e:#}"))?);
            let t0 = std::time::Instant::now();
            // The attacker starts on CPU 0, away from the service's CPU 1.
            let ncpu = fastpath::host::online_cpus();
            let cpus: Vec<usize> = (0..threads as usize).map(|i| i % ncpu).collect();
            let counters: Vec<Arc<Counters>> = cpus.iter().map(|_| Arc::new(Counters::default())).collect();
            let live =
                bench::LiveGen::start(gen, &frame, &cpus, SendLimits { count: None, rate_pps: rate }, 64, &counters)
                    .map_err(|e| e.to_string())?;
            while !d.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let sent = live.stop().map_err(|e| e.to_string())?;
            let secs = t0.elapsed().as_secs_f64();
            // Let the frames still in the veth ring land before reading what it took.
            std::thread::sleep(Duration::from_millis(100));
            let eth = fastpath::netdev::stats_delta(&eth0, &dev.ethtool_stats().map_err(|e| e.to_string())?);
            let sum = |err: bool| -> u64 {
                eth.iter().filter(|(k, _)| k.contains("xdp_xmit") && k.contains("err") == err).map(|(_, v)| v).sum()
            };
            Ok((sent, secs, (sum(false), sum(true))))
        }))
    } else {
        None
    };
    bed.wait_rx_settled(Duration::from_secs(3));
    let accepted = |bed: &Testbed| -> u64 {
        Testbed::ethtool_stats(bed.ns_b(), bed.iface_b())
            .unwrap_or_default()
            .iter()
            .filter(|(k, _)| k.ends_with("xdp_packets"))
            .map(|(_, v)| *v)
            .sum()
    };
    let acc0 = accepted(bed);
    let t_acc = std::time::Instant::now();
    // The service's clients, from ns a.
    let out = ns_command(bed.ns_a(), "taskset")
        .args([
            "-c",
            SERVICE_CPU,
            "sockperf",
            "ping-pong",
            "--tcp",
            "-i",
            "10.99.0.2",
            "-p",
            PORT,
            "-t",
            &format!("{}", secs.max(1.0).round() as u64),
        ])
        .output();
    let reaching = accepted(bed).saturating_sub(acc0) as f64 / t_acc.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let flood_result = flood_thread.map(|h| {
        h.join()
            .map_err(|_| runtime(anyhow!("flood thread panicked")))
            .and_then(|r| r.map_err(|e| runtime(anyhow!("{e:?}"))))
            .and_then(|r| r.map_err(|e| runtime(anyhow!("{e}"))))
    });
    filter_done.store(true, Ordering::Relaxed);
    let dropped = filter_thread.map(|h| h.join().ok().and_then(|r| r.ok()).unwrap_or(0)).unwrap_or(0);
    let (sent, flood_secs, link) = match flood_result {
        Some(r) => r?,
        None => (0, 1.0, Default::default()),
    };
    let out = out.map_err(|e| env(anyhow!("running sockperf (Debian package sockperf): {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if stop.load(Ordering::Relaxed) {
        return Err(runtime(anyhow!("interrupted")));
    }
    let (tps, p50, p99, p999, max) = parse_sockperf(&text).ok_or_else(|| {
        runtime(anyhow!("sockperf printed no statistics (phase {name}): {}", text.lines().last().unwrap_or("")))
    })?;
    Ok(Phase {
        phase: name,
        transactions_per_s: tps,
        latency_p50_us: p50,
        latency_p99_us: p99,
        latency_p999_us: p999,
        latency_max_us: max,
        flood_sent_pps: sent as f64 / flood_secs,
        reaching_victim_pps: if flood { reaching } else { 0.0 },
        flood_dropped_by_rule: dropped,
        flood_sent: sent,
        flood_accepted: link.0,
        flood_refused: link.1,
    })
}

pub fn run(a: &BenchArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    let ncpu = fastpath::host::online_cpus() as u32;
    if a.flood_threads == 0 || a.flood_threads > ncpu {
        return Err(crate::error::usage(anyhow!(
            "--flood-threads {} is not accepted: 1..={ncpu} (one per CPU)",
            a.flood_threads
        )));
    }
    require_privileges("bench ddos")?;
    if Command::new("sockperf").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
        return Err(env(anyhow!("bench ddos needs sockperf (apt-get install sockperf)")));
    }
    // A qdisc on the sender so a full veth ring queues TCP instead of stalling it (docs/ARCHITECTURE.md §11).
    let bed = Testbed::up(&TestbedConfig { name: None, queues: 1, sender_qdisc: true, ipv6: false })?;
    // The victim's CPU: the receive NAPI of the veth (so the flood's processing), the service and
    // its clients all run on CPU 1; the generator (the attacker) on CPU 0.
    bed.set_rx_napi_cpu(Some(1))?;
    let server = ns_command(bed.ns_b(), "taskset")
        .args(["-c", SERVICE_CPU, "sockperf", "server", "--tcp", "-i", "10.99.0.2", "-p", PORT])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| env(anyhow!("starting sockperf server: {e}")))?;
    let _server = Reaper(server);
    std::thread::sleep(Duration::from_millis(500));
    let secs = if a.run.duration > 0.0 { a.run.duration } else { 1.0 };
    if a.run.duration == 0.0 {
        // Smoke mode: set up (test bed, server, classifier load) and tear down.
        let _ = Classifier::load().map_err(CliError::from)?;
        println!("bench ddos: set up and torn down (--duration 0)");
        return Ok(());
    }
    // -e: the XDP tracepoint counters over the three phases (system-wide: the flood's
    // refusals are counted at the sending veth, in the other namespace).
    let tp = if a.run.extended { crate::report::tracepoints() } else { None };
    let tp0 = tp.and_then(|t| t.snapshot().ok());
    let mut rows = Vec::new();
    for (name, flood, filter) in
        [("no flood", false, false), ("flood, no filter", true, false), ("flood, drop udp dport 9", true, true)]
    {
        let fl = Flood { on: flood, threads: a.flood_threads, rate: a.frame.rate };
        rows.push(phase(&bed, name, fl, filter, secs, &stop)?);
    }
    let tracepoints = match (tp.and_then(|t| t.snapshot().ok()), &tp0) {
        (Some(t1), Some(t0)) => Some(t1.delta(t0)),
        _ => None,
    };
    if a.run.json {
        let mut o =
            json!({"type": "summary", "bench": "ddos", "testbed": bed.name(), "duration_s": secs, "phases": rows});
        if let Some(t) = &tracepoints {
            o["tracepoints"] = json!(t);
        }
        println!("{o}");
    } else {
        println!(
            "{:<26} {:>12} {:>8} {:>8} {:>9} {:>9} {:>13} {:>13} {:>14}",
            "phase",
            "TCP trans/s",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "max us",
            "flood sent/s",
            "reached it/s",
            "rule dropped"
        );
        for r in &rows {
            println!(
                "{:<26} {:>12} {:>8.1} {:>8.1} {:>9.1} {:>9.1} {:>13} {:>13} {:>14}",
                r.phase,
                thousands(r.transactions_per_s.round() as u64),
                r.latency_p50_us,
                r.latency_p99_us,
                r.latency_p999_us,
                r.latency_max_us,
                thousands(r.flood_sent_pps.round() as u64),
                thousands(r.reaching_victim_pps.round() as u64),
                thousands(r.flood_dropped_by_rule)
            );
        }
        println!(
            "(latency: sockperf's, half the TCP round trip; sockperf ping-pong --tcp from {} to 10.99.0.2)",
            bed.ns_a()
        );
        if let Some(t) = &tracepoints {
            println!("XDP tracepoints over the three phases (all interfaces):");
            for l in crate::report::tracepoint_lines(t, 0) {
                println!("{l}");
            }
        }
    }
    Ok(())
}
