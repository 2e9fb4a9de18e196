use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::ring::{CompRing, FillRing, RawRing, RxRing, TxCheck, TxRing, XdpDesc};
use super::umem::{Bound, Umem, UmemConfig, SOL_XDP};
use crate::netdev::{Iface, NetDev};
use crate::sys::{self, Mmap, SysError};

// The SOL_XDP options and bind flags (include/uapi/linux/if_xdp.h) and the busy-poll socket
// options (include/uapi/asm-generic/socket.h), from libc; XDP_MAX_TX_SKB_BUDGET (kernel >= 6.17)
// is not in libc yet: crate::sys::uapi.
use crate::sys::uapi::XDP_MAX_TX_SKB_BUDGET;
use libc::{
    SO_BUSY_POLL, SO_BUSY_POLL_BUDGET, SO_PREFER_BUSY_POLL, XDP_COPY, XDP_MMAP_OFFSETS, XDP_OPTIONS,
    XDP_OPTIONS_ZEROCOPY, XDP_RX_RING, XDP_SHARED_UMEM, XDP_STATISTICS, XDP_TX_RING, XDP_UMEM_COMPLETION_RING,
    XDP_UMEM_FILL_RING, XDP_USE_NEED_WAKEUP, XDP_USE_SG, XDP_ZEROCOPY,
};

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
#[non_exhaustive]
pub struct BusyPoll {
    /// SO_BUSY_POLL: how long one busy-poll may spin, in microseconds.
    pub timeout_us: u32,
    /// SO_BUSY_POLL_BUDGET: packets per busy-poll (the run loop's batch size).
    pub budget: u32,
}

impl BusyPoll {
    /// Busy polling for up to `timeout_us` microseconds per poll, `budget` packets per poll.
    pub const fn new(timeout_us: u32, budget: u32) -> Self {
        Self { timeout_us, budget }
    }
}

/// Shape of one AF_XDP socket (its UMEM has its own [`UmemConfig`]).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct SocketConfig {
    /// RX and TX ring sizes in descriptors (power of two, 64..=32768).
    pub ring_size: u32,
    /// Bind with `XDP_USE_NEED_WAKEUP` (default on; kernel >= 5.4).
    pub need_wakeup: bool,
    /// Requested data path.
    pub copy_mode: CopyMode,
    /// Busy polling, off by default.
    pub busy_poll: Option<BusyPoll>,
    /// XDP_MAX_TX_SKB_BUDGET for copy-mode TX; `None` keeps the kernel default (32).
    /// Ignored with a note on kernels without it (< 6.17).
    pub tx_skb_budget: Option<u32>,
    /// Bind with `XDP_USE_SG` (multi-buffer, kernel >= 6.6): a packet larger than one frame
    /// arrives and leaves as several frames chained by `XDP_PKT_CONTD` ([`super::Frame::contd`]);
    /// without it the kernel drops such packets. Only the UMEM's first socket passes the flag; the
    /// sockets sharing its UMEM inherit it (Documentation/networking/af_xdp.rst "Multi-Buffer
    /// Support"). The XDP program in front must be frags-aware (`xdp.frags`).
    pub multi_buffer: bool,
}

impl Default for SocketConfig {
    fn default() -> Self {
        Self {
            ring_size: 2048,
            need_wakeup: true,
            copy_mode: CopyMode::Auto,
            busy_poll: None,
            tx_skb_budget: None,
            multi_buffer: false,
        }
    }
}

impl SocketConfig {
    /// Checks the ring size.
    ///
    /// # Errors
    ///
    /// [`XskError::BadSize`] unless `ring_size` is a power of two from 64 to 32768.
    pub fn validate(&self) -> Result<(), XskError> {
        if !self.ring_size.is_power_of_two() || !(64..=32768).contains(&self.ring_size) {
            return Err(XskError::BadSize { what: "ring size", value: self.ring_size, min: 64, max: 32768 });
        }
        Ok(())
    }
}

/// A UMEM shape and a socket shape: what one socket with its own UMEM needs.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct XskConfig {
    /// The UMEM.
    pub umem: UmemConfig,
    /// The socket.
    pub socket: SocketConfig,
}

