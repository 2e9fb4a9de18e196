//! `fastpath doctor -i IF [-q Q]`: why packets do not arrive. Each check is one line: OK, or the
//! problem and its fix. Counters are sampled over `--window` seconds, so run it while the
//! traffic and the application run. Read-only: nothing is attached, no socket bound.
//!
//! Checks: link state; traffic on other queues than the bound one (the driver's per-queue
//! counters); the XDP mode the driver allows; the MTU against that mode's limit; a foreign XDP
//! program; a veth peer without NAPI; AF_XDP FILL-empty / RX-full counters moving; the owning
//! process not running while its RX ring overflows.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath::features::Feature;
use fastpath::netdev::xdp_features::xdp_features;
use fastpath::netdev::{link_state, NetDev};
use fastpath::xsk::diag;
use serde::Serialize;
use serde_json::json;

use crate::args::DoctorArgs;
use crate::common::enter_ns;
use crate::error::{env, usage, CliResult};
use crate::session::L2_OVERHEAD_BYTES;

/// Names of fastpath's XDP programs as the kernel keeps them (15 bytes at most).
const OURS: [&str; 8] = [
    "xsk_redirect",
    "xsk_redirect_fr",
    "xdp_drop",
    "classifier",
    "xdp_fwd",
    "xdp_capture",
    "xdp_redirect_cp",
    "xdp_gen",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Problem,
    Skip,
}

#[derive(Debug, Clone, Serialize)]
struct Check {
    check: &'static str,
    status: Status,
    detail: String,
    fix: Option<String>,
}

fn ok(check: &'static str, detail: String) -> Check {
    Check { check, status: Status::Ok, detail, fix: None }
}
fn problem(check: &'static str, detail: String, fix: String) -> Check {
    Check { check, status: Status::Problem, detail, fix: Some(fix) }
}
fn skip(check: &'static str, detail: String) -> Check {
    Check { check, status: Status::Skip, detail, fix: None }
}

/// Per-queue receive counters from the driver's ethtool statistics: `rx_queue_N_packets`,
/// `rx_queue_N_xdp_packets` (veth), `rxN_packets` (mlx5), `rx-N.packets` (virtio_net).
fn per_queue_rx(stats: &[(String, u64)]) -> BTreeMap<u32, u64> {
    let mut m = BTreeMap::new();
    for (name, v) in stats {
        let q = if let Some(r) = name.strip_prefix("rx_queue_") {
            let (q, rest) = r.split_once('_').unwrap_or((r, ""));
            (rest == "packets" || rest == "xdp_packets").then(|| q.parse::<u32>().ok()).flatten()
        } else if let Some(r) = name.strip_prefix("rx-") {
            r.strip_suffix(".packets").and_then(|q| q.parse().ok())
        } else if let Some(r) = name.strip_prefix("rx") {
            r.strip_suffix("_packets").and_then(|q| q.parse().ok())
        } else {
            None
        };
        if let Some(q) = q {
            *m.entry(q).or_insert(0) += v;
        }
    }
    m
}

