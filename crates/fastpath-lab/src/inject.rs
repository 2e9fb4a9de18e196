//! `fastpath compare --inject`: user space hands packets to the kernel stack.
//!
//! 1. UDP sink: frames written to a TAP device (readv/writev, then io_uring) addressed to a
//!    kernel UDP socket; packets/s the socket accepted, and its receive-buffer drops.
//! 2. TCP through a user-space bridge: iperf3 client (ns a) -> veth -> TPACKET_V3 port (ns b)
//!    -> TAP port -> the stack of ns b (iperf3 server on the TAP's address) and back the same
//!    way; throughput, and sockperf ping-pong round trips (p50/p99) while the stream runs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath::io::tap::TapOptions;
use fastpath::io::tpacket::{TpacketOptions, TpacketPort};
use fastpath::io::{self, Port, PortSpec};
use fastpath::packet::{build_udp_frame, UdpFrameSpec};
use fastpath_testbed::{spawn_in_netns, Testbed, TestbedConfig};
use fastpath_tools::stats::median;
use fastpath_tools::threads::Stoppable;
use serde_json::json;

use crate::error::{env, runtime, LabResult};
use crate::tools::{self, ethtool_features, ip};

const TAP: &str = "fpinj0";

/// UDP sink result: offered pps, accepted pps, RcvbufErrors, frames offered, datagrams accepted.
type Sink = (f64, f64, u64, u64, u64);
/// TCP result: bits/s, p50 us, p99 us, frames bridged.
type Tcp = (f64, f64, f64, u64);

fn spec(uring: bool) -> PortSpec {
    if uring {
        PortSpec::TapUring(TapOptions::default())
    } else {
        PortSpec::Tap(TapOptions::default())
    }
}

fn snmp_udp(field: &str) -> u64 {
    let t = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap_or_default();
    let mut lines = t.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(h), Some(v)) = (lines.next(), lines.next()) else { return 0 };
    h.split_whitespace()
        .zip(v.split_whitespace())
        .find(|(k, _)| *k == field)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// Part 1 for one backend: (offered pps, accepted-by-socket pps, RcvbufErrors).
fn udp_sink(bed: &Testbed, uring: bool, secs: f64, quit: Arc<AtomicBool>) -> Result<Sink, String> {
    let ns = bed.ns_b().to_string();
    spawn_in_netns(bed.ns_b(), move || -> Result<Sink, String> {
        let mut port = io::open(TAP, &spec(uring)).map_err(|e| e.to_string())?;
        ip(&ns, &format!("addr add 10.99.7.1/24 dev {TAP}"))?;
        fastpath::netdev::set_link_up(TAP).map_err(|e| e.to_string())?;
        let mac = fastpath::netdev::if_hwaddr(TAP).map_err(|e| e.to_string())?;
        let sock = std::net::UdpSocket::bind("10.99.7.1:9999").map_err(|e| e.to_string())?;
        fastpath::io::udp::set_socket_rcvbuf(&sock, 8 << 20).map_err(|e| e.to_string())?;
        sock.set_nonblocking(true).map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let got = Arc::new(AtomicU64::new(0));
        let (s2, g2) = (stop.clone(), got.clone());
        let reader = Stoppable::new(
            stop,
            std::thread::spawn(move || {
                let _ = fastpath::workers::pin_current_thread(1);
                let mut rm = fastpath::io::udp::RecvMmsg::new(64);
                // After stop, drain what the socket still holds: every datagram accepted is counted.
                loop {
                    let stopping = s2.load(Ordering::Relaxed);
                    let n = rm.recv(&sock).unwrap_or(0);
                    g2.fetch_add(n as u64, Ordering::Relaxed);
                    if n == 0 {
                        if stopping {
                            break;
                        }
                        let _ = fastpath::io::udp::poll_readable(&sock, 10);
                    }
                }
            }),
        );
        let _ = fastpath::workers::pin_current_thread(0);
        let spec = UdpFrameSpec {
            src_mac: [2, 0, 0, 0, 0, 2],
            dst_mac: mac,
            src_ip: [10, 99, 7, 2].into(),
            dst_ip: [10, 99, 7, 1].into(),
            src_port: 7,
            dst_port: 9999,
            frame_len: 64,
        };
        let mut f = vec![0u8; 64];
        build_udp_frame(&spec, &mut f);
        let batch: Vec<&[u8]> = (0..64).map(|_| f.as_slice()).collect();
        let err0 = snmp_udp("RcvbufErrors");
        let t0 = Instant::now();
        let mut offered = 0u64;
        while t0.elapsed().as_secs_f64() < secs && !quit.load(Ordering::Relaxed) {
            offered += port.tx_burst(&batch).map_err(|e| e.to_string())? as u64;
        }
        let el = t0.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_millis(300));
        let _ = reader.join();
        let accepted = got.load(Ordering::Relaxed);
        Ok((offered as f64 / el, accepted as f64 / el, snmp_udp("RcvbufErrors") - err0, offered, accepted))
    })
    .join()
    .map_err(|_| "panicked".to_string())?
    .map_err(|e| e.to_string())?
}