impl XskConfig {
    /// # Errors
    ///
    /// [`XskError::BadSize`] naming the first size refused, the socket's ring size first
    /// ([`SocketConfig::validate`]), then the UMEM's ([`UmemConfig::validate`]);
    /// [`XskError::BadHeadroom`] for a headroom too large for the frame size.
    /// Checks every size before anything is created.
    pub fn validate(&self) -> Result<(), XskError> {
        // The socket first: the CLI derives FILL/COMPLETION sizes from the ring size, so a bad
        // ring size is named as itself.
        self.socket.validate()?;
        self.umem.validate()
    }
}

/// Errors of the AF_XDP area. Each is one line naming the value and what is accepted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum XskError {
    /// No such interface in this network namespace ([`crate::netdev::Iface::resolve`]).
    #[error(transparent)]
    NoSuchInterface(#[from] crate::netdev::NoSuchInterface),
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
    /// A frame size outside what unaligned chunk mode takes.
    #[error(
        "frame size {value} is not accepted in unaligned chunk mode: use a size from 2048 to 4096 (the page size)"
    )]
    BadUnalignedFrameSize {
        /// The value given.
        value: u32,
    },
    /// Headroom leaves no room for a frame.
    #[error("headroom {headroom} is too large for frame size {frame_size}: use at most {max}")]
    BadHeadroom {
        /// Requested headroom.
        headroom: u32,
        /// Frame size.
        frame_size: u32,
        /// Largest accepted.
        max: u32,
    },
    /// Zero-copy requested where the driver has none.
    #[error("{iface} (driver {driver}) has no AF_XDP zero-copy ({cause})")]
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
    /// A TX metadata setting or request that cannot be used ([`super::UmemConfig::validate`],
    /// [`super::TxMeta::check_len`], [`super::Umem::set_tx_meta`]): one line naming the value and
    /// what is accepted.
    #[error("{0}")]
    BadTxMeta(String),
    /// The interface's driver lacks an AF_XDP TX metadata feature a request needs
    /// ([`super::TxMeta::check_driver`]; netdev family `xsk-features`).
    #[error("{iface} (driver {driver}) has no {what}: its AF_XDP xsk-features ({has}) lack {feature} (needs Linux >= {min_kernel} and a driver that implements it)")]
    DriverLacks {
        /// Interface.
        iface: String,
        /// Driver name.
        driver: String,
        /// What the feature gives, in words.
        what: &'static str,
        /// The xsk-features name.
        feature: &'static str,
        /// The first kernel with it.
        min_kernel: &'static str,
        /// The driver's xsk-features, or "none".
        has: String,
    },
    /// A kernel feature this needs is absent ([`crate::features`]).
    #[error(transparent)]
    Unsupported(#[from] crate::features::Unsupported),
    /// Zero-copy asked with unaligned frames that cross page boundaries.
    #[error("zero-copy is not accepted with unaligned frames of {frame_size} bytes: they cross page boundaries, which zero-copy drops; use a frame size of 2048 or 4096, or copy mode")]
    UnalignedZeroCopy {
        /// The frame size.
        frame_size: u32,
    },
    /// A socket cannot share this UMEM any more.
    #[error("the UMEM cannot be shared: {why}")]
    UmemUnusable {
        /// Why, in words.
        why: String,
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
    ///
    /// # Errors
    ///
    /// [`SysError`] from `getsockopt(SOL_XDP, XDP_STATISTICS)`: ENOTSOCK / ENOPROTOOPT if `fd` is
    /// not an AF_XDP socket.
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

/// How a socket shares its UMEM (XDP_SHARED_UMEM, Documentation/networking/af_xdp.rst).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sharing {
    /// The first socket of the UMEM: the UMEM is registered on it; it has its own FILL and
    /// COMPLETION rings.
    Owner,
    /// Another socket on the same (interface, queue) as a bound one: it shares that socket's
    /// FILL and COMPLETION rings and has none of its own (kernel >= 4.18).
    SameQueue,
    /// A socket on another queue or interface: its own FILL and COMPLETION rings over the same
    /// frames (kernel >= 5.10).
    OtherQueue,
}

/// An AF_XDP socket bound to one (interface, queue id), over a shared [`Umem`].
///
/// Its rings are public: each is a safe type that takes and gives [`super::Frame`] tokens
/// through batch handles, and owns its mapping, so a ring may be moved to another thread.
/// `fill` and `comp` are `None` for a [`Sharing::SameQueue`] socket (it uses the rings of the
/// socket it shares with).
///
/// # Examples
///
/// Two sockets on queues 0 and 1 of `eth0`, each with its own UMEM, in copy mode, and their
/// kernel drop counters (root; what fills their RX rings is an XDP program such as
/// [`crate::bpf::XskRedirect`]):
///
/// ```no_run
/// use fastpath::netdev::Iface;
/// use fastpath::xsk::{CopyMode, SocketConfig, Umem, UmemConfig, XskSocket};
///
/// let iface = Iface::resolve("eth0")?;
/// let mut config = SocketConfig::default();
/// config.copy_mode = CopyMode::Copy;
/// config.ring_size = 4096; // RX and TX descriptors
/// for queue in [0, 1] {
///     let (umem, _frames) = Umem::new(&UmemConfig::default())?;
///     let sock = XskSocket::bind(&umem, &iface, queue, &config)?;
///     let stats = sock.stats()?; // XDP_STATISTICS
///     println!("{iface} queue {}: {}, rx_dropped {}", sock.queue_id(), sock.copy_mode_name(), stats.rx_dropped);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct XskSocket {
    /// RX ring: received packets.
    pub rx: RxRing,
    /// TX ring: packets to send.
    pub tx: TxRing,
    /// FILL ring: free frames handed to the kernel for RX (None when sharing another socket's).
    pub fill: Option<FillRing>,
    /// COMPLETION ring: frames the kernel has finished sending (None when sharing another's).
    pub comp: Option<CompRing>,
    umem: Arc<Umem>,
    fd: Arc<OwnedFd>,
    config: SocketConfig,
    ifindex: u32,
    queue_id: u32,
    sharing: Sharing,
    zero_copy: bool,
    tx_skb_budget: Option<u32>,
    notes: Vec<String>,
}

