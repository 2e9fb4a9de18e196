//! Following interfaces, addresses and neighbours through the kernel's rtnetlink notifications
//! (rtnetlink(7); `include/uapi/linux/rtnetlink.h`), as `fastpath fwd` does (docs/ARCHITECTURE.md
//! §13).
//!
//! A [`NetWatch`] is a NETLINK_ROUTE socket joined to the multicast groups RTMGRP_LINK,
//! RTMGRP_NEIGH, RTMGRP_IPV4/IPV6_IFADDR and RTMGRP_IPV4/IPV6_ROUTE of the network namespace it
//! is opened in. The kernel sends an RTM_NEWLINK for every change of a link (flags, carrier, MTU, address,
//! queue counts) and an RTM_DELLINK when it goes; [`NetWatch::wait`] parses them (with the
//! `netlink-packet-route` crate) into [`NetEvent`]s. If the socket's receive buffer overflows
//! (ENOBUFS) notifications are lost, and [`NetEvent::Overrun`] tells the caller to re-read what
//! it follows. No privileges needed to listen; kernel >= 2.6.

use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
use netlink_packet_route::address::AddressAttribute;
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourState};
use netlink_packet_route::RouteNetlinkMessage;
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
    /// The receive buffer overflowed (ENOBUFS): notifications were lost; re-read the state.
    Overrun,
}

/// A NETLINK_ROUTE socket subscribed to link, neighbour and address notifications.
#[derive(Debug)]
pub struct NetWatch {
    sock: Socket,
    buf: Vec<u8>,
}

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
        _ => return None,
    })
}

/// Parses one datagram of rtnetlink messages into events (unknown messages are skipped).
fn parse(mut bytes: &[u8], out: &mut Vec<NetEvent>) {
    while bytes.len() >= 16 {
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
    /// neighbour, IPv4/IPv6 address and route groups. Errors: socket(2) or bind(2) failed.
    pub fn open() -> io::Result<Self> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        let groups =
            (libc::RTMGRP_LINK | libc::RTMGRP_NEIGH | libc::RTMGRP_IPV4_IFADDR | libc::RTMGRP_IPV6_IFADDR) as u32;
        sock.bind(&SocketAddr::new(0, groups))?;
        // Best effort: a smaller buffer only makes an overrun (reported) likelier.
        let _ = sock.set_rx_buf_sz(RCVBUF_BYTES);
        sock.set_non_blocking(true)?;
        Ok(Self { sock, buf: vec![0; 64 * 1024] })
    }

    /// Waits up to `timeout` for notifications and returns every one that has arrived (empty
    /// on timeout). Errors: poll(2) or recv(2) failed other than by EAGAIN/EINTR/ENOBUFS.
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
