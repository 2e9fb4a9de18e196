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
//! The server is a small HTTP/1.1 responder (one request per connection, then
//! `Connection: close`) on one thread running a readiness loop (`mio`, epoll) over the listener
//! and every connection, all non-blocking. It is our own because its limits are the point:
//! `tiny_http` (used before) starts a thread per connection without a cap, reads headers of any
//! size, and has no read or write timeout. Here:
//! - it listens on loopback unless the command line says otherwise (`--metrics-listen-any`, see
//!   [`check_listen`]);
//! - a connection costs a slot in a table of [`MAX_CONNECTIONS`] (a socket and the bytes of its
//!   head so far), not a thread, and no client decides who else is served: a new connection is
//!   always taken, and when the table is full, or its source address holds
//!   [`MAX_PER_SOURCE`] slots, the oldest connection there that has not sent a complete request
//!   head is closed to make room (the oldest still taking its answer if none has);
//! - a request head may hold [`MAX_REQUEST_BYTES`] bytes and must arrive within [`HEAD_DEADLINE`]
//!   of the accept; the answer must be taken within [`WRITE_DEADLINE`]; past either the
//!   connection is closed;
//! - a scrape is answered as soon as its head is read (tried at the accept already: a client
//!   sends its head right after connecting), so an idle connection opened after it, even from
//!   the same address (every local user is 127.0.0.1), cannot push it out: evicting it would take
//!   [`MAX_PER_SOURCE`] newer connections accepted before its head is read, and the loop takes
//!   at most [`ACCEPT_BATCH`] connections between two reads of the ready ones;
//! - the text is encoded once per snapshot and shared by every answer until the next publish;
//! - dropping the server wakes the loop and joins it; clients hold no thread, so none delays the
//!   command's exit.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use prometheus::{Encoder, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder};

use crate::error::{env, usage, CliResult};

/// Connections held at once (each a socket and at most [`MAX_REQUEST_BYTES`] of head, or its
/// answer): room for every scraper a host has, and a quarter of the usual 1,024 open files a
/// process may have, so a flood of connections cannot take the command's own files away.
pub const MAX_CONNECTIONS: usize = 256;
/// Slots one source address may hold; a new connection from an address at the cap closes that
/// address's oldest connection without a complete head. 64: a scraper needs one connection at a
/// time, and a quarter of the table leaves three quarters to other hosts when the endpoint
/// listens beyond loopback; a per-address cap cannot tell local users apart (all are
/// 127.0.0.1), which is why eviction, not refusal, is what keeps a local scraper served.
pub const MAX_PER_SOURCE: usize = 64;
/// Connections accepted in a row before the loop reads the ones that are ready (see the module
/// docs: well under [`MAX_PER_SOURCE`]).
pub const ACCEPT_BATCH: usize = 16;
/// Longest request head (request line and headers) read; a longer one is answered 431 and the
/// connection closed.
pub const MAX_REQUEST_BYTES: usize = 8192;
/// Time a client has to send its request head, from the connection's accept (a scraper sends it
/// at once; an idle connection is closed after this).
pub const HEAD_DEADLINE: Duration = Duration::from_millis(500);
/// Time a client has to take the whole answer, from its head's arrival.
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
    waker: Arc<Waker>,
    thread: Option<std::thread::JoinHandle<()>>,
    last: Mutex<Option<Instant>>,
}

impl MetricsServer {
    /// Binds `addr` and starts serving (an empty page until the first publish). Errors: the
    /// address cannot be bound (in use, not local), or no epoll instance or thread can be had:
    /// one line, exit 3.
    pub fn start(addr: SocketAddr) -> CliResult<Self> {
        let listener = std::net::TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|_| l))
            .map_err(|e| env(anyhow!("--metrics {addr}: cannot listen there ({e}); use a free local address:port")))?;
        let mut listener = TcpListener::from_std(listener);
        let poll = Poll::new()
            .and_then(|p| p.registry().register(&mut listener, LISTENER, Interest::READABLE).map(|_| p))
            .map_err(|e| env(anyhow!("--metrics {addr}: cannot set up the server's epoll ({e})")))?;
        let waker = Waker::new(poll.registry(), WAKE)
            .map(Arc::new)
            .map_err(|e| env(anyhow!("--metrics {addr}: cannot set up the server's epoll ({e})")))?;
        let snapshot: Arc<Mutex<Arc<Vec<Family>>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let server = Server { listener, poll, conns: Vec::new(), snapshot: snapshot.clone(), text: None };
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || server.run(&s))
            .map_err(|e| env(anyhow!("--metrics {addr}: cannot start the server thread ({e})")))?;
        Ok(Self { snapshot, stop, waker, thread: Some(thread), last: Mutex::new(None) })
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
        // The loop sees the flag when the waker ends its poll; it holds no client past that.
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

const LISTENER: Token = Token(0);
const WAKE: Token = Token(1);
/// Connection `k` of the table is `Token(FIRST + k)`.
const FIRST: usize = 2;

