//! The AF_XDP backend of the port API: an [`XskSocket`] and its share of a [`Umem`]'s frames.
//!
//! Receive is zero-copy from the UMEM (copy mode on drivers without zero-copy: the kernel
//! copied the frame into the UMEM once); [`Port::fwd_burst`] sends a received frame back out
//! from the same UMEM frame; [`Port::tx_stamped`] writes the template into each TX frame once
//! and then only stamps it; [`Port::tx_burst`] copies into a free frame.
//!
//! Frames: a port starts with the [`Frame`]s it is given; up to `fill_frames` go on the FILL
//! ring, the rest are free for TX. RX frames go straight back to FILL; forwarded frames come back
//! through the COMPLETION ring to FILL; frames sent by `tx_*` come back to the free list.
//!
//! Multi-buffer (a socket bound with XDP_USE_SG, [`SocketConfig::multi_buffer`], kernel >= 6.6):
//! a packet larger than one UMEM frame arrives as several frames chained by `XDP_PKT_CONTD`.
//! `rx_burst` and `fwd_burst` take only whole packets off the RX ring (a peek may end inside
//! one; the rest stays for the next call) and give a multi-frame packet to the callback gathered
//! into one buffer (one copy; single-frame packets stay in place); `fwd_burst` scatters it back
//! and sends the same frames with the same chaining. `tx_burst` and `tx_stamped` split a longer
//! packet over as many frames as it needs. Counters and completions count packets: a frame
//! that ends a packet is marked when it goes to the TX ring, and only marked frames count when
//! they complete.
//!
//! TX metadata (a UMEM with `tx_metadata_len`, Linux >= 6.8): `tx_burst` and `tx_stamped`
//! build every packet that far into its frame and, after [`AfXdpPort::set_tx_meta`], write the
//! request in front of it ([`crate::xsk::TxMeta`]: checksum, TX timestamp, launch time); the
//! timestamps of their completions are tallied ([`AfXdpPort::tx_timestamps`]).
//!
//! Refill, reap and TX wake-up are the ring data path shared with [`crate::xsk::XskPair`]
//! (`xsk/datapath.rs`): `tx_burst` wakes TX until the ring is drained, every other call once.
//!
//! [`open_queues`] attaches an XDP program with mode fallback (native -> skb) and binds one
//! port per queue, over one shared UMEM or one UMEM each. Needs CAP_NET_ADMIN + CAP_BPF +
//! CAP_NET_RAW.

use std::os::fd::RawFd;
use std::sync::Arc;

use serde::Serialize;

use super::{Port, PortError, PortStats};
pub use crate::bpf::{Attach, AttachOpts, Attached};
use crate::bpf::{BpfError, XdpMode, XskRedirect, XskRedirectOpts};
use crate::netdev::Iface;
use crate::xsk::datapath::{self, TxKick};
use crate::xsk::{CopyMode, Frame, RxBatch, RxMeta, RxQueues, SocketConfig, TxMeta, Umem, XskConfig, XskSocket};

/// A program with an XSKMAP that steers queue q's frames to the socket in slot q.
pub trait XskMap {
    /// Puts socket `fd` in slot `queue_id`.
    ///
    /// # Errors
    ///
    /// [`BpfError`] if the kernel refuses the map update (`queue_id` beyond the XSKMAP, or `fd`
    /// not an AF_XDP socket bound to that queue).
    fn insert_xsk(&self, queue_id: u32, fd: RawFd) -> Result<(), BpfError>;
}

impl XskMap for XskRedirect {
    fn insert_xsk(&self, queue_id: u32, fd: RawFd) -> Result<(), BpfError> {
        self.insert(queue_id, fd)
    }
}

#[cfg(feature = "classifier")]
impl XskMap for crate::bpf::Classifier {
    fn insert_xsk(&self, queue_id: u32, fd: RawFd) -> Result<(), BpfError> {
        crate::bpf::Classifier::insert_xsk(self, queue_id, fd)
    }
}

/// What [`open_queues`] needs.
///
/// # Examples
///
/// Two queues of `eth0` over one shared UMEM, each socket a [`Port`]:
///
/// ```no_run
/// use fastpath::bpf::XskRedirect;
/// use fastpath::io::afxdp::{open_queues, QueueSetup};
/// use fastpath::io::Port;
/// use fastpath::netdev::Iface;
/// use fastpath::xsk::RxQueues;
///
/// let iface = Iface::resolve("eth0")?;
/// let queues = RxQueues::check(&iface, vec![0, 1])?;
/// let mut setup = QueueSetup::new(iface, queues);
/// setup.shared_umem = true; // one UMEM, its frames split between the sockets
/// let q = open_queues(&setup, Some(XskRedirect::load(Default::default())?))?;
/// for mut port in q.ports {
///     port.rx_burst(64, 100, |bytes| println!("{} bytes", bytes.len()))?;
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct QueueSetup {
    /// Interface.
    pub iface: Iface,
    /// Queue ids, one socket each, checked on `iface` ([`RxQueues::check`]).
    pub queues: RxQueues,
    /// UMEM and socket shape. With `shared_umem`, `config.umem.frame_count` frames are split
    /// evenly over the queues; without it, each queue has a UMEM of that many frames.
    pub config: XskConfig,
    /// One UMEM for every queue (XDP_SHARED_UMEM, own FILL/COMPLETION rings per socket).
    pub shared_umem: bool,
    /// How to attach the XDP program (`mode: None`: native, falling back to skb).
    pub attach: AttachOpts,
    /// Frames each port puts on its FILL ring (the rest are free for TX); at most the FILL
    /// ring's size.
    pub fill_frames: u32,
}

