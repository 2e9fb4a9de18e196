//! The kernel UAPI definitions the `libc` crate (0.2.191, the locked version) lacks, each
//! defined once for the whole crate, with the header it comes from. Everything else (the
//! `SOL_XDP` options and bind flags, `struct xdp_*`, `tpacket3_hdr`, `tpacket_block_desc`,
//! `SO_BUSY_POLL*`, `NLMSG_*`, `NLM_F_*`) is taken from `libc` where it is used, never retyped.
//! Line numbers are those of the Linux 6.1 UAPI headers unless stated.

/// `XDP_MAX_TX_SKB_BUDGET` (include/uapi/linux/if_xdp.h, the `SOL_XDP` option after
/// `XDP_OPTIONS`; kernel >= 6.17, not in libc 0.2.191): per-socket copy-mode TX budget, the
/// descriptors one `sendto` turns into skbs (the default is 32, TX_BATCH_SIZE in net/xdp/xsk.c).
pub(crate) const XDP_MAX_TX_SKB_BUDGET: i32 = 9;

/// `XDP_TXMD_FLAGS_LAUNCH_TIME` (include/uapi/linux/if_xdp.h, kernel >= 6.14; libc 0.2.191 has
/// `XDP_TXMD_FLAGS_TIMESTAMP` (1 << 0) and `_CHECKSUM` (1 << 1) but not this one): schedule the
/// packet for `request.launch_time`, on devices whose xsk-features have `tx-launch-time-fifo`.
pub(crate) const XDP_TXMD_FLAGS_LAUNCH_TIME: u64 = 1 << 2;

/// `struct xsk_tx_metadata` of include/uapi/linux/if_xdp.h as of Linux 6.14, flattened: `flags`,
/// then the union of `request` { `csum_start`, `csum_offset`, (4 bytes of padding),
/// `launch_time` } and `completion` { `tx_timestamp` }, which overlays `csum_start`,
/// `csum_offset` and the padding. 24 bytes. libc 0.2.191's `xsk_tx_metadata` is the 6.8 form,
/// whose `request` ends after `csum_offset` (16 bytes); the offsets they share are checked
/// against it in `xsk::tx_meta`'s tests. It lies `tx_metadata_len` bytes before a TX packet's
/// first byte (Documentation/networking/xsk-tx-metadata.rst).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct XskTxMetadata {
    /// `XDP_TXMD_FLAGS_*`.
    pub flags: u64,
    /// `request.csum_start`: offset from the packet's first byte where checksumming starts.
    pub csum_start: u16,
    /// `request.csum_offset`: offset from `csum_start` where the checksum is stored.
    pub csum_offset: u16,
    /// Padding in front of `launch_time` (the upper half of `completion.tx_timestamp`).
    pub pad: u32,
    /// `request.launch_time`: nanoseconds of the device's PTP hardware clock.
    pub launch_time: u64,
}

impl XskTxMetadata {
    /// `completion.tx_timestamp`: the 8 bytes at offset 8, over `csum_start`, `csum_offset`
    /// and `pad`, in the host's byte order (as the kernel writes a `__u64`).
    #[inline]
    pub(crate) fn tx_timestamp(&self) -> u64 {
        let b = bytemuck::bytes_of(self);
        u64::from_ne_bytes(b[8..16].try_into().expect("8 bytes"))
    }
}

/// `XDP_PACKET_HEADROOM` (include/uapi/linux/bpf.h:6082 in 6.1, taken from libbpf-sys's
/// bindings of that header; not in libc): the headroom the kernel keeps in front of a packet
/// for XDP, so in front of each received frame of an AF_XDP socket in copy mode (on top of the
/// UMEM's own `headroom`).
pub const XDP_PACKET_HEADROOM: u32 = libbpf_rs::libbpf_sys::XDP_PACKET_HEADROOM;

/// `BPF_F_XDP_DEV_BOUND_ONLY` (include/uapi/linux/bpf.h, kernel >= 6.3; from libbpf-sys's
/// bindings): a program loaded for one device (`prog_ifindex`), which may then call that
/// driver's XDP metadata kfuncs and attach to that device only.
pub(crate) const BPF_F_XDP_DEV_BOUND_ONLY: u32 = libbpf_rs::libbpf_sys::BPF_F_XDP_DEV_BOUND_ONLY;

/// `SO_PASSRIGHTS` (include/uapi/asm-generic/socket.h, kernel >= 6.16; sparc has its own
/// number; not in libc 0.2.191 for these targets): with the value 0, a Unix socket refuses
/// descriptors sent to it (`SCM_RIGHTS`: the sender's `sendmsg` fails with EPERM); a listening
/// socket passes the setting to each connection at `connect`.
#[cfg(not(target_arch = "sparc64"))]
pub(crate) const SO_PASSRIGHTS: i32 = 83;
/// `SO_PASSRIGHTS` on sparc (arch/sparc/include/uapi/asm/socket.h).
#[cfg(target_arch = "sparc64")]
pub(crate) const SO_PASSRIGHTS: i32 = 0x5c;

/// `SOCK_DIAG_BY_FAMILY` (include/uapi/linux/sock_diag.h:7; not in libc): the netlink message
/// type of a sock_diag request and of each answer.
pub(crate) const SOCK_DIAG_BY_FAMILY: u16 = 20;

// include/uapi/linux/xdp_diag.h (kernel >= 5.1, XDP_SHOW_STATS and XDP_DIAG_STATS >= 5.9);
// none of it is in libc.

