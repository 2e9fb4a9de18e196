//! `--metrics [ADDR:]PORT` on the long-running commands (bench, gen, fwd, filter load / stats,
//! capture): a Prometheus text-format endpoint (`GET /metrics`, text format 0.0.4, encoded by
//! the `prometheus` crate). Names carry their unit (`_packets_total`, `_bytes_total`,
//! `_frames_total`, `_descs_total`).
//!
//! Publishing and serving are apart: the command's loop only swaps its latest counters (plain
//! numbers, at most every 100 ms) into a shared snapshot, an `Arc` swap under a mutex held for
//! no more than that; the text is encoded from the snapshot by the thread that answers a scrape.
//! A scrape is therefore at most 100 ms old, and a slow or hostile client never holds up the
//! command's loop.
//!
//! The server is a small HTTP/1.1 responder on `std::net` (one request per connection, then
//! `Connection: close`), written here because no synchronous server library bounds what a
//! client may cost: `tiny_http` (used before) starts a thread per connection without a cap, reads
//! headers of any size, and has no read or write timeout. Here:
//! - it listens on loopback unless the command line says otherwise (`--metrics-listen-any`, see
//!   [`check_listen`]);
//! - at most [`MAX_CONNECTIONS`] connections are served at once (one thread each); more are
//!   closed as they arrive;
//! - a request head may hold [`MAX_REQUEST_BYTES`] bytes and must arrive within [`READ_DEADLINE`];
//!   the answer must be taken within [`WRITE_DEADLINE`]; past either the connection is closed;
//! - the accept loop is non-blocking and checks its stop flag every 20 ms; dropping the server
//!   joins only that loop, never a connection's thread, so no client delays the command's exit
//!   (the process ends with them).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use prometheus::{Encoder, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder};

use crate::error::{env, usage, CliResult};

/// Connections served at once; more are closed as they are accepted.
pub const MAX_CONNECTIONS: usize = 8;
/// Longest request head (request line and headers) read; a longer one is answered 431 and the
/// connection closed.
pub const MAX_REQUEST_BYTES: usize = 8192;
/// Time a client has to send its request head, from the connection's accept.
pub const READ_DEADLINE: Duration = Duration::from_secs(2);
/// Time a client has to take the whole answer.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(5);
/// Most rules with per-rule series (`fastpath_filter_rule_*`): the first ones in rule order
/// (the order they are matched in). Past them an operator sees the per-action totals, which
/// count every rule, and `fastpath_filter_rules_not_exported`; the command's summary still has
/// every rule.
pub const MAX_RULE_SERIES: usize = 1000;

/// Counter or gauge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

/// One metric family: name (with its unit; a counter's ends in `_total`), help, label names,
/// and a value per label set. Nearly every metric fastpath serves is a counter: it reports what
/// happened.
#[derive(Debug, Clone)]
pub struct Family {
    pub name: String,
    pub help: String,
    pub kind: Kind,
    pub labels: Vec<&'static str>,
    pub samples: Vec<(Vec<String>, u64)>,
}

