//! RX metadata from the driver, per frame: the RX timestamp, the RSS hash and its type, the
//! VLAN tag, as the XDP metadata kfuncs return them (Documentation/networking/xdp-rx-metadata.rst;
//! Linux >= 6.3, the VLAN tag >= 6.8). `bpf/xsk_redirect_meta.bpf.c` calls them and puts
//! `struct fp_rx_meta` (bpf/include/fastpath_abi.h) in front of each frame it redirects; the
//! AF_XDP port reads it back ([`RxMeta::read`], `io::afxdp::AfXdpPort::rx_burst_meta`). A
//! field the driver does not implement, or has nothing for, is `None`, never a made-up value.
//! Which kfuncs a driver implements: the netdev family's `xdp-rx-metadata-features`
//! (`netdev::xdp_features`, shown by `fastpath probe`).

use serde::Serialize;

use super::{Frame, Umem};
use crate::abi::{
    fp_rx_meta, FP_RX_META_ERRNO_HASH_SHIFT, FP_RX_META_ERRNO_TIMESTAMP_SHIFT, FP_RX_META_ERRNO_VLAN_SHIFT,
    FP_RX_META_HASH, FP_RX_META_TIMESTAMP, FP_RX_META_VLAN,
};

/// Bytes of metadata in front of each frame (`sizeof(struct fp_rx_meta)`).
pub const RX_META_LEN: u32 = std::mem::size_of::<fp_rx_meta>() as u32;

/// The driver's RX timestamp, in nanoseconds of the device's clock (a PTP hardware clock on a
/// NIC; not CLOCK_MONOTONIC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Timestamp(pub u64);

/// `enum xdp_rss_hash_type` (include/net/xdp.h): which headers the RSS hash covered, as bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct RssType(pub u32);

impl RssType {
    /// XDP_RSS_L3_IPV4.
    pub const L3_IPV4: u32 = 1 << 0;
    /// XDP_RSS_L3_IPV6.
    pub const L3_IPV6: u32 = 1 << 1;
    /// XDP_RSS_L3_DYNHDR: IPv6 extension headers were parsed.
    pub const L3_DYNHDR: u32 = 1 << 2;
    /// XDP_RSS_L4: some L4 header was in the hash.
    pub const L4: u32 = 1 << 3;
    /// XDP_RSS_L4_TCP.
    pub const L4_TCP: u32 = 1 << 4;
    /// XDP_RSS_L4_UDP.
    pub const L4_UDP: u32 = 1 << 5;
    /// XDP_RSS_L4_SCTP.
    pub const L4_SCTP: u32 = 1 << 6;
    /// XDP_RSS_L4_IPSEC.
    pub const L4_IPSEC: u32 = 1 << 7;
    /// XDP_RSS_L4_ICMP.
    pub const L4_ICMP: u32 = 1 << 8;

    /// A name like "L4-IPv4-UDP", "L4" (some L4 header, which one unknown), "L3-IPv6" or
    /// "none"; unknown bits are shown in hex.
    pub fn name(self) -> String {
        let b = self.0;
        if b == 0 {
            return "none".into();
        }
        let mut parts = vec![if b & Self::L4 != 0 { "L4" } else { "L3" }];
        if b & Self::L3_IPV4 != 0 {
            parts.push("IPv4");
        }
        if b & Self::L3_IPV6 != 0 {
            parts.push(if b & Self::L3_DYNHDR != 0 { "IPv6-EX" } else { "IPv6" });
        }
        for (bit, n) in [
            (Self::L4_TCP, "TCP"),
            (Self::L4_UDP, "UDP"),
            (Self::L4_SCTP, "SCTP"),
            (Self::L4_IPSEC, "IPSEC"),
            (Self::L4_ICMP, "ICMP"),
        ] {
            if b & bit != 0 {
                parts.push(n);
            }
        }
        let known = (1 << 9) - 1;
        let mut s = parts.join("-");
        if b & !known != 0 {
            s += &format!("+{:#x}", b & !known);
        }
        s
    }
}

/// A VLAN tag the driver stripped (`bpf_xdp_metadata_rx_vlan_tag`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct VlanTag {
    /// The tag protocol: 0x8100 (802.1Q) or 0x88a8 (802.1ad).
    pub proto: u16,
    /// Tag control information: PCP (3 bits), DEI (1), VID (12).
    pub tci: u16,
}

impl VlanTag {
    /// VLAN id (12 bits).
    pub fn vid(self) -> u16 {
        self.tci & 0x0fff
    }

    /// Priority code point (3 bits).
    pub fn pcp(self) -> u8 {
        (self.tci >> 13) as u8
    }
}

