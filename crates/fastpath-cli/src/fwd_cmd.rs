//! `fastpath fwd`: forwarding between interfaces at the driver (crates/fastpath/src/bpf/fwd.rs),
//! with the ports followed while it runs from rtnetlink notifications
//! (`fastpath::netdev::watch`, docs/ARCHITECTURE.md §13): a port that goes down (or whose veth
//! peer does) or is deleted is paused, one that comes back is resumed, a recreated interface
//! gets the program again, an MTU change is applied and logged, queue-count, neighbour and
//! address changes are logged. In L3 the routing setup is followed too: every route, rule,
//! nexthop, neighbour, address or link notification, and every second, empties the FIB cache;
//! rules and routes are re-read (cache on, or bypassed while not exact, said in an event line),
//! and each port's IPv4 source check follows rp_filter. Every frame is counted once per ingress port
//! (`fastpath::bpf::fwd::REASONS`), and what the kernel did with redirected frames afterwards
//! per port (`after`: redirect failures, frames the egress driver took or refused).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath::bpf::fwd::{AfterCounters, Forwarder, FwdMode, PortCounters, RpCheck, REASONS};
use fastpath::bpf::AttachOpts;
use fastpath::netdev::watch::{routing_shape, NetEvent, NetWatch, RoutingShape};
use fastpath::netdev::{Iface, LinkState, NetDev};
use serde_json::json;

use crate::args::{FwdArgs, FwdModeArg};
use crate::common::{enter_ns, event_line};
use crate::error::{env, kernel, require_privileges, usage, CliResult};

fn check_args(a: &FwdArgs) -> CliResult<()> {
    let n = a.ifaces.len();
    if !(2..=fastpath::bpf::fwd::MAX_PORTS).contains(&n) {
        return Err(usage(anyhow!(
            "-i given {n} time(s) is not accepted: fwd needs 2 to {} ports",
            fastpath::bpf::fwd::MAX_PORTS
        )));
    }
    let mut seen = HashSet::new();
    if let Some(d) = a.ifaces.iter().find(|i| !seen.insert(*i)) {
        return Err(usage(anyhow!("-i {d} is not accepted: each port once (it is given twice)")));
    }
    if a.mode == FwdModeArg::L2 && n % 2 != 0 {
        return Err(usage(anyhow!(
            "{n} ports are not accepted with --mode l2: it pairs ports in order (1st with 2nd, 3rd with 4th), give an even number"
        )));
    }
    Ok(())
}

fn read_sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn counters_json(c: &PortCounters) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for (name, (p, _)) in REASONS.iter().zip(c) {
        m.insert(name.to_string(), json!(p));
    }
    m.insert("rx_packets".into(), json!(c.iter().map(|x| x.0).sum::<u64>()));
    m.insert("rx_bytes".into(), json!(c.iter().map(|x| x.1).sum::<u64>()));
    serde_json::Value::Object(m)
}

/// The longest wait for notifications: the interval lines and the end are checked at least this
/// often.
const WAIT_MAX: Duration = Duration::from_millis(100);
/// Every port is re-read this often even without a notification (a backstop; notifications
/// are what makes the forwarder react within milliseconds).
const RESYNC: Duration = Duration::from_secs(1);

/// L3: the FIB cache is emptied this often even without a notification (a backstop: a missed
/// notification must not mean stale forwarding for longer).
const CACHE_BACKSTOP: Duration = Duration::from_secs(1);
/// L3: rules, routes and addresses are dumped again this often even without a notification
/// (the backstop of the bypass decision and the local-address list; a dump costs milliseconds
/// per thousand routes, so not every second).
const SHAPE_BACKSTOP: Duration = Duration::from_secs(10);

/// `net.ipv4.conf.{all,IF}.rp_filter`, the larger of the two (`IN_DEV_RPFILTER()`,
/// include/linux/inetdevice.h); 0 if unreadable.
fn rp_filter_of(iface: &str) -> u32 {
    let get = |n: &str| {
        read_sysctl(&format!("/proc/sys/net/ipv4/conf/{n}/rp_filter")).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0)
    };
    get("all").max(get(iface))
}

/// L3: what the forwarder knows of the routing setup, and what it does when it changes: the
/// FIB cache on or bypassed, each port's IPv4 source check, the local addresses.
struct Routing {
    json: bool,
    /// The user wants the cache (no --no-fib-cache).
    cache_wanted: bool,
    shape: Option<RoutingShape>,
    /// Sticky, as the kernel's `fib_has_custom_local_routes`.
    custom_local: bool,
    local4_failed: bool,
    last_shape: Instant,
    events: u64,
}