impl QueueSetup {
    /// One socket per queue of `queues` on `iface`, each with its own UMEM of
    /// [`XskConfig::default`], the program attached as [`AttachOpts::default`] says, and as many
    /// frames on each FILL ring as it holds (`fill_frames: u32::MAX`). Set the fields to change
    /// any of these.
    pub fn new(iface: Iface, queues: RxQueues) -> Self {
        Self {
            iface,
            queues,
            config: XskConfig::default(),
            shared_umem: false,
            attach: AttachOpts::default(),
            fill_frames: u32::MAX,
        }
    }
}

/// The result of [`open_queues`].
#[derive(Debug)]
pub struct Queues<T> {
    /// The XDP program (None when `attach` was not given: TX only).
    pub attached: Option<Attached<T>>,
    /// One port per queue, in the order of `QueueSetup::queues`.
    pub ports: Vec<AfXdpPort>,
}

/// Attaches the loaded
/// program `prog` as `setup.attach` asks ([`Attach::attach_to`]: the mode fallback runs on that
/// one program; `None`: no program, for TX only), creates the UMEM(s), binds one socket per
/// queue and inserts each in the program's XSKMAP under its queue id. In skb mode the sockets
/// bind in copy mode (generic XDP has no zero-copy). On any error everything made so far is
/// undone (the link closes as the partial result drops). Needs root, or CAP_NET_ADMIN +
/// CAP_BPF + CAP_NET_RAW; Linux >= 5.9 (XDP bpf_link).
///
/// # Errors
///
/// [`PortError::Config`] for no queue, queues checked on another interface, or fewer than 64
/// frames per queue; [`PortError::Xsk`] (sizes, bind); [`PortError::Bpf`] (attach, XSKMAP insert).
pub fn open_queues<P>(setup: &QueueSetup, prog: Option<P>) -> Result<Queues<P::Output>, PortError>
where
    P: Attach,
    P::Output: XskMap,
{
    setup.config.validate()?;
    let n = setup.queues.ids().len() as u32;
    if n == 0 {
        return Err(PortError::Config { what: "queue count", value: "0".into(), accepted: "1 or more".into() });
    }
    if setup.queues.ifindex() != setup.iface.ifindex() {
        return Err(PortError::Config {
            what: "queues",
            value: format!("checked on ifindex {}", setup.queues.ifindex()),
            accepted: format!("queues checked on {} (RxQueues::check)", setup.iface),
        });
    }
    let per_queue = if setup.shared_umem { setup.config.umem.frame_count / n } else { setup.config.umem.frame_count };
    if per_queue < 64 {
        return Err(PortError::Config {
            what: "frame count",
            value: setup.config.umem.frame_count.to_string(),
            accepted: format!("at least 64 frames per queue ({n} queues share one UMEM)"),
        });
    }
    let attached = match prog {
        Some(p) => Some(p.attach_to(&setup.iface, setup.attach)?),
        None => None,
    };
    let mut sc: SocketConfig = setup.config.socket.clone();
    if attached.as_ref().is_some_and(|a| a.mode == XdpMode::Skb) && sc.copy_mode == CopyMode::Auto {
        sc.copy_mode = CopyMode::Copy;
    }
    let mut ports = Vec::with_capacity(n as usize);
    let mut shared: Option<(Arc<Umem>, Vec<Frame>)> = None;
    if setup.shared_umem {
        shared = Some(Umem::new(&setup.config.umem)?);
    }
    for &q in setup.queues.ids() {
        let (umem, frames) = match shared.as_mut() {
            Some((u, all)) => {
                let keep = all.len() - per_queue as usize;
                (u.clone(), all.split_off(keep))
            }
            None => Umem::new(&setup.config.umem)?,
        };
        let sock = XskSocket::bind_checked(&umem, &setup.iface, q, &sc)?;
        if let Some(a) = &attached {
            a.prog.insert_xsk(q, sock.as_raw_fd())?;
        }
        ports.push(AfXdpPort::new(sock, frames, setup.fill_frames)?);
    }
    Ok(Queues { attached, ports })
}