/// Part 2 for one backend: (iperf3 bits/s, sockperf p50 us, p99 us, bridged frames).
fn bridge(bed: &Testbed, uring: bool, secs: f64) -> Result<Tcp, String> {
    let (ns_a, ns_b, if_a, if_b) =
        (bed.ns_a().to_string(), bed.ns_b().to_string(), bed.iface_a().to_string(), bed.iface_b().to_string());
    let mac_a = bed.mac_a();
    let mac_b = bed.mac_b().iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
    // The veth becomes a wire: no address on b, no offloads that make frames larger than a
    // TPACKET frame (TSO/GSO on a, GRO on b).
    ip(&ns_b, &format!("addr del 10.99.0.2/24 dev {if_b}"))?;
    for (ns, dev, feats) in [(&ns_a, &if_a, "tso off gso off tx off"), (&ns_b, &if_b, "gro off")] {
        ethtool_features(ns, dev, feats)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let (s2, nb, ib) = (stop.clone(), ns_b.clone(), if_b.clone());
    let bridge = Stoppable::new(
        stop,
        spawn_in_netns(&ns_b, move || -> Result<u64, String> {
            let (tap, veth) = match bridge_ports(uring, &nb, &ib, mac_a, &mac_b) {
                Ok(p) => p,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.clone()));
                    return Err(e);
                }
            };
            let _ = ready_tx.send(Ok(()));
            let _ = fastpath::workers::pin_current_thread(1);
            bridge_loop(tap, veth, &s2)
        }),
    );
    let ready = ready_rx.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| Err("bridge did not start".into()));
    let result = ready.and_then(|()| tcp_through(&ns_a, &ns_b, secs));
    let moved = bridge.join().map_err(|_| "bridge panicked".to_string())?.map_err(|e| e.to_string())??;
    let (bps, p50, p99) = result?;
    Ok((bps, p50, p99, moved))
}

/// In ns b (the calling thread's): the TAP device, with the veth's address and MAC and a
/// permanent neighbour entry for a, and a TPACKET port on the veth.
fn bridge_ports(
    uring: bool,
    nb: &str,
    ib: &str,
    mac_a: [u8; 6],
    mac_b: &str,
) -> Result<(io::AnyPort, TpacketPort), String> {
    let tap = io::open(TAP, &spec(uring)).map_err(|e| e.to_string())?;
    ip(nb, &format!("link set dev {TAP} address {mac_b}"))?;
    ip(nb, &format!("addr add 10.99.0.2/24 dev {TAP}"))?;
    ip(
        nb,
        &format!(
            "neigh replace 10.99.0.1 lladdr {} dev {TAP} nud permanent",
            mac_a.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
        ),
    )?;
    fastpath::netdev::set_link_up(TAP).map_err(|e| e.to_string())?;
    let ib = fastpath::netdev::Iface::resolve(ib).map_err(|e| e.to_string())?;
    let mut opts = TpacketOptions::default();
    opts.block_timeout_ms = 1;
    let veth = TpacketPort::open(&ib, opts).map_err(|e| e.to_string())?;
    Ok((tap, veth))
}

