//! The service under attack and what measures it besides sockperf: its ports and CPU, the
//! sockperf server of a phase ([`start_server`]), and the connect probe ([`spawn_connect_probe`])
//! with its echo server ([`EchoServer`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath_testbed::{spawn_in_netns, Testbed};

use crate::error::{env, runtime, LabError, LabResult};
use crate::tools::{self, Running};

/// The service's ports: phase i listens on PORT_FIRST + i (mod PROBE_OFFSET), a fresh server
/// each phase (sockperf sets no SO_REUSEADDR, and a server killed with a connection open holds
/// its port a while); the connect probe's echo server on that port + PROBE_OFFSET, in the same
/// range (the defences' rules cover PORT_FIRST..=PORT_LAST).
pub(super) const PORT_FIRST: u16 = 20000;
pub(super) const PORT_LAST: u16 = 29999;
pub(super) const PROBE_OFFSET: u16 = 5000;
/// The connect probe: new connections per phase, paced evenly across the service's window, each
/// given CONNECT_TIMEOUT to connect and as long again for its one-byte echo.
pub(super) const PROBE_CONNECTS: u32 = 200;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The service's CPU (and its clients'); the attacker runs on the others.
pub const SERVICE_CPU: usize = 1;

/// Starts the service (sockperf server on the service's CPU) and returns once its port listens
/// (ss). One per phase: a server whose client vanished under a flood can stop answering.
pub(super) fn start_server(bed: &Testbed, port: u16) -> LabResult<Running> {
    let server = tools::sockperf_server(bed.ns_b(), Some(SERVICE_CPU), "10.99.0.2", port)
        .map_err(|e| env(anyhow!("starting sockperf server: {e}")))?;
    let t0 = Instant::now();
    loop {
        if tools::tcp_listening(bed.ns_b(), port) {
            return Ok(server);
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(runtime(anyhow!("the sockperf server did not listen on port {port} within 10 s")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The connect probe's echo server: a thread in ns b, on the service's CPU, accepting on
/// 10.99.0.2:`port` and echoing one byte per connection; stopped (and its port closed) on drop.
pub(super) struct EchoServer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<(), fastpath_testbed::TestbedError>>>,
}

impl EchoServer {
    /// Starts it; returns once it listens.
    pub(super) fn start(bed: &Testbed, port: u16) -> LabResult<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let (tx, rx) = mpsc::channel::<Result<(), String>>();
        let thread = spawn_in_netns(bed.ns_b(), move || {
            let _ = fastpath::workers::pin_current_thread(SERVICE_CPU);
            let l = match std::net::TcpListener::bind((fastpath_testbed::IP4_B, port))
                .and_then(|l| l.set_nonblocking(true).map(|_| l))
            {
                Ok(l) => {
                    let _ = tx.send(Ok(()));
                    l
                }
                Err(e) => {
                    let _ = tx.send(Err(format!("binding the connect probe's echo server to port {port}: {e}")));
                    return;
                }
            };
            while !st.load(Ordering::Relaxed) {
                match l.accept() {
                    // A thread per connection (inheriting the namespace and CPU): one whose byte
                    // is late holds back no other.
                    Ok((mut c, _)) => {
                        std::thread::spawn(move || {
                            use std::io::{Read, Write};
                            let _ = c.set_nonblocking(false);
                            let _ = c.set_read_timeout(Some(CONNECT_TIMEOUT));
                            let mut b = [0u8; 1];
                            if c.read_exact(&mut b).is_ok() {
                                let _ = c.write_all(&b);
                            }
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(EchoServer { stop, thread: Some(thread) }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(runtime(anyhow!("{e}")))
            }
            Err(_) => {
                stop.store(true, Ordering::Relaxed);
                Err(runtime(anyhow!("the connect probe's echo server did not start within 10 s")))
            }
        }
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One phase's connect probe.
#[derive(Debug, Default)]
pub(super) struct Probe {
    pub(super) attempted: u32,
    pub(super) succeeded: u32,
    pub(super) p50_ms: Option<f64>,
    pub(super) p99_ms: Option<f64>,
}

/// The nearest-rank `q` quantile (0..=1) of sorted `v`; None if empty.
fn quantile(v: &[f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

/// Starts the connect probe: a thread in ns a pinned to the service's CPU (as sockperf's
/// clients: the attacker holds the others) making [`PROBE_CONNECTS`] new connections to
/// 10.99.0.2:`port`, one every `secs` / PROBE_CONNECTS, each in a thread of its own (so a lost
/// SYN does not hold back the next): connect within [`CONNECT_TIMEOUT`], send a byte, read its
/// echo within CONNECT_TIMEOUT, close. Joined, it gives the counts and connect times.
pub(super) fn spawn_connect_probe(bed: &Testbed, port: u16, secs: f64) -> std::thread::JoinHandle<LabResult<Probe>> {
    let ns = bed.ns_a().to_string();
    std::thread::spawn(move || {
        let h = spawn_in_netns(&ns, move || {
            let _ = fastpath::workers::pin_current_thread(SERVICE_CPU);
            let addr = std::net::SocketAddr::from((fastpath_testbed::IP4_B, port));
            let every = Duration::from_secs_f64(secs.max(0.01) / f64::from(PROBE_CONNECTS));
            let t0 = Instant::now();
            let mut tries = Vec::new();
            for i in 0..PROBE_CONNECTS {
                let at = t0 + every * i;
                if let Some(d) = at.checked_duration_since(Instant::now()) {
                    std::thread::sleep(d);
                }
                // Threads inherit the namespace and the CPU affinity of this one.
                tries.push(std::thread::spawn(move || -> Option<f64> {
                    use std::io::{Read, Write};
                    let t = Instant::now();
                    let mut c = std::net::TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).ok()?;
                    let ms = t.elapsed().as_secs_f64() * 1e3;
                    c.set_read_timeout(Some(CONNECT_TIMEOUT)).ok()?;
                    c.write_all(&[7]).ok()?;
                    let mut b = [0u8; 1];
                    c.read_exact(&mut b).ok()?;
                    (b[0] == 7).then_some(ms)
                }));
            }
            let mut ok: Vec<f64> = tries.into_iter().filter_map(|t| t.join().ok().flatten()).collect();
            ok.sort_by(f64::total_cmp);
            Probe {
                attempted: PROBE_CONNECTS,
                succeeded: ok.len() as u32,
                p50_ms: quantile(&ok, 0.5),
                p99_ms: quantile(&ok, 0.99),
            }
        });
        match h.join() {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(e)) => Err(LabError::from(e)),
            Err(_) => Err(runtime(anyhow!("the connect probe's thread panicked"))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        assert_eq!(quantile(&[], 0.5), None);
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        assert_eq!((quantile(&v, 0.5), quantile(&v, 0.99)), (Some(100.0), Some(198.0)));
        assert_eq!(quantile(&[3.0], 0.99), Some(3.0));
    }
}
