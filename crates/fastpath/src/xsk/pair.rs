//! Two AF_XDP sockets on two interfaces over ONE UMEM, forwarding both ways: a frame received on
//! one socket is put on the other's TX ring as it is (same UMEM frame, no copy in user space: the
//! DPDK l2fwd model), and the frames the other side has finished sending (its COMPLETION ring)
//! go back to the FILL ring of the side they were received on. Used by `fastpath fwd --engine
//! xsk` (docs/ARCHITECTURE.md §13).
//!
//! The second socket shares the first one's UMEM with its own FILL and COMPLETION rings
//! (XDP_SHARED_UMEM on another interface, kernel >= 5.10; Documentation/networking/af_xdp.rst).
//! A frame is never dropped in user space: when the egress TX ring is full the frames stay on
//! the ingress RX ring, and the kernel counts what it then cannot deliver (XDP_STATISTICS
//! `rx_ring_full`, `rx_fill_ring_empty_descs`).
//!
//! **In flight, bounded**: [`XskPair::set_tx_limit_bytes`] caps the bytes each side has handed
//! to its TX ring and not yet seen completed, in the spirit of BQL
//! (the kernel's Byte Queue Limits, include/linux/dynamic_queue_limits.h): above the cap, frames wait on the
//! ingress RX ring (and beyond it are dropped by the kernel, counted), so a queue does not build
//! up in front of a slower egress.
//!
//! **Multi-buffer** (sockets bound with XDP_USE_SG, [`SocketConfig::multi_buffer`], kernel
//! 6.6 or later): a packet of several frames (`XDP_PKT_CONTD`) moves as a whole: all its frames or
//! none (a peek that ends inside a packet leaves it on the RX ring for the next round), with its
//! chaining kept, so the egress socket sends it as one packet. Counters count packets.
//!
//! Refill, reap and TX wake-up are the ring data path shared with the port API
//! (`xsk/datapath.rs`, `TxKick::ROUND` after a move); the pair's own part is the move from one
//! socket's RX ring to the other's TX ring, with the byte limit and its per-frame record.
//!
//! Privileges: CAP_NET_RAW (sockets); the XDP programs that redirect into them are attached by
//! the caller. Kernel >= 5.10.

use std::sync::Arc;

use super::datapath::{self, TxKick};
use super::{Frame, SocketConfig, Umem, UmemConfig, XskError, XskSocket, XskStats};
use crate::netdev::Iface;
use crate::sys::{self, SysError};

/// In [`XskPair`]'s per-frame record: the frame ends its packet (frame lengths fit in 31 bits).
const LAST_FRAME: u32 = 1 << 31;

/// Counters of one direction (frames received on side `i` and sent on the other).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DirStats {
    /// Packets taken from the ingress RX ring and put on the egress TX ring.
    pub forwarded: u64,
    /// Their bytes.
    pub forwarded_bytes: u64,
    /// Of those, packets the egress side reported sent (its COMPLETION ring: every frame of
    /// the packet).
    pub completed: u64,
    /// Times the egress TX ring had no room (frames left on the ingress RX ring).
    pub tx_full: u64,
    /// Times the in-flight byte limit held frames back.
    pub limited: u64,
    /// Packets still on the ingress RX ring when the pair was stopped ([`XskPair::discard_rx`]:
    /// a port deleted or re-bound under traffic); never forwarded.
    pub discarded: u64,
}

/// Two sockets on one UMEM; side 0 and side 1. See the module docs.
#[derive(Debug)]
pub struct XskPair {
    umem: Arc<Umem>,
    socks: [XskSocket; 2],
    /// Free frames waiting for room on side i's FILL ring.
    spare: [Vec<Frame>; 2],
    /// Bytes on side i's TX ring or being sent, not yet completed.
    in_flight_bytes: [u64; 2],
    /// Per frame index, while the frame is on a TX ring or being sent: its length, with
    /// [`LAST_FRAME`] set if it ends its packet.
    sent: Vec<u32>,
    tx_limit_bytes: Option<u64>,
    /// Direction i: frames received on side i, sent on side 1-i.
    pub stats: [DirStats; 2],
}

