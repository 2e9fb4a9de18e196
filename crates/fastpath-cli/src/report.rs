//! Interval lines in the xdp-bench style and the summary, as text or JSON (docs/ARCHITECTURE.md §6).

use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fastpath::bpf::{XdpDrop, XdpMonitor, XdpMonitorStats};
use fastpath::clock::monotonic_ns;
use fastpath::netdev::{self, NetDev};
use fastpath::xsk::XskStats;
use fastpath_tools::stats::{rate, thousands, Counters, Ctr, COUNTERS};
use serde::Serialize;
use serde_json::{json, Value};

/// Says that set-up is done and what was obtained: `{"type":"ready",...}` with --json (scripts
/// and tests wait for it), a header line and the notes otherwise.
pub fn announce(kind: &str, path: &Value, notes: &[String], json_out: bool) {
    use std::io::Write;
    if json_out {
        println!("{}", json!({"type": "ready", "bench": kind, "path": path}));
    } else {
        let g = |k: &str| path.get(k).and_then(|v| v.as_str()).unwrap_or("-").to_string();
        println!(
            "fastpath {kind}: {} queue {} driver {} xdp {} {}",
            g("iface"),
            path.get("queue").and_then(|v| v.as_u64()).unwrap_or(0),
            g("driver"),
            g("xdp_mode"),
            g("copy_mode")
        );
        for n in notes {
            println!("note: {n}");
        }
    }
    let _ = std::io::stdout().flush();
}

/// The XDP tracepoint monitor of this process (`-e`), attached once by [`attach_tracepoints`].
static TRACEPOINTS: std::sync::OnceLock<XdpMonitor> = std::sync::OnceLock::new();

/// Attaches the XDP tracepoint monitor for the rest of the process (`-e` on `bench` and
/// `filter stats`); the kernel detaches it when the process ends. A kernel without BTF or the
/// tracepoints fails here, in one line naming the feature and the first kernel that has it.
pub fn attach_tracepoints() -> crate::error::CliResult<&'static XdpMonitor> {
    if let Some(m) = TRACEPOINTS.get() {
        return Ok(m);
    }
    if !fastpath::bpf::have_privileges() {
        return Err(crate::error::env(anyhow::anyhow!(
            "-e/--extended attaches the XDP tracepoint monitor: it needs root or CAP_BPF + CAP_PERFMON (try sudo)"
        )));
    }
    let m = XdpMonitor::attach().map_err(|e| crate::error::kernel(anyhow::anyhow!("-e/--extended: {e}")))?;
    Ok(TRACEPOINTS.get_or_init(|| m))
}

/// The monitor attached by [`attach_tracepoints`], if any.
pub fn tracepoints() -> Option<&'static XdpMonitor> {
    TRACEPOINTS.get()
}

/// Text lines of tracepoint counters over `dt_ns`: the non-zero ones, as rates
/// (`  cpumap_enqueue drops to cpu 1: 3,456/s`), or as totals when `dt_ns` is 0.
pub fn tracepoint_lines(d: &XdpMonitorStats, dt_ns: u64) -> Vec<String> {
    d.fields()
        .into_iter()
        .filter(|(_, v)| *v != 0)
        .map(|(n, v)| {
            if dt_ns == 0 {
                format!("  {n}: {}", thousands(v))
            } else {
                format!("  {n}: {}/s", thousands(rate(v, dt_ns).round() as u64))
            }
        })
        .collect()
}

