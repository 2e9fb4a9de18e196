//! `fastpath fwd`: forwarding between interfaces at the driver (crates/fastpath/src/bpf/fwd.rs),
//! with the ports followed while it runs: a port that goes down (or whose veth peer does) or is
//! deleted is paused, one that comes back is resumed, a recreated interface gets the program
//! again, an MTU change is logged. Every frame is counted once per ingress port
//! (`fastpath::bpf::fwd::REASONS`).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath::bpf::fwd::{Forwarder, FwdMode, PortCounters, REASONS};
use fastpath::netdev::{link_state, LinkState};
use serde_json::json;

use crate::args::{FwdArgs, FwdModeArg};
use crate::bench_cmd::enter_ns;
use crate::error::{env, require_privileges, usage, CliResult};

/// How often the ports' state is read.
const POLL: Duration = Duration::from_millis(100);

fn check_args(a: &FwdArgs) -> CliResult<()> {
    let n = a.ifaces.len();
    if !(2..=fastpath::bpf::fwd::MAX_PORTS).contains(&n) {
        return Err(usage(anyhow!(
            "-i given {n} time(s) is not accepted: fwd needs 2 to {} ports",
            fastpath::bpf::fwd::MAX_PORTS
        )));
    }
    let mut seen = HashSet::new();
    if let Some(d) = a.ifaces.iter().find(|i| !seen.insert(*i)) {
        return Err(usage(anyhow!("-i {d} is not accepted: each port once (it is given twice)")));
    }
    if a.mode == FwdModeArg::L2 && n % 2 != 0 {
        return Err(usage(anyhow!(
            "{n} ports are not accepted with --mode l2: it pairs ports in order (1st with 2nd, 3rd with 4th), give an even number"
        )));
    }
    Ok(())
}

fn read_sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn event_line(json_out: bool, t: f64, iface: &str, event: &str, detail: String) {
    if json_out {
        println!("{}", json!({"type": "event", "t_s": t, "iface": iface, "event": event, "detail": detail}));
    } else {
        eprintln!("fastpath fwd: {t:.3} s: {iface} {event}: {detail}");
    }
}

fn counters_json(c: &PortCounters) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for (name, (p, _)) in REASONS.iter().zip(c) {
        m.insert(name.to_string(), json!(p));
    }
    m.insert("rx_packets".into(), json!(c.iter().map(|x| x.0).sum::<u64>()));
    m.insert("rx_bytes".into(), json!(c.iter().map(|x| x.1).sum::<u64>()));
    serde_json::Value::Object(m)
}

