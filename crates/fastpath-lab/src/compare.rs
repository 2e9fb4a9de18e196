//! The experiment of `fastpath compare`: every receive path side by side, in one run, on a test bed of its own,
//! against in-kernel XDP_DROP. The same traffic (the xdp-live generator, 64-byte UDP to port 9,
//! one thread on CPU 0) goes into each path in turn; each row counts what its receiver got.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath::bpf::{AttachOpts, XdpDrop, XdpGen, XdpMode};
use fastpath::io::afxdp::AfXdpPort;
use fastpath::io::tpacket::{TpacketOptions, TpacketPort};
use fastpath::io::{AnyPort, Port};
use fastpath::netdev::{Iface, NetDev};
use fastpath::rules::compile::compile;
use fastpath::xsk::{CopyMode, XskConfig};
use fastpath_testbed::{spawn_in_netns, Testbed, TestbedConfig};
use fastpath_tools::bench::{self, LiveGen, LoopOpts, SendLimits, Wait};
use fastpath_tools::stats::{median, Counters, Ctr};
use fastpath_tools::threads::Stoppable;
use serde_json::json;

use crate::error::{runtime, LabResult};
use crate::path::{OpenRx, RxRequest};
use crate::{peers, tools};

/// Where the application runs relative to the receive softirq.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pin {
    /// Application and the veth's receive softirq on one core (threaded NAPI pinned with it).
    Same,
    /// Receive softirq in the generator's context on CPU 0, application on CPU 1.
    Split,
}

const APP_CPU: usize = 1;
const GEN_CPU: usize = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    UdpSocket,
    NftDrop,
    Tpacket,
    AfXdpSkb,
    AfXdpNative,
    AfXdpClassifier,
    XdpDrop,
    /// `--queues N`: AF_XDP native copy, one socket and thread per queue, one shared UMEM.
    AfXdpQueues,
    /// `--queues N`: in-kernel XDP_DROP on the same N-queue test bed and generator.
    XdpDropQueues,
}

/// The rows `--queues N` adds, measured on an N-queue test bed with N generator threads.
const QUEUE_ROWS: [Row; 2] = [Row::AfXdpQueues, Row::XdpDropQueues];

const ROWS: [Row; 7] =
    [Row::UdpSocket, Row::NftDrop, Row::Tpacket, Row::AfXdpSkb, Row::AfXdpNative, Row::AfXdpClassifier, Row::XdpDrop];

impl Row {
    fn label(self) -> &'static str {
        match self {
            Row::UdpSocket => "kernel UDP socket (recvmmsg)",
            Row::NftDrop => "kernel nftables raw drop",
            Row::Tpacket => "AF_PACKET TPACKET_V3",
            Row::AfXdpSkb => "AF_XDP skb mode",
            Row::AfXdpNative => "AF_XDP native copy",
            Row::AfXdpClassifier => "AF_XDP native copy + 100 rules",
            Row::XdpDrop => "in-kernel XDP_DROP",
            Row::AfXdpQueues => "AF_XDP native copy, N queues",
            Row::XdpDropQueues => "in-kernel XDP_DROP, N queues",
        }
    }
}

/// 100 rules; the last one steers the generator's frames (UDP port 9) to the socket.
fn rules_100() -> String {
    let mut t = String::from("default = \"pass\"\n");
    for i in 0..99 {
        if i % 2 == 0 {
            t.push_str(&format!(
                "[[rule]]\nsrc = \"172.16.{}.{}/32\"\nproto = \"udp\"\ndst_port = {}\naction = \"drop\"\n",
                i / 256,
                i % 256,
                1000 + i
            ));
        } else {
            t.push_str(&format!("[[rule]]\ndst = \"192.168.{i}.0/24\"\naction = \"pass\"\n"));
        }
    }
    t.push_str("[[rule]]\nname = \"app\"\nproto = \"udp\"\ndst_port = 9\naction = \"xsk\"\n");
    t
}