impl XskPair {
    /// Makes a UMEM of `umem.frame_count` frames, binds a socket on (`ifaces[0]`, `queue_id`)
    /// that registers it, and a second on (`ifaces[1]`, `queue_id`) sharing it with its own
    /// FILL and COMPLETION rings; half the frames go to each FILL ring.
    ///
    /// # Errors
    ///
    /// As [`XskSocket::bind`] (queue out of range, [`XskError::Unsupported`] on a kernel < 5.10
    /// for a UMEM shared across interfaces, EPERM without CAP_NET_RAW), and as [`Umem::new`].
    pub fn bind(
        umem: &UmemConfig,
        socket: &SocketConfig,
        ifaces: [&Iface; 2],
        queue_id: u32,
    ) -> Result<Self, XskError> {
        let (umem, mut frames) = Umem::new(umem)?;
        let umem_cfg = umem.config().clone();
        let s0 = XskSocket::bind(&umem, ifaces[0], queue_id, socket)?;
        let s1 = XskSocket::bind(&umem, ifaces[1], queue_id, socket)?;
        let half = frames.len() / 2;
        let spare1 = frames.split_off(half);
        let mut p = Self {
            umem,
            socks: [s0, s1],
            spare: [frames, spare1],
            in_flight_bytes: [0; 2],
            sent: vec![0; umem_cfg.frame_count as usize],
            tx_limit_bytes: None,
            stats: [DirStats::default(); 2],
        };
        p.refill(0);
        p.refill(1);
        Ok(p)
    }

    /// Caps the bytes each side may have on its TX ring or being sent (`None`: only the ring
    /// size limits it). A cap below one frame still lets one frame through at a time.
    pub fn set_tx_limit_bytes(&mut self, limit: Option<u64>) {
        self.tx_limit_bytes = limit;
    }

    /// The sockets (side 0, side 1): their fds go into the XDP programs' XSKMAPs.
    pub fn sockets(&self) -> &[XskSocket; 2] {
        &self.socks
    }

    /// The shared UMEM.
    pub fn umem(&self) -> &Arc<Umem> {
        &self.umem
    }

    /// XDP_STATISTICS of both sockets.
    ///
    /// # Errors
    ///
    /// [`SysError`] naming `getsockopt(SOL_XDP, XDP_STATISTICS)` if the kernel refuses it.
    pub fn xsk_stats(&self) -> Result<[XskStats; 2], SysError> {
        Ok([self.socks[0].stats()?, self.socks[1].stats()?])
    }

    /// Bytes side `i` has handed to its TX ring and not yet seen completed.
    pub fn in_flight_bytes(&self, i: usize) -> u64 {
        self.in_flight_bytes[i]
    }

    /// Side i's spare frames onto its FILL ring, as far as there is room.
    fn refill(&mut self, i: usize) {
        let Some(fill) = self.socks[i].fill.as_mut() else { return };
        let spare = &mut self.spare[i];
        datapath::refill(&mut fill.reserve(spare.len() as u32), spare, |_| {});
    }

    /// Side `tx`'s completed frames back to the FILL ring of the side they came from (its
    /// spare frames first; what finds no room waits with them).
    fn reap(&mut self, tx: usize) {
        let rx = 1 - tx;
        let fs = self.umem.frame_size();
        let fidx = crate::xsk::FrameIndexer::new(fs);
        let [s0, s1] = &mut self.socks;
        let (txs, rxs) = if tx == 0 { (s0, s1) } else { (s1, s0) };
        let Some(comp) = txs.comp.as_mut() else { return };
        let fill = rxs.fill.as_mut().expect("a pair's sockets have their own FILL rings");
        let sent = &mut self.sent;
        let mut bytes = 0u64;
        let ends = |f: &Frame| {
            let s = std::mem::take(&mut sent[fidx.index(f.addr())]);
            bytes += (s & !LAST_FRAME) as u64;
            s & LAST_FRAME != 0
        };
        let packets = datapath::reap(comp, Some(fill), &mut self.spare[rx], fs, ends, |_| {});
        self.stats[rx].completed += packets;
        self.in_flight_bytes[tx] = self.in_flight_bytes[tx].saturating_sub(bytes);
    }