/// What a port was given and obtained, for reports.
#[derive(Debug, Clone, Serialize)]
pub struct XskPortInfo {
    /// Queue id.
    pub queue: u32,
    /// "copy" / "zero-copy", read back from XDP_OPTIONS.
    pub copy_mode: &'static str,
    /// How the socket shares its UMEM.
    pub sharing: crate::xsk::Sharing,
    /// Frames this port started with.
    pub frames: u32,
}

/// An AF_XDP port on one (interface, queue).
#[derive(Debug)]
pub struct AfXdpPort {
    sock: XskSocket,
    umem: Arc<Umem>,
    _prog: Option<XskRedirect>,
    /// Free frames (TX, or waiting for FILL room). Capacity: every frame the port owns, so
    /// pushes never allocate.
    free: Vec<Frame>,
    frames: u32,
    /// Per frame index: which piece of `template` the frame holds (for `tx_stamped`): 0 none,
    /// k + 1 the k-th frame-sized piece (a single-frame template is piece 0).
    holds: Vec<u8>,
    template: Vec<u8>,
    /// Bound with XDP_USE_SG.
    mb: bool,
    /// The sockets receive from the RX-metadata program: [`AfXdpPort::rx_burst_meta`] reads it.
    rx_meta: bool,
    /// Per frame index, one bit: on the TX ring as the last frame of a packet (multi-buffer).
    eop: Vec<u64>,
    /// A multi-frame packet gathered for a callback (capacity: 64 KiB, allocated once).
    scratch: Vec<u8>,
    /// The frames of that packet (capacity 64).
    chain: Vec<Frame>,
    outstanding: u64,
    /// Completions reaped (by any call) and not yet reported by `tx_reap`.
    unreported: u64,
    /// Where `tx_burst` / `tx_stamped` build a packet in its frame: the UMEM's
    /// `tx_metadata_len` (0 without TX metadata).
    tx_off: u32,
    /// The TX metadata request written in front of every packet `tx_burst` / `tx_stamped` send
    /// ([`AfXdpPort::set_tx_meta`]).
    tx_req: Option<TxMeta>,
    /// Launch each packet this long after its burst is queued (CLOCK_TAI).
    launch_delay_ns: Option<u64>,
    /// TX timestamps asked and returned.
    tx_ts: TxTimestamps,
    stats: PortStats,
}

/// What the TX timestamps of a port's completions said ([`AfXdpPort::tx_timestamps`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TxTimestamps {
    /// Packets completed that were sent with a timestamp request.
    pub requested: u64,
    /// Of those, packets whose completion carried a timestamp.
    pub returned: u64,
    /// The first timestamp returned (ns: CLOCK_TAI in copy mode, the device's clock in
    /// zero-copy mode).
    pub first_ns: Option<u64>,
    /// The last timestamp returned.
    pub last_ns: Option<u64>,
}

impl TxTimestamps {
    /// Adds another port's.
    pub fn merge(&mut self, o: &TxTimestamps) {
        self.requested += o.requested;
        self.returned += o.returned;
        self.first_ns = match (self.first_ns, o.first_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_ns = self.last_ns.max(o.last_ns);
    }
}

impl AfXdpPort {
    /// Loads `xsk_redirect` (frags-aware for a multi-buffer `cfg`) and attaches it to `iface`
    /// as `attach` asks (native, or skb when `attach.mode` is `None` and the driver refuses
    /// native), creates a UMEM, binds a socket to `queue` with `cfg` and puts half of the
    /// frames on its FILL ring. Privileges and kernel: as [`open_queues`].
    ///
    /// # Errors
    ///
    /// As [`open_queues`], and [`PortError::Bpf`] if the program cannot be loaded.
    ///
    /// # Panics
    ///
    /// Never: [`open_queues`] returns one port per queue asked, and one is asked.
    pub fn open(iface: &Iface, queue: u32, cfg: &XskConfig, attach: AttachOpts) -> Result<Self, PortError> {
        // The configuration is refused before anything is loaded (open_queues checks it again).
        cfg.validate()?;
        let setup = QueueSetup {
            iface: iface.clone(),
            queues: RxQueues::check(iface, vec![queue])?,
            config: cfg.clone(),
            shared_umem: false,
            attach,
            fill_frames: cfg.umem.frame_count / 2,
        };
        let prog = XskRedirect::load(XskRedirectOpts { frags: cfg.socket.multi_buffer, ..Default::default() })?;
        let mut q = open_queues(&setup, Some(prog))?;
        let mut port = q.ports.pop().expect("one queue");
        port._prog = q.attached.take().map(|a| a.prog);
        Ok(port)
    }

