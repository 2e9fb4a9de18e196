//! `fastpath fwd --engine xsk`: L2 forwarding between two ports through AF_XDP sockets, one
//! UMEM shared by the two sockets of each queue pair (`fastpath::xsk::XskPair`), one pinned
//! thread per queue pair. The `xsk_redirect` program on each port sends queue q's frames to
//! the pair's socket on that port; frames move from one socket's RX ring to the other's TX
//! ring without a copy in user space.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath::bpf::{attach_with_fallback, XdpMode, XskRedirect};
use fastpath::netdev::{link_state, NetDev};
use fastpath::xsk::{CopyMode, DirStats, SocketConfig, UmemConfig, XskConfig, XskPair, XskStats};
use serde_json::json;

use crate::args::{FwdArgs, FwdModeArg};
use crate::bench_cmd::enter_ns;
use crate::error::{env, require_privileges, usage, CliResult};
use crate::session::decide_multi_buffer;

/// UMEM frame size: one frame holds a packet of up to this less the kernel's 256-byte
/// XDP_PACKET_HEADROOM (copy mode; include/uapi/linux/bpf.h); above that (MTU > 3822) the
/// sockets are multi-buffer (XDP_USE_SG, kernel >= 6.6) and a packet takes several frames.
const FRAME_SIZE: u32 = 4096;
/// UMEM frames per queue pair (half on each side's FILL ring: 4,096 frames, 40 ms at 100,000
/// frames/s, for the thread to be away without the kernel running out of FILL frames). A
/// smaller UMEM stays in cache better (2,048 frames: 0.36 -> 0.44 Mpps in one noisy sitting)
/// but loses frames when the thread is descheduled on a busy machine.
const FRAME_COUNT: u32 = 8192;
/// Frames per forwarding round and per copy-mode sendto (XDP_MAX_TX_SKB_BUDGET, kernel >= 6.17;
/// older kernels keep 32 and the forwarder wakes TX more often).
const TX_BUDGET: u32 = 64;

fn check_args(a: &FwdArgs) -> CliResult<()> {
    if a.mode != FwdModeArg::L2 {
        return Err(usage(anyhow!(
            "--engine xsk with --mode l3 is not accepted: the AF_XDP forwarder moves L2 port pairs (use --mode l2, or --engine xdp for L3 through the kernel's FIB)"
        )));
    }
    if a.ifaces.len() != 2 {
        return Err(usage(anyhow!(
            "--engine xsk with {} ports is not accepted: give exactly 2 (-i A -i B)",
            a.ifaces.len()
        )));
    }
    if a.ifaces[0] == a.ifaces[1] {
        return Err(usage(anyhow!("-i {} is not accepted: each port once (it is given twice)", a.ifaces[0])));
    }
    if !(1..=64).contains(&a.queues) {
        return Err(usage(anyhow!("--queues {} is not accepted: use 1 to 64 queue pairs", a.queues)));
    }
    Ok(())
}

fn sum(a: DirStats, b: DirStats) -> DirStats {
    DirStats {
        forwarded: a.forwarded + b.forwarded,
        forwarded_bytes: a.forwarded_bytes + b.forwarded_bytes,
        completed: a.completed + b.completed,
        tx_full: a.tx_full + b.tx_full,
        limited: a.limited + b.limited,
    }
}

type Shared = Arc<Mutex<Vec<[DirStats; 2]>>>;

