//! AF_PACKET system calls and structures (include/uapi/linux/if_packet.h,
//! Documentation/networking/packet_mmap.rst). Needs CAP_NET_RAW.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::{Pod, SysError};

/// `SOL_PACKET`.
pub const SOL_PACKET: i32 = 263;
/// `PACKET_RX_RING`.
pub const PACKET_RX_RING: i32 = 5;
/// `PACKET_STATISTICS`.
pub const PACKET_STATISTICS: i32 = 6;
/// `PACKET_VERSION`.
pub const PACKET_VERSION: i32 = 10;
/// `PACKET_TX_RING`.
pub const PACKET_TX_RING: i32 = 13;
/// `PACKET_FANOUT`.
pub const PACKET_FANOUT: i32 = 18;
/// `PACKET_QDISC_BYPASS` (kernel >= 3.14).
pub const PACKET_QDISC_BYPASS: i32 = 20;
/// `PACKET_IGNORE_OUTGOING` (kernel >= 4.20).
pub const PACKET_IGNORE_OUTGOING: i32 = 23;
/// `TPACKET_V3` (kernel >= 3.2; TX ring with V3 >= 4.11).
pub const TPACKET_V3: i32 = 2;
/// Fanout by flow hash.
pub const PACKET_FANOUT_HASH: u32 = 0;
/// Fanout by the receiving CPU.
pub const PACKET_FANOUT_CPU: u32 = 2;
/// Frame/block owned by the kernel.
pub const TP_STATUS_KERNEL: u32 = 0;
/// Block handed to user space.
pub const TP_STATUS_USER: u32 = 1;
/// TX frame free.
pub const TP_STATUS_AVAILABLE: u32 = 0;
/// TX frame to send.
pub const TP_STATUS_SEND_REQUEST: u32 = 1;
/// TX frame being sent.
#[allow(dead_code)] // the kernel's status value, listed for completeness
pub const TP_STATUS_SENDING: u32 = 2;
/// TX frame the kernel refused.
pub const TP_STATUS_WRONG_FORMAT: u32 = 4;

/// `struct tpacket_req3`.
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

/// `struct tpacket_stats_v3` (reading it resets the kernel's counters).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TpacketStatsV3 {
    /// Packets seen by the socket (received + dropped).
    pub tp_packets: u32,
    /// Packets dropped because the ring was full.
    pub tp_drops: u32,
    /// Times the queue was frozen (all blocks in user space).
    pub tp_freeze_q_cnt: u32,
}

// SAFETY: repr(C) struct of u32.
unsafe impl Pod for TpacketStatsV3 {}

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