    /// A port over a bound socket with its own FILL ring, owning `frames` (of the socket's
    /// UMEM): up to `fill_frames` (and at most the FILL ring's size) go on the FILL ring now.
    ///
    /// # Errors
    ///
    /// [`PortError::Config`] for a socket that shares another's FILL ring
    /// ([`Sharing::SameQueue`](crate::xsk::Sharing)), or a multi-buffer socket over a UMEM with
    /// `tx_metadata_len` (the kernel wants that room in front of every frame of a packet).
    pub fn new(mut sock: XskSocket, mut frames: Vec<Frame>, fill_frames: u32) -> Result<Self, PortError> {
        let tx_off = sock.umem().tx_metadata_len();
        if tx_off > 0 && sock.multi_buffer() {
            return Err(PortError::Config {
                what: "TX metadata",
                value: format!("tx_metadata_len {tx_off} on a multi-buffer socket"),
                accepted: "TX metadata on single-buffer sockets (every frame of a packet would need the room): the interface's MTU made the socket multi-buffer; lower it to 3822 or less (4096-byte frames)".into(),
            });
        }
        let queue = sock.queue_id();
        let Some(fill) = sock.fill.as_mut() else {
            return Err(PortError::Config {
                what: "socket",
                value: format!("queue {queue} sharing another socket's FILL ring"),
                accepted: "a socket with its own FILL and COMPLETION rings".into(),
            });
        };
        let total = frames.len() as u32;
        datapath::refill(&mut fill.reserve(fill_frames.min(total)), &mut frames, |_| {});
        let mut free = Vec::with_capacity(total as usize);
        let fs = sock.umem().frame_size();
        free.extend(frames.drain(..).map(|mut f| {
            f.reset(fs);
            f
        }));
        let umem = sock.umem().clone();
        let nframes = umem.config().frame_count as usize;
        let mb = sock.multi_buffer();
        Ok(Self {
            sock,
            umem,
            _prog: None,
            free,
            frames: total,
            holds: vec![0; nframes],
            template: Vec::new(),
            mb,
            rx_meta: false,
            eop: if mb { vec![0; nframes.div_ceil(64)] } else { Vec::new() },
            scratch: if mb { Vec::with_capacity(1 << 16) } else { Vec::new() },
            chain: if mb { Vec::with_capacity(64) } else { Vec::new() },
            outstanding: 0,
            unreported: 0,
            tx_off,
            tx_req: None,
            launch_delay_ns: None,
            tx_ts: TxTimestamps::default(),
            stats: PortStats::default(),
        })
    }

    /// Writes the TX metadata request `req` in front of every packet [`Port::tx_burst`] and
    /// [`Port::tx_stamped`] send from now on ([`Umem::set_tx_meta`]; `None`: none), with
    /// `launch_delay_ns` (if given) setting its launch time to CLOCK_TAI at each burst plus that
    /// delay. The port's UMEM must have `tx_metadata_len` ([`crate::xsk::UmemConfig`]); whether
    /// the driver can do what `req` asks is the caller's check ([`TxMeta::check_driver`]).
    /// Completions of timestamped packets are read as they are reaped
    /// ([`AfXdpPort::tx_timestamps`]). Packets [`Port::fwd_burst`] forwards carry no request.
    ///
    /// # Errors
    ///
    /// [`PortError::Config`] for a request on a port whose UMEM has no `tx_metadata_len`.
    pub fn set_tx_meta(&mut self, req: Option<TxMeta>, launch_delay_ns: Option<u64>) -> Result<(), PortError> {
        let req = req.filter(|r| !r.is_empty() || launch_delay_ns.is_some());
        if req.is_some() && self.tx_off == 0 {
            return Err(PortError::Config {
                what: "TX metadata request",
                value: "a UMEM without tx_metadata_len".into(),
                accepted: format!(
                    "a UMEM registered with tx_metadata_len (a multiple of 8 from {} to 248)",
                    crate::xsk::TX_META_LEN
                ),
            });
        }
        self.tx_req = req;
        self.launch_delay_ns = launch_delay_ns.filter(|_| req.is_some());
        Ok(())
    }

    /// What the completions of packets sent with a timestamp request carried so far.
    pub fn tx_timestamps(&self) -> TxTimestamps {
        self.tx_ts
    }

    /// The request of one burst: the port's, with the launch time of this burst.
    #[inline]
    fn burst_req(&self) -> Option<TxMeta> {
        let mut r = self.tx_req?;
        if let Some(d) = self.launch_delay_ns {
            r.launch_time_ns = Some(crate::sys::tai_ns().saturating_add(d));
        }
        Some(r)
    }

    /// The socket (mode read back from the kernel, statistics).
    pub fn socket(&self) -> &XskSocket {
        &self.sock
    }

    /// What this port was given and obtained.
    pub fn info(&self) -> XskPortInfo {
        XskPortInfo {
            queue: self.sock.queue_id(),
            copy_mode: self.sock.copy_mode_name(),
            sharing: self.sock.sharing(),
            frames: self.frames,
        }
    }

