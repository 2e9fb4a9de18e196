//! The four AF_XDP rings: single-producer / single-consumer queues shared with the kernel.
//!
//! ```text
//!   ring         producer     consumer     entries          user side type
//!   ----------   ----------   ----------   --------------   -------------------------
//!   FILL         user         kernel       u64 UMEM addr    ProdRing<u64>  (reserve / submit)
//!   RX           kernel       user         xdp_desc         ConsRing<XdpDesc> (peek / release)
//!   TX           user         kernel       xdp_desc         ProdRing<XdpDesc> (reserve / submit)
//!   COMPLETION   kernel       user         u64 UMEM addr    ConsRing<u64>  (peek / release)
//!
//!   frame life (rx):  user --FILL--> kernel --RX--> user  (then back on FILL)
//!   frame life (tx):  user --TX----> kernel --COMPLETION--> user
//! ```
//!
//! Names and semantics follow libxdp's `xsk.h` (`xsk_ring_prod__reserve`, `__submit`,
//! `xsk_ring_cons__peek`, `__release`, `__cancel`, `cached_prod` / `cached_cons`).
//!
//! # Memory ordering
//! The kernel's net/xdp/xsk_queue.h documents the protocol (its comment "The structure of the
//! shared state of the rings are a simple circular buffer"): the producer writes descriptors,
//! then publishes the producer index with a store-release (`smp_store_release`, barrier B);
//! the consumer reads the producer index with a load-acquire (`smp_load_acquire`, barrier C)
//! before reading descriptors, and publishes its consumer index with a store-release once it is
//! done with them (barrier D) so the producer's load-acquire of it (barrier A) orders the reuse.
//! We do the same through `&AtomicU32` with `Acquire` / `Release`: correct on every architecture,
//! not only on x86. Our own index is only ever written by us, so reading it is `Relaxed`.
//!
//! Indices are free-running `u32` counters that wrap; every index computation is `wrapping_*`,
//! and a slot is `index & mask` (ring sizes are powers of two).

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};

use super::umem::Frame;
use crate::sys::Mmap;

/// An AF_XDP descriptor (`struct xdp_desc` of include/uapi/linux/if_xdp.h): `addr` is the UMEM
/// offset of the packet's first byte (frame start + headroom for RX), `len` its length in bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpDesc {
    /// Offset into the UMEM of the first byte of the packet.
    pub addr: u64,
    /// Packet length in bytes.
    pub len: u32,
    /// Descriptor options: [`XDP_PKT_CONTD`] (multi-buffer) or 0.
    pub options: u32,
}

/// `XDP_RING_NEED_WAKEUP` in the ring's flags word (if_xdp.h, kernel >= 5.4).
pub const XDP_RING_NEED_WAKEUP: u32 = libc::XDP_RING_NEED_WAKEUP;

/// `XDP_PKT_CONTD` in a descriptor's options: the packet continues in the next descriptor
/// (if_xdp.h, kernel >= 6.6, sockets bound with XDP_USE_SG).
pub const XDP_PKT_CONTD: u32 = libc::XDP_PKT_CONTD;

/// The raw shared state of one ring: where its producer and consumer indices, flags word and
/// descriptor array live. Built from an mmap of the socket (see `socket.rs`) or from heap memory
/// in tests.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawRing<T> {
    /// The producer index.
    pub producer: *const AtomicU32,
    /// The consumer index.
    pub consumer: *const AtomicU32,
    /// The flags word (`XDP_RING_NEED_WAKEUP`); may be null when the kernel has none (< 5.4).
    pub flags: *const AtomicU32,
    /// The descriptor array of `size` entries.
    pub descs: *mut T,
    /// Number of entries; a power of two.
    pub size: u32,
}

/// The user side of a ring where user space produces (FILL, TX).
#[derive(Debug)]
pub(crate) struct ProdRing<T> {
    raw: RawRing<T>,
    mask: u32,
    /// Our producer index, published by `submit`.
    cached_prod: u32,
    /// Last seen consumer index + size: the first index we may not write.
    cached_cons: u32,
    /// The producer index we last published (we are its only writer).
    published: u32,
    _t: PhantomData<T>,
}

/// The user side of a ring where user space consumes (RX, COMPLETION).
#[derive(Debug)]
pub(crate) struct ConsRing<T> {
    raw: RawRing<T>,
    mask: u32,
    /// Last seen producer index.
    cached_prod: u32,
    /// Our consumer index, published by `release`.
    cached_cons: u32,
    /// The consumer index we last published (we are its only writer).
    released: u32,
    _t: PhantomData<T>,
}

// SAFETY: a ring is used by one thread at a time (methods take &mut self); the shared
// memory behind it stays valid for as long as the owner (the socket) keeps its mmap.
unsafe impl<T: Send> Send for ProdRing<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for ConsRing<T> {}

impl<T: Copy> ProdRing<T> {
    /// Wraps a ring whose user side produces.
    ///
    /// # Safety
    /// Every pointer in `raw` must stay valid for the life of the returned ring, `descs` must
    /// hold `raw.size` entries, `raw.size` must be a power of two, and no other `ProdRing` may
    /// exist for the same ring.
    pub unsafe fn new(raw: RawRing<T>) -> Self {
        debug_assert!(raw.size.is_power_of_two());
        // SAFETY: the caller guarantees the pointers are valid.
        let (prod, cons) =
            unsafe { ((*raw.producer).load(Ordering::Relaxed), (*raw.consumer).load(Ordering::Acquire)) };
        Self {
            raw,
            mask: raw.size - 1,
            cached_prod: prod,
            cached_cons: cons.wrapping_add(raw.size),
            published: prod,
            _t: PhantomData,
        }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: valid for our life (contract of `new`).
        unsafe { &*self.raw.consumer }
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: valid for our life (contract of `new`).
        unsafe { &*self.raw.producer }
    }

    /// Number of free slots, refreshing the cached consumer index (load-acquire, barrier A of
    /// xsk_queue.h) only when fewer than `wanted` are known to be free (`xsk_prod_nb_free`).
    #[inline]
    pub fn nb_free(&mut self, wanted: u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free >= wanted {
            return free;
        }
        self.cached_cons = self.consumer().load(Ordering::Acquire).wrapping_add(self.raw.size);
        self.cached_cons.wrapping_sub(self.cached_prod)
    }

    /// Entries submitted that the kernel has not consumed yet (refreshes the consumer index).
    #[inline]
    pub fn pending(&mut self) -> u32 {
        self.raw.size - self.nb_free(self.raw.size) - self.cached_prod.wrapping_sub(self.published)
    }

