//! `fastpath bench MODE` and `fastpath gen`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::anyhow;
use fastpath::bpf::XdpGen;
use fastpath::io::afxdp::TxTimestamps;
use fastpath::io::Port;
use fastpath::netdev::{Iface, NoSuchInterface};
use fastpath::packet::{build_udp_frame, UdpFrameSpec};
use fastpath::xsk::XskError;
use fastpath_tools::bench::{self, LoopOpts, SendLimits, TxPlan, UdpChecksum, Wait};
use fastpath_tools::payload::SeqTracker;
use fastpath_tools::stats::{Counters, Ctr};
use serde_json::{json, Value};

use crate::args::{BenchArgs, BenchMode, Engine, FrameArgs, GenArgs, XskArgs};
use crate::common::{check_run, compile_rules, enter_ns, link_lost_error};
use crate::error::{kernel, require_privileges, runtime, usage, CliResult};
use crate::report::{announce, print_summary, Monitor};
use crate::session::{Role, RxChoice, Session};

/// Checks the frame options together (before anything is set up): both addresses of one IP
/// version, a frame length that holds the IPv6 header.
pub fn check_frame(f: &FrameArgs) -> CliResult<()> {
    if f.src_ip.is_ipv4() != f.dst_ip.is_ipv4() {
        return Err(usage(anyhow!(
            "--src-ip {} with --dst-ip {} is not accepted: use two IPv4 or two IPv6 addresses",
            f.src_ip,
            f.dst_ip
        )));
    }
    if let (Some(len), true) = (f.frame_len, f.src_ip.is_ipv6()) {
        if (len as usize) < fastpath::packet::MIN_FRAME_LEN6 {
            return Err(usage(anyhow!(
                "--frame-len {len} is not accepted with IPv6 addresses: use {}..=9014",
                fastpath::packet::MIN_FRAME_LEN6
            )));
        }
    }
    Ok(())
}

/// The frame length: --frame-len, or 64 bytes (IPv4) / 84 bytes (IPv6).
pub fn frame_len(f: &FrameArgs) -> usize {
    f.frame_len.map(usize::from).unwrap_or(if f.src_ip.is_ipv6() { 84 } else { 64 })
}

/// `--flows N --seed S` as the library's [`Flows`](fastpath::packet::Flows) (seed 1 by default).
pub fn flows(f: &FrameArgs) -> Option<fastpath::packet::Flows> {
    f.flows.and_then(|n| fastpath::packet::Flows::new(n, f.seed.unwrap_or(1)))
}

pub fn frame_spec(f: &FrameArgs, iface: &Iface) -> CliResult<UdpFrameSpec> {
    check_frame(f)?;
    let dev = iface.dev();
    let src_mac = match f.src_mac {
        Some(m) => m,
        None => dev
            .mac()
            .map_err(|e| XskError::from(NoSuchInterface { iface: iface.name().to_string(), errno: e.errno }))?,
    };
    // A frame longer than the MTU allows is dropped by the receiving device, not sent.
    if let Ok(mtu) = dev.mtu() {
        let len = frame_len(f);
        if len > mtu as usize + 14 {
            return Err(usage(anyhow!(
                "--frame-len {len} is not accepted on {iface} (MTU {mtu}): use at most {} (the MTU + 14), or raise the MTU",
                mtu + 14
            )));
        }
    }
    Ok(UdpFrameSpec {
        src_mac,
        dst_mac: f.dst_mac,
        src_ip: f.src_ip,
        dst_ip: f.dst_ip,
        src_port: f.src_port,
        dst_port: f.dst_port,
        frame_len: frame_len(f),
    })
}

/// How the AF_XDP receive loops (rxdrop, l2fwd) wait when their RX ring is empty.
///
/// Spinning keeps a CPU busy for the lowest latency, and costs nothing while another CPU takes
/// the receive softirq. But the softirq runs where the frames come from: a veth's receive NAPI
/// in the sender's softirq, on the sending CPU (veth_xmit / veth_xdp_xmit), and a NIC's on the
/// CPUs its IRQs land on. Spinning workers pinned to every online CPU leave it none: on 2 CPUs
/// `bench rxdrop --queues 2` spinning received 0.53 Mpps where poll() received 4.78 (issue 22;
/// docs/benchmarks.md, "The AF_XDP engine"). So there the default is poll(), and `--spin` keeps spinning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitChoice {
    /// `--poll`.
    Poll,
    /// The default, because the workers cover every online CPU (see [`covers_every_cpu`]).
    AutoPoll,
    /// `--spin`, `--busy-poll` (the socket's busy polling drives the NAPI from the worker), or
    /// the default with a CPU left over (one queue, or fewer workers' CPUs than online).
    Spin,
}

impl WaitChoice {
    /// The run loop's wait: poll() for up to 100 ms, or spin.
    pub fn wait(self) -> Wait {
        match self {
            WaitChoice::Poll | WaitChoice::AutoPoll => Wait::Poll(100),
            WaitChoice::Spin => Wait::Spin,
        }
    }

    /// "poll" or "spin", as the JSON's `path.wait` records it.
    pub fn name(self) -> &'static str {
        match self.wait() {
            Wait::Poll(_) => "poll",
            Wait::Spin => "spin",
        }
    }
}

/// Whether the workers' CPUs (one per queue, None: not pinned) are more than one worker pinned
/// to every one of `online` CPUs. A single queue never is (one worker; the default leaves it
/// unpinned), so the single-queue default stays spinning.
pub fn covers_every_cpu(cpus: &[Option<usize>], online: usize) -> bool {
    let pinned: std::collections::BTreeSet<usize> = cpus.iter().flatten().copied().collect();
    cpus.len() > 1 && pinned.len() >= online
}

/// The wait of the receive loops for `x` with workers on `cpus` and `online` CPUs: `--poll`,
/// `--spin` / `--busy-poll`, else poll() where the workers cover every CPU and spinning
/// elsewhere (see [`WaitChoice`]).
pub fn wait_choice(x: &XskArgs, cpus: &[Option<usize>], online: usize) -> WaitChoice {
    if x.poll {
        WaitChoice::Poll
    } else if x.spin || x.busy_poll {
        WaitChoice::Spin
    } else if covers_every_cpu(cpus, online) {
        WaitChoice::AutoPoll
    } else {
        WaitChoice::Spin
    }
}

