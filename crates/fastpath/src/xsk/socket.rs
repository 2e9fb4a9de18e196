use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::ring::{ConsRing, ProdRing, RawRing, XdpDesc};
use crate::netdev::NetDev;
use crate::sys::{self, Mmap, SysError};

/// `SOL_XDP` (include/linux/socket.h).
const SOL_XDP: i32 = 283;
const XDP_MMAP_OFFSETS: i32 = 1;
const XDP_RX_RING: i32 = 2;
const XDP_TX_RING: i32 = 3;
const XDP_UMEM_REG: i32 = 4;
const XDP_UMEM_FILL_RING: i32 = 5;
const XDP_UMEM_COMPLETION_RING: i32 = 6;
const XDP_STATISTICS: i32 = 7;
const XDP_OPTIONS: i32 = 8;
/// Per-socket copy-mode TX budget: descriptors one `sendto` turns into skbs (kernel >= 6.17;
/// the default budget is 32, TX_BATCH_SIZE in net/xdp/xsk.c).
const XDP_MAX_TX_SKB_BUDGET: i32 = 9;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const SO_BUSY_POLL: i32 = 46;
const SO_PREFER_BUSY_POLL: i32 = 69;
const SO_BUSY_POLL_BUDGET: i32 = 70;

/// Which AF_XDP data path to bind with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CopyMode {
    /// Try zero-copy, fall back to copy (what libxdp does by default).
    Auto,
    /// `XDP_COPY`: the kernel copies each frame into the UMEM. Works on every driver.
    Copy,
    /// `XDP_ZEROCOPY`: the driver DMAs straight into the UMEM. Needs driver support
    /// (not veth) and the XDP program attached in native mode.
    ZeroCopy,
}

/// Busy-poll settings (`SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL`, `SO_BUSY_POLL_BUDGET`, kernel >= 5.11,
/// Documentation/networking/napi.rst "Busy polling"). Each `recvfrom`/`sendto` kick then runs the
/// device's NAPI in the calling thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BusyPoll {
    /// SO_BUSY_POLL: how long one busy-poll may spin, in microseconds.
    pub timeout_us: u32,
    /// SO_BUSY_POLL_BUDGET: packets per busy-poll (the run loop's batch size).
    pub budget: u32,
}

/// Shape of one AF_XDP socket and its UMEM.
#[derive(Debug, Clone, Serialize)]
pub struct XskConfig {
    /// UMEM frame (chunk) size in bytes: 2048 or 4096.
    pub frame_size: u32,
    /// Number of frames in the UMEM.
    pub frame_count: u32,
    /// Headroom in bytes the kernel leaves before each received packet (XDP_UMEM_REG headroom).
    pub headroom: u32,
    /// RX and TX ring sizes in descriptors (power of two).
    pub ring_size: u32,
    /// FILL and COMPLETION ring sizes in descriptors (power of two).
    pub fill_size: u32,
    /// Bind with `XDP_USE_NEED_WAKEUP` (default on).
    pub need_wakeup: bool,
    /// Requested data path.
    pub copy_mode: CopyMode,
    /// Busy polling, off by default.
    pub busy_poll: Option<BusyPoll>,
    /// Back the UMEM with huge pages (MAP_HUGETLB).
    pub huge_pages: bool,
    /// XDP_MAX_TX_SKB_BUDGET for copy-mode TX; `None` keeps the kernel default (32).
    /// Ignored with a note on kernels without it.
    pub tx_skb_budget: Option<u32>,
}

impl Default for XskConfig {
    fn default() -> Self {
        Self {
            frame_size: 4096,
            frame_count: 8192,
            headroom: 0,
            ring_size: 2048,
            fill_size: 4096,
            need_wakeup: true,
            copy_mode: CopyMode::Auto,
            busy_poll: None,
            huge_pages: false,
            tx_skb_budget: None,
        }
    }
}

