//! Following interfaces, addresses and neighbours through the kernel's rtnetlink notifications
//! (rtnetlink(7); `include/uapi/linux/rtnetlink.h`), as `fastpath fwd` does (docs/ARCHITECTURE.md
//! §13).
//!
//! A [`NetWatch`] is a NETLINK_ROUTE socket joined to the multicast groups of links
//! (RTNLGRP_LINK), neighbours (RTNLGRP_NEIGH), addresses (RTNLGRP_IPV4/IPV6_IFADDR), routes
//! (RTNLGRP_IPV4/IPV6_ROUTE), policy rules (RTNLGRP_IPV4/IPV6_RULE), nexthop objects
//! (RTNLGRP_NEXTHOP, kernel >= 5.3) and per-interface settings (RTNLGRP_IPV4/IPV6_NETCONF:
//! forwarding, rp_filter) of the network namespace it is opened in. The kernel sends an
//! RTM_NEWLINK for every change of a link (flags, carrier, MTU, address, queue counts) and an
//! RTM_DELLINK when it goes; [`NetWatch::wait`] parses them (with the `netlink-packet-route`
//! crate) into [`NetEvent`]s. If the socket's receive buffer overflows (ENOBUFS) notifications
//! are lost, and [`NetEvent::Overrun`] tells the caller to re-read what it follows. No
//! privileges needed to listen; kernel >= 2.6 (a group the kernel does not know is skipped).
//!
//! [`routing_shape`] dumps the rules, routes and addresses once and says what makes a FIB
//! answer depend on more than (destination, input interface).

use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsRawFd;
use std::time::Duration;

use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourState};
use netlink_packet_route::route::{RouteAttribute, RouteMessage, RouteProtocol, RouteType};
use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::sys;

/// A link as an RTM_NEWLINK notification describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    /// Interface index.
    pub ifindex: u32,
    /// Interface name (IFLA_IFNAME).
    pub name: String,
    /// IFF_UP and IFF_RUNNING both set (administratively up, carrier on).
    pub up: bool,
    /// MTU in bytes (IFLA_MTU).
    pub mtu: u32,
    /// Ethernet address (IFLA_ADDRESS), zero if the link has none of 6 bytes.
    pub mac: [u8; 6],
    /// IFLA_NUM_RX_QUEUES / IFLA_NUM_TX_QUEUES.
    pub rx_queues: u32,
    /// See `rx_queues`.
    pub tx_queues: u32,
}

/// One notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetEvent {
    /// RTM_NEWLINK: a link appeared or changed.
    Link(LinkInfo),
    /// RTM_DELLINK: the link is gone.
    LinkDeleted {
        /// Its index.
        ifindex: u32,
        /// Its name, if the message carried it.
        name: String,
    },
    /// RTM_NEWNEIGH / RTM_DELNEIGH.
    Neighbour {
        /// The interface the entry is on.
        ifindex: u32,
        /// The neighbour's IP address.
        addr: IpAddr,
        /// Its link-layer address, if known.
        lladdr: Option<[u8; 6]>,
        /// NUD state name ("reachable", "stale", "permanent", "failed", ...).
        state: &'static str,
        /// RTM_DELNEIGH.
        deleted: bool,
    },
    /// RTM_NEWADDR / RTM_DELADDR.
    Address {
        /// The interface the address is on.
        ifindex: u32,
        /// The address.
        addr: IpAddr,
        /// Its prefix length in bits.
        prefix_len: u8,
        /// RTM_DELADDR.
        deleted: bool,
    },
    /// RTM_NEWROUTE / RTM_DELROUTE (IPv4 or IPv6).
    Route {
        /// RTM_DELROUTE.
        deleted: bool,
    },
    /// RTM_NEWRULE / RTM_DELRULE (IPv4 or IPv6 policy rule).
    Rule {
        /// RTM_DELRULE.
        deleted: bool,
    },
    /// RTM_NEWNEXTHOP / RTM_DELNEXTHOP (a nexthop object or group changed).
    Nexthop,
    /// RTM_NEWNETCONF / RTM_DELNETCONF (an interface's forwarding or rp_filter setting).
    NetConf,
    /// The receive buffer overflowed (ENOBUFS): notifications were lost; re-read the state.
    Overrun,
}

