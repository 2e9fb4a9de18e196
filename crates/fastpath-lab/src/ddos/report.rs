//! What a run of `bench ddos` reports: the survivable flood rate of each defence ([`survival`],
//! [`Survival`]), the tables ([`DdosBed::table`], [`DdosBed::side_by_side`]) and the chart
//! ([`svg`], [`DdosBed::svg`]).

use fastpath_tools::stats::thousands;
use serde::Serialize;

use super::bed::DdosBed;
use super::defence::Defence;
use super::flood::{FloodRate, Model};
use super::phase::Phase;
use super::service::PROBE_CONNECTS;

/// Per defence: the highest offered rate at which the service kept >= 50% of its no-flood
/// transactions/s (None: not even the lowest).
#[derive(Debug, Clone, Serialize)]
pub struct Survival {
    /// The flood model ([`Model::name`]).
    pub model: &'static str,
    /// The defence's name.
    pub defence: &'static str,
    /// The survivable rate as given ("250k"), None: not even the lowest.
    pub survivable: Option<String>,
    /// The same in frames/s.
    pub survivable_pps: Option<f64>,
}

/// A latency for the table: one decimal, or "-" when the service was unreachable.
fn us(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into())
}

/// A connect time for the table: ms with two decimals, or "-" when none succeeded.
fn ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into())
}

/// The survivable flood rate of each defence (see [`Survival`]) in one model, from the phases
/// of [`DdosBed::run`] (those of other models are ignored) and that model's no-flood
/// transactions/s.
pub fn survival(phases: &[Phase], model: Model, defences: &[Defence], baseline_tps: f64) -> Vec<Survival> {
    defences
        .iter()
        .map(|d| {
            let best = phases
                .iter()
                .filter(|p| p.model == model.name() && p.defence == d.name() && !p.offered.is_empty())
                .filter(|p| p.transactions_per_s >= 0.5 * baseline_tps)
                .max_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps));
            Survival {
                model: model.name(),
                defence: d.name(),
                survivable: best.map(|p| p.offered.clone()),
                survivable_pps: best.map(|p| p.offered_pps),
            }
        })
        .collect()
}

/// trans/s against offered flood rate, one line per defence; a dashed line at the no-flood
/// figure and one at half of it. `cmd`: the command line shown under the chart; `flood`: the
/// flood's name in the title ("UDP", "SYN").
pub fn svg(
    phases: &[Phase],
    defences: &[Defence],
    rates: &[FloodRate],
    baseline: f64,
    cmd: &str,
    flood: &str,
) -> String {
    let (w, h, l, r, t, b) = (760.0, 440.0, 80.0, 190.0, 40.0, 70.0);
    let pw = w - l - r;
    let ph = h - t - b;
    let ymax = phases.iter().map(|p| p.transactions_per_s).fold(baseline, f64::max) * 1.1;
    let x = |i: usize| l + pw * (i as f64 + 0.5) / rates.len().max(1) as f64;
    let y = |v: f64| t + ph * (1.0 - v / ymax.max(1.0));
    let colors = ["#888888", "#1f77b4", "#2ca02c", "#d62728", "#9467bd"];
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"10\" y=\"22\" font-size=\"14\" font-weight=\"bold\">TCP transactions/s of the service under a {flood} flood, by defence</text>\n"
    );
    s += &format!("<line x1=\"{l}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", t + ph, l + pw, t + ph);
    s += &format!("<line x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" y2=\"{}\" stroke=\"black\"/>\n", t + ph);
    for k in 0..=4 {
        let v = ymax * k as f64 / 4.0;
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
            l - 6.0,
            y(v) + 4.0,
            thousands(v.round() as u64)
        );
    }
    for (i, rt) in rates.iter().enumerate() {
        s += &format!("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{rt}</text>\n", x(i), t + ph + 18.0);
    }
    s += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">offered flood rate (frames/s)</text>\n",
        l + pw / 2.0,
        t + ph + 38.0
    );
    for (v, label) in [(baseline, "no flood"), (baseline / 2.0, "50% (survivable)")] {
        s += &format!(
            "<line x1=\"{l}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"#aaa\" stroke-dasharray=\"4 3\"/>\n<text x=\"{2}\" y=\"{3}\" fill=\"#666\">{label}</text>\n",
            y(v),
            l + pw,
            l + pw + 6.0,
            y(v) + 4.0
        );
    }
    for (di, d) in defences.iter().enumerate() {
        let c = colors[di % colors.len()];
        let pts: Vec<String> = rates
            .iter()
            .enumerate()
            .filter_map(|(i, rt)| {
                phases
                    .iter()
                    .find(|p| p.defence == d.name() && p.offered == rt.to_string())
                    .map(|p| format!("{:.1},{:.1}", x(i), y(p.transactions_per_s)))
            })
            .collect();
        s += &format!("<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>\n", pts.join(" "));
        for p in &pts {
            let (px, py) = p.split_once(',').unwrap_or(("0", "0"));
            s += &format!("<circle cx=\"{px}\" cy=\"{py}\" r=\"3\" fill=\"{c}\"/>\n");
        }
        let ly = t + 16.0 * di as f64 + 60.0;
        s += &format!(
            "<line x1=\"{0}\" y1=\"{ly}\" x2=\"{1}\" y2=\"{ly}\" stroke=\"{c}\" stroke-width=\"2\"/><text x=\"{2}\" y=\"{3}\">{4}</text>\n",
            l + pw + 6.0,
            l + pw + 26.0,
            l + pw + 30.0,
            ly + 4.0,
            d.name()
        );
    }
    s += &format!("<text x=\"10\" y=\"{}\" fill=\"#666\">{cmd}</text>\n</svg>\n", h - 10.0);
    s
}