/// Queue ids checked against an interface's rx queues: made only by [`RxQueues::check`], so a
/// function taking `RxQueues` (`io::afxdp::open_queues`) knows the check was made, once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxQueues {
    ifindex: u32,
    ids: Vec<u32>,
}

impl RxQueues {
    /// Checks that every id of `ids` is an rx queue of `iface` (ETHTOOL_GCHANNELS; a driver
    /// that does not report channels is left to the kernel's bind). The one place this check
    /// is made. Its callers: [`XskSocket::bind`] for its one socket, and a caller opening
    /// several queues (or naming a queue it binds nothing on) before it attaches anything,
    /// which hands the result to `io::afxdp::open_queues` (whose binds then skip the check).
    /// Needs no privileges.
    ///
    /// # Errors
    ///
    /// [`XskError::QueueOutOfRange`] for the first queue out of range; [`XskError::Sys`] if the
    /// channel count cannot be read.
    pub fn check(iface: &Iface, ids: Vec<u32>) -> Result<Self, XskError> {
        if let Some(count) = iface.dev().rx_queue_count()? {
            if let Some(&queue) = ids.iter().find(|&&q| q >= count) {
                return Err(XskError::QueueOutOfRange { iface: iface.name().to_string(), queue, count });
            }
        }
        Ok(Self { ifindex: iface.ifindex(), ids })
    }

    /// The queue ids, in the order given.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// The ifindex they were checked on.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }
}

/// Which socket to share the UMEM with, and how.
fn pick_share(umem: &Umem, ifindex: u32, queue_id: u32) -> Result<(Sharing, Option<Arc<OwnedFd>>), XskError> {
    let mut bound = umem.bound.lock().expect("UMEM registry lock");
    bound.retain(|b| b.fd.strong_count() > 0);
    if let Some(b) = bound.iter().find(|b| b.ifindex == ifindex && b.queue_id == queue_id) {
        if let Some(fd) = b.fd.upgrade() {
            return Ok((Sharing::SameQueue, Some(fd)));
        }
    }
    match bound.iter().find_map(|b| b.fd.upgrade()) {
        Some(fd) => Ok((Sharing::OtherQueue, Some(fd))),
        None => {
            Err(XskError::UmemUnusable { why: "every socket bound with it has been closed (create a new Umem)".into() })
        }
    }
}