/// A NETLINK_ROUTE socket subscribed to link, neighbour, address, route, rule, nexthop and
/// netconf notifications.
#[derive(Debug)]
pub struct NetWatch {
    sock: Socket,
    buf: Vec<u8>,
}

const RTM_NEWNETCONF: u16 = 80;
const RTM_DELNETCONF: u16 = 81;
const RTM_NEWNEXTHOP: u16 = 104;
const RTM_DELNEXTHOP: u16 = 105;
const RTNLGRP_NEXTHOP: u32 = 32;

/// Receive buffer asked for: a burst of link changes must not overflow it.
const RCVBUF_BYTES: usize = 1 << 20;

fn mac6(b: &[u8]) -> Option<[u8; 6]> {
    b.try_into().ok()
}

fn nud_name(s: NeighbourState) -> &'static str {
    match s {
        NeighbourState::Incomplete => "incomplete",
        NeighbourState::Reachable => "reachable",
        NeighbourState::Stale => "stale",
        NeighbourState::Delay => "delay",
        NeighbourState::Probe => "probe",
        NeighbourState::Failed => "failed",
        NeighbourState::Noarp => "noarp",
        NeighbourState::Permanent => "permanent",
        NeighbourState::None => "none",
        _ => "other",
    }
}

fn link_info(m: &LinkMessage) -> LinkInfo {
    let mut l = LinkInfo {
        ifindex: m.header.index,
        name: String::new(),
        up: m.header.flags.contains(LinkFlags::Up | LinkFlags::Running),
        mtu: 0,
        mac: [0; 6],
        rx_queues: 0,
        tx_queues: 0,
    };
    for a in &m.attributes {
        match a {
            LinkAttribute::IfName(n) => l.name = n.clone(),
            LinkAttribute::Mtu(v) => l.mtu = *v,
            LinkAttribute::Address(b) => l.mac = mac6(b).unwrap_or([0; 6]),
            LinkAttribute::NumRxQueues(v) => l.rx_queues = *v,
            LinkAttribute::NumTxQueues(v) => l.tx_queues = *v,
            _ => {}
        }
    }
    l
}

fn event(msg: RouteNetlinkMessage) -> Option<NetEvent> {
    let deleted = matches!(msg, RouteNetlinkMessage::DelNeighbour(_) | RouteNetlinkMessage::DelAddress(_));
    Some(match msg {
        RouteNetlinkMessage::NewLink(m) => NetEvent::Link(link_info(&m)),
        RouteNetlinkMessage::DelLink(m) => {
            let l = link_info(&m);
            NetEvent::LinkDeleted { ifindex: l.ifindex, name: l.name }
        }
        RouteNetlinkMessage::NewNeighbour(m) | RouteNetlinkMessage::DelNeighbour(m) => {
            let mut addr = None;
            let mut lladdr = None;
            for a in &m.attributes {
                match a {
                    NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => addr = Some(IpAddr::V4(*v4)),
                    NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => addr = Some(IpAddr::V6(*v6)),
                    NeighbourAttribute::LinkLayerAddress(b) => lladdr = mac6(b),
                    _ => {}
                }
            }
            NetEvent::Neighbour {
                ifindex: m.header.ifindex,
                addr: addr?,
                lladdr,
                state: nud_name(m.header.state),
                deleted,
            }
        }
        RouteNetlinkMessage::NewAddress(m) | RouteNetlinkMessage::DelAddress(m) => {
            let addr = m.attributes.iter().find_map(|a| match a {
                AddressAttribute::Address(ip) => Some(*ip),
                _ => None,
            })?;
            NetEvent::Address { ifindex: m.header.index, addr, prefix_len: m.header.prefix_len, deleted }
        }
        RouteNetlinkMessage::NewRoute(_) => NetEvent::Route { deleted: false },
        RouteNetlinkMessage::DelRoute(_) => NetEvent::Route { deleted: true },
        RouteNetlinkMessage::NewRule(_) => NetEvent::Rule { deleted: false },
        RouteNetlinkMessage::DelRule(_) => NetEvent::Rule { deleted: true },
        _ => return None,
    })
}