    #[cfg(test)]
    /// Reserves exactly `n` slots and returns the index of the first, or `None` (nothing
    /// reserved) when fewer than `n` are free: libxdp's all-or-nothing `xsk_ring_prod__reserve`.
    #[inline]
    pub fn reserve(&mut self, n: u32) -> Option<u32> {
        if self.nb_free(n) < n {
            return None;
        }
        let idx = self.cached_prod;
        self.cached_prod = self.cached_prod.wrapping_add(n);
        Some(idx)
    }

    /// Reserves up to `n` slots; returns (first index, count), count may be 0.
    #[inline]
    pub fn reserve_up_to(&mut self, n: u32) -> (u32, u32) {
        let count = self.nb_free(n).min(n);
        let idx = self.cached_prod;
        self.cached_prod = self.cached_prod.wrapping_add(count);
        (idx, count)
    }

    /// Writes entry `idx`, which must be reserved and not yet submitted (the kernel does not
    /// look at those slots). Panics otherwise: writing any other slot would race with the kernel.
    #[inline]
    pub fn write(&mut self, idx: u32, value: T) {
        assert!(
            idx.wrapping_sub(self.published) < self.cached_prod.wrapping_sub(self.published),
            "ring write at {idx}: not a reserved, unsubmitted index"
        );
        // SAFETY: idx & mask < size, inside the descriptor array (contract of `new`), and the
        // slot is ours: reserved, not yet published to the kernel.
        unsafe { self.raw.descs.add((idx & self.mask) as usize).write(value) };
    }

    /// Gives back the last `n` reserved, unsubmitted slots (`xsk_ring_prod__cancel`).
    #[inline]
    pub fn cancel(&mut self, n: u32) {
        assert!(n <= self.cached_prod.wrapping_sub(self.published), "cancel of {n}: more than reserved");
        self.cached_prod = self.cached_prod.wrapping_sub(n);
    }

    /// Gives back every reserved, unsubmitted slot: a batch that was leaked (`mem::forget`)
    /// left its reservation behind, and the next submit must not publish its unwritten slots.
    #[inline]
    pub fn cancel_unsubmitted(&mut self) {
        self.cached_prod = self.published;
    }

    /// Publishes the next `n` reserved slots to the kernel (store-release, barrier B).
    #[inline]
    pub fn submit(&mut self, n: u32) {
        assert!(n <= self.cached_prod.wrapping_sub(self.published), "submit of {n}: more than reserved");
        if n == 0 {
            // No store: the index's cache line is shared with the kernel, and a spinning loop
            // that stores on every empty round makes the kernel's side miss on it each time.
            return;
        }
        self.published = self.published.wrapping_add(n);
        self.producer().store(self.published, Ordering::Release);
    }

    /// True if the kernel asked to be woken up (`XDP_RING_NEED_WAKEUP`, only set when the socket
    /// was bound with `XDP_USE_NEED_WAKEUP`).
    #[inline]
    pub fn needs_wakeup(&self) -> bool {
        // SAFETY: flags is null or valid for our life (contract of `new`).
        !self.raw.flags.is_null() && unsafe { &*self.raw.flags }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    /// Ring size in entries.
    pub fn size(&self) -> u32 {
        self.raw.size
    }
}

impl<T: Copy> ConsRing<T> {
    /// Wraps a ring whose user side consumes.
    ///
    /// # Safety
    /// As for [`ProdRing::new`], with "no other `ConsRing`".
    pub unsafe fn new(raw: RawRing<T>) -> Self {
        debug_assert!(raw.size.is_power_of_two());
        // SAFETY: the caller guarantees the pointers are valid.
        let (prod, cons) =
            unsafe { ((*raw.producer).load(Ordering::Acquire), (*raw.consumer).load(Ordering::Relaxed)) };
        Self { raw, mask: raw.size - 1, cached_prod: prod, cached_cons: cons, released: cons, _t: PhantomData }
    }

