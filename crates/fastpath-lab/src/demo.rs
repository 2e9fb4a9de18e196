//! The experiment of `fastpath demo`: a test bed, xdp-live traffic into AF_XDP rxdrop, then into in-kernel
//! XDP_DROP, one table. Everything it creates is removed on every exit path (the test bed guard
//! deletes the namespaces; closing the bpf_link fds detaches the programs).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath::bpf::XdpGen;
use fastpath::netdev::{self, NetDev};
use fastpath::xsk::XskStats;
use fastpath_testbed::{spawn_in_netns, Testbed, TestbedConfig};
use fastpath_tools::bench::{self, LoopOpts, SendLimits, Wait};
use fastpath_tools::stats::{thousands, Counters};
use fastpath_tools::threads::Stoppable;
use serde::Serialize;
use serde_json::json;

use crate::error::{runtime, LabError, LabResult};
use crate::path::{OpenRx, RxRequest};

/// One row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// "AF_XDP rxdrop" or "XDP_DROP (in-kernel)".
    pub path: String,
    /// The XDP mode obtained ("native" / "skb").
    pub xdp_mode: Option<&'static str>,
    /// The socket's copy mode obtained ("copy" / "zero-copy"), None for XDP_DROP.
    pub copy_mode: Option<&'static str>,
    /// Frames the generator sent.
    pub sent: u64,
    /// Frames the receiver counted.
    pub received: u64,
    /// Seconds the generator ran.
    pub duration_s: f64,
    /// received / duration_s, millions per second.
    pub received_mpps: f64,
    /// sent / duration_s, millions per second.
    pub sent_mpps: f64,
    /// Every non-zero kernel drop counter: XDP_STATISTICS of the socket, the receiving veth's
    /// ethtool counters (`rx_queue_*_drops`...) and the sender's (`*xdp_xmit_err*`).
    pub drop_counters: BTreeMap<String, u64>,
    /// sent - received - named drops: packets nobody accounted for.
    pub unaccounted: i64,
    /// Who limited the figure, derived from the counters and CPU use of this phase (see
    /// [`bound_by`]): "receiver", "generator" or "unclear".
    pub bound_by: &'static str,
    /// Why, in words, with the numbers it was decided on.
    pub bound_reason: String,
    /// Frames the receiving side dropped (XDP_STATISTICS, the receiving veth's drop counters).
    pub receiver_drops: u64,
    /// Frames the sending veth refused (`xdp_xmit_errors`: its peer's 256-slot ring was full).
    pub refused: u64,
    /// Busy share of the generator's CPU(s) over the phase (the busiest one), percent.
    pub gen_cpu_busy_pct: Option<f64>,
    /// Busy share of the application's CPU over the phase, percent.
    pub app_cpu_busy_pct: Option<f64>,
}

/// A CPU at or above this busy share is saturated.
const SATURATED: f64 = 0.90;

/// Who limited a figure. The receiver, when it dropped (its rings overflowed: it could not keep
/// up). Otherwise the generator, when its CPU was saturated or the sending veth refused frames
/// (on veth the receive softirq, and so an XDP program's work, runs on the generator's CPU: the
/// generator and the in-kernel receive path share that CPU). Otherwise nobody visibly:
/// "unclear" (e.g. the machine was shared and no CPU was ours).
pub fn bound_by(
    receiver_drops: u64,
    refused: u64,
    gen_busy: Option<f64>,
    app_busy: Option<f64>,
) -> (&'static str, String) {
    let pct = |b: Option<f64>| b.map_or("?".to_string(), |b| format!("{:.0}%", b * 100.0));
    if receiver_drops > 0 {
        return (
            "receiver",
            format!(
                "the receiver dropped {} frames (app CPU {} busy, generator CPU {})",
                thousands(receiver_drops),
                pct(app_busy),
                pct(gen_busy)
            ),
        );
    }
    let gen_saturated = gen_busy.is_some_and(|b| b >= SATURATED);
    if gen_saturated || refused > 0 {
        let mut why = format!("no receiver drops; generator CPU {} busy", pct(gen_busy));
        if refused > 0 {
            why += &format!(", {} frames refused by the sending veth (ring full)", thousands(refused));
        }
        why += &format!(", app CPU {} busy", pct(app_busy));
        return ("generator", why);
    }
    (
        "unclear",
        format!("no drops, no refusals and no saturated CPU (generator {}, app {})", pct(gen_busy), pct(app_busy)),
    )
}

