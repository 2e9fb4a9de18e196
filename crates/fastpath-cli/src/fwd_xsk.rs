//! `fastpath fwd --engine xsk`: L2 forwarding between two ports through AF_XDP sockets, one
//! UMEM shared by the two sockets of each queue pair (`fastpath::xsk::XskPair`), one pinned
//! thread per queue pair. The `xsk_redirect` program on each port sends queue q's frames to
//! the pair's socket on that port; frames move from one socket's RX ring to the other's TX
//! ring without a copy in user space.
//!
//! Links are followed (rtnetlink, `fastpath::netdev::watch`): a port going down or up is
//! logged (its frames wait on the TX ring meanwhile: sendto answers ENETDOWN); a deleted port
//! stops the queue pairs (what they received and did not forward is counted as `discarded`), and
//! when both ports exist again everything is attached and bound anew; an MTU that needs
//! multi-buffer sockets the running ones are not re-binds them. Counters add up across restarts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath::bpf::{AttachOpts, XdpMode, XskRedirect, XskRedirectOpts};
use fastpath::netdev::watch::{NetEvent, NetWatch};
use fastpath::netdev::{link_state, Iface, LinkState};
use fastpath::xsk::{CopyMode, DirStats, XskConfig, XskPair, XskStats};
use serde_json::json;

use crate::args::{FwdArgs, FwdModeArg};
use crate::common::enter_ns;
use crate::common::event_line;
use crate::error::{env, kernel, require_privileges, usage, CliResult};
use crate::metrics::MetricsServer;
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
        discarded: a.discarded + b.discarded,
    }
}

type Shared = Arc<Mutex<Vec<[DirStats; 2]>>>;

/// What a queue pair's thread hands back: its sockets' XDP_STATISTICS and the error that ended
/// it, if one did (after a port was deleted, sendto answers ENXIO: expected then).
type WorkerEnd = ([XskStats; 2], Option<anyhow::Error>);

/// One running set-up: the program on each port, one pair per queue, one thread per pair.
struct Instance {
    /// Duplicates of the sockets' fds (per queue, side 0 and 1), for XDP_STATISTICS from the
    /// main thread.
    stats_fds: Vec<[std::os::fd::OwnedFd; 2]>,
    progs: Vec<fastpath::bpf::Attached<XskRedirect>>,
    workers: Vec<std::thread::JoinHandle<WorkerEnd>>,
    shared: Shared,
    done: Arc<AtomicBool>,
    multi_buffer: bool,
    copy_mode: &'static str,
    ifindexes: Vec<u32>,
}