/// The receiver's own drop counters: AF_XDP's XDP_STATISTICS receive drops (rx_dropped,
/// rx_ring_full, rx_invalid_descs; rx_fill_ring_empty_descs counts the same losses as
/// rx_dropped in copy mode) and AF_PACKET's tp_drops, from [`Port::stats`], prefixed by kind.
fn port_drops<P: Port>(port: &mut P) -> Result<BTreeMap<String, u64>, String> {
    let st = port.stats().map_err(|e| e.to_string())?;
    Ok(st
        .drops
        .into_iter()
        .filter(|(k, _)| (k.starts_with("rx_") && k != "rx_fill_ring_empty_descs") || k == "tp_drops")
        .map(|(k, v)| (if k == "tp_drops" { format!("packet.{k}") } else { format!("xsk.{k}") }, v))
        .collect())
}

fn add_drops(into: &mut BTreeMap<String, u64>, from: BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k).or_default() += v;
    }
}

/// Udp RcvbufErrors of the calling thread's network namespace (/proc/thread-self/net/snmp).
fn udp_rcvbuf_errors() -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("Udp:")).collect();
    match lines.as_slice() {
        [names, values, ..] => names
            .split_whitespace()
            .zip(values.split_whitespace())
            .find(|(n, _)| *n == "RcvbufErrors")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

/// What a row's receiver counted: frames received, and frames it or the kernel dropped on its
/// way, by counter name (empty where nothing can drop: XDP_DROP, nftables).
type Received = (u64, BTreeMap<String, u64>);

/// Where a receiver says it is ready (or why it could not start).
type Ready = mpsc::Sender<Result<(), String>>;

/// Sets up `row` in ns b (`at`: its name and the receiving interface), signals ready, counts
/// until `stop`; returns the count and the receiver's drop counters.
fn receive(
    row: Row,
    (ns, iface): (&str, &str),
    pin: Pin,
    queues: u32,
    stop: &Arc<AtomicBool>,
    ready: Ready,
    open_rx: &OpenRx,
) -> Result<Received, String> {
    let wait = if pin == Pin::Same { 50 } else { 0 };
    let mut cfg = XskConfig::default();
    cfg.socket.copy_mode = CopyMode::Copy;
    let resolve = || Iface::resolve(iface).map_err(|e| e.to_string());
    match row {
        Row::UdpSocket => receive_udp(wait, stop, ready),
        Row::NftDrop => {
            tools::nft_apply(ns, &tools::nft_raw_table("fastpath_cmp", "  udp dport 9 counter drop\n", false))
                .map_err(|e| match e {
                    tools::ToolError::Start(e) => format!("nft (Debian package nftables): {e}"),
                    tools::ToolError::Io(e) => e.to_string(),
                    tools::ToolError::Failed(s) => format!("nft: {}", s.trim()),
                })?;
            idle(stop, ready);
            let n = tools::nft_packets_or_zero(ns, "fastpath_cmp");
            tools::nft_delete_table(ns, "fastpath_cmp");
            Ok((n, BTreeMap::new()))
        }
        Row::Tpacket => spin_port(
            AnyPort::Tpacket(
                TpacketPort::open(&resolve()?, {
                    let mut o = TpacketOptions::default();
                    o.tx_frames = 0;
                    o
                })
                .map_err(|e| e.to_string())?,
            ),
            wait,
            stop,
            ready,
        ),
        Row::AfXdpSkb | Row::AfXdpNative => {
            let mode = if row == Row::AfXdpSkb { XdpMode::Skb } else { XdpMode::Native };
            let port =
                AfXdpPort::open(&resolve()?, 0, &cfg, AttachOpts::mode(Some(mode))).map_err(|e| e.to_string())?;
            spin_port(AnyPort::AfXdp(Box::new(port)), wait, stop, ready)
        }
        Row::AfXdpClassifier => receive_classifier(iface, wait, stop, ready, open_rx),
        Row::AfXdpQueues => receive_queues(resolve()?, queues, cfg, stop, ready),
        Row::XdpDrop | Row::XdpDropQueues => {
            let dev = resolve()?;
            let p = XdpDrop::load()
                .and_then(|p| p.attach(&dev, AttachOpts::mode(Some(XdpMode::Native))))
                .map_err(|e| e.to_string())?
                .prog;
            idle(stop, ready);
            Ok((p.counters().map_err(|e| e.to_string())?.0, BTreeMap::new()))
        }
    }
}

/// Says ready and waits for `stop` (the rows whose counting is the kernel's).
fn idle(stop: &AtomicBool, ready: Ready) {
    let _ = ready.send(Ok(()));
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Pinned to the application's CPU, receives from `port` until `stop` (waiting `wait` ms in
/// poll() when nothing came, with `Pin::Same`).
fn spin_port(mut port: AnyPort, wait: i32, stop: &AtomicBool, ready: Ready) -> Result<Received, String> {
    fastpath::workers::pin_current_thread(APP_CPU).map_err(|e| e.to_string())?;
    let _ = ready.send(Ok(()));
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += port.rx_burst(256, wait, |_| {}).map_err(|e| e.to_string())? as u64;
    }
    Ok((n, port_drops(&mut port)?))
}

/// The kernel UDP socket row: recvmmsg on port 9 until `stop`, then the socket's buffer drops.
fn receive_udp(wait: i32, stop: &AtomicBool, ready: Ready) -> Result<Received, String> {
    let sock = std::net::UdpSocket::bind("10.99.0.2:9").map_err(|e| format!("bind 10.99.0.2:9: {e}"))?;
    sock.set_nonblocking(true).map_err(|e| e.to_string())?;
    fastpath::workers::pin_current_thread(APP_CPU).map_err(|e| e.to_string())?;
    let mut rm = fastpath::io::udp::RecvMmsg::new(64);
    let rcvbuf0 = udp_rcvbuf_errors();
    let _ = ready.send(Ok(()));
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let got = rm.recv(&sock).map_err(|e| e.to_string())?;
        if got == 0 && wait > 0 {
            let _ = fastpath::io::udp::poll_readable(&sock, wait);
        }
        n += got as u64;
    }
    // Drain what arrived before the stop, then count what the socket buffer refused.
    while let Ok(got @ 1..) = rm.recv(&sock) {
        n += got as u64;
    }
    Ok((n, BTreeMap::from([("udp.RcvbufErrors".to_string(), udp_rcvbuf_errors() - rcvbuf0)])))
}