    /// Number of entries ready, at most `wanted`; refreshes the cached producer index
    /// (load-acquire, barrier C) only when the cache is empty (`xsk_cons_nb_avail`).
    #[inline]
    pub fn nb_avail(&mut self, wanted: u32) -> u32 {
        let mut entries = self.cached_prod.wrapping_sub(self.cached_cons);
        if entries == 0 {
            // SAFETY: valid for our life (contract of `new`).
            self.cached_prod = unsafe { &*self.raw.producer }.load(Ordering::Acquire);
            entries = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        entries.min(wanted)
    }

    /// Takes up to `n` ready entries; returns (first index, count). Read them with [`Self::read`],
    /// then [`Self::release`] the same count.
    #[inline]
    pub fn peek(&mut self, n: u32) -> (u32, u32) {
        let count = self.nb_avail(n);
        let idx = self.cached_cons;
        self.cached_cons = self.cached_cons.wrapping_add(count);
        (idx, count)
    }

    /// Reads entry `idx`, which must be peeked and not yet released (the kernel does not write
    /// those slots). Panics otherwise: reading any other slot would race with the kernel.
    #[inline]
    pub fn read(&self, idx: u32) -> T {
        assert!(
            idx.wrapping_sub(self.released) < self.cached_cons.wrapping_sub(self.released),
            "ring read at {idx}: not a peeked, unreleased index"
        );
        // SAFETY: idx & mask < size, inside the descriptor array (contract of `new`), and the
        // slot is ours: published by the producer, peeked, not yet released.
        unsafe { self.raw.descs.add((idx & self.mask) as usize).read() }
    }

    /// Un-peeks the last `n` peeked, unreleased entries (`xsk_ring_cons__cancel`).
    #[inline]
    pub fn cancel(&mut self, n: u32) {
        assert!(n <= self.cached_cons.wrapping_sub(self.released), "cancel of {n}: more than peeked");
        self.cached_cons = self.cached_cons.wrapping_sub(n);
    }

    /// Releases every peeked, unreleased entry: a batch that was leaked (`mem::forget`) left
    /// them behind; their frames were either taken (their tokens live on) or are lost.
    #[inline]
    pub fn release_unreleased(&mut self) {
        let n = self.cached_cons.wrapping_sub(self.released);
        if n > 0 {
            self.release(n);
        }
    }

    /// Hands `n` peeked entries back to the kernel (store-release, barrier D).
    #[inline]
    pub fn release(&mut self, n: u32) {
        assert!(n <= self.cached_cons.wrapping_sub(self.released), "release of {n}: more than peeked");
        if n == 0 {
            // No store on an empty round (see `ProdRing::submit`): an empty peek in a spin loop
            // must not pull the consumer index's cache line away from the kernel's producer.
            return;
        }
        self.released = self.released.wrapping_add(n);
        // SAFETY: valid for our life (contract of `new`).
        unsafe { &*self.raw.consumer }.store(self.released, Ordering::Release);
    }

    #[cfg(test)]
    /// True if the kernel asked to be woken up (see [`ProdRing::needs_wakeup`]).
    #[inline]
    pub fn needs_wakeup(&self) -> bool {
        // SAFETY: flags is null or valid for our life (contract of `new`).
        !self.raw.flags.is_null() && unsafe { &*self.raw.flags }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    /// Ring size in entries.
    pub fn size(&self) -> u32 {
        self.raw.size
    }
}

/// The user side of a FILL ring: free frames handed to the kernel for it to receive into.
/// Frames go in only as [`Frame`] tokens through a [`FillBatch`], so a frame on the ring cannot
/// be read or written by safe code. Owns the ring's mapping.
///
/// # Examples
///
/// Receiving: free frames go on the FILL ring, received packets come off the RX ring as the same
/// tokens, and each goes back to the free list once read.
///
/// ```no_run
/// use fastpath::xsk::{Frame, Umem, XskSocket};
///
/// /// Hands the free frames to the kernel, then takes up to 64 received packets; returns their bytes.
/// fn receive(umem: &Umem, sock: &mut XskSocket, free: &mut Vec<Frame>) -> u64 {
///     let XskSocket { rx, fill, .. } = sock;
///     let fill = fill.as_mut().expect("a socket with a FILL ring of its own");
///     let mut batch = fill.reserve(free.len() as u32); // fewer if the ring is fuller
///     for _ in 0..batch.room() {
///         batch.push(free.pop().expect("no more slots reserved than free frames"));
///     }
///     drop(batch); // submits
///     let mut bytes = 0;
///     for frame in rx.peek(64) {
///         bytes += umem.data(&frame).len() as u64;
///         free.push(frame); // to the FILL ring on the next call
///     }
///     bytes
/// }
/// ```
#[derive(Debug)]
pub struct FillRing {
    ring: ProdRing<u64>,
    umem_id: u32,
    frame_size: u32,
    frame_mask: u64,
    _map: Option<Mmap>,
}

/// The user side of a COMPLETION ring: frames the kernel has finished sending, handed back as
/// [`Frame`] tokens by a [`CompBatch`]. Owns the ring's mapping.
#[derive(Debug)]
pub struct CompRing {
    ring: ConsRing<u64>,
    umem_id: u32,
    _map: Option<Mmap>,
}

/// The user side of an RX ring: received packets, handed out as [`Frame`] tokens by an
/// [`RxBatch`]. Owns the ring's mapping.
#[derive(Debug)]
pub struct RxRing {
    ring: ConsRing<XdpDesc>,
    umem_id: u32,
    /// Unaligned chunk mode: the frame size, to check each decoded address (see `RxBatch`).
    unaligned_frame: Option<u32>,
    _map: Option<Mmap>,
}

/// The user side of a TX ring: packets to send, given as [`Frame`] tokens through a
/// [`TxBatch`]. Owns the ring's mapping.
///
/// # Examples
///
/// Sending: free frames go on the TX ring through a batch, the socket is kicked, and the frames
/// the kernel has sent come back on the COMPLETION ring, free for the next packets.
///
/// ```no_run
/// use fastpath::xsk::{Frame, Umem, XskSocket};
///
/// /// Queues copies of `packet` in as many free frames as the ring takes; returns how many.
/// fn send(
///     umem: &Umem,
///     sock: &mut XskSocket,
///     free: &mut Vec<Frame>,
///     packet: &[u8],
/// ) -> Result<u32, fastpath::SysError> {
///     if let Some(comp) = sock.comp.as_mut() {
///         free.extend(comp.peek(64)); // sent: free again
///     }
///     let mut batch = sock.tx.reserve(free.len() as u32);
///     while batch.room() > 0 {
///         let mut f = free.pop().expect("no more slots reserved than free frames");
///         umem.resize(&mut f, packet.len() as u32).copy_from_slice(packet);
///         batch.push(f); // the kernel's now: the token is gone
///     }
///     let queued = batch.pushed();
///     drop(batch); // submits
///     sock.kick_tx()?; // sendto, when the ring asks for it
///     Ok(queued)
/// }
/// ```
#[derive(Debug)]
pub struct TxRing {
    ring: ProdRing<XdpDesc>,
    umem_id: u32,
    check: TxCheck,
    _map: Option<Mmap>,
}

/// What a TX descriptor must respect for the kernel to take it (xp_validate_desc() and
/// xsk_build_skb() in net/xdp/: inside the UMEM, inside one chunk in aligned mode, a length of
/// 1 or more, XDP_PKT_CONTD only on a multi-buffer socket). Checked on every
/// [`TxBatch::push`] in debug builds: a descriptor the kernel would count in
/// `tx_invalid_descs` is a bug of fastpath, never sent by accident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TxCheck {
    /// Chunk (frame) size in bytes.
    pub chunk_size: u32,
    /// UMEM length in bytes.
    pub umem_len: u64,
    /// The socket was bound with XDP_USE_SG (or shares a UMEM whose first socket was).
    pub multi_buffer: bool,
    /// Unaligned chunk mode: a buffer may cross a chunk.
    pub unaligned: bool,
    /// The UMEM's `tx_metadata_len` (0: none): every TX descriptor must leave that many bytes
    /// in front of its packet, in its chunk in aligned mode (xp_aligned_validate_desc(),
    /// net/xdp/xsk_queue.h), and `XDP_TX_METADATA` is valid only with some.
    pub tx_metadata_len: u32,
}

impl TxCheck {
    /// Why the kernel would refuse `d`, or `None`.
    pub(crate) fn refusal(&self, d: &XdpDesc) -> Option<String> {
        let cs = self.chunk_size as u64;
        // Unaligned mode: the kernel adds an offset carried in the upper 16 bits
        // (xp_unaligned_add_offset_to_addr, net/xdp/xsk_buff_pool.c).
        let addr = if self.unaligned { super::umem::rx_addr(d.addr) } else { d.addr };
        let end = addr.checked_add(d.len as u64);
        if d.len == 0 {
            return Some(format!("TX descriptor addr {:#x} of length 0", d.addr));
        }
        if d.len as u64 + self.tx_metadata_len as u64 > cs {
            return Some(format!(
                "TX descriptor {:#x} of {} bytes (+ {} of TX metadata room) is longer than a {cs}-byte chunk",
                d.addr, d.len, self.tx_metadata_len
            ));
        }
        if end.is_none_or(|e| e > self.umem_len) {
            return Some(format!("TX descriptor {:#x}+{} beyond the UMEM ({} bytes)", d.addr, d.len, self.umem_len));
        }
        if !self.unaligned && addr % cs + d.len as u64 > cs {
            return Some(format!("TX descriptor {:#x}+{} crosses its {}-byte chunk", d.addr, d.len, cs));
        }
        let tml = self.tx_metadata_len as u64;
        let room = if self.unaligned { addr } else { addr % cs };
        if room < tml {
            return Some(format!(
                "TX descriptor {:#x} leaves {room} bytes in front of its packet, less than the UMEM's tx_metadata_len {tml}",
                d.addr
            ));
        }
        let known = XDP_PKT_CONTD | super::tx_meta::XDP_TX_METADATA;
        if d.options & !known != 0
            || (d.options & XDP_PKT_CONTD != 0 && !self.multi_buffer)
            || (d.options & super::tx_meta::XDP_TX_METADATA != 0 && tml == 0)
        {
            return Some(format!(
                "TX descriptor {:#x} with options {:#x} (XDP_PKT_CONTD only on an XDP_USE_SG socket, XDP_TX_METADATA only on a UMEM with tx_metadata_len)",
                d.addr, d.options
            ));
        }
        None
    }
}

impl FillRing {
    /// # Safety
    /// As for [`ProdRing::new`]; `raw` points into `map` (or into memory that outlives the ring
    /// when `map` is `None`), and the ring belongs to a socket of the UMEM `umem_id`.
    pub(crate) unsafe fn new(raw: RawRing<u64>, map: Option<Mmap>, umem_id: u32, frame_size: u32) -> Self {
        // A power-of-two frame size finds a frame's start with a mask (0: another size).
        let frame_mask = if frame_size.is_power_of_two() { !(frame_size as u64 - 1) } else { 0 };
        // SAFETY: the caller's contract.
        Self { ring: unsafe { ProdRing::new(raw) }, umem_id, frame_size, frame_mask, _map: map }
    }