/// What the generator reports: frames sent, seconds, the sending veth's ethtool deltas, the busy
/// share of its busiest CPU and of the application's CPU over the phase.
type GenOutcome = (u64, f64, Vec<(String, u64)>, Option<f64>, Option<f64>);

struct RxResult {
    xdp_mode: Option<&'static str>,
    copy_mode: Option<&'static str>,
    received: u64,
    xsk: Option<XskStats>,
    ethtool: Vec<(String, u64)>,
}

fn is_drop_counter(name: &str) -> bool {
    (name.contains("drop") && !name.contains("xdp_drops")) || name.contains("err") || name.contains("full")
}

/// Frames per receive burst (the command's default).
const BATCH: u32 = 64;

/// One row: the receiver (AF_XDP rxdrop, or XDP_DROP with `drop_only`) in ns b, the generator
/// in ns a for the run's seconds, then what each side counted.
fn phase(
    bed: &Testbed,
    drop_only: bool,
    d: &DemoOptions,
    global_stop: &Arc<AtomicBool>,
    open_rx: &OpenRx,
) -> LabResult<Row> {
    let receiver = start_receiver(bed, drop_only, d.app_cpu, open_rx)?;
    let gen_result = generate(bed, d, global_stop);
    // Let frames in flight land (the receiving veth takes in nothing new), then stop the
    // receiver, and give it a moment to count the last of them.
    bed.wait_rx_settled(Duration::from_secs(3));
    std::thread::sleep(Duration::from_millis(100));
    let rx = receiver.join().map_err(|_| runtime(anyhow!("receiver panicked")))?.map_err(LabError::from)??;
    let (sent, secs, gen_eth, gen_busy, app_busy) = gen_result?.map_err(LabError::from)??;
    let drops = drop_counters(bed, &rx, &gen_eth);
    // A frame the socket could not take (rx_ring_full, or rx_dropped: no FILL ring entry) fails
    // the XDP_REDIRECT, which the veth also counts as rx_queue_N_drops (veth_xdp_rcv_skb,
    // drivers/net/veth.c): count each loss once.
    let named: u64 = drops.iter().filter(|(k, _)| !k.starts_with("xsk.")).map(|(_, v)| v).sum::<u64>()
        + drops
            .iter()
            .filter(|(k, _)| k.starts_with("xsk.") && !k.ends_with("rx_ring_full") && !k.ends_with("rx_dropped"))
            .map(|(_, v)| v)
            .sum::<u64>();
    let refused: u64 =
        drops.iter().filter(|(k, _)| k.starts_with(&format!("{}.", bed.iface_a()))).map(|(_, v)| v).sum();
    let receiver_drops = named - refused;
    let (bound, bound_reason) = bound_by(receiver_drops, refused, gen_busy, app_busy);
    let path = if drop_only { "XDP_DROP (in-kernel)".to_string() } else { "AF_XDP rxdrop".to_string() };
    Ok(Row {
        path,
        xdp_mode: rx.xdp_mode,
        copy_mode: rx.copy_mode,
        sent,
        received: rx.received,
        duration_s: secs,
        received_mpps: rx.received as f64 / secs / 1e6,
        sent_mpps: sent as f64 / secs / 1e6,
        unaccounted: sent as i64 - rx.received as i64 - named as i64,
        bound_by: bound,
        bound_reason,
        receiver_drops,
        refused,
        gen_cpu_busy_pct: gen_busy.map(|b| b * 100.0),
        app_cpu_busy_pct: app_busy.map(|b| b * 100.0),
        drop_counters: drops,
    })
}

