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
use fastpath::netdev::xdp_features::{xdp_features, XdpFeatures};
use fastpath::netdev::{link_state, LinkState, NetDev};
use fastpath::xsk::{diag, XskStats};
use serde::Serialize;
use serde_json::json;

use crate::args::DoctorArgs;
use crate::common::enter_ns;
use crate::error::{env, usage, CliResult};
use crate::session::L2_OVERHEAD_BYTES;

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
/// A problem and its fix; the fix's `ip link` / `ethtool` commands act in the `--netns` given.
fn problem(check: &'static str, detail: String, fix: String) -> Check {
    Check { check, status: Status::Problem, detail, fix: Some(crate::hints::in_entered_ns(&fix)) }
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

/// `fastpath doctor`: resolves the interface and queue, samples the counters over the window,
/// runs the checks in their fixed order and prints one line each (or one JSON object).
pub fn run(a: &DoctorArgs) -> CliResult<()> {
    enter_ns(&a.netns)?;
    let Some(ls) = link_state(&a.iface) else {
        return Err(env(anyhow!(
            "-i {}: no interface of that name in this network namespace (see `ip link`){}",
            a.iface,
            crate::hints::iface_elsewhere(&a.iface)
        )));
    };
    let dev = NetDev::by_name(&a.iface).map_err(|_| env(anyhow!("-i {}: gone", a.iface)))?;
    let i = a.iface.as_str();
    check_queue_arg(&dev, i, a.queue)?;
    let s = Samples::take(&dev, Duration::from_secs_f64(a.window));

    let mut checks = vec![link_check(i, &ls), queues_check(i, a.queue, &s)];
    let xf = xdp_features(ls.ifindex).ok().flatten();
    let (mode, native) = xdp_mode_check(i, xf.as_ref());
    checks.push(mode);
    checks.push(mtu_check(i, &ls, native, xf.as_ref()));
    checks.push(xdp_program_check(i, &ls));
    checks.push(veth_peer_check(i, &ls, &dev, &s.eth1));
    checks.extend(xsk_checks(&s));

    print_checks(a, i, s.secs, &checks);
    Ok(())
}

/// `-q` against the queues `dev` has: a queue the interface does not have would make every
/// check judge the wrong thing. The driver's channels (ETHTOOL_GCHANNELS), or where it reports
/// none (lo, ...) the kernel's receive queue count (IFLA_NUM_RX_QUEUES).
fn check_queue_arg(dev: &NetDev, i: &str, queue: u32) -> CliResult<()> {
    let queues = match dev.rx_queue_count() {
        Ok(Some(n)) => Some(n),
        _ => fastpath::netdev::watch::kernel_rx_queues(dev.ifindex).ok().flatten(),
    };
    if let Some(n) = queues {
        if queue >= n {
            return Err(usage(anyhow!(
                "-q {}: {i} has {n} receive queue{} (0..={})",
                queue,
                if n == 1 { "" } else { "s" },
                n - 1
            )));
        }
    }
    Ok(())
}

/// Counters sampled at both ends of the window: the driver's ethtool statistics, every AF_XDP
/// socket of the namespace, and the CPU time of the sockets' owners at the start.
struct Samples {
    eth0: Vec<(String, u64)>,
    eth1: Vec<(String, u64)>,
    xsk0: Option<diag::XskListing>,
    xsk1: Option<diag::XskListing>,
    ticks0: BTreeMap<u32, u64>,
    /// The window as measured, in seconds.
    secs: f64,
}

impl Samples {
    /// Samples `dev` and the AF_XDP sockets, sleeps `window`, samples again.
    fn take(dev: &NetDev, window: Duration) -> Samples {
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
        Samples { eth0, eth1, xsk0, xsk1, ticks0, secs }
    }
}

/// Check 1: the link is up with carrier.
fn link_check(i: &str, ls: &LinkState) -> Check {
    if ls.up {
        ok("link", format!("{i} is up with carrier, MTU {}", ls.mtu))
    } else {
        problem(
            "link",
            format!("{i} is down or has no carrier (for a veth: its peer is down)"),
            format!("ip link set dev {i} up (and its peer)"),
        )
    }
}

/// Check 2: traffic on other queues than the bound one `queue` (the driver's per-queue
/// counters).
fn queues_check(i: &str, queue: u32, s: &Samples) -> Check {
    let (q0, q1) = (per_queue_rx(&s.eth0), per_queue_rx(&s.eth1));
    if q1.is_empty() {
        return skip("queues", format!("the driver of {i} reports no per-queue receive counters"));
    }
    let secs = s.secs;
    let rate = |q: u32| q1.get(&q).copied().unwrap_or(0).saturating_sub(q0.get(&q).copied().unwrap_or(0)) as f64 / secs;
    let others: Vec<(u32, f64)> =
        q1.keys().filter(|&&q| q != queue).map(|&q| (q, rate(q))).filter(|x| x.1 >= 1.0).collect();
    if others.is_empty() {
        ok("queues", format!("traffic arrives on queue {} only ({:.0} frames/s)", queue, rate(queue)))
    } else {
        let list: Vec<String> = others.iter().map(|(q, r)| format!("queue {q} {r:.0}/s")).collect();
        problem(
            "queues",
            format!("frames arrive on other queues than {} ({}): a socket bound to queue {} never sees them", queue, list.join(", "), queue),
            format!("bind every queue (--queues N), or steer the flow to queue {} (ethtool -N {i} flow-type udp4 ... action {}; or ethtool -X {i} equal 1)", queue, queue),
        )
    }
}

/// Check 3: the XDP mode the driver allows (its xdp-features `xf`), and whether XDP runs
/// natively (assumed when the features are unknown).
fn xdp_mode_check(i: &str, xf: Option<&XdpFeatures>) -> (Check, bool) {
    match xf {
        Some(x) if x.has("basic") && x.has("redirect") => {
            (ok("xdp_mode", format!("the driver runs XDP natively (xdp-features: {})", x.xdp.join(" "))), true)
        }
        Some(x) => (
            problem(
                "xdp_mode",
                format!("the driver of {i} has no native XDP redirect (xdp-features: {}): AF_XDP runs in skb (generic) mode, with an skb per frame", if x.xdp.is_empty() { "none".into() } else { x.xdp.join(" ") }),
                "use a NIC whose driver supports native XDP (or accept skb mode's cost)".into(),
            ),
            false,
        ),
        None => (
            skip(
                "xdp_mode",
                "this kernel has no netdev netlink family (< 6.3): the driver's XDP features are unknown".into(),
            ),
            true,
        ),
    }
}

/// Check 4: the MTU against the mode's limit: one UMEM frame, or multi-buffer from the kernel
/// and (natively) the driver.
fn mtu_check(i: &str, ls: &LinkState, native: bool, xf: Option<&XdpFeatures>) -> Check {
    let max_single = 4096 - fastpath::xsk::XDP_PACKET_HEADROOM - L2_OVERHEAD_BYTES;
    let kernel = fastpath::features::probe();
    if ls.mtu <= max_single {
        ok("mtu", format!("MTU {} fits one 4096-byte UMEM frame (<= {max_single})", ls.mtu))
    } else if let Err(u) = kernel.check(Feature::MultiBuffer) {
        problem(
            "mtu",
            format!("MTU {} needs AF_XDP multi-buffer: {u}", ls.mtu),
            format!("ip link set dev {i} mtu {max_single}"),
        )
    } else if native && xf.is_some_and(|x| !x.has("rx-sg")) {
        problem(
            "mtu",
            format!("MTU {} needs multi-buffer XDP receive, which the driver lacks (no rx-sg): native XDP is refused at this MTU", ls.mtu),
            format!("ip link set dev {i} mtu {max_single}, or --xdp-mode skb"),
        )
    } else {
        ok("mtu", format!("MTU {} is carried multi-buffer (XDP_USE_SG, frags-aware program)", ls.mtu))
    }
}

/// Check 5: a foreign XDP program on the interface (one not in `fastpath::bpf::names`).
fn xdp_program_check(i: &str, ls: &LinkState) -> Check {
    match fastpath::bpf::query_xdp(ls.ifindex) {
        Ok(None) => ok("xdp_program", format!("no XDP program on {i}")),
        Ok(Some(p)) => {
            let name = fastpath::bpf::prog_name(p.id).unwrap_or_else(|| "?".into());
            if fastpath::bpf::names::is_fastpath(&name) {
                ok("xdp_program", format!("fastpath's {name} (id {}, {}) is attached", p.id, p.mode))
            } else {
                problem(
                    "xdp_program",
                    format!("a foreign XDP program is attached to {i}: {name} (id {}, {} mode); fastpath refuses to replace it", p.id, p.mode),
                    format!("remove it (ip link set dev {i} xdp off; xdpgeneric off) or pass --force"),
                )
            }
        }
        Err(e) => skip("xdp_program", format!("cannot ask the kernel: {e}")),
    }
}

/// Check 6: a veth peer without NAPI (frames redirected into the peer are dropped without
/// it); `eth1` is `dev`'s ethtool statistics.
fn veth_peer_check(i: &str, ls: &LinkState, dev: &NetDev, eth1: &[(String, u64)]) -> Check {
    let driver = dev.driver().unwrap_or_default();
    if driver != "veth" {
        return skip("veth_peer", format!("{i} is not a veth ({driver})"));
    }
    // `peer_ifindex` is an index in the peer's namespace: the device with that index here is
    // the peer only if it is another veth whose own peer_ifindex is ours.
    let peer_ifindex = |st: &[(String, u64)]| st.iter().find(|(n, _)| n == "peer_ifindex").map(|(_, v)| *v as u32);
    let peer = peer_ifindex(eth1);
    let peer_dev = peer.and_then(|p| NetDev::all().ok()?.into_iter().find(|d| d.ifindex == p)).filter(|d| {
        d.ifindex != ls.ifindex
            && d.driver().is_ok_and(|x| x == "veth")
            && peer_ifindex(&d.ethtool_stats().unwrap_or_default()) == Some(ls.ifindex)
    });
    let Some(pd) = peer_dev else {
        return skip("veth_peer", format!("the peer of {i} is in another network namespace: run doctor there too"));
    };
    let has_xdp = fastpath::bpf::query_xdp(pd.ifindex).ok().flatten().is_some();
    let gro = pd.gro_enabled().unwrap_or(false);
    if has_xdp || gro {
        ok(
            "veth_peer",
            format!("its peer {} has NAPI ({})", pd.name, if has_xdp { "an XDP program" } else { "GRO on" }),
        )
    } else {
        problem(
            "veth_peer",
            format!("its peer {} has no NAPI (no XDP program, GRO off): frames XDP_REDIRECTed or XDP_TXed into {i} are dropped (veth_xdp_xmit needs the peer's NAPI)", pd.name),
            format!("ethtool -K {} gro on, or attach an XDP program to it", pd.name),
        )
    }
}

/// Which of the per-socket problems some socket showed.
#[derive(Default)]
struct Seen {
    fill: bool,
    rx: bool,
    polling: bool,
}

/// Checks 7 and 8: AF_XDP sockets of the namespace: one check each for FILL ring empty, RX
/// ring full (or drops the FILL ring does not explain), and the owner not running while it
/// loses frames; each is OK when no socket shows it.
fn xsk_checks(s: &Samples) -> Vec<Check> {
    let (Some(l0), Some(l1)) = (&s.xsk0, &s.xsk1) else {
        return vec![skip("xsk", "AF_XDP sockets cannot be listed here".into())];
    };
    if l1.sockets.is_empty() {
        return vec![skip("xsk", "no AF_XDP socket in this namespace".into())];
    }
    let mut checks = Vec::new();
    let mut seen = Seen::default();
    for sock in &l1.sockets {
        let (Some(b), Some(st)) = (l0.sockets.iter().find(|x| x.inode == sock.inode).and_then(|x| x.stats), sock.stats)
        else {
            continue;
        };
        socket_checks(sock, &b, &st, s, &mut seen, &mut checks);
    }
    let n = l1.sockets.len();
    if !seen.fill {
        checks.push(ok("fill_ring", format!("{n} AF_XDP socket(s): rx_fill_ring_empty_descs did not move")));
    }
    if !seen.rx {
        checks.push(ok(
            "rx_ring",
            format!(
                "{n} AF_XDP socket(s): rx_ring_full did not move, nor rx_dropped beyond what the FILL ring explains"
            ),
        ));
    }
    if !seen.polling {
        checks.push(ok("polling", format!("{n} AF_XDP socket(s): no owner lost frames while not running")));
    }
    checks
}

/// The problems of one socket `sock` from its statistics at the start (`b`) and end (`st`) of
/// the window: its owner not polling, else an empty FILL ring and a full RX ring.
fn socket_checks(
    sock: &diag::XskSocketInfo,
    b: &XskStats,
    st: &XskStats,
    s: &Samples,
    seen: &mut Seen,
    checks: &mut Vec<Check>,
) {
    let secs = s.secs;
    let who =
        format!("socket {} of {} (pid {})", sock.inode, sock.comm.clone().unwrap_or_default(), sock.pid.unwrap_or(0));
    let full = st.rx_ring_full.saturating_sub(b.rx_ring_full) as f64 / secs;
    let empty = st.rx_fill_ring_empty_descs.saturating_sub(b.rx_fill_ring_empty_descs) as f64 / secs;
    // In copy mode a frame lost to an empty FILL ring is counted by rx_dropped too.
    let dropped = st.rx_dropped.saturating_sub(b.rx_dropped) as f64 / secs;
    let other = (dropped - empty).max(0.0);
    // CPU time the owner used over the window (clock ticks).
    let ran = sock.pid.and_then(|p| Some(cpu_ticks(p)?.saturating_sub(*s.ticks0.get(&p)?)));
    if (empty >= 1.0 || full >= 1.0 || other >= 1.0) && ran == Some(0) {
        seen.polling = true;
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
        return;
    }
    if empty >= 1.0 {
        seen.fill = true;
        checks.push(problem(
            "fill_ring",
            format!("{who}: the FILL ring was empty {empty:.0} times/s: frames arrive with no buffer to receive into"),
            "give frames back to the FILL ring sooner, or give the socket more (--frame-count, --ring-size)".into(),
        ));
    }
    // With the FILL ring empty, rx_dropped beyond its count is the same cause: in copy mode one
    // empty-ring event (rx_fill_ring_empty_descs) can cost several frames (__xsk_rcv,
    // net/xdp/xsk.c, counts each frame whose buffer allocation failed in rx_dropped); only
    // rx_ring_full then says the RX ring itself overflowed.
    if full >= 1.0 || (other >= 1.0 && empty < 1.0) {
        seen.rx = true;
        checks.push(problem(
            "rx_ring",
            format!("{who}: the kernel dropped {:.0} frames/s (rx_ring_full {full:.0}/s): the RX ring is full, the application does not take frames fast enough", full.max(other)),
            "poll more often or with larger batches, a larger --ring-size, more queues (--queues) or a CPU of its own (--cpu)".into(),
        ));
    }
}

/// The checks as one JSON object, or one line each (`TAG CHECK DETAIL[; fix: FIX]`).
fn print_checks(a: &DoctorArgs, i: &str, secs: f64, checks: &[Check]) {
    if a.json {
        println!("{}", json!({"type": "doctor", "iface": i, "queue": a.queue, "window_s": secs, "checks": checks}));
    } else {
        for c in checks {
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
}