/// What to watch and how to print it.
pub struct Monitor<'a> {
    pub prefix: String,
    /// Counters shown as rates on every line.
    pub columns: &'a [Ctr],
    pub counters: Vec<Arc<Counters>>,
    /// AF_XDP sockets whose XDP_STATISTICS are summed (one per queue).
    pub xsk_fds: Vec<&'a OwnedFd>,
    /// With more than one counter set: a label per set (e.g. "veth0:q1"); each interval then
    /// has a line per set before the total line, and the summary a `per_queue` list.
    pub queue_labels: Vec<String>,
    pub drop: Option<&'a XdpDrop>,
    /// The xdp-live generator: its per-CPU sequence map counts tx_packets exactly, live.
    pub gen: Option<&'a fastpath::bpf::XdpGen>,
    /// Interface whose ethtool counters are read (in this thread's netns).
    pub ethtool_dev: Option<NetDev>,
    pub duration: Duration,
    pub interval: Duration,
    pub json: bool,
    /// Whether interval lines are printed (`RunArgs::interval_lines`); the summary always is.
    pub lines: bool,
    pub extended: bool,
    /// The interface the run depends on: checked every 50 ms; if it is deleted or set down the
    /// run ends and [`Monitor::link_lost`] says what happened.
    pub watch_link: Option<netdev::LinkWatch>,
    pub(crate) link_lost: std::cell::Cell<Option<netdev::LinkEvent>>,
    /// The XDP tracepoint monitor (set by [`Monitor::for_run`] with `-e` once
    /// [`attach_tracepoints`] ran): its counters per interval and over the run ("tracepoints").
    pub tracepoints: Option<&'a XdpMonitor>,
    /// More kernel counters, read at every line: (name ending in `_packets`, cumulative value),
    /// shown as rates next to the columns and as totals in the summary.
    pub extra: Option<&'a dyn Fn() -> Vec<(String, u64)>>,
    /// `--metrics`: the endpoint this run's counters are published to.
    pub metrics: Option<&'a crate::metrics::MetricsServer>,
}

impl<'a> Monitor<'a> {
    /// A monitor of `counters` for a run shaped by `run` (duration, interval, JSON, extended);
    /// set the kernel sources (`xsk_fds`, `drop`, `gen`, `ethtool_dev`) on the result.
    pub fn for_run(
        prefix: String,
        columns: &'a [Ctr],
        counters: Vec<Arc<Counters>>,
        run: &crate::args::RunArgs,
    ) -> Self {
        Self {
            prefix,
            columns,
            counters,
            xsk_fds: Vec::new(),
            queue_labels: Vec::new(),
            drop: None,
            gen: None,
            ethtool_dev: None,
            duration: Duration::from_secs_f64(run.duration),
            interval: Duration::from_secs_f64(run.interval),
            json: run.json,
            lines: run.interval_lines,
            extended: run.extended,
            watch_link: None,
            link_lost: std::cell::Cell::new(None),
            tracepoints: if run.extended { tracepoints() } else { None },
            extra: None,
            metrics: None,
        }
    }

    /// Publishes the counters (cumulative, per counter set) and XDP_STATISTICS (per socket) to
    /// the `--metrics` endpoint, if there is one and a publish is due (`force`: now).
    fn publish_metrics(&self, force: bool) {
        let Some(m) = self.metrics else { return };
        if !force && !m.due() {
            return;
        }
        use crate::metrics::Family;
        let labels: Vec<String> =
            if self.queue_labels.is_empty() { vec![self.prefix.clone()] } else { self.queue_labels.clone() };
        let mut fams: Vec<Family> = Vec::new();
        // One read of every counter set (and of the kernel's maps) per publish.
        let total = sum(&self.counters, self.drop, self.gen);
        let per_set: Vec<[u64; 7]> = self.counters.iter().map(|c| c.snapshot()).collect();
        for (k, def) in fastpath_tools::stats::COUNTERS.iter().enumerate() {
            let name = match def.name {
                "tx_completed" => "fastpath_tx_completed_packets_total".to_string(),
                n => format!("fastpath_{n}_total"),
            };
            let mut f = Family::counter(name, def.help, &["port"]);
            if labels.len() == 1 {
                f.add(&[&labels[0]], total[k] as f64);
            } else {
                for (c, l) in per_set.iter().zip(&labels) {
                    f.add(&[l], c[k] as f64);
                }
            }
            fams.push(f);
        }
        let xsk = read_xsk(&self.xsk_fds);
        if !xsk.is_empty() {
            for (i, (name, _)) in XskStats::default().fields().iter().enumerate() {
                let mut f = Family::counter(
                    crate::metrics::xsk_metric_name(name),
                    format!("XDP_STATISTICS {name} of the AF_XDP socket (include/uapi/linux/if_xdp.h)"),
                    &["port"],
                );
                for (s, l) in xsk.iter().zip(labels.iter().cycle()) {
                    if let Some(s) = s {
                        f.add(&[l], s.fields()[i].1 as f64);
                    }
                }
                fams.push(f);
            }
        }
        m.publish(&fams);
    }