impl Instance {
    /// Attaches to both ports, binds a pair per queue and starts the threads. Returns it and the
    /// notes of the set-up (multi-buffer, mode fallbacks). On error nothing is left attached.
    fn start(a: &FwdArgs, cpus: &[usize], stop: &Arc<AtomicBool>) -> CliResult<(Instance, Vec<String>)> {
        let mut ifaces: Vec<Iface> = Vec::new();
        // Multi-buffer if either port's MTU needs it (the two sockets share one UMEM, and the
        // first socket's XDP_USE_SG is the UMEM's).
        let mut cfg = XskConfig::default();
        cfg.umem.frame_size = FRAME_SIZE;
        cfg.umem.frame_count = FRAME_COUNT;
        cfg.socket.tx_skb_budget = Some(TX_BUDGET);
        let mut notes = Vec::new();
        for i in &a.ifaces {
            let resolved = Iface::resolve(i).map_err(|_| {
                env(anyhow!(
                    "-i {i}: no interface of that name in this network namespace{}",
                    crate::hints::iface_elsewhere(i)
                ))
            })?;
            let s = resolved.state().ok_or_else(|| {
                env(anyhow!(
                    "-i {i}: no interface of that name in this network namespace{}",
                    crate::hints::iface_elsewhere(i)
                ))
            })?;
            let mut c = cfg.clone();
            notes.extend(decide_multi_buffer(i, s.mtu, &mut c)?);
            cfg.socket.multi_buffer |= c.socket.multi_buffer;
            let count = resolved.dev().rx_queue_count().ok().flatten().unwrap_or(1);
            if a.queues > count {
                return Err(env(anyhow!("--queues {} is not accepted: {i} has {count} queue(s)", a.queues)));
            }
            ifaces.push(resolved);
        }
        // Attach to both ports first; on any error below the attachments are dropped (detached).
        // The frags-aware program whenever the kernel has multi-buffer sockets, even for
        // single-buffer ones: a veth refuses a larger MTU while a single-buffer program is
        // attached, and the forwarder re-binds its sockets multi-buffer when the MTU grows.
        let mb = cfg.socket.multi_buffer;
        let frags = mb || fastpath::features::check(fastpath::features::Feature::MultiBuffer).is_ok();
        let mut progs = Vec::new();
        let opts = AttachOpts::mode(a.xdp_mode.mode()).force(a.force);
        for iface in &ifaces {
            let at = XskRedirect::load(XskRedirectOpts::default().with_frags(frags))?.attach(iface, opts)?;
            notes.extend(at.notes.iter().cloned());
            progs.push(at);
        }
        let skb = progs.iter().any(|p| p.mode == XdpMode::Skb);
        // A copy-mode sendto transmits up to the TX budget: as many as one forwarding round moves.
        let mut sock_cfg = cfg.socket.clone();
        sock_cfg.copy_mode = if skb { CopyMode::Copy } else { CopyMode::Auto };
        let mut pairs = Vec::new();
        for q in 0..a.queues {
            let mut p = XskPair::bind(&cfg.umem, &sock_cfg, [&ifaces[0], &ifaces[1]], q)?;
            p.set_tx_limit_bytes(a.tx_limit_bytes);
            for (k, prog) in progs.iter().enumerate() {
                prog.prog.insert(q, p.sockets()[k].as_raw_fd())?;
            }
            pairs.push(p);
        }
        let copy_mode = pairs[0].sockets()[0].copy_mode_name();
        let mut stats_fds = Vec::new();
        for p in &pairs {
            let [s0, s1] = p.sockets();
            stats_fds.push([s0.try_clone_fd().map_err(kernel)?, s1.try_clone_fd().map_err(kernel)?]);
        }
        let shared: Shared = Arc::new(Mutex::new(vec![[DirStats::default(); 2]; a.queues as usize]));
        let done = Arc::new(AtomicBool::new(false));
        let workers = pairs
            .into_iter()
            .enumerate()
            .map(|(q, pair)| {
                let (shared, done, stop) = (shared.clone(), done.clone(), stop.clone());
                let cpu = cpus[q % cpus.len()];
                std::thread::spawn(move || worker(pair, q, cpu, &shared, &done, &stop))
            })
            .collect();
        let ifindexes = ifaces.iter().map(Iface::ifindex).collect();
        Ok((Instance { stats_fds, progs, workers, shared, done, multi_buffer: mb, copy_mode, ifindexes }, notes))
    }

    fn xdp_modes(&self) -> Vec<&'static str> {
        self.progs.iter().map(|p| p.mode.name()).collect()
    }

    /// Detaches, then stops the threads (each lets its TX ring drain, then counts what is left
    /// on its RX rings as discarded). Returns the per-queue counters, the sockets'
    /// XDP_STATISTICS, and the first error a thread ended with.
    fn stop(self) -> (Vec<[DirStats; 2]>, Vec<[XskStats; 2]>, Option<anyhow::Error>) {
        // Detach first: nothing reaches the sockets after this, so what the threads then drain
        // and count as discarded is everything they received.
        drop(self.progs);
        self.done.store(true, Ordering::Relaxed);
        let mut xsk = Vec::new();
        let mut first_err = None;
        for w in self.workers {
            match w.join() {
                Ok((s, e)) => {
                    xsk.push(s);
                    if let Some(e) = e {
                        first_err.get_or_insert(e);
                    }
                }
                Err(_) => {
                    first_err.get_or_insert(anyhow!("a queue pair's thread panicked"));
                }
            }
        }
        let per_queue = self.shared.lock().expect("stats lock").clone();
        (per_queue, xsk, first_err)
    }
}