pub fn run(a: &FwdArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    check_args(a)?;
    require_privileges("fwd")?;
    enter_ns(&a.netns)?;
    let mode = match a.mode {
        FwdModeArg::L2 => FwdMode::L2,
        FwdModeArg::L3 => FwdMode::L3,
    };
    if mode == FwdMode::L3 && read_sysctl("/proc/sys/net/ipv4/conf/all/forwarding").as_deref() != Some("1") {
        return Err(env(anyhow!(
            "--mode l3 needs IPv4 forwarding on in this namespace (bpf_fib_lookup answers FWD_DISABLED otherwise): sysctl -w net.ipv4.ip_forward=1"
        )));
    }
    let mut states: Vec<LinkState> = Vec::new();
    for i in &a.ifaces {
        let s =
            link_state(i).ok_or_else(|| env(anyhow!("-i {i}: no interface of that name in this network namespace")))?;
        states.push(s);
    }
    let xdp_mode = a.xdp_mode.mode();
    let mut fwd = Forwarder::load(mode)?;
    for (i, s) in a.ifaces.iter().zip(&states) {
        fwd.add_port(i, s.ifindex, s.mac)?;
    }
    if mode == FwdMode::L2 {
        for k in (0..a.ifaces.len()).step_by(2) {
            fwd.pair(k, k + 1);
        }
    }
    // On any error below, dropping `fwd` detaches every program attached so far.
    for (k, st) in states.iter().enumerate() {
        for note in fwd.attach(k, xdp_mode, a.force)? {
            eprintln!("fastpath fwd: {note}");
        }
        if !st.up {
            fwd.pause(k, false)?;
        }
    }
    let ports_desc: Vec<String> = fwd
        .ports()
        .iter()
        .map(|p| {
            format!("{} ({}{})", p.iface, p.mode.map(|m| m.name()).unwrap_or("?"), if p.up { "" } else { ", paused" })
        })
        .collect();
    if a.run.json {
        let ports: Vec<_> = fwd
            .ports()
            .iter()
            .map(|p| json!({"iface": p.iface, "ifindex": p.ifindex, "xdp_mode": p.mode.map(|m| m.name()), "paused": !p.up}))
            .collect();
        println!("{}", json!({"type": "ready", "bench": "fwd", "engine": "xdp", "mode": mode.name(), "ports": ports}));
    } else {
        println!("fwd {}: {}; Ctrl-C stops", mode.name(), ports_desc.join(", "));
    }

    let start = Instant::now();
    let mut next_line = start + Duration::from_secs_f64(a.run.interval);
    let end = start + Duration::from_secs_f64(a.run.duration);
    let mut prev: Vec<PortCounters> = (0..a.ifaces.len()).map(|k| fwd.counters(k)).collect::<Result<_, _>>()?;
    let mut prev_t = start;
    let mut events = 0u64;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        std::thread::sleep(POLL.min(end.saturating_duration_since(Instant::now())));
        let t = start.elapsed().as_secs_f64();
        // Follow the links.
        for (k, name) in a.ifaces.iter().enumerate() {
            let name = name.clone();
            let now = link_state(&name);
            let was = states[k];
            let known = fwd.ports()[k].ifindex;
            match now {
                None if known.is_some() => {
                    fwd.pause(k, true)?;
                    events += 1;
                    event_line(a.run.json, t, &name, "deleted", "paused; waiting for it to come back".into());
                }
                None => {}
                Some(s) if known != Some(s.ifindex) => {
                    // Recreated (or back after a delete): attach to the new interface.
                    match fwd.resume(k, s.ifindex, s.mac, xdp_mode, a.force) {
                        Ok(_) => {
                            events += 1;
                            if !s.up {
                                fwd.pause(k, false)?;
                            }
                            event_line(
                                a.run.json,
                                t,
                                &name,
                                "recreated",
                                format!(
                                    "re-attached as ifindex {}{}",
                                    s.ifindex,
                                    if s.up { "" } else { " (down: paused)" }
                                ),
                            );
                            states[k] = s;
                        }
                        Err(e) => {
                            // Try again at the next poll; say why once per attempt.
                            event_line(a.run.json, t, &name, "reattach-failed", format!("{e}"));
                        }
                    }
                }
                Some(s) => {
                    if s.up != fwd.ports()[k].up {
                        events += 1;
                        if s.up {
                            fwd.resume(k, s.ifindex, s.mac, xdp_mode, a.force)?;
                            event_line(a.run.json, t, &name, "up", "resumed".into());
                        } else {
                            fwd.pause(k, false)?;
                            event_line(a.run.json, t, &name, "down", "paused".into());
                        }
                    }
                    if s.mtu != was.mtu {
                        events += 1;
                        event_line(a.run.json, t, &name, "mtu", format!("{} -> {} bytes", was.mtu, s.mtu));
                    }
                    if s.mac != was.mac {
                        fwd.resume(k, s.ifindex, s.mac, xdp_mode, a.force)?;
                    }
                    states[k] = s;
                }
            }
        }
        if Instant::now() >= next_line {
            next_line += Duration::from_secs_f64(a.run.interval);
            let now_t = Instant::now();
            let secs = now_t.duration_since(prev_t).as_secs_f64().max(1e-9);
            prev_t = now_t;
            let mut ports = Vec::new();
            let mut text = Vec::new();
            for (k, pv) in prev.iter_mut().enumerate() {
                let c = fwd.counters(k)?;
                let d: PortCounters = std::array::from_fn(|r| (c[r].0 - pv[r].0, c[r].1 - pv[r].1));
                let rx: u64 = d.iter().map(|x| x.0).sum();
                let other = rx - d[0].0;
                ports.push(
                    json!({"iface": a.ifaces[k], "rx_pps": rx as f64 / secs, "forwarded_pps": d[0].0 as f64 / secs,
                                  "forwarded_bps": d[0].1 as f64 * 8.0 / secs, "counters": counters_json(&d)}),
                );
                text.push(format!(
                    "{} rx {:.3} Mpps fwd {:.3} Mpps other {}",
                    a.ifaces[k],
                    rx as f64 / secs / 1e6,
                    d[0].0 as f64 / secs / 1e6,
                    other
                ));
                *pv = c;
            }
            if a.run.json {
                println!("{}", json!({"type": "interval", "t_s": t, "ports": ports}));
            } else {
                println!("{t:7.2} s  {}", text.join("  |  "));
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let mut ports = Vec::new();
    for (k, p) in fwd.ports().iter().enumerate() {
        let c = fwd.counters(k)?;
        ports.push(json!({"iface": p.iface, "xdp_mode": p.mode.map(|m| m.name()), "paused": !p.up,
                          "counters": counters_json(&c)}));
    }
    if a.run.json {
        println!(
            "{}",
            json!({"type": "summary", "bench": "fwd", "engine": "xdp", "mode": mode.name(), "duration_s": secs,
                   "link_events": events, "ports": ports})
        );
    } else {
        println!("fwd {} ran {secs:.1} s, {events} link event(s):", mode.name());
        for p in &ports {
            println!("  {}: {}", p["iface"].as_str().unwrap_or("?"), p["counters"]);
        }
    }
    Ok(())
}