    /// What happened to [`Monitor::watch_link`], if the run ended because of it.
    pub fn link_lost(&self) -> Option<netdev::LinkEvent> {
        self.link_lost.get()
    }
}

/// Totals of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub duration_s: f64,
    pub totals: BTreeMap<&'static str, u64>,
    pub rates_pps: BTreeMap<String, f64>,
    pub xdp_statistics: Option<XskStats>,
    /// Per queue (runs with more than one): totals, rates and XDP_STATISTICS of each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_queue: Vec<Value>,
    /// Non-zero ethtool -S deltas of the interface over the run.
    pub ethtool: BTreeMap<String, u64>,
    /// The interface's own packet counters over the run (/proc/net/dev of its namespace).
    pub link: Option<netdev::LinkStats>,
    /// Tracepoint counters over the run (`-e`).
    pub tracepoints: Option<XdpMonitorStats>,
    /// [`Monitor::extra`] counters over the run.
    pub extra: BTreeMap<String, u64>,
}

impl Summary {
    pub fn total(&self, c: Ctr) -> u64 {
        self.totals.get(COUNTERS[c as usize].name).copied().unwrap_or(0)
    }
    pub fn pps(&self, c: Ctr) -> f64 {
        rate(self.total(c), (self.duration_s * 1e9) as u64)
    }
}

fn sum(counters: &[Arc<Counters>], drop: Option<&XdpDrop>, gen: Option<&fastpath::bpf::XdpGen>) -> [u64; 7] {
    let mut t = [0u64; 7];
    for c in counters {
        for (a, b) in t.iter_mut().zip(c.snapshot()) {
            *a += b;
        }
    }
    if let Some(d) = drop {
        t[Ctr::DropPackets as usize] = d.counters().map(|(p, _)| p).unwrap_or(0);
    }
    if let Some(g) = gen {
        t[Ctr::TxPackets as usize] = g.total_sent().unwrap_or(0);
    }
    t
}

/// XDP_STATISTICS of each fd (None for one that cannot be read).
fn read_xsk(fds: &[&OwnedFd]) -> Vec<Option<XskStats>> {
    fds.iter().map(|f| XskStats::read(f.as_fd()).ok()).collect()
}

/// Field-wise sum; None if there is no fd or none could be read.
fn total_xsk(v: &[Option<XskStats>]) -> Option<XskStats> {
    let mut it = v.iter().flatten().peekable();
    it.peek()?;
    let mut t = XskStats::default();
    for x in it {
        t.rx_dropped += x.rx_dropped;
        t.rx_invalid_descs += x.rx_invalid_descs;
        t.tx_invalid_descs += x.tx_invalid_descs;
        t.rx_ring_full += x.rx_ring_full;
        t.rx_fill_ring_empty_descs += x.rx_fill_ring_empty_descs;
        t.tx_ring_empty_descs += x.tx_ring_empty_descs;
    }
    Some(t)
}

fn delta_xsk(a: &[Option<XskStats>], b: &[Option<XskStats>]) -> Vec<Option<XskStats>> {
    a.iter()
        .zip(b)
        .map(|(x, y)| match (x, y) {
            (Some(x), Some(y)) => Some(x.delta(y)),
            _ => None,
        })
        .collect()
}

/// The state of a run taken before its first packet: counter, XDP_STATISTICS and ethtool
/// baselines and the start time. Take it BEFORE the worker starts, so no frame the worker moves
/// falls before the baseline (a paced `gen --count N` once reported ~100 frames short when the
/// worker beat the monitor to it).
pub struct Watch {
    eth0: Vec<(String, u64)>,
    link0: Option<netdev::LinkStats>,
    xsk0: Vec<Option<XskStats>>,
    base: [u64; 7],
    base_q: Vec<[u64; 7]>,
    t0: u64,
    tp0: Option<XdpMonitorStats>,
    extra0: Vec<(String, u64)>,
}