impl Routing {
    /// "on", "off" (--no-fib-cache) or "bypassed".
    fn cache_state(&self) -> &'static str {
        match (&self.shape, self.cache_wanted) {
            (_, false) => "off",
            (Some(s), true) if s.inexact.is_empty() => "on",
            _ => "bypassed",
        }
    }

    fn cache_reasons(&self) -> Vec<String> {
        match &self.shape {
            Some(s) => s.inexact.clone(),
            None => vec!["the routing setup could not be read".into()],
        }
    }

    fn cache_text(&self) -> String {
        match self.cache_state() {
            "on" => format!(
                "on (exact: default policy rules, no multipath route; emptied on every rtnetlink change and every {} s)",
                CACHE_BACKSTOP.as_secs()
            ),
            "off" => "off (--no-fib-cache: the FIB is asked for every frame)".into(),
            _ => format!("bypassed (the FIB is asked for every frame) because of: {}", self.cache_reasons().join("; ")),
        }
    }

    /// Re-reads the routing setup (`dump`: rules, routes and addresses too) and brings the
    /// forwarder in line, with an event line for each change.
    fn refresh(&mut self, fwd: &mut Forwarder, dump: bool, t: Option<f64>) -> CliResult<()> {
        let was = (self.cache_state(), self.cache_reasons());
        if dump || self.shape.is_none() {
            self.last_shape = Instant::now();
            match routing_shape() {
                Ok(s) => {
                    self.custom_local |= s.custom_local_v4;
                    self.shape = Some(s);
                }
                Err(e) => {
                    // Safe until the next read: no cache, every source checked by the FIB.
                    self.shape = None;
                    if let Some(t) = t {
                        event_line(self.json, t, "-", "routing-read-failed", format!("{e}"));
                    }
                }
            }
        }
        let on = self.cache_state() == "on";
        fwd.set_fib_cache(on)?;
        if let (Some(t), true) = (t, was != (self.cache_state(), self.cache_reasons())) {
            self.events += 1;
            event_line(self.json, t, "-", "fib-cache", self.cache_text());
        }
        let iif = self.shape.as_ref().is_some_and(|s| s.iif_rules_v4);
        let mut local_ok = !self.local4_failed;
        if let Some(s) = &self.shape {
            match fwd.set_local4(&s.local4) {
                Ok(()) => local_ok = true,
                Err(e) => {
                    if !self.local4_failed {
                        if let Some(t) = t {
                            event_line(
                                self.json,
                                t,
                                "-",
                                "local-addresses",
                                format!("{e}: sources checked by the FIB"),
                            );
                        }
                    }
                    local_ok = false;
                }
            }
        }
        self.local4_failed = !local_ok;
        for k in 0..fwd.ports().len() {
            let name = fwd.ports()[k].iface.clone();
            let mut rp = RpCheck::for_kernel(rp_filter_of(&name), iif);
            if rp == RpCheck::Off && !local_ok {
                rp = RpCheck::Loose;
            }
            let old = fwd.ports()[k].rp;
            if old != rp {
                fwd.set_rp_check(k, rp)?;
                if let Some(t) = t {
                    self.events += 1;
                    event_line(
                        self.json,
                        t,
                        &name,
                        "rp-filter",
                        format!("IPv4 source check {} -> {}", old.name(), rp.name()),
                    );
                }
            }
        }
        Ok(())
    }
}

/// The port (by index) an rtnetlink notification is about: its name, or the ifindex it has.
fn port_of(fwd: &Forwarder, ifaces: &[String], name: Option<&str>, ifindex: u32) -> Option<usize> {
    ifaces
        .iter()
        .position(|i| Some(i.as_str()) == name)
        .or_else(|| fwd.ports().iter().position(|p| p.ifindex == Some(ifindex)))
}