/// Runs the AF_XDP forwarder (see the module docs) until `stop` or the duration.
pub fn run(a: &FwdArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    check_args(a)?;
    require_privileges("fwd")?;
    enter_ns(&a.netns)?;
    let mut ifindexes = Vec::new();
    // Multi-buffer if either port's MTU needs it (the two sockets share one UMEM, and the
    // first socket's XDP_USE_SG is the UMEM's).
    let mut cfg = XskConfig {
        umem: UmemConfig { frame_size: FRAME_SIZE, frame_count: FRAME_COUNT, ..Default::default() },
        socket: SocketConfig { tx_skb_budget: Some(TX_BUDGET), ..Default::default() },
    };
    let mut mb_notes = Vec::new();
    for i in &a.ifaces {
        let s =
            link_state(i).ok_or_else(|| env(anyhow!("-i {i}: no interface of that name in this network namespace")))?;
        let mut c = cfg.clone();
        mb_notes.extend(decide_multi_buffer(i, s.mtu, &mut c)?);
        cfg.socket.multi_buffer |= c.socket.multi_buffer;
        let count = NetDev::by_name(i).ok().and_then(|d| d.rx_queue_count().ok().flatten()).unwrap_or(1);
        if a.queues > count {
            return Err(env(anyhow!("--queues {} is not accepted: {i} has {count} queue(s)", a.queues)));
        }
        ifindexes.push(s.ifindex);
    }
    let cpus: Vec<usize> = match &a.cpus {
        Some(l) => l.0.iter().map(|&c| c as usize).collect(),
        None => (0..fastpath::host::online_cpus()).rev().collect(),
    };
    // Attach to both ports first; on any error below the attachments are dropped (detached).
    let mut progs = Vec::new();
    for (i, &ifindex) in a.ifaces.iter().zip(&ifindexes) {
        let mb = cfg.socket.multi_buffer;
        let at =
            attach_with_fallback(i, ifindex, a.xdp_mode.mode(), |m| XskRedirect::attach(i, ifindex, m, a.force, mb))?;
        for note in mb_notes.iter().filter(|n| n.contains(&format!(" {i} "))).chain(&at.notes) {
            eprintln!("fastpath fwd: {note}");
        }
        progs.push(at);
    }
    let skb = progs.iter().any(|p| p.mode == XdpMode::Skb);
    // A copy-mode sendto transmits up to the TX budget: as many as one forwarding round moves.
    let sock_cfg = SocketConfig { copy_mode: if skb { CopyMode::Copy } else { CopyMode::Auto }, ..cfg.socket };
    let umem_cfg = cfg.umem;
    let mut pairs = Vec::new();
    for q in 0..a.queues {
        let mut p = XskPair::bind(&umem_cfg, &sock_cfg, [&a.ifaces[0], &a.ifaces[1]], q)?;
        p.set_tx_limit_bytes(a.tx_limit_bytes);
        for (k, prog) in progs.iter().enumerate() {
            prog.prog.insert(q, p.sockets()[k].as_raw_fd())?;
        }
        pairs.push(p);
    }
    let copy_mode = pairs[0].sockets()[0].copy_mode_name();
    let xdp_modes: Vec<&str> = progs.iter().map(|p| p.mode.name()).collect();
    if a.run.json {
        let ports: Vec<_> = a
            .ifaces
            .iter()
            .zip(&ifindexes)
            .zip(&xdp_modes)
            .map(|((i, x), m)| json!({"iface": i, "ifindex": x, "xdp_mode": m}))
            .collect();
        println!(
            "{}",
            json!({"type": "ready", "bench": "fwd", "engine": "xsk", "mode": "l2", "ports": ports, "queues": a.queues,
                   "copy_mode": copy_mode, "multi_buffer": sock_cfg.multi_buffer, "tx_limit_bytes": a.tx_limit_bytes})
        );
    } else {
        println!(
            "fwd xsk l2: {} <-> {}, {} queue pair(s), {copy_mode}, xdp {}; Ctrl-C stops",
            a.ifaces[0],
            a.ifaces[1],
            a.queues,
            xdp_modes.join("/")
        );
    }

    let shared: Shared = Arc::new(Mutex::new(vec![[DirStats::default(); 2]; a.queues as usize]));
    let done = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = pairs
        .into_iter()
        .enumerate()
        .map(|(q, mut pair)| {
            let (shared, done, stop) = (shared.clone(), done.clone(), stop.clone());
            let cpu = cpus[q % cpus.len()];
            std::thread::spawn(move || -> anyhow::Result<[XskStats; 2]> {
                fastpath::host::pin_current_thread(cpu)?;
                let mut rounds = 0u32;
                while !done.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
                    let n = pair.step(TX_BUDGET)?;
                    rounds = rounds.wrapping_add(1);
                    if n == 0 {
                        pair.wait(10)?;
                    }
                    if n == 0 || rounds % 256 == 0 {
                        shared.lock().expect("stats lock")[q] = pair.stats;
                    }
                }
                // Let what is on the TX rings finish, then a last count.
                let until = Instant::now() + Duration::from_millis(200);
                while Instant::now() < until {
                    pair.step(TX_BUDGET)?;
                }
                shared.lock().expect("stats lock")[q] = pair.stats;
                Ok(pair.xsk_stats()?)
            })
        })
        .collect();

    let start = Instant::now();
    let end = start + Duration::from_secs_f64(a.run.duration);
    let mut next_line = start + Duration::from_secs_f64(a.run.interval);
    let mut prev = shared.lock().expect("stats lock").clone();
    let mut prev_t = start;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end && !workers.iter().any(|w| w.is_finished()) {
        std::thread::sleep(Duration::from_millis(20).min(end.saturating_duration_since(Instant::now())));
        if Instant::now() < next_line {
            continue;
        }
        next_line += Duration::from_secs_f64(a.run.interval);
        let now = shared.lock().expect("stats lock").clone();
        let secs = prev_t.elapsed().as_secs_f64().max(1e-9);
        prev_t = Instant::now();
        let dir = |d: usize, v: &[[DirStats; 2]]| v.iter().map(|s| s[d].forwarded).sum::<u64>();
        let pps: Vec<f64> = (0..2).map(|d| (dir(d, &now) - dir(d, &prev)) as f64 / secs).collect();
        let t = start.elapsed().as_secs_f64();
        if a.run.json {
            println!(
                "{}",
                json!({"type": "interval", "t_s": t, "directions": [
                    {"from": a.ifaces[0], "to": a.ifaces[1], "forwarded_pps": pps[0]},
                    {"from": a.ifaces[1], "to": a.ifaces[0], "forwarded_pps": pps[1]}]})
            );
        } else {
            println!(
                "{t:7.2} s  {} -> {} {:.3} Mpps  |  {} -> {} {:.3} Mpps",
                a.ifaces[0],
                a.ifaces[1],
                pps[0] / 1e6,
                a.ifaces[1],
                a.ifaces[0],
                pps[1] / 1e6
            );
        }
        prev = now;
    }
    done.store(true, Ordering::Relaxed);
    let mut xsk = Vec::new();
    let mut first_err = None;
    for w in workers {
        match w.join() {
            Ok(Ok(s)) => xsk.push(s),
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(anyhow!("a queue pair's thread panicked"));
            }
        }
    }
    if let Some(e) = first_err {
        return Err(crate::error::runtime(e));
    }
    let secs = start.elapsed().as_secs_f64();
    let per_queue = shared.lock().expect("stats lock").clone();
    let total: Vec<DirStats> =
        (0..2).map(|d| per_queue.iter().fold(DirStats::default(), |acc, s| sum(acc, s[d]))).collect();
    let drops = |k: usize| -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for s in &xsk {
            for (name, v) in s[k].fields() {
                let e = m.entry(name.to_string()).or_insert(json!(0));
                *e = json!(e.as_u64().unwrap_or(0) + v);
            }
        }
        serde_json::Value::Object(m)
    };
    if a.run.json {
        println!(
            "{}",
            json!({"type": "summary", "bench": "fwd", "engine": "xsk", "mode": "l2", "duration_s": secs,
                   "queues": a.queues, "copy_mode": copy_mode,
                   "directions": [
                       {"from": a.ifaces[0], "to": a.ifaces[1], "totals": total[0]},
                       {"from": a.ifaces[1], "to": a.ifaces[0], "totals": total[1]}],
                   "xsk": [{"iface": a.ifaces[0], "statistics": drops(0)}, {"iface": a.ifaces[1], "statistics": drops(1)}],
                   "per_queue": per_queue})
        );
    } else {
        println!("fwd xsk l2 ran {secs:.1} s:");
        for (d, t) in total.iter().enumerate() {
            println!(
                "  {} -> {}: forwarded {} ({} bytes), completed {}, TX ring full {} times, held by the byte limit {} times",
                a.ifaces[d],
                a.ifaces[1 - d],
                t.forwarded,
                t.forwarded_bytes,
                t.completed,
                t.tx_full,
                t.limited
            );
            println!("  {} XDP_STATISTICS: {}", a.ifaces[d], drops(d));
        }
    }
    drop(progs); // detaches both programs
    Ok(())
}