/// utime + stime of a process in clock ticks (/proc/PID/stat fields 14 and 15).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// `fastpath doctor`.
pub fn run(a: &DoctorArgs) -> CliResult<()> {
    enter_ns(&a.netns)?;
    let Some(ls) = link_state(&a.iface) else {
        return Err(env(anyhow!(
            "-i {}: no interface of that name in this network namespace (see `ip link`)",
            a.iface
        )));
    };
    let dev = NetDev::by_name(&a.iface).map_err(|_| env(anyhow!("-i {}: gone", a.iface)))?;
    let i = a.iface.as_str();
    // A queue the interface does not have: every check below would judge the wrong thing. The
    // driver's channels (ETHTOOL_GCHANNELS), or where it reports none (lo, ...) the kernel's
    // receive queue count (IFLA_NUM_RX_QUEUES).
    let queues = match dev.rx_queue_count() {
        Ok(Some(n)) => Some(n),
        _ => fastpath::netdev::watch::kernel_rx_queues(dev.ifindex).ok().flatten(),
    };
    if let Some(n) = queues {
        if a.queue >= n {
            return Err(usage(anyhow!(
                "-q {}: {i} has {n} receive queue{} (0..={})",
                a.queue,
                if n == 1 { "" } else { "s" },
                n - 1
            )));
        }
    }
    let window = Duration::from_secs_f64(a.window);
    let mut checks = Vec::new();

    // Samples over the window: the driver's counters and every AF_XDP socket of the namespace.
    let eth0 = dev.ethtool_stats().unwrap_or_default();
    let xsk0 = diag::list().ok();
    let ticks0: BTreeMap<u32, u64> = xsk0
        .iter()
        .flat_map(|l| l.sockets.iter().filter_map(|s| s.pid))
        .filter_map(|p| cpu_ticks(p).map(|t| (p, t)))
        .collect();
    let t0 = Instant::now();
    std::thread::sleep(window);
    let secs = t0.elapsed().as_secs_f64();
    let eth1 = dev.ethtool_stats().unwrap_or_default();
    let xsk1 = diag::list().ok();

    // 1. Link.
    checks.push(if ls.up {
        ok("link", format!("{i} is up with carrier, MTU {}", ls.mtu))
    } else {
        problem(
            "link",
            format!("{i} is down or has no carrier (for a veth: its peer is down)"),
            format!("ip link set dev {i} up (and its peer)"),
        )
    });

    // 2. Traffic on other queues than the bound one.
    let (q0, q1) = (per_queue_rx(&eth0), per_queue_rx(&eth1));
    if q1.is_empty() {
        checks.push(skip("queues", format!("the driver of {i} reports no per-queue receive counters")));
    } else {
        let rate =
            |q: u32| q1.get(&q).copied().unwrap_or(0).saturating_sub(q0.get(&q).copied().unwrap_or(0)) as f64 / secs;
        let others: Vec<(u32, f64)> =
            q1.keys().filter(|&&q| q != a.queue).map(|&q| (q, rate(q))).filter(|x| x.1 >= 1.0).collect();
        if others.is_empty() {
            checks.push(ok(
                "queues",
                format!("traffic arrives on queue {} only ({:.0} frames/s)", a.queue, rate(a.queue)),
            ));
        } else {
            let list: Vec<String> = others.iter().map(|(q, r)| format!("queue {q} {r:.0}/s")).collect();
            checks.push(problem(
                "queues",
                format!("frames arrive on other queues than {} ({}): a socket bound to queue {} never sees them", a.queue, list.join(", "), a.queue),
                format!("bind every queue (--queues N), or steer the flow to queue {} (ethtool -N {i} flow-type udp4 ... action {}; or ethtool -X {i} equal 1)", a.queue, a.queue),
            ));
        }
    }

    // 3. The XDP mode the driver allows.
    let xf = xdp_features(ls.ifindex).ok().flatten();
    let native = match &xf {
        Some(x) if x.has("basic") && x.has("redirect") => {
            checks.push(ok("xdp_mode", format!("the driver runs XDP natively (xdp-features: {})", x.xdp.join(" "))));
            true
        }
        Some(x) => {
            checks.push(problem(
                "xdp_mode",
                format!("the driver of {i} has no native XDP redirect (xdp-features: {}): AF_XDP runs in skb (generic) mode, with an skb per frame", if x.xdp.is_empty() { "none".into() } else { x.xdp.join(" ") }),
                "use a NIC whose driver supports native XDP (or accept skb mode's cost)".into(),
            ));
            false
        }
        None => {
            checks.push(skip(
                "xdp_mode",
                "this kernel has no netdev netlink family (< 6.3): the driver's XDP features are unknown".into(),
            ));
            true
        }
    };

    // 4. The MTU against the mode's limit.
    let max_single = 4096 - fastpath::xsk::XDP_PACKET_HEADROOM - L2_OVERHEAD_BYTES;
    let kernel = fastpath::features::probe();
    if ls.mtu <= max_single {
        checks.push(ok("mtu", format!("MTU {} fits one 4096-byte UMEM frame (<= {max_single})", ls.mtu)));
    } else if let Err(u) = kernel.check(Feature::MultiBuffer) {
        checks.push(problem(
            "mtu",
            format!("MTU {} needs AF_XDP multi-buffer: {u}", ls.mtu),
            format!("ip link set dev {i} mtu {max_single}"),
        ));
    } else if native && xf.as_ref().is_some_and(|x| !x.has("rx-sg")) {
        checks.push(problem(
            "mtu",
            format!("MTU {} needs multi-buffer XDP receive, which the driver lacks (no rx-sg): native XDP is refused at this MTU", ls.mtu),
            format!("ip link set dev {i} mtu {max_single}, or --xdp-mode skb"),
        ));
    } else {
        checks.push(ok("mtu", format!("MTU {} is carried multi-buffer (XDP_USE_SG, frags-aware program)", ls.mtu)));
    }

    // 5. A foreign XDP program.
    match fastpath::bpf::query_xdp(ls.ifindex) {
        Ok(None) => checks.push(ok("xdp_program", format!("no XDP program on {i}"))),
        Ok(Some(p)) => {
            let name = fastpath::bpf::prog_name(p.id).unwrap_or_else(|| "?".into());
            if OURS.contains(&name.as_str()) {
                checks.push(ok("xdp_program", format!("fastpath's {name} (id {}, {}) is attached", p.id, p.mode)));
            } else {
                checks.push(problem(
                    "xdp_program",
                    format!("a foreign XDP program is attached to {i}: {name} (id {}, {} mode); fastpath refuses to replace it", p.id, p.mode),
                    format!("remove it (ip link set dev {i} xdp off; xdpgeneric off) or pass --force"),
                ));
            }
        }
        Err(e) => checks.push(skip("xdp_program", format!("cannot ask the kernel: {e}"))),
    }

    // 6. A veth peer without NAPI (frames redirected into the peer are dropped without it).
    let driver = dev.driver().unwrap_or_default();
    if driver != "veth" {
        checks.push(skip("veth_peer", format!("{i} is not a veth ({driver})")));
    } else {
        // `peer_ifindex` is an index in the peer's namespace: the device with that index here is
        // the peer only if it is another veth whose own peer_ifindex is ours.
        let peer_ifindex = |st: &[(String, u64)]| st.iter().find(|(n, _)| n == "peer_ifindex").map(|(_, v)| *v as u32);
        let peer = peer_ifindex(&eth1);
        let peer_dev = peer.and_then(|p| NetDev::all().ok()?.into_iter().find(|d| d.ifindex == p)).filter(|d| {
            d.ifindex != ls.ifindex
                && d.driver().is_ok_and(|x| x == "veth")
                && peer_ifindex(&d.ethtool_stats().unwrap_or_default()) == Some(ls.ifindex)
        });
        match peer_dev {
            None => checks.push(skip(
                "veth_peer",
                format!("the peer of {i} is in another network namespace: run doctor there too"),
            )),
            Some(pd) => {
                let has_xdp = fastpath::bpf::query_xdp(pd.ifindex).ok().flatten().is_some();
                let gro = pd.gro_enabled().unwrap_or(false);
                if has_xdp || gro {
                    checks.push(ok(
                        "veth_peer",
                        format!(
                            "its peer {} has NAPI ({})",
                            pd.name,
                            if has_xdp { "an XDP program" } else { "GRO on" }
                        ),
                    ));
                } else {
                    checks.push(problem(
                        "veth_peer",
                        format!("its peer {} has no NAPI (no XDP program, GRO off): frames XDP_REDIRECTed or XDP_TXed into {i} are dropped (veth_xdp_xmit needs the peer's NAPI)", pd.name),
                        format!("ethtool -K {} gro on, or attach an XDP program to it", pd.name),
                    ));
                }
            }
        }
    }

    // 7 and 8. AF_XDP sockets of the namespace: FILL empty / RX full moving; the owner asleep.
    match (xsk0, xsk1) {
        (Some(l0), Some(l1)) if !l1.sockets.is_empty() => {
            // One check each: FILL ring empty, RX ring full (or drops the FILL ring does not
            // explain), and the owner not running while it loses frames. Each is OK when no
            // socket shows it.
            let (mut fill, mut rx, mut polling) = (false, false, false);
            for s in &l1.sockets {
                let (Some(b), Some(st)) =
                    (l0.sockets.iter().find(|x| x.inode == s.inode).and_then(|x| x.stats), s.stats)
                else {
                    continue;
                };
                let who = format!(
                    "socket {} of {} (pid {})",
                    s.inode,
                    s.comm.clone().unwrap_or_default(),
                    s.pid.unwrap_or(0)
                );
                let full = st.rx_ring_full.saturating_sub(b.rx_ring_full) as f64 / secs;
                let empty = st.rx_fill_ring_empty_descs.saturating_sub(b.rx_fill_ring_empty_descs) as f64 / secs;
                // In copy mode a frame lost to an empty FILL ring is counted by rx_dropped too.
                let dropped = st.rx_dropped.saturating_sub(b.rx_dropped) as f64 / secs;
                let other = (dropped - empty).max(0.0);
                // CPU time the owner used over the window (clock ticks).
                let ran = s.pid.and_then(|p| Some(cpu_ticks(p)?.saturating_sub(*ticks0.get(&p)?)));
                if (empty >= 1.0 || full >= 1.0 || other >= 1.0) && ran == Some(0) {
                    polling = true;
                    let what = if full >= 1.0 {
                        format!("its RX ring overflows ({full:.0} frames/s rx_ring_full)")
                    } else if empty >= 1.0 {
                        format!("its FILL ring is empty ({empty:.0} times/s rx_fill_ring_empty_descs)")
                    } else {
                        format!("it loses frames ({other:.0}/s rx_dropped)")
                    };
                    checks.push(problem(
                        "polling",
                        format!("{who}: {what} while the process does not run (no CPU time in {secs:.1} s): it is not polling (stopped, blocked, or waiting on another fd)"),
                        "make the process poll the socket (poll()/recvfrom() when need_wakeup is set), or find why it is stopped".into(),
                    ));
                    continue;
                }
                if empty >= 1.0 {
                    fill = true;
                    checks.push(problem(
                        "fill_ring",
                        format!("{who}: the FILL ring was empty {empty:.0} times/s: frames arrive with no buffer to receive into"),
                        "give frames back to the FILL ring sooner, or give the socket more (--frame-count, --ring-size)".into(),
                    ));
                }
                if full >= 1.0 || other >= 1.0 {
                    rx = true;
                    checks.push(problem(
                        "rx_ring",
                        format!("{who}: the kernel dropped {:.0} frames/s (rx_ring_full {full:.0}/s): the RX ring is full, the application does not take frames fast enough", full.max(other)),
                        "poll more often or with larger batches, a larger --ring-size, more queues (--queues) or a CPU of its own (--cpu)".into(),
                    ));
                }
            }
            let n = l1.sockets.len();
            if !fill {
                checks.push(ok("fill_ring", format!("{n} AF_XDP socket(s): rx_fill_ring_empty_descs did not move")));
            }
            if !rx {
                checks.push(ok("rx_ring", format!("{n} AF_XDP socket(s): rx_ring_full did not move, nor rx_dropped beyond what the FILL ring explains")));
            }
            if !polling {
                checks.push(ok("polling", format!("{n} AF_XDP socket(s): no owner lost frames while not running")));
            }
        }
        (Some(_), Some(_)) => checks.push(skip("xsk", "no AF_XDP socket in this namespace".into())),
        _ => checks.push(skip("xsk", "AF_XDP sockets cannot be listed here".into())),
    }

    if a.json {
        println!("{}", json!({"type": "doctor", "iface": i, "queue": a.queue, "window_s": secs, "checks": checks}));
    } else {
        for c in &checks {
            let tag = match c.status {
                Status::Ok => "OK     ",
                Status::Problem => "PROBLEM",
                Status::Skip => "SKIP   ",
            };
            match &c.fix {
                Some(f) => println!("{tag} {:<12} {}; fix: {f}", c.check, c.detail),
                None => println!("{tag} {:<12} {}", c.check, c.detail),
            }
        }
    }
    Ok(())
}