fn mac_text(m: &[u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// What the forwarder knows of its ports' links, and what it does when they change.
struct Follow {
    json: bool,
    xdp_mode: Option<fastpath::bpf::XdpMode>,
    force: bool,
    states: Vec<LinkState>,
    /// Active receive queues (ETHTOOL_GCHANNELS): `ethtool -L` sends no rtnetlink
    /// notification, so this is compared at every re-read (at least once a second).
    queues: Vec<Option<u32>>,
    events: u64,
    l3_events: u64,
}

impl Follow {
    /// Reads port `k`'s link by name and brings the forwarder in line: a deleted interface is
    /// paused, a recreated one re-attached, down/up pause and resume, a new MTU is applied
    /// (L2 drop limit) and logged, a new MAC written.
    fn follow(&mut self, fwd: &mut Forwarder, k: usize, name: &str, t: f64) -> CliResult<()> {
        let q = NetDev::by_name(name).ok().and_then(|d| d.rx_queue_count().ok().flatten());
        if let (Some(old), Some(new)) = (self.queues[k], q) {
            if old != new {
                self.events += 1;
                event_line(
                    self.json,
                    t,
                    name,
                    "queues",
                    format!("{old} -> {new} receive queues (the program serves every queue)"),
                );
            }
        }
        if q.is_some() {
            self.queues[k] = q;
        }
        // Resolved again: a link event may mean the interface was deleted and recreated.
        let now_iface = Iface::resolve(name).ok();
        let now = now_iface.as_ref().and_then(Iface::state);
        let opts = AttachOpts::mode(self.xdp_mode).force(self.force);
        let was = self.states[k];
        let known = fwd.ports()[k].ifindex;
        match now {
            None if known.is_some() => {
                fwd.pause(k, true)?;
                self.events += 1;
                event_line(self.json, t, name, "deleted", "paused; waiting for it to come back".into());
            }
            None => {}
            Some(s) if known != Some(s.ifindex) => {
                // Recreated (or back after a delete): attach to the new interface.
                let iface_now = now_iface.as_ref().expect("its state was read");
                match fwd.resume(k, iface_now, s.mac, opts) {
                    Ok(_) => {
                        self.events += 1;
                        fwd.set_mtu(k, s.mtu)?;
                        if !s.up {
                            fwd.pause(k, false)?;
                        }
                        let how = if s.up { "" } else { " (down: paused)" };
                        event_line(
                            self.json,
                            t,
                            name,
                            "recreated",
                            format!("re-attached as ifindex {}{how}", s.ifindex),
                        );
                        self.states[k] = s;
                    }
                    // Tried again at the next notification or resync; said once per attempt.
                    Err(e) => event_line(self.json, t, name, "reattach-failed", format!("{e}")),
                }
            }
            Some(s) => {
                if s.up != fwd.ports()[k].up {
                    self.events += 1;
                    if s.up {
                        fwd.resume(k, now_iface.as_ref().expect("its state was read"), s.mac, opts)?;
                        event_line(self.json, t, name, "up", "resumed".into());
                    } else {
                        fwd.pause(k, false)?;
                        event_line(self.json, t, name, "down", "paused".into());
                    }
                }
                if s.mtu != was.mtu {
                    self.events += 1;
                    fwd.set_mtu(k, s.mtu)?;
                    let limit = match fwd.ports()[k].peer {
                        Some(j) => format!(
                            "; frames from {} over {} bytes are dropped as drop_mtu",
                            fwd.ports()[j].iface,
                            s.mtu.saturating_add(fastpath::bpf::fwd::L2_OVERHEAD_BYTES)
                        ),
                        None => "; larger frames routed to it go to the kernel (pass_frag_needed)".into(),
                    };
                    event_line(self.json, t, name, "mtu", format!("{} -> {} bytes{limit}", was.mtu, s.mtu));
                }
                if s.mac != was.mac {
                    fwd.resume(k, now_iface.as_ref().expect("its state was read"), s.mac, opts)?;
                }
                self.states[k] = s;
            }
        }
        Ok(())
    }
}

/// `--metrics`: per port, packets and bytes under each reason, and what the kernel did after
/// the redirect.
fn fwd_families(fwd: &Forwarder) -> CliResult<Vec<crate::metrics::Family>> {
    use crate::metrics::Family;
    let mut p = Family::counter(
        "fastpath_fwd_packets_total",
        "Frames received on a port, by what became of them.",
        &["port", "reason"],
    );
    let mut b = Family::counter(
        "fastpath_fwd_bytes_total",
        "Bytes received on a port, by what became of them.",
        &["port", "reason"],
    );
    let help = "After XDP_REDIRECT (xdp_redirect_err: by ingress port; xdp_devmap_xmit: by egress port).";
    let mut e = Family::counter("fastpath_fwd_redirect_err_packets_total", help, &["port"]);
    let mut s = Family::counter("fastpath_fwd_xmit_sent_packets_total", help, &["port"]);
    let mut d = Family::counter("fastpath_fwd_xmit_drops_packets_total", help, &["port"]);
    for (k, port) in fwd.ports().iter().enumerate() {
        let c = fwd.counters(k)?;
        for (name, (pk, by)) in REASONS.iter().zip(c) {
            p.add(&[&port.iface, name], pk as f64);
            b.add(&[&port.iface, name], by as f64);
        }
        let af = fwd.after(k)?;
        e.add(&[&port.iface], af.redirect_err as f64);
        s.add(&[&port.iface], af.xmit_sent as f64);
        d.add(&[&port.iface], af.xmit_drops as f64);
    }
    Ok(vec![p, b, e, s, d])
}

/// `fastpath fwd --engine xdp`: loads the forwarder on every port, follows the ports and the
/// routing setup until `stop` or the end of `--duration`, and prints the summary.
///
/// # Errors
///
/// Usage (exit 2) for rejected options; environment (a missing interface, a bridged L2 port, L3
/// without IPv4 forwarding); kernel errors from loading, attaching, rtnetlink or the maps.
pub fn run(a: &FwdArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    if a.queues != 1 || a.cpus.is_some() || a.tx_limit_bytes.is_some() {
        return Err(usage(anyhow!(
            "--queues, --cpus and --tx-limit-bytes are not accepted with --engine xdp: they shape the AF_XDP forwarder (--engine xsk); the XDP program serves every queue on the CPU that receives it"
        )));
    }
    check_args(a)?;
    require_privileges("fwd")?;
    let metrics = crate::metrics::start(a.run.metrics)?;
    enter_ns(&a.netns)?;
    let mode = fwd_mode(a)?;
    // Subscribed before the links are read, so no change between the two is missed.
    let mut watch = NetWatch::open().map_err(|e| kernel(anyhow!("opening an rtnetlink socket: {e}")))?;
    let (states, ifaces) = read_ports(a, mode)?;
    let (mut fwd, mut routing) = set_up(a, mode, &ifaces, &states)?;
    announce(a, mode, &fwd, &routing);
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(a.run.duration);
    let mut lines = Lines::new(a, &fwd, start)?;
    let queues = a.ifaces.iter().map(|i| NetDev::by_name(i).ok().and_then(|d| d.rx_queue_count().ok().flatten()));
    let mut fol = Follow {
        json: a.run.json,
        xdp_mode: a.xdp_mode.mode(),
        force: a.force,
        states,
        queues: queues.collect(),
        events: 0,
        l3_events: 0,
    };
    let mut last_resync = start;
    let mut last_flush = start;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        let now = Instant::now();
        let wait = RESYNC
            .min(lines.next_line.saturating_duration_since(now))
            .min(end.saturating_duration_since(now))
            .min(WAIT_MAX);
        let evs = watch.wait(wait).map_err(|e| kernel(anyhow!("reading rtnetlink notifications: {e}")))?;
        let t = start.elapsed().as_secs_f64();
        let mut resync = last_resync.elapsed() >= RESYNC;
        // Any route, rule, nexthop, neighbour, address or link change may change a FIB answer;
        // and the cache never outlives CACHE_BACKSTOP.
        if !evs.is_empty() || last_flush.elapsed() >= CACHE_BACKSTOP {
            fwd.invalidate_fib_cache()?;
            last_flush = Instant::now();
        }
        let (dirty, reshape) = handle_events(a, mode, &fwd, &mut fol, evs, t, &mut resync);
        if mode == FwdMode::L3 && (reshape || resync) {
            // rp_filter is re-read at every resync (a sysctl write of `all` sends no
            // notification for each interface); the dump only on a change or SHAPE_BACKSTOP.
            let dump = reshape || routing.last_shape.elapsed() >= SHAPE_BACKSTOP;
            routing.refresh(&mut fwd, dump, Some(t))?;
        }
        if resync {
            last_resync = Instant::now();
        }
        for (k, (name, dirty)) in a.ifaces.iter().zip(dirty).enumerate() {
            if dirty || resync {
                fol.follow(&mut fwd, k, name, t)?;
            }
        }
        if let Some(m) = metrics.as_ref().filter(|m| m.due()) {
            m.publish(&fwd_families(&fwd)?);
        }
        if Instant::now() >= lines.next_line {
            lines.print(a, &fwd, t)?;
        }
    }
    if let Some(m) = &metrics {
        m.publish(&fwd_families(&fwd)?);
    }
    print_summary(a, mode, &fwd, &fol, &routing, start.elapsed().as_secs_f64())
}

/// The forwarding mode; L3 needs IPv4 forwarding on in this namespace.
fn fwd_mode(a: &FwdArgs) -> CliResult<FwdMode> {
    let mode = match a.mode {
        FwdModeArg::L2 => FwdMode::L2,
        FwdModeArg::L3 => FwdMode::L3,
    };
    if mode == FwdMode::L3 && read_sysctl("/proc/sys/net/ipv4/conf/all/forwarding").as_deref() != Some("1") {
        return Err(env(anyhow!(
            "--mode l3 needs IPv4 forwarding on in this namespace (bpf_fib_lookup answers FWD_DISABLED otherwise): sysctl -w net.ipv4.ip_forward=1"
        )));
    }
    Ok(mode)
}

/// Resolves every -i and reads its link state; in L2 refuses a port that a bridge or bond
/// also holds.
fn read_ports(a: &FwdArgs, mode: FwdMode) -> CliResult<(Vec<LinkState>, Vec<Iface>)> {
    let mut states: Vec<LinkState> = Vec::new();
    let mut ifaces: Vec<Iface> = Vec::new();
    for i in &a.ifaces {
        let gone = || {
            env(anyhow!(
                "-i {i}: no interface of that name in this network namespace{}",
                crate::hints::iface_elsewhere(i)
            ))
        };
        let iface = Iface::resolve(i).map_err(|_| gone())?;
        states.push(iface.state().ok_or_else(gone)?);
        ifaces.push(iface);
    }
    if mode == FwdMode::L2 {
        // A pair of ports that a bridge (or bond) also joins would carry each frame twice, and
        // round between the two in a loop; fastpath runs no spanning tree.
        for (i, s) in a.ifaces.iter().zip(&states) {
            let m = fastpath::netdev::watch::link_master(s.ifindex)
                .map_err(|e| kernel(anyhow!("reading the links of this namespace: {e}")))?;
            if let Some((_, master)) = m {
                return Err(env(anyhow!(
                    "{}",
                    crate::hints::in_entered_ns(&format!(
                        "-i {i} is not accepted with --mode l2: it is a port of {master} (a bridge or bond would also carry its frames, and a pair bridged twice loops them); take it out (ip link set {i} nomaster) first"
                    ))
                )));
            }
        }
    }
    Ok((states, ifaces))
}

/// Loads the forwarder, adds the ports, reads the routing setup (L3) or pairs the ports (L2),
/// and attaches it everywhere (a port that is down starts paused).
fn set_up(a: &FwdArgs, mode: FwdMode, ifaces: &[Iface], states: &[LinkState]) -> CliResult<(Forwarder, Routing)> {
    let mut fwd = Forwarder::load(mode)?;
    for (iface, s) in ifaces.iter().zip(states) {
        fwd.add_port(iface, s.mac, s.mtu)?;
    }
    let mut routing = Routing {
        json: a.run.json,
        cache_wanted: !a.no_fib_cache,
        shape: None,
        custom_local: false,
        local4_failed: false,
        last_shape: Instant::now(),
        events: 0,
    };
    if mode == FwdMode::L3 {
        routing.refresh(&mut fwd, true, None)?;
    }
    if mode == FwdMode::L2 {
        for k in (0..a.ifaces.len()).step_by(2) {
            fwd.pair(k, k + 1);
        }
    }
    // On any error below, dropping `fwd` detaches every program attached so far.
    for (k, st) in states.iter().enumerate() {
        for note in fwd.attach(k, AttachOpts::mode(a.xdp_mode.mode()).force(a.force))? {
            eprintln!("fastpath fwd: {note}");
        }
        if !st.up {
            fwd.pause(k, false)?;
        }
    }
    Ok((fwd, routing))
}

/// The "ready" line (--json) or the header lines: the ports, their XDP modes, and in L3 the
/// FIB cache and the source checks.
fn announce(a: &FwdArgs, mode: FwdMode, fwd: &Forwarder, routing: &Routing) {
    let ports_desc: Vec<String> = fwd
        .ports()
        .iter()
        .map(|p| {
            format!("{} ({}{})", p.iface, p.mode.map(|m| m.name()).unwrap_or("?"), if p.up { "" } else { ", paused" })
        })
        .collect();
    if a.run.json {
        let ports: Vec<_> = fwd
            .ports()
            .iter()
            .map(|p| {
                json!({"iface": p.iface, "ifindex": p.ifindex, "xdp_mode": p.mode.map(|m| m.name()), "paused": !p.up,
                            "rp_check": (mode == FwdMode::L3).then(|| p.rp.name())})
            })
            .collect();
        let mut ready = json!({"type": "ready", "bench": "fwd", "engine": "xdp", "mode": mode.name(), "ports": ports});
        if mode == FwdMode::L3 {
            ready["fib_cache"] = json!(routing.cache_state());
            ready["fib_cache_detail"] = json!(routing.cache_text());
            ready["fib_cache_backstop_s"] = json!(CACHE_BACKSTOP.as_secs());
        }
        println!("{ready}");
    } else {
        println!("fwd {}: {}; Ctrl-C stops", mode.name(), ports_desc.join(", "));
        if mode == FwdMode::L3 {
            let rp: Vec<String> = fwd.ports().iter().map(|p| format!("{} {}", p.iface, p.rp.name())).collect();
            println!("fwd l3: FIB cache {}; IPv4 source check: {}", routing.cache_text(), rp.join(", "));
        }
    }
}

/// Marks the ports that rtnetlink events `evs` touched (returned, with whether the routing
/// setup may have changed), logs the L3 neighbour/address events; an overrun sets `resync`.
fn handle_events(
    a: &FwdArgs,
    mode: FwdMode,
    fwd: &Forwarder,
    fol: &mut Follow,
    evs: Vec<NetEvent>,
    t: f64,
    resync: &mut bool,
) -> (Vec<bool>, bool) {
    let mut dirty = vec![false; a.ifaces.len()];
    // Rules, routes, nexthops, addresses, netconf (rp_filter) may change the cache's
    // exactness, the source checks or the local addresses.
    let reshape = evs.iter().any(|e| {
        matches!(
            e,
            NetEvent::Route { .. }
                | NetEvent::Rule { .. }
                | NetEvent::Nexthop
                | NetEvent::Address { .. }
                | NetEvent::NetConf
                | NetEvent::Overrun
        )
    });
    for e in evs {
        match e {
            NetEvent::Link(l) => {
                if let Some(k) = port_of(fwd, &a.ifaces, Some(&l.name), l.ifindex) {
                    dirty[k] = true;
                }
            }
            NetEvent::LinkDeleted { ifindex, name } => {
                if let Some(k) = port_of(fwd, &a.ifaces, Some(&name), ifindex) {
                    dirty[k] = true;
                }
            }
            // Multicast entries (noarp) do not steer forwarding: not logged.
            NetEvent::Neighbour { ifindex, addr, lladdr, state, deleted }
                if mode == FwdMode::L3 && state != "noarp" =>
            {
                if let Some(k) = port_of(fwd, &a.ifaces, None, ifindex) {
                    fol.l3_events += 1;
                    let ll = lladdr.map(|m| format!(" lladdr {}", mac_text(&m))).unwrap_or_default();
                    event_line(
                        a.run.json,
                        t,
                        &a.ifaces[k],
                        "neighbour",
                        format!(
                            "{addr}{ll} {}{} (bpf_fib_lookup reads the neighbour table per frame)",
                            if deleted { "deleted, was " } else { "" },
                            state
                        ),
                    );
                }
            }
            NetEvent::Address { ifindex, addr, prefix_len, deleted } if mode == FwdMode::L3 => {
                if let Some(k) = port_of(fwd, &a.ifaces, None, ifindex) {
                    fol.l3_events += 1;
                    event_line(
                        a.run.json,
                        t,
                        &a.ifaces[k],
                        "address",
                        format!("{addr}/{prefix_len} {}", if deleted { "removed" } else { "added" }),
                    );
                }
            }
            NetEvent::Overrun => {
                *resync = true;
                event_line(
                    a.run.json,
                    t,
                    "-",
                    "overrun",
                    "rtnetlink notifications were lost: every port re-read".into(),
                );
            }
            _ => {}
        }
    }
    (dirty, reshape)
}

/// The interval lines: when the next is due, and the counters the last one ended with.
struct Lines {
    next_line: Instant,
    interval: Duration,
    prev: Vec<PortCounters>,
    prev_after: Vec<AfterCounters>,
    prev_t: Instant,
}

impl Lines {
    /// Baselines at `start`; the first line is due one --interval later.
    fn new(a: &FwdArgs, fwd: &Forwarder, start: Instant) -> CliResult<Self> {
        let interval = Duration::from_secs_f64(a.run.interval);
        Ok(Lines {
            next_line: start + interval,
            interval,
            prev: (0..a.ifaces.len()).map(|k| fwd.counters(k)).collect::<Result<_, _>>()?,
            prev_after: (0..a.ifaces.len()).map(|k| fwd.after(k)).collect::<Result<_, _>>()?,
            prev_t: start,
        })
    }

    /// Prints one interval line (rates per port since the last) at run time `t`.
    fn print(&mut self, a: &FwdArgs, fwd: &Forwarder, t: f64) -> CliResult<()> {
        self.next_line += self.interval;
        let now_t = Instant::now();
        let secs = now_t.duration_since(self.prev_t).as_secs_f64().max(1e-9);
        self.prev_t = now_t;
        let mut ports = Vec::new();
        let mut text = Vec::new();
        for (k, pv) in self.prev.iter_mut().enumerate() {
            let c = fwd.counters(k)?;
            let d: PortCounters = std::array::from_fn(|r| (c[r].0 - pv[r].0, c[r].1 - pv[r].1));
            let rx: u64 = d.iter().map(|x| x.0).sum();
            let other = rx - d[0].0;
            let af = fwd.after(k)?;
            let pa = std::mem::replace(&mut self.prev_after[k], af);
            let after = AfterCounters {
                redirect_err: af.redirect_err - pa.redirect_err,
                xmit_sent: af.xmit_sent - pa.xmit_sent,
                xmit_drops: af.xmit_drops - pa.xmit_drops,
            };
            ports.push(json!({"iface": a.ifaces[k], "rx_pps": rx as f64 / secs, "forwarded_pps": d[0].0 as f64 / secs,
                              "forwarded_bps": d[0].1 as f64 * 8.0 / secs,
                              "xmit_sent_pps": after.xmit_sent as f64 / secs,
                              "counters": counters_json(&d), "after": after}));
            text.push(format!(
                "{} rx {:.3} Mpps fwd {:.3} Mpps other {}",
                a.ifaces[k],
                rx as f64 / secs / 1e6,
                d[0].0 as f64 / secs / 1e6,
                other
            ));
            *pv = c;
        }
        // Not asked for (see logging::interval_lines): the baselines above still advance.
        if !a.run.interval_lines {
            return Ok(());
        }
        if a.run.json {
            println!("{}", json!({"type": "interval", "t_s": t, "ports": ports}));
        } else {
            println!("{t:7.2} s  {}", text.join("  |  "));
        }
        Ok(())
    }
}

/// The summary after `secs` of running: per port its counters, the link and L3 event counts.
fn print_summary(
    a: &FwdArgs,
    mode: FwdMode,
    fwd: &Forwarder,
    fol: &Follow,
    routing: &Routing,
    secs: f64,
) -> CliResult<()> {
    let mut ports = Vec::new();
    for (k, p) in fwd.ports().iter().enumerate() {
        let c = fwd.counters(k)?;
        let after = fwd.after(k)?;
        ports.push(json!({"iface": p.iface, "xdp_mode": p.mode.map(|m| m.name()), "paused": !p.up, "rp_check": (mode == FwdMode::L3).then(|| p.rp.name()),
                          "counters": counters_json(&c), "after": after}));
    }
    if a.run.json {
        println!(
            "{}",
            json!({"type": "summary", "bench": "fwd", "engine": "xdp", "mode": mode.name(), "duration_s": secs,
                   "link_events": fol.events, "l3_events": fol.l3_events + routing.events,
                   "fib_cache": (mode == FwdMode::L3).then(|| routing.cache_state()), "ports": ports})
        );
    } else {
        println!(
            "fwd {} ran {secs:.1} s, {} link event(s), {} neighbour/address/routing event(s):",
            mode.name(),
            fol.events,
            fol.l3_events + routing.events
        );
        for p in &ports {
            println!("  {}: {}", p["iface"].as_str().unwrap_or("?"), p["counters"]);
        }
    }
    Ok(())
}
