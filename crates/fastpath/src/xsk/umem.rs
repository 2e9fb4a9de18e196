//! The UMEM: one registered region of equal frames, shared by any number of AF_XDP sockets, and
//! [`Frame`], the token that says user space owns one of its frames.
//!
//! This file and `ring.rs` are the unsafe core: the only places that turn a UMEM address into
//! memory. The ownership rules are in the table of the module docs (`xsk/mod.rs`).

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};

use serde::Serialize;

use super::XskError;
use crate::sys::{self, Mmap};

// `SOL_XDP` (include/linux/socket.h) and `XDP_UMEM_REG` (include/uapi/linux/if_xdp.h), from libc.
pub(crate) use libc::SOL_XDP;
use libc::XDP_UMEM_REG;

/// Bytes of `struct xsk_tx_metadata` fastpath reads and writes in front of a TX packet.
const TX_META_BYTES: u32 = super::TX_META_LEN;

/// `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` on a 64-bit kernel: the bytes at a frame's
/// end that the kernel keeps out of the UMEM headroom (net/xdp/xdp_umem.c).
const SKB_SHARED_INFO_BYTES: u32 = 320;

/// Shape of a UMEM.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct UmemConfig {
    /// Frame (chunk) size in bytes: 2048 or 4096 in aligned mode; any size from 2048 to the
    /// page size (4096) with `unaligned` (include/uapi/linux/if_xdp.h, net/xdp/xdp_umem.c).
    pub frame_size: u32,
    /// Number of frames; a power of two from 64 to 2^20.
    pub frame_count: u32,
    /// Bytes the kernel leaves free before each received packet, on top of its own
    /// XDP_PACKET_HEADROOM (256) in copy mode (XDP_UMEM_REG `headroom`).
    pub headroom: u32,
    /// FILL ring size in descriptors of each socket that has its own (power of two).
    pub fill_size: u32,
    /// COMPLETION ring size in descriptors of each socket that has its own (power of two).
    pub comp_size: u32,
    /// Back the UMEM with huge pages (MAP_HUGETLB; pages must be reserved in
    /// /proc/sys/vm/nr_hugepages).
    pub huge_pages: bool,
    /// Unaligned chunk mode (`XDP_UMEM_UNALIGNED_CHUNK_FLAG`, kernel >= 5.4): the kernel takes
    /// FILL and TX addresses anywhere in the UMEM, not only at multiples of the frame size,
    /// and a TX buffer may cross a frame (in zero-copy mode only where the pages are
    /// physically contiguous: huge pages). fastpath still lays its frames at multiples of the
    /// frame size; RX descriptors, which carry their offset in the upper 16 bits of `addr`
    /// (`XSK_UNALIGNED_BUF_OFFSET_SHIFT`), are decoded on the way in
    /// (Documentation/networking/af_xdp.rst "XDP_UMEM_REG setsockopt").
    pub unaligned: bool,
    /// Bytes reserved in front of every TX packet for `struct xsk_tx_metadata` (XDP_UMEM_REG
    /// `tx_metadata_len` with the `XDP_UMEM_TX_METADATA_LEN` flag; Linux >= 6.8, the flag
    /// needed since 6.11; Documentation/networking/xsk-tx-metadata.rst): 0 for none, or a
    /// multiple of 8 from 24 ([`super::TX_META_LEN`]) to 248. The kernel then takes a TX
    /// descriptor only if that many bytes of its frame lie in front of its packet (whether it
    /// asks for metadata or not): build TX packets with [`Umem::resize_at`] at an offset of at
    /// least this.
    pub tx_metadata_len: u32,
    /// `XDP_UMEM_TX_SW_CSUM` (Linux >= 6.8): in copy mode the kernel computes a requested TX
    /// checksum on the CPU when it builds the skb, instead of leaving it to the device
    /// (`CHECKSUM_PARTIAL`). "For development and testing" (xsk-tx-metadata.rst). Needs
    /// `tx_metadata_len`.
    pub tx_sw_csum: bool,
}