    /// COMPLETION -> free list; returns how many packets completed.
    #[inline]
    fn reap_to_free(&mut self) -> u64 {
        self.reap(false)
    }

    /// Free list and COMPLETION -> FILL (frames that find no room stay free, or become free).
    #[inline]
    fn reap_to_fill(&mut self) -> u64 {
        self.reap(true)
    }

    /// Completed frames to the free list, or (`to_fill`) the free list and then them to the
    /// FILL ring ([`datapath::reap`]); returns how many packets completed.
    #[inline]
    fn reap(&mut self, to_fill: bool) -> u64 {
        let Some(comp) = self.sock.comp.as_mut() else { return 0 };
        let fill = if to_fill { self.sock.fill.as_mut() } else { None };
        let fs = self.umem.frame_size();
        let fidx = crate::xsk::FrameIndexer::new(fs);
        let (mb, eop, holds) = (self.mb, &mut self.eop, &mut self.holds);
        let (umem, ts, tx_ts) = (&*self.umem, self.tx_req.is_some_and(|r| r.timestamp), &mut self.tx_ts);
        let ends = |f: &Frame| {
            if ts {
                tx_ts.requested += 1;
                if let Some(t) = umem.tx_completion_timestamp(f) {
                    tx_ts.returned += 1;
                    tx_ts.first_ns.get_or_insert(t);
                    tx_ts.last_ns = Some(t);
                }
            }
            packet_end(mb, eop, f, fidx)
        };
        // A frame on FILL is the kernel's to write: it no longer holds a template.
        let untemplate = |f: &Frame| holds[fidx.index(f.addr())] = 0;
        let n = datapath::reap(comp, fill, &mut self.free, fs, ends, untemplate);
        self.outstanding = self.outstanding.saturating_sub(n);
        self.unreported += n;
        n
    }

    /// Takes `f` (the first frame of a packet of `nf` frames, the rest next in `batch`) and the
    /// rest into `self.chain` and gathers their bytes into `self.scratch`.
    #[inline]
    fn gather(umem: &Umem, chain: &mut Vec<Frame>, scratch: &mut Vec<u8>, batch: &mut RxBatch<'_>, nf: u32) {
        chain.clear();
        scratch.clear();
        for _ in 0..nf {
            let fr = batch.next().expect("next_packet counted these frames");
            scratch.extend_from_slice(umem.data(&fr));
            chain.push(fr);
        }
    }

    /// The receive loop of [`Port::rx_burst`] and [`AfXdpPort::rx_burst_meta`]: `f` gets the
    /// UMEM, the packet's first frame and its bytes.
    #[inline]
    fn rx_each<F: FnMut(&Umem, &Frame, &[u8])>(
        &mut self,
        max: usize,
        timeout_ms: i32,
        mut f: F,
    ) -> Result<usize, PortError> {
        let max = max.min(u32::MAX as usize) as u32;
        for attempt in 0..2 {
            let umem = &*self.umem;
            let XskSocket { rx, fill, .. } = &mut self.sock;
            let fill = fill.as_mut().expect("a port's socket has its own FILL ring");
            let mut batch = if self.mb { rx.peek_packets(max.saturating_add(MB_PEEK_EXTRA)) } else { rx.peek(max) };
            let avail = batch.len() as u32;
            if avail > 0 {
                // Frames are conserved (FILL holds every frame the port has), so room appears as
                // soon as the kernel consumes; without room, leave the packets on RX for now.
                let mut fb = fill.reserve(avail);
                let mut bytes = 0u64;
                let mut packets = 0u32;
                if !self.mb {
                    packets = fb.room();
                    for fr in batch.by_ref().take(packets as usize) {
                        f(umem, &fr, umem.data(&fr));
                        bytes += fr.len() as u64;
                        fb.push(fr);
                    }
                } else {
                    while packets < max {
                        let Some((nf, len)) = batch.next_packet() else { break };
                        if fb.room() < nf {
                            break;
                        }
                        if nf == 1 {
                            let fr = batch.next().expect("counted");
                            f(umem, &fr, umem.data(&fr));
                            fb.push(fr);
                        } else {
                            Self::gather(umem, &mut self.chain, &mut self.scratch, &mut batch, nf);
                            f(umem, &self.chain[0], &self.scratch);
                            for fr in self.chain.drain(..) {
                                fb.push(fr);
                            }
                        }
                        bytes += len as u64;
                        packets += 1;
                    }
                }
                let no_room = fb.room() == 0 && packets == 0;
                drop(fb);
                drop(batch);
                self.stats.rx_packets += packets as u64;
                self.stats.rx_bytes += bytes;
                if no_room {
                    self.sock.kick_rx();
                }
                return Ok(packets as usize);
            }
            drop(batch);
            if attempt == 0 {
                if timeout_ms > 0 {
                    self.sock.poll_rx(timeout_ms)?;
                } else {
                    self.sock.kick_rx();
                }
            }
        }
        Ok(0)
    }

