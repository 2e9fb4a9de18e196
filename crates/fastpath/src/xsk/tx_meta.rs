//! AF_XDP TX metadata (Documentation/networking/xsk-tx-metadata.rst, include/uapi/linux/if_xdp.h):
//! per packet, a request to the device written in front of the packet in its UMEM frame, and
//! what the device answers there when the packet completes.
//!
//! A UMEM registered with `tx_metadata_len` ([`super::UmemConfig::tx_metadata_len`], the
//! `XDP_UMEM_TX_METADATA_LEN` flag of XDP_UMEM_REG; Linux >= 6.8, the flag required since
//! Linux 6.11) reserves that many bytes in front of every TX packet: `struct xsk_tx_metadata`
//! lies at `desc.addr - tx_metadata_len`, and a descriptor with the `XDP_TX_METADATA` option
//! asks the kernel to read it. [`super::Umem::set_tx_meta`] writes a [`TxMeta`] there and marks
//! the token; [`super::TxBatch::push`] then sets the option. What may be asked:
//!
//! - a checksum (`XDP_TXMD_FLAGS_CHECKSUM`, [`TxCsum`]): the device computes the L4 checksum
//!   from `start` to the packet's end, seeded with what the checksum field holds (the
//!   pseudo-header sum: `CHECKSUM_PARTIAL`), and stores it `offset` bytes after `start`. In copy
//!   mode the kernel builds an skb with `CHECKSUM_PARTIAL` (net/xdp/xsk.c, xsk_skb_metadata):
//!   with `XDP_UMEM_TX_SW_CSUM` ([`super::UmemConfig::tx_sw_csum`], >= 6.8) it computes the
//!   checksum on the CPU at once (skb_checksum_help); without it the skb leaves partial, for the
//!   device (or the stack, where the device cannot) to complete. In zero-copy mode the driver
//!   does it (xsk-features `tx-checksum`).
//! - a TX timestamp (`XDP_TXMD_FLAGS_TIMESTAMP`): written back into the same metadata area
//!   (`completion.tx_timestamp`) before the frame comes back on the COMPLETION ring, read with
//!   [`super::Umem::tx_completion_timestamp`]. In copy mode the kernel writes a software one,
//!   CLOCK_TAI when the skb is freed (xsk_destruct_skb: "sw completion timestamp, not a real
//!   one"), whatever the driver; in zero-copy mode the driver writes its hardware one
//!   (xsk-features `tx-timestamp`).
//! - a launch time (`XDP_TXMD_FLAGS_LAUNCH_TIME`, Linux >= 6.14): the device holds the packet
//!   until its PTP hardware clock reaches `launch_time_ns`, FIFO per queue. Only drivers with
//!   xsk-features `tx-launch-time-fifo` (igc, stmmac) do it; [`TxMeta::check_driver`] refuses
//!   it anywhere else (veth: none of the xsk features).
//!
//! Which driver supports what: the netdev family's `xsk-features`
//! ([`crate::netdev::xdp_features`], `fastpath probe`).

use serde::Serialize;

use super::XskError;
use crate::sys::uapi::{XskTxMetadata, XDP_TXMD_FLAGS_LAUNCH_TIME};

/// `sizeof(struct xsk_tx_metadata)` (Linux >= 6.14, with `launch_time`): the least
/// [`super::UmemConfig::tx_metadata_len`] that holds it.
pub const TX_META_LEN: u32 = std::mem::size_of::<XskTxMetadata>() as u32;

/// `XDP_TX_METADATA` in a TX descriptor's options (if_xdp.h, kernel >= 6.8): the kernel reads
/// `struct xsk_tx_metadata` `tx_metadata_len` bytes before the packet.
pub const XDP_TX_METADATA: u32 = libc::XDP_TX_METADATA;

/// What a timestamp request puts in the padding of `struct xsk_tx_metadata`: still there at
/// completion means the kernel wrote no timestamp.
pub(crate) const TS_UNWRITTEN: u32 = u32::MAX;

/// A checksum the device computes (`XDP_TXMD_FLAGS_CHECKSUM`): from `start` (an offset from the
/// packet's first byte) to the packet's end, stored at `start + offset`. The field must hold
/// the pseudo-header sum, as for `CHECKSUM_PARTIAL` (for UDP: `start` is the UDP header, `offset`
/// 6; [`crate::packet::udp_csum_partial`] writes the sum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TxCsum {
    /// `request.csum_start`.
    pub start: u16,
    /// `request.csum_offset`.
    pub offset: u16,
}