/// `XDP_SHOW_INFO` (xdp_diag.h:29): ask for `XDP_DIAG_INFO` and `XDP_DIAG_UID`.
pub(crate) const XDP_SHOW_INFO: u32 = 1 << 0;
/// `XDP_SHOW_RING_CFG` (xdp_diag.h:30): the ring sizes.
pub(crate) const XDP_SHOW_RING_CFG: u32 = 1 << 1;
/// `XDP_SHOW_UMEM` (xdp_diag.h:31): the UMEM and its rings.
pub(crate) const XDP_SHOW_UMEM: u32 = 1 << 2;
/// `XDP_SHOW_MEMINFO` (xdp_diag.h:32): socket memory.
pub(crate) const XDP_SHOW_MEMINFO: u32 = 1 << 3;
/// `XDP_SHOW_STATS` (xdp_diag.h:33): the XDP_STATISTICS counters.
pub(crate) const XDP_SHOW_STATS: u32 = 1 << 4;

/// `XDP_DIAG_INFO` (xdp_diag.h:37, the anonymous enum of attribute types): [`XdpDiagInfo`].
pub(crate) const XDP_DIAG_INFO: u16 = 1;
/// `XDP_DIAG_UID` (xdp_diag.h:38): the owner's uid, a u32.
pub(crate) const XDP_DIAG_UID: u16 = 2;
/// `XDP_DIAG_RX_RING` (xdp_diag.h:39): [`XdpDiagRing`].
pub(crate) const XDP_DIAG_RX_RING: u16 = 3;
/// `XDP_DIAG_TX_RING` (xdp_diag.h:40): [`XdpDiagRing`].
pub(crate) const XDP_DIAG_TX_RING: u16 = 4;
/// `XDP_DIAG_UMEM` (xdp_diag.h:41): [`XdpDiagUmem`].
pub(crate) const XDP_DIAG_UMEM: u16 = 5;
/// `XDP_DIAG_UMEM_FILL_RING` (xdp_diag.h:42): [`XdpDiagRing`].
pub(crate) const XDP_DIAG_UMEM_FILL_RING: u16 = 6;
/// `XDP_DIAG_UMEM_COMPLETION_RING` (xdp_diag.h:43): [`XdpDiagRing`].
pub(crate) const XDP_DIAG_UMEM_COMPLETION_RING: u16 = 7;
/// `XDP_DIAG_MEMINFO` (xdp_diag.h:44): the SK_MEMINFO_* u32 values.
pub(crate) const XDP_DIAG_MEMINFO: u16 = 8;
/// `XDP_DIAG_STATS` (xdp_diag.h:45): [`XdpDiagStats`].
pub(crate) const XDP_DIAG_STATS: u16 = 9;
/// `XDP_DU_F_ZEROCOPY` (xdp_diag.h:60): [`XdpDiagUmem::flags`] bit of a zero-copy UMEM.
pub(crate) const XDP_DU_F_ZEROCOPY: u32 = 1 << 0;

/// `struct xdp_diag_req` (xdp_diag.h:12): the request, after the `nlmsghdr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct XdpDiagReq {
    pub sdiag_family: u8,
    pub sdiag_protocol: u8,
    pub pad: u16,
    pub xdiag_ino: u32,
    pub xdiag_show: u32,
    pub xdiag_cookie: [u32; 2],
}

/// `struct xdp_diag_msg` (xdp_diag.h:21): one answer, followed by its attributes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct XdpDiagMsg {
    pub xdiag_family: u8,
    pub xdiag_type: u8,
    pub pad: u16,
    pub xdiag_ino: u32,
    pub xdiag_cookie: [u32; 2],
}

/// `struct xdp_diag_info` (xdp_diag.h:51).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct XdpDiagInfo {
    pub ifindex: u32,
    pub queue_id: u32,
}

/// `struct xdp_diag_ring` (xdp_diag.h:56).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct XdpDiagRing {
    pub entries: u32,
}

/// `struct xdp_diag_umem` (xdp_diag.h:62).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct XdpDiagUmem {
    pub size: u64,
    pub id: u32,
    pub num_pages: u32,
    pub chunk_size: u32,
    pub headroom: u32,
    pub ifindex: u32,
    pub queue_id: u32,
    pub flags: u32,
    pub refs: u32,
}

/// `struct xdp_diag_stats` (xdp_diag.h:74, kernel >= 5.9).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct XdpDiagStats {
    pub n_rx_dropped: u64,
    pub n_rx_invalid: u64,
    pub n_rx_full: u64,
    pub n_fill_ring_empty: u64,
    pub n_tx_invalid: u64,
    pub n_tx_ring_empty: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    /// The sizes the kernel's structs have (what the old hand-typed offsets assumed).
    #[test]
    fn struct_sizes_match_the_kernel() {
        assert_eq!(size_of::<XdpDiagReq>(), 20);
        assert_eq!(size_of::<XdpDiagMsg>(), 16);
        assert_eq!(size_of::<XdpDiagInfo>(), 8);
        assert_eq!(size_of::<XdpDiagRing>(), 4);
        assert_eq!(size_of::<XdpDiagUmem>(), 40);
        assert_eq!(size_of::<XdpDiagStats>(), 48);
        assert_eq!(XDP_PACKET_HEADROOM, 256);
    }
}