/// A queue pair's thread: forwards until `done` or `stop`, or until a round fails.
fn worker(mut pair: XskPair, q: usize, cpu: usize, shared: &Shared, done: &AtomicBool, stop: &AtomicBool) -> WorkerEnd {
    let mut err = fastpath::workers::pin_current_thread(cpu).err().map(anyhow::Error::from);
    let mut rounds = 0u32;
    while err.is_none() && !done.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        match pair.step(TX_BUDGET) {
            Ok(n) => {
                rounds = rounds.wrapping_add(1);
                if n == 0 {
                    if let Err(e) = pair.wait(10) {
                        err = Some(e.into());
                    }
                }
                if n == 0 || rounds % 256 == 0 {
                    shared.lock().expect("stats lock")[q] = pair.stats;
                }
            }
            Err(e) => err = Some(e.into()),
        }
    }
    // Let what is on the TX rings finish, then count what stays on the RX rings.
    let until = Instant::now() + Duration::from_millis(200);
    while err.is_none() && Instant::now() < until {
        if pair.step(TX_BUDGET).is_err() {
            break;
        }
    }
    pair.discard_rx();
    shared.lock().expect("stats lock")[q] = pair.stats;
    let xsk = pair.xsk_stats().unwrap_or_default();
    (xsk, err)
}

fn add_stats(acc: &mut [[DirStats; 2]], more: &[[DirStats; 2]]) {
    for (a, m) in acc.iter_mut().zip(more) {
        for d in 0..2 {
            a[d] = sum(a[d], m[d]);
        }
    }
}