impl Family {
    pub fn counter(name: impl Into<String>, help: impl Into<String>, labels: &[&'static str]) -> Self {
        Self { name: name.into(), help: help.into(), kind: Kind::Counter, labels: labels.to_vec(), samples: Vec::new() }
    }
    pub fn gauge(name: impl Into<String>, help: impl Into<String>, labels: &[&'static str]) -> Self {
        Self { kind: Kind::Gauge, ..Self::counter(name, help, labels) }
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
        let opts = Opts::new(f.name.clone(), f.help.clone());
        match f.kind {
            Kind::Counter => {
                let c = IntCounterVec::new(opts, &f.labels)?;
                for (l, v) in &f.samples {
                    let l: Vec<&str> = l.iter().map(|s| s.as_str()).collect();
                    c.with_label_values(&l).inc_by(*v);
                }
                r.register(Box::new(c))?;
            }
            Kind::Gauge => {
                let g = IntGaugeVec::new(opts, &f.labels)?;
                for (l, v) in &f.samples {
                    let l: Vec<&str> = l.iter().map(|s| s.as_str()).collect();
                    g.with_label_values(&l).set(i64::try_from(*v).unwrap_or(i64::MAX));
                }
                r.register(Box::new(g))?;
            }
        }
    }
    let mut out = Vec::new();
    TextEncoder::new().encode(&r.gather(), &mut out)?;
    Ok(String::from_utf8(out)?)
}

/// Refuses a `--metrics` address that is not loopback unless `listen_any` (`--metrics-listen-any`)
/// says the user means it: the endpoint has no authentication, and its counters (per rule, per
/// port) describe the traffic.
pub fn check_listen(addr: Option<SocketAddr>, listen_any: bool) -> CliResult<()> {
    match addr {
        Some(a) if !a.ip().is_loopback() && !listen_any => Err(usage(anyhow!(
            "--metrics {a}: not a loopback address; the endpoint has no authentication, so it listens on 127.0.0.1 or ::1 unless --metrics-listen-any is given"
        ))),
        None if listen_any => Err(usage(anyhow!("--metrics-listen-any needs --metrics [ADDR:]PORT"))),
        _ => Ok(()),
    }
}

/// The endpoint: bound at start (a port in use is refused before the command sets anything
/// up), serving the last snapshot published.
pub struct MetricsServer {
    snapshot: Arc<Mutex<Arc<Vec<Family>>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    last: Mutex<Option<Instant>>,
}

impl MetricsServer {
    /// Binds `addr` and starts serving (an empty page until the first publish). Errors: the
    /// address cannot be bound (in use, not local): one line, exit 3.
    pub fn start(addr: SocketAddr) -> CliResult<Self> {
        let listener = TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|_| l))
            .map_err(|e| env(anyhow!("--metrics {addr}: cannot listen there ({e}); use a free local address:port")))?;
        let snapshot: Arc<Mutex<Arc<Vec<Family>>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (snap, s) = (snapshot.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || accept_loop(listener, snap, s))
            .map_err(|e| env(anyhow!("--metrics {addr}: cannot start the server thread ({e})")))?;
        Ok(Self { snapshot, stop, thread: Some(thread), last: Mutex::new(None) })
    }

    /// True if a publish is due (the last was 100 ms ago or more): callers build the families
    /// only then.
    pub fn due(&self) -> bool {
        self.last.lock().expect("metrics lock").is_none_or(|t| t.elapsed() >= Duration::from_millis(100))
    }

