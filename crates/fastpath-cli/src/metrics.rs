//! `--metrics ADDR:PORT` on the long-running commands (bench, gen, fwd, filter load / stats): a
//! Prometheus text-format endpoint (`GET /metrics`, text format 0.0.4, encoded by the
//! `prometheus` crate, served by `tiny_http` on a thread of its own). The command's loop
//! publishes its counters as it goes (every interval check, at most every 100 ms), so a scrape
//! is at most that old; the endpoint serves until the command ends. Names carry their unit
//! (`_packets_total`, `_bytes_total`, `_frames_total`, `_descs_total`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use prometheus::{Encoder, IntCounterVec, Opts, Registry, TextEncoder};

use crate::error::{env, CliResult};

/// One counter family: name (with its unit, ending in `_total`), help, label names, and a
/// value per label set. Every metric fastpath serves is a counter: it reports what happened.
#[derive(Debug, Clone)]
pub struct Family {
    pub name: String,
    pub help: String,
    pub labels: Vec<&'static str>,
    pub samples: Vec<(Vec<String>, u64)>,
}

impl Family {
    pub fn counter(name: impl Into<String>, help: impl Into<String>, labels: &[&'static str]) -> Self {
        Self { name: name.into(), help: help.into(), labels: labels.to_vec(), samples: Vec::new() }
    }
    /// One sample: label values in the order of the label names.
    pub fn add(&mut self, labels: &[&str], v: f64) {
        self.samples.push((labels.iter().map(|s| s.to_string()).collect(), v as u64));
    }
}

/// Encodes `families` in the Prometheus text format.
pub fn encode(families: &[Family]) -> anyhow::Result<String> {
    let r = Registry::new();
    for f in families {
        let c = IntCounterVec::new(Opts::new(f.name.clone(), f.help.clone()), &f.labels)?;
        for (l, v) in &f.samples {
            let l: Vec<&str> = l.iter().map(|s| s.as_str()).collect();
            c.with_label_values(&l).inc_by(*v);
        }
        r.register(Box::new(c))?;
    }
    let mut out = Vec::new();
    TextEncoder::new().encode(&r.gather(), &mut out)?;
    Ok(String::from_utf8(out)?)
}

/// The endpoint: bound at start (a port in use is refused before the command sets anything
/// up), serving the last text published.
pub struct MetricsServer {
    text: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    last: Mutex<Option<Instant>>,
}

impl MetricsServer {
    /// Binds `addr` and starts serving (an empty page until the first publish). Errors: the
    /// address cannot be bound (in use, not local): one line, exit 3.
    pub fn start(addr: SocketAddr) -> CliResult<Self> {
        let server = tiny_http::Server::http(addr)
            .map_err(|e| env(anyhow!("--metrics {addr}: cannot listen there ({e}); use a free local address:port")))?;
        let text = Arc::new(Mutex::new(String::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, s) = (text.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Ok(Some(req)) = server.recv_timeout(Duration::from_millis(100)) else { continue };
                let resp = if req.url() == "/metrics" || req.url().starts_with("/metrics?") {
                    let body = t.lock().expect("metrics lock").clone();
                    let h = tiny_http::Header::from_bytes("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                        .expect("static header");
                    tiny_http::Response::from_string(body).with_header(h)
                } else {
                    tiny_http::Response::from_string("fastpath: metrics are at /metrics\n").with_status_code(404)
                };
                let _ = req.respond(resp);
            }
        });
        Ok(Self { text, stop, thread: Some(thread), last: Mutex::new(None) })
    }

    /// True if a publish is due (the last was 100 ms ago or more): callers build the families
    /// only then.
    pub fn due(&self) -> bool {
        self.last.lock().expect("metrics lock").is_none_or(|t| t.elapsed() >= Duration::from_millis(100))
    }

    /// Replaces what the endpoint serves.
    pub fn publish(&self, families: &[Family]) {
        if let Ok(t) = encode(families) {
            *self.text.lock().expect("metrics lock") = t;
            *self.last.lock().expect("metrics lock") = Some(Instant::now());
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts the endpoint if `--metrics` was given.
pub fn start(addr: Option<SocketAddr>) -> CliResult<Option<MetricsServer>> {
    addr.map(MetricsServer::start).transpose()
}

/// XDP_STATISTICS counter names with their unit: `rx_dropped` -> `rx_dropped_frames`.
pub fn xsk_metric_name(kernel_name: &str) -> String {
    if kernel_name.ends_with("_descs") {
        format!("fastpath_xsk_{kernel_name}_total")
    } else {
        format!("fastpath_xsk_{kernel_name}_frames_total")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_encode_in_the_text_format() {
        let mut c = Family::counter("fastpath_rx_packets_total", "Packets received.", &["iface", "queue"]);
        c.add(&["veth0", "0"], 5.0);
        c.add(&["veth0", "1"], 7.0);
        let t = encode(&[c]).unwrap();
        assert!(t.contains("# TYPE fastpath_rx_packets_total counter"), "{t}");
        assert!(t.contains("fastpath_rx_packets_total{iface=\"veth0\",queue=\"1\"} 7"), "{t}");
        assert_eq!(xsk_metric_name("rx_dropped"), "fastpath_xsk_rx_dropped_frames_total");
        assert_eq!(xsk_metric_name("tx_invalid_descs"), "fastpath_xsk_tx_invalid_descs_total");
    }
}
