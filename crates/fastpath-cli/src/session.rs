//! Opening a measured path: attach the XDP program, bind the AF_XDP socket, report what was
//! obtained (never what was asked for).

use std::os::fd::OwnedFd;

use anyhow::anyhow;
use fastpath::bpf::{
    Attach, AttachOpts, Attached, BpfError, Classifier, Loaded, LoadedClassifier, XdpDrop, XskRedirect, XskRedirectOpts,
};
use fastpath::io::afxdp::{open_queues, AfXdpPort, QueueSetup, XskMap, XskPortInfo};
use fastpath::netdev::Iface;
use fastpath::rules::compile::Compiled;
use fastpath::uds::HandedXskMap;
use fastpath::xsk::{BusyPoll, CopyMode, RxQueues, SocketConfig, TxMeta, UmemConfig, XskConfig};
use serde::Serialize;

use crate::args::{CopyModeArg, XdpModeArg, XskArgs};
use crate::error::{usage, CliResult};

/// What a session needs on the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// xsk_redirect + an AF_XDP socket (rxdrop, l2fwd).
    Rx,
    /// An AF_XDP socket only (txonly, gen --engine xsk): TX needs no XDP program.
    Tx,
    /// xdp_drop only.
    Drop,
}

/// The program attached for this session; detached on drop.
#[derive(Debug)]
pub enum Prog {
    /// Held so that dropping the session detaches it.
    Redirect(XskRedirect),
    /// The rule classifier in front of the socket (`--rules`).
    Classifier(#[allow(dead_code)] Box<Classifier>),
    Drop(XdpDrop),
    /// No program of ours: the sockets are in an XSKMAP handed over by another process
    /// (`--xsk-handoff`), held for as long as the session; and the id of the XDP program on the
    /// interface when it opened (the one that redirects into that map).
    Handoff(#[allow(dead_code)] fastpath::uds::HandedXskMap, u32),
    None,
}

/// Either program with an XSKMAP.
enum RxProg {
    Redirect(XskRedirect),
    Classifier(Box<Classifier>),
}

impl XskMap for RxProg {
    fn insert_xsk(&self, queue_id: u32, fd: std::os::fd::RawFd) -> Result<(), fastpath::bpf::BpfError> {
        match self {
            RxProg::Redirect(p) => p.insert(queue_id, fd),
            RxProg::Classifier(c) => c.insert_xsk(queue_id, fd),
        }
    }
}

/// Either program, loaded and not yet attached.
/// Which program feeds a receive session's sockets.
#[derive(Debug, Clone, Copy)]
pub enum RxChoice<'a> {
    /// `xsk_redirect` (frags-aware when the MTU needs multi-buffer).
    Redirect,
    /// The classifier with these rules.
    Rules(&'a Compiled),
    /// `xsk_redirect_meta`: the driver's RX metadata in front of every frame (`--rx-meta`).
    RxMeta,
}

enum RxLoaded {
    Redirect(Loaded<XskRedirect>),
    Classifier(Box<LoadedClassifier>),
}

impl Attach for RxLoaded {
    type Output = RxProg;
    fn attach_to(self, iface: &Iface, opts: AttachOpts) -> Result<Attached<RxProg>, BpfError> {
        match self {
            RxLoaded::Redirect(p) => Ok(p.attach(iface, opts)?.map(RxProg::Redirect)),
            RxLoaded::Classifier(c) => Ok(c.attach_to(iface, opts)?.map(|c| RxProg::Classifier(Box::new(c)))),
        }
    }
}

/// What was obtained, for reports.
#[derive(Debug, Clone, Serialize)]
pub struct PathInfo {
    pub iface: String,
    /// The first queue (the only one without --queues).
    pub queue: u32,
    /// Every queue with a socket (one per worker thread).
    pub queues: Vec<u32>,
    pub driver: String,
    /// "native" / "skb" as attached, None if no program.
    pub xdp_mode: Option<&'static str>,
    /// "copy" / "zero-copy" read back from XDP_OPTIONS, None without a socket.
    pub copy_mode: Option<&'static str>,
    /// One UMEM shared by every queue's socket.
    pub shared_umem: bool,
    /// The sockets receive the driver's RX metadata in front of every frame (`--rx-meta`).
    pub rx_meta: bool,
    pub need_wakeup: bool,
    pub busy_poll: bool,
    pub tx_skb_budget: Option<u32>,
    /// Sockets bound with XDP_USE_SG: the MTU does not fit one UMEM frame.
    pub multi_buffer: bool,
    /// Per socket: queue, copy mode, UMEM sharing, frames.
    pub sockets: Vec<XskPortInfo>,
    /// AF_XDP TX metadata of a transmit session (`--tx-csum`, `--tx-timestamp`,
    /// `--tx-launch-time`); absent without.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_meta: Option<TxMetaInfo>,
    /// rxdrop/l2fwd: how the workers wait on an empty RX ring, "spin" or "poll" (as used:
    /// `--spin`, `--poll`, or the default chosen from the CPU layout); absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<&'static str>,
    pub notes: Vec<String>,
}

/// What a transmit session asks of TX metadata.
#[derive(Debug, Clone, Copy)]
pub struct TxMetaPlan {
    /// The request written in front of every frame (its launch time is set per burst from
    /// `launch_delay_ns`).
    pub req: TxMeta,
    /// XDP_UMEM_TX_SW_CSUM: the kernel completes the checksum on the CPU (copy mode).
    pub sw_csum: bool,
    /// Launch each frame this long after its burst is queued (CLOCK_TAI).
    pub launch_delay_ns: Option<u64>,
}

/// The TX metadata a session set up, for reports.
#[derive(Debug, Clone, Serialize)]
pub struct TxMetaInfo {
    /// The UMEM's tx_metadata_len.
    pub tx_metadata_len: u32,
    /// Who completes the partial checksum ("sw": the kernel, XDP_UMEM_TX_SW_CSUM; "device"),
    /// or None without a checksum request.
    pub checksum: Option<&'static str>,
    /// (csum_start, csum_offset) of the request.
    pub csum_at: Option<(u16, u16)>,
    /// Timestamps asked for.
    pub timestamp: bool,
    /// Launch delay asked for, ns.
    pub launch_delay_ns: Option<u64>,
    /// The driver's xsk-features (netdev family), None where the kernel did not say.
    pub xsk_features: Option<Vec<&'static str>>,
}

#[derive(Debug)]
pub struct Session {
    /// -i, resolved once when the session opened.
    pub iface: Iface,
    pub prog: Prog,
    /// One AF_XDP port per queue (none for xdpdrop).
    pub ports: Vec<AfXdpPort>,
    /// Duplicates of the sockets' fds, for XDP_STATISTICS from the monitor thread.
    pub stats_fds: Vec<OwnedFd>,
    pub info: PathInfo,
}

pub fn xsk_config(x: &XskArgs) -> XskConfig {
    let mut umem = UmemConfig::default();
    umem.frame_size = x.frame_size;
    umem.frame_count = x.frame_count;
    umem.headroom = x.headroom;
    umem.fill_size = x.ring_size.saturating_mul(2);
    umem.comp_size = x.ring_size.saturating_mul(2);
    umem.huge_pages = x.huge_pages;
    umem.unaligned = x.unaligned_chunks;
    // Set by Session::open_tx_meta (--tx-csum, --tx-timestamp, --tx-launch-time).
    umem.tx_metadata_len = 0;
    umem.tx_sw_csum = false;
    let mut socket = SocketConfig::default();
    socket.ring_size = x.ring_size;
    socket.need_wakeup = !x.no_need_wakeup;
    socket.copy_mode = match x.copy_mode {
        CopyModeArg::Auto => CopyMode::Auto,
        CopyModeArg::Copy => CopyMode::Copy,
        CopyModeArg::ZeroCopy => CopyMode::ZeroCopy,
    };
    socket.busy_poll = x.busy_poll.then_some(BusyPoll::new(20, x.batch_size));
    socket.tx_skb_budget = Some(x.tx_budget.unwrap_or(256.min(x.ring_size)));
    // Decided from the interface's MTU when the session opens (decide_multi_buffer).
    socket.multi_buffer = false;
    let mut cfg = XskConfig::default();
    cfg.umem = umem;
    cfg.socket = socket;
    cfg
}

/// Largest Ethernet frame at `mtu` bytes of IP MTU: header and one VLAN tag.
pub const L2_OVERHEAD_BYTES: u32 = 18;

/// Decides AF_XDP multi-buffer for `iface` at its MTU: on (XDP_USE_SG, and the frags-aware
/// XDP program) when a frame of MTU + [`L2_OVERHEAD_BYTES`] does not fit the bytes one UMEM
/// frame has for a received packet (frame size - XDP_PACKET_HEADROOM 256 - headroom); then
/// returns a note saying so. Where the kernel lacks multi-buffer (< 6.6) such an MTU is
/// refused in one line naming the feature, its minimum kernel and the largest MTU that fits.
pub fn decide_multi_buffer(iface: &str, mtu: u32, cfg: &mut XskConfig) -> CliResult<Option<String>> {
    let room = cfg.umem.frame_size.saturating_sub(fastpath::xsk::XDP_PACKET_HEADROOM + cfg.umem.headroom);
    let max_mtu = room.saturating_sub(L2_OVERHEAD_BYTES);
    if mtu <= max_mtu {
        cfg.socket.multi_buffer = false;
        return Ok(None);
    }
    if let Err(u) = fastpath::features::check(fastpath::features::Feature::MultiBuffer) {
        return Err(crate::error::unsupported(anyhow!(
            "{}",
            crate::hints::in_entered_ns(&format!(
                "{iface} has MTU {mtu}, more than one {}-byte UMEM frame holds (MTU <= {max_mtu}): {u}; lower the MTU (ip link set dev {iface} mtu {max_mtu})",
                cfg.umem.frame_size
            ))
        )));
    }
    cfg.socket.multi_buffer = true;
    Ok(Some(format!(
        "multi-buffer: {iface} has MTU {mtu} > {max_mtu} (one {}-byte UMEM frame): sockets bound with XDP_USE_SG, frags-aware XDP program; a packet may take {} frames",
        cfg.umem.frame_size,
        (mtu + L2_OVERHEAD_BYTES).div_ceil(room.max(1))
    )))
}

/// The queues a run uses: `--queues N` gives 0..N-1, otherwise the one `--queue`.
pub fn queue_ids(x: &XskArgs) -> Vec<u32> {
    match x.queues {
        Some(n) => (0..n).collect(),
        None => vec![x.queue],
    }
}

/// The CPU of each queue's worker: `--cpus LIST` (one per queue), `--cpu` for one queue, and by
/// default with `--queues` one CPU per queue in turn; None: not pinned.
pub fn worker_cpus(x: &XskArgs) -> Vec<Option<usize>> {
    let q = queue_ids(x).len();
    match (&x.cpus, x.queues) {
        (Some(list), _) => list.0.iter().map(|&c| Some(c as usize)).collect(),
        (None, Some(_)) => (0..q).map(|i| Some(i % fastpath::workers::online_cpus())).collect(),
        (None, None) => vec![x.cpu],
    }
}

/// Checks every value that can be checked before touching the interface.
pub fn validate(x: &XskArgs, role: Role) -> CliResult<XskConfig> {
    let cfg = xsk_config(x);
    if role != Role::Drop {
        cfg.validate()?;
    }
    if x.xdp_mode == XdpModeArg::Skb && x.copy_mode == CopyModeArg::ZeroCopy {
        return Err(usage(anyhow!(
            "--copy-mode zero-copy needs the XDP program in the driver: use --xdp-mode native or auto"
        )));
    }
    if let Some(b) = x.tx_budget {
        if b < 32 || b > x.ring_size {
            return Err(usage(anyhow!(
                "--tx-budget {b} is not accepted: use 32..={} (at most the ring size; XDP_MAX_TX_SKB_BUDGET)",
                x.ring_size
            )));
        }
    }
    let n = fastpath::workers::online_cpus();
    if let Some(cpu) = x.cpu {
        if cpu >= n {
            return Err(usage(anyhow!("--cpu {cpu} is not accepted: this machine has CPUs 0..={}", n - 1)));
        }
    }
    if let Some(q) = x.queues {
        if q == 0 || q > 64 {
            return Err(usage(anyhow!("--queues {q} is not accepted: use 1..=64 (one socket and thread per queue)")));
        }
        if x.queue != 0 {
            return Err(usage(anyhow!(
                "--queue {} with --queues {q} is not accepted: --queues N uses queues 0..N-1",
                x.queue
            )));
        }
    }
    if let Some(list) = &x.cpus {
        let q = queue_ids(x).len();
        // parse_cpus checked each CPU is online and listed once.
        if list.0.len() != q {
            return Err(usage(anyhow!(
                "--cpus {} is not accepted: give one CPU per queue ({q})",
                list.0.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
            )));
        }
        if x.cpu.is_some() {
            return Err(usage(anyhow!("--cpu and --cpus are not accepted together: use --cpus LIST")));
        }
    }
    if x.shared_umem && role != Role::Drop {
        let q = queue_ids(x).len() as u32;
        if x.frame_count / q < 64 {
            return Err(usage(anyhow!(
                "--frame-count {} is not accepted with --shared-umem on {q} queues: at least 64 frames per queue",
                x.frame_count
            )));
        }
    }
    Ok(cfg)
}

impl Session {
    /// Attaches and binds in the current network namespace. On any error everything already
    /// attached is detached (the link fd is closed as the partial session drops). With `rules`
    /// (Role::Rx only) the classifier with those rules replaces the minimal redirect program.
    pub fn open_with(x: &XskArgs, role: Role, rules: Option<&Compiled>) -> CliResult<Session> {
        let cfg = validate(x, role)?;
        // The one resolution of -i on this path: everything below works by its ifindex.
        let iface = Iface::resolve(&x.iface)?;
        let choice = rules.map_or(RxChoice::Redirect, RxChoice::Rules);
        Self::open_checked(iface, cfg, x, role, choice, None)
    }

    /// As [`Session::open_with`] on `iface`, -i resolved by the caller.
    pub fn open_on(iface: Iface, x: &XskArgs, role: Role, prog: RxChoice<'_>) -> CliResult<Session> {
        let cfg = validate(x, role)?;
        Self::open_checked(iface, cfg, x, role, prog, None)
    }

    /// A transmit session ([`Role::Tx`]) on `iface` whose UMEM has TX metadata and whose ports
    /// write `plan`'s request in front of every frame. A request the driver cannot do is
    /// refused in one line naming the xsk feature (exit 6): launch time before anything is
    /// made; checksum and timestamp once the socket turned out zero-copy (copy mode does both
    /// in the kernel).
    pub fn open_tx_meta(iface: Iface, x: &XskArgs, plan: &TxMetaPlan) -> CliResult<Session> {
        let mut cfg = validate(x, Role::Tx)?;
        cfg.umem.tx_metadata_len = fastpath::xsk::TX_META_LEN;
        cfg.umem.tx_sw_csum = plan.sw_csum;
        cfg.validate()?;
        let driver = iface.dev().driver().unwrap_or_else(|_| "unknown".into());
        let xsk = fastpath::netdev::xdp_features::xdp_features(iface.ifindex()).ok().flatten().map(|f| f.xsk);
        let mut want = plan.req;
        if plan.launch_delay_ns.is_some() {
            want.launch_time_ns = Some(0);
        }
        want.check_driver(&x.iface, &driver, xsk.as_deref(), false)?;
        let mut s = Self::open_checked(iface, cfg, x, Role::Tx, RxChoice::Redirect, None)?;
        if s.ports.iter().any(|p| p.socket().zero_copy()) {
            want.check_driver(&x.iface, &driver, xsk.as_deref(), true)?;
        }
        for p in &mut s.ports {
            p.set_tx_meta(Some(plan.req), plan.launch_delay_ns)?;
        }
        if plan.req.timestamp && s.ports.iter().all(|p| !p.socket().zero_copy()) {
            s.info.notes.push(
                "tx timestamps in copy mode are the kernel's software ones: CLOCK_TAI when it freed the frame's skb, not the device's".into(),
            );
        }
        if plan.req.csum.is_some() && !plan.sw_csum {
            s.info.notes.push(
                "--tx-csum device: frames leave with a partial checksum (CHECKSUM_PARTIAL) for the device to complete; a veth does not complete it, so an AF_XDP receiver behind it sees the partial one".into(),
            );
        }
        s.info.tx_meta = Some(TxMetaInfo {
            tx_metadata_len: fastpath::xsk::TX_META_LEN,
            checksum: plan.req.csum.map(|_| if plan.sw_csum { "sw" } else { "device" }),
            csum_at: plan.req.csum.map(|c| (c.start, c.offset)),
            timestamp: plan.req.timestamp,
            launch_delay_ns: plan.launch_delay_ns,
            xsk_features: xsk,
        });
        Ok(s)
    }

    /// A receive session on `iface` without a program of its own: each queue's socket goes
    /// into `map`, an XSKMAP handed over by the process that attached the program
    /// (`--xsk-handoff`). Needs CAP_NET_RAW (and RLIMIT_MEMLOCK for the UMEM), nothing else.
    pub fn open_handoff(iface: Iface, x: &XskArgs, map: HandedXskMap) -> CliResult<Session> {
        let cfg = validate(x, Role::Rx)?;
        Self::open_checked(iface, cfg, x, Role::Rx, RxChoice::Redirect, Some(map))
    }

    fn open_checked(
        iface: Iface,
        mut cfg: XskConfig,
        x: &XskArgs,
        role: Role,
        choice: RxChoice<'_>,
        handed: Option<HandedXskMap>,
    ) -> CliResult<Session> {
        let dev = iface.dev();
        let mb_note = if role == Role::Drop {
            None
        } else {
            let mtu = dev.mtu().map_err(crate::error::kernel)?;
            let note = decide_multi_buffer(&x.iface, mtu, &mut cfg)?;
            if cfg.socket.multi_buffer && matches!(choice, RxChoice::RxMeta) {
                return Err(crate::error::usage(anyhow!(
                    "--rx-meta reads single-buffer frames: {} has MTU {mtu}, which needs multi-buffer sockets; lower its MTU or leave --rx-meta out",
                    x.iface
                )));
            }
            note
        };
        let queues = RxQueues::check(&iface, queue_ids(x))?;
        let driver = dev.driver().unwrap_or_else(|_| "unknown".into());
        let mut info = PathInfo {
            iface: x.iface.clone(),
            queue: queues.ids()[0],
            queues: queues.ids().to_vec(),
            driver,
            xdp_mode: None,
            copy_mode: None,
            shared_umem: x.shared_umem,
            rx_meta: false,
            need_wakeup: cfg.socket.need_wakeup,
            busy_poll: cfg.socket.busy_poll.is_some(),
            tx_skb_budget: None,
            multi_buffer: cfg.socket.multi_buffer,
            sockets: Vec::new(),
            tx_meta: None,
            wait: None,
            notes: mb_note.into_iter().collect(),
        };
        let mut opts = AttachOpts::mode(x.xdp_mode.mode()).force(x.force);
        if matches!(choice, RxChoice::RxMeta) {
            // A device-bound program runs in the driver only: the kernel refuses it in skb mode.
            if opts.mode == Some(fastpath::bpf::XdpMode::Skb) {
                return Err(crate::error::usage(anyhow!(
                    "--rx-meta needs native XDP (the driver's metadata kfuncs; a device-bound program cannot attach in skb mode): use --xdp-mode native or auto"
                )));
            }
            opts.mode = Some(fastpath::bpf::XdpMode::Native);
        }
        if role == Role::Drop {
            let a = XdpDrop::load()?.attach(&iface, opts)?;
            info.notes.extend(a.notes);
            info.xdp_mode = Some(a.mode.name());
            return Ok(Session { iface, prog: Prog::Drop(a.prog), ports: Vec::new(), stats_fds: Vec::new(), info });
        }
        let mut setup = QueueSetup::new(iface.clone(), queues);
        setup.config = cfg.clone();
        setup.shared_umem = x.shared_umem;
        setup.attach = opts;
        // Every frame a FILL ring holds goes on it; the rest serve TX.
        setup.fill_frames = if role == Role::Rx { u32::MAX } else { 0 };
        if let Some(map) = handed {
            let prog_id = match fastpath::bpf::query_xdp(iface.ifindex()).map_err(crate::error::kernel)? {
                Some(p) => p.id,
                None => {
                    return Err(crate::error::env(anyhow!(
                    "no XDP program on {}: the process that handed over the XSKMAP has not attached one (or has ended)",
                    x.iface
                )))
                }
            };
            let q = open_queues::<RxLoaded>(&setup, None)?;
            for p in &q.ports {
                let sock = p.socket();
                map.insert_xsk(sock.queue_id(), sock.as_raw_fd())?;
            }
            info.notes.push(format!(
                "no XDP program attached by this process: sockets in the XSKMAP handed over ({} slots)",
                map.max_entries()
            ));
            return Self::finish(iface, Prog::Handoff(map, prog_id), q.ports, info);
        }
        let prog = if role != Role::Rx {
            None
        } else {
            Some(match choice {
                RxChoice::Redirect => RxLoaded::Redirect(XskRedirect::load(
                    XskRedirectOpts::default().with_frags(cfg.socket.multi_buffer),
                )?),
                RxChoice::RxMeta => RxLoaded::Redirect(XskRedirect::load_rx_meta(&iface).map_err(|e| match &e {
                    e if e.is_load_unsupported() => {
                        crate::error::unsupported(anyhow!(
                            "--rx-meta: {} (driver {driver}) refused a device-bound XDP program (EOPNOTSUPP): its driver has no native XDP, which the RX metadata kfuncs need",
                            x.iface,
                            driver = iface.dev().driver().unwrap_or_default()
                        ))
                    }
                    _ => e.into(),
                })?),
                RxChoice::Rules(c) => {
                    let cls = Classifier::load()?;
                    cls.swap_in(c)?;
                    RxLoaded::Classifier(Box::new(cls))
                }
            })
        };
        let mut q = open_queues(&setup, prog)?;
        if matches!(choice, RxChoice::RxMeta) {
            info.rx_meta = true;
            for p in &mut q.ports {
                p.set_rx_meta(true);
            }
        }
        let prog = match q.attached {
            Some(a) => {
                info.notes.extend(a.notes);
                info.xdp_mode = Some(a.mode.name());
                match a.prog {
                    RxProg::Redirect(p) => Prog::Redirect(p),
                    RxProg::Classifier(c) => Prog::Classifier(c),
                }
            }
            None => Prog::None,
        };
        Self::finish(iface, prog, q.ports, info)
    }

    /// What the sockets obtained, into `info`; the stats descriptors.
    fn finish(iface: Iface, prog: Prog, ports: Vec<AfXdpPort>, mut info: PathInfo) -> CliResult<Session> {
        let first = ports[0].socket();
        info.copy_mode = Some(first.copy_mode_name());
        info.tx_skb_budget = first.tx_skb_budget();
        info.notes.extend(first.notes().iter().cloned());
        info.sockets = ports.iter().map(|p| p.info()).collect();
        let stats_fds = ports
            .iter()
            .map(|p| p.socket().try_clone_fd())
            .collect::<Result<Vec<_>, _>>()
            .map_err(crate::error::kernel)?;
        Ok(Session { iface, prog, ports, stats_fds, info })
    }

    /// The XDP program that feeds a `--xsk-handoff` session's sockets (its id when the session
    /// opened), if this is one.
    pub fn handoff_prog(&self) -> Option<u32> {
        match &self.prog {
            Prog::Handoff(_, id) => Some(*id),
            _ => None,
        }
    }

    /// `--rx-meta`: frames the RX-metadata program passed to the stack for want of room for
    /// the metadata; `None` on other sessions.
    pub fn rx_meta_no_room(&self) -> Option<u64> {
        match &self.prog {
            Prog::Redirect(p) => p.rx_meta_no_room().ok().flatten(),
            _ => None,
        }
    }

    /// The xdp_drop program, if this is an xdpdrop session.
    pub fn drop_prog(&self) -> Option<&XdpDrop> {
        match &self.prog {
            Prog::Drop(d) => Some(d),
            _ => None,
        }
    }
}

impl fastpath_lab::path::RxPath for Session {
    fn port(&mut self) -> Option<&mut AfXdpPort> {
        self.ports.last_mut()
    }
    fn xsk_stats(&self) -> Option<fastpath::xsk::XskStats> {
        use std::os::fd::AsFd;
        self.stats_fds.first().and_then(|f| fastpath::xsk::XskStats::read(f.as_fd()).ok())
    }
    fn drop_packets(&self) -> Option<u64> {
        self.drop_prog().map(|p| p.counters().map(|c| c.0).unwrap_or(0))
    }
    fn xdp_mode(&self) -> Option<&'static str> {
        self.info.xdp_mode
    }
    fn copy_mode(&self) -> Option<&'static str> {
        self.info.copy_mode
    }
}

/// The session a lab experiment (demo, compare) measures: native XDP mode, the defaults of
/// every other `XskArgs` value, copy mode when asked; [`Role::Drop`] for XDP_DROP only.
/// Errors: the session's, with their class.
pub fn open_for_lab(
    r: &fastpath_lab::path::RxRequest,
) -> Result<Box<dyn fastpath_lab::path::RxPath>, fastpath_lab::LabError> {
    let x = XskArgs {
        xdp_mode: XdpModeArg::Native,
        copy_mode: if r.copy { CopyModeArg::Copy } else { CopyModeArg::Auto },
        ..XskArgs::defaults(r.iface, Some(r.cpu))
    };
    let role = if r.drop_only { Role::Drop } else { Role::Rx };
    Ok(Box::new(Session::open_with(&x, role, r.rules)?))
}