/// The CPUs as a list, "0,1".
fn cpu_list(cpus: &[Option<usize>]) -> String {
    let pinned: std::collections::BTreeSet<usize> = cpus.iter().flatten().copied().collect();
    pinned.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
}

/// The one stderr line of [`WaitChoice::AutoPoll`]: what was chosen, why, how to override.
fn auto_poll_line(cpus: &[Option<usize>]) -> String {
    format!(
        "fastpath bench: {} workers on every CPU ({}) would starve the receive softirq: they wait in poll() (--spin to spin anyway, or --cpus with fewer CPUs)",
        cpus.len(),
        cpu_list(cpus)
    )
}

/// With `--spin` on every online CPU: a note that the kernel's receive softirq has no CPU left
/// (see [`WaitChoice`]; not with `--busy-poll`, whose workers run the NAPI themselves).
fn spin_note(choice: WaitChoice, x: &XskArgs, cpus: &[Option<usize>], online: usize) -> Option<String> {
    (choice == WaitChoice::Spin && !x.busy_poll && covers_every_cpu(cpus, online)).then(|| {
        format!(
            "{} spinning workers on every CPU ({}) leave none for the kernel's receive softirq; \
             leave out --spin to wait in poll(), or give --cpus fewer CPUs than there are online",
            cpus.len(),
            cpu_list(cpus)
        )
    })
}

/// Whether `mode` runs a receive loop that waits (rxdrop, l2fwd; txonly's loop never waits in
/// poll(), xdpdrop has no worker).
fn receives(mode: BenchMode) -> bool {
    matches!(mode, BenchMode::Rxdrop | BenchMode::L2fwd)
}

fn loop_opts(x: &XskArgs, choice: WaitChoice) -> LoopOpts {
    LoopOpts { batch_size: x.batch_size, wait: choice.wait() }
}

fn columns(mode: BenchMode) -> &'static [Ctr] {
    match mode {
        BenchMode::Rxdrop => &[Ctr::RxPackets],
        BenchMode::Txonly => &[Ctr::TxPackets, Ctr::TxCompleted],
        BenchMode::L2fwd => &[Ctr::RxPackets, Ctr::TxPackets],
        BenchMode::Xdpdrop | BenchMode::Ddos | BenchMode::RedirectCpu | BenchMode::Pingpong => &[Ctr::DropPackets],
    }
}

fn mode_name(m: BenchMode) -> &'static str {
    match m {
        BenchMode::Rxdrop => "rxdrop",
        BenchMode::Txonly => "txonly",
        BenchMode::L2fwd => "l2fwd",
        BenchMode::Xdpdrop => "xdpdrop",
        BenchMode::Ddos => "ddos",
        BenchMode::RedirectCpu => "redirect-cpu",
        BenchMode::Pingpong => "pingpong",
    }
}

fn tracker_json(t: &SeqTracker) -> Value {
    json!({
        "frames": t.frames, "unique": t.unique(), "duplicates": t.duplicates, "corrupt": t.corrupt,
        "foreign": t.foreign, "out_of_window": t.out_of_window,
        "streams": t.per_stream().iter().map(|(s, n, max)| json!({"stream": s, "unique": n, "max_seq": max, "missing": t.missing(*s, *max)})).collect::<Vec<_>>(),
    })
}

/// `fastpath bench MODE`.
/// The checks every bench mode makes first (before anything is set up): the run and frame
/// options. Errors: exit 2 (usage).
pub fn check_common(a: &BenchArgs) -> CliResult<()> {
    check_run(&a.run)?;
    // Every mode, including those dispatched before `bench` (ddos, redirect-cpu, pingpong):
    // a flag a mode does not use is refused, never ignored.
    if a.tx_meta.any() && a.mode != BenchMode::Txonly {
        return Err(usage(anyhow!(
            "{} is for txonly (AF_XDP TX metadata), not {}",
            a.tx_meta.first_name(),
            mode_name(a.mode)
        )));
    }
    if a.rx_meta && a.mode != BenchMode::Rxdrop {
        return Err(usage(anyhow!("--rx-meta is for rxdrop, not {}", mode_name(a.mode))));
    }
    check_frame(&a.frame)
}

/// `bench ddos`'s checks before it runs: [`check_common`], and `--metrics` refused (it runs one
/// defence after another on test beds of its own). Errors: exit 2 (usage).
pub fn check_ddos(a: &BenchArgs) -> CliResult<()> {
    check_common(a)?;
    if a.run.metrics.is_some() {
        return Err(usage(anyhow!(
            "--metrics is not accepted with bench ddos: it runs one defence after another on test beds of its own (use it with bench rxdrop|txonly|l2fwd|xdpdrop|redirect-cpu, gen, fwd, filter load|stats)"
        )));
    }
    Ok(())
}

/// `fastpath bench rxdrop|txonly|l2fwd|xdpdrop` (ddos and redirect-cpu are dispatched to their
/// own modules by main after [`check_ddos`] / [`check_common`]).
///
/// # Errors
///
/// Usage (exit 2) for rejected options, then privileges, set-up (kernel, interface), a lost
/// link, or the first worker's port error.
pub fn bench(a: &BenchArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    check_common(a)?;
    if a.xsk.iface.is_empty() {
        return Err(usage(anyhow!("bench {} needs -i/--iface", mode_name(a.mode))));
    }
    if a.xsk_handoff.is_some() {
        check_handoff(a)?;
    }
    check_tx_meta(a)?;
    if a.path != crate::args::PathArg::Afxdp {
        return port_bench(a, stop);
    }
    let role = afxdp_role(a)?;
    if a.xsk_handoff.is_none() {
        require_privileges("bench")?;
    }
    // Listening in the namespace the command was started in (before --netns is entered).
    let metrics = crate::metrics::start(a.run.metrics)?;
    enter_ns(&a.xsk.netns)?;
    let (sess, template, cpus, choice) = open_afxdp(a, role)?;
    run_afxdp(a, stop, sess, metrics.as_ref(), template, (&cpus, choice))
}

