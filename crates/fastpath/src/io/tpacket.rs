//! The AF_PACKET TPACKET_V3 backend: an mmap'd ring of blocks for RX (the kernel fills a block
//! with many packets and hands it over whole; we read the packets in place and give the block
//! back), a ring of frames for TX (one `send` transmits every frame marked), PACKET_FANOUT for
//! several workers, PACKET_QDISC_BYPASS, and PACKET_STATISTICS drops.
//! Source: Documentation/networking/packet_mmap.rst, include/uapi/linux/if_packet.h.
//! Kernel: TPACKET_V3 RX >= 3.2, TX >= 4.11. Needs CAP_NET_RAW.

use std::mem::offset_of;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use super::{Port, PortError, PortStats};
use crate::netdev::Iface;
use crate::sys::packet::*;
use crate::sys::{self, Mmap};

const PAGE: u32 = 4096;
/// TPACKET_ALIGN(sizeof(struct tpacket3_hdr)): where TX frame data starts.
const TX_DATA_OFF: usize =
    (size_of::<libc::tpacket3_hdr>() + libc::TPACKET_ALIGNMENT - 1) & !(libc::TPACKET_ALIGNMENT - 1);
// struct tpacket_block_desc: version, offset_to_priv, then tpacket_hdr_v1 (libc, from
// include/uapi/linux/if_packet.h).
const BLK_STATUS: usize = offset_of!(libc::tpacket_block_desc, hdr.bh1.block_status);
const BLK_NUM_PKTS: usize = offset_of!(libc::tpacket_block_desc, hdr.bh1.num_pkts);
const BLK_FIRST: usize = offset_of!(libc::tpacket_block_desc, hdr.bh1.offset_to_first_pkt);
// struct tpacket3_hdr.
const H_NEXT: usize = offset_of!(libc::tpacket3_hdr, tp_next_offset);
const H_SNAPLEN: usize = offset_of!(libc::tpacket3_hdr, tp_snaplen);
const H_LEN: usize = offset_of!(libc::tpacket3_hdr, tp_len);
const H_STATUS: usize = offset_of!(libc::tpacket3_hdr, tp_status);
const H_MAC: usize = offset_of!(libc::tpacket3_hdr, tp_mac);

/// How to spread packets over several sockets of one fanout group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fanout {
    /// By flow hash (PACKET_FANOUT_HASH).
    Hash,
    /// By receiving CPU (PACKET_FANOUT_CPU).
    Cpu,
}

/// Ring shapes and options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TpacketOptions {
    /// RX block size in bytes: a multiple of the page size (4096).
    pub block_size: u32,
    /// RX blocks.
    pub block_count: u32,
    /// RX frame size hint and TX frame size in bytes: a multiple of 16, 128..=block size.
    pub frame_size: u32,
    /// A partly filled RX block is handed over after this many ms.
    pub block_timeout_ms: u32,
    /// TX frames (0: no TX ring; tx_burst then fails).
    pub tx_frames: u32,
    /// Join fanout group `id` with this mode.
    pub fanout: Option<(u16, Fanout)>,
    /// Bypass the qdisc on TX (PACKET_QDISC_BYPASS).
    pub qdisc_bypass: bool,
}

impl Default for TpacketOptions {
    fn default() -> Self {
        Self {
            block_size: 1 << 18,
            block_count: 64,
            frame_size: 2048,
            block_timeout_ms: 10,
            tx_frames: 1024,
            fanout: None,
            qdisc_bypass: false,
        }
    }
}