impl XskSocket {
    /// Creates a socket over `umem` and binds it to `iface` queue `queue_id` in the current
    /// network namespace. The first socket of a UMEM is its [`Sharing::Owner`]; a later one on
    /// the same (interface, queue) as a bound socket is [`Sharing::SameQueue`]; any other is
    /// [`Sharing::OtherQueue`] (kernel >= 5.10, else [`XskError::Unsupported`]).
    ///
    /// `copy_mode: Auto` binds with neither `XDP_ZEROCOPY` nor `XDP_COPY`: the kernel tries
    /// zero-copy and falls back to copy on any driver refusal (with a note). `ZeroCopy` fails
    /// with [`XskError::NoZeroCopy`] on drivers without it. A sharing socket takes the data path
    /// of the UMEM's first socket. If the first bind of a UMEM fails, the UMEM cannot be used
    /// again ([`XskError::UmemUnusable`]): its registration lives on that socket. EBUSY (the previous socket on this
    /// queue still being torn down) is retried for up to 2 s. After bind the mode obtained is
    /// read back with XDP_OPTIONS ([`XskSocket::zero_copy`]); it is never assumed.
    ///
    /// The socket is not yet in any XSKMAP: insert [`XskSocket::as_raw_fd`] into the XDP
    /// program's map (see `bpf::XskRedirect`).
    ///
    /// Privileges: CAP_NET_RAW. Kernel >= 5.4 (need_wakeup ring layout).
    ///
    /// # Errors
    ///
    /// [`XskError::QueueOutOfRange`] (checked here, [`RxQueues::check`]), a size refused by
    /// [`SocketConfig::validate`], [`XskError::Unsupported`] for a feature the kernel lacks,
    /// [`XskError::NoZeroCopy`], [`XskError::UmemUnusable`], or the failed call
    /// ([`XskError::Sys`], EPERM without CAP_NET_RAW).
    pub fn bind(umem: &Arc<Umem>, iface: &Iface, queue_id: u32, config: &SocketConfig) -> Result<Self, XskError> {
        // The same order of refusals as always: the configuration and the kernel's features
        // first, then the queue id (bind_checked repeats the first two; both are cheap).
        Self::check_config(config)?;
        RxQueues::check(iface, vec![queue_id])?;
        Self::bind_checked(umem, iface, queue_id, config)
    }

    /// `config` is valid and every feature it asks for is in this kernel.
    fn check_config(config: &SocketConfig) -> Result<(), XskError> {
        config.validate()?;
        // Asked-for features the kernel lacks are refused up front, by name
        // (`Unsupported`), not as a failed setsockopt later.
        use crate::features::{check, Feature};
        if config.need_wakeup {
            check(Feature::NeedWakeup)?;
        }
        if config.busy_poll.is_some() {
            check(Feature::BusyPoll)?;
        }
        if config.multi_buffer {
            check(Feature::MultiBuffer)?;
        }
        Ok(())
    }