/// `--xsk-handoff`: a thread that checks every 200 ms that program `id` is still the one on
/// `ifindex` (the serving process detaches it when it ends); if not, it sets `stop` and
/// returns true. Ends when `stop` is set.
fn watch_feeder(id: u32, ifindex: u32, stop: Arc<AtomicBool>) -> (u32, std::thread::JoinHandle<bool>) {
    let t = std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(200));
            match fastpath::bpf::query_xdp(ifindex) {
                Ok(Some(p)) if p.id == id => {}
                Err(_) => {} // the link watch judges a vanished interface
                _ => {
                    stop.store(true, Ordering::Relaxed);
                    return true;
                }
            }
        }
        false
    });
    (id, t)
}

/// `--xsk-handoff` refused for want of CAP_NET_RAW, or the UMEM refused for RLIMIT_MEMLOCK (an
/// unprivileged user: the kernel charges the UMEM's pages to the user at XDP_UMEM_REG,
/// net/xdp/xdp_umem.c): what to change, in the same line.
fn handoff_hint(e: crate::error::CliError, x: &crate::args::XskArgs) -> crate::error::CliError {
    let msg = format!("{:#}", e.err);
    if msg.contains("socket(AF_XDP") && msg.contains("EPERM") {
        return crate::error::CliError {
            code: e.code,
            err: anyhow!(
                "{msg}: creating an AF_XDP socket needs CAP_NET_RAW (the only capability --xsk-handoff needs)"
            ),
        };
    }
    if !(msg.contains("XDP_UMEM_REG") && msg.contains("ENOBUFS")) {
        return e;
    }
    let mib = u64::from(x.frame_count) * u64::from(x.frame_size) / (1 << 20);
    crate::error::CliError {
        code: e.code,
        err: anyhow!(
            "{msg}: the UMEM ({} frames of {} bytes, {mib} MiB) is more than RLIMIT_MEMLOCK lets this user lock without CAP_IPC_LOCK (`ulimit -l`); use a smaller --frame-count or raise the limit",
            x.frame_count,
            x.frame_size
        ),
    }
}

/// `--tx-csum`, `--tx-timestamp`, `--tx-launch-time`: txonly (gen --engine xsk) on AF_XDP only.
/// l2fwd forwards frames with the checksum they came with, so it has nothing to offload.
fn check_tx_meta(a: &BenchArgs) -> CliResult<()> {
    if !a.tx_meta.any() {
        return Ok(());
    }
    let opt = a.tx_meta.first_name();
    if a.mode != BenchMode::Txonly {
        return Err(usage(anyhow!(
            "{opt} is for txonly (and gen --engine xsk), not {}: AF_XDP TX metadata goes with the frames fastpath builds",
            mode_name(a.mode)
        )));
    }
    if a.path != crate::args::PathArg::Afxdp {
        return Err(usage(anyhow!("{opt} is AF_XDP TX metadata: leave out --path")));
    }
    Ok(())
}

/// The TX metadata plan of `--tx-csum`, `--tx-timestamp`, `--tx-launch-time` for frames like
/// `template`; None without them.
fn tx_meta_plan(t: &crate::args::TxMetaArgs, template: &[u8]) -> Option<crate::session::TxMetaPlan> {
    if !t.any() {
        return None;
    }
    let csum = t.tx_csum.map(|_| {
        let (start, offset) = fastpath::packet::udp_csum_request(template);
        fastpath::xsk::TxCsum { start, offset }
    });
    Some(crate::session::TxMetaPlan {
        req: fastpath::xsk::TxMeta { csum, timestamp: t.tx_timestamp, launch_time_ns: None },
        sw_csum: t.tx_csum == Some(crate::args::TxCsumArg::Sw),
        launch_delay_ns: t.tx_launch_time,
    })
}

/// `--xsk-handoff`: rxdrop only, on AF_XDP, without a program of its own (no --rules).
fn check_handoff(a: &BenchArgs) -> CliResult<()> {
    if a.mode != BenchMode::Rxdrop {
        return Err(usage(anyhow!(
            "--xsk-handoff is for rxdrop (a socket receiving from a program another process attached), not {}",
            mode_name(a.mode)
        )));
    }
    if a.path != crate::args::PathArg::Afxdp {
        return Err(usage(anyhow!("--xsk-handoff is for AF_XDP sockets: leave out --path")));
    }
    if a.rules.is_some() {
        return Err(usage(anyhow!(
            "--rules with --xsk-handoff is not accepted: the rules are those of the `filter load` serving the XSKMAP"
        )));
    }
    Ok(())
}

/// The session role of an AF_XDP bench mode, with the options checked against it.
fn afxdp_role(a: &BenchArgs) -> CliResult<Role> {
    let role = match a.mode {
        BenchMode::Rxdrop | BenchMode::L2fwd => Role::Rx,
        BenchMode::Txonly => Role::Tx,
        BenchMode::Xdpdrop | BenchMode::Ddos | BenchMode::RedirectCpu | BenchMode::Pingpong => Role::Drop,
    };
    crate::session::validate(&a.xsk, role)?;
    if a.rules.is_some() && role != Role::Rx {
        return Err(usage(anyhow!("--rules is for rxdrop and l2fwd (the AF_XDP receive paths)")));
    }
    if a.rx_meta {
        if a.mode != BenchMode::Rxdrop {
            return Err(usage(anyhow!("--rx-meta is for rxdrop, not {}", mode_name(a.mode))));
        }
        if a.rules.is_some() || a.xsk_handoff.is_some() {
            return Err(usage(anyhow!(
                "--rx-meta brings its own program (xsk_redirect_meta): it does not go with --rules or --xsk-handoff"
            )));
        }
    }
    Ok(role)
}

/// An opened AF_XDP bench: the session, the txonly frame, a CPU per worker, how they wait.
type Opened = (Session, Option<Vec<u8>>, Vec<Option<usize>>, WaitChoice);