    /// Reserves up to `n` slots (fewer, even 0, when the kernel has not consumed enough).
    /// The batch submits what was pushed when it goes out of scope.
    #[inline]
    pub fn reserve(&mut self, n: u32) -> FillBatch<'_> {
        // No batch is alive (it would borrow the ring): anything reserved is a leaked batch's.
        self.ring.cancel_unsubmitted();
        let (idx, cap) = self.ring.reserve_up_to(n);
        FillBatch {
            idx,
            cap,
            n: 0,
            umem_id: self.umem_id,
            frame_size: self.frame_size,
            frame_mask: self.frame_mask,
            ring: &mut self.ring,
        }
    }

    /// True if the kernel asked to be woken (`XDP_RING_NEED_WAKEUP`): call `recvfrom`/`poll`.
    #[inline]
    pub fn needs_wakeup(&self) -> bool {
        self.ring.needs_wakeup()
    }

    /// Ring size in descriptors.
    pub fn size(&self) -> u32 {
        self.ring.size()
    }
}

impl CompRing {
    /// # Safety
    /// As for [`FillRing::new`].
    pub(crate) unsafe fn new(raw: RawRing<u64>, map: Option<Mmap>, umem_id: u32) -> Self {
        // SAFETY: the caller's contract.
        Self { ring: unsafe { ConsRing::new(raw) }, umem_id, _map: map }
    }

    /// Takes up to `n` completed frames. Frames not taken from the batch stay on the ring.
    #[inline]
    pub fn peek(&mut self, n: u32) -> CompBatch<'_> {
        self.ring.release_unreleased();
        let (idx, n) = self.ring.peek(n);
        CompBatch { idx, n, taken: 0, umem_id: self.umem_id, ring: &mut self.ring }
    }

    /// Ring size in descriptors.
    pub fn size(&self) -> u32 {
        self.ring.size()
    }
}

impl RxRing {
    /// # Safety
    /// As for [`FillRing::new`].
    pub(crate) unsafe fn new(raw: RawRing<XdpDesc>, map: Option<Mmap>, umem_id: u32) -> Self {
        // SAFETY: the caller's contract.
        Self { ring: unsafe { ConsRing::new(raw) }, umem_id, unaligned_frame: None, _map: map }
    }

    /// Unaligned chunk mode with frames of `frame_size` bytes: every received buffer is checked
    /// to lie inside one frame once its offset is decoded.
    pub(crate) fn set_unaligned(&mut self, frame_size: u32) {
        self.unaligned_frame = Some(frame_size);
    }

    /// Takes up to `n` received packets. Packets not taken from the batch stay on the ring.
    #[inline]
    pub fn peek(&mut self, n: u32) -> RxBatch<'_> {
        self.ring.release_unreleased();
        let (idx, n) = self.ring.peek(n);
        RxBatch { idx, n, taken: 0, umem_id: self.umem_id, unaligned_frame: self.unaligned_frame, ring: &mut self.ring }
    }

    /// As [`RxRing::peek`] for multi-buffer sockets: up to `n` descriptors, or the whole ring
    /// when `n` descriptors end inside the first packet (a packet of more frames than `n`), so
    /// that [`RxBatch::next_packet`] always sees at least one whole packet when one is there.
    #[inline]
    pub fn peek_packets(&mut self, n: u32) -> RxBatch<'_> {
        let whole = {
            let b = self.peek(n);
            (b.len() as u32) < n || b.next_packet().is_some()
        };
        // The first batch went without taking anything: its entries are peeked again.
        if whole {
            self.peek(n)
        } else {
            self.peek(u32::MAX)
        }
    }

    /// Ring size in descriptors.
    pub fn size(&self) -> u32 {
        self.ring.size()
    }
}

impl TxRing {
    /// # Safety
    /// As for [`FillRing::new`].
    pub(crate) unsafe fn new(raw: RawRing<XdpDesc>, map: Option<Mmap>, umem_id: u32, check: TxCheck) -> Self {
        // SAFETY: the caller's contract.
        Self { ring: unsafe { ProdRing::new(raw) }, umem_id, check, _map: map }
    }

    /// Once bound: whether the socket takes multi-buffer packets.
    pub(crate) fn set_multi_buffer(&mut self, on: bool) {
        self.check.multi_buffer = on;
    }

