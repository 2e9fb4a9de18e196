//! AF_PACKET system calls and structures (include/uapi/linux/if_packet.h,
//! Documentation/networking/packet_mmap.rst). Needs CAP_NET_RAW.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::{Pod, SysError};

// SOL_PACKET (include/linux/socket.h), the PACKET_* socket options, fanout modes and
// TP_STATUS_* words (include/uapi/linux/if_packet.h), from libc.
pub use libc::{
    PACKET_FANOUT, PACKET_FANOUT_CPU, PACKET_FANOUT_HASH, PACKET_IGNORE_OUTGOING, PACKET_QDISC_BYPASS, PACKET_RX_RING,
    PACKET_STATISTICS, PACKET_TX_RING, PACKET_VERSION, SOL_PACKET, TP_STATUS_AVAILABLE, TP_STATUS_KERNEL,
    TP_STATUS_SEND_REQUEST, TP_STATUS_USER, TP_STATUS_WRONG_FORMAT,
};
/// `TPACKET_V3` (enum tpacket_versions, if_packet.h; kernel >= 3.2, TX ring with V3 >= 4.11),
/// as the `int` PACKET_VERSION takes.
pub const TPACKET_V3: i32 = libc::tpacket_versions::TPACKET_V3 as i32;

/// `struct tpacket_req3` (include/uapi/linux/if_packet.h). libc has it too
/// (`libc::tpacket_req3`), but without `Default`, which the ring setup's literal uses; the
/// layouts are checked equal below.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TpacketReq3 {
    /// Block size in bytes: a multiple of the page size.
    pub tp_block_size: u32,
    /// Number of blocks.
    pub tp_block_nr: u32,
    /// Frame size (TX ring; for RX only the total count matters).
    pub tp_frame_size: u32,
    /// Number of frames.
    pub tp_frame_nr: u32,
    /// Block retire timeout in ms (RX).
    pub tp_retire_blk_tov: u32,
    /// Private area per block.
    pub tp_sizeof_priv: u32,
    /// Feature request word.
    pub tp_feature_req_word: u32,
}

const _: () = assert!(
    std::mem::size_of::<TpacketReq3>() == std::mem::size_of::<libc::tpacket_req3>()
        && std::mem::offset_of!(TpacketReq3, tp_feature_req_word)
            == std::mem::offset_of!(libc::tpacket_req3, tp_feature_req_word)
);

/// `struct tpacket_stats_v3` (libc; reading it resets the kernel's counters).
pub type TpacketStatsV3 = libc::tpacket_stats_v3;

// SAFETY: repr(C) struct of three u32, every bit pattern valid.
unsafe impl Pod for libc::tpacket_stats_v3 {}

/// `socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL))`.
pub fn socket_packet() -> Result<OwnedFd, SysError> {
    // SAFETY: plain syscall; checked.
    let fd = unsafe {
        libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, (libc::ETH_P_ALL as u16).to_be() as i32)
    };
    if fd < 0 {
        return Err(SysError::last("socket(AF_PACKET, SOCK_RAW, ETH_P_ALL)"));
    }
    // SAFETY: a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `bind(fd, sockaddr_ll{ifindex, ETH_P_ALL})`.
pub fn bind_ll(fd: &impl AsRawFd, ifindex: u32) -> Result<(), SysError> {
    // SAFETY: sockaddr_ll is plain data.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sa.sll_ifindex = ifindex as i32;
    // SAFETY: sa is a valid sockaddr_ll of the given length.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if rc < 0 {
        return Err(SysError::last(format!("bind(AF_PACKET, ifindex={ifindex})")));
    }
    Ok(())
}