/// Compiles --rules, builds the txonly frame and opens the session (in the target namespace):
/// the session, the frame (txonly), the worker CPUs and their wait (rxdrop/l2fwd: recorded as
/// `path.wait`; the default's poll() said in one line on stderr).
fn open_afxdp(a: &BenchArgs, role: Role) -> CliResult<Opened> {
    // Rules are read, validated and compiled before anything touches the interface.
    let compiled = match &a.rules {
        Some(p) => Some(compile_rules(&crate::args::RulesArgs { file: Some(p.clone()), rules: vec![] })?.1),
        None => None,
    };
    // -i resolved once: the frame's MAC and MTU, and the session below, use it.
    let iface = Iface::resolve(&a.xsk.iface)?;
    let template = if a.mode == BenchMode::Txonly {
        let spec = frame_spec(&a.frame, &iface)?;
        let mut f = vec![0u8; spec.frame_len];
        build_udp_frame(&spec, &mut f);
        Some(f)
    } else {
        None
    };
    let cpus = crate::session::worker_cpus(&a.xsk);
    let mut sess = match &a.xsk_handoff {
        Some(path) => {
            let map = fastpath::uds::request_xsk_map(path, &a.xsk.iface, fastpath::uds::TRUSTED_SERVER_UIDS).map_err(
                |e| match e {
                    // The library says nothing listens there; the command that serves it is ours.
                    fastpath::uds::HandoffError::NoServer { ref path, .. } => crate::error::env(anyhow::anyhow!(
                        "{e}: start `fastpath filter load ... --xsk-handoff {}` first",
                        path.display()
                    )),
                    other => crate::error::env(other),
                },
            )?;
            Session::open_handoff(iface, &a.xsk, map).map_err(|e| handoff_hint(e, &a.xsk))?
        }
        None => {
            let choice = match (&compiled, a.rx_meta) {
                (_, true) => RxChoice::RxMeta,
                (Some(c), false) => RxChoice::Rules(c),
                (None, false) => RxChoice::Redirect,
            };
            match template.as_deref().and_then(|t| tx_meta_plan(&a.tx_meta, t)) {
                Some(plan) => Session::open_tx_meta(iface, &a.xsk, &plan)?,
                None => Session::open_on(iface, &a.xsk, role, choice)?,
            }
        }
    };
    let online = fastpath::workers::online_cpus();
    let choice = wait_choice(&a.xsk, &cpus, online);
    if receives(a.mode) {
        sess.info.wait = Some(choice.name());
        if choice == WaitChoice::AutoPoll {
            eprintln!("{}", auto_poll_line(&cpus));
        }
        if let Some(n) = spin_note(choice, &a.xsk, &cpus, online) {
            sess.info.notes.push(n);
        }
    }
    Ok((sess, template, cpus, choice))
}

/// Announces the session, runs a worker per queue under the monitor, and reports.
fn run_afxdp(
    a: &BenchArgs,
    stop: Arc<AtomicBool>,
    mut sess: Session,
    metrics: Option<&crate::metrics::MetricsServer>,
    template: Option<Vec<u8>>,
    (cpus, choice): (&[Option<usize>], WaitChoice),
) -> CliResult<()> {
    // Whether the interface is up is judged now, before "ready": a caller may set it down as
    // soon as it reads that line, and that must count as a loss.
    let dev = Some(sess.iface.dev().clone());
    let link_watch = dev.clone().map(fastpath::netdev::LinkWatch::new);
    announce(mode_name(a.mode), &serde_json::to_value(&sess.info).unwrap_or(Value::Null), &sess.info.notes, a.run.json);
    let ports = std::mem::take(&mut sess.ports);
    let nq = ports.len().max(1);
    let counters: Vec<Arc<Counters>> = (0..nq).map(|_| Arc::new(Counters::default())).collect();
    let done = Arc::new(AtomicBool::new(false));
    let tracker = Arc::new(Mutex::new(None::<SeqTracker>));
    let rx_meta = Arc::new(Mutex::new(None::<bench::RxMetaTally>));
    let tx_ts = Arc::new(Mutex::new(None::<TxTimestamps>));
    let labels: Vec<String> = sess.info.queues.iter().map(|q| format!("{}:q{q}", a.xsk.iface)).collect();
    let prefix = if nq > 1 { format!("{}:all", a.xsk.iface) } else { labels[0].clone() };
    let mon = Monitor {
        metrics,
        xsk_fds: sess.stats_fds.iter().collect(),
        drop: sess.drop_prog(),
        ethtool_dev: dev.clone(),
        watch_link: link_watch,
        queue_labels: if nq > 1 { labels } else { Vec::new() },
        ..Monitor::for_run(prefix, columns(a.mode), counters.clone(), &a.run)
    };
    // Baselines first, then the workers: nothing they move may fall before them.
    let watch = mon.start();
    let workers = if a.run.duration > 0.0 {
        let shared = QueueShared {
            counters,
            stop: stop.clone(),
            done: done.clone(),
            tracker: tracker.clone(),
            rx_meta: rx_meta.clone(),
            tx_ts: tx_ts.clone(),
        };
        spawn_queues(a, ports, &shared, template, (cpus, choice))
    } else {
        Vec::new()
    };
    let never = AtomicBool::new(false);
    let feeder = sess.handoff_prog().map(|id| watch_feeder(id, sess.iface.ifindex(), stop.clone()));
    mon.watch(&watch, &stop, if workers.is_empty() { &never } else { &done });
    stop.store(true, Ordering::Relaxed);
    let mut lost = mon.link_lost();
    if let Some((id, t)) = feeder {
        if t.join().unwrap_or(false) && lost.is_none() {
            let _ = fastpath_tools::threads::join_all(workers);
            return Err(crate::error::env(anyhow!(
                "the XDP program (id {id}) that fed the XSKMAP handed over at {} left {}: the serving `fastpath filter load` ended or was replaced, nothing more can arrive",
                a.xsk_handoff.as_deref().unwrap_or(std::path::Path::new("?")).display(),
                a.xsk.iface
            )));
        }
    }
    let results = fastpath_tools::threads::join_all(workers).map_err(|_| runtime(anyhow!("the run loop panicked")))?;
    let first_err = results.into_iter().find_map(Result::err);
    if first_err.is_some() && lost.is_none() {
        // The kernel's error (ENXIO, ENETDOWN) may come before the monitor's check.
        lost = dev.as_ref().and_then(|d| match d.link_event() {
            Some(fastpath::netdev::LinkEvent::Down) => Some(d.down_or_deleted()),
            e => e,
        });
    }
    if let Some(ev) = lost {
        drop(sess); // detaches the XDP program (if the interface still exists)
        return Err(link_lost_error(&a.xsk.iface, ev));
    }
    if let Some(e) = first_err {
        return Err(port_error(e));
    }
    // After the join: the workers' last completions are in the totals.
    let summary = mon.finish(watch);
    let mut extra = serde_json::Map::new();
    if let Some(t) = tracker.lock().expect("tracker lock").as_ref() {
        extra.insert("verify".into(), tracker_json(t));
    }
    if a.rx_meta {
        let t = rx_meta.lock().expect("rx-meta lock").take().unwrap_or_default();
        let mut v = serde_json::to_value(&t).unwrap_or(Value::Null);
        // Frames the program passed to the stack: no room for the metadata in front of them.
        v["no_room"] = json!(sess.rx_meta_no_room());
        extra.insert("rx_meta".into(), v);
    }
    if a.mode == BenchMode::Txonly {
        crate::report::insert_delivery(&mut extra, &summary);
    }
    if a.tx_meta.tx_timestamp {
        let t = tx_ts.lock().expect("tx-timestamps lock").take().unwrap_or_default();
        extra.insert("tx_timestamps".into(), serde_json::to_value(t).unwrap_or(Value::Null));
    }
    let path = serde_json::to_value(&sess.info).unwrap_or(Value::Null);
    print_summary(mode_name(a.mode), &path, &summary, columns(a.mode), a.run.json, Value::Object(extra));
    drop(sess); // detaches the XDP program
    Ok(())
}