    /// Reserves up to `n` slots. The batch submits what was pushed when it goes out of scope.
    #[inline]
    pub fn reserve(&mut self, n: u32) -> TxBatch<'_> {
        // No batch is alive (it would borrow the ring): anything reserved is a leaked batch's.
        self.ring.cancel_unsubmitted();
        let (idx, cap) = self.ring.reserve_up_to(n);
        TxBatch { idx, cap, n: 0, umem_id: self.umem_id, check: self.check, ring: &mut self.ring }
    }

    /// Descriptors submitted that the kernel has not taken yet.
    #[inline]
    pub fn pending(&mut self) -> u32 {
        self.ring.pending()
    }

    /// True if the kernel asked to be woken (`XDP_RING_NEED_WAKEUP`): call `sendto`.
    #[inline]
    pub fn needs_wakeup(&self) -> bool {
        self.ring.needs_wakeup()
    }

    /// Ring size in descriptors.
    pub fn size(&self) -> u32 {
        self.ring.size()
    }
}

/// Reserved FILL slots. [`FillBatch::push`] gives a frame to the kernel; when the batch goes,
/// what was pushed is submitted (store-release) and unused slots are given back.
#[derive(Debug)]
#[must_use = "a batch submits when dropped; an unused one reserves nothing"]
pub struct FillBatch<'r> {
    ring: &'r mut ProdRing<u64>,
    idx: u32,
    cap: u32,
    n: u32,
    umem_id: u32,
    frame_size: u32,
    frame_mask: u64,
}

impl FillBatch<'_> {
    /// Slots left in this batch.
    #[inline]
    pub fn room(&self) -> u32 {
        self.cap - self.n
    }

    /// Gives `f` to the kernel to receive into (its whole frame: the offset is masked off).
    ///
    /// # Panics
    ///
    /// If the batch is full ([`FillBatch::room`] is 0) or `f` belongs to another UMEM.
    #[inline(always)]
    pub fn push(&mut self, f: Frame) {
        assert!(self.n < self.cap, "FILL batch full ({} slots)", self.cap);
        assert_eq!(f.umem_id(), self.umem_id, "frame of another UMEM");
        let a = f.addr();
        let base = if self.frame_mask != 0 { a & self.frame_mask } else { base_by_division(a, self.frame_size) };
        self.ring.write(self.idx.wrapping_add(self.n), base);
        self.n += 1;
    }
}

/// The start of the frame holding `addr` for a frame size that is not a power of two
/// (unaligned chunk mode), out of line.
#[cold]
#[inline(never)]
fn base_by_division(addr: u64, frame_size: u32) -> u64 {
    addr - addr % frame_size as u64
}

impl Drop for FillBatch<'_> {
    fn drop(&mut self) {
        self.ring.cancel(self.cap - self.n);
        self.ring.submit(self.n);
    }
}

/// Reserved TX slots. [`TxBatch::push`] gives a packet to the kernel to send; when the batch
/// goes, what was pushed is submitted and unused slots are given back. The caller then wakes
/// the kernel if it asks (`XskSocket::kick_tx`).
#[derive(Debug)]
#[must_use = "a batch submits when dropped; an unused one reserves nothing"]
pub struct TxBatch<'r> {
    ring: &'r mut ProdRing<XdpDesc>,
    idx: u32,
    cap: u32,
    n: u32,
    umem_id: u32,
    check: TxCheck,
}

impl TxBatch<'_> {
    /// Slots left in this batch.
    #[inline]
    pub fn room(&self) -> u32 {
        self.cap - self.n
    }

    /// Queues `f` (`addr`, `len`) for sending; with the `XDP_TX_METADATA` option if
    /// [`super::Umem::set_tx_meta`] wrote a request in front of it ([`Frame::tx_meta`]).
    ///
    /// # Panics
    ///
    /// If the batch is full ([`TxBatch::room`] is 0) or `f` belongs to another UMEM; in debug
    /// builds also if the kernel would refuse the descriptor (`tx_invalid_descs`): length 0,
    /// `contd` set on a socket without XDP_USE_SG, or, on a UMEM with `tx_metadata_len`, a
    /// packet less than that far into its frame (a token's bytes always lie inside one frame of
    /// its UMEM).
    #[inline]
    pub fn push(&mut self, f: Frame) {
        assert!(self.n < self.cap, "TX batch full ({} slots)", self.cap);
        assert_eq!(f.umem_id(), self.umem_id, "frame of another UMEM");
        let options =
            if f.contd() { XDP_PKT_CONTD } else { 0 } | if f.tx_meta() { super::tx_meta::XDP_TX_METADATA } else { 0 };
        let d = XdpDesc { addr: f.addr(), len: f.len(), options };
        #[cfg(debug_assertions)]
        if let Some(why) = self.check.refusal(&d) {
            panic!("{why}: the kernel would count it in tx_invalid_descs");
        }
        self.ring.write(self.idx.wrapping_add(self.n), d);
        self.n += 1;
    }

    /// Queues a descriptor as given, valid or not: for tests of what the kernel does with
    /// invalid descriptors (the kernel's AF_XDP selftests send them on purpose), and the only
    /// way to name bytes outside a [`Frame`] token. The kernel skips a descriptor it finds
    /// invalid (in a multi-buffer packet: the whole packet, through its last buffer) and counts
    /// it in `tx_invalid_descs` (XDP_STATISTICS). Whether `desc` would be refused:
    /// [`TxBatch::refusal`].
    ///
    /// **Refused descriptors may complete too**: Linux 6.18 in copy mode puts the address of
    /// every descriptor it consumed on the COMPLETION ring, refused or not, even an address
    /// outside the UMEM (measured by the invalid-descriptor scenarios of
    /// `crates/fastpath-conformance`; older kernels' selftests expect no completion). A token
    /// for an address outside the UMEM cannot reach any bytes ([`super::Umem::data`] panics).
    ///
    /// # Safety
    ///
    /// The kernel reads the bytes `desc` names until it completes it, and the COMPLETION ring
    /// then yields a [`Frame`] token for `desc.addr`, whether the kernel took `desc` or
    /// refused it. So the caller must hold no token for any frame `desc` touches (a token
    /// dropped is given up; the completion's token replaces it), and must not name those
    /// frames in another descriptor before `desc`'s completion.
    ///
    /// # Panics
    ///
    /// If the batch is full.
    #[inline]
    pub unsafe fn push_raw(&mut self, desc: XdpDesc) {
        assert!(self.n < self.cap, "TX batch full ({} slots)", self.cap);
        self.ring.write(self.idx.wrapping_add(self.n), desc);
        self.n += 1;
    }

    /// Why the kernel would refuse `desc` on this socket (it counts it in `tx_invalid_descs`),
    /// or `None`: outside the UMEM, longer than a chunk, crossing a chunk (aligned mode only),
    /// length 0, options other than XDP_PKT_CONTD and XDP_TX_METADATA, XDP_PKT_CONTD without
    /// XDP_USE_SG, XDP_TX_METADATA without `tx_metadata_len`, or less than `tx_metadata_len`
    /// bytes in front of the packet. In unaligned mode the offset in the upper 16 bits of
    /// `addr` is added first, as the kernel does. Crossing a page boundary in zero-copy mode is
    /// not checked (the kernel refuses it where the pages are not physically contiguous).
    pub fn refusal(&self, desc: &XdpDesc) -> Option<String> {
        self.check.refusal(desc)
    }

    /// Packets pushed so far.
    #[inline]
    pub fn pushed(&self) -> u32 {
        self.n
    }
}