/// Errors of the AF_XDP area. Each is one line naming the value and what is accepted.
#[derive(Debug, thiserror::Error)]
pub enum XskError {
    /// No such interface in this network namespace.
    #[error("interface {iface:?} does not exist in this network namespace (see `ip link`)")]
    NoSuchInterface {
        /// The name asked for.
        iface: String,
    },
    /// Queue id out of range.
    #[error("queue id {queue} is out of range for {iface}: it has {count} rx queue(s), so 0..={max} are accepted", max = .count - 1)]
    QueueOutOfRange {
        /// Interface.
        iface: String,
        /// The queue id asked for.
        queue: u32,
        /// Number of rx queues.
        count: u32,
    },
    /// A size that must be a power of two in a range is not.
    #[error("{what} {value} is not accepted: use a power of two from {min} to {max}")]
    BadSize {
        /// Which setting, e.g. "frame size".
        what: &'static str,
        /// The value given.
        value: u32,
        /// Smallest accepted.
        min: u32,
        /// Largest accepted.
        max: u32,
    },
    /// Headroom leaves no room for a frame.
    #[error("headroom {headroom} is too large for frame size {frame_size}: keep it below {max}")]
    BadHeadroom {
        /// Requested headroom.
        headroom: u32,
        /// Frame size.
        frame_size: u32,
        /// Largest accepted.
        max: u32,
    },
    /// Zero-copy requested where the driver has none.
    #[error("{iface} (driver {driver}) has no AF_XDP zero-copy ({cause}); use --copy-mode copy, or auto to fall back to copy mode")]
    NoZeroCopy {
        /// Interface.
        iface: String,
        /// Driver name.
        driver: String,
        /// The failed bind.
        cause: SysError,
    },
    /// The queue stayed busy.
    #[error("{iface} queue {queue} is busy: another AF_XDP socket is bound to it, or the previous one was still being torn down after {waited_ms} ms ({cause})")]
    Busy {
        /// Interface.
        iface: String,
        /// Queue id.
        queue: u32,
        /// How long we retried.
        waited_ms: u64,
        /// The failed bind.
        cause: SysError,
    },
    /// Any other failed system call.
    #[error(transparent)]
    Sys(#[from] SysError),
}

/// The six XDP_STATISTICS counters, under the kernel's names (struct xdp_statistics, if_xdp.h).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct XskStats {
    /// Frames dropped for reasons other than an invalid descriptor (e.g. no room in the UMEM).
    pub rx_dropped: u64,
    /// RX descriptors dropped as invalid.
    pub rx_invalid_descs: u64,
    /// TX descriptors dropped as invalid.
    pub tx_invalid_descs: u64,
    /// Frames dropped because the RX ring was full (kernel >= 5.9).
    pub rx_ring_full: u64,
    /// Times the FILL ring was found empty (kernel >= 5.9).
    pub rx_fill_ring_empty_descs: u64,
    /// Times the TX ring was found empty on a kick (kernel >= 5.9).
    pub tx_ring_empty_descs: u64,
}