/// Moves frames veth -> TAP and TAP -> veth until `stop`; returns the frames moved.
fn bridge_loop(mut tap: io::AnyPort, mut veth: TpacketPort, stop: &AtomicBool) -> Result<u64, String> {
    let mut bufs: Vec<Vec<u8>> = (0..64).map(|_| Vec::with_capacity(2048)).collect();
    let mut moved = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let mut n = 0;
        veth.rx_burst(64, 0, |f: &[u8]| {
            bufs[n].clear();
            bufs[n].extend_from_slice(f);
            n += 1;
        })
        .map_err(|e| e.to_string())?;
        let mut off = 0;
        while off < n {
            // On the stack: no allocation per burst.
            let refs: [&[u8]; 64] = std::array::from_fn(|i| bufs.get(off + i).map_or(&[][..], |b| b.as_slice()));
            off += tap.tx_burst(&refs[..n - off]).map_err(|e| e.to_string())?;
        }
        moved += n as u64;
        let mut m = 0;
        tap.rx_burst(64, 0, |f: &[u8]| {
            bufs[m].clear();
            bufs[m].extend_from_slice(f);
            m += 1;
        })
        .map_err(|e| e.to_string())?;
        let mut off = 0;
        while off < m {
            // On the stack: no allocation per burst.
            let refs: [&[u8]; 64] = std::array::from_fn(|i| bufs.get(off + i).map_or(&[][..], |b| b.as_slice()));
            off += veth.tx_burst(&refs[..m - off]).map_err(|e| e.to_string())?;
        }
        moved += m as u64;
        if n == 0 && m == 0 {
            std::thread::yield_now();
        }
    }
    Ok(moved)
}

/// TCP through the bridge: iperf3 throughput, then sockperf ping-pong latency, a to b;
/// (bits/s, p50 us, p99 us).
fn tcp_through(ns_a: &str, ns_b: &str, secs: f64) -> Result<(f64, f64, f64), String> {
    let _iperf_srv =
        tools::iperf3_server(ns_b, "10.99.0.2").map_err(|e| format!("iperf3 (Debian package iperf3): {e}"))?;
    let _sp_srv = tools::sockperf_server(ns_b, None, "10.99.0.2", 11112).map_err(|e| format!("sockperf: {e}"))?;
    std::thread::sleep(Duration::from_millis(700));
    let client = tools::iperf3_client(ns_a, "10.99.0.2", secs.max(2.0).round() as u64).map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(500));
    let text = tools::sockperf_ping_pong(ns_a, "10.99.0.2", 11112, (secs.max(2.0) - 1.0).round() as u64)
        .map_err(|e| e.to_string())?;
    let bps = client.bits_per_s()?;
    let pct = |p: &str| tools::sockperf_value(&text, p);
    Ok((bps, pct("percentile 50.000"), pct("percentile 99.000")))
}

/// What `compare --inject` is asked for.
#[derive(Debug, Clone)]
pub struct InjectOptions {
    /// Runs; each row reports the median.
    pub runs: u32,
    /// Seconds of traffic per part and run; 0 = set up and tear down.
    pub duration_s: f64,
}

/// Checks that iperf3 and sockperf are installed.
///
/// # Errors
///
/// [`crate::LabError::Environment`] naming the missing one.
pub fn check_tools() -> LabResult<()> {
    for tool in ["iperf3", "sockperf"] {
        if !tools::installed(tool) {
            return Err(env(anyhow!("compare --inject needs {tool} (apt-get install {tool})")));
        }
    }
    Ok(())
}

