//! A driver's XDP features, as the kernel advertises them: the `netdev` generic netlink family's
//! `dev-get` (Documentation/netlink/specs/netdev.yaml, include/uapi/linux/netdev.h; kernel
//! 6.3 or later). Through netlink-sys and netlink-packet-generic (the rust-netlink project, as
//! for rtnetlink in `watch.rs`); no privileges needed.

use std::io;

use netlink_packet_core::{
    DecodeError, Emitable, NetlinkMessage, NetlinkPayload, NlasIterator, ParseableParametrized, NLM_F_REQUEST,
};
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::{GenlFamily, GenlHeader, GenlMessage};
use netlink_sys::{protocols::NETLINK_GENERIC, Socket, SocketAddr};
use serde::Serialize;

/// NETDEV_CMD_DEV_GET.
const NETDEV_CMD_DEV_GET: u8 = 1;
/// enum netdev_a_dev.
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
const NETDEV_A_DEV_XDP_ZC_MAX_SEGS: u16 = 4;
const NETDEV_A_DEV_XDP_RX_METADATA_FEATURES: u16 = 5;
const NETDEV_A_DEV_XSK_FEATURES: u16 = 6;

/// enum netdev_xdp_act: bit and name (the spec's names).
pub const XDP_ACT: [(u64, &str); 7] = [
    (1, "basic"),
    (2, "redirect"),
    (4, "ndo-xmit"),
    (8, "xsk-zerocopy"),
    (16, "hw-offload"),
    (32, "rx-sg"),
    (64, "ndo-xmit-sg"),
];
/// enum netdev_xdp_rx_metadata.
const RX_METADATA: [(u64, &str); 3] = [(1, "timestamp"), (2, "hash"), (4, "vlan-tag")];
/// enum netdev_xsk_flags.
const XSK_FLAGS: [(u64, &str); 3] = [(1, "tx-timestamp"), (2, "tx-checksum"), (4, "tx-launch-time-fifo")];

/// What the driver of one interface says it supports for XDP and AF_XDP.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct XdpFeatures {
    /// The `xdp-features` bits by name ([`XDP_ACT`]): basic (XDP_PASS/DROP/ABORTED), redirect,
    /// ndo-xmit (a redirect target), xsk-zerocopy, hw-offload, rx-sg (multi-buffer receive),
    /// ndo-xmit-sg.
    pub xdp: Vec<&'static str>,
    /// Most buffers of one packet in zero-copy AF_XDP (`xdp-zc-max-segs`; 1: no multi-buffer).
    pub zc_max_segs: Option<u32>,
    /// XDP RX metadata kfuncs the driver implements (timestamp, hash, vlan-tag).
    pub rx_metadata: Vec<&'static str>,
    /// AF_XDP TX metadata the driver implements.
    pub xsk: Vec<&'static str>,
}

impl XdpFeatures {
    /// True if `name` ([`XDP_ACT`]) is among the driver's XDP features.
    pub fn has(&self, name: &str) -> bool {
        self.xdp.contains(&name)
    }
}