/// The classifier row: 100 rules in front of the socket (opened by `open_rx`), rxdrop until
/// `stop`.
fn receive_classifier(
    iface: &str,
    wait: i32,
    stop: &AtomicBool,
    ready: Ready,
    open_rx: &OpenRx,
) -> Result<Received, String> {
    let set = fastpath::rules::parse_toml("compare-100-rules", &rules_100()).map_err(|e| e.to_string())?;
    let c = compile("compare-100-rules", &set).map_err(|e| e.to_string())?;
    let req = RxRequest { iface, cpu: APP_CPU, drop_only: false, copy: true, rules: Some(&c) };
    let mut path = open_rx(&req).map_err(|e| format!("{e:#}"))?;
    let port = path.port().ok_or("no socket")?;
    fastpath::workers::pin_current_thread(APP_CPU).map_err(|e| e.to_string())?;
    let counters = Counters::default();
    let _ = ready.send(Ok(()));
    let w = if wait > 0 { Wait::Poll(wait) } else { Wait::Spin };
    bench::rxdrop(port, LoopOpts { batch_size: 64, wait: w }, &counters, stop, |_| {}).map_err(|e| e.to_string())?;
    Ok((counters.get(Ctr::RxPackets), port_drops(port)?))
}

/// A worker's error: its message (a failed pin too).
struct Msg(String);