impl XskStats {
    /// `(kernel name, value)` for each counter, in the kernel's order.
    pub fn fields(&self) -> [(&'static str, u64); 6] {
        [
            ("rx_dropped", self.rx_dropped),
            ("rx_invalid_descs", self.rx_invalid_descs),
            ("tx_invalid_descs", self.tx_invalid_descs),
            ("rx_ring_full", self.rx_ring_full),
            ("rx_fill_ring_empty_descs", self.rx_fill_ring_empty_descs),
            ("tx_ring_empty_descs", self.tx_ring_empty_descs),
        ]
    }

    /// Field-wise `self - before`.
    pub fn delta(&self, before: &XskStats) -> XskStats {
        XskStats {
            rx_dropped: self.rx_dropped.wrapping_sub(before.rx_dropped),
            rx_invalid_descs: self.rx_invalid_descs.wrapping_sub(before.rx_invalid_descs),
            tx_invalid_descs: self.tx_invalid_descs.wrapping_sub(before.tx_invalid_descs),
            rx_ring_full: self.rx_ring_full.wrapping_sub(before.rx_ring_full),
            rx_fill_ring_empty_descs: self.rx_fill_ring_empty_descs.wrapping_sub(before.rx_fill_ring_empty_descs),
            tx_ring_empty_descs: self.tx_ring_empty_descs.wrapping_sub(before.tx_ring_empty_descs),
        }
    }
}

impl XskStats {
    /// Reads XDP_STATISTICS of an AF_XDP socket fd: any thread may do this (e.g. with a fd from
    /// [`XskSocket::try_clone_fd`]) while another runs the socket's rings.
    pub fn read(fd: BorrowedFd<'_>) -> Result<Self, SysError> {
        read_stats(fd)
    }
}

fn read_stats(fd: BorrowedFd<'_>) -> Result<XskStats, SysError> {
    let (s, _len): (libc::xdp_statistics, usize) =
        sys::getsockopt(&fd.as_raw_fd(), SOL_XDP, XDP_STATISTICS, "SOL_XDP, XDP_STATISTICS")?;
    Ok(XskStats {
        rx_dropped: s.rx_dropped,
        rx_invalid_descs: s.rx_invalid_descs,
        tx_invalid_descs: s.tx_invalid_descs,
        rx_ring_full: s.rx_ring_full,
        rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs,
        tx_ring_empty_descs: s.tx_ring_empty_descs,
    })
}

/// An AF_XDP socket bound to one (interface, queue id), with its own UMEM and four rings.
///
/// Fields are public rings so run loops can batch freely; frames are reached through
/// [`XskSocket::frame`] / [`XskSocket::frame_mut`] by UMEM address.
#[derive(Debug)]
pub struct XskSocket {
    /// FILL ring: free frames handed to the kernel for RX.
    pub fill: ProdRing<u64>,
    /// COMPLETION ring: frames the kernel has finished sending.
    pub comp: ConsRing<u64>,
    /// RX ring: received packets.
    pub rx: ConsRing<XdpDesc>,
    /// TX ring: packets to send.
    pub tx: ProdRing<XdpDesc>,
    // The maps below back the raw pointers inside the rings; they are dropped after them.
    _rx_map: Mmap,
    _tx_map: Mmap,
    _fill_map: Mmap,
    _comp_map: Mmap,
    umem: Mmap,
    fd: OwnedFd,
    config: XskConfig,
    ifindex: u32,
    queue_id: u32,
    zero_copy: bool,
    need_wakeup: bool,
    tx_skb_budget: Option<u32>,
    notes: Vec<String>,
}

fn check_pow2(what: &'static str, value: u32, min: u32, max: u32) -> Result<(), XskError> {
    if !value.is_power_of_two() || value < min || value > max {
        return Err(XskError::BadSize { what, value, min, max });
    }
    Ok(())
}

impl XskConfig {
    /// Checks every size before anything is created.
    pub fn validate(&self) -> Result<(), XskError> {
        check_pow2("frame size", self.frame_size, 2048, 4096)?;
        check_pow2("ring size", self.ring_size, 64, 32768)?;
        check_pow2("fill ring size", self.fill_size, 64, 65536)?;
        check_pow2("frame count", self.frame_count, 64, 1 << 20)?;
        // The kernel needs XDP_PACKET_HEADROOM (256) plus our headroom plus room for a packet.
        let max = self.frame_size - 256 - 128;
        if self.headroom > max {
            return Err(XskError::BadHeadroom { headroom: self.headroom, frame_size: self.frame_size, max });
        }
        Ok(())
    }
}

impl XskSocket {
    /// Creates a socket with a UMEM of `config.frame_count` frames, its rings, and binds it to
    /// `iface` queue `queue_id` in the current network namespace.
    ///
    /// `copy_mode: Auto` tries `XDP_ZEROCOPY`, then `XDP_COPY` on a fresh socket. `ZeroCopy` fails
    /// with [`XskError::NoZeroCopy`] on drivers without it. EBUSY (the previous socket on this
    /// queue still being torn down) is retried for up to 2 s. After bind the mode obtained is read
    /// back with XDP_OPTIONS ([`XskSocket::zero_copy`]); it is never assumed.
    ///
    /// The socket is not yet in any XSKMAP: insert [`XskSocket::as_raw_fd`] into the XDP
    /// program's map (see `bpf::XskRedirect`).
    ///
    /// Privileges: CAP_NET_RAW (socket), CAP_IPC_LOCK or RLIMIT_MEMLOCK for the UMEM pinning.
    pub fn bind(iface: &str, queue_id: u32, config: &XskConfig) -> Result<Self, XskError> {
        config.validate()?;
        let dev = NetDev::by_name(iface).map_err(|_| XskError::NoSuchInterface { iface: iface.to_string() })?;
        if let Some(count) = dev.rx_queue_count()? {
            if queue_id >= count {
                return Err(XskError::QueueOutOfRange { iface: iface.to_string(), queue: queue_id, count });
            }
        }
        let try_order: &[CopyMode] = match config.copy_mode {
            CopyMode::Auto => &[CopyMode::ZeroCopy, CopyMode::Copy],
            CopyMode::Copy => &[CopyMode::Copy],
            CopyMode::ZeroCopy => &[CopyMode::ZeroCopy],
        };
        let mut notes = Vec::new();
        let mut last_err = None;
        for &mode in try_order {
            match Self::bind_once(&dev, queue_id, config, mode) {
                Ok(mut s) => {
                    s.notes.splice(0..0, notes);
                    return Ok(s);
                }
                Err(XskError::Sys(e))
                    if mode == CopyMode::ZeroCopy && matches!(e.errno, libc::EOPNOTSUPP | libc::EPROTONOSUPPORT) =>
                {
                    let driver = dev.driver().unwrap_or_else(|_| "unknown".into());
                    notes.push(format!(
                        "zero-copy refused by driver {driver} ({}); falling back to copy mode",
                        sys::errno_text(e.errno)
                    ));
                    last_err = Some(XskError::NoZeroCopy { iface: iface.to_string(), driver, cause: e });
                }
                Err(e) => return Err(e),
            }
        }
        Err(last_err.expect("at least one mode tried"))
    }