    /// [`XskSocket::bind`] with the queue id already checked ([`RxQueues::check`]).
    pub(crate) fn bind_checked(
        umem: &Arc<Umem>,
        iface: &Iface,
        queue_id: u32,
        config: &SocketConfig,
    ) -> Result<Self, XskError> {
        Self::check_config(config)?;
        let dev = iface.dev();
        let owner = umem.owner_fd.lock().expect("UMEM owner lock").take();
        let (sharing, fd, share_with) = match owner {
            Some(fd) => (Sharing::Owner, fd, None),
            None => {
                let (sharing, with) = pick_share(umem, dev.ifindex, queue_id)?;
                let f = match sharing {
                    Sharing::OtherQueue => crate::features::Feature::SharedUmemOtherQueue,
                    _ => crate::features::Feature::SharedUmem,
                };
                crate::features::check(f)?;
                if config.multi_buffer != umem.multi_buffer() {
                    return Err(XskError::UmemUnusable {
                        why: format!(
                            "its first socket was bound {} XDP_USE_SG and sockets sharing a UMEM inherit that (multi_buffer must be {})",
                            if umem.multi_buffer() { "with" } else { "without" },
                            umem.multi_buffer()
                        ),
                    });
                }
                (sharing, sys::socket_xdp()?, with)
            }
        };
        let owner = sharing == Sharing::Owner;
        let mut s = match Self::setup(umem, fd, dev, queue_id, config, sharing) {
            Ok(s) => s,
            Err(e) => {
                if owner {
                    umem.owner_failed.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                return Err(e);
            }
        };
        let shared_fd = share_with.as_ref().map(|f| f.as_raw_fd());
        // Unaligned frames whose size does not divide the page (2048 and 4096 are the only
        // ones that do) cross page boundaries; in zero-copy mode the kernel drops a FILL or TX
        // address whose chunk crosses pages that are not physically contiguous
        // (xp_check_unaligned / xp_desc_crosses_non_contig_pg, net/xdp/xsk_buff_pool.c), so such
        // frames would vanish: copy mode only.
        let mut mode = config.copy_mode;
        let uc = umem.config();
        if uc.unaligned && !matches!(uc.frame_size, 2048 | 4096) && shared_fd.is_none() {
            match mode {
                CopyMode::ZeroCopy => return Err(XskError::UnalignedZeroCopy { frame_size: uc.frame_size }),
                CopyMode::Auto => {
                    mode = CopyMode::Copy;
                    s.notes.push(format!(
                        "copy mode: unaligned frames of {} bytes cross page boundaries, which zero-copy would drop",
                        uc.frame_size
                    ));
                }
                CopyMode::Copy => {}
            }
        }
        match s.bind_mode(dev, mode, shared_fd) {
            Ok(()) => {
                if mode == CopyMode::Auto && !s.zero_copy && shared_fd.is_none() {
                    // Auto binds with neither XDP_COPY nor XDP_ZEROCOPY: the kernel tries
                    // zero-copy and falls back to copy on any driver refusal (xp_assign_dev in
                    // net/xdp/xsk_buff_pool.c); XDP_OPTIONS says which it chose.
                    let driver = dev.driver().unwrap_or_else(|_| "unknown".into());
                    s.notes.push(format!(
                        "zero-copy refused by driver {driver}: the kernel bound in copy mode (read back from XDP_OPTIONS)"
                    ));
                }
                umem.bound.lock().expect("UMEM registry lock").push(Bound {
                    ifindex: dev.ifindex,
                    queue_id,
                    fd: Arc::downgrade(&s.fd),
                });
                Ok(s)
            }
            Err(e) => {
                if owner {
                    // The UMEM was registered on this socket, whose rings now exist: the fd
                    // cannot be bound again, and the UMEM with it.
                    umem.owner_failed.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                match e {
                    XskError::Sys(e) if config.copy_mode == CopyMode::ZeroCopy && e.errno != libc::EBUSY => {
                        let driver = dev.driver().unwrap_or_else(|_| "unknown".into());
                        Err(XskError::NoZeroCopy { iface: iface.name().to_string(), driver, cause: e })
                    }
                    e => Err(e),
                }
            }
        }
    }

    /// Creates the rings on `fd` and maps them.
    fn setup(
        umem: &Arc<Umem>,
        fd: OwnedFd,
        dev: &NetDev,
        queue_id: u32,
        config: &SocketConfig,
        sharing: Sharing,
    ) -> Result<Self, XskError> {
        let uc = umem.config();
        let own_fq = sharing != Sharing::SameQueue;
        if own_fq {
            sys::setsockopt_int(&fd, SOL_XDP, XDP_UMEM_FILL_RING, uc.fill_size as i32, "SOL_XDP, XDP_UMEM_FILL_RING")?;
            sys::setsockopt_int(
                &fd,
                SOL_XDP,
                XDP_UMEM_COMPLETION_RING,
                uc.comp_size as i32,
                "SOL_XDP, XDP_UMEM_COMPLETION_RING",
            )?;
        }
        sys::setsockopt_int(&fd, SOL_XDP, XDP_RX_RING, config.ring_size as i32, "SOL_XDP, XDP_RX_RING")?;
        sys::setsockopt_int(&fd, SOL_XDP, XDP_TX_RING, config.ring_size as i32, "SOL_XDP, XDP_TX_RING")?;
        let (off, off_len): (libc::xdp_mmap_offsets, usize) =
            sys::getsockopt(&fd, SOL_XDP, XDP_MMAP_OFFSETS, "SOL_XDP, XDP_MMAP_OFFSETS")?;
        if off_len < std::mem::size_of::<libc::xdp_mmap_offsets>() {
            // Kernels before 5.4 return the v1 layout without the flags word (no need_wakeup).
            let f = crate::features::Feature::NeedWakeup;
            return Err(crate::features::Unsupported { feature: f.name(), min_kernel: f.min_kernel() }.into());
        }
        let desc_sz = std::mem::size_of::<XdpDesc>();
        let rs = config.ring_size;
        let rx_map = Mmap::ring(
            &fd,
            off.rx.desc as usize + rs as usize * desc_sz,
            libc::XDP_PGOFF_RX_RING as u64,
            "XDP_PGOFF_RX_RING",
        )?;
        let tx_map = Mmap::ring(
            &fd,
            off.tx.desc as usize + rs as usize * desc_sz,
            libc::XDP_PGOFF_TX_RING as u32 as u64,
            "XDP_PGOFF_TX_RING",
        )?;
        fn raw<T>(map: &Mmap, o: &libc::xdp_ring_offset, size: u32) -> RawRing<T> {
            let base = map.as_ptr();
            // The offsets come from XDP_MMAP_OFFSETS for this very mapping, whose length covers
            // desc + size entries.
            RawRing {
                producer: base.wrapping_add(o.producer as usize).cast(),
                consumer: base.wrapping_add(o.consumer as usize).cast(),
                flags: base.wrapping_add(o.flags as usize).cast(),
                descs: base.wrapping_add(o.desc as usize).cast(),
                size,
            }
        }
        let id = umem.id();
        let (mut fill, mut comp) = (None, None);
        if own_fq {
            let fill_map = Mmap::ring(
                &fd,
                off.fr.desc as usize + uc.fill_size as usize * 8,
                libc::XDP_UMEM_PGOFF_FILL_RING,
                "XDP_UMEM_PGOFF_FILL_RING",
            )?;
            let comp_map = Mmap::ring(
                &fd,
                off.cr.desc as usize + uc.comp_size as usize * 8,
                libc::XDP_UMEM_PGOFF_COMPLETION_RING,
                "XDP_UMEM_PGOFF_COMPLETION_RING",
            )?;
            let (fr, cr) = (raw::<u64>(&fill_map, &off.fr, uc.fill_size), raw::<u64>(&comp_map, &off.cr, uc.comp_size));
            // SAFETY: each RawRing points into the mapping moved into the same ring object, and
            // each ring gets exactly one user-side wrapper; the rings are of this UMEM.
            unsafe {
                fill = Some(FillRing::new(fr, Some(fill_map), id, uc.frame_size));
                comp = Some(CompRing::new(cr, Some(comp_map), id));
            }
        }
        let (rxr, txr) = (raw::<XdpDesc>(&rx_map, &off.rx, rs), raw::<XdpDesc>(&tx_map, &off.tx, rs));
        let check = TxCheck {
            chunk_size: uc.frame_size,
            umem_len: uc.frame_size as u64 * uc.frame_count as u64,
            multi_buffer: false,
            unaligned: uc.unaligned,
            tx_metadata_len: uc.tx_metadata_len,
        };
        // SAFETY: as above.
        let (mut rx, tx) = unsafe { (RxRing::new(rxr, Some(rx_map), id), TxRing::new(txr, Some(tx_map), id, check)) };
        if uc.unaligned {
            rx.set_unaligned(uc.frame_size);
        }
        let mut notes = Vec::new();
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
        notes.extend(umem.notes().iter().cloned());
        Ok(Self {
            rx,
            tx,
            fill,
            comp,
            umem: umem.clone(),
            fd: Arc::new(fd),
            config: config.clone(),
            ifindex: dev.ifindex,
            queue_id,
            sharing,
            zero_copy: false,
            tx_skb_budget,
            notes,
        })
    }

    /// One bind attempt in `mode`; on success reads the mode obtained from XDP_OPTIONS.
    fn bind_mode(&mut self, dev: &NetDev, mode: CopyMode, shared_fd: Option<RawFd>) -> Result<(), XskError> {
        let mut flags = match mode {
            CopyMode::ZeroCopy => XDP_ZEROCOPY,
            CopyMode::Copy => XDP_COPY,
            CopyMode::Auto => 0,
        };
        if self.config.need_wakeup {
            flags |= XDP_USE_NEED_WAKEUP;
        }
        if self.config.multi_buffer {
            flags |= XDP_USE_SG;
        }
        if shared_fd.is_some() {
            // A sharing socket takes the data path and need_wakeup of the UMEM's first socket;
            // any other flag is EINVAL (xsk_bind in net/xdp/xsk.c).
            flags = XDP_SHARED_UMEM;
        }
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: dev.ifindex,
            sxdp_queue_id: self.queue_id,
            sxdp_shared_umem_fd: shared_fd.unwrap_or(0) as u32,
        };
        let start = Instant::now();
        loop {
            match sys::bind_xdp(&*self.fd, &addr) {
                Ok(()) => break,
                Err(e) if e.errno == libc::EBUSY && start.elapsed() < Duration::from_secs(2) => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) if e.errno == libc::EBUSY => {
                    return Err(XskError::Busy {
                        iface: dev.name.clone(),
                        queue: self.queue_id,
                        waited_ms: start.elapsed().as_millis() as u64,
                        cause: e,
                    })
                }
                Err(e) => return Err(e.into()),
            }
        }
        if shared_fd.is_none() {
            self.umem.set_multi_buffer(self.config.multi_buffer);
        }
        self.tx.set_multi_buffer(self.umem.multi_buffer());
        let (opts, _): (libc::xdp_options, usize) =
            sys::getsockopt(&*self.fd, SOL_XDP, XDP_OPTIONS, "SOL_XDP, XDP_OPTIONS")?;
        self.zero_copy = opts.flags & XDP_OPTIONS_ZEROCOPY != 0;
        Ok(())
    }