/// Where a connection is.
enum Phase {
    /// Reading the request head: the bytes so far, and how many of them were searched for its
    /// end.
    Head { buf: Vec<u8>, searched: usize },
    /// Sending the answer: what is left from `sent` on, until `deadline`.
    Answer { out: Vec<u8>, sent: usize, deadline: Instant },
}

struct Conn {
    stream: TcpStream,
    source: IpAddr,
    accepted: Instant,
    phase: Phase,
}

/// The serving thread's state: the table of connections (a slot each, `None` when free).
struct Server {
    listener: TcpListener,
    poll: Poll,
    conns: Vec<Option<Conn>>,
    snapshot: Arc<Mutex<Arc<Vec<Family>>>>,
    /// The text of the last snapshot encoded, kept until the next publish.
    text: Option<(Arc<Vec<Family>>, Arc<String>)>,
}

/// What the accept side wants next.
#[derive(PartialEq)]
enum Backlog {
    /// The listener said WouldBlock: wait for its next event.
    Empty,
    /// A batch was taken: more may wait (the listener's edge was consumed), look again at once.
    More,
    /// accept failed (EMFILE and the like): look again after a pause rather than spin.
    Later(Instant),
}

impl Server {
    fn run(mut self, stop: &AtomicBool) {
        let mut events = Events::with_capacity(256);
        let mut backlog = Backlog::More;
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            let timeout = match backlog {
                Backlog::More => Some(Duration::ZERO),
                Backlog::Later(t) => Some(t.saturating_duration_since(now)),
                Backlog::Empty => None,
            };
            let timeout = match (timeout, self.next_deadline()) {
                (Some(a), Some(d)) => Some(a.min(d.saturating_duration_since(now))),
                (a, d) => a.or(d.map(|d| d.saturating_duration_since(now))),
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    std::thread::sleep(Duration::from_millis(20));
                }
                continue;
            }
            // The connections that are ready first, then new ones: a head that came is answered
            // before the next batch of accepts can evict it.
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => backlog = Backlog::More,
                    WAKE => {}
                    Token(t) => self.step(t - FIRST),
                }
            }
            if backlog == Backlog::More || matches!(backlog, Backlog::Later(t) if t <= Instant::now()) {
                backlog = self.accept_batch();
            }
            self.expire(Instant::now());
        }
    }

    /// Accepts at most ACCEPT_BATCH connections, reading each one's head at once.
    fn accept_batch(&mut self) -> Backlog {
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((stream, peer)) => self.admit(stream, peer.ip().to_canonical()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Backlog::Empty,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => {}
                Err(_) => return Backlog::Later(Instant::now() + Duration::from_millis(20)),
            }
        }
        Backlog::More
    }

    /// Takes a new connection, closing another to make room if the table or its source is full.
    fn admit(&mut self, mut stream: TcpStream, source: IpAddr) {
        if let Some(victim) = self.victim(source) {
            self.close(victim);
        }
        let k = match self.conns.iter().position(Option::is_none) {
            Some(k) => k,
            None if self.conns.len() < MAX_CONNECTIONS => {
                self.conns.push(None);
                self.conns.len() - 1
            }
            None => return, // not reached: victim() freed a slot
        };
        if self
            .poll
            .registry()
            .register(&mut stream, Token(FIRST + k), Interest::READABLE | Interest::WRITABLE)
            .is_err()
        {
            return;
        }
        let phase = Phase::Head { buf: Vec::new(), searched: 0 };
        self.conns[k] = Some(Conn { stream, source, accepted: Instant::now(), phase });
        self.step(k);
    }

    /// The connection to close before taking one from `source`: if `source` holds
    /// MAX_PER_SOURCE slots, its oldest one without a complete head (else its oldest); else,
    /// if the table is full, the oldest such of all.
    fn victim(&self, source: IpAddr) -> Option<usize> {
        let held = self.conns.iter().flatten().filter(|c| c.source == source).count();
        let used = self.conns.iter().flatten().count();
        let among = |c: &Conn| if held >= MAX_PER_SOURCE { c.source == source } else { used >= MAX_CONNECTIONS };
        self.conns
            .iter()
            .enumerate()
            .filter_map(|(k, c)| c.as_ref().filter(|c| among(c)).map(|c| (k, c)))
            .min_by_key(|(_, c)| (matches!(c.phase, Phase::Answer { .. }), c.accepted))
            .map(|(k, _)| k)
    }

    fn close(&mut self, k: usize) {
        if let Some(mut c) = self.conns[k].take() {
            let _ = self.poll.registry().deregister(&mut c.stream);
        }
    }

    /// The earliest deadline of the table.
    fn next_deadline(&self) -> Option<Instant> {
        self.conns
            .iter()
            .flatten()
            .map(|c| match c.phase {
                Phase::Head { .. } => c.accepted + HEAD_DEADLINE,
                Phase::Answer { deadline, .. } => deadline,
            })
            .min()
    }

    /// Closes every connection past its deadline.
    fn expire(&mut self, now: Instant) {
        for k in 0..self.conns.len() {
            let late = self.conns[k].as_ref().is_some_and(|c| match c.phase {
                Phase::Head { .. } => now >= c.accepted + HEAD_DEADLINE,
                Phase::Answer { deadline, .. } => now >= deadline,
            });
            if late {
                self.close(k);
            }
        }
    }

    /// Moves connection `k` on as far as its socket allows (reads its head, sends its answer);
    /// closes it when done or on an error.
    fn step(&mut self, k: usize) {
        let Some(c) = self.conns.get_mut(k).and_then(Option::as_mut) else { return };
        if let Phase::Head { buf, searched } = &mut c.phase {
            let mut chunk = [0u8; 1024];
            let head = loop {
                if let Some(end) = head_end_from(buf, *searched) {
                    break Some(end);
                }
                *searched = buf.len();
                if buf.len() > MAX_REQUEST_BYTES {
                    break None;
                }
                match c.stream.read(&mut chunk) {
                    Ok(0) => return self.close(k),
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return self.close(k),
                }
            };
            let out = match head {
                None => response(
                    "431 Request Header Fields Too Large",
                    "text/plain",
                    "fastpath: request head too large\n",
                    true,
                ),
                Some(end) => {
                    let (status, body) = answer(&buf[..end], &self.snapshot, &mut self.text);
                    let ctype = if status.starts_with("200") {
                        "text/plain; version=0.0.4; charset=utf-8"
                    } else {
                        "text/plain"
                    };
                    let method = buf.split(|b| b.is_ascii_whitespace()).next().unwrap_or(b"");
                    response(status, ctype, &body, method != b"HEAD")
                }
            };
            c.phase = Phase::Answer { out, sent: 0, deadline: Instant::now() + WRITE_DEADLINE };
        }
        if let Phase::Answer { out, sent, .. } = &mut c.phase {
            while *sent < out.len() {
                match c.stream.write(&out[*sent..]) {
                    Ok(0) => return self.close(k),
                    Ok(n) => *sent += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return self.close(k),
                }
            }
            let _ = c.stream.shutdown(std::net::Shutdown::Write);
            self.close(k);
        }
    }
}