impl From<fastpath::SysError> for Msg {
    fn from(e: fastpath::SysError) -> Self {
        Msg(e.to_string())
    }
}

/// The N-queue row: one socket per queue over one UMEM, each in a thread of its own (pinned to
/// CPU i) that waits in poll(): on a machine with as many CPUs as queues the receivers share
/// their CPUs with the generator threads and the softirqs, and spinning would starve them.
fn receive_queues(
    dev: Iface,
    queues: u32,
    cfg: XskConfig,
    stop: &Arc<AtomicBool>,
    ready: Ready,
) -> Result<Received, String> {
    use fastpath::io::afxdp::{open_queues, QueueSetup};
    let queues = fastpath::xsk::RxQueues::check(&dev, (0..queues).collect()).map_err(|e| e.to_string())?;
    let mut setup = QueueSetup::new(dev, queues);
    setup.config = cfg;
    setup.shared_umem = true;
    setup.attach = AttachOpts::mode(Some(XdpMode::Native));
    let prog = fastpath::bpf::XskRedirect::load(Default::default()).map_err(|e| e.to_string())?;
    let q = open_queues(&setup, Some(prog)).map_err(|e| e.to_string())?;
    let ncpu = fastpath::workers::online_cpus();
    let workers: Vec<_> = q
        .ports
        .into_iter()
        .enumerate()
        .map(|(i, mut port)| {
            let stop = stop.clone();
            fastpath_tools::threads::spawn_pinned(format!("compare-q{i}"), Some(i % ncpu), move || -> Result<_, Msg> {
                let c = Counters::default();
                bench::rxdrop(&mut port, LoopOpts { batch_size: 64, wait: Wait::Poll(50) }, &c, &stop, |_| {})
                    .map_err(|e| Msg(e.to_string()))?;
                Ok((c.get(Ctr::RxPackets), port_drops(&mut port).map_err(Msg)?))
            })
        })
        .collect();
    let _ = ready.send(Ok(()));
    let mut all: Received = (0, BTreeMap::new());
    for r in fastpath_tools::threads::join_all(workers).map_err(|_| "receiver panicked".to_string())? {
        let (n, d) = r.map_err(|Msg(e)| e)?;
        all.0 += n;
        add_drops(&mut all.1, d);
    }
    drop(q.attached);
    Ok(all)
}

/// Counts of one row's run: frames the generator made, frames the sending veth refused (its
/// peer's ring was full: `xdp_xmit_errors`), frames the receiver counted, frames the receiver
/// or the kernel on its way dropped (by counter), and seconds.
#[derive(Debug, Clone, Default)]
struct Counts {
    sent: u64,
    refused: u64,
    received: u64,
    drops: BTreeMap<String, u64>,
    secs: f64,
}

impl Counts {
    fn mpps(&self) -> f64 {
        if self.secs > 0.0 {
            self.received as f64 / self.secs / 1e6
        } else {
            0.0
        }
    }
}

/// One row once: receiver up, `secs` of traffic, receiver down; what was sent and received.
fn measure(
    bed: &Testbed,
    row: Row,
    pin: Pin,
    secs: f64,
    global_stop: &Arc<AtomicBool>,
    open_rx: &OpenRx,
) -> LabResult<Counts> {
    let queues = bed.queues();
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let (ns, iface, s2, open_rx) = (bed.ns_b().to_string(), bed.iface_b().to_string(), stop.clone(), open_rx.clone());
    // On any error from here on, dropping `recv` stops and joins the receiver before returning,
    // so its program or nft table is gone before the test bed is.
    let recv = Stoppable::new(
        stop,
        spawn_in_netns(bed.ns_b(), move || {
            let r = receive(row, (&ns, &iface), pin, queues, &s2, tx.clone(), &open_rx);
            if let Err(e) = &r {
                let _ = tx.send(Err(e.clone()));
            }
            r
        }),
    );
    let ready = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| Err("receiver did not start".into()));
    if let Err(e) = ready {
        drop(recv);
        return Err(runtime(anyhow!("{}: {e}", row.label())));
    }
    let (mut elapsed, mut sent, mut refused) = (0.0, 0, 0);
    if secs > 0.0 {
        match generate(bed, queues, secs, global_stop) {
            Ok((e, s, r)) => (elapsed, sent, refused) = (e, s, r),
            Err(e) => {
                drop(recv);
                return Err(runtime(anyhow!("{e}")));
            }
        }
        bed.wait_rx_settled(Duration::from_secs(3));
        std::thread::sleep(Duration::from_millis(100));
    }
    let (n, drops) = recv
        .join()
        .map_err(|_| runtime(anyhow!("receiver panicked")))?
        .map_err(|e| runtime(anyhow!("{e:?}")))?
        .map_err(|e| runtime(anyhow!("{}: {e}", row.label())))?;
    Ok(Counts { sent, refused, received: n, drops, secs: elapsed })
}