    fn bind_once(dev: &NetDev, queue_id: u32, config: &XskConfig, mode: CopyMode) -> Result<Self, XskError> {
        let fd = sys::socket_xdp()?;
        let umem_len = config.frame_count as usize * config.frame_size as usize;
        let umem = Mmap::anonymous(umem_len, config.huge_pages)?;
        let mut notes = Vec::new();
        if let Err(e) = umem.mlock() {
            notes.push(format!("{e} (the kernel pins UMEM pages itself at XDP_UMEM_REG)"));
        }
        let _ = umem.dont_dump();
        let reg = libc::xdp_umem_reg {
            addr: umem.as_ptr() as u64,
            len: umem_len as u64,
            chunk_size: config.frame_size,
            headroom: config.headroom,
            flags: 0,
            tx_metadata_len: 0,
        };
        sys::setsockopt(&fd, SOL_XDP, XDP_UMEM_REG, &reg, "SOL_XDP, XDP_UMEM_REG")?;
        sys::setsockopt_int(&fd, SOL_XDP, XDP_UMEM_FILL_RING, config.fill_size as i32, "SOL_XDP, XDP_UMEM_FILL_RING")?;
        sys::setsockopt_int(
            &fd,
            SOL_XDP,
            XDP_UMEM_COMPLETION_RING,
            config.fill_size as i32,
            "SOL_XDP, XDP_UMEM_COMPLETION_RING",
        )?;
        sys::setsockopt_int(&fd, SOL_XDP, XDP_RX_RING, config.ring_size as i32, "SOL_XDP, XDP_RX_RING")?;
        sys::setsockopt_int(&fd, SOL_XDP, XDP_TX_RING, config.ring_size as i32, "SOL_XDP, XDP_TX_RING")?;
        let (off, off_len): (libc::xdp_mmap_offsets, usize) =
            sys::getsockopt(&fd, SOL_XDP, XDP_MMAP_OFFSETS, "SOL_XDP, XDP_MMAP_OFFSETS")?;
        if off_len < std::mem::size_of::<libc::xdp_mmap_offsets>() {
            // Kernels before 5.4 return the v1 layout without the flags word (no need_wakeup).
            return Err(XskError::Sys(SysError {
                call: format!("getsockopt(SOL_XDP, XDP_MMAP_OFFSETS) returned {off_len} bytes: kernel older than 5.4 (no need_wakeup); fastpath needs >= 5.4"),
                errno: libc::EOPNOTSUPP,
            }));
        }

        let desc_sz = std::mem::size_of::<XdpDesc>();
        let rx_map = Mmap::ring(
            &fd,
            off.rx.desc as usize + config.ring_size as usize * desc_sz,
            libc::XDP_PGOFF_RX_RING as u64,
            "XDP_PGOFF_RX_RING",
        )?;
        let tx_map = Mmap::ring(
            &fd,
            off.tx.desc as usize + config.ring_size as usize * desc_sz,
            libc::XDP_PGOFF_TX_RING as u32 as u64,
            "XDP_PGOFF_TX_RING",
        )?;
        let fill_map = Mmap::ring(
            &fd,
            off.fr.desc as usize + config.fill_size as usize * 8,
            libc::XDP_UMEM_PGOFF_FILL_RING,
            "XDP_UMEM_PGOFF_FILL_RING",
        )?;
        let comp_map = Mmap::ring(
            &fd,
            off.cr.desc as usize + config.fill_size as usize * 8,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            "XDP_UMEM_PGOFF_COMPLETION_RING",
        )?;

        fn raw<T>(map: &Mmap, o: &libc::xdp_ring_offset, size: u32) -> RawRing<T> {
            let base = map.as_ptr();
            // SAFETY (of the adds): the offsets come from XDP_MMAP_OFFSETS for this very mapping,
            // whose length covers desc + size entries.
            RawRing {
                producer: base.wrapping_add(o.producer as usize).cast(),
                consumer: base.wrapping_add(o.consumer as usize).cast(),
                flags: base.wrapping_add(o.flags as usize).cast(),
                descs: base.wrapping_add(o.desc as usize).cast(),
                size,
            }
        }
        // SAFETY: each RawRing points into a mapping stored in the returned socket and dropped
        // after the rings; each ring gets exactly one user-side wrapper.
        let (rx, tx, fill, comp) = unsafe {
            (
                ConsRing::new(raw::<XdpDesc>(&rx_map, &off.rx, config.ring_size)),
                ProdRing::new(raw::<XdpDesc>(&tx_map, &off.tx, config.ring_size)),
                ProdRing::new(raw::<u64>(&fill_map, &off.fr, config.fill_size)),
                ConsRing::new(raw::<u64>(&comp_map, &off.cr, config.fill_size)),
            )
        };

        if let Some(bp) = config.busy_poll {
            sys::setsockopt_int(&fd, libc::SOL_SOCKET, SO_PREFER_BUSY_POLL, 1, "SOL_SOCKET, SO_PREFER_BUSY_POLL")?;
            sys::setsockopt_int(&fd, libc::SOL_SOCKET, SO_BUSY_POLL, bp.timeout_us as i32, "SOL_SOCKET, SO_BUSY_POLL")?;
            sys::setsockopt_int(
                &fd,
                libc::SOL_SOCKET,
                SO_BUSY_POLL_BUDGET,
                bp.budget as i32,
                "SOL_SOCKET, SO_BUSY_POLL_BUDGET",
            )?;
        }
        let mut tx_skb_budget = None;
        if let Some(b) = config.tx_skb_budget {
            match sys::setsockopt_int(&fd, SOL_XDP, XDP_MAX_TX_SKB_BUDGET, b as i32, "SOL_XDP, XDP_MAX_TX_SKB_BUDGET") {
                Ok(()) => tx_skb_budget = Some(b),
                Err(e) => notes.push(format!(
                    "{e}: copy-mode TX keeps the kernel's budget of 32 (XDP_MAX_TX_SKB_BUDGET needs kernel >= 6.17)"
                )),
            }
        }

        let mut flags = match mode {
            CopyMode::ZeroCopy => XDP_ZEROCOPY,
            _ => XDP_COPY,
        };
        if config.need_wakeup {
            flags |= XDP_USE_NEED_WAKEUP;
        }
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: dev.ifindex,
            sxdp_queue_id: queue_id,
            sxdp_shared_umem_fd: 0,
        };
        let start = Instant::now();
        loop {
            match sys::bind_xdp(&fd, &addr) {
                Ok(()) => break,
                Err(e) if e.errno == libc::EBUSY && start.elapsed() < Duration::from_secs(2) => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) if e.errno == libc::EBUSY => {
                    return Err(XskError::Busy {
                        iface: dev.name.clone(),
                        queue: queue_id,
                        waited_ms: start.elapsed().as_millis() as u64,
                        cause: e,
                    })
                }
                Err(e) => return Err(e.into()),
            }
        }
        let (opts, _): (libc::xdp_options, usize) = sys::getsockopt(&fd, SOL_XDP, XDP_OPTIONS, "SOL_XDP, XDP_OPTIONS")?;
        Ok(Self {
            fill,
            comp,
            rx,
            tx,
            _rx_map: rx_map,
            _tx_map: tx_map,
            _fill_map: fill_map,
            _comp_map: comp_map,
            umem,
            fd,
            config: config.clone(),
            ifindex: dev.ifindex,
            queue_id,
            zero_copy: opts.flags & XDP_OPTIONS_ZEROCOPY != 0,
            need_wakeup: config.need_wakeup,
            tx_skb_budget,
            notes,
        })
    }

    /// True if the kernel reports zero-copy (XDP_OPTIONS_ZEROCOPY read back after bind).
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// "zero-copy" or "copy", as read back from XDP_OPTIONS.
    pub fn copy_mode_name(&self) -> &'static str {
        if self.zero_copy {
            "zero-copy"
        } else {
            "copy"
        }
    }

    /// Notes from set-up: fallbacks taken and optional features the kernel refused.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// XDP_MAX_TX_SKB_BUDGET in force, if the kernel took it.
    pub fn tx_skb_budget(&self) -> Option<u32> {
        self.tx_skb_budget
    }

    /// Interface index and queue id bound.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Queue id bound.
    pub fn queue_id(&self) -> u32 {
        self.queue_id
    }

    /// The configuration the socket was made with.
    pub fn config(&self) -> &XskConfig {
        &self.config
    }

    /// The socket's file descriptor (for the XSKMAP and for poll).
    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// A duplicate of the socket fd, e.g. to read statistics from another thread.
    pub fn try_clone_fd(&self) -> Result<OwnedFd, SysError> {
        self.fd.try_clone().map_err(|e| SysError { call: "dup(xsk)".into(), errno: e.raw_os_error().unwrap_or(0) })
    }

    /// The six XDP_STATISTICS counters.
    pub fn stats(&self) -> Result<XskStats, SysError> {
        read_stats(self.fd.as_fd())
    }

    /// Puts frames `0..n` of the UMEM on the FILL ring (at most the ring's size); returns how
    /// many. For a fresh socket, before receiving.
    pub fn fill_first_frames(&mut self, n: u32) -> u32 {
        let n = n.min(self.fill.size());
        let idx = self.fill.reserve(n).expect("an empty FILL ring has room");
        for i in 0..n {
            let a = self.frame_addr(i);
            self.fill.write(idx.wrapping_add(i), a);
        }
        self.fill.submit(n);
        n
    }

    /// UMEM address of frame `i` (its first byte; headroom not included).
    #[inline]
    pub fn frame_addr(&self, i: u32) -> u64 {
        i as u64 * self.config.frame_size as u64
    }

    /// Bytes `addr..addr+len` of the UMEM. Panics if the range is outside the UMEM.
    /// Only read frames you own (taken from RX or COMPLETION, not yet on FILL or TX).
    #[inline]
    pub fn frame(&self, addr: u64, len: u32) -> &[u8] {
        let (a, l) = (addr as usize, len as usize);
        assert!(a.checked_add(l).is_some_and(|e| e <= self.umem.len()), "frame {addr:#x}+{len} outside UMEM");
        // SAFETY: the range is inside the UMEM mapping, which lives as long as self.
        unsafe { std::slice::from_raw_parts(self.umem.as_ptr().add(a), l) }
    }

    /// Mutable bytes `addr..addr+len` of the UMEM. Panics if the range is outside the UMEM.
    #[inline]
    pub fn frame_mut(&mut self, addr: u64, len: u32) -> &mut [u8] {
        let (a, l) = (addr as usize, len as usize);
        assert!(a.checked_add(l).is_some_and(|e| e <= self.umem.len()), "frame {addr:#x}+{len} outside UMEM");
        // SAFETY: the range is inside the UMEM mapping, which lives as long as self and is
        // borrowed mutably here.
        unsafe { std::slice::from_raw_parts_mut(self.umem.as_ptr().add(a), l) }
    }

    /// Wakes the kernel for TX if needed: with need_wakeup only when the TX ring asks, without it
    /// on every call (`sendto`, Documentation/networking/af_xdp.rst "XDP_USE_NEED_WAKEUP").
    #[inline]
    pub fn kick_tx(&self) -> Result<(), SysError> {
        if !self.need_wakeup || self.tx.needs_wakeup() {
            sys::kick_tx(self.fd.as_raw_fd())?;
        }
        Ok(())
    }

    /// Wakes the kernel for RX when the FILL ring asks (need_wakeup), or drives NAPI when busy
    /// polling (`recvfrom`).
    #[inline]
    pub fn kick_rx(&self) {
        if self.config.busy_poll.is_some() || (self.need_wakeup && self.fill.needs_wakeup()) {
            sys::kick_rx(self.fd.as_raw_fd());
        }
    }

    /// `poll(POLLIN)` on the socket for up to `timeout_ms`; true if RX has data.
    pub fn poll_rx(&self, timeout_ms: i32) -> Result<bool, SysError> {
        Ok(sys::poll_one(self.fd.as_raw_fd(), libc::POLLIN, timeout_ms)? & libc::POLLIN != 0)
    }
}