fn add_xsk(acc: &mut [std::collections::BTreeMap<&'static str, u64>; 2], more: &[[XskStats; 2]]) {
    for s in more {
        for (k, a) in acc.iter_mut().enumerate() {
            for (name, v) in s[k].fields() {
                *a.entry(name).or_insert(0) += v;
            }
        }
    }
}

/// `--metrics`: per direction and queue, the pair counters; per port and queue, XDP_STATISTICS
/// (of stopped instances, plus the running one's sockets).
fn xsk_families(
    a: &FwdArgs,
    per_queue: &[[DirStats; 2]],
    acc_xsk: &[std::collections::BTreeMap<&'static str, u64>; 2],
    inst: Option<&Instance>,
) -> Vec<crate::metrics::Family> {
    use crate::metrics::Family;
    let l = ["from", "to", "queue"];
    let mut f = Family::counter(
        "fastpath_fwd_xsk_forwarded_packets_total",
        "Packets moved from one socket's RX ring to the other's TX ring.",
        &l,
    );
    let mut fb = Family::counter("fastpath_fwd_xsk_forwarded_bytes_total", "Bytes of those packets.", &l);
    let mut c = Family::counter(
        "fastpath_fwd_xsk_completed_packets_total",
        "Of those, packets the egress side reported sent.",
        &l,
    );
    let mut d = Family::counter(
        "fastpath_fwd_xsk_discarded_packets_total",
        "Packets left on an RX ring when the queue pairs were stopped.",
        &l,
    );
    for (q, s) in per_queue.iter().enumerate() {
        for (k, st) in s.iter().enumerate() {
            let labels = [a.ifaces[k].as_str(), a.ifaces[1 - k].as_str(), &q.to_string()];
            f.add(&labels, st.forwarded as f64);
            fb.add(&labels, st.forwarded_bytes as f64);
            c.add(&labels, st.completed as f64);
            d.add(&labels, st.discarded as f64);
        }
    }
    let mut fams = vec![f, fb, c, d];
    for (i, (name, _)) in XskStats::default().fields().iter().enumerate() {
        let mut x = Family::counter(
            crate::metrics::xsk_metric_name(name),
            format!("XDP_STATISTICS {name} of the port's AF_XDP sockets (include/uapi/linux/if_xdp.h)"),
            &["port"],
        );
        for k in 0..2 {
            let mut v = acc_xsk[k].get(name).copied().unwrap_or(0);
            if let Some(inst) = inst {
                for fds in &inst.stats_fds {
                    v += XskStats::read(std::os::fd::AsFd::as_fd(&fds[k])).map(|s| s.fields()[i].1).unwrap_or(0);
                }
            }
            x.add(&[&a.ifaces[k]], v as f64);
        }
        fams.push(x);
    }
    fams
}

/// How often the ports are re-read without a notification, and the longest wait between two
/// looks at the interval lines and the end.
const RESYNC: Duration = Duration::from_secs(1);
const WAIT_MAX: Duration = Duration::from_millis(100);

/// Runs the AF_XDP forwarder (see the module docs) until `stop` or the duration.
pub fn run(a: &FwdArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    check_args(a)?;
    require_privileges("fwd")?;
    let metrics = crate::metrics::start(a.run.metrics)?;
    enter_ns(&a.netns)?;
    let cpus: Vec<usize> = match &a.cpus {
        Some(l) => l.0.iter().map(|&c| c as usize).collect(),
        None => (0..fastpath::workers::online_cpus()).rev().collect(),
    };
    // Subscribed before the links are read, so no change between the two is missed.
    let mut watch = NetWatch::open().map_err(|e| kernel(anyhow!("opening an rtnetlink socket: {e}")))?;
    let mut fwd = Fwd::start(a, cpus, stop)?;
    let start = Instant::now();
    fwd.forward(&mut watch, metrics.as_ref(), start)?;
    fwd.finish(metrics.as_ref(), start)
}

/// Prints the `ready` line (JSON or text) of a started forwarder.
fn print_ready(a: &FwdArgs, inst: &Instance) {
    let xdp_modes = inst.xdp_modes();
    if a.run.json {
        let ports: Vec<_> = a
            .ifaces
            .iter()
            .zip(&inst.ifindexes)
            .zip(&xdp_modes)
            .map(|((i, x), m)| json!({"iface": i, "ifindex": x, "xdp_mode": m}))
            .collect();
        println!(
            "{}",
            json!({"type": "ready", "bench": "fwd", "engine": "xsk", "mode": "l2", "ports": ports, "queues": a.queues,
                   "copy_mode": inst.copy_mode, "multi_buffer": inst.multi_buffer, "tx_limit_bytes": a.tx_limit_bytes})
        );
    } else {
        println!(
            "fwd xsk l2: {} <-> {}, {} queue pair(s), {}, xdp {}; Ctrl-C stops",
            a.ifaces[0],
            a.ifaces[1],
            a.queues,
            inst.copy_mode,
            xdp_modes.join("/")
        );
    }
}

/// The forwarder across instances: the running one (none while a port is missing) and the
/// counters of those already stopped.
struct Fwd<'a> {
    a: &'a FwdArgs,
    cpus: Vec<usize>,
    stop: Arc<AtomicBool>,
    inst: Option<Instance>,
    /// The first instance's copy mode, for the summary.
    copy_mode: &'static str,
    /// Counters of instances already stopped (a port was deleted, or sockets re-bound).
    acc: Vec<[DirStats; 2]>,
    acc_xsk: [std::collections::BTreeMap<&'static str, u64>; 2],
    link_events: u64,
    /// Each port's state at the last look (None: no such interface).
    states: Vec<Option<LinkState>>,
}

impl<'a> Fwd<'a> {
    /// Starts the first instance, prints its notes, reads the ports' states and prints `ready`.
    fn start(a: &'a FwdArgs, cpus: Vec<usize>, stop: Arc<AtomicBool>) -> CliResult<Self> {
        let (inst, notes) = Instance::start(a, &cpus, &stop)?;
        for note in &notes {
            eprintln!("fastpath fwd: {note}");
        }
        let states = a.ifaces.iter().map(|i| link_state(i)).collect();
        print_ready(a, &inst);
        let nq = a.queues as usize;
        Ok(Self {
            a,
            cpus,
            stop,
            copy_mode: inst.copy_mode,
            inst: Some(inst),
            acc: vec![[DirStats::default(); 2]; nq],
            acc_xsk: Default::default(),
            link_events: 0,
            states,
        })
    }

    /// Per queue, the counters of the stopped instances plus the running one's.
    fn totals(&self) -> Vec<[DirStats; 2]> {
        let mut t = self.acc.to_vec();
        if let Some(i) = &self.inst {
            add_stats(&mut t, &i.shared.lock().expect("stats lock"));
        }
        t
    }

    /// Forwards until `stop` or the duration: follows the links, publishes metrics, prints the
    /// interval lines.
    fn forward(&mut self, watch: &mut NetWatch, metrics: Option<&MetricsServer>, start: Instant) -> CliResult<()> {
        let a = self.a;
        let end = start + Duration::from_secs_f64(a.run.duration);
        let mut next_line = start + Duration::from_secs_f64(a.run.interval);
        let mut prev = self.totals();
        let mut prev_t = start;
        let mut last_resync = start;
        while !self.stop.load(Ordering::Relaxed) && Instant::now() < end {
            let now = Instant::now();
            let wait = RESYNC
                .min(next_line.saturating_duration_since(now))
                .min(end.saturating_duration_since(now))
                .min(WAIT_MAX);
            let evs = watch.wait(wait).map_err(|e| kernel(anyhow!("reading rtnetlink notifications: {e}")))?;
            if last_resync.elapsed() >= RESYNC || self.worker_died() || self.concern_us(&evs) {
                last_resync = Instant::now();
                self.follow_links(start.elapsed().as_secs_f64())?;
            }
            if let Some(m) = metrics.filter(|m| m.due()) {
                m.publish(&xsk_families(a, &self.totals(), &self.acc_xsk, self.inst.as_ref()));
            }
            if Instant::now() < next_line {
                continue;
            }
            next_line += Duration::from_secs_f64(a.run.interval);
            let now = self.totals();
            let secs = prev_t.elapsed().as_secs_f64().max(1e-9);
            prev_t = Instant::now();
            self.interval_line(&prev, &now, secs, start.elapsed().as_secs_f64());
            prev = now;
        }
        Ok(())
    }

    /// True if a queue pair's thread of the running instance has ended.
    fn worker_died(&self) -> bool {
        self.inst.as_ref().is_some_and(|i| i.workers.iter().any(|w| w.is_finished()))
    }

    /// True if a notification is about one of our ports (by name, or by the running
    /// instance's ifindexes), or notifications were lost.
    fn concern_us(&self, evs: &[NetEvent]) -> bool {
        let ours = |name: &str, ifindex: u32| {
            self.a.ifaces.iter().any(|i| i == name)
                || self.inst.as_ref().is_some_and(|i| i.ifindexes.contains(&ifindex))
        };
        evs.iter().any(|e| match e {
            NetEvent::Link(l) => ours(&l.name, l.ifindex),
            NetEvent::LinkDeleted { ifindex, name } => ours(name, *ifindex),
            NetEvent::Overrun => true,
            _ => false,
        })
    }

    /// Re-reads the ports: reports what changed, stops the instance when a port is gone, its
    /// sockets must be bound again or a thread ended, and starts one when both ports are there.
    /// Errors: a thread failed with both ports in place.
    fn follow_links(&mut self, t: f64) -> CliResult<()> {
        let now_states: Vec<Option<LinkState>> = self.a.ifaces.iter().map(|i| link_state(i)).collect();
        let restart = self.link_changes(t, &now_states);
        self.states = now_states;
        let missing = self.states.iter().any(|s| s.is_none());
        let died = self.worker_died();
        if self.inst.is_some() && (missing || restart || died) {
            let (q, x, err) = self.inst.take().expect("running").stop();
            add_stats(&mut self.acc, &q);
            add_xsk(&mut self.acc_xsk, &x);
            if let (Some(e), false) = (err, missing || restart) {
                // A thread failed with both ports in place: not a link change.
                return Err(crate::error::runtime(e));
            }
        }
        if self.inst.is_none() && !missing && !self.stop.load(Ordering::Relaxed) {
            self.reattach(t);
        }
        Ok(())
    }

    /// Prints and counts each port's change since the last look (deleted, recreated, up or
    /// down, MTU); true if the sockets must be bound again.
    fn link_changes(&mut self, t: f64, now_states: &[Option<LinkState>]) -> bool {
        let a = self.a;
        let mut restart = false;
        for (k, name) in a.ifaces.iter().enumerate() {
            match (self.states[k], now_states[k]) {
                (Some(_), None) => {
                    self.link_events += 1;
                    event_line(
                        a.run.json,
                        t,
                        name,
                        "deleted",
                        "paused: the queue pairs are stopped until it is back".into(),
                    );
                }
                (None, Some(_)) => restart = true,
                (Some(w), Some(s)) if w.ifindex != s.ifindex => {
                    // Deleted and recreated between two looks.
                    self.link_events += 1;
                    event_line(a.run.json, t, name, "deleted", "and recreated".into());
                    restart = true;
                }
                (Some(w), Some(s)) => {
                    if w.up != s.up {
                        self.link_events += 1;
                        let what = if s.up {
                            "forwarding resumes"
                        } else {
                            "paused: frames for it wait on its TX ring (sendto answers ENETDOWN)"
                        };
                        event_line(a.run.json, t, name, if s.up { "up" } else { "down" }, what.into());
                    }
                    if w.mtu != s.mtu {
                        self.link_events += 1;
                        restart |= self.mtu_change(t, name, w.mtu, s.mtu);
                    }
                }
                (None, None) => {}
            }
        }
        restart
    }

    /// Prints a port's MTU change; true if it needs multi-buffer sockets and the running ones
    /// are not.
    fn mtu_change(&self, t: f64, name: &str, was: u32, mtu: u32) -> bool {
        let mut c = XskConfig::default();
        c.umem.frame_size = FRAME_SIZE;
        let needs = decide_multi_buffer(name, mtu, &mut c).map(|_| c.socket.multi_buffer);
        let running_mb = self.inst.as_ref().map(|i| i.multi_buffer);
        let mut restart = false;
        let detail = match needs {
            Ok(true) if running_mb == Some(false) => {
                restart = true;
                "; frames no longer fit one UMEM frame: the sockets are bound again multi-buffer".to_string()
            }
            Ok(_) => String::new(),
            Err(e) => format!("; refused: {}", e.err),
        };
        event_line(self.a.run.json, t, name, "mtu", format!("{was} -> {mtu} bytes{detail}"));
        restart
    }

    /// Starts a new instance now that both ports exist, and says so; a failure is said once
    /// per attempt (tried again at the next notification or resync).
    fn reattach(&mut self, t: f64) {
        let a = self.a;
        match Instance::start(a, &self.cpus, &self.stop) {
            Ok((i, _notes)) => {
                let detail = format!(
                    "re-attached as ifindex {} and {} ({}, xdp {}{})",
                    i.ifindexes[0],
                    i.ifindexes[1],
                    i.copy_mode,
                    i.xdp_modes().join("/"),
                    if i.multi_buffer { ", multi-buffer" } else { "" }
                );
                self.link_events += 1;
                event_line(a.run.json, t, &a.ifaces.join(","), "recreated", detail);
                self.inst = Some(i);
            }
            Err(e) => event_line(a.run.json, t, &a.ifaces.join(","), "reattach-failed", format!("{}", e.err)),
        }
    }

    /// Prints one interval line: each direction's forwarded packets per second since `prev`.
    fn interval_line(&self, prev: &[[DirStats; 2]], now: &[[DirStats; 2]], secs: f64, t: f64) {
        let a = self.a;
        let dir = |d: usize, v: &[[DirStats; 2]]| v.iter().map(|s| s[d].forwarded).sum::<u64>();
        let pps: Vec<f64> = (0..2).map(|d| dir(d, now).saturating_sub(dir(d, prev)) as f64 / secs).collect();
        let paused = self.inst.is_none();
        if !a.run.interval_lines {
            return;
        }
        if a.run.json {
            println!(
                "{}",
                json!({"type": "interval", "t_s": t, "paused": paused, "directions": [
                    {"from": a.ifaces[0], "to": a.ifaces[1], "forwarded_pps": pps[0]},
                    {"from": a.ifaces[1], "to": a.ifaces[0], "forwarded_pps": pps[1]}]})
            );
        } else {
            println!(
                "{t:7.2} s  {} -> {} {:.3} Mpps  |  {} -> {} {:.3} Mpps{}",
                a.ifaces[0],
                a.ifaces[1],
                pps[0] / 1e6,
                a.ifaces[1],
                a.ifaces[0],
                pps[1] / 1e6,
                if paused { "  (paused)" } else { "" }
            );
        }
    }

    /// Stops the running instance, publishes the last metrics and prints the summary.
    /// Errors: a thread of the last instance failed.
    fn finish(mut self, metrics: Option<&MetricsServer>, start: Instant) -> CliResult<()> {
        if let Some(i) = self.inst.take() {
            let (q, x, err) = i.stop();
            add_stats(&mut self.acc, &q);
            add_xsk(&mut self.acc_xsk, &x);
            if let Some(e) = err {
                return Err(crate::error::runtime(e));
            }
        }
        if let Some(m) = metrics {
            m.publish(&xsk_families(self.a, &self.acc, &self.acc_xsk, None));
        }
        self.print_summary(start.elapsed().as_secs_f64());
        Ok(())
    }

    /// Prints the summary (JSON or text): totals per direction, XDP_STATISTICS per port, and
    /// (JSON) per queue.
    fn print_summary(&self, secs: f64) {
        let a = self.a;
        let per_queue = &self.acc;
        let total: Vec<DirStats> =
            (0..2).map(|d| per_queue.iter().fold(DirStats::default(), |acc, s| sum(acc, s[d]))).collect();
        let drops = |k: usize| json!(self.acc_xsk[k]);
        let link_events = self.link_events;
        if a.run.json {
            println!(
                "{}",
                json!({"type": "summary", "bench": "fwd", "engine": "xsk", "mode": "l2", "duration_s": secs,
                       "queues": a.queues, "copy_mode": self.copy_mode, "link_events": link_events,
                       "directions": [
                           {"from": a.ifaces[0], "to": a.ifaces[1], "totals": total[0]},
                           {"from": a.ifaces[1], "to": a.ifaces[0], "totals": total[1]}],
                       "xsk": [{"iface": a.ifaces[0], "statistics": drops(0)}, {"iface": a.ifaces[1], "statistics": drops(1)}],
                       "per_queue": per_queue})
            );
        } else {
            println!("fwd xsk l2 ran {secs:.1} s ({link_events} link events):");
            for (d, t) in total.iter().enumerate() {
                println!(
                    "  {} -> {}: forwarded {} ({} bytes), completed {}, discarded when stopped {}, TX ring full {} times, held by the byte limit {} times",
                    a.ifaces[d],
                    a.ifaces[1 - d],
                    t.forwarded,
                    t.forwarded_bytes,
                    t.completed,
                    t.discarded,
                    t.tx_full,
                    t.limited
                );
                println!("  {} XDP_STATISTICS: {}", a.ifaces[d], drops(d));
            }
        }
    }
}