/// `secs` of the xdp-live generator from ns a, one thread per queue; returns (seconds, frames
/// sent, frames the sending veth refused).
fn generate(bed: &Testbed, queues: u32, secs: f64, global_stop: &Arc<AtomicBool>) -> Result<(f64, u64, u64), String> {
    let (if_a, mac_b, gstop) = (bed.iface_a().to_string(), bed.mac_b(), global_stop.clone());
    spawn_in_netns(bed.ns_a(), move || -> Result<(f64, u64, u64), String> {
        let dev = NetDev::by_name(&if_a).map_err(|e| e.to_string())?;
        let frame = crate::frame::testbed_frame(&dev, mac_b).map_err(|e| e.to_string())?;
        let gen = Arc::new(XdpGen::load(dev.ifindex).map_err(|e| format!("{e:#}"))?);
        let eth0 = dev.ethtool_stats().map_err(|e| e.to_string())?;
        let sent0 = gen.total_sent().map_err(|e| e.to_string())?;
        let t0 = Instant::now();
        // One generator thread per queue, CPU i: a veth's XDP transmit picks the peer's
        // receive queue by the sending CPU (veth_xdp_xmit), so the queues all get traffic.
        let ncpu = fastpath::workers::online_cpus();
        let cpus: Vec<usize> = (0..queues as usize).map(|i| (GEN_CPU + i) % ncpu).collect();
        let counters: Vec<Arc<Counters>> = cpus.iter().map(|_| Arc::new(Counters::default())).collect();
        let live = LiveGen::start(gen.clone(), &frame, &cpus, SendLimits::default(), 64, &counters)
            .map_err(|e| e.to_string())?;
        while t0.elapsed().as_secs_f64() < secs && !gstop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
        live.stop().map_err(|e| e.to_string())?;
        let el = t0.elapsed().as_secs_f64();
        let sent = gen.total_sent().map_err(|e| e.to_string())? - sent0;
        let eth1 = dev.ethtool_stats().map_err(|e| e.to_string())?;
        let refused = fastpath::netdev::stats_delta(&eth0, &eth1)
            .iter()
            .filter(|(k, _)| k.contains("xdp_xmit_err"))
            .map(|(_, v)| v)
            .sum();
        Ok((el, sent, refused))
    })
    .join()
    .map_err(|_| "generator panicked".to_string())
    .and_then(|r| r.map_err(|e| format!("{e:?}")))
    .and_then(|r| r.map_err(|e| format!("generator: {e}")))
}

/// What `compare` is asked for (the front end has checked every value).
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// Runs; each row reports the median, min and max.
    pub runs: u32,
    /// Seconds of traffic per row and run; 0 = set every row up and tear it down.
    pub duration_s: f64,
    /// Where the application runs relative to the receive softirq.
    pub pin: Pin,
    /// Also the N-queue rows on an N-queue test bed (2..=CPUs, at most 64).
    pub queues: Option<u32>,
    /// Also the peers' rows ([`crate::peers`]) on each run's test bed, after the receive rows.
    pub peers: bool,
}

