//! A driver's XDP features, as the kernel advertises them: the `netdev` generic netlink family's
//! `dev-get` (Documentation/netlink/specs/netdev.yaml, include/uapi/linux/netdev.h; kernel
//! 6.3 or later), through the crate-private `netdev::genl`; no privileges needed.

use std::io;

use serde::Serialize;

use super::genl;

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

/// The XDP features the driver of interface `ifindex` (in the current network namespace)
/// advertises. `Ok(None)` on kernels without the `netdev` family (< 6.3).
///
/// # Errors
///
/// The [`io::Error`] of the NETLINK_GENERIC socket (socket, bind, connect, send, receive), or
/// the errno of the kernel's answer: ENODEV for an ifindex that does not exist in this network
/// namespace (net/core/netdev-genl.c).
pub fn xdp_features(ifindex: u32) -> io::Result<Option<XdpFeatures>> {
    let Some(nd) = genl::Netdev::open()? else { return Ok(None) };
    let attrs = nd.get(NETDEV_CMD_DEV_GET, vec![(NETDEV_A_DEV_IFINDEX, ifindex.to_ne_bytes().to_vec())])?;
    let u64_of = |k: u16| genl::uint(&attrs, k);
    let zc = genl::uint(&attrs, NETDEV_A_DEV_XDP_ZC_MAX_SEGS).map(|v| v as u32);
    Ok(Some(XdpFeatures {
        xdp: names(u64_of(NETDEV_A_DEV_XDP_FEATURES).unwrap_or(0), &XDP_ACT),
        zc_max_segs: zc,
        rx_metadata: names(u64_of(NETDEV_A_DEV_XDP_RX_METADATA_FEATURES).unwrap_or(0), &RX_METADATA),
        xsk: names(u64_of(NETDEV_A_DEV_XSK_FEATURES).unwrap_or(0), &XSK_FLAGS),
    }))
}