impl Default for UmemConfig {
    fn default() -> Self {
        Self {
            frame_size: 4096,
            frame_count: 8192,
            headroom: 0,
            fill_size: 4096,
            comp_size: 4096,
            huge_pages: false,
            unaligned: false,
            tx_metadata_len: 0,
            tx_sw_csum: false,
        }
    }
}

fn check_pow2(what: &'static str, value: u32, min: u32, max: u32) -> Result<(), XskError> {
    if !value.is_power_of_two() || value < min || value > max {
        return Err(XskError::BadSize { what, value, min, max });
    }
    Ok(())
}

impl UmemConfig {
    /// Checks every size before anything is created.
    ///
    /// # Errors
    ///
    /// [`XskError::BadSize`] unless the frame size is a power of two from 2048 to 4096 (with
    /// `unaligned`: [`XskError::BadUnalignedFrameSize`] unless it is from 2048 to 4096), the
    /// frame count one from 64 to 2^20, and the FILL and COMPLETION sizes ones from 64 to 65536;
    /// [`XskError::BadHeadroom`] if `headroom` exceeds `frame_size` less 256
    /// (XDP_PACKET_HEADROOM), 320 (the aligned `skb_shared_info` of a 64-bit kernel) and 128:
    /// what current kernels accept (net/xdp/xdp_umem.c, xdp_umem_reg(), Linux 6.18 here; older
    /// kernels took up to `frame_size` - 257), so a headroom that passes here passes there;
    /// [`XskError::BadTxMeta`] for a `tx_metadata_len` that is not 0 or a multiple of 8 from 24
    /// to 248 (the kernel takes multiples of 8 below 256; less than 24 cannot hold the struct),
    /// or `tx_sw_csum` without it.
    pub fn validate(&self) -> Result<(), XskError> {
        if self.unaligned {
            if !(2048..=4096).contains(&self.frame_size) {
                return Err(XskError::BadUnalignedFrameSize { value: self.frame_size });
            }
        } else {
            check_pow2("frame size", self.frame_size, 2048, 4096)?;
        }
        check_pow2("frame count", self.frame_count, 64, 1 << 20)?;
        check_pow2("fill ring size", self.fill_size, 64, 65536)?;
        check_pow2("completion ring size", self.comp_size, 64, 65536)?;
        // The kernel keeps XDP_PACKET_HEADROOM (256), the skb_shared_info a multi-buffer
        // frame needs at its end (SKB_DATA_ALIGN(sizeof(struct skb_shared_info)) = 320 on
        // 64-bit) and 128 bytes of packet after our headroom.
        let max = self.frame_size - crate::sys::uapi::XDP_PACKET_HEADROOM - SKB_SHARED_INFO_BYTES - 128;
        if self.headroom > max {
            return Err(XskError::BadHeadroom { headroom: self.headroom, frame_size: self.frame_size, max });
        }
        let tml = self.tx_metadata_len;
        if tml != 0 && (tml % 8 != 0 || !(super::TX_META_LEN..256).contains(&tml)) {
            return Err(XskError::BadTxMeta(format!(
                "tx metadata length {tml} is not accepted: use 0 (none) or a multiple of 8 from {} to 248",
                super::TX_META_LEN
            )));
        }
        if self.tx_sw_csum && tml == 0 {
            return Err(XskError::BadTxMeta(
                "XDP_UMEM_TX_SW_CSUM without TX metadata is not accepted: set tx_metadata_len too".into(),
            ));
        }
        Ok(())
    }
}

/// A UMEM frame that user space owns: received (from an RX or COMPLETION ring), or never given
/// to the kernel (from [`Umem::new`]). It cannot be copied or cloned, and it is given up by
/// value to a FILL or TX ring, so safe code cannot keep reading or writing a frame the kernel
/// owns. Its bytes are reached through [`Umem::data`] / [`Umem::data_mut`]. Dropping it takes
/// the frame out of circulation (memory-safe; the UMEM has one frame less).
///
/// `addr` is the UMEM offset of the buffer's first byte (frame start + offset), `len` its
/// length, and [`Frame::contd`] the `XDP_PKT_CONTD` option: the fields of `struct xdp_desc`
/// (include/uapi/linux/if_xdp.h). On a multi-buffer socket (XDP_USE_SG, kernel >= 6.6) a
/// packet is a run of frames, each but the last with `contd` set; otherwise a frame is a whole
/// packet and `contd` is always false. [`Frame::tx_meta`] says that a TX metadata request
/// was written in front of the packet ([`Umem::set_tx_meta`]), for `XDP_TX_METADATA`.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame {
    addr: u64,
    len: u32,
    umem_id: u32,
    contd: bool,
    tx_meta: bool,
}