/// What [`run`] returns: the receive rows, and with `peers` the peers' rows
/// ([`crate::peers::summarise`]).
#[derive(Debug, Clone, Default)]
pub struct CompareResult {
    /// The receive rows (see [`run`]).
    pub rows: Vec<serde_json::Value>,
    /// The peers' rows, empty without `peers`.
    pub peers: Vec<serde_json::Value>,
}

/// Runs `compare`: per run a test bed, every row in turn with the same traffic, and with
/// `queues` an N-queue test bed for the N-queue rows. `open_rx` opens the AF_XDP path of the
/// classifier row; `progress` gets one line per run and one per phase (row) with the time left
/// ([`crate::progress`]). Returns the rows as JSON objects (`path`,
/// `queues`, `mpps_median`, `mpps_min`, `mpps_max`, `pct_of_xdp_drop`, and per run `runs`
/// (Mpps), `sent`, `refused`, `received`, `drops`, `unaccounted`).
///
/// Needs root and 2 CPUs: creates network namespaces, attaches XDP programs, runs nft in one.
///
/// # Errors
///
/// [`crate::LabError::Testbed`] when a test bed cannot be made, [`crate::LabError::Runtime`]
/// when a row fails (its label first) or `stop` is raised during a run.
///
/// # Panics
///
/// Never: the row list always holds the XDP_DROP reference row it looks up.
pub fn run(
    o: &CompareOptions,
    stop: Arc<AtomicBool>,
    open_rx: &OpenRx,
    progress: &mut dyn FnMut(&str),
) -> LabResult<CompareResult> {
    let rows_run: Vec<Row> = ROWS.iter().copied().chain(o.queues.iter().flat_map(|_| QUEUE_ROWS)).collect();
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); rows_run.len()];
    let mut counts: Vec<Vec<Counts>> = vec![Vec::new(); rows_run.len()];
    let mut peer_runs: Vec<Vec<peers::PeerResult>> = Vec::new();
    // Planned per phase: the traffic and some 2 s of set-up; the peers' phase runs several
    // programs, each for the duration.
    let row_s = o.duration_s + 2.0;
    let per_run: Vec<f64> = ROWS
        .iter()
        .map(|_| row_s)
        .chain(o.peers.then_some(6.0 * row_s))
        .chain(o.queues.iter().flat_map(|_| QUEUE_ROWS).map(|_| row_s))
        .collect();
    let plan: Vec<f64> = (0..o.runs).flat_map(|_| per_run.iter().copied()).collect();
    let mut pr = crate::progress::Progress::new("compare", plan, progress);
    for run in 0..o.runs {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let bed = Testbed::up(&TestbedConfig { name: None, queues: 1, sender_qdisc: false, ipv6: false })?;
        if o.pin == Pin::Same {
            bed.set_rx_napi_cpu(Some(APP_CPU))?;
        }
        pr.note(&format!("compare: run {}/{} on test bed {} ...", run + 1, o.runs, bed.name()));
        for (i, row) in ROWS.iter().enumerate() {
            pr.phase(&format!("run {}/{}, {}", run + 1, o.runs, row.label()));
            let r = measure(&bed, *row, o.pin, o.duration_s, &stop, open_rx)?;
            if stop.load(Ordering::Relaxed) {
                return Err(runtime(anyhow!("interrupted: no table from a partial run (test bed removed)")));
            }
            results[i].push(r.mpps());
            counts[i].push(r);
        }
        if o.peers {
            pr.phase(&format!("run {}/{}, the peers", run + 1, o.runs));
            let gen = |threads: u32| generate(&bed, threads, o.duration_s, &stop).map(|(secs, _, _)| secs);
            let b = peers::Bench { bed: &bed, secs: o.duration_s, generate: &gen, run };
            let measured = peers::measure(&b, &stop);
            let last = |row: Row| results[ROWS.iter().position(|r| *r == row).unwrap_or(0)].last().copied();
            peer_runs.push(peers::with_own(own_rows(&bed, &last), measured));
        }
        bed.down()?;
        if let Some(q) = o.queues {
            let bed = Testbed::up(&TestbedConfig { name: None, queues: q, sender_qdisc: false, ipv6: false })?;
            for (k, row) in QUEUE_ROWS.iter().enumerate() {
                pr.phase(&format!("run {}/{}, {}", run + 1, o.runs, row.label()));
                let r = measure(&bed, *row, o.pin, o.duration_s, &stop, open_rx)?;
                if stop.load(Ordering::Relaxed) {
                    return Err(runtime(anyhow!("interrupted: no table from a partial run (test bed removed)")));
                }
                results[ROWS.len() + k].push(r.mpps());
                counts[ROWS.len() + k].push(r);
            }
            bed.down()?;
        }
    }
    pr.finish();
    let xdp = rows_run.iter().position(|r| *r == Row::XdpDrop).expect("xdp row");
    let xdp_q = rows_run.iter().position(|r| *r == Row::XdpDropQueues);
    let peers = peers::summarise(&peer_runs, &results[xdp]);
    let rows = rows_run
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let v = &results[i];
            // Each row against the XDP_DROP of its own test bed, same run.
            let reference = if QUEUE_ROWS.contains(r) { xdp_q.unwrap_or(xdp) } else { xdp };
            let pct: Vec<f64> =
                v.iter().zip(&results[reference]).map(|(a, b)| if *b > 0.0 { 100.0 * a / b } else { 0.0 }).collect();
            let label = match o.queues {
                Some(q) if QUEUE_ROWS.contains(r) => r.label().replace("N queues", &format!("{q} queues")),
                _ => r.label().to_string(),
            };
            json!({"path": label, "queues": if QUEUE_ROWS.contains(r) { o.queues.unwrap_or(1) } else { 1 }, "mpps_median": median(v), "mpps_min": v.iter().cloned().fold(f64::INFINITY, f64::min),
                   "mpps_max": v.iter().cloned().fold(0.0, f64::max), "pct_of_xdp_drop": median(&pct), "runs": v,
                   "sent": counts[i].iter().map(|c| c.sent).collect::<Vec<_>>(),
                   "refused": counts[i].iter().map(|c| c.refused).collect::<Vec<_>>(),
                   "received": counts[i].iter().map(|c| c.received).collect::<Vec<_>>(),
                   "drops": counts[i].iter().map(|c| c.drops.clone()).collect::<Vec<_>>(),
                   "unaccounted": counts[i].iter().map(|c| c.sent as i64 - c.refused as i64 - c.received as i64 - c.drops.values().sum::<u64>() as i64).collect::<Vec<_>>()})
        })
        .collect();
    Ok(CompareResult { rows, peers })
}