/// What one TX packet asks of the device ([`super::Umem::set_tx_meta`]). The empty request
/// (the default) asks nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TxMeta {
    /// A checksum to compute (`XDP_TXMD_FLAGS_CHECKSUM`).
    pub csum: Option<TxCsum>,
    /// Write the TX timestamp back at completion (`XDP_TXMD_FLAGS_TIMESTAMP`).
    pub timestamp: bool,
    /// Send at this time of the device's PTP hardware clock, in nanoseconds
    /// (`XDP_TXMD_FLAGS_LAUNCH_TIME`, Linux >= 6.14, drivers with `tx-launch-time-fifo`).
    pub launch_time_ns: Option<u64>,
}

/// A feature of the netdev family's `xsk-features` a [`TxMeta`] needs, with what it is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XskFeatureNeed {
    /// The xsk-features name (`tx-checksum`, `tx-timestamp`, `tx-launch-time-fifo`).
    pub feature: &'static str,
    /// What it gives, in words.
    pub what: &'static str,
    /// The first kernel with it.
    pub min_kernel: &'static str,
}

const NEED_CSUM: XskFeatureNeed =
    XskFeatureNeed { feature: "tx-checksum", what: "AF_XDP TX checksum offload", min_kernel: "6.8" };
const NEED_TS: XskFeatureNeed =
    XskFeatureNeed { feature: "tx-timestamp", what: "AF_XDP TX timestamps", min_kernel: "6.8" };
const NEED_LAUNCH: XskFeatureNeed =
    XskFeatureNeed { feature: "tx-launch-time-fifo", what: "AF_XDP TX launch time", min_kernel: "6.14" };

impl TxMeta {
    /// True if nothing is asked.
    pub fn is_empty(&self) -> bool {
        self.csum.is_none() && !self.timestamp && self.launch_time_ns.is_none()
    }

    /// The UAPI struct this request writes: the asked fields, every other byte 0, and with a
    /// timestamp request [`TS_UNWRITTEN`] in the padding (the upper half of
    /// `completion.tx_timestamp` on a little-endian host), so that a timestamp the kernel did
    /// not write is told from one it did ([`super::Umem::tx_completion_timestamp`]).
    pub(crate) fn encode(&self) -> XskTxMetadata {
        let mut m = XskTxMetadata::default();
        if let Some(c) = self.csum {
            m.flags |= libc::XDP_TXMD_FLAGS_CHECKSUM as u64;
            m.csum_start = c.start;
            m.csum_offset = c.offset;
        }
        if self.timestamp {
            m.flags |= libc::XDP_TXMD_FLAGS_TIMESTAMP as u64;
            m.pad = TS_UNWRITTEN;
        }
        if let Some(t) = self.launch_time_ns {
            m.flags |= XDP_TXMD_FLAGS_LAUNCH_TIME;
            m.launch_time = t;
        }
        m
    }

    /// Checks the request against a packet of `len` bytes: a checksum field that lies inside
    /// it (`csum_start + csum_offset + 2 <= len`, as net/xdp/xsk.c checks; a descriptor that
    /// fails it stops the copy-mode TX ring with EINVAL instead of being skipped).
    ///
    /// # Errors
    ///
    /// [`XskError::BadTxMeta`] naming the offsets and the length.
    pub fn check_len(&self, len: u32) -> Result<(), XskError> {
        if let Some(c) = self.csum {
            if c.start as u32 + c.offset as u32 + 2 > len {
                return Err(XskError::BadTxMeta(format!(
                    "checksum at {} + {} is not inside a {len}-byte packet: csum_start + csum_offset + 2 must be at most the length",
                    c.start, c.offset
                )));
            }
        }
        Ok(())
    }

    /// The xsk-features the driver must list for this request: in zero-copy mode each asked
    /// offload is the driver's; in copy mode the kernel does the checksum and the timestamp
    /// itself, and only launch time needs the device.
    pub fn driver_needs(&self, zero_copy: bool) -> Vec<XskFeatureNeed> {
        let mut v = Vec::new();
        if zero_copy && self.csum.is_some() {
            v.push(NEED_CSUM);
        }
        if zero_copy && self.timestamp {
            v.push(NEED_TS);
        }
        if self.launch_time_ns.is_some() {
            v.push(NEED_LAUNCH);
        }
        v
    }