    /// Forwards the packets among up to `max` frames received on side `rx` to side 1-`rx`;
    /// returns how many packets.
    fn forward(&mut self, rx: usize, max: u32) -> Result<u32, SysError> {
        let tx = 1 - rx;
        let limit = self.tx_limit_bytes;
        let [s0, s1] = &mut self.socks;
        let (rxs, txs) = if rx == 0 { (s0, s1) } else { (s1, s0) };
        let batch = rxs.rx.peek_packets(max.max(32));
        let avail = batch.len() as u32;
        if avail == 0 {
            return Ok(0);
        }
        let mut tb = txs.tx.reserve(avail);
        if tb.room() < avail {
            self.stats[rx].tx_full += 1;
        }
        let mut moved = 0u32;
        let mut bytes = 0u64;
        let mut batch = batch;
        let fidx = crate::xsk::FrameIndexer::new(self.umem.frame_size());
        // What is not taken stays on RX: the batch releases only the frames taken. A packet
        // moves whole or not at all.
        while let Some((nf, len)) = batch.next_packet() {
            if tb.room() < nf {
                break;
            }
            if let Some(l) = limit {
                if self.in_flight_bytes[tx] > 0 && self.in_flight_bytes[tx] + len as u64 > l {
                    self.stats[rx].limited += 1;
                    break;
                }
            }
            for _ in 0..nf {
                let f = batch.next().expect("next_packet counted this frame");
                let last = if f.contd() { 0 } else { LAST_FRAME };
                self.sent[fidx.index(f.addr())] = f.len() | last;
                tb.push(f);
            }
            self.in_flight_bytes[tx] += len as u64;
            bytes += len as u64;
            moved += 1;
        }
        drop(batch);
        drop(tb);
        self.stats[rx].forwarded += moved as u64;
        self.stats[rx].forwarded_bytes += bytes;
        // Wake TX until the ring is drained, so TX keeps up, within a round's bound.
        if moved > 0 {
            datapath::kick_tx(txs, TxKick::ROUND)?;
        }
        Ok(moved)
    }

    /// One round: completions of both sides recycled (with the spare frames) onto the FILL
    /// rings, then up to `max` frames forwarded each way. Returns the frames forwarded (both
    /// ways).
    ///
    /// # Errors
    ///
    /// [`SysError`] naming `sendto` if the TX wake-up failed (ENETDOWN on a port that is down
    /// is not an error: the frames wait on the TX ring).
    #[inline]
    pub fn step(&mut self, max: u32) -> Result<u32, SysError> {
        self.reap(0);
        self.reap(1);
        let n = self.forward(0, max)? + self.forward(1, max)?;
        if n == 0 {
            // Copy mode transmits inside sendto: frames left on TX (a full kernel budget) go now.
            for s in &mut self.socks {
                datapath::kick_tx(s, TxKick::ONCE)?;
                s.kick_rx();
            }
        }
        Ok(n)
    }

    /// Takes every packet left on both RX rings without forwarding it and counts it in
    /// [`DirStats::discarded`] (the frames go back to FILL): called when the pair is stopped
    /// for good, so that every packet the sockets received is counted once, as forwarded or as
    /// discarded. Returns how many.
    pub fn discard_rx(&mut self) -> u64 {
        let mut total = 0;
        let fs = self.umem.frame_size();
        for rx in 0..2 {
            // A peek sees what the ring's cached producer index shows; peek until nothing is
            // left (bounded: the kernel may still be adding).
            for _ in 0..64 {
                let batch = self.socks[rx].rx.peek(u32::MAX);
                if batch.len() == 0 {
                    break;
                }
                let mut n = 0;
                for mut f in batch {
                    n += !f.contd() as u64;
                    f.reset(fs);
                    self.spare[rx].push(f);
                }
                self.stats[rx].discarded += n;
                total += n;
            }
            self.refill(rx);
        }
        total
    }

    /// Waits up to `timeout_ms` for either socket to have frames to receive.
    ///
    /// # Errors
    ///
    /// [`SysError`] naming `poll` if the kernel refuses it (EINTR is a plain return).
    pub fn wait(&self, timeout_ms: i32) -> Result<(), SysError> {
        sys::poll_two_readable([self.socks[0].as_raw_fd(), self.socks[1].as_raw_fd()], timeout_ms)
    }
}