/// fastpath's rows of the peers' receive groups: `compare`'s own rows of this run (`last`:
/// a row's rate in this run), with the equivalent `fastpath` command.
fn own_rows(bed: &Testbed, last: &dyn Fn(Row) -> Option<f64>) -> Vec<peers::PeerResult> {
    let ib = bed.iface_b();
    [
        ("XDP_DROP", Row::XdpDrop, format!("fastpath bench xdpdrop --xdp-mode native -i {ib}")),
        (
            "AF_XDP rxonly",
            Row::AfXdpNative,
            format!("fastpath bench rxdrop --xdp-mode native --copy-mode copy --cpu {APP_CPU} -i {ib}"),
        ),
        ("AF_PACKET rxonly", Row::Tpacket, format!("fastpath bench rxdrop --path tpacket --cpu {APP_CPU} -i {ib}")),
    ]
    .into_iter()
    .map(|(group, row, command)| peers::PeerResult {
        group: group.into(),
        who: "fastpath".into(),
        command,
        mpps: last(row).ok_or_else(|| "not measured".to_string()),
    })
    .collect()
}

/// The command line that reproduces a run with `o`.
pub fn command(o: &CompareOptions) -> String {
    format!(
        "fastpath compare --runs {} --duration {} --pin {}{}{}",
        o.runs,
        o.duration_s,
        if o.pin == Pin::Same { "same" } else { "split" },
        o.queues.map(|q| format!(" --queues {q}")).unwrap_or_default(),
        if o.peers { " --peers" } else { "" }
    )
}