/// The receiver thread's handle, held with its stop flag.
type Receiver = Stoppable<Result<LabResult<RxResult>, fastpath_testbed::TestbedError>>;

/// Starts the receiver in ns b and returns once it has opened its path (or with its error).
fn start_receiver(bed: &Testbed, drop_only: bool, app_cpu: usize, open_rx: &OpenRx) -> LabResult<Receiver> {
    let if_b = bed.iface_b().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), ()>>();
    let (open_rx, rx_stop) = (open_rx.clone(), stop.clone());
    let receiver = Stoppable::new(
        stop,
        spawn_in_netns(bed.ns_b(), move || receive(&if_b, drop_only, app_cpu, &open_rx, ready_tx, &rx_stop)),
    );
    let ready =
        ready_rx.recv_timeout(Duration::from_secs(20)).map_err(|_| runtime(anyhow!("the receiver did not start")));
    // On a timeout, dropping `receiver` stops and joins it.
    if ready? == Ok(()) {
        return Ok(receiver);
    }
    // The receiver failed to open its path: its own error.
    match receiver.join() {
        Ok(Ok(Err(e))) => Err(e),
        Ok(Err(e)) => Err(LabError::from(e)),
        _ => Err(runtime(anyhow!("receiver panicked"))),
    }
}

/// The receiver (in ns b): opens the path, says ready, counts until `stop` (rxdrop pinned to
/// `app_cpu`, or the XDP_DROP program's counter), then what it and the veth counted.
fn receive(
    if_b: &str,
    drop_only: bool,
    app_cpu: usize,
    open_rx: &OpenRx,
    ready_tx: mpsc::Sender<Result<(), ()>>,
    stop: &AtomicBool,
) -> LabResult<RxResult> {
    let req = RxRequest { iface: if_b, cpu: app_cpu, drop_only, copy: false, rules: None };
    let mut sess = match open_rx(&req) {
        Ok(s) => s,
        Err(e) => {
            // The error itself is this thread's result.
            let _ = ready_tx.send(Err(()));
            return Err(e);
        }
    };
    let dev = NetDev::by_name(if_b).map_err(runtime)?;
    let eth0 = dev.ethtool_stats().unwrap_or_default();
    let xsk0 = sess.xsk_stats();
    let drop0 = sess.drop_packets().unwrap_or(0);
    let counters = Counters::default();
    let mut rx_packets = None;
    let _ = ready_tx.send(Ok(()));
    if let Some(port) = sess.port() {
        fastpath::workers::pin_current_thread(app_cpu).map_err(runtime)?;
        // Like xdpsock's rxdrop, the packet bytes are not touched. The test bed has no IPv6,
        // so the kernels send nothing of their own: every frame is the generator's.
        bench::rxdrop(port, LoopOpts { batch_size: BATCH, wait: Wait::Spin }, &counters, stop, |_| {})
            .map_err(runtime)?;
        rx_packets = Some(counters.get(fastpath_tools::stats::Ctr::RxPackets));
    } else {
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let received = match sess.drop_packets() {
        Some(n) => n.saturating_sub(drop0),
        None => rx_packets.unwrap_or(0),
    };
    let xsk = match (sess.xsk_stats(), xsk0) {
        (Some(s), Some(b)) => Some(s.delta(&b)),
        _ => None,
    };
    let eth1 = dev.ethtool_stats().unwrap_or_default();
    Ok(RxResult {
        xdp_mode: sess.xdp_mode(),
        copy_mode: sess.copy_mode(),
        received,
        xsk,
        ethtool: netdev::stats_delta(&eth0, &eth1),
    })
}

/// What the generator thread ends with (its panic first, then entering ns a, then its own).
type GenJoined = LabResult<Result<LabResult<GenOutcome>, fastpath_testbed::TestbedError>>;

/// The generator (xdp-live, `d.threads` threads from `d.gen_cpu`) in ns a for `d.duration_s`
/// (or until `global_stop`); waits for it.
fn generate(bed: &Testbed, d: &DemoOptions, global_stop: &Arc<AtomicBool>) -> GenJoined {
    let (threads, gen_cpu, app_cpu, dur) = (d.threads, d.gen_cpu, d.app_cpu, Duration::from_secs_f64(d.duration_s));
    let (if_a, mac_b) = (bed.iface_a().to_string(), bed.mac_b());
    let gstop = global_stop.clone();
    spawn_in_netns(bed.ns_a(), move || -> LabResult<GenOutcome> {
        let dev = NetDev::by_name(&if_a).map_err(runtime)?;
        let frame = crate::frame::testbed_frame(&dev, mac_b).map_err(runtime)?;
        let gen = Arc::new(XdpGen::load(dev.ifindex)?);
        let eth0 = dev.ethtool_stats().unwrap_or_default();
        let sent0 = gen.total_sent()?;
        let ncpu = fastpath::workers::online_cpus();
        let cpus: Vec<usize> = (0..threads as usize).map(|i| (gen_cpu + i) % ncpu).collect();
        let counters: Vec<Arc<Counters>> = cpus.iter().map(|_| Arc::new(Counters::default())).collect();
        let cpu0 = fastpath_tools::stats::CpuTimes::read().ok();
        let t0 = Instant::now();
        let live =
            bench::LiveGen::start(gen.clone(), &frame, &cpus, SendLimits::default(), 64, &counters).map_err(runtime)?;
        while t0.elapsed() < dur && !gstop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        live.stop().map_err(runtime)?;
        let elapsed = t0.elapsed().as_secs_f64();
        let sent = gen.total_sent()? - sent0;
        let eth1 = dev.ethtool_stats().unwrap_or_default();
        let cpu1 = fastpath_tools::stats::CpuTimes::read().ok();
        let busy = |c: usize| match (&cpu0, &cpu1) {
            (Some(a), Some(b)) => b.busy_since(a, c),
            _ => None,
        };
        let gen_busy = cpus.iter().filter_map(|&c| busy(c)).reduce(f64::max);
        let app_busy = busy(app_cpu);
        Ok((sent, elapsed, netdev::stats_delta(&eth0, &eth1), gen_busy, app_busy))
    })
    .join()
    .map_err(|_| runtime(anyhow!("generator panicked")))
}

/// The drop counters of a phase, by name: the socket's receive drops, and the drop/error
/// counters of the receiving veth (`rx`) and the sending one (`gen_eth`).
fn drop_counters(bed: &Testbed, rx: &RxResult, gen_eth: &[(String, u64)]) -> BTreeMap<String, u64> {
    let mut drops = BTreeMap::new();
    if let Some(x) = &rx.xsk {
        for (k, v) in x.fields() {
            // rx_fill_ring_empty_descs counts the same losses as rx_dropped in copy mode.
            if v != 0 && k.starts_with("rx_") && k != "rx_fill_ring_empty_descs" {
                drops.insert(format!("xsk.{k}"), v);
            }
        }
    }
    for (k, v) in &rx.ethtool {
        if is_drop_counter(k) {
            drops.insert(format!("{}.{k}", bed.iface_b()), *v);
        }
    }
    for (k, v) in gen_eth {
        if is_drop_counter(k) {
            drops.insert(format!("{}.{k}", bed.iface_a()), *v);
        }
    }
    drops
}

/// What `demo` is asked for (the front end has checked every value).
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Seconds per phase.
    pub duration_s: f64,
    /// Generator threads (xdp-live), one per CPU from `gen_cpu` up.
    pub threads: u32,
    /// CPU of the receiving application.
    pub app_cpu: usize,
    /// First CPU of the generator threads.
    pub gen_cpu: usize,
}