impl Frame {
    #[inline]
    pub(crate) fn new(addr: u64, len: u32, umem_id: u32) -> Self {
        Self { addr, len, umem_id, contd: false, tx_meta: false }
    }

    #[inline]
    pub(crate) fn with_contd(addr: u64, len: u32, umem_id: u32, contd: bool) -> Self {
        Self { addr, len, umem_id, contd, tx_meta: false }
    }

    /// True if the packet continues in the next frame (`XDP_PKT_CONTD`, Documentation/networking/
    /// af_xdp.rst "Multi-Buffer Support"): this frame is not the packet's last.
    #[inline]
    pub fn contd(&self) -> bool {
        self.contd
    }

    /// Marks the frame as continued in the next one (a TX packet over several frames), or as a
    /// packet's last frame. Sending a continued frame needs a socket bound with XDP_USE_SG.
    #[inline]
    pub fn set_contd(&mut self, contd: bool) {
        self.contd = contd;
    }

    /// UMEM offset of the packet's first byte.
    #[inline]
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Packet length in bytes.
    #[inline]
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u32 {
        self.len
    }

    #[inline]
    pub(crate) fn umem_id(&self) -> u32 {
        self.umem_id
    }

    /// True if [`Umem::set_tx_meta`] wrote a TX metadata request in front of the packet since
    /// it was last moved or resized: [`super::TxBatch::push`] sends it with `XDP_TX_METADATA`.
    #[inline]
    pub fn tx_meta(&self) -> bool {
        self.tx_meta
    }

    /// Back to the start of its frame, empty: a free frame, whatever offset it was received at.
    /// Crate-private: `frame_size` must be its UMEM's (a wrong size would move the token into
    /// another frame); outside the crate, [`Umem::reset`] takes the size from the UMEM.
    #[inline]
    pub(crate) fn reset(&mut self, frame_size: u32) {
        self.addr -= offset_in(self.addr, frame_size);
        self.len = 0;
        self.contd = false;
        self.tx_meta = false;
    }
}

/// `addr`'s offset in its frame of `frame_size` bytes (frames at multiples of the size): a
/// mask for the power-of-two sizes of aligned mode, a division otherwise.
#[inline]
pub(crate) fn offset_in(addr: u64, frame_size: u32) -> u64 {
    if frame_size.is_power_of_two() {
        addr & (frame_size as u64 - 1)
    } else {
        offset_by_division(addr, frame_size)
    }
}

/// The division of [`offset_in`], out of line: the aligned path stays a mask, inlined.
#[cold]
#[inline(never)]
fn offset_by_division(addr: u64, frame_size: u32) -> u64 {
    addr % frame_size as u64
}

/// Frame index of a UMEM address (frames at multiples of the frame size): a shift for the
/// power-of-two sizes of aligned mode, a division for the other sizes unaligned mode allows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameIndexer {
    shift: u32,
    size: u64,
}

impl FrameIndexer {
    pub(crate) fn new(frame_size: u32) -> Self {
        let shift = if frame_size.is_power_of_two() { frame_size.trailing_zeros() } else { u32::MAX };
        Self { shift, size: frame_size as u64 }
    }

    /// The index of the frame holding `addr`.
    #[inline]
    pub(crate) fn index(self, addr: u64) -> usize {
        if self.shift != u32::MAX {
            (addr >> self.shift) as usize
        } else {
            index_by_division(addr, self.size)
        }
    }
}

/// The division of [`FrameIndexer::index`], out of line.
#[cold]
#[inline(never)]
fn index_by_division(addr: u64, size: u64) -> usize {
    (addr / size) as usize
}