impl TpacketOptions {
    /// Checks every value before anything is created.
    ///
    /// # Errors
    ///
    /// [`PortError::Config`] naming the first bad value: a block size that is not a non-zero
    /// multiple of the page size, a block count outside 1..=65536, or a frame size that is not a
    /// multiple of 16 from 128 dividing the block size.
    pub fn validate(&self) -> Result<(), PortError> {
        if self.block_size == 0 || self.block_size % PAGE != 0 {
            return Err(PortError::Config {
                what: "TPACKET block size",
                value: self.block_size.to_string(),
                accepted: format!("use a multiple of the page size ({PAGE} bytes)"),
            });
        }
        if self.block_count == 0 || self.block_count > 65536 {
            return Err(PortError::Config {
                what: "TPACKET block count",
                value: self.block_count.to_string(),
                accepted: "use 1..=65536".into(),
            });
        }
        // Frames must tile the block exactly: TX frames are then contiguous across blocks.
        if self.frame_size % 16 != 0
            || self.frame_size < 128
            || self.frame_size > self.block_size
            || self.block_size % self.frame_size != 0
        {
            return Err(PortError::Config {
                what: "TPACKET frame size",
                value: self.frame_size.to_string(),
                accepted: format!("use a multiple of 16 from 128 that divides the block size ({})", self.block_size),
            });
        }
        Ok(())
    }
}

/// An AF_PACKET TPACKET_V3 port on one interface.
#[derive(Debug)]
pub struct TpacketPort {
    ring: Mmap,
    fd: OwnedFd,
    opts: TpacketOptions,
    rx_len: usize,
    cur_block: u32,
    pkt_in_block: u32,
    pkt_off: usize,
    tx_cur: u32,
    tx_count: u32,
    stats: PortStats,
    kernel_packets: u64,
    kernel_drops: u64,
    kernel_freezes: u64,
}