/// What the AF_XDP bench workers share: a counter set per queue, the stop flag, the "last one
/// ended" flag, and the merged --verify tracker.
struct QueueShared {
    counters: Vec<Arc<Counters>>,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    tracker: Arc<Mutex<Option<SeqTracker>>>,
    /// --rx-meta: the workers' tallies, merged.
    rx_meta: Arc<Mutex<Option<bench::RxMetaTally>>>,
    /// --tx-timestamp: what the workers' completions carried, merged.
    tx_ts: Arc<Mutex<Option<TxTimestamps>>>,
}

/// What one AF_XDP bench worker runs: the mode's loop over its queue's port.
struct QueueJob {
    queue: usize,
    mode: BenchMode,
    opts: LoopOpts,
    verify: bool,
    rx_meta: bool,
    /// --tx-csum: frames leave with a partial UDP checksum (the device completes it).
    udp_checksum: UdpChecksum,
    template: Option<Vec<u8>>,
    flows: Option<fastpath::packet::Flows>,
    share: SendLimits,
}

/// Spawns a worker per port, pinned to its CPU (from --cpu/--cpus); `done` is set when the last
/// one ends.
fn spawn_queues(
    a: &BenchArgs,
    ports: Vec<fastpath::io::afxdp::AfXdpPort>,
    sh: &QueueShared,
    template: Option<Vec<u8>>,
    (cpus, choice): (&[Option<usize>], WaitChoice),
) -> Vec<std::thread::JoinHandle<Result<(), fastpath::io::PortError>>> {
    let nq = ports.len().max(1);
    let finished = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let limits = SendLimits { count: a.frame.count, rate_pps: a.frame.rate };
    ports
        .into_iter()
        .enumerate()
        .map(|(i, port)| {
            let (c, s, t, m) = (sh.counters[i].clone(), sh.stop.clone(), sh.tracker.clone(), sh.rx_meta.clone());
            let ts = sh.tx_ts.clone();
            // Tell the monitor when the last worker ends, however it ends (error, panic).
            let last = LastDone(finished.clone(), sh.done.clone(), nq);
            let job = QueueJob {
                queue: i,
                mode: a.mode,
                opts: loop_opts(&a.xsk, choice),
                verify: a.verify,
                rx_meta: a.rx_meta,
                udp_checksum: if a.tx_meta.tx_csum.is_some() { UdpChecksum::Partial } else { UdpChecksum::Full },
                template: template.clone(),
                flows: flows(&a.frame),
                // --count and --rate are totals: each queue sends its share.
                share: SendLimits {
                    count: limits.count.map(|t| t / nq as u64 + u64::from((i as u64) < t % nq as u64)),
                    rate_pps: limits.rate_pps.map(|r| (r / nq as u64).max(1)),
                },
            };
            let cpu = cpus.get(i).copied().flatten();
            fastpath_tools::threads::spawn_pinned(format!("bench-q{i}"), cpu, move || {
                let _done = last;
                run_queue(port, &job, &c, &s, (&t, &m, &ts))
            })
        })
        .collect()
}