impl Drop for TxBatch<'_> {
    fn drop(&mut self) {
        self.ring.cancel(self.cap - self.n);
        self.ring.submit(self.n);
    }
}

/// Peeked RX descriptors: an iterator of received [`Frame`]s. When the batch goes, the slots
/// of the frames taken are released to the kernel and the rest are left for the next peek.
#[derive(Debug)]
pub struct RxBatch<'r> {
    ring: &'r mut ConsRing<XdpDesc>,
    idx: u32,
    n: u32,
    taken: u32,
    umem_id: u32,
    unaligned_frame: Option<u32>,
}

impl Iterator for RxBatch<'_> {
    type Item = Frame;

    #[inline]
    fn next(&mut self) -> Option<Frame> {
        if self.taken == self.n {
            return None;
        }
        let d = self.ring.read(self.idx.wrapping_add(self.taken));
        self.taken += 1;
        let addr = super::umem::rx_addr(d.addr);
        if let Some(fs) = self.unaligned_frame {
            // The decoded buffer must lie in one frame (a kernel that counted the headroom
            // twice in the offset would point past it, into a frame the kernel may own).
            assert!(
                super::umem::offset_in(addr, fs) + d.len as u64 <= fs as u64,
                "RX descriptor {:#x}+{} crosses its {fs}-byte frame",
                d.addr,
                d.len
            );
        }
        Some(Frame::with_contd(addr, d.len, self.umem_id, d.options & XDP_PKT_CONTD != 0))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.n - self.taken) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for RxBatch<'_> {}

impl RxBatch<'_> {
    /// Length in bytes of the next frame, without taking it (it stays on the ring if the batch
    /// goes before it is taken).
    #[inline]
    pub fn next_len(&self) -> Option<u32> {
        (self.taken < self.n).then(|| self.ring.read(self.idx.wrapping_add(self.taken)).len)
    }

    /// The next whole packet in this batch, without taking it: (frames, bytes). `None` if the
    /// batch is empty or ends before the packet's last frame (a batch may end inside a
    /// multi-buffer packet; the rest comes with the next peek, Documentation/networking/
    /// af_xdp.rst "Multi-Buffer Support"). On a socket without XDP_USE_SG a packet is one
    /// frame.
    #[inline]
    pub fn next_packet(&self) -> Option<(u32, u32)> {
        let (mut frames, mut bytes) = (0u32, 0u32);
        let mut i = self.taken;
        while i < self.n {
            let d = self.ring.read(self.idx.wrapping_add(i));
            frames += 1;
            bytes = bytes.saturating_add(d.len);
            if d.options & XDP_PKT_CONTD == 0 {
                return Some((frames, bytes));
            }
            i += 1;
        }
        None
    }
}

impl Drop for RxBatch<'_> {
    fn drop(&mut self) {
        self.ring.cancel(self.n - self.taken);
        self.ring.release(self.taken);
    }
}

/// Peeked COMPLETION entries: an iterator of sent [`Frame`]s (len 0), user-owned again. When the
/// batch goes, the slots of the frames taken are released and the rest are left on the ring.
#[derive(Debug)]
pub struct CompBatch<'r> {
    ring: &'r mut ConsRing<u64>,
    idx: u32,
    n: u32,
    taken: u32,
    umem_id: u32,
}

impl Iterator for CompBatch<'_> {
    type Item = Frame;

    #[inline]
    fn next(&mut self) -> Option<Frame> {
        if self.taken == self.n {
            return None;
        }
        let a = self.ring.read(self.idx.wrapping_add(self.taken));
        self.taken += 1;
        Some(Frame::new(a, 0, self.umem_id))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.n - self.taken) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for CompBatch<'_> {}

impl Drop for CompBatch<'_> {
    fn drop(&mut self) {
        self.ring.cancel(self.n - self.taken);
        self.ring.release(self.taken);
    }
}

/// Heap-backed ring memory for tests and simulations: both sides of one ring in one process,
/// starting at any index (to test u32 wraparound).
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct HeapRing<T> {
    producer: Box<AtomicU32>,
    consumer: Box<AtomicU32>,
    flags: Box<AtomicU32>,
    descs: Box<[T]>,
}

#[cfg(test)]
impl<T: Copy + Default> HeapRing<T> {
    /// A ring of `size` (power of two) entries whose indices both start at `start`.
    pub fn new(size: u32, start: u32) -> Self {
        assert!(size.is_power_of_two(), "ring size must be a power of two");
        Self {
            producer: Box::new(AtomicU32::new(start)),
            consumer: Box::new(AtomicU32::new(start)),
            flags: Box::new(AtomicU32::new(0)),
            descs: vec![T::default(); size as usize].into_boxed_slice(),
        }
    }

    /// The raw view of this memory, valid while `self` lives and is not moved... the boxes do
    /// not move when `self` does, so the view stays valid until `self` is dropped.
    pub fn raw(&mut self) -> RawRing<T> {
        RawRing {
            producer: &*self.producer,
            consumer: &*self.consumer,
            flags: &*self.flags,
            descs: self.descs.as_mut_ptr(),
            size: self.descs.len() as u32,
        }
    }