impl TpacketPort {
    /// Opens a TPACKET_V3 socket on `iface` (by its ifindex; use it in the network namespace
    /// it was resolved in). Needs CAP_NET_RAW.
    ///
    /// # Errors
    ///
    /// [`PortError::Config`] for options out of range; [`PortError::Sys`] for a failed call
    /// (EPERM without CAP_NET_RAW).
    pub fn open(iface: &Iface, opts: TpacketOptions) -> Result<Self, PortError> {
        opts.validate()?;
        let fd = socket_packet()?;
        sys::setsockopt_int(&fd, SOL_PACKET, PACKET_VERSION, TPACKET_V3, "SOL_PACKET, PACKET_VERSION, TPACKET_V3")?;
        let frames_per_block = opts.block_size / opts.frame_size;
        let rx = TpacketReq3 {
            tp_block_size: opts.block_size,
            tp_block_nr: opts.block_count,
            tp_frame_size: opts.frame_size,
            tp_frame_nr: frames_per_block * opts.block_count,
            tp_retire_blk_tov: opts.block_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sys::setsockopt(&fd, SOL_PACKET, PACKET_RX_RING, &rx, "SOL_PACKET, PACKET_RX_RING")?;
        let rx_len = (opts.block_size as usize) * (opts.block_count as usize);
        let mut tx_len = 0;
        if opts.tx_frames > 0 {
            let blocks = opts.tx_frames.div_ceil(frames_per_block);
            let tx = TpacketReq3 {
                tp_block_size: opts.block_size,
                tp_block_nr: blocks,
                tp_frame_size: opts.frame_size,
                tp_frame_nr: blocks * frames_per_block,
                ..Default::default()
            };
            sys::setsockopt(&fd, SOL_PACKET, PACKET_TX_RING, &tx, "SOL_PACKET, PACKET_TX_RING")?;
            tx_len = (opts.block_size as usize) * blocks as usize;
        }
        if opts.qdisc_bypass {
            sys::setsockopt_int(&fd, SOL_PACKET, PACKET_QDISC_BYPASS, 1, "SOL_PACKET, PACKET_QDISC_BYPASS")?;
        }
        let ring = Mmap::ring(&fd, rx_len + tx_len, 0, "AF_PACKET RX+TX ring")?;
        // A port receives what arrives on the interface, not what this host sends out of it
        // (PACKET_IGNORE_OUTGOING, kernel >= 4.20).
        sys::setsockopt_int(&fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, 1, "SOL_PACKET, PACKET_IGNORE_OUTGOING")?;
        bind_ll(&fd, iface.ifindex())?;
        if let Some((id, mode)) = opts.fanout {
            let t = match mode {
                Fanout::Hash => PACKET_FANOUT_HASH,
                Fanout::Cpu => PACKET_FANOUT_CPU,
            };
            sys::setsockopt_int(
                &fd,
                SOL_PACKET,
                PACKET_FANOUT,
                (id as u32 | (t << 16)) as i32,
                "SOL_PACKET, PACKET_FANOUT",
            )?;
        }
        let tx_count = if opts.tx_frames > 0 { (tx_len / opts.frame_size as usize) as u32 } else { 0 };
        Ok(Self {
            ring,
            fd,
            opts,
            rx_len,
            cur_block: 0,
            pkt_in_block: 0,
            pkt_off: 0,
            tx_cur: 0,
            tx_count,
            stats: PortStats::default(),
            kernel_packets: 0,
            kernel_drops: 0,
            kernel_freezes: 0,
        })
    }

    /// Reads a header word of a block or frame we own (bounds-checked).
    fn u32_at(&self, off: usize) -> u32 {
        assert!(off + 4 <= self.ring.len());
        // SAFETY: in bounds of the live mapping; a plain read of a region the kernel handed us.
        unsafe { std::ptr::read_unaligned(self.ring.as_ptr().add(off) as *const u32) }
    }

    fn u16_at(&self, off: usize) -> u16 {
        assert!(off + 2 <= self.ring.len());
        // SAFETY: as for u32_at.
        unsafe { std::ptr::read_unaligned(self.ring.as_ptr().add(off) as *const u16) }
    }

    /// The bytes `start..end` of a block the kernel handed us (status USER): nobody else writes
    /// them until we give the block back.
    fn region(&self, start: usize, end: usize) -> &[u8] {
        assert!(start <= end && end <= self.ring.len());
        // SAFETY: in bounds; the block is ours until its status is set back to KERNEL, which
        // happens only after the borrow ends (rx_burst's callback has returned).
        unsafe { std::slice::from_raw_parts(self.ring.as_ptr().add(start), end - start) }
    }

    /// The status word at `off`, shared with the kernel.
    fn status(&self, off: usize) -> &AtomicU32 {
        assert!(off + 4 <= self.ring.len() && off % 4 == 0);
        // SAFETY: in bounds and 4-byte aligned (blocks and frames are page/16-byte aligned);
        // the kernel accesses it with its own barriers (smp_wmb/flush_dcache in af_packet.c).
        unsafe { &*(self.ring.as_ptr().add(off) as *const AtomicU32) }
    }
}

impl Port for TpacketPort {
    fn path(&self) -> &'static str {
        "tpacket"
    }