/// What each metadata kfunc returned for one frame, as a positive errno: 0 the driver answered
/// (a timestamp of 0 included), [`KfuncErrno::ENODATA`] it had nothing for this frame,
/// [`KfuncErrno::EOPNOTSUPP`] the driver does not implement the kfunc (for the VLAN tag: or
/// the kernel is older than 6.8). Tells a driver with no answer from one never asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
pub struct KfuncErrno {
    /// `bpf_xdp_metadata_rx_timestamp`'s.
    pub timestamp: u8,
    /// `bpf_xdp_metadata_rx_hash`'s.
    pub hash: u8,
    /// `bpf_xdp_metadata_rx_vlan_tag`'s.
    pub vlan: u8,
}

impl KfuncErrno {
    /// ENODATA (include/uapi/asm-generic/errno.h): the driver has nothing for this frame.
    pub const ENODATA: u8 = 61;
    /// EOPNOTSUPP: the driver does not implement the kfunc.
    pub const EOPNOTSUPP: u8 = 95;
}

/// What the driver said about one received frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RxMeta {
    /// The RX timestamp (`bpf_xdp_metadata_rx_timestamp`); `None` when the driver returned an
    /// error or 0 (veth returns the skb's hardware timestamp, 0 when none was taken).
    pub timestamp: Option<Timestamp>,
    /// The RSS hash and its type (`bpf_xdp_metadata_rx_hash`).
    pub hash: Option<(u32, RssType)>,
    /// The VLAN tag (`bpf_xdp_metadata_rx_vlan_tag`, Linux >= 6.8).
    pub vlan: Option<VlanTag>,
    /// What each kfunc returned.
    pub errno: KfuncErrno,
}

impl RxMeta {
    /// Decodes `struct fp_rx_meta` as the program wrote it.
    #[inline]
    pub fn from_bytes(b: &[u8]) -> Option<RxMeta> {
        let m = crate::abi::read::<fp_rx_meta>(b)?;
        Some(RxMeta {
            timestamp: (m.valid & FP_RX_META_TIMESTAMP != 0).then_some(Timestamp(m.rx_timestamp_ns)),
            hash: (m.valid & FP_RX_META_HASH != 0).then_some((m.rx_hash, RssType(m.rx_hash_type))),
            vlan: (m.valid & FP_RX_META_VLAN != 0)
                .then_some(VlanTag { proto: u16::from_be(m.vlan_proto), tci: m.vlan_tci }),
            errno: KfuncErrno {
                timestamp: (m.valid >> FP_RX_META_ERRNO_TIMESTAMP_SHIFT) as u8,
                hash: (m.valid >> FP_RX_META_ERRNO_HASH_SHIFT) as u8,
                vlan: (m.valid >> FP_RX_META_ERRNO_VLAN_SHIFT) as u8,
            },
        })
    }

    /// The metadata in front of `f`, a frame received from `bpf/xsk_redirect_meta.bpf.c`
    /// ([`crate::bpf::XskRedirect::load_rx_meta`]). Only meaningful behind that program: other
    /// programs leave whatever the frame held there.
    ///
    /// # Panics
    ///
    /// If `f` sits less than [`RX_META_LEN`] bytes into its frame (never for a received frame:
    /// the kernel puts it at XDP_PACKET_HEADROOM, 256, or more), or belongs to another UMEM.
    #[inline]
    pub fn read(umem: &Umem, f: &Frame) -> RxMeta {
        RxMeta::from_bytes(umem.meta(f, RX_META_LEN)).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_what_the_program_writes_and_nothing_it_did_not() {
        let m = fp_rx_meta {
            rx_timestamp_ns: 123,
            rx_hash: 0xdead_beef,
            rx_hash_type: RssType::L4 | RssType::L3_IPV4 | RssType::L4_UDP,
            vlan_proto: 0x8100u16.to_be(),
            vlan_tci: (5 << 13) | 42,
            valid: FP_RX_META_HASH | FP_RX_META_VLAN | (61 << FP_RX_META_ERRNO_TIMESTAMP_SHIFT),
        };
        let r = RxMeta::from_bytes(bytemuck::bytes_of(&m)).unwrap();
        assert_eq!(r.timestamp, None, "not valid: None, not the 123 in the field");
        assert_eq!(r.hash, Some((0xdead_beef, RssType(0b10_1001))));
        assert_eq!(r.hash.unwrap().1.name(), "L4-IPv4-UDP");
        assert_eq!(r.errno, KfuncErrno { timestamp: KfuncErrno::ENODATA, hash: 0, vlan: 0 });
        let v = r.vlan.unwrap();
        assert_eq!((v.proto, v.vid(), v.pcp()), (0x8100, 42, 5));
        assert_eq!(RxMeta::from_bytes(&[0u8; 23]), None, "too short");
        assert_eq!(RxMeta::from_bytes(&[0u8; 24]), Some(RxMeta::default()));
        assert_eq!(RssType(0).name(), "none");
        assert_eq!(RssType(RssType::L4).name(), "L4");
        assert_eq!(RssType(RssType::L3_IPV6 | RssType::L3_DYNHDR).name(), "L3-IPv6-EX");
        assert_eq!(RssType(1 << 12).name(), "L3+0x1000");
    }
}