    /// True if the socket takes and sends multi-buffer packets (bound with XDP_USE_SG, or
    /// sharing the UMEM of a socket that was).
    pub fn multi_buffer(&self) -> bool {
        self.config.multi_buffer
    }

    /// The UMEM this socket uses.
    pub fn umem(&self) -> &Arc<Umem> {
        &self.umem
    }

    /// How this socket shares its UMEM.
    pub fn sharing(&self) -> Sharing {
        self.sharing
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

    /// Interface index bound.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Queue id bound.
    pub fn queue_id(&self) -> u32 {
        self.queue_id
    }

    /// The configuration the socket was made with.
    pub fn config(&self) -> &SocketConfig {
        &self.config
    }

    /// The socket's file descriptor (for the XSKMAP and for poll).
    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// A duplicate of the socket fd, e.g. to read statistics from another thread.
    ///
    /// # Errors
    ///
    /// [`SysError`] if `dup` fails (EMFILE at the process's fd limit).
    pub fn try_clone_fd(&self) -> Result<OwnedFd, SysError> {
        self.fd.try_clone().map_err(|e| SysError { call: "dup(xsk)".into(), errno: e.raw_os_error().unwrap_or(0) })
    }

    /// The six XDP_STATISTICS counters.
    ///
    /// # Errors
    ///
    /// [`SysError`] if `getsockopt(SOL_XDP, XDP_STATISTICS)` fails.
    pub fn stats(&self) -> Result<XskStats, SysError> {
        read_stats(self.fd.as_fd())
    }

    /// Wakes the kernel for TX if needed: with need_wakeup only when the TX ring asks, without it
    /// on every call (`sendto`, Documentation/networking/af_xdp.rst "XDP_USE_NEED_WAKEUP").
    ///
    /// # Errors
    ///
    /// [`SysError`] if the `sendto` fails with anything but the transient EAGAIN, EBUSY, ENOBUFS,
    /// ENETDOWN or EINTR, which count as done (e.g. ENXIO once the device is gone).
    #[inline]
    pub fn kick_tx(&self) -> Result<(), SysError> {
        if !self.config.need_wakeup || self.tx.needs_wakeup() {
            sys::kick_tx(self.fd.as_raw_fd())?;
        }
        Ok(())
    }

    /// Wakes the kernel for RX when the FILL ring asks (need_wakeup; a socket sharing another's
    /// FILL ring always asks), or drives NAPI when busy polling (`recvfrom`).
    #[inline]
    pub fn kick_rx(&self) {
        let asks = self.config.need_wakeup && self.fill.as_ref().is_none_or(|f| f.needs_wakeup());
        if self.config.busy_poll.is_some() || asks {
            sys::kick_rx(self.fd.as_raw_fd());
        }
    }

    /// `poll(POLLIN)` on the socket for up to `timeout_ms`; true if RX has data.
    ///
    /// # Errors
    ///
    /// [`SysError`] if `poll` fails other than with EINTR (which returns false).
    pub fn poll_rx(&self, timeout_ms: i32) -> Result<bool, SysError> {
        Ok(sys::poll_one(self.fd.as_raw_fd(), libc::POLLIN, timeout_ms)? & libc::POLLIN != 0)
    }
}

/// The AF_XDP socket's file descriptor, e.g. for tokio's `AsyncFd` or `poll`; it stays owned by the XskSocket.
impl std::os::fd::AsFd for XskSocket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.fd)
    }
}

impl std::os::fd::AsRawFd for XskSocket {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(self))
    }
}