impl DdosBed {
    /// The no-flood transactions/s of model `m` in `phases` (0 when it has none).
    pub fn baseline(phases: &[Phase], m: Model) -> f64 {
        phases.iter().find(|p| p.model == m.name() && p.offered.is_empty()).map_or(0.0, |p| p.transactions_per_s)
    }

    /// Both models side by side (only with both): per defence and rate the trans/s as a share
    /// of the model's no-flood figure and the NAPI thread's CPU share, then the survivable
    /// rates; every line ending in a newline.
    pub fn side_by_side(&self, phases: &[Phase], surv: &[Survival]) -> String {
        let (pf, co) = (Model::PerFrame, Model::Coalesced);
        let (b_pf, b_co) = (Self::baseline(phases, pf), Self::baseline(phases, co));
        let mut s = format!(
            "models side by side (trans/s as % of the model's no-flood {} / {}; NAPI thread CPU %):\n{:<18} {:>7} {:>12} {:>12} {:>11} {:>11}\n",
            thousands(b_pf.round() as u64),
            thousands(b_co.round() as u64),
            "defence",
            "offered",
            "per-frame %",
            "coalesced %",
            "napi% p-f",
            "napi% coal"
        );
        let find = |m: Model, d: Defence, r: &FloodRate| {
            phases.iter().find(|p| p.model == m.name() && p.defence == d.name() && p.offered == r.to_string())
        };
        let pct = |p: Option<&Phase>, b: f64| {
            p.map(|p| format!("{:.0}", 100.0 * p.transactions_per_s / b.max(1.0))).unwrap_or_else(|| "-".into())
        };
        let napi = |p: Option<&Phase>| p.map(|p| format!("{:.0}", p.napi_thread_cpu_pct)).unwrap_or_else(|| "-".into());
        for d in &self.defences {
            for r in &self.rates {
                let (a, b) = (find(pf, *d, r), find(co, *d, r));
                s += &format!(
                    "{:<18} {:>7} {:>12} {:>12} {:>11} {:>11}\n",
                    d.name(),
                    r.to_string(),
                    pct(a, b_pf),
                    pct(b, b_co),
                    napi(a),
                    napi(b)
                );
            }
        }
        s += "survivable flood rate, per-frame / coalesced:\n";
        for d in &self.defences {
            let of = |m: Model| {
                surv.iter()
                    .find(|v| v.model == m.name() && v.defence == d.name())
                    .and_then(|v| v.survivable.clone())
                    .unwrap_or_else(|| format!("< {}", self.rates.first().map(|r| r.to_string()).unwrap_or_default()))
            };
            s += &format!("  {:<13} {} / {}\n", d.name(), of(pf), of(co));
        }
        s
    }