/// An RX descriptor's `addr` as a plain UMEM offset: in unaligned chunk mode the kernel puts
/// the packet's offset from the FILL address in the upper 16 bits
/// (`XSK_UNALIGNED_BUF_OFFSET_SHIFT`, 48; include/uapi/linux/if_xdp.h, libxdp's
/// `xsk_umem__add_offset_to_addr`); in aligned mode those bits are 0 and this is `addr`.
#[inline]
pub(crate) fn rx_addr(addr: u64) -> u64 {
    (addr & ((1 << 48) - 1)) + (addr >> 48)
}

static NEXT_UMEM_ID: AtomicU32 = AtomicU32::new(1);

/// One bound socket that shares this UMEM: what a later socket needs to share with it.
#[derive(Debug)]
pub(crate) struct Bound {
    pub ifindex: u32,
    pub queue_id: u32,
    pub fd: Weak<OwnedFd>,
}

/// A UMEM: `frame_count` frames of `frame_size` bytes in one page-aligned, locked mapping,
/// registered with the kernel (`XDP_UMEM_REG`) on an AF_XDP socket that becomes the first
/// socket bound with it. Shared with `Arc` by every socket that uses it
/// ([`super::XskSocket::bind`]): on the same (interface, queue) they share its FILL and
/// COMPLETION rings; on other queues or interfaces each has its own (XDP_SHARED_UMEM,
/// Documentation/networking/af_xdp.rst "XDP_SHARED_UMEM bind flag").
///
/// Privileges: CAP_NET_RAW (the socket); the pinned pages count against RLIMIT_MEMLOCK unless
/// CAP_IPC_LOCK. Kernel >= 4.18.
///
/// # Examples
///
/// ```no_run
/// use fastpath::xsk::{Umem, UmemConfig};
///
/// let mut config = UmemConfig::default();
/// config.frame_count = 4096; // 4096 frames of 4096 bytes: 16 MiB
/// let (umem, mut frames) = Umem::new(&config)?;
/// assert_eq!(frames.len(), 4096); // every frame, as a token, once
/// // A frame's bytes are reached through its token only: a 60-byte packet in one.
/// let mut f = frames.pop().unwrap();
/// umem.resize(&mut f, 60).fill(0xab);
/// assert_eq!(umem.data(&f), &[0xab; 60][..]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Umem {
    map: Mmap,
    config: UmemConfig,
    id: u32,
    /// The socket the UMEM is registered on, until the first bind takes it.
    pub(crate) owner_fd: Mutex<Option<OwnedFd>>,
    /// Sockets bound with this UMEM (for XDP_SHARED_UMEM).
    pub(crate) bound: Mutex<Vec<Bound>>,
    /// The first socket's set-up or bind failed: the registration is gone with it.
    pub(crate) owner_failed: std::sync::atomic::AtomicBool,
    /// The first socket was bound with XDP_USE_SG (sharing sockets inherit it).
    multi_buffer: std::sync::atomic::AtomicBool,
    notes: Vec<String>,
}

// SAFETY: the mapping is plain memory; which thread may touch which frame is decided by the
// unique `Frame` tokens (a `&mut Frame` is needed to write), not by the `Umem`.
unsafe impl Sync for Umem {}