    /// Refuses the request where the driver of `iface` lacks what it needs
    /// ([`TxMeta::driver_needs`]): `xsk` is its `xsk-features` ([`crate::netdev::xdp_features::XdpFeatures::xsk`];
    /// `None`: the kernel did not say, taken as none).
    ///
    /// # Errors
    ///
    /// [`XskError::DriverLacks`] naming the first missing feature and its kernel.
    pub fn check_driver(
        &self,
        iface: &str,
        driver: &str,
        xsk: Option<&[&str]>,
        zero_copy: bool,
    ) -> Result<(), XskError> {
        let have = xsk.unwrap_or(&[]);
        match self.driver_needs(zero_copy).into_iter().find(|n| !have.contains(&n.feature)) {
            None => Ok(()),
            Some(n) => Err(XskError::DriverLacks {
                iface: iface.to_string(),
                driver: driver.to_string(),
                what: n.what,
                feature: n.feature,
                min_kernel: n.min_kernel,
                has: if have.is_empty() { "none".into() } else { have.join(", ") },
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn the_layout_is_the_uapi_one() {
        // struct xsk_tx_metadata, Linux 6.14: flags at 0; request.csum_start 8, csum_offset 10,
        // launch_time 16; completion.tx_timestamp 8; 24 bytes.
        assert_eq!(TX_META_LEN, 24);
        assert_eq!(offset_of!(XskTxMetadata, flags), 0);
        assert_eq!(offset_of!(XskTxMetadata, csum_start), 8);
        assert_eq!(offset_of!(XskTxMetadata, csum_offset), 10);
        assert_eq!(offset_of!(XskTxMetadata, launch_time), 16);
        // libc's is the 6.8 form (no launch_time): the offsets it has are the same.
        assert_eq!(size_of::<libc::xsk_tx_metadata>(), 16);
        assert_eq!(offset_of!(libc::xsk_tx_metadata, flags), 0);
        assert_eq!(offset_of!(libc::xsk_tx_metadata, xsk_tx_metadata_union), 8);
        assert_eq!(offset_of!(libc::xsk_tx_metadata_request, csum_offset), 2);
        assert_eq!(size_of::<libc::xsk_tx_metadata_completion>(), 8);
        // The bits, from libc where it has them.
        assert_eq!(libc::XDP_TXMD_FLAGS_TIMESTAMP, 1);
        assert_eq!(libc::XDP_TXMD_FLAGS_CHECKSUM, 2);
        assert_eq!(XDP_TXMD_FLAGS_LAUNCH_TIME, 4);
        assert_eq!(XDP_TX_METADATA, 2);
        assert_eq!(libc::XDP_UMEM_TX_SW_CSUM, 1 << 1);
        assert_eq!(libc::XDP_UMEM_TX_METADATA_LEN, 1 << 2);
        // The request's bytes, and the completion field over them.
        let m =
            TxMeta { csum: Some(TxCsum { start: 34, offset: 6 }), timestamp: true, launch_time_ns: Some(7) }.encode();
        let b = bytemuck::bytes_of(&m);
        assert_eq!(u64::from_ne_bytes(b[0..8].try_into().unwrap()), 1 | 2 | 4);
        assert_eq!(u16::from_ne_bytes([b[8], b[9]]), 34);
        assert_eq!(u16::from_ne_bytes([b[10], b[11]]), 6);
        assert_eq!(&b[12..16], &[0xff; 4], "the timestamp request's marker");
        assert_eq!(TxMeta { timestamp: false, ..TxMeta::default() }.encode(), XskTxMetadata::default());
        assert_eq!(u64::from_ne_bytes(b[16..24].try_into().unwrap()), 7);
        let mut w = m;
        bytemuck::bytes_of_mut(&mut w)[8..16].copy_from_slice(&0x1122_3344_5566_7788u64.to_ne_bytes());
        assert_eq!(w.tx_timestamp(), 0x1122_3344_5566_7788);
    }

    #[test]
    fn what_a_driver_must_have() {
        let csum = TxMeta { csum: Some(TxCsum { start: 34, offset: 6 }), ..TxMeta::default() };
        let ts = TxMeta { timestamp: true, ..TxMeta::default() };
        let launch = TxMeta { launch_time_ns: Some(1), ..TxMeta::default() };
        // veth: no xsk features; copy mode does the checksum and the timestamp itself.
        for m in [csum, ts] {
            assert!(m.check_driver("veth0", "veth", Some(&[]), false).is_ok());
            assert!(m.check_driver("veth0", "veth", Some(&[]), true).is_err());
        }
        let e = launch.check_driver("veth0", "veth", Some(&[]), false).unwrap_err().to_string();
        assert!(e.contains("tx-launch-time-fifo") && e.contains("6.14") && !e.contains('\n'), "{e}");
        assert!(launch.check_driver("eth0", "igc", Some(&["tx-timestamp", "tx-launch-time-fifo"]), true).is_ok());
        assert!(launch.check_driver("eth0", "igc", None, false).is_err(), "unknown features: refused");
        assert!(csum.check_len(42).is_ok());
        assert!(csum.check_len(41).is_err());
        assert!(TxMeta::default().is_empty() && !ts.is_empty());
    }
}