    /// The table of the phases and the survivable rates ([`survival`]), every line ending in a
    /// newline; `baseline` is the no-flood transactions/s.
    pub fn table(&self, m: Model, phases: &[Phase], surv: &[Survival], baseline: f64) -> String {
        let phases: Vec<&Phase> = phases.iter().filter(|p| p.model == m.name()).collect();
        let surv: Vec<&Survival> = surv.iter().filter(|v| v.model == m.name()).collect();
        let coalesced = m == Model::Coalesced;
        let mut s = format!(
            "{:<18} {:>7} {:>10} {:>7} {:>7} {:>8} {:>11} {:>11} {:>12} {:>7} {:>8} {:>6} {:>12} {:>8} {:>8} {:>8}{}\n",
            "defence",
            "offered",
            "trans/s",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "sent/s",
            "reached/s",
            "refused",
            "paced",
            "softirq%",
            "napi%",
            "dropped",
            "conn ok",
            "conn p50",
            "conn p99",
            if coalesced { format!(" {:>6}", "coal%") } else { String::new() }
        );
        for p in phases {
            s += &format!(
                "{:<18} {:>7} {:>10} {:>7} {:>7} {:>8} {:>11} {:>11} {:>12} {:>7} {:>8.0} {:>6.0} {:>12} {:>8} {:>8} {:>8}{}\n",
                if p.offered.is_empty() { "(no flood)" } else { p.defence },
                p.offered,
                thousands(p.transactions_per_s.round() as u64),
                us(p.latency_p50_us),
                us(p.latency_p99_us),
                us(p.latency_p999_us),
                thousands(p.flood_sent_pps.round() as u64),
                thousands(p.reaching_victim_pps.round() as u64),
                thousands(p.flood_refused),
                p.paced_windows_within_20pct.map(|v| format!("{:.0}%", 100.0 * v)).unwrap_or_else(|| "-".into()),
                p.service_cpu_softirq_pct,
                p.napi_thread_cpu_pct,
                thousands(p.dropped_by_defence),
                format!("{:.0}%", 100.0 * f64::from(p.connects_succeeded) / f64::from(p.connects_attempted.max(1))),
                ms(p.connect_p50_ms),
                ms(p.connect_p99_ms),
                if coalesced {
                    format!(" {:>6}", p.napi_coalescing_pct.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into()))
                } else {
                    String::new()
                }
            );
        }
        s += &format!(
            "survivable flood rate (highest offered rate keeping >= 50% of {} trans/s):\n",
            thousands(baseline.round() as u64)
        );
        for (sv, d) in surv.iter().zip(&self.defences) {
            s += &format!(
                "  {:<18} {:<9} {}\n",
                sv.defence,
                sv.survivable
                    .clone()
                    .unwrap_or_else(|| format!("< {}", self.rates.first().map(|r| r.to_string()).unwrap_or_default())),
                self.flood.describe_defence(*d)
            );
        }
        s += &format!(
            "(latency: sockperf's, half the TCP round trip; sockperf ping-pong --tcp from {} to 10.99.0.2; paced: share of 1 ms windows within 20% of the offered rate; conn ok: share of the connect probe's {PROBE_CONNECTS} new connections (connect within 1 s, one byte echoed) that succeeded, conn p50/p99: their connect times, ms{})\n",
            self.bed.ns_a(),
            if coalesced { "; coal%: share of the service's window the victim's NAPI was held at rx-usecs" } else { "" }
        );
        s
    }

    /// The chart of [`svg`] for this run.
    ///
    /// Of model `m`'s phases only; the model is named under the chart.
    pub fn svg(&self, m: Model, phases: &[Phase], baseline: f64) -> String {
        let ph: Vec<Phase> = phases.iter().filter(|p| p.model == m.name()).cloned().collect();
        let cmd = format!("{} ({} model)", self.command(), m.name());
        svg(&ph, &self.defences, &self.rates, baseline, &cmd, &self.flood.name().to_uppercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survivable_rate_is_the_highest_rate_keeping_half() {
        let ph = |d: &'static str, off: &str, pps: f64, tps: f64| Phase {
            model: "per-frame",
            defence: d,
            offered: off.into(),
            offered_pps: pps,
            transactions_per_s: tps,
            latency_p50_us: None,
            latency_p99_us: None,
            latency_p999_us: None,
            latency_max_us: None,
            service_error: None,
            flood_sent_pps: pps,
            reaching_victim_pps: 0.0,
            flood_sent: 0,
            flood_accepted: 0,
            flood_refused: 0,
            paced_windows_within_20pct: None,
            service_cpu_softirq_pct: 0.0,
            napi_thread_cpu_pct: 0.0,
            dropped_by_defence: 0,
            flood_reached_stack: None,
            napi_coalescing_pct: None,
            syncookie_synack_per_s: None,
            syncookie_synack_sent: None,
            connects_attempted: 0,
            connects_succeeded: 0,
            connect_p50_ms: None,
            connect_p99_ms: None,
        };
        let phases = vec![
            ph("none", "", 0.0, 100.0),
            ph("none", "250k", 250e3, 40.0),
            ph("none", "1M", 1e6, 10.0),
            ph("fastpath", "250k", 250e3, 95.0),
            ph("fastpath", "1M", 1e6, 50.0),
            ph("fastpath", "max", 3.1e6, 49.9),
        ];
        let s = survival(&phases, Model::PerFrame, &[Defence::None, Defence::Fastpath], 100.0);
        assert_eq!(s[0].survivable, None);
        assert_eq!(s[1].survivable.as_deref(), Some("1M"));
        // Another model's rows do not count for this one.
        let mut co = phases.clone();
        co.push(Phase { model: "coalesced", ..ph("none", "2M", 2e6, 99.0) });
        let c = survival(&co, Model::Coalesced, &[Defence::None, Defence::Fastpath], 100.0);
        assert_eq!((c[0].survivable.as_deref(), c[1].survivable.as_deref()), (Some("2M"), None));
        assert_eq!(survival(&co, Model::PerFrame, &[Defence::None], 100.0)[0].survivable, None);
    }
}