/// A finished demo: its rows and its test bed, still up until [`DemoRun::down`] (or drop).
pub struct DemoRun {
    bed: Testbed,
    /// One row per phase run: AF_XDP rxdrop, then XDP_DROP (fewer when interrupted).
    pub rows: Vec<Row>,
    /// AF_XDP rxdrop's received Mpps in % of XDP_DROP's, when both ran.
    pub rxdrop_pct_of_xdp_drop: Option<f64>,
    /// `stop` was raised: not every phase ran.
    pub interrupted: bool,
}

/// Runs the demo: a test bed (no IPv6), xdp-live traffic into AF_XDP rxdrop, then into
/// in-kernel XDP_DROP, both opened with `open_rx` in the receiving namespace. `progress` gets
/// one line once the test bed is up, one per phase with the time left ([`crate::progress`]) and
/// one at the end. Stops between phases when `stop` is raised.
///
/// Needs root: creates network namespaces, attaches XDP programs.
///
/// # Errors
///
/// [`LabError::Testbed`] when the test bed cannot be made, `open_rx`'s error, [`LabError::Bpf`]
/// when the generator cannot be loaded, [`LabError::Runtime`] when a phase fails.
pub fn run(
    o: &DemoOptions,
    stop: &Arc<AtomicBool>,
    open_rx: &OpenRx,
    progress: &mut dyn FnMut(&str),
) -> LabResult<DemoRun> {
    // No IPv6 on the demo's veth: the kernels then send nothing of their own across it, so every
    // frame counted is the generator's.
    let bed = Testbed::up(&TestbedConfig { name: None, queues: 1, sender_qdisc: false, ipv6: false })?;
    progress(&format!(
        "demo: test bed {} ({} -> {}), 64-byte UDP frames from xdp-live ({} thread(s) from CPU {}), receiver on CPU {}, {} s per phase",
        bed.name(), bed.iface_a(), bed.iface_b(), o.threads, o.gen_cpu, o.app_cpu, o.duration_s
    ));
    let mut rows = Vec::new();
    let mut pr = crate::progress::Progress::new("demo", vec![o.duration_s + 2.0; 2], progress);
    for drop_only in [false, true] {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        pr.phase(if drop_only { "in-kernel XDP_DROP" } else { "AF_XDP rxdrop" });
        rows.push(phase(&bed, drop_only, o, stop, open_rx)?);
    }
    pr.finish();
    let interrupted = stop.load(Ordering::Relaxed);
    let xdp = rows.iter().find(|r| r.path.starts_with("XDP_DROP")).map(|r| r.received_mpps);
    let rx = rows.iter().find(|r| r.path.starts_with("AF_XDP")).map(|r| r.received_mpps);
    let pct = match (rx, xdp) {
        (Some(a), Some(b)) if b > 0.0 => Some(100.0 * a / b),
        _ => None,
    };
    Ok(DemoRun { bed, rows, rxdrop_pct_of_xdp_drop: pct, interrupted })
}