    fn rx_burst<F: FnMut(&[u8])>(&mut self, max: usize, timeout_ms: i32, mut f: F) -> Result<usize, PortError> {
        let bs = self.opts.block_size as usize;
        let mut count = 0;
        let mut waited = false;
        while count < max {
            let block = self.cur_block as usize * bs;
            // Acquire: the packets of the block are visible once its status says USER.
            if self.status(block + BLK_STATUS).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                if count == 0 && timeout_ms > 0 && !waited {
                    waited = true;
                    sys::poll_one(self.fd.as_raw_fd(), libc::POLLIN, timeout_ms)?;
                    continue;
                }
                break;
            }
            let num = self.u32_at(block + BLK_NUM_PKTS);
            if self.pkt_in_block == 0 {
                self.pkt_off = block + self.u32_at(block + BLK_FIRST) as usize;
            }
            while self.pkt_in_block < num && count < max {
                let h = self.pkt_off;
                let snap = self.u32_at(h + H_SNAPLEN) as usize;
                let mac = self.u16_at(h + H_MAC) as usize;
                let end = (h + mac + snap).min(block + bs);
                f(self.region(h + mac, end));
                self.stats.rx_bytes += snap as u64;
                count += 1;
                self.pkt_off += self.u32_at(h + H_NEXT) as usize;
                self.pkt_in_block += 1;
            }
            if self.pkt_in_block >= num {
                // Release: we are done reading before the kernel may refill the block.
                self.status(block + BLK_STATUS).store(TP_STATUS_KERNEL, Ordering::Release);
                self.cur_block = (self.cur_block + 1) % self.opts.block_count;
                self.pkt_in_block = 0;
            }
        }
        self.stats.rx_packets += count as u64;
        Ok(count)
    }

    fn tx_burst(&mut self, frames: &[&[u8]]) -> Result<usize, PortError> {
        if self.tx_count == 0 {
            return Err(PortError::Config {
                what: "TX on a port opened with tx_frames",
                value: "0".into(),
                accepted: "tx_frames >= 1".into(),
            });
        }
        let fsz = self.opts.frame_size as usize;
        let mut sent = 0;
        for fr in frames {
            if fr.len() > fsz - TX_DATA_OFF {
                return Err(PortError::Config {
                    what: "frame length",
                    value: fr.len().to_string(),
                    accepted: format!("at most {} bytes", fsz - TX_DATA_OFF),
                });
            }
            let off = self.rx_len + self.tx_cur as usize * fsz;
            let st = self.status(off + H_STATUS).load(Ordering::Acquire);
            if st != TP_STATUS_AVAILABLE && st != TP_STATUS_WRONG_FORMAT {
                break; // ring full: the caller retries
            }
            // SAFETY: the frame at `off` is ours (status AVAILABLE) and in bounds.
            unsafe {
                let base = self.ring.as_ptr().add(off);
                std::ptr::copy_nonoverlapping(fr.as_ptr(), base.add(TX_DATA_OFF), fr.len());
                std::ptr::write_unaligned(base.add(H_LEN) as *mut u32, fr.len() as u32);
                std::ptr::write_unaligned(base.add(H_SNAPLEN) as *mut u32, fr.len() as u32);
            }
            // Release: the data is written before the kernel sees SEND_REQUEST.
            self.status(off + H_STATUS).store(TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.tx_cur = (self.tx_cur + 1) % self.tx_count;
            self.stats.tx_bytes += fr.len() as u64;
            sent += 1;
        }
        if sent > 0 {
            // One send() transmits every frame marked SEND_REQUEST.
            sys::kick_tx(self.fd.as_raw_fd())?;
        }
        self.stats.tx_packets += sent as u64;
        Ok(sent)
    }

    fn stats(&mut self) -> Result<PortStats, PortError> {
        // PACKET_STATISTICS resets the kernel's counters on every read: accumulate.
        let (s, _): (TpacketStatsV3, usize) =
            sys::getsockopt(&self.fd, SOL_PACKET, PACKET_STATISTICS, "SOL_PACKET, PACKET_STATISTICS")?;
        self.kernel_packets += s.tp_packets as u64;
        self.kernel_drops += s.tp_drops as u64;
        self.kernel_freezes += s.tp_freeze_q_cnt as u64;
        let mut out = self.stats.clone();
        out.drops = vec![("tp_drops".into(), self.kernel_drops), ("tp_freeze_q_cnt".into(), self.kernel_freezes)];
        Ok(out)
    }
}

/// The AF_PACKET socket's file descriptor, e.g. for tokio's `AsyncFd` or `poll`; it stays owned by the TpacketPort.
impl std::os::fd::AsFd for TpacketPort {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.fd)
    }
}

impl std::os::fd::AsRawFd for TpacketPort {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offsets libc's structs give are the kernel's (the values this file once spelled out).
    #[test]
    fn ring_offsets_are_the_kernels() {
        assert_eq!((TX_DATA_OFF, BLK_STATUS, BLK_NUM_PKTS, BLK_FIRST), (48, 8, 12, 16));
        assert_eq!((H_NEXT, H_SNAPLEN, H_LEN, H_STATUS, H_MAC), (0, 12, 16, 20, 24));
    }
}