/// The table of [`run`]'s rows, every line ending in a newline; `cmd` from [`command`].
pub fn table(o: &CompareOptions, rows: &[serde_json::Value], cmd: &str) -> String {
    let mut s = format!("{:<32} {:>8} {:>8} {:>8} {:>12}\n", "path (64-byte UDP)", "Mpps", "min", "max", "% XDP_DROP");
    for r in rows {
        s += &format!(
            "{:<32} {:>8.2} {:>8.2} {:>8.2} {:>11.1}%\n",
            r["path"].as_str().unwrap_or(""),
            r["mpps_median"].as_f64().unwrap_or(0.0),
            r["mpps_min"].as_f64().unwrap_or(0.0),
            r["mpps_max"].as_f64().unwrap_or(0.0),
            r["pct_of_xdp_drop"].as_f64().unwrap_or(0.0)
        );
    }
    s += &format!(
        "({cmd}; medians of {} runs; % of the XDP_DROP of the same test bed, measured in the same run{})\n",
        o.runs,
        if o.queues.is_some() { "; N-queue rows: N generator threads, receivers in poll()" } else { "" }
    );
    s
}

/// A horizontal bar chart of [`run`]'s rows a person can read at a glance; `cmd` under it.
pub fn svg(rows: &[serde_json::Value], cmd: &str) -> String {
    let max = rows.iter().filter_map(|r| r["mpps_max"].as_f64()).fold(0.1, f64::max);
    let (w, bar_x, bar_w, row_h) = (900.0, 260.0, 520.0, 34.0);
    let h = 70.0 + row_h * rows.len() as f64;
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"13\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">Receive paths, Mpps (64-byte UDP), median of runs; whiskers min-max</text>\n");
    for (i, r) in rows.iter().enumerate() {
        let y = 40.0 + row_h * i as f64;
        let (m, lo, hi) = (
            r["mpps_median"].as_f64().unwrap_or(0.0),
            r["mpps_min"].as_f64().unwrap_or(0.0),
            r["mpps_max"].as_f64().unwrap_or(0.0),
        );
        let color = if r["path"].as_str().unwrap_or("").contains("XDP_DROP") {
            "#555"
        } else if r["path"].as_str().unwrap_or("").contains("AF_XDP") {
            "#2a7ab9"
        } else {
            "#d9822b"
        };
        s += &format!("<text x=\"10\" y=\"{}\">{}</text>\n", y + 18.0, r["path"].as_str().unwrap_or(""));
        s += &format!(
            "<rect x=\"{bar_x}\" y=\"{}\" width=\"{:.1}\" height=\"22\" fill=\"{color}\"/>\n",
            y + 4.0,
            bar_w * m / max
        );
        s += &format!(
            "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{}\" y2=\"{}\" stroke=\"black\"/>\n",
            bar_x + bar_w * lo / max,
            bar_x + bar_w * hi / max,
            y + 15.0,
            y + 15.0
        );
        s += &format!(
            "<text x=\"{:.1}\" y=\"{}\">{m:.2} ({:.0}%)</text>\n",
            bar_x + bar_w * hi.max(m) / max + 8.0,
            y + 19.0,
            r["pct_of_xdp_drop"].as_f64().unwrap_or(0.0)
        );
    }
    s += &format!("<text x=\"10\" y=\"{}\" fill=\"#666\">{cmd}</text>\n</svg>\n", h - 10.0);
    s
}