    /// As [`Port::rx_burst`], with the driver's RX metadata of each packet ([`RxMeta`]: RX
    /// timestamp, RSS hash and type, VLAN tag; the first frame's for a multi-buffer packet).
    /// The metadata is read only on a port [`AfXdpPort::set_rx_meta`] turned on, whose
    /// sockets are fed by [`crate::bpf::XskRedirect::load_rx_meta`]'s program; on any other
    /// port every field is `None` (the bytes in front of a frame are then not metadata).
    ///
    /// # Errors
    ///
    /// As [`Port::rx_burst`].
    #[inline]
    pub fn rx_burst_meta<F: FnMut(&[u8], &RxMeta)>(
        &mut self,
        max: usize,
        timeout_ms: i32,
        mut f: F,
    ) -> Result<usize, PortError> {
        if !self.rx_meta {
            return self.rx_each(max, timeout_ms, |_, _, p| f(p, &RxMeta::default()));
        }
        self.rx_each(max, timeout_ms, |umem, fr, p| f(p, &RxMeta::read(umem, fr)))
    }

    /// Says that this port's sockets receive from the RX-metadata program
    /// ([`crate::bpf::XskRedirect::load_rx_meta`]), so [`AfXdpPort::rx_burst_meta`] reads the
    /// metadata in front of each frame.
    pub fn set_rx_meta(&mut self, on: bool) {
        self.rx_meta = on;
    }

    /// Marks `f` as the last frame of a packet going to the TX ring (multi-buffer ports).
    #[inline]
    fn mark_eop(mb: bool, eop: &mut [u64], f: &Frame, fidx: crate::xsk::FrameIndexer) {
        if mb && !f.contd() {
            let idx = fidx.index(f.addr());
            eop[idx / 64] |= 1 << (idx % 64);
        }
    }

    /// Wakes TX as `kick` allows ([`datapath::kick_tx`]).
    #[inline]
    fn kick_tx(&mut self, kick: TxKick) -> Result<(), PortError> {
        Ok(datapath::kick_tx(&mut self.sock, kick)?)
    }
}

/// True if the completed frame `f` ended a packet (always on a single-buffer port; on a
/// multi-buffer port if it was marked when sent), clearing the mark.
#[inline]
fn packet_end(mb: bool, eop: &mut [u64], f: &Frame, fidx: crate::xsk::FrameIndexer) -> bool {
    if !mb {
        return true;
    }
    let idx = fidx.index(f.addr());
    let bit = 1u64 << (idx % 64);
    let was = eop[idx / 64] & bit != 0;
    eop[idx / 64] &= !bit;
    was
}

/// Descriptors one burst peeks beyond its packet count on a multi-buffer port, so that a whole
/// packet (at most MAX_SKB_FRAGS + 1 = 18 frames in copy mode) always fits in a peek.
const MB_PEEK_EXTRA: u32 = 32;

/// Frames one packet may take on a multi-buffer port when sending: MAX_SKB_FRAGS (17) + 1, the
/// copy-mode limit of xsk_build_skb (net/xdp/xsk.c).
const MB_MAX_FRAMES: usize = 18;

impl Port for AfXdpPort {
    fn path(&self) -> &'static str {
        "afxdp"
    }

    #[inline]
    fn rx_burst<F: FnMut(&[u8])>(&mut self, max: usize, timeout_ms: i32, mut f: F) -> Result<usize, PortError> {
        self.rx_each(max, timeout_ms, |_, _, p| f(p))
    }