impl DemoRun {
    /// The result as one JSON object (`testbed`, `frame_len`, `gen_threads`, `gen_cpu`,
    /// `app_cpu`, `duration_s`, `rows`, `rxdrop_pct_of_xdp_drop`, `ratio_note`, `interrupted`).
    pub fn json(&self, o: &DemoOptions) -> serde_json::Value {
        json!({
            "testbed": self.bed.name(), "frame_len": 64, "gen_threads": o.threads, "gen_cpu": o.gen_cpu, "app_cpu": o.app_cpu,
            "duration_s": o.duration_s, "rows": self.rows, "rxdrop_pct_of_xdp_drop": self.rxdrop_pct_of_xdp_drop,
            "ratio_note": ratio_note(&self.rows), "interrupted": self.interrupted,
        })
    }

    /// The table, every line ending in a newline.
    pub fn table(&self) -> String {
        table(&self.rows, self.rxdrop_pct_of_xdp_drop)
    }

    /// Removes the test bed.
    ///
    /// # Errors
    ///
    /// [`LabError::Testbed`] when it cannot be removed.
    pub fn down(self) -> LabResult<()> {
        Ok(self.bed.down()?)
    }
}

/// What the ratio of the two figures means, given who bound each one.
fn ratio_note(rows: &[Row]) -> Option<String> {
    let rx = rows.iter().find(|r| r.path.starts_with("AF_XDP"))?;
    let xdp = rows.iter().find(|r| r.path.starts_with("XDP_DROP"))?;
    Some(match (rx.bound_by, xdp.bound_by) {
        ("receiver", "receiver") => "both figures are receiver limits: the ratio compares the two receive paths".into(),
        (_, "generator") if rx.bound_by == "receiver" => format!(
            "XDP_DROP took everything the generator made ({}): its capacity is higher than {:.2} Mpps, so the ratio is an upper bound of AF_XDP rxdrop's share",
            xdp.bound_reason, xdp.received_mpps
        ),
        ("generator", "generator") => "both figures are the generator's limit: the ratio compares the generator in two set-ups, not the receive paths (try --threads 2)"
            .into(),
        (a, b) => format!("AF_XDP rxdrop bound by {a}, XDP_DROP bound by {b}: read the ratio with that in mind"),
    })
}