/// Runs `compare --inject`: per run and backend (TAP readv/writev, TAP io_uring) a test bed for
/// the UDP sink and one for the TCP bridge. `progress` gets one line per run and backend, with
/// the time left ([`crate::progress`]), and one at the end.
/// Returns the rows (JSON objects: `path`, `udp_sink_accepted_pps`, `udp_offered_pps`,
/// `udp_rcvbuf_errors`, `udp_offered_frames`, `udp_accepted_datagrams`,
/// `udp_rcvbuf_errors_total`, `tcp_bps`, `latency_p50_us`, `latency_p99_us`; medians over the
/// runs, totals for the counts), or None with `duration_s` 0.
///
/// Needs root: creates network namespaces, TAP devices; starts iperf3 and sockperf.
///
/// # Errors
///
/// [`crate::LabError::Environment`] when iperf3 or sockperf is missing, [`crate::LabError::Testbed`]
/// when a test bed cannot be made, [`crate::LabError::Runtime`] when a part fails or `stop` is
/// raised.
pub fn run(
    o: &InjectOptions,
    stop: Arc<AtomicBool>,
    progress: &mut dyn FnMut(&str),
) -> LabResult<Option<Vec<serde_json::Value>>> {
    check_tools()?;
    let secs = o.duration_s;
    let mut sink: [Vec<Sink>; 2] = [Vec::new(), Vec::new()];
    let mut tcp: [Vec<Tcp>; 2] = [Vec::new(), Vec::new()];
    // Planned per phase (run and backend): the UDP sink and the TCP bridge, and their set-ups.
    let mut pr =
        crate::progress::Progress::new("compare --inject", vec![2.0 * secs + 4.0; 2 * o.runs as usize], progress);
    for run in 0..o.runs {
        for (i, uring) in [false, true].into_iter().enumerate() {
            if stop.load(Ordering::Relaxed) {
                return Err(runtime(anyhow!("interrupted")));
            }
            let bed = Testbed::up(&TestbedConfig { name: None, queues: 1, sender_qdisc: false, ipv6: false })?;
            pr.phase(&format!(
                "run {}/{}, {} on test bed {}",
                run + 1,
                o.runs,
                if uring { "tap-uring" } else { "tap" },
                bed.name()
            ));
            if secs > 0.0 {
                sink[i].push(
                    udp_sink(&bed, uring, secs, stop.clone()).map_err(|e| {
                        runtime(anyhow!("UDP sink via {}: {e}", if uring { "tap-uring" } else { "tap" }))
                    })?,
                );
            }
            let bed2 = Testbed::up(&TestbedConfig { name: None, queues: 1, sender_qdisc: true, ipv6: false })?;
            if secs > 0.0 {
                tcp[i].push(
                    bridge(&bed2, uring, secs).map_err(|e| {
                        runtime(anyhow!("TCP through {}: {e}", if uring { "tap-uring" } else { "tap" }))
                    })?,
                );
            }
            bed2.down()?;
            bed.down()?;
        }
    }
    pr.finish();
    if secs == 0.0 {
        return Ok(None);
    }
    let names = ["TAP readv/writev", "TAP io_uring"];
    Ok(Some(
        (0..2)
            .map(|i| {
                let m = |f: &dyn Fn(&Sink) -> f64| median(&sink[i].iter().map(f).collect::<Vec<_>>());
                let t = |f: &dyn Fn(&Tcp) -> f64| median(&tcp[i].iter().map(f).collect::<Vec<_>>());
                json!({"path": names[i], "udp_sink_accepted_pps": m(&|x| x.1), "udp_offered_pps": m(&|x| x.0),
                       "udp_rcvbuf_errors": m(&|x| x.2 as f64),
                       "udp_offered_frames": sink[i].iter().map(|x| x.3).sum::<u64>(),
                       "udp_accepted_datagrams": sink[i].iter().map(|x| x.4).sum::<u64>(),
                       "udp_rcvbuf_errors_total": sink[i].iter().map(|x| x.2).sum::<u64>(), "tcp_bps": t(&|x| x.0), "latency_p50_us": t(&|x| x.1), "latency_p99_us": t(&|x| x.2)})
            })
            .collect(),
    ))
}

/// The command line that reproduces a run with `o`.
pub fn command(o: &InjectOptions) -> String {
    format!("fastpath compare --inject --runs {} --duration {}", o.runs, o.duration_s)
}

/// The table of [`run`]'s rows, every line ending in a newline; `cmd` from [`command`].
pub fn table(rows: &[serde_json::Value], cmd: &str) -> String {
    let mut s = format!(
        "{:<18} {:>14} {:>14} {:>12} {:>12} {:>10} {:>10}\n",
        "path", "UDP sink pps", "offered pps", "rcvbuf err", "TCP Gbit/s", "p50 us", "p99 us"
    );
    for r in rows {
        let g = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        s += &format!(
            "{:<18} {:>14.0} {:>14.0} {:>12.0} {:>12.2} {:>10.1} {:>10.1}\n",
            r["path"].as_str().unwrap_or(""),
            g("udp_sink_accepted_pps"),
            g("udp_offered_pps"),
            g("udp_rcvbuf_errors"),
            g("tcp_bps") / 1e9,
            g("latency_p50_us"),
            g("latency_p99_us")
        );
    }
    s += &format!(
        "({cmd}; medians; latency: sockperf ping-pong through the bridge while iperf3 runs, half round trips)\n"
    );
    s
}