    #[inline]
    fn fwd_burst<F: FnMut(&mut [u8]) -> bool>(
        &mut self,
        max: usize,
        timeout_ms: i32,
        mut f: F,
    ) -> Result<(usize, usize), PortError> {
        self.reap_to_fill();
        let max = max.min(u32::MAX as usize) as u32;
        let fidx = crate::xsk::FrameIndexer::new(self.umem.frame_size());
        for attempt in 0..2 {
            let umem = &*self.umem;
            let XskSocket { rx, tx, .. } = &mut self.sock;
            let mut batch = if self.mb { rx.peek_packets(max.saturating_add(MB_PEEK_EXTRA)) } else { rx.peek(max) };
            let avail = batch.len() as u32;
            if avail > 0 {
                let mut tb = tx.reserve(avail);
                let mut bytes = 0u64;
                let (mut received, mut sent) = (0u32, 0u32);
                if !self.mb {
                    received = tb.room();
                    for mut fr in batch.by_ref().take(received as usize) {
                        if f(umem.data_mut(&mut fr)) {
                            bytes += fr.len() as u64;
                            tb.push(fr);
                        } else {
                            fr.reset(umem.frame_size());
                            self.free.push(fr);
                        }
                    }
                    sent = tb.pushed();
                } else {
                    while received < max {
                        let Some((nf, len)) = batch.next_packet() else { break };
                        if tb.room() < nf {
                            break;
                        }
                        received += 1;
                        let keep = if nf == 1 {
                            let mut fr = batch.next().expect("counted");
                            let keep = f(umem.data_mut(&mut fr));
                            self.chain.clear();
                            self.chain.push(fr);
                            keep
                        } else {
                            Self::gather(umem, &mut self.chain, &mut self.scratch, &mut batch, nf);
                            let keep = f(&mut self.scratch);
                            if keep {
                                // Scatter back: the callback may have changed any byte.
                                let mut off = 0;
                                for fr in self.chain.iter_mut() {
                                    let d = umem.data_mut(fr);
                                    d.copy_from_slice(&self.scratch[off..off + d.len()]);
                                    off += d.len();
                                }
                            }
                            keep
                        };
                        if keep {
                            for fr in self.chain.drain(..) {
                                Self::mark_eop(true, &mut self.eop, &fr, fidx);
                                tb.push(fr);
                            }
                            bytes += len as u64;
                            sent += 1;
                        } else {
                            for mut fr in self.chain.drain(..) {
                                fr.reset(umem.frame_size());
                                self.free.push(fr);
                            }
                        }
                    }
                }
                drop(tb);
                drop(batch);
                self.outstanding += sent as u64;
                self.stats.rx_packets += received as u64;
                self.stats.tx_packets += sent as u64;
                self.stats.tx_bytes += bytes;
                // TX full (taken < avail) or frames queued: push them out.
                self.kick_tx(TxKick::ONCE)?;
                return Ok((received as usize, sent as usize));
            }
            drop(batch);
            if attempt == 0 {
                self.kick_tx(TxKick::ONCE)?;
                if timeout_ms > 0 {
                    self.sock.poll_rx(timeout_ms)?;
                } else {
                    self.sock.kick_rx();
                }
            }
        }
        Ok((0, 0))
    }

    fn tx_burst(&mut self, frames: &[&[u8]]) -> Result<usize, PortError> {
        self.reap_to_free();
        let fs = self.umem.frame_size() as usize;
        // Check every frame before reserving anything: nothing half-done on bad input.
        let max_len = if self.mb { fs * MB_MAX_FRAMES } else { fs };
        if let Some(fr) = frames.iter().find(|f| f.is_empty() || f.len() > max_len) {
            return Err(PortError::Config {
                what: "frame length",
                value: fr.len().to_string(),
                accepted: if self.mb {
                    format!("use 1 to {max_len} bytes ({MB_MAX_FRAMES} frames of {fs} bytes, multi-buffer)")
                } else {
                    format!("use 1 to {fs} bytes (the frame size; a socket bound without XDP_USE_SG)")
                },
            });
        }
        let fidx = crate::xsk::FrameIndexer::new(self.umem.frame_size());
        let max_one = fs - self.tx_off as usize;
        if !self.mb {
            if let Some(fr) = frames.iter().find(|f| f.len() > max_one) {
                return Err(PortError::Config {
                    what: "frame length",
                    value: fr.len().to_string(),
                    accepted: format!(
                        "use 1 to {max_one} bytes (the frame size less the UMEM's tx_metadata_len {})",
                        self.tx_off
                    ),
                });
            }
        }
        let req = self.burst_req();
        if let Some(r) = &req {
            for fr in frames {
                r.check_len(fr.len() as u32)?;
            }
        }
        let (umem, tx_off) = (&*self.umem, self.tx_off);
        // TX slots for every frame of every packet (a multi-buffer packet takes several).
        let want: usize = frames.iter().map(|f| f.len().div_ceil(fs)).sum();
        let mut tb = self.sock.tx.reserve(want.min(self.free.len()).min(u32::MAX as usize) as u32);
        let mut got = 0usize;
        for fr in frames {
            let nf = fr.len().div_ceil(fs);
            if (tb.room() as usize) < nf || self.free.len() < nf {
                break;
            }
            for (k, piece) in fr.chunks(fs).enumerate() {
                let mut f = self.free.pop().expect("nf <= free");
                // The frame's bytes change: it no longer holds any template.
                self.holds[fidx.index(f.addr())] = 0;
                umem.resize_at(&mut f, tx_off, piece.len() as u32).copy_from_slice(piece);
                if let Some(r) = &req {
                    umem.set_tx_meta(&mut f, r)?;
                }
                f.set_contd(k + 1 < nf);
                Self::mark_eop(self.mb, &mut self.eop, &f, fidx);
                tb.push(f);
            }
            self.stats.tx_bytes += fr.len() as u64;
            got += 1;
        }
        drop(tb);
        self.stats.tx_packets += got as u64;
        self.outstanding += got as u64;
        if got > 0 {
            self.kick_tx(TxKick::DRAIN)?;
        }
        Ok(got)
    }