impl Monitor<'_> {
    /// Prints interval lines until the duration passes, `stop` is set (signal) or `done` is set
    /// (the worker finished); returns the summary over the whole measured period.
    pub fn run(&self, stop: &AtomicBool, done: &AtomicBool) -> Summary {
        let w = self.start();
        self.watch(&w, stop, done);
        self.finish(w)
    }

    /// Takes the baselines. Call before starting the worker.
    pub fn start(&self) -> Watch {
        let eth0 = self.ethtool_dev.as_ref().and_then(|d| d.ethtool_stats().ok()).unwrap_or_default();
        let link0 = self.ethtool_dev.as_ref().and_then(|d| d.link_stats().ok());
        let xsk0 = read_xsk(&self.xsk_fds);
        let base = sum(&self.counters, self.drop, self.gen);
        let base_q = self.per_queue_snapshot();
        if let (Some(t), Some(d)) = (self.tracepoints, self.ethtool_dev.as_ref()) {
            // Only this run's interface where the tracepoint names one.
            let _ = t.set_ifindex(d.ifindex);
        }
        let tp0 = self.tracepoints.and_then(|t| t.snapshot().ok());
        let extra0 = self.extra.map(|f| f()).unwrap_or_default();
        self.publish_metrics(true);
        Watch { eth0, link0, xsk0, base, base_q, t0: monotonic_ns(), tp0, extra0 }
    }

    fn per_queue_snapshot(&self) -> Vec<[u64; 7]> {
        if self.queue_labels.is_empty() {
            return Vec::new();
        }
        self.counters.iter().map(|c| c.snapshot()).collect()
    }

    /// Prints interval lines until the duration (from `w`'s start) passes, `stop` or `done`.
    pub fn watch(&self, w: &Watch, stop: &AtomicBool, done: &AtomicBool) {
        let start = Instant::now() - Duration::from_nanos(monotonic_ns().saturating_sub(w.t0));
        let (mut prev, mut prev_t, mut prev_xsk) = (w.base, w.t0, w.xsk0.clone());
        let mut prev_q = w.base_q.clone();
        let (mut prev_tp, mut prev_extra) = (w.tp0.clone(), w.extra0.clone());
        let mut next = start + self.interval;
        let mut watch = self.watch_link.clone();
        loop {
            let finished = stop.load(Ordering::Relaxed) || done.load(Ordering::Relaxed);
            if let Some(ev) = watch.as_mut().and_then(|w| w.poll()) {
                self.link_lost.set(Some(ev));
                break;
            }
            self.publish_metrics(false);
            let now = Instant::now();
            if finished || now >= start + self.duration {
                break;
            }
            if now < next {
                std::thread::sleep((next.min(start + self.duration) - now).min(Duration::from_millis(50)));
                continue;
            }
            next += self.interval;
            let cur = sum(&self.counters, self.drop, self.gen);
            let cur_q = self.per_queue_snapshot();
            let t = monotonic_ns();
            let xsk = read_xsk(&self.xsk_fds);
            let d = delta_xsk(&xsk, &prev_xsk);
            for (i, label) in self.queue_labels.iter().enumerate() {
                if let (Some(a), Some(b)) = (prev_q.get(i), cur_q.get(i)) {
                    self.line(label, a, b, t - prev_t, d.get(i).copied().flatten(), None, &[]);
                }
            }
            let tp = self.tracepoints.and_then(|m| m.snapshot().ok());
            let extra = self.extra.map(|f| f()).unwrap_or_default();
            let tp_delta = match (&tp, &prev_tp) {
                (Some(a), Some(b)) => Some(a.delta(b)),
                _ => None,
            };
            let extra_delta = delta_named(&extra, &prev_extra);
            self.line(&self.prefix, &prev, &cur, t - prev_t, total_xsk(&d), tp_delta.as_ref(), &extra_delta);
            (prev_tp, prev_extra) = (tp, extra);
            prev = cur;
            prev_q = cur_q;
            prev_t = t;
            prev_xsk = xsk;
        }
    }

    /// The summary from `w`'s baselines to now. Call after the worker has ended (joined), so
    /// its last counts (final completions) are in.
    pub fn finish(&self, w: Watch) -> Summary {
        self.publish_metrics(true);
        let end = sum(&self.counters, self.drop, self.gen);
        let tracepoints = match (self.tracepoints.and_then(|m| m.snapshot().ok()), &w.tp0) {
            (Some(a), Some(b)) => Some(a.delta(b)),
            _ => None,
        };
        let extra = delta_named(&self.extra.map(|f| f()).unwrap_or_default(), &w.extra0).into_iter().collect();
        let t1 = monotonic_ns();
        let elapsed = t1 - w.t0;
        let mut totals = BTreeMap::new();
        let mut rates = BTreeMap::new();
        for (i, d) in COUNTERS.iter().enumerate() {
            let v = end[i].saturating_sub(w.base[i]);
            totals.insert(d.name, v);
            if let Some(n) = d.name.strip_suffix("_packets") {
                rates.insert(format!("{n}_pps"), rate(v, elapsed));
            }
        }
        let xsk_d = delta_xsk(&read_xsk(&self.xsk_fds), &w.xsk0);
        let xdp_statistics = total_xsk(&xsk_d);
        let end_q = self.per_queue_snapshot();
        let per_queue = self
            .queue_labels
            .iter()
            .enumerate()
            .filter_map(|(i, label)| {
                let (a, b) = (w.base_q.get(i)?, end_q.get(i)?);
                let mut t = BTreeMap::new();
                let mut r = BTreeMap::new();
                for (k, d) in COUNTERS.iter().enumerate() {
                    let v = b[k].saturating_sub(a[k]);
                    t.insert(d.name, v);
                    if let Some(n) = d.name.strip_suffix("_packets") {
                        r.insert(format!("{n}_pps"), rate(v, elapsed));
                    }
                }
                Some(json!({"queue": label, "totals": t, "rates_pps": r, "xdp_statistics": xsk_d.get(i).copied().flatten()}))
            })
            .collect();
        let eth1 = self.ethtool_dev.as_ref().and_then(|d| d.ethtool_stats().ok()).unwrap_or_default();
        let link = match (w.link0, self.ethtool_dev.as_ref().and_then(|d| d.link_stats().ok())) {
            (Some(a), Some(b)) => Some(b.delta(&a)),
            _ => None,
        };
        Summary {
            duration_s: elapsed as f64 / 1e9,
            totals,
            rates_pps: rates,
            xdp_statistics,
            per_queue,
            ethtool: netdev::stats_delta(&w.eth0, &eth1).into_iter().collect(),
            link,
            tracepoints,
            extra,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn line(
        &self,
        prefix: &str,
        prev: &[u64; 7],
        cur: &[u64; 7],
        dt_ns: u64,
        xsk: Option<XskStats>,
        tp: Option<&XdpMonitorStats>,
        extra: &[(String, u64)],
    ) {
        if !self.lines {
            return;
        }
        let per_s = |c: Ctr| rate(cur[c as usize].saturating_sub(prev[c as usize]), dt_ns);
        if self.json {
            let mut o = serde_json::Map::new();
            o.insert("type".into(), json!("interval"));
            o.insert("prefix".into(), json!(prefix));
            o.insert("period_ns".into(), json!(dt_ns));
            for &c in self.columns.iter().chain(if self.extended {
                &[Ctr::RxBytes, Ctr::TxBytes, Ctr::Wakeups][..]
            } else {
                &[]
            }) {
                let name = COUNTERS[c as usize].name;
                let key = name.strip_suffix("_packets").map(|n| format!("{n}_pps")).unwrap_or_else(|| {
                    name.strip_suffix("_bytes").map(|n| format!("{n}_bps")).unwrap_or_else(|| format!("{name}_per_s"))
                });
                let v = if name.ends_with("_bytes") { per_s(c) * 8.0 } else { per_s(c) };
                o.insert(key, json!(v.round()));
            }
            if let Some(x) = xsk {
                o.insert("xdp_statistics".into(), serde_json::to_value(x).unwrap_or(Value::Null));
            }
            for (name, v) in extra {
                let key = name.strip_suffix("_packets").map(|n| format!("{n}_pps")).unwrap_or_else(|| name.clone());
                o.insert(key, json!(rate(*v, dt_ns).round()));
            }
            if let Some(t) = tp {
                // Counts over this interval's period_ns, under their tracepoint's name.
                o.insert("tracepoints".into(), serde_json::to_value(t).unwrap_or(Value::Null));
            }
            println!("{}", Value::Object(o));
            return;
        }
        let mut s = format!("{:<14}", prefix);
        for &c in self.columns {
            s += &format!(" {:>13} {:<7}", thousands(per_s(c).round() as u64), COUNTERS[c as usize].rate_label);
        }
        for (name, v) in extra {
            let label = name.strip_suffix("_packets").unwrap_or(name);
            s += &format!(" {:>13} {label}/s", thousands(rate(*v, dt_ns).round() as u64));
        }
        if self.extended {
            for c in [Ctr::RxBytes, Ctr::TxBytes] {
                if self.columns.contains(&if c == Ctr::RxBytes { Ctr::RxPackets } else { Ctr::TxPackets }) {
                    s += &format!(
                        " {:>9.1} {:<7}",
                        per_s(c) * 8.0 / 1e6,
                        if c == Ctr::RxBytes { "rx_Mb/s" } else { "tx_Mb/s" }
                    );
                }
            }
            if !self.columns.is_empty() {
                s += &format!(" {:>11} wake/s", thousands(per_s(Ctr::Wakeups).round() as u64));
            }
        }
        if let Some(x) = xsk {
            for (name, v) in x.fields() {
                if v != 0 || self.extended {
                    s += &format!("  {} {}/s", thousands(rate(v, dt_ns).round() as u64), name);
                }
            }
        }
        println!("{s}");
        if let Some(t) = tp {
            for l in tracepoint_lines(t, dt_ns) {
                println!("{l}");
            }
        }
    }
}

/// Frames the peer accepted and frames it refused over the run, from the sending interface's
/// own counters (on a veth: `tx_packets` counts what the peer took, `tx_dropped` what it refused;
/// `xdp_xmit_errors` of ethtool -S are the XDP-redirected share of the refusals).
pub fn delivery(s: &Summary) -> Option<(u64, u64)> {
    let l = s.link?;
    let xmit_err: u64 = s.ethtool.iter().filter(|(k, _)| k.contains("xdp_xmit_err")).map(|(_, v)| *v).sum();
    Some((l.tx_packets, l.tx_dropped.max(xmit_err)))
}

/// Adds `delivered`, `refused` and `delivered_pps` (see [`delivery`]) to a sender's summary.
pub fn insert_delivery(extra: &mut serde_json::Map<String, Value>, s: &Summary) {
    if let Some((delivered, refused)) = delivery(s) {
        extra.insert("delivered".into(), json!(delivered));
        extra.insert("refused".into(), json!(refused));
        extra.insert("delivered_pps".into(), json!(rate(delivered, (s.duration_s * 1e9) as u64).round() as u64));
    }
}

/// Prints the summary block (text) or object (JSON).
pub fn print_summary(kind: &str, path: &Value, s: &Summary, columns: &[Ctr], json_out: bool, extra: Value) {
    if json_out {
        let mut o = json!({"type": "summary", "bench": kind, "path": path, "duration_s": s.duration_s,
            "totals": s.totals, "rates_pps": s.rates_pps, "xdp_statistics": s.xdp_statistics, "ethtool": s.ethtool, "link": s.link});
        if !s.per_queue.is_empty() {
            o["per_queue"] = json!(s.per_queue);
        }
        for (name, v) in &s.extra {
            o["totals"][name] = json!(v);
            if let Some(n) = name.strip_suffix("_packets") {
                o["rates_pps"][format!("{n}_pps")] = json!(rate(*v, (s.duration_s * 1e9) as u64));
            }
        }
        if let Some(t) = &s.tracepoints {
            o["tracepoints"] = serde_json::to_value(t).unwrap_or(Value::Null);
        }
        if let (Value::Object(o), Value::Object(e)) = (&mut o, extra) {
            o.extend(e);
        }
        println!("{o}");
        return;
    }
    println!("Summary  {kind}  {}", describe_path(path));
    for &c in columns {
        let d = COUNTERS[c as usize];
        println!(
            "  {:<16} {:>16}  {:>13} {}",
            d.name,
            thousands(s.total(c)),
            thousands(s.pps(c).round() as u64),
            d.rate_label
        );
    }
    for q in &s.per_queue {
        let cols: Vec<String> = columns
            .iter()
            .map(|&c| {
                let d = COUNTERS[c as usize];
                format!("{} {}", d.name, thousands(q["totals"][d.name].as_u64().unwrap_or(0)))
            })
            .collect();
        println!("  {:<16} {}", q["queue"].as_str().unwrap_or("-"), cols.join(", "));
    }
    for (name, v) in &s.extra {
        let label = name.strip_suffix("_packets").unwrap_or(name);
        println!(
            "  {:<16} {:>16}  {:>13} {label}/s",
            name,
            thousands(*v),
            thousands(rate(*v, (s.duration_s * 1e9) as u64).round() as u64)
        );
    }
    if let Some(t) = &s.tracepoints {
        let lines = tracepoint_lines(t, 0);
        println!("  tracepoints{}", if lines.is_empty() { "      no XDP drops or errors reported" } else { "" });
        for l in lines {
            println!("  {l}");
        }
    }
    if let Some(x) = s.xdp_statistics {
        let nz: Vec<String> =
            x.fields().iter().filter(|(_, v)| *v != 0).map(|(k, v)| format!("{k} {}", thousands(*v))).collect();
        println!("  XDP_STATISTICS   {}", if nz.is_empty() { "all six counters zero".into() } else { nz.join(", ") });
    }
    if !s.ethtool.is_empty() {
        let v: Vec<String> = s.ethtool.iter().map(|(k, v)| format!("{k} {}", thousands(*v))).collect();
        println!("  ethtool -S       {}", v.join(", "));
    }
    if let Value::Object(e) = extra {
        for (k, v) in e {
            match v.as_u64() {
                Some(n) => println!("  {k:<16} {:>16}", thousands(n)),
                None => println!("  {k:<16} {v}"),
            }
        }
    }
    println!("  duration         {:.2} s", s.duration_s);
}

fn describe_path(p: &Value) -> String {
    let g = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or("-").to_string();
    let mut s =
        format!("{}:q{}  driver {}", g("iface"), p.get("queue").and_then(|v| v.as_u64()).unwrap_or(0), g("driver"));
    if p.get("xdp_mode").is_some_and(|v| !v.is_null()) {
        s += &format!("  xdp {}", g("xdp_mode"));
    }
    if p.get("copy_mode").is_some_and(|v| !v.is_null()) {
        s += &format!(
            "  {}  need_wakeup {}  busy_poll {}",
            g("copy_mode"),
            if p["need_wakeup"].as_bool() == Some(true) { "on" } else { "off" },
            if p["busy_poll"].as_bool() == Some(true) { "on" } else { "off" }
        );
    }
    s
}

/// `later - earlier` by name (names of `later`).
fn delta_named(later: &[(String, u64)], earlier: &[(String, u64)]) -> Vec<(String, u64)> {
    later
        .iter()
        .map(|(n, v)| {
            let e = earlier.iter().find(|(m, _)| m == n).map_or(0, |(_, e)| *e);
            (n.clone(), v.saturating_sub(e))
        })
        .collect()
}