/// Parses one datagram of rtnetlink messages into events (unknown messages are skipped).
fn parse(mut bytes: &[u8], out: &mut Vec<NetEvent>) {
    while bytes.len() >= 16 {
        // Types this crate does not parse (include/uapi/linux/rtnetlink.h).
        let kind = u16::from_ne_bytes([bytes[4], bytes[5]]);
        let raw = match kind {
            RTM_NEWNETCONF | RTM_DELNETCONF => Some(NetEvent::NetConf),
            RTM_NEWNEXTHOP | RTM_DELNEXTHOP => Some(NetEvent::Nexthop),
            _ => None,
        };
        if let Some(e) = raw {
            out.push(e);
            let len = u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
            let step = (len + 3) & !3;
            if step == 0 || step > bytes.len() {
                return;
            }
            bytes = &bytes[step..];
            continue;
        }
        let Ok(m) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(bytes) else {
            // A message this crate cannot parse: skip it by its header's length.
            let len = u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
            let step = (len + 3) & !3;
            if step == 0 || step > bytes.len() {
                return;
            }
            bytes = &bytes[step..];
            continue;
        };
        let len = m.header.length as usize;
        if let NetlinkPayload::InnerMessage(inner) = m.payload {
            if let Some(e) = event(inner) {
                out.push(e);
            }
        }
        let step = (len + 3) & !3;
        if step == 0 || step > bytes.len() {
            return;
        }
        bytes = &bytes[step..];
    }
}