    #[inline]
    fn tx_stamped<F: FnMut(usize, &mut [u8])>(
        &mut self,
        template: &[u8],
        n: usize,
        mut stamp: F,
    ) -> Result<usize, PortError> {
        let fs = self.umem.frame_size() as usize;
        let max_len = if self.mb { fs * MB_MAX_FRAMES } else { fs };
        if template.is_empty() || template.len() > max_len {
            return Err(PortError::Config {
                what: "frame length",
                value: template.len().to_string(),
                accepted: if self.mb {
                    format!("use 1 to {max_len} bytes ({MB_MAX_FRAMES} frames of {fs} bytes, multi-buffer)")
                } else {
                    format!("use 1 to {fs} bytes (the frame size; a socket bound without XDP_USE_SG)")
                },
            });
        }
        let max_one = fs - self.tx_off as usize;
        if !self.mb && template.len() > max_one {
            return Err(PortError::Config {
                what: "frame length",
                value: template.len().to_string(),
                accepted: format!(
                    "use 1 to {max_one} bytes (the frame size less the UMEM's tx_metadata_len {})",
                    self.tx_off
                ),
            });
        }
        let req = self.burst_req();
        if let Some(r) = &req {
            r.check_len(template.len() as u32)?;
        }
        // Completed frames back to the free list: a caller may loop on tx_stamped alone.
        self.reap_to_free();
        if self.template.as_slice() != template {
            // A new template: no frame holds it yet (allocates only here, never per packet).
            self.template.clear();
            self.template.extend_from_slice(template);
            self.holds.iter_mut().for_each(|h| *h = 0);
        }
        let fidx = crate::xsk::FrameIndexer::new(self.umem.frame_size());
        let nf = template.len().div_ceil(fs);
        let want = n.min(self.free.len() / nf).min(u32::MAX as usize / nf);
        let (umem, tx_off) = (&*self.umem, self.tx_off);
        let mut tb = self.sock.tx.reserve((want * nf) as u32);
        let got = tb.room() as usize / nf;
        for i in 0..got {
            // Pieces last to first, so that the first (which `stamp` changes) is at hand last.
            let mut first = None;
            for k in (0..nf).rev() {
                let piece = &template[k * fs..template.len().min((k + 1) * fs)];
                let mut f = self.free.pop().expect("got * nf <= free");
                let idx = fidx.index(f.addr());
                let bytes = umem.resize_at(&mut f, tx_off, piece.len() as u32);
                if self.holds[idx] != k as u8 + 1 {
                    bytes.copy_from_slice(piece);
                    self.holds[idx] = k as u8 + 1;
                }
                f.set_contd(k + 1 < nf);
                if k == 0 {
                    first = Some(f);
                } else {
                    self.chain.push(f);
                }
            }
            let mut f = first.expect("nf >= 1");
            // A multi-frame packet: `stamp` gets its first frame (the headers).
            stamp(i, umem.data_mut(&mut f));
            if let Some(r) = &req {
                // Checked against the length above: cannot fail.
                umem.set_tx_meta(&mut f, r)?;
            }
            Self::mark_eop(self.mb, &mut self.eop, &f, fidx);
            tb.push(f);
            while let Some(f) = self.chain.pop() {
                Self::mark_eop(self.mb, &mut self.eop, &f, fidx);
                tb.push(f);
            }
        }
        drop(tb);
        self.stats.tx_packets += got as u64;
        self.stats.tx_bytes += got as u64 * template.len() as u64;
        self.outstanding += got as u64;
        self.kick_tx(TxKick::ONCE)?;
        Ok(got)
    }

    #[inline]
    fn tx_reap(&mut self) -> Result<Option<u64>, PortError> {
        // Every completion counts once, whichever call reaped it (tx_burst and tx_stamped reap
        // too).
        self.reap_to_free();
        Ok(Some(std::mem::take(&mut self.unreported)))
    }

    fn tx_outstanding(&mut self) -> Result<u64, PortError> {
        self.kick_tx(TxKick::ONCE)?;
        Ok(self.outstanding)
    }

    fn tx_batch_hint(&self) -> usize {
        // What one copy-mode sendto turns into skbs (XDP_MAX_TX_SKB_BUDGET, 32 by default).
        self.sock.tx_skb_budget().unwrap_or(32) as usize
    }

    fn stats(&mut self) -> Result<PortStats, PortError> {
        let mut s = self.stats.clone();
        let x = self.sock.stats()?;
        s.drops = x.fields().iter().map(|(k, v)| (k.to_string(), *v)).collect();
        Ok(s)
    }
}

/// The port's AF_XDP socket's file descriptor, e.g. for tokio's `AsyncFd` or `poll`; it stays owned by the AfXdpPort.
impl std::os::fd::AsFd for AfXdpPort {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.sock)
    }
}

impl std::os::fd::AsRawFd for AfXdpPort {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(self))
    }
}