/// Where a worker merges what it tallied: --verify, --rx-meta, --tx-timestamp.
type Slots<'a> =
    (&'a Mutex<Option<SeqTracker>>, &'a Mutex<Option<bench::RxMetaTally>>, &'a Mutex<Option<TxTimestamps>>);

/// One AF_XDP bench worker: the mode's run loop until `stop`; with --verify its tracker is
/// merged into `tracker`.
fn run_queue(
    mut port: fastpath::io::afxdp::AfXdpPort,
    job: &QueueJob,
    c: &Counters,
    s: &AtomicBool,
    (t, m, ts): Slots<'_>,
) -> Result<(), fastpath::io::PortError> {
    let opts = job.opts;
    match job.mode {
        BenchMode::Rxdrop if job.rx_meta => {
            let mut tally = bench::RxMetaTally::default();
            let mut tr = job.verify.then(SeqTracker::default);
            let r = bench::rxdrop_meta(&mut port, opts, c, s, &mut tally, |p| {
                if let Some(tr) = tr.as_mut() {
                    tr.record(p);
                }
            });
            let mut slot = m.lock().expect("rx-meta lock");
            match slot.as_mut() {
                Some(all) => all.merge(&tally),
                None => *slot = Some(tally),
            }
            if let Some(tr) = tr {
                let mut slot = t.lock().expect("tracker lock");
                match slot.as_mut() {
                    Some(all) => all.merge(&tr),
                    None => *slot = Some(tr),
                }
            }
            r
        }
        BenchMode::Rxdrop if job.verify => {
            let mut tr = SeqTracker::default();
            let r = bench::rxdrop(&mut port, opts, c, s, |p| tr.record(p));
            let mut slot = t.lock().expect("tracker lock");
            match slot.as_mut() {
                Some(all) => all.merge(&tr),
                None => *slot = Some(tr),
            }
            r
        }
        BenchMode::Rxdrop => bench::rxdrop(&mut port, opts, c, s, |_| {}),
        BenchMode::L2fwd => bench::l2fwd(&mut port, opts, c, s),
        BenchMode::Txonly => {
            let plan = TxPlan {
                template: job.template.as_deref().expect("txonly has a frame"),
                stream: job.queue as u16,
                flows: job.flows.as_ref(),
                udp_checksum: job.udp_checksum,
                limits: job.share,
                opts,
            };
            let r = bench::txonly(&mut port, &plan, c, s);
            let mut slot = ts.lock().expect("tx-timestamps lock");
            match slot.as_mut() {
                Some(all) => all.merge(&port.tx_timestamps()),
                None => *slot = Some(port.tx_timestamps()),
            }
            r.map(|_| ())
        }
        BenchMode::Xdpdrop | BenchMode::Ddos | BenchMode::RedirectCpu | BenchMode::Pingpong => Ok(()),
    }
}

/// Sets `done` when the last of `n` workers ends, however it ends (error, panic).
struct LastDone(Arc<std::sync::atomic::AtomicUsize>, Arc<AtomicBool>, usize);

impl Drop for LastDone {
    fn drop(&mut self) {
        if self.0.fetch_add(1, Ordering::Relaxed) + 1 == self.2 {
            self.1.store(true, Ordering::Relaxed);
        }
    }
}

/// A port error as the CLI reports it (see `From<PortError> for CliError`).
fn port_error(e: fastpath::io::PortError) -> crate::error::CliError {
    e.into()
}

/// `fastpath gen`.
pub fn gen(g: &GenArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    if g.engine == Engine::Xsk {
        let b = BenchArgs {
            mode: BenchMode::Txonly,
            xsk: g.xsk.clone(),
            run: g.run.clone(),
            frame: g.frame.clone(),
            verify: false,
            rules: None,
            rx_meta: false,
            xsk_handoff: None,
            cpumap: Default::default(),
            ddos: Default::default(),
            pingpong: Default::default(),
            flood_threads: 1,
            path: crate::args::PathArg::Afxdp,
            tx_meta: g.tx_meta.clone(),
        };
        return bench(&b, stop);
    }
    if g.tx_meta.any() {
        return Err(usage(anyhow!(
            "{} is AF_XDP TX metadata: it goes with --engine xsk, not xdp-live",
            g.tx_meta.first_name()
        )));
    }
    check_run(&g.run)?;
    check_frame(&g.frame)?;
    if g.xsk.iface.is_empty() {
        return Err(usage(anyhow!("gen needs -i/--iface")));
    }
    let ncpu = fastpath::workers::online_cpus();
    let first = g.xsk.cpu.unwrap_or(0);
    if first >= ncpu {
        return Err(usage(anyhow!("--cpu {first} is not accepted: this machine has CPUs 0..={}", ncpu - 1)));
    }
    if g.threads as usize > ncpu {
        return Err(usage(anyhow!("--threads {} is not accepted: at most one thread per CPU (1..={ncpu})", g.threads)));
    }
    require_privileges("gen")?;
    let metrics = crate::metrics::start(g.run.metrics)?;
    enter_ns(&g.xsk.netns)?;
    let iface = Iface::resolve(&g.xsk.iface)?;
    let spec = frame_spec(&g.frame, &iface)?;
    // BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES takes one page: PAGE_SIZE less struct
    // xdp_page_head (112), XDP_PACKET_HEADROOM (256) and the aligned skb_shared_info (320):
    // 3408 bytes with 4 KiB pages (a longer frame passes bpf_prog_test_run_xdp's own check and
    // fails setting up the live-frames page pool with EINVAL).
    let live_max = fastpath::bpf::replay::max_frame_len();
    if spec.frame_len > live_max {
        return Err(usage(anyhow!(
            "--frame-len {} is not accepted with --engine xdp-live: live frames hold at most {live_max} bytes (one page); use --engine xsk, which sends longer frames over several UMEM frames",
            spec.frame_len
        )));
    }
    let dev = iface.dev();
    let mut frame = vec![0u8; spec.frame_len];
    build_udp_frame(&spec, &mut frame);
    let gen = Arc::new(XdpGen::load_flows(dev.ifindex, flows(&g.frame).as_ref())?);
    let seq0 = gen.per_cpu_seq().map_err(kernel)?;
    let path = json!({"iface": g.xsk.iface, "queue": 0, "driver": dev.driver().unwrap_or_default(), "engine": "xdp-live", "threads": g.threads, "flows": g.frame.flows.unwrap_or(1), "seed": g.frame.flows.map(|_| g.frame.seed.unwrap_or(1))});
    announce("gen", &path, &[], g.run.json);
    let counters: Vec<Arc<Counters>> = (0..g.threads).map(|_| Arc::new(Counters::default())).collect();
    let cpus: Vec<usize> = (0..g.threads as usize).map(|i| (first + i) % ncpu).collect();
    let limits = SendLimits { count: g.frame.count, rate_pps: g.frame.rate };
    let mon = Monitor {
        metrics: metrics.as_ref(),
        gen: Some(&gen),
        ethtool_dev: Some(dev.clone()),
        ..Monitor::for_run(format!("{}:gen", g.xsk.iface), &[Ctr::TxPackets], counters.clone(), &g.run)
    };
    // Baselines before the first frame, the summary after the threads are joined.
    let watch = mon.start();
    let live = if g.run.duration > 0.0 {
        Some(
            bench::LiveGen::start(gen.clone(), &frame, &cpus, limits, g.xsk.batch_size.min(256), &counters)
                .map_err(runtime)?,
        )
    } else {
        None
    };
    let never = AtomicBool::new(false);
    let done = live.as_ref().map(|l| l.done_flag()).unwrap_or(&never);
    mon.watch(&watch, &stop, done);
    let mut paced = None;
    if let Some(l) = live {
        let pace = l.pace();
        l.stop().map_err(kernel)?;
        paced = pace.share_within_20pct();
    }
    let summary = mon.finish(watch);
    let seq1 = gen.per_cpu_seq().map_err(kernel)?;
    let per_cpu: Vec<Value> = seq1
        .iter()
        .zip(seq0.iter().chain(std::iter::repeat(&0)))
        .enumerate()
        .filter(|(_, (a, b))| *a != *b)
        .map(|(cpu, (a, b))| json!({"stream": cpu, "first_seq": b + 1, "last_seq": a, "frames": a - b}))
        .collect();
    let mut extra = serde_json::Map::new();
    extra.insert("streams".into(), Value::Array(per_cpu));
    // With --rate: the share of 1 ms windows that held the rate within 20% (null: unpaced, or
    // under 5,000 frames/s per thread).
    extra.insert("paced_windows_within_20pct".into(), json!(paced));
    crate::report::insert_delivery(&mut extra, &summary);
    print_summary("gen", &path, &summary, &[Ctr::TxPackets], g.run.json, Value::Object(extra));
    if let (Some(p), false) = (paced, g.run.json) {
        println!("  paced            {:.0}% of 1 ms windows within 20% of the rate", 100.0 * p);
    }
    Ok(())
}

/// `bench rxdrop|txonly --path tpacket|tap|tap-uring`: the same run loops over the port API.
fn port_bench(a: &BenchArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    check_port_bench(a)?;
    require_privileges("bench")?;
    let metrics = crate::metrics::start(a.run.metrics)?;
    enter_ns(&a.xsk.netns)?;
    let (port, frame) = open_port(a)?;
    let path = json!({"iface": a.xsk.iface, "queue": 0, "driver": port.path(), "path": port.path()});
    announce(mode_name(a.mode), &path, &[], a.run.json);
    let counters = Arc::new(Counters::default());
    let done = Arc::new(AtomicBool::new(false));
    let tracker = Arc::new(Mutex::new(None::<SeqTracker>));
    let worker = (a.run.duration > 0.0).then(|| {
        let (c, s, d, t) = (counters.clone(), stop.clone(), done.clone(), tracker.clone());
        let job = PortJob {
            mode: a.mode,
            verify: a.verify,
            limits: SendLimits { count: a.frame.count, rate_pps: a.frame.rate },
            opts: LoopOpts { batch_size: a.xsk.batch_size, wait: Wait::Poll(100) },
            flows: flows(&a.frame),
        };
        let set_done = fastpath_tools::threads::SetOnDrop(d);
        fastpath_tools::threads::spawn_pinned("bench-port".into(), a.xsk.cpu, move || {
            let _done = set_done;
            run_port(port, frame, &job, &c, &s, &t)
        })
    });
    let mon = Monitor {
        metrics: metrics.as_ref(),
        ..Monitor::for_run(
            format!("{}:{}", a.xsk.iface, path["path"].as_str().unwrap_or("")),
            columns(a.mode),
            vec![counters.clone()],
            &a.run,
        )
    };
    let summary = mon.run(&stop, &done);
    stop.store(true, Ordering::Relaxed);
    let mut extra = serde_json::Map::new();
    if let Some(w) = worker {
        let st = w.join().map_err(|_| runtime(anyhow!("the run loop panicked")))?.map_err(port_error)?;
        extra.insert(
            "kernel_drops".into(),
            json!(st.drops.iter().map(|(k, v)| (k.clone(), *v)).collect::<std::collections::BTreeMap<_, _>>()),
        );
    }
    if let Some(t) = tracker.lock().expect("tracker lock").as_ref() {
        extra.insert("verify".into(), tracker_json(t));
    }
    print_summary(mode_name(a.mode), &path, &summary, columns(a.mode), a.run.json, Value::Object(extra));
    Ok(())
}

/// `--path`'s checks: only rxdrop, txonly and l2fwd; frames up to 1514 bytes. Exit 2 (usage).
fn check_port_bench(a: &BenchArgs) -> CliResult<()> {
    if !matches!(a.mode, BenchMode::Rxdrop | BenchMode::Txonly | BenchMode::L2fwd) {
        return Err(usage(anyhow!("--path is for rxdrop, txonly and l2fwd; {} runs on AF_XDP", mode_name(a.mode))));
    }
    if a.rx_meta {
        return Err(usage(anyhow!(
            "--rx-meta reads what an XDP program puts in front of AF_XDP frames: it is for --path afxdp"
        )));
    }
    if a.mode == BenchMode::Txonly && frame_len(&a.frame) > 1514 {
        return Err(usage(anyhow!(
            "--frame-len {} is not accepted with --path {}: it sends frames up to 1514 bytes; use --path afxdp for longer frames",
            frame_len(&a.frame),
            clap::ValueEnum::to_possible_value(&a.path).map(|v| v.get_name().to_string()).unwrap_or_default()
        )));
    }
    Ok(())
}

/// Opens the --path port (a TAP device set up) and builds the txonly frame.
fn open_port(a: &BenchArgs) -> CliResult<(fastpath::io::AnyPort, Option<Vec<u8>>)> {
    use crate::args::PathArg;
    use fastpath::io::{self, PortSpec};
    let tap = fastpath::io::tap::TapOptions::default();
    let spec = match a.path {
        PathArg::Afxdp => unreachable!("handled by bench()"),
        PathArg::Tpacket => PortSpec::Tpacket(Default::default()),
        PathArg::Tap => PortSpec::Tap(tap),
        PathArg::TapUring => PortSpec::TapUring(tap),
    };
    // Resolved once (a TAP device may not exist yet: it is opened by name).
    let resolved = Iface::resolve(&a.xsk.iface).ok();
    let frame = if a.mode == BenchMode::Txonly {
        let spec = resolved.as_ref().and_then(|i| frame_spec(&a.frame, i).ok()).unwrap_or_else(|| {
            // A TAP device does not exist before it is opened: use a local MAC then.
            UdpFrameSpec {
                src_mac: a.frame.src_mac.unwrap_or([2, 0, 0, 0, 0, 1]),
                dst_mac: a.frame.dst_mac,
                src_ip: a.frame.src_ip,
                dst_ip: a.frame.dst_ip,
                src_port: a.frame.src_port,
                dst_port: a.frame.dst_port,
                frame_len: frame_len(&a.frame),
            }
        });
        let mut f = vec![0u8; spec.frame_len];
        build_udp_frame(&spec, &mut f);
        Some(f)
    } else {
        None
    };
    let port = match (&spec, &resolved) {
        (PortSpec::Tpacket(_), Some(i)) => io::open_iface(i, &spec),
        _ => io::open(&a.xsk.iface, &spec),
    };
    let port = port.map_err(port_error)?;
    if matches!(a.path, PathArg::Tap | PathArg::TapUring) {
        // A TAP device is born down; writes to it fail with EIO until it is up.
        fastpath::netdev::set_link_up(&a.xsk.iface).map_err(crate::error::kernel)?;
    }
    Ok((port, frame))
}

/// What the --path bench worker runs.
struct PortJob {
    mode: BenchMode,
    verify: bool,
    limits: SendLimits,
    opts: LoopOpts,
    flows: Option<fastpath::packet::Flows>,
}

/// The --path bench worker: the same run loops as AF_XDP, over this backend, until `s`; then
/// the port's statistics.
fn run_port(
    mut port: fastpath::io::AnyPort,
    frame: Option<Vec<u8>>,
    job: &PortJob,
    c: &Counters,
    s: &AtomicBool,
    t: &Mutex<Option<SeqTracker>>,
) -> Result<fastpath::io::PortStats, fastpath::io::PortError> {
    let (opts, verify) = (job.opts, job.verify);
    match (job.mode, frame) {
        (BenchMode::Txonly, Some(f)) => {
            let plan = TxPlan { flows: job.flows.as_ref(), limits: job.limits, ..TxPlan::new(&f, opts) };
            bench::txonly(&mut port, &plan, c, s)?;
        }
        (BenchMode::L2fwd, _) => bench::l2fwd(&mut port, opts, c, s)?,
        _ => {
            let mut tr = SeqTracker::default();
            bench::rxdrop(&mut port, opts, c, s, |p| {
                if verify {
                    tr.record(p)
                }
            })?;
            if verify {
                *t.lock().expect("tracker lock") = Some(tr);
            }
        }
    }
    port.stats()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xsk(poll: bool, spin: bool, busy_poll: bool) -> XskArgs {
        XskArgs { poll, spin, busy_poll, ..XskArgs::defaults("veth0", None) }
    }

    #[test]
    fn wait_is_poll_where_spinning_workers_would_cover_every_cpu() {
        let d = xsk(false, false, false);
        // --queues 2 on 2 CPUs (worker_cpus' default, 0 and 1): poll().
        assert_eq!(wait_choice(&d, &[Some(0), Some(1)], 2), WaitChoice::AutoPoll);
        assert_eq!(wait_choice(&d, &[Some(0), Some(1)], 2).wait(), Wait::Poll(100));
        assert_eq!(wait_choice(&d, &[Some(0), Some(1)], 2).name(), "poll");
        // --queues 4 on 2 CPUs (0,1,0,1), --queues 2 on 1 CPU (0,0): every CPU too.
        assert_eq!(wait_choice(&d, &[Some(0), Some(1), Some(0), Some(1)], 2), WaitChoice::AutoPoll);
        assert_eq!(wait_choice(&d, &[Some(0), Some(0)], 1), WaitChoice::AutoPoll);
        // A CPU left for the softirq: spin.
        assert_eq!(wait_choice(&d, &[Some(0), Some(1)], 4), WaitChoice::Spin);
        assert_eq!(wait_choice(&d, &[Some(1), Some(1)], 2), WaitChoice::Spin);
        // The single-queue default (one worker; unpinned, or --cpu 1 of 2): spin, unchanged.
        assert_eq!(wait_choice(&d, &[None], 2), WaitChoice::Spin);
        assert_eq!(wait_choice(&d, &[Some(1)], 2), WaitChoice::Spin);
        assert_eq!(wait_choice(&d, &[Some(0)], 1), WaitChoice::Spin);
        assert_eq!(wait_choice(&d, &[Some(1)], 2).name(), "spin");
        // Unpinned workers cover nothing.
        assert_eq!(wait_choice(&d, &[None, None], 2), WaitChoice::Spin);
    }

    #[test]
    fn explicit_flags_win_over_the_layout() {
        let every = [Some(0), Some(1)];
        assert_eq!(wait_choice(&xsk(true, false, false), &every, 2), WaitChoice::Poll);
        assert_eq!(wait_choice(&xsk(true, false, false), &[None], 2), WaitChoice::Poll);
        assert_eq!(wait_choice(&xsk(false, true, false), &every, 2), WaitChoice::Spin);
        // Busy polling drives the NAPI from the worker's own syscalls: it keeps spinning.
        assert_eq!(wait_choice(&xsk(false, false, true), &every, 2), WaitChoice::Spin);
        // --spin on every CPU is noted; --busy-poll and the default are not.
        assert!(spin_note(WaitChoice::Spin, &xsk(false, true, false), &every, 2).is_some());
        assert!(spin_note(WaitChoice::Spin, &xsk(false, false, true), &every, 2).is_none());
        assert!(spin_note(WaitChoice::AutoPoll, &xsk(false, false, false), &every, 2).is_none());
        assert!(spin_note(WaitChoice::Spin, &xsk(false, true, false), &[Some(1)], 2).is_none());
        let line = auto_poll_line(&every);
        assert!(
            line.contains("(0,1)") && line.contains("poll()") && line.contains("--spin") && !line.contains('\n'),
            "{line}"
        );
    }

    #[test]
    fn spin_and_poll_conflict() {
        use clap::Parser;
        let e = crate::args::Cli::try_parse_from(["fastpath", "bench", "rxdrop", "-i", "x", "--spin", "--poll"])
            .unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
        assert!(crate::args::Cli::try_parse_from(["fastpath", "bench", "rxdrop", "-i", "x", "--spin"]).is_ok());
    }
}