    /// Sets the flags word (to simulate `XDP_RING_NEED_WAKEUP`).
    pub fn set_flags(&self, flags: u32) {
        self.flags.store(flags, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn pair(mem: &mut HeapRing<u64>) -> (ProdRing<u64>, ConsRing<u64>) {
        let raw = mem.raw();
        // SAFETY: mem outlives both rings in every test; one producer and one consumer.
        unsafe { (ProdRing::new(raw), ConsRing::new(raw)) }
    }

    #[test]
    fn the_tx_check_refuses_what_the_kernel_counts_invalid() {
        // The rows of the kernel's aligned invalid-descriptor table (4096-byte chunks, a UMEM
        // of 16 chunks), which the conformance scenario ALIGNED_INV_DESC sends to a real kernel.
        let c = TxCheck {
            chunk_size: 4096,
            umem_len: 16 * 4096,
            multi_buffer: false,
            unaligned: false,
            tx_metadata_len: 0,
        };
        let u = c.umem_len;
        let d = |addr: u64, len: u32, options: u32| XdpDesc { addr, len, options };
        for ok in [d(0, 64, 0), d(4096, 64, 0), d(u - 64, 64, 0), d(4096 + 2016, 64, 0), d(0, 4096, 0)] {
            assert_eq!(c.refusal(&ok), None, "{ok:?}");
        }
        for bad in [
            d(u64::MAX - 1, 64, 0),
            d(0, 9001, 0),
            d(u, 64, 0),
            d(u - 32, 64, 0),
            d(4096 + 4064, 64, 0),
            d(0, 4097, 0),
            d(0, 0, 0),
            d(0, 64, XDP_PKT_CONTD),
            d(0, 64, 2),
        ] {
            assert!(c.refusal(&bad).is_some(), "{bad:?}");
        }
        let mb = TxCheck { multi_buffer: true, ..c };
        assert_eq!(mb.refusal(&d(0, 64, XDP_PKT_CONTD)), None);
        assert!(mb.refusal(&d(0, 64, 0xffff)).is_some());
        let c2k = TxCheck {
            chunk_size: 2048,
            umem_len: 16 * 2048,
            multi_buffer: false,
            unaligned: false,
            tx_metadata_len: 0,
        };
        assert!(c2k.refusal(&d(2048 + 2016, 64, 0)).is_some(), "crosses a 2K chunk");
        let un = TxCheck { unaligned: true, ..c };
        assert_eq!(un.refusal(&d(4096 + 4064, 64, 0)), None, "unaligned: may cross a chunk");
        assert!(un.refusal(&d(u - 32, 64, 0)).is_some(), "never beyond the UMEM");
        assert!(un.refusal(&d(0, 4097, 0)).is_some(), "never longer than a chunk");
        assert!(un.refusal(&d((64 << 48) | (u - 64), 64, 0)).is_some(), "the offset bits count");
        assert_eq!(un.refusal(&d((32 << 48) | (u - 96), 64, 0)), None);
        // XDP_TX_METADATA: only with tx_metadata_len, and every packet that far into its chunk.
        let md = libc::XDP_TX_METADATA;
        assert!(c.refusal(&d(4096 + 256, 64, md)).is_some(), "no tx_metadata_len");
        let tm = TxCheck { tx_metadata_len: 24, ..c };
        assert_eq!(tm.refusal(&d(4096 + 24, 64, md)), None);
        assert_eq!(tm.refusal(&d(4096 + 256, 64, 0)), None, "metadata room, no request");
        assert!(tm.refusal(&d(4096 + 16, 64, md)).is_some(), "the metadata would start in the chunk before");
        assert!(tm.refusal(&d(4096, 64, 0)).is_some(), "the kernel checks the room on every descriptor");
        assert!(tm.refusal(&d(4096 + 24, 4096 - 23, md)).is_some(), "crosses its chunk");
        assert!(tm.refusal(&d(4096 + 24, 64, md | 4)).is_some(), "an unknown option");
        let tmu = TxCheck { unaligned: true, ..tm };
        assert!(tmu.refusal(&d(8, 64, md)).is_some(), "unaligned: the metadata must still be in the UMEM");
        assert_eq!(tmu.refusal(&d(4096 - 8, 64, md)), None, "unaligned: anywhere after 24");
        assert!(tmu.refusal(&d(8192, 4096 - 23, 0)).is_some(), "unaligned: length + metadata room over a chunk");
    }

    #[test]
    fn wraps_across_u32_max() {
        let mut mem = HeapRing::<u64>::new(8, u32::MAX - 2);
        let (mut p, mut c) = pair(&mut mem);
        let mut next = 0u64;
        let mut expect = 0u64;
        // Push 8 indices through eight times: from u32::MAX-2 to well past 0.
        for _round in 0..8 {
            let idx = p.reserve(5).expect("5 of 8 free");
            for i in 0..5 {
                p.write(idx.wrapping_add(i), next);
                next += 1;
            }
            p.submit(5);
            assert!(p.reserve(4).is_none(), "only 3 free: all-or-nothing reserve must fail");
            let (ci, n) = c.peek(16);
            assert_eq!(n, 5);
            for i in 0..n {
                assert_eq!(c.read(ci.wrapping_add(i)), expect);
                expect += 1;
            }
            c.release(n);
        }
        assert_eq!(p.nb_free(8), 8);
        assert_eq!(c.nb_avail(8), 0);
        // The shared indices really wrapped past u32::MAX.
        assert_eq!(mem.producer.load(Ordering::Relaxed), (u32::MAX - 2).wrapping_add(40));
        assert!(mem.producer.load(Ordering::Relaxed) < 100);
    }

    #[test]
    fn full_ring_refuses_then_accepts_after_release() {
        let mut mem = HeapRing::<u64>::new(4, u32::MAX);
        let (mut p, mut c) = pair(&mut mem);
        let idx = p.reserve(4).unwrap();
        (0..4).for_each(|i| p.write(idx.wrapping_add(i), i as u64));
        p.submit(4);
        assert_eq!(p.reserve(1), None);
        let (_, n) = c.peek(1);
        assert_eq!(n, 1);
        assert_eq!(p.reserve(1), None, "peeked but not released: slot still the consumer's");
        c.release(1);
        assert!(p.reserve(1).is_some());
    }

    #[test]
    fn pending_counts_submitted_unconsumed() {
        let mut mem = HeapRing::<u64>::new(8, u32::MAX - 1);
        let (mut p, mut c) = pair(&mut mem);
        assert_eq!(p.pending(), 0);
        let idx = p.reserve(5).unwrap();
        (0..5).for_each(|i| p.write(idx.wrapping_add(i), 0));
        assert_eq!(p.pending(), 0, "reserved is not submitted");
        p.submit(3);
        assert_eq!(p.pending(), 3);
        let (_, n) = c.peek(2);
        c.release(n);
        assert_eq!(p.pending(), 1);
        p.submit(2);
        assert_eq!(p.pending(), 3);
    }

    #[test]
    #[should_panic(expected = "not a reserved")]
    fn write_outside_reservation_panics() {
        let mut mem = HeapRing::<u64>::new(8, u32::MAX - 1);
        let (mut p, _c) = pair(&mut mem);
        let idx = p.reserve(2).unwrap();
        p.write(idx.wrapping_add(2), 1);
    }

    #[test]
    #[should_panic(expected = "not a peeked")]
    fn read_of_released_slot_panics() {
        let mut mem = HeapRing::<u64>::new(8, u32::MAX - 1);
        let (mut p, mut c) = pair(&mut mem);
        let idx = p.reserve(2).unwrap();
        p.write(idx, 1);
        p.write(idx.wrapping_add(1), 2);
        p.submit(2);
        let (ci, n) = c.peek(2);
        c.release(n);
        c.read(ci);
    }

    #[test]
    fn need_wakeup_flag_is_read_from_shared_flags() {
        let mut mem = HeapRing::<u64>::new(4, 0);
        let (p, c) = pair(&mut mem);
        assert!(!p.needs_wakeup() && !c.needs_wakeup());
        mem.set_flags(XDP_RING_NEED_WAKEUP);
        assert!(p.needs_wakeup() && c.needs_wakeup());
    }

    /// A leaked (mem::forget) FILL batch must not make a later submit publish its unwritten
    /// slots: those hold stale addresses of frames user space may own again.
    #[test]
    fn leaked_batches_publish_nothing_stale() {
        let mut mem = HeapRing::<u64>::new(8, u32::MAX - 1);
        let raw = mem.raw();
        // SAFETY: mem outlives both rings; one producer and one consumer; no mapping to own.
        let (mut fill, mut cons) = unsafe { (FillRing::new(raw, None, 7, 4096), ConsRing::<u64>::new(raw)) };
        // Stale entries in every slot, as after earlier laps.
        {
            let mut b = fill.reserve(8);
            for i in 0..8 {
                b.push(Frame::new(0xdead_0000 + i * 4096, 0, 7));
            }
        }
        let (_, n) = cons.peek(8);
        cons.release(n);
        let mut b = fill.reserve(4);
        b.push(Frame::new(4096, 0, 7));
        std::mem::forget(b); // 4 reserved, 1 written, nothing submitted
        let mut b = fill.reserve(2);
        b.push(Frame::new(8192, 0, 7));
        b.push(Frame::new(12288, 0, 7));
        drop(b);
        let (idx, n) = cons.peek(8);
        let got: Vec<u64> = (0..n).map(|i| cons.read(idx.wrapping_add(i))).collect();
        assert_eq!(got, vec![8192, 12288], "only the frames of the live batch are published");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Reserve(u32),
        Submit(u32),
        CancelProd(u32),
        Peek(u32),
        Release(u32),
        CancelCons(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u32..20).prop_map(Op::Reserve),
            (0u32..20).prop_map(Op::Submit),
            (0u32..20).prop_map(Op::CancelProd),
            (0u32..20).prop_map(Op::Peek),
            (0u32..20).prop_map(Op::Release),
            (0u32..20).prop_map(Op::CancelCons),
        ]
    }

    proptest! {
        /// reserve/submit/cancel on the producer side and peek/release/cancel on the consumer side,
        /// in any order, from start indices near u32::MAX: every value submitted comes out exactly
        /// once, in order, like a VecDeque; nothing is lost or duplicated.
        #[test]
        fn matches_vecdeque_model(start in prop_oneof![Just(u32::MAX - 2), Just(u32::MAX - 17), any::<u32>()],
                                  log2 in 1u32..5, ops in proptest::collection::vec(op(), 1..300)) {
            let size = 1u32 << log2;
            let mut mem = HeapRing::<u64>::new(size, start);
            let (mut p, mut c) = pair(&mut mem);
            let mut model: VecDeque<u64> = VecDeque::new();   // submitted, not yet peeked
            let mut reserved: Vec<u64> = Vec::new();          // written, not yet submitted
            let mut peeked: VecDeque<u64> = VecDeque::new();  // peeked, not yet released
            let mut next_value = 0u64;
            let mut released: Vec<u64> = Vec::new();
            let mut submitted_count = 0u64;
            for op in ops {
                match op {
                    Op::Reserve(n) => {
                        let in_flight = (model.len() + peeked.len() + reserved.len()) as u32;
                        let free = size - in_flight;
                        match p.reserve(n) {
                            Some(idx) => {
                                prop_assert!(n <= free);
                                for i in 0..n { p.write(idx.wrapping_add(i), next_value); reserved.push(next_value); next_value += 1; }
                            }
                            None => prop_assert!(n > free),
                        }
                    }
                    Op::Submit(n) => {
                        let n = n.min(reserved.len() as u32);
                        p.submit(n);
                        for v in reserved.drain(..n as usize) { model.push_back(v); }
                        submitted_count += n as u64;
                    }
                    Op::CancelProd(n) => {
                        let n = n.min(reserved.len() as u32);
                        p.cancel(n);
                        let keep = reserved.len() - n as usize;
                        reserved.truncate(keep);
                        next_value -= n as u64;
                    }
                    Op::Peek(n) => {
                        let (idx, got) = c.peek(n);
                        // Like libxdp, peek refreshes the producer index only when its cache is
                        // empty, so it may return fewer than are ready, but never none of them.
                        prop_assert!(got <= n.min(model.len() as u32));
                        prop_assert!(n == 0 || model.is_empty() || got > 0);
                        for i in 0..got {
                            let v = model.pop_front().unwrap();
                            prop_assert_eq!(c.read(idx.wrapping_add(i)), v);
                            peeked.push_back(v);
                        }
                    }
                    Op::Release(n) => {
                        let n = n.min(peeked.len() as u32);
                        c.release(n);
                        for _ in 0..n { released.push(peeked.pop_front().unwrap()); }
                    }
                    Op::CancelCons(n) => {
                        let n = n.min(peeked.len() as u32);
                        c.cancel(n);
                        for _ in 0..n { model.push_front(peeked.pop_back().unwrap()); }
                    }
                }
            }
            // Drain: everything submitted comes out exactly once, in order.
            let n = peeked.len() as u32;
            c.release(n);
            released.extend(peeked.drain(..));
            loop {
                let (idx, got) = c.peek(u32::MAX);
                if got == 0 { break; }
                for i in 0..got { let v = c.read(idx.wrapping_add(i)); released.push(v); }
                c.release(got);
            }
            prop_assert_eq!(released.len() as u64, submitted_count);
            prop_assert!(released.iter().enumerate().all(|(i, v)| *v == i as u64));
        }
    }
}