impl Umem {
    /// Maps and registers a UMEM; returns it with every one of its frames as a [`Frame`]
    /// (addr = frame start, len 0), the only time frames are created from nothing.
    ///
    /// # Errors
    ///
    /// A bad size ([`XskError::BadSize`], [`XskError::BadHeadroom`], [`UmemConfig::validate`]);
    /// [`XskError::Sys`] for a failed `socket(AF_XDP)` (EPERM without CAP_NET_RAW; EAFNOSUPPORT
    /// before Linux 4.18), `mmap` (ENOMEM, e.g. no free huge pages with `huge_pages`) or
    /// `setsockopt(XDP_UMEM_REG)` (ENOBUFS past RLIMIT_MEMLOCK without CAP_IPC_LOCK,
    /// net/xdp/xdp_umem.c).
    ///
    /// # Panics
    ///
    /// After 2^32 - 1 UMEMs were created in this process (ids are never reused).
    pub fn new(config: &UmemConfig) -> Result<(Arc<Umem>, Vec<Frame>), XskError> {
        config.validate()?;
        let fd = sys::socket_xdp()?;
        let len = config.frame_count as usize * config.frame_size as usize;
        let map = Mmap::anonymous(len, config.huge_pages)?;
        let mut notes = Vec::new();
        if let Err(e) = map.mlock() {
            notes.push(format!("{e} (the kernel pins UMEM pages itself at XDP_UMEM_REG)"));
        }
        let _ = map.dont_dump();
        let reg = libc::xdp_umem_reg {
            addr: map.as_ptr() as u64,
            len: len as u64,
            chunk_size: config.frame_size,
            headroom: config.headroom,
            flags: if config.unaligned { libc::XDP_UMEM_UNALIGNED_CHUNK_FLAG } else { 0 }
                | if config.tx_metadata_len > 0 { libc::XDP_UMEM_TX_METADATA_LEN } else { 0 }
                | if config.tx_sw_csum { libc::XDP_UMEM_TX_SW_CSUM } else { 0 },
            tx_metadata_len: config.tx_metadata_len,
        };
        if let Err(e) = sys::setsockopt(&fd, SOL_XDP, XDP_UMEM_REG, &reg, "SOL_XDP, XDP_UMEM_REG") {
            // Every size was checked: with TX metadata, EINVAL is a kernel without the flags.
            if config.tx_metadata_len > 0 && e.errno == libc::EINVAL {
                return Err(XskError::Unsupported(crate::features::Unsupported {
                    feature: "AF_XDP TX metadata (XDP_UMEM_TX_METADATA_LEN)",
                    min_kernel: "6.11",
                }));
            }
            return Err(e.into());
        }
        // Ids are never reused (a wrapped id would let one UMEM's tokens open another's memory):
        // after 2^32 - 1 UMEMs in one process, creating another panics.
        let id = NEXT_UMEM_ID
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |i| i.checked_add(1))
            .expect("UMEM ids exhausted: 2^32 - 1 UMEMs created in this process");
        let umem = Arc::new(Umem {
            map,
            config: config.clone(),
            id,
            owner_fd: Mutex::new(Some(fd)),
            bound: Mutex::new(Vec::new()),
            owner_failed: std::sync::atomic::AtomicBool::new(false),
            multi_buffer: std::sync::atomic::AtomicBool::new(false),
            notes,
        });
        let fs = config.frame_size as u64;
        let frames = (0..config.frame_count as u64).map(|i| Frame::new(i * fs, 0, id)).collect();
        Ok((umem, frames))
    }

    /// The configuration it was made with.
    pub fn config(&self) -> &UmemConfig {
        &self.config
    }

    /// Frame size in bytes.
    #[inline]
    pub fn frame_size(&self) -> u32 {
        self.config.frame_size
    }

    /// True if the UMEM's first socket was bound with XDP_USE_SG: every socket sharing it takes
    /// multi-buffer packets.
    pub fn multi_buffer(&self) -> bool {
        self.multi_buffer.load(Ordering::Relaxed)
    }

    pub(crate) fn set_multi_buffer(&self, on: bool) {
        self.multi_buffer.store(on, Ordering::Relaxed);
    }

    /// Notes from set-up (e.g. mlock refused).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    #[inline]
    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// `f` back to the start of its frame, empty: a free frame to fill or send again, whatever
    /// offset it was received at.
    ///
    /// # Panics
    ///
    /// If `f` belongs to another UMEM.
    #[inline]
    pub fn reset(&self, f: &mut Frame) {
        assert_eq!(f.umem_id, self.id, "frame of another UMEM");
        f.reset(self.config.frame_size);
    }

    /// The packet bytes of `f` (`addr .. addr + len`).
    ///
    /// # Panics
    ///
    /// If `f` belongs to another UMEM, or its bytes lie outside this one.
    #[inline]
    pub fn data<'a>(&'a self, f: &'a Frame) -> &'a [u8] {
        let (off, len) = self.range(f, f.len);
        // SAFETY: `range` checked the bytes lie inside our mapping, which lives as long as
        // `self`; the frame is user-owned (a `Frame` exists for it), so the kernel does not
        // write it, and no `&mut` to it exists while `f` is borrowed.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(off), len) }
    }

    /// The packet bytes of `f`, writable. The borrow holds `f` too: `f` cannot be given to a
    /// ring while the slice lives.
    ///
    /// # Panics
    ///
    /// If `f` belongs to another UMEM, or its bytes lie outside this one.
    #[inline]
    pub fn data_mut<'a>(&'a self, f: &'a mut Frame) -> &'a mut [u8] {
        let (off, len) = self.range(f, f.len);
        // SAFETY: as in `data`; `f` is borrowed mutably and `Frame` is unique per frame, so this
        // is the only reference to these bytes.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_ptr().add(off), len) }
    }

    /// Sets `f`'s length to `len` and returns its bytes, writable: for building a packet to
    /// send.
    ///
    /// # Panics
    ///
    /// If `len` does not fit between `f.addr()` and the end of its frame ([`Umem::room`]), or
    /// if `f` belongs to another UMEM.
    /// On a UMEM with `tx_metadata_len`, any request written in front of the packet is
    /// dropped (the token's mark and the request's flags): write it again after the length is
    /// final ([`Umem::set_tx_meta`]).
    #[inline]
    pub fn resize<'a>(&'a self, f: &'a mut Frame, len: u32) -> &'a mut [u8] {
        let room = self.config.frame_size as u64 - offset_in(f.addr, self.config.frame_size);
        assert!(len as u64 <= room, "packet length {len} does not fit: {room} bytes left in the frame");
        f.len = len;
        self.forget_tx_meta(f);
        self.data_mut(f)
    }

    /// Moves `f`'s packet to `offset` bytes from the start of its own frame (never outside it)
    /// with length `len`, and returns its bytes, writable: for building a TX packet with room in
    /// front of it, as a UMEM with `tx_metadata_len` needs ([`UmemConfig::tx_metadata_len`]).
    /// Drops any TX metadata request, as [`Umem::resize`].
    ///
    /// # Panics
    ///
    /// If `offset + len` exceeds the frame size, or `f` belongs to another UMEM.
    #[inline(always)]
    pub fn resize_at<'a>(&'a self, f: &'a mut Frame, offset: u32, len: u32) -> &'a mut [u8] {
        let fs = self.config.frame_size;
        assert!(
            offset as u64 + len as u64 <= fs as u64,
            "packet of {len} bytes at offset {offset} does not fit a {fs}-byte frame"
        );
        f.addr = f.addr - offset_in(f.addr, fs) + offset as u64;
        f.len = len;
        self.forget_tx_meta(f);
        self.data_mut(f)
    }

    /// The UMEM's `tx_metadata_len` (0: no TX metadata).
    #[inline]
    pub fn tx_metadata_len(&self) -> u32 {
        self.config.tx_metadata_len
    }

    /// The first [`super::TX_META_LEN`] of the `tx_metadata_len` bytes in front of `f`'s packet,
    /// if the UMEM has TX metadata and they lie in `f`'s own frame: (UMEM offset, length).
    #[inline]
    fn tx_meta_range(&self, f: &Frame) -> Option<(usize, usize)> {
        let tml = self.config.tx_metadata_len;
        if tml == 0 || offset_in(f.addr, self.config.frame_size) < tml as u64 {
            return None;
        }
        let start =
            Frame { addr: f.addr - tml as u64, len: TX_META_BYTES, umem_id: f.umem_id, contd: false, tx_meta: false };
        Some(self.range(&start, TX_META_BYTES))
    }

    /// Unmarks `f` and zeroes the request's flags in front of it (a later completion of this
    /// frame reads no request, so no stale timestamp).
    #[inline]
    fn forget_tx_meta(&self, f: &mut Frame) {
        f.tx_meta = false;
        if let Some((o, _)) = self.tx_meta_range(f) {
            // SAFETY: `tx_meta_range` checked the bytes lie inside our mapping and inside the
            // frame `f` owns (`f` is borrowed mutably, so nothing else reaches them); unaligned
            // write (frames of unaligned mode need not start at a multiple of 8).
            unsafe { self.map.as_ptr().add(o).cast::<u64>().write_unaligned(0) };
        }
    }

    /// Writes the TX metadata request `m` in front of `f`'s packet (`struct xsk_tx_metadata` at
    /// `f.addr() - tx_metadata_len`, inside `f`'s frame) and marks `f` ([`Frame::tx_meta`]) so
    /// that [`super::TxBatch::push`] sends it with `XDP_TX_METADATA`. Set the packet's final
    /// length first ([`Umem::resize_at`]): resizing drops the request. An empty request unmarks
    /// `f` and writes zero flags. Whether the driver can do what `m` asks:
    /// [`super::TxMeta::check_driver`]. Linux >= 6.8.
    ///
    /// # Errors
    ///
    /// [`XskError::BadTxMeta`] if the UMEM has no `tx_metadata_len`, `f`'s packet is less than
    /// that far into its frame, or a checksum field lies outside the packet
    /// ([`super::TxMeta::check_len`]).
    ///
    /// # Panics
    ///
    /// If `f` belongs to another UMEM.
    #[inline]
    pub fn set_tx_meta(&self, f: &mut Frame, m: &super::TxMeta) -> Result<(), XskError> {
        let Some((o, _)) = self.tx_meta_range(f) else {
            return Err(XskError::BadTxMeta(format!(
                "a TX metadata request for a packet at offset {} of its frame is not accepted: the UMEM's tx_metadata_len is {}; register it with tx_metadata_len and build the packet at least that far in (Umem::resize_at)",
                offset_in(f.addr, self.config.frame_size),
                self.config.tx_metadata_len
            )));
        };
        m.check_len(f.len)?;
        let bytes = m.encode();
        // SAFETY: as in `forget_tx_meta`: bytes inside `f`'s own frame, which `f` (borrowed
        // mutably) owns; unaligned write.
        unsafe { self.map.as_ptr().add(o).cast::<crate::sys::uapi::XskTxMetadata>().write_unaligned(bytes) };
        f.tx_meta = !m.is_empty();
        Ok(())
    }

    /// The TX timestamp the kernel wrote back in front of `f`, a frame the COMPLETION ring
    /// returned, in nanoseconds (`completion.tx_timestamp` of `struct xsk_tx_metadata`); `None`
    /// if the UMEM has no TX metadata, the frame was sent without a timestamp request
    /// ([`super::TxMeta::timestamp`], written by [`Umem::set_tx_meta`]), or nothing was written
    /// (the field still holds the request's marker). Copy mode writes a software timestamp,
    /// CLOCK_TAI when the kernel freed the skb (net/xdp/xsk.c, xsk_destruct_skb; Linux >= 6.8),
    /// on every driver; zero-copy drivers with xsk-features `tx-timestamp` write the device's.
    /// Only meaningful for frames built with [`Umem::resize`] / [`Umem::resize_at`] and sent by
    /// this process: the bytes in front of a forwarded frame are whatever it was received with.
    ///
    /// # Panics
    ///
    /// If `f` belongs to another UMEM.
    #[inline]
    pub fn tx_completion_timestamp(&self, f: &Frame) -> Option<u64> {
        let (o, n) = self.tx_meta_range(f)?;
        // SAFETY: as in `data`: inside our mapping, in the frame `f` owns (checked by
        // `tx_meta_range`), and no `&mut` to it exists while `f` is borrowed.
        let b = unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(o), n) };
        let m = crate::abi::read::<crate::sys::uapi::XskTxMetadata>(b)?;
        if m.flags & libc::XDP_TXMD_FLAGS_TIMESTAMP as u64 == 0 {
            return None;
        }
        // The request left its marker in the padding; a timestamp written back replaces all 8
        // bytes of the field (a real one with those 32 bits all ones is centuries away).
        (m.pad != super::tx_meta::TS_UNWRITTEN).then(|| m.tx_timestamp())
    }

    /// The `len` bytes right in front of `f`'s packet, in its frame: where an XDP program's
    /// metadata lands when it called `bpf_xdp_adjust_meta` (the kernel copies the metadata
    /// area with the packet in copy mode and leaves it in place in zero-copy mode,
    /// Documentation/networking/af_xdp.rst "XDP_USE_SG" and xdp-rx-metadata.rst; kernel >= 4.18
    /// for copy, 5.x drivers for zero-copy). Bytes no program wrote are whatever the frame held.
    ///
    /// # Panics
    ///
    /// If `len` is more than `f`'s offset in its frame (the bytes would belong to the frame
    /// before), or `f` belongs to another UMEM.
    #[inline]
    pub fn meta<'a>(&'a self, f: &'a Frame, len: u32) -> &'a [u8] {
        let off = offset_in(f.addr, self.config.frame_size);
        assert!(len as u64 <= off, "{len} bytes in front of a packet at offset {off} of its frame");
        let start = Frame { addr: f.addr - len as u64, len, umem_id: f.umem_id, contd: false, tx_meta: false };
        let (o, n) = self.range(&start, len);
        // SAFETY: as in `data`: inside our mapping, in the frame `f` owns (checked above).
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(o), n) }
    }

    /// Bytes a frame starting at `addr` can hold up to the end of its frame.
    #[inline]
    pub fn room(&self, f: &Frame) -> u32 {
        self.config.frame_size - offset_in(f.addr, self.config.frame_size) as u32
    }

    #[inline]
    fn range(&self, f: &Frame, len: u32) -> (usize, usize) {
        assert_eq!(f.umem_id, self.id, "frame of another UMEM");
        let (off, len) = (f.addr as usize, len as usize);
        assert!(off.checked_add(len).is_some_and(|e| e <= self.map.len()), "frame {off:#x}+{len} outside the UMEM");
        (off, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rx_addresses_of_unaligned_mode_are_decoded() {
        // The kernel's encoding: the FILL address in the low 48 bits, the packet's offset from
        // it in the upper 16 (xp_get_handle(), net/xdp/xsk_buff_pool.c).
        assert_eq!(rx_addr((256u64 << 48) | 0x1234_0000), 0x1234_0000 + 256);
        assert_eq!(rx_addr(0x1234_0100), 0x1234_0100, "aligned mode: the upper bits are 0");
        assert_eq!(rx_addr((0xffffu64 << 48) | ((1 << 48) - 1)), (1 << 48) - 1 + 0xffff);
    }

    #[test]
    fn frames_of_any_size_are_found_by_division() {
        for fs in [2048u32, 4096, 4001, 3000] {
            let ix = FrameIndexer::new(fs);
            for i in [0u64, 1, 7, 4095, 1 << 20] {
                for off in [0u64, 1, fs as u64 - 1] {
                    let a = i * fs as u64 + off;
                    assert_eq!(ix.index(a), i as usize, "frame size {fs}, addr {a}");
                    assert_eq!(offset_in(a, fs), off, "frame size {fs}, addr {a}");
                }
            }
        }
        let mut f = Frame::new(3 * 4001 + 300, 64, 1);
        f.reset(4001);
        assert_eq!((f.addr(), f.len()), (3 * 4001, 0));
        let mut g = Frame::new(4096 * 5 + 256, 64, 1);
        g.reset(4096);
        assert_eq!(g.addr(), 4096 * 5);
    }

    #[test]
    fn unaligned_mode_takes_any_frame_size_in_range() {
        let u = UmemConfig { frame_size: 4001, unaligned: true, ..UmemConfig::default() };
        assert!(u.validate().is_ok());
        assert!(UmemConfig { unaligned: false, ..u.clone() }.validate().is_err(), "aligned: powers of two only");
        assert!(UmemConfig { frame_size: 2047, ..u.clone() }.validate().is_err());
        assert!(UmemConfig { frame_size: 4097, ..u }.validate().is_err());
    }
}