fn table(rows: &[Row], pct: Option<f64>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<22} {:<12} {:>14} {:>14} {:>8} {:>9}  {:<10} kernel drop counters (non-zero)",
        "path", "mode", "sent", "received", "Mpps", "sent Mpps", "bound by"
    );
    for r in rows {
        let mode = match (r.xdp_mode, r.copy_mode) {
            (Some(x), Some(c)) => format!("{x}/{c}"),
            (Some(x), None) => x.to_string(),
            _ => "-".into(),
        };
        let drops = if r.drop_counters.is_empty() {
            "none".to_string()
        } else {
            r.drop_counters.iter().map(|(k, v)| format!("{k} {}", thousands(*v))).collect::<Vec<_>>().join(", ")
        };
        let _ = writeln!(
            s,
            "{:<22} {:<12} {:>14} {:>14} {:>8.2} {:>9.2}  {:<10} {}",
            r.path,
            mode,
            thousands(r.sent),
            thousands(r.received),
            r.received_mpps,
            r.sent_mpps,
            r.bound_by,
            drops
        );
        if r.unaccounted != 0 {
            let _ = writeln!(
                s,
                "{:<22} {} packets sent but neither received nor counted by a drop counter",
                "", r.unaccounted
            );
        }
    }
    if let Some(p) = pct {
        let _ = writeln!(s, "AF_XDP rxdrop = {p:.1}% of in-kernel XDP_DROP (same test bed, same run)");
    }
    let cpu = |b: Option<f64>| b.map_or("?".to_string(), |b| format!("{b:.0}%"));
    for r in rows {
        let _ =
            writeln!(s,
            "cpu busy: {}: generator {}, app {} (from /proc/stat over the phase; other load on the machine counts too)",
            r.path,
            cpu(r.gen_cpu_busy_pct),
            cpu(r.app_cpu_busy_pct)
        );
    }
    for r in rows {
        let _ = writeln!(s, "bound by {}: {}: {}", r.bound_by, r.path, r.bound_reason);
    }
    if let Some(n) = ratio_note(rows) {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_by_follows_the_counters() {
        assert_eq!(bound_by(10, 0, Some(1.0), Some(1.0)).0, "receiver");
        assert_eq!(bound_by(10, 5, Some(0.2), Some(0.3)).0, "receiver", "receiver drops decide first");
        assert_eq!(bound_by(0, 0, Some(0.99), Some(0.1)).0, "generator");
        assert_eq!(bound_by(0, 7, Some(0.5), Some(0.1)).0, "generator", "refusals at the sender");
        assert_eq!(bound_by(0, 0, Some(0.5), Some(0.5)).0, "unclear");
        assert_eq!(bound_by(0, 0, None, None).0, "unclear");
        assert!(bound_by(0, 3, Some(0.95), None).1.contains("3 frames refused"));
    }
}