    /// Replaces what the endpoint serves (a copy of the numbers; encoded at scrape time).
    pub fn publish(&self, families: &[Family]) {
        let fams = Arc::new(families.to_vec());
        *self.snapshot.lock().expect("metrics lock") = fams;
        *self.last.lock().expect("metrics lock") = Some(Instant::now());
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        // Joins the accept loop (it sees the flag within 20 ms); connection threads are left to
        // end with the process.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: TcpListener, snapshot: Arc<Mutex<Arc<Vec<Family>>>>, stop: Arc<AtomicBool>) {
    let active = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        let conn = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(_) => {
                // EMFILE and the like: wait rather than spin.
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        if active.load(Ordering::Acquire) >= MAX_CONNECTIONS {
            drop(conn); // closed at once: the client sees the connection end
            continue;
        }
        // The slot is given back when `slot` drops: after serve() returns, if it panics, and
        // if the thread cannot be spawned (the closure, holding it, is dropped then).
        let slot = Slot::take(&active);
        let snap = snapshot.clone();
        let _ = std::thread::Builder::new().name("metrics-conn".into()).spawn(move || {
            let _slot = slot;
            let _ = serve(conn, &snap);
        });
    }
}

/// One of the MAX_CONNECTIONS connection slots, given back on drop (panics included).
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(active: &Arc<AtomicUsize>) -> Slot {
        active.fetch_add(1, Ordering::AcqRel);
        Slot(active.clone())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where the request head in `buf` ends (the offset of its blank line), if it is all there,
/// looking only at blank lines that end at or after `from` (bytes before it were
/// searched already): a head sent a byte at a time costs a linear scan, not a quadratic one.
fn head_end_from(buf: &[u8], from: usize) -> Option<usize> {
    let start = from.saturating_sub(3);
    let tail = &buf[start..];
    tail.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .or_else(|| tail.windows(2).position(|w| w == b"\n\n"))
        .map(|p| p + start)
}

/// What to answer to a request head: (status, body). GET and HEAD of /metrics (any query)
/// only; HEAD's body is left out by the caller.
fn answer(head: &[u8], snapshot: &Mutex<Arc<Vec<Family>>>) -> (&'static str, String) {
    let line = head.split(|&b| b == b'\n').next().unwrap_or(b"");
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method != "GET" && method != "HEAD" {
        return ("405 Method Not Allowed", "fastpath: only GET /metrics\n".into());
    }
    if target != "/metrics" && !target.starts_with("/metrics?") {
        return ("404 Not Found", "fastpath: metrics are at /metrics\n".into());
    }
    let fams = snapshot.lock().expect("metrics lock").clone();
    match encode(&fams) {
        Ok(t) => ("200 OK", t),
        Err(e) => ("500 Internal Server Error", format!("fastpath: {e}\n")),
    }
}

/// One connection: one request head (bounded in size and time), one answer (bounded in time).
fn serve(mut conn: TcpStream, snapshot: &Mutex<Arc<Vec<Family>>>) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    let t0 = Instant::now();
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let mut searched = 0;
    let head = loop {
        if let Some(end) = head_end_from(&buf, searched) {
            break Some(end);
        }
        searched = buf.len();
        if buf.len() > MAX_REQUEST_BYTES {
            break None;
        }
        let left = READ_DEADLINE.saturating_sub(t0.elapsed());
        if left.is_zero() {
            return Ok(()); // too slow: closed
        }
        conn.set_read_timeout(Some(left))?;
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let (status, body, ctype, send_body) = match head {
        None => (
            "431 Request Header Fields Too Large",
            "fastpath: request head too large\n".to_string(),
            "text/plain",
            true,
        ),
        Some(end) => {
            let (status, body) = answer(&buf[..end], snapshot);
            let ctype =
                if status.starts_with("200") { "text/plain; version=0.0.4; charset=utf-8" } else { "text/plain" };
            let method = buf.split(|b| b.is_ascii_whitespace()).next().unwrap_or(b"");
            (status, body, ctype, method != b"HEAD")
        }
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if send_body {
        out.extend_from_slice(body.as_bytes());
    }
    let t1 = Instant::now();
    for piece in out.chunks(16 * 1024) {
        let left = WRITE_DEADLINE.saturating_sub(t1.elapsed());
        if left.is_zero() {
            return Ok(());
        }
        conn.set_write_timeout(Some(left))?;
        conn.write_all(piece)?;
    }
    let _ = conn.shutdown(std::net::Shutdown::Write);
    Ok(())
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
        let mut g = Family::gauge("fastpath_filter_rules_not_exported", "Rules left out.", &["iface"]);
        g.add(&["veth0"], 99_000.0);
        let t = encode(&[g]).unwrap();
        assert!(t.contains("# TYPE fastpath_filter_rules_not_exported gauge"), "{t}");
        assert!(t.contains("fastpath_filter_rules_not_exported{iface=\"veth0\"} 99000"), "{t}");
    }

    #[test]
    fn requests_are_answered_by_path_and_method() {
        let snap = Mutex::new(Arc::new(vec![Family::counter("fastpath_x_total", "x", &[])]));
        assert_eq!(head_end_from(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\nrest", 0), Some(30));
        assert_eq!(head_end_from(b"GET /metrics HTTP/1.1\r\nHost: a\r\n", 0), None);
        // Fed a byte at a time, searching only the new bytes finds the same end.
        let req = b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\nrest";
        let (mut searched, mut found) = (0, None);
        for k in 1..=req.len() {
            if let Some(e) = head_end_from(&req[..k], searched) {
                found = Some(e);
                break;
            }
            searched = k;
        }
        assert_eq!(found, Some(30));
        assert_eq!(answer(b"GET /metrics HTTP/1.1", &snap).0, "200 OK");
        assert_eq!(answer(b"GET /metrics?x=1 HTTP/1.1", &snap).0, "200 OK");
        assert_eq!(answer(b"HEAD /metrics HTTP/1.0", &snap).0, "200 OK");
        assert!(answer(b"GET /metricsX HTTP/1.1", &snap).0.starts_with("404"));
        assert!(answer(b"POST /metrics HTTP/1.1", &snap).0.starts_with("405"));
        assert!(answer(b"", &snap).0.starts_with("405"));
        assert!(check_listen(Some("0.0.0.0:9100".parse().unwrap()), false).is_err());
        assert!(check_listen(Some("0.0.0.0:9100".parse().unwrap()), true).is_ok());
        assert!(check_listen(Some("[::1]:9100".parse().unwrap()), false).is_ok());
        assert!(check_listen(None, true).is_err());
    }
}