fn names(bits: u64, table: &[(u64, &'static str)]) -> Vec<&'static str> {
    table.iter().filter(|(b, _)| bits & b != 0).map(|(_, n)| *n).collect()
}

/// A `netdev` family message: the command and its attributes as (type, bytes).
#[derive(Debug, Clone)]
struct NetdevMsg {
    cmd: u8,
    attrs: Vec<(u16, Vec<u8>)>,
}

impl GenlFamily for NetdevMsg {
    fn family_name() -> &'static str {
        "netdev"
    }
    fn command(&self) -> u8 {
        self.cmd
    }
    fn version(&self) -> u8 {
        1
    }
}

impl Emitable for NetdevMsg {
    fn buffer_len(&self) -> usize {
        self.attrs.iter().map(|(_, v)| (4 + v.len()).div_ceil(4) * 4).sum()
    }
    fn emit(&self, buffer: &mut [u8]) {
        let mut off = 0;
        for (kind, v) in &self.attrs {
            let len = 4 + v.len();
            buffer[off..off + 2].copy_from_slice(&(len as u16).to_ne_bytes());
            buffer[off + 2..off + 4].copy_from_slice(&kind.to_ne_bytes());
            buffer[off + 4..off + len].copy_from_slice(v);
            let padded = len.div_ceil(4) * 4;
            buffer[off + len..off + padded].fill(0);
            off += padded;
        }
    }
}

impl ParseableParametrized<[u8], GenlHeader> for NetdevMsg {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        let mut attrs = Vec::new();
        for nla in NlasIterator::new(buf) {
            let nla = nla?;
            attrs.push((nla.kind(), nla.value().to_vec()));
        }
        Ok(Self { cmd: header.cmd, attrs })
    }
}

/// One request, one answer (or a netlink error as `io::Error`).
fn request<F>(sock: &Socket, msg: GenlMessage<F>) -> io::Result<GenlMessage<F>>
where
    F: GenlFamily + Emitable + ParseableParametrized<[u8], GenlHeader> + std::fmt::Debug,
{
    let mut nl = NetlinkMessage::from(msg);
    nl.header.flags = NLM_F_REQUEST;
    nl.finalize();
    let mut tx = vec![0u8; nl.buffer_len()];
    nl.serialize(&mut tx);
    sock.send(&tx, 0)?;
    let mut rx = Vec::with_capacity(8192);
    sock.recv(&mut rx, 0)?;
    let msg = NetlinkMessage::<GenlMessage<F>>::deserialize(&rx)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("netlink answer: {e}")))?;
    match msg.payload {
        NetlinkPayload::InnerMessage(m) => Ok(m),
        NetlinkPayload::Error(e) => Err(e.to_io()),
        other => Err(io::Error::new(io::ErrorKind::InvalidData, format!("unexpected netlink answer {other:?}"))),
    }
}

/// The `netdev` family's id in this kernel: `None` where it has none (kernel < 6.3).
fn netdev_family(sock: &Socket) -> io::Result<Option<u16>> {
    let mut m = GenlMessage::from_payload(GenlCtrl {
        cmd: GenlCtrlCmd::GetFamily,
        nlas: vec![GenlCtrlAttrs::FamilyName("netdev".into())],
    });
    m.finalize();
    match request(sock, m) {
        Ok(a) => Ok(a.payload.nlas.iter().find_map(|n| match n {
            GenlCtrlAttrs::FamilyId(id) => Some(*id),
            _ => None,
        })),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The XDP features the driver of interface `ifindex` (in the current network namespace)
/// advertises. `Ok(None)` on kernels without the `netdev` family (< 6.3).
///
/// # Errors
///
/// The [`io::Error`] of the NETLINK_GENERIC socket (socket, bind, connect, send, receive), or
/// the errno of the kernel's answer: ENODEV for an ifindex that does not exist in this network
/// namespace (net/core/netdev-genl.c).
pub fn xdp_features(ifindex: u32) -> io::Result<Option<XdpFeatures>> {
    let mut sock = Socket::new(NETLINK_GENERIC)?;
    sock.bind_auto()?;
    sock.connect(&SocketAddr::new(0, 0))?;
    let Some(family) = netdev_family(&sock)? else { return Ok(None) };
    let mut m = GenlMessage::from_payload(NetdevMsg {
        cmd: NETDEV_CMD_DEV_GET,
        attrs: vec![(NETDEV_A_DEV_IFINDEX, ifindex.to_ne_bytes().to_vec())],
    });
    m.set_resolved_family_id(family);
    m.finalize();
    let a = request(&sock, m)?;
    let u64_of = |k: u16| {
        a.payload.attrs.iter().find(|(t, _)| *t == k).and_then(|(_, v)| v.get(..8)).map(|b| {
            let mut x = [0u8; 8];
            x.copy_from_slice(b);
            u64::from_ne_bytes(x)
        })
    };
    let zc = a
        .payload
        .attrs
        .iter()
        .find(|(t, _)| *t == NETDEV_A_DEV_XDP_ZC_MAX_SEGS)
        .and_then(|(_, v)| v.get(..4))
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    Ok(Some(XdpFeatures {
        xdp: names(u64_of(NETDEV_A_DEV_XDP_FEATURES).unwrap_or(0), &XDP_ACT),
        zc_max_segs: zc,
        rx_metadata: names(u64_of(NETDEV_A_DEV_XDP_RX_METADATA_FEATURES).unwrap_or(0), &RX_METADATA),
        xsk: names(u64_of(NETDEV_A_DEV_XSK_FEATURES).unwrap_or(0), &XSK_FLAGS),
    }))
}