/// An HTTP/1.1 answer that closes the connection; `body` left out (its length kept) if not
/// `send_body` (HEAD).
fn response(status: &str, ctype: &str, body: &str, send_body: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if send_body {
        out.extend_from_slice(body.as_bytes());
    }
    out
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
/// only; HEAD's body is left out by the caller. The text of a snapshot is encoded once and kept
/// in `text` until the snapshot changes.
fn answer(
    head: &[u8],
    snapshot: &Mutex<Arc<Vec<Family>>>,
    text: &mut Option<(Arc<Vec<Family>>, Arc<String>)>,
) -> (&'static str, Arc<String>) {
    let line = head.split(|&b| b == b'\n').next().unwrap_or(b"");
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method != "GET" && method != "HEAD" {
        return ("405 Method Not Allowed", Arc::new("fastpath: only GET /metrics\n".into()));
    }
    if target != "/metrics" && !target.starts_with("/metrics?") {
        return ("404 Not Found", Arc::new("fastpath: metrics are at /metrics\n".into()));
    }
    let fams = snapshot.lock().expect("metrics lock").clone();
    if let Some((_, t)) = text.as_ref().filter(|(f, _)| Arc::ptr_eq(f, &fams)) {
        return ("200 OK", t.clone());
    }
    match encode(&fams) {
        Ok(t) => {
            let t = Arc::new(t);
            *text = Some((fams, t.clone()));
            ("200 OK", t)
        }
        Err(e) => ("500 Internal Server Error", Arc::new(format!("fastpath: {e}\n"))),
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
        let mut g = Family::gauge("fastpath_filter_rules_not_exported", "Rules left out.", &["iface"]);
        g.add(&["veth0"], 99_000.0);
        let t = encode(&[g]).unwrap();
        assert!(t.contains("# TYPE fastpath_filter_rules_not_exported gauge"), "{t}");
        assert!(t.contains("fastpath_filter_rules_not_exported{iface=\"veth0\"} 99000"), "{t}");
    }

    #[test]
    fn requests_are_answered_by_path_and_method() {
        let snap = Mutex::new(Arc::new(vec![Family::counter("fastpath_x_total", "x", &[])]));
        let text = &mut None;
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
        assert_eq!(answer(b"GET /metrics HTTP/1.1", &snap, text).0, "200 OK");
        assert_eq!(answer(b"GET /metrics?x=1 HTTP/1.1", &snap, text).0, "200 OK");
        assert_eq!(answer(b"HEAD /metrics HTTP/1.0", &snap, text).0, "200 OK");
        assert!(answer(b"GET /metricsX HTTP/1.1", &snap, text).0.starts_with("404"));
        assert!(answer(b"POST /metrics HTTP/1.1", &snap, text).0.starts_with("405"));
        assert!(answer(b"", &snap, text).0.starts_with("405"));
        assert!(check_listen(Some("0.0.0.0:9100".parse().unwrap()), false).is_err());
        assert!(check_listen(Some("0.0.0.0:9100".parse().unwrap()), true).is_ok());
        assert!(check_listen(Some("[::1]:9100".parse().unwrap()), false).is_ok());
        assert!(check_listen(None, true).is_err());
    }
}