impl NetWatch {
    /// Opens the socket in the calling thread's network namespace and joins the link,
    /// neighbour, IPv4/IPv6 address and route groups.
    ///
    /// # Errors
    ///
    /// The [`io::Error`] of socket(2), bind(2), joining a group (setsockopt
    /// NETLINK_ADD_MEMBERSHIP) or setting O_NONBLOCK. Joining RTNLGRP_NEXTHOP (kernel >= 5.3)
    /// and enlarging the receive buffer are best effort.
    pub fn open() -> io::Result<Self> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind(&SocketAddr::new(0, 0))?;
        for g in [
            libc::RTNLGRP_LINK,
            libc::RTNLGRP_NEIGH,
            libc::RTNLGRP_IPV4_IFADDR,
            libc::RTNLGRP_IPV6_IFADDR,
            libc::RTNLGRP_IPV4_ROUTE,
            libc::RTNLGRP_IPV6_ROUTE,
            libc::RTNLGRP_IPV4_RULE,
            libc::RTNLGRP_IPV6_RULE,
            libc::RTNLGRP_IPV4_NETCONF,
            libc::RTNLGRP_IPV6_NETCONF,
        ] {
            sock.add_membership(g)?;
        }
        // RTNLGRP_NEXTHOP (32) is past the libc crate's list; kernel >= 5.3 (older: EINVAL, and
        // there are no nexthop objects to follow).
        let _ = sock.add_membership(RTNLGRP_NEXTHOP);
        // Best effort: a smaller buffer only makes an overrun (reported) likelier.
        let _ = sock.set_rx_buf_sz(RCVBUF_BYTES);
        sock.set_non_blocking(true)?;
        Ok(Self { sock, buf: vec![0; 64 * 1024] })
    }

    /// Waits up to `timeout` for notifications and returns every one that has arrived (empty
    /// on timeout).
    ///
    /// # Errors
    ///
    /// The [`io::Error`] of poll(2) or recv(2) other than EAGAIN / EINTR; ENOBUFS (lost
    /// notifications) is not an error but a [`NetEvent::Overrun`].
    pub fn wait(&mut self, timeout: Duration) -> io::Result<Vec<NetEvent>> {
        let mut out = Vec::new();
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        match sys::poll_readable(self.sock.as_raw_fd(), ms) {
            Ok(_) => {}
            Err(e) if e.errno == libc::EINTR => return Ok(out),
            Err(e) => return Err(io::Error::other(e)),
        }
        loop {
            match self.sock.recv(&mut &mut self.buf[..], 0) {
                Ok(0) => break,
                Ok(n) => parse(&self.buf[..n.min(self.buf.len())], &mut out),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => break,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => out.push(NetEvent::Overrun),
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// Sends one dump request (`NLM_F_DUMP`) on a new NETLINK_ROUTE socket and returns every
/// message of the answer that the crate parses (others are skipped by their length).
fn dump(req: RouteNetlinkMessage) -> io::Result<Vec<RouteNetlinkMessage>> {
    let mut sock = Socket::new(NETLINK_ROUTE)?;
    sock.bind_auto()?;
    sock.connect(&SocketAddr::new(0, 0))?;
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_REQUEST | NLM_F_DUMP;
    hdr.sequence_number = 1;
    let mut m = NetlinkMessage::new(hdr, NetlinkPayload::InnerMessage(req));
    m.finalize();
    let mut buf = vec![0u8; m.buffer_len()];
    m.serialize(&mut buf);
    sock.send(&buf, 0)?;
    let mut out = Vec::new();
    let mut rbuf = vec![0u8; 1 << 16];
    loop {
        let n = sock.recv(&mut &mut rbuf[..], 0)?;
        let mut b = &rbuf[..n.min(rbuf.len())];
        while b.len() >= 16 {
            let len = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize;
            match NetlinkMessage::<RouteNetlinkMessage>::deserialize(b).map(|m| m.payload) {
                Ok(NetlinkPayload::Done(_)) => return Ok(out),
                Ok(NetlinkPayload::Error(e)) => {
                    let code = e.code.map(|c| -c.get()).unwrap_or(libc::EIO);
                    return Err(io::Error::from_raw_os_error(code));
                }
                Ok(NetlinkPayload::InnerMessage(i)) => out.push(i),
                _ => {}
            }
            let step = (len + 3) & !3;
            if step == 0 || step > b.len() {
                break;
            }
            b = &b[step..];
        }
    }
}

/// What makes the kernel's FIB answer for a forwarded packet depend on more than its
/// destination and input interface, and what its reverse-path (source) check needs, as
/// [`routing_shape`] found it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingShape {
    /// Why a cache keyed on (destination, input interface) cannot be exact, one short text each
    /// ("policy rule 100: from 10.99.1.1 prohibit", "multipath route 10.99.2.0/24"); empty: it
    /// can.
    pub inexact: Vec<String>,
    /// IPv4 policy rules other than the kernel's three defaults exist: the kernel checks every
    /// source with a full reverse lookup (`fib4_has_custom_rules()` in net/ipv4/fib_frontend.c).
    pub custom_rules_v4: bool,
    /// An IPv4 rule selects on the input interface: a reverse lookup made with the ingress
    /// interface (as bpf_fib_lookup makes it) may differ from the kernel's (made from `lo`).
    pub iif_rules_v4: bool,
    /// A route of type local added by hand (IPv4): the kernel then also checks every source
    /// with a full reverse lookup (`fib_has_custom_local_routes`).
    pub custom_local_v4: bool,
    /// The namespace's IPv4 addresses (a packet from one of them is a martian).
    pub local4: Vec<Ipv4Addr>,
}

fn is_default_rule(r: &RuleMessage) -> bool {
    let h = &r.header;
    if h.dst_len != 0 || h.src_len != 0 || h.tos != 0 || h.action != RuleAction::ToTable || !h.flags.is_empty() {
        return false;
    }
    let (mut prio, mut table) = (0u32, u32::from(h.table));
    for a in &r.attributes {
        match a {
            RuleAttribute::Priority(p) => prio = *p,
            RuleAttribute::Table(t) => table = *t,
            RuleAttribute::Protocol(_) => {}
            // Dumped with every rule; u32::MAX is "not set" (fib_nl_fill_rule()).
            RuleAttribute::SuppressPrefixLen(u32::MAX) | RuleAttribute::SuppressIfGroup(u32::MAX) => {}
            _ => return false,
        }
    }
    let v4 = h.family == AddressFamily::Inet;
    // fib_default_rules_init() (net/ipv4/fib_rules.c), fib6_default_rules_init()
    // (net/ipv6/fib6_rules.c).
    matches!((prio, table), (0, 255) | (32766, 254)) || (v4 && (prio, table) == (32767, 253))
}

fn rule_text(r: &RuleMessage) -> String {
    let prio = r.attributes.iter().find_map(|a| match a {
        RuleAttribute::Priority(p) => Some(*p),
        _ => None,
    });
    let mut sel = Vec::new();
    for a in &r.attributes {
        match a {
            RuleAttribute::Source(ip) => sel.push(format!("from {ip}/{}", r.header.src_len)),
            RuleAttribute::Destination(ip) => sel.push(format!("to {ip}/{}", r.header.dst_len)),
            RuleAttribute::Iifname(n) => sel.push(format!("iif {n}")),
            RuleAttribute::Oifname(n) => sel.push(format!("oif {n}")),
            RuleAttribute::FwMark(m) => sel.push(format!("fwmark {m:#x}")),
            RuleAttribute::L3MDev(_) => sel.push("l3mdev (VRF)".into()),
            RuleAttribute::Table(t) => sel.push(format!("lookup {t}")),
            RuleAttribute::Priority(_)
            | RuleAttribute::Protocol(_)
            | RuleAttribute::SuppressPrefixLen(u32::MAX)
            | RuleAttribute::SuppressIfGroup(u32::MAX) => {}
            other => sel.push(format!("{other:?}")),
        }
    }
    if r.header.tos != 0 {
        sel.push(format!("tos {:#x}", r.header.tos));
    }
    match r.header.action {
        RuleAction::ToTable => {}
        a => sel.push(format!("{a:?}").to_lowercase()),
    }
    let fam = if r.header.family == AddressFamily::Inet6 { "IPv6" } else { "IPv4" };
    format!("{fam} policy rule {}: {}", prio.unwrap_or(0), sel.join(" "))
}

fn route_text(r: &RouteMessage) -> String {
    let dst = r.attributes.iter().find_map(|a| match a {
        RouteAttribute::Destination(d) => Some(format!("{d:?}")),
        _ => None,
    });
    let dst = dst
        .map(|d| {
            // RouteAddress's Debug is `Inet(10.99.2.0)`: keep what is inside the parentheses.
            let inner = d.split_once('(').map(|(_, x)| x.trim_end_matches(')').to_string()).unwrap_or(d);
            format!("{inner}/{}", r.header.destination_prefix_length)
        })
        .unwrap_or_else(|| "default".into());
    format!("{} route {dst}", if r.header.address_family == AddressFamily::Inet6 { "IPv6" } else { "IPv4" })
}

/// Dumps the calling thread's network namespace's IPv4 and IPv6 policy rules and routes
/// (RTM_GETRULE, RTM_GETROUTE) and IPv4 addresses (RTM_GETADDR) and reports their
/// [`RoutingShape`]. The FIB answer can differ from (destination, input interface) alone for:
/// a policy rule other than the defaults (it may select on source, TOS, mark, ports, iif,
/// VRF), a multipath route or one using a nexthop object (the path is picked by a hash of the
/// flow), an IPv4 route with a TOS, an IPv6 route with a source prefix. Several milliseconds
/// for thousands of routes; no privileges; kernel >= 2.6.
///
/// # Errors
///
/// The [`io::Error`] of the NETLINK_ROUTE socket, its send or receive, or the errno the kernel
/// answers a dump request with (an NLMSG_ERROR message).
pub fn routing_shape() -> io::Result<RoutingShape> {
    let mut shape = RoutingShape::default();
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        let mut req = RuleMessage::default();
        req.header.family = family;
        for m in dump(RouteNetlinkMessage::GetRule(req))? {
            let RouteNetlinkMessage::NewRule(r) = m else { continue };
            if is_default_rule(&r) {
                continue;
            }
            if r.header.family == AddressFamily::Inet {
                shape.custom_rules_v4 = true;
                if r.attributes.iter().any(|a| matches!(a, RuleAttribute::Iifname(_))) {
                    shape.iif_rules_v4 = true;
                }
            }
            shape.inexact.push(rule_text(&r));
        }
        let mut req = RouteMessage::default();
        req.header.address_family = family;
        for m in dump(RouteNetlinkMessage::GetRoute(req))? {
            let RouteNetlinkMessage::NewRoute(r) = m else { continue };
            let h = &r.header;
            let paths = r.attributes.iter().find_map(|a| match a {
                RouteAttribute::MultiPath(v) => Some(v.len()),
                _ => None,
            });
            if paths.is_some_and(|n| n > 1) {
                shape.inexact.push(format!("multipath {}", route_text(&r)));
            } else if r.attributes.iter().any(|a| matches!(a, RouteAttribute::NhId(_))) {
                shape.inexact.push(format!("{} (a nexthop object)", route_text(&r)));
            } else if h.tos != 0 {
                shape.inexact.push(format!("{} tos {:#x}", route_text(&r), h.tos));
            } else if h.source_prefix_length != 0 {
                shape.inexact.push(format!("{} from a source prefix", route_text(&r)));
            }
            if h.address_family == AddressFamily::Inet
                && h.kind == RouteType::Local
                && h.protocol != RouteProtocol::Kernel
            {
                shape.custom_local_v4 = true;
            }
        }
    }
    let mut req = AddressMessage::default();
    req.header.family = AddressFamily::Inet;
    for m in dump(RouteNetlinkMessage::GetAddress(req))? {
        let RouteNetlinkMessage::NewAddress(a) = m else { continue };
        let local = a.attributes.iter().find_map(|x| match x {
            AddressAttribute::Local(IpAddr::V4(v)) => Some(*v),
            _ => None,
        });
        let addr = local.or_else(|| {
            a.attributes.iter().find_map(|x| match x {
                AddressAttribute::Address(IpAddr::V4(v)) => Some(*v),
                _ => None,
            })
        });
        shape.local4.extend(addr);
    }
    Ok(shape)
}

/// The IPv4 broadcast addresses of the calling thread's network namespace, as the kernel's
/// fib_add_ifaddr (net/ipv4/fib_frontend.c) makes local-table broadcast routes of them: each
/// address's IFA_BROADCAST (`ip addr ... brd B`) if set and not 255.255.255.255, and for a
/// prefix of at most /30 the address with every host bit set. Those of interface `first`
/// come first; no duplicates. By an RTM_GETADDR dump; no privileges; kernel >= 2.6.
///
/// # Errors
///
/// As [`routing_shape`]: the socket or the dump failed.
pub fn ipv4_broadcasts(first: u32) -> io::Result<Vec<Ipv4Addr>> {
    let mut req = AddressMessage::default();
    req.header.family = AddressFamily::Inet;
    let mut found: Vec<(bool, Ipv4Addr)> = Vec::new();
    for m in dump(RouteNetlinkMessage::GetAddress(req))? {
        let RouteNetlinkMessage::NewAddress(a) = m else { continue };
        let v4 = |want_local: bool| {
            a.attributes.iter().find_map(|x| match x {
                AddressAttribute::Local(IpAddr::V4(v)) if want_local => Some(*v),
                AddressAttribute::Address(IpAddr::V4(v)) if !want_local => Some(*v),
                _ => None,
            })
        };
        let ours = a.header.index == first;
        if let Some(b) = a.attributes.iter().find_map(|x| match x {
            AddressAttribute::Broadcast(v) => Some(*v),
            _ => None,
        }) {
            if b != Ipv4Addr::BROADCAST && !b.is_unspecified() {
                found.push((ours, b));
            }
        }
        let plen = u32::from(a.header.prefix_len);
        if let Some(addr) = v4(true).or_else(|| v4(false)) {
            if plen <= 30 {
                found.push((ours, Ipv4Addr::from(u32::from(addr) | (u32::MAX >> plen))));
            }
        }
    }
    // Stable: the first interface's, then the others', each in the kernel's order.
    found.sort_by_key(|&(ours, _)| !ours);
    let mut out: Vec<Ipv4Addr> = Vec::new();
    for (_, b) in found {
        if !out.contains(&b) {
            out.push(b);
        }
    }
    Ok(out)
}

/// The ifindex of the device `ifindex` is enslaved to (IFLA_MASTER: a bridge, bond or VRF), if
/// any, with that device's name; by an RTM_GETLINK dump of the calling thread's namespace.
///
/// # Errors
///
/// As [`routing_shape`]: the socket or the dump failed.
pub fn link_master(ifindex: u32) -> io::Result<Option<(u32, String)>> {
    let links: Vec<LinkMessage> = dump(RouteNetlinkMessage::GetLink(LinkMessage::default()))?
        .into_iter()
        .filter_map(|m| match m {
            RouteNetlinkMessage::NewLink(l) => Some(l),
            _ => None,
        })
        .collect();
    let master = links.iter().find(|l| l.header.index == ifindex).and_then(|l| {
        l.attributes.iter().find_map(|a| match a {
            LinkAttribute::Controller(m) => Some(*m),
            _ => None,
        })
    });
    Ok(master.map(|m| {
        let name = links.iter().find(|l| l.header.index == m).map(|l| link_info(l).name).unwrap_or_default();
        (m, name)
    }))
}

/// The kernel's receive queue count of device `ifindex` (IFLA_NUM_RX_QUEUES, what
/// `ip -d link` shows as numrxqueues), by an RTM_GETLINK dump of the calling thread's namespace:
/// the queue ids an AF_XDP socket can be bound to where the driver reports no ethtool channels.
/// `None` if no such device.
///
/// # Errors
///
/// As [`routing_shape`]: the socket or the dump failed.
pub fn kernel_rx_queues(ifindex: u32) -> io::Result<Option<u32>> {
    let links = dump(RouteNetlinkMessage::GetLink(LinkMessage::default()))?;
    Ok(links.iter().find_map(|m| match m {
        RouteNetlinkMessage::NewLink(l) if l.header.index == ifindex => Some(link_info(l).rx_queues.max(1)),
        _ => None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(family: AddressFamily, attrs: Vec<RuleAttribute>) -> RuleMessage {
        let mut r = RuleMessage::default();
        r.header.family = family;
        r.header.action = RuleAction::ToTable;
        r.attributes = attrs;
        r
    }

    /// The kernel's default rules are recognised; the same priority and table with any
    /// selector, action or flag, or the IPv4-only default table rule in IPv6, are not.
    #[test]
    fn only_the_kernels_default_rules_are_default() {
        let (v4, v6) = (AddressFamily::Inet, AddressFamily::Inet6);
        let unset = RuleAttribute::SuppressPrefixLen(u32::MAX);
        for (f, prio, table) in [(v4, 0, 255), (v4, 32766, 254), (v4, 32767, 253), (v6, 0, 255), (v6, 32766, 254)] {
            let attrs = vec![RuleAttribute::Priority(prio), RuleAttribute::Table(table), unset.clone()];
            assert!(is_default_rule(&rule(f, attrs)), "{f:?} {prio} {table}");
        }
        assert!(!is_default_rule(&rule(v6, vec![RuleAttribute::Priority(32767), RuleAttribute::Table(253)])));
        assert!(!is_default_rule(&rule(v4, vec![RuleAttribute::Priority(100), RuleAttribute::Table(254)])));
        let main = || vec![RuleAttribute::Priority(32766), RuleAttribute::Table(254)];
        for extra in [
            RuleAttribute::Source("10.99.1.1".parse().unwrap()),
            RuleAttribute::Iifname("lo".into()),
            RuleAttribute::FwMark(1),
            RuleAttribute::L3MDev(true),
            RuleAttribute::SuppressPrefixLen(0),
        ] {
            let mut a = main();
            a.push(extra.clone());
            assert!(!is_default_rule(&rule(v4, a)), "{extra:?}");
        }
        let mut r = rule(v4, main());
        r.header.action = RuleAction::Prohibit;
        assert!(!is_default_rule(&r));
        let mut r = rule(v4, main());
        r.header.tos = 0x10;
        assert!(!is_default_rule(&r));
        let mut r = rule(v4, main());
        r.header.flags = netlink_packet_route::rule::RuleFlags::Invert;
        assert!(!is_default_rule(&r));
    }

    /// Netconf and nexthop notifications, which the crate does not parse, become events; a
    /// truncated or zero-length message ends the datagram without a panic.
    #[test]
    fn raw_notifications_become_events_and_garbage_ends_parsing() {
        let msg = |kind: u16, len: u32| {
            let mut m = vec![0u8; len.max(16) as usize];
            m[0..4].copy_from_slice(&len.to_ne_bytes());
            m[4..6].copy_from_slice(&kind.to_ne_bytes());
            m
        };
        let mut out = Vec::new();
        let mut d = msg(RTM_NEWNETCONF, 20);
        d.extend(msg(RTM_DELNEXTHOP, 24));
        parse(&d, &mut out);
        assert_eq!(out, vec![NetEvent::NetConf, NetEvent::Nexthop]);
        for bad in [msg(RTM_NEWNETCONF, 0), msg(RTM_NEWNEXTHOP, 4096), msg(9999, 0), msg(9999, 1 << 30)] {
            let mut out = Vec::new();
            parse(&bad, &mut out);
            assert!(out.len() <= 1, "{out:?}");
        }
    }
}
