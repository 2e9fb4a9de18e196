//! XDP programs: skeleton loading, attach / detach through a bpf_link, typed map access.
//!
//! Every program is attached with `BPF_LINK_CREATE` (kernel >= 5.9). The link's only fd is held
//! by [`XdpLink`]; closing it detaches the program, so the kernel detaches it for us on every
//! exit path, even SIGKILL (Documentation/bpf/bpf_design_QA.rst, "bpf_link"). Needs
//! CAP_NET_ADMIN and CAP_BPF (or root).

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use serde::Serialize;

use crate::netdev::Iface;
use crate::sys::{self, SysError};

#[allow(clippy::all, clippy::pedantic, missing_docs, clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]
mod skel {
    pub mod xsk_redirect {
        include!(concat!(env!("OUT_DIR"), "/xsk_redirect.skel.rs"));
    }
    pub mod xdp_drop {
        include!(concat!(env!("OUT_DIR"), "/xdp_drop.skel.rs"));
    }
    pub mod xdp_gen {
        include!(concat!(env!("OUT_DIR"), "/xdp_gen.skel.rs"));
    }
    pub mod classifier {
        include!(concat!(env!("OUT_DIR"), "/classifier.skel.rs"));
    }
    pub mod xdp_monitor {
        include!(concat!(env!("OUT_DIR"), "/xdp_monitor.skel.rs"));
    }
    pub mod xdp_redirect_cpu {
        include!(concat!(env!("OUT_DIR"), "/xdp_redirect_cpu.skel.rs"));
    }
    pub mod xdp_fwd {
        include!(concat!(env!("OUT_DIR"), "/xdp_fwd.skel.rs"));
    }
    pub mod xdp_capture {
        include!(concat!(env!("OUT_DIR"), "/xdp_capture.skel.rs"));
    }
}

mod attach;
pub mod capture;
pub mod classifier;
pub mod maps;
pub use attach::{Attach, AttachOpts, Attached, AttachedMode, Loaded};
pub mod cpumap;
pub mod fwd;
pub mod monitor;
pub use classifier::{AttachedClassifier, Classifier, LoadedClassifier, PinnedClassifier, SetIndex};
pub use cpumap::{CpuDist, CpumapConfig, RedirectCpu, RemoteAction};
pub use monitor::{MonitorFilter, XdpMonitor, XdpMonitorStats};

/// Errors of the BPF area.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// Loading a program into the kernel failed (verifier, privileges, missing feature).
    #[error("loading BPF program {prog} failed: {cause} (needs root or CAP_BPF + CAP_NET_ADMIN)")]
    Load {
        /// Program name.
        prog: &'static str,
        /// libbpf's error.
        cause: libbpf_rs::Error,
    },
    /// Someone else's XDP program is on the interface.
    #[error(
        "{iface} already has XDP program id {id} ({mode}) that fastpath did not attach; pass --force to replace it"
    )]
    Occupied {
        /// Interface.
        iface: String,
        /// Program id.
        id: u32,
        /// Its attach mode, as the kernel reports it.
        mode: AttachedMode,
    },
    /// The driver refuses the attach mode.
    #[error("{iface} refuses XDP in {mode} mode ({cause}); try --xdp-mode skb")]
    ModeUnsupported {
        /// Interface.
        iface: String,
        /// Mode asked.
        mode: XdpMode,
        /// The failed call.
        cause: SysError,
    },
    /// Native XDP refused because the MTU is too large for a program without XDP frags support
    /// (the kernel's ERANGE): one frame must fit one page with XDP headroom and skb_shared_info.
    #[error(
        "{iface} refuses native XDP: its MTU {mtu} is too large for a single-buffer XDP program ({limit}; {cause}); lower the MTU (ip link set dev {iface} mtu {max_hint}) or use --xdp-mode skb"
    )]
    MtuTooLarge {
        /// Interface.
        iface: String,
        /// Its MTU (0 if it could not be read).
        mtu: u32,
        /// The limit as known: "veth allows at most 3506 = PAGE_SIZE 4096 - ...".
        limit: String,
        /// The MTU to suggest.
        max_hint: String,
        /// The failed call.
        cause: SysError,
    },
    /// `--xdp-mode auto` tried every mode and each was refused.
    #[error("{iface}: no XDP attach mode worked: {errors}")]
    AllModesRefused {
        /// Interface.
        iface: String,
        /// `native: <error>; skb: <error>`.
        errors: String,
    },
    /// The kernel reports no program of ours on the interface after the attach call returned.
    #[error("{iface}: attach returned but the kernel reports {found} on ifindex {ifindex}, not our program id {ours}")]
    NotAttached {
        /// Interface.
        iface: String,
        /// Interface index.
        ifindex: u32,
        /// Our program id.
        ours: u32,
        /// What the kernel reports ("no XDP program" or "program id N").
        found: String,
    },
    /// The classifier pinned for an interface no longer runs there.
    #[error("the classifier pinned for {iface} is no longer attached: {what}")]
    Stale {
        /// Interface.
        iface: String,
        /// What happened, e.g. "the interface was deleted (and recreated as ifindex 7)".
        what: String,
    },
    /// A pin directory that a non-root user could have planted or changed.
    #[error(
        "refusing pin directory {path}: {reason} (it must be a real directory owned by root, not group/world writable)"
    )]
    UntrustedPinDir {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// A pin directory made by another fastpath version (its maps differ from this program's).
    #[error(
        "{dir}: pinned by another fastpath version (map {map} is missing or of another shape); run `fastpath filter unload` and load the rules again"
    )]
    OtherVersion {
        /// The pin directory.
        dir: String,
        /// The first map that did not fit.
        map: &'static str,
    },
    /// The running kernel lacks a feature this needs ([`crate::features`]).
    #[error(transparent)]
    Unsupported(#[from] crate::features::Unsupported),
    /// The kernel lacks a feature fastpath needs here (one the probes of [`crate::features`]
    /// do not cover, e.g. one tracepoint).
    #[error("{feature} is not available in this kernel: needs Linux >= {min_kernel}")]
    MissingFeature {
        /// What is missing, e.g. "tracepoint xdp:xdp_cpumap_kthread (tp_btf)".
        feature: String,
        /// The first kernel version that has it.
        min_kernel: &'static str,
    },
    /// Attaching a tracing program failed.
    #[error("attaching {tracepoint} failed: {cause} (needs root or CAP_BPF + CAP_PERFMON)")]
    AttachTracepoint {
        /// The section name, e.g. "tp_btf/xdp_exception".
        tracepoint: &'static str,
        /// libbpf's error.
        cause: libbpf_rs::Error,
    },
    /// A value the caller passed is out of range.
    #[error("{what} {value} is not accepted: {accepted}")]
    BadValue {
        /// The option or parameter, e.g. "--qsize".
        what: &'static str,
        /// The value given.
        value: String,
        /// What is accepted.
        accepted: String,
    },
    /// A failed call.
    #[error(transparent)]
    Sys(#[from] SysError),
    /// A map's key or value size is not the one this build expects (a skeleton out of step
    /// with [`crate::abi`], or a pin of another version).
    #[error("BPF map {map}: key/value size {key}/{value} bytes, expected {want_key}/{want_value}")]
    MapShape {
        /// Map name.
        map: &'static str,
        /// Its key size.
        key: usize,
        /// Its value size.
        value: usize,
        /// The key size expected.
        want_key: usize,
        /// The value size expected.
        want_value: usize,
    },
    /// A libbpf map operation failed.
    #[error("BPF map {map}: {cause}")]
    Map {
        /// Map name.
        map: &'static str,
        /// libbpf's error.
        cause: libbpf_rs::Error,
    },
}

/// Where to attach an XDP program: the request flags of `BPF_LINK_CREATE` / `bpf_xdp_attach`
/// (`XDP_FLAGS_DRV_MODE`, `XDP_FLAGS_SKB_MODE` of include/uapi/linux/if_link.h). What the kernel
/// reports back is an [`AttachedMode`]. Printed and serialized as "native" or "skb".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum XdpMode {
    /// In the driver (XDP_FLAGS_DRV_MODE): before any skb is allocated.
    Native,
    /// Generic XDP on the skb (XDP_FLAGS_SKB_MODE): works everywhere, after skb allocation.
    Skb,
}

impl BpfError {
    /// True if this error is the driver refusing one attach mode, so that `--xdp-mode auto`
    /// should try the next mode: anything but a foreign program in the way or a load failure.
    pub fn is_mode_refusal(&self) -> bool {
        matches!(self, BpfError::ModeUnsupported { .. } | BpfError::MtuTooLarge { .. } | BpfError::Sys(_))
    }
}

/// What the kernel says about a bpf_link (BPF_OBJ_GET_INFO_BY_FD).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkInfo {
    /// Link id.
    pub id: u32,
    /// Id of the program the link holds.
    pub prog_id: u32,
    /// True for an XDP link.
    pub is_xdp: bool,
    /// For an XDP link: the interface it is attached to, 0 once detached (the interface was
    /// deleted, or the link was detached with BPF_LINK_DETACH).
    pub ifindex: u32,
}

/// Reads a link's info.
///
/// # Errors
///
/// [`SysError`] from `bpf_obj_get_info_by_fd` (EBADF / EINVAL if `fd` is not a BPF link).
pub fn link_info(fd: std::os::fd::BorrowedFd<'_>) -> Result<LinkInfo, SysError> {
    let i = sys::bpf::link_info(fd)?;
    Ok(LinkInfo { id: i.id, prog_id: i.prog_id, is_xdp: i.is_xdp, ifindex: i.ifindex })
}

/// The MTU limit of native XDP without frags support, for the error message: exact for veth
/// (drivers/net/veth.c: SKB_WITH_OVERHEAD(PAGE_SIZE - VETH_XDP_HEADROOM) - ETH_HLEN), where
/// VETH_XDP_HEADROOM is XDP_PACKET_HEADROOM 256 and skb_shared_info takes 320 bytes on x86-64.
fn mtu_limit_text(driver: &str) -> (String, String) {
    let page = crate::sys::page_size();
    if driver == "veth" {
        let max = page.saturating_sub(256 + 320 + 14);
        (
            format!("veth allows at most {max} = PAGE_SIZE {page} - XDP headroom 256 - skb_shared_info 320 - Ethernet header 14"),
            max.to_string(),
        )
    } else {
        (format!("driver {driver} needs each frame to fit one {page}-byte page with XDP headroom"), "1500".into())
    }
}

impl XdpMode {
    /// "native" or "skb".
    pub fn name(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Skb => "skb",
        }
    }
    /// The request flag: `XDP_FLAGS_DRV_MODE` or `XDP_FLAGS_SKB_MODE`.
    pub fn flags(self) -> u32 {
        match self {
            XdpMode::Native => sys::bpf::XDP_FLAGS_DRV_MODE,
            XdpMode::Skb => sys::bpf::XDP_FLAGS_SKB_MODE,
        }
    }
}

impl std::fmt::Display for XdpMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The XDP program currently attached to an interface, as the kernel reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachedProg {
    /// Program id.
    pub id: u32,
    /// Its attach mode (`XDP_ATTACHED_*`).
    pub mode: AttachedMode,
}

/// Asks the kernel which XDP program is on `ifindex` (`bpf_xdp_query`, netlink). `None` if none.
///
/// # Errors
///
/// The failed call ([`SysError`]).
pub fn query_xdp(ifindex: u32) -> Result<Option<AttachedProg>, SysError> {
    use sys::bpf::{XDP_ATTACHED_DRV, XDP_ATTACHED_HW, XDP_ATTACHED_NONE, XDP_ATTACHED_SKB};
    let Some((id, attach_mode)) = sys::bpf::xdp_query(ifindex)? else { return Ok(None) };
    let mode = match attach_mode {
        XDP_ATTACHED_NONE => return Ok(None),
        XDP_ATTACHED_DRV => AttachedMode::Drv,
        XDP_ATTACHED_SKB => AttachedMode::Skb,
        XDP_ATTACHED_HW => AttachedMode::Hw,
        _ => AttachedMode::Multi,
    };
    Ok(Some(AttachedProg { id, mode }))
}

/// The name of BPF program `id` (at most 15 bytes, as the kernel keeps it), if it exists.
/// Needs CAP_SYS_ADMIN (BPF_PROG_GET_NEXT_ID).
pub fn prog_name(id: u32) -> Option<String> {
    libbpf_rs::query::ProgInfoIter::default().find(|p| p.id == id).map(|p| p.name.to_string_lossy().into_owned())
}

/// Removes whatever XDP program is on `ifindex` in this network namespace: a bpf_link is
/// detached with BPF_LINK_DETACH (kernel >= 5.9), a netlink-attached program with
/// `bpf_xdp_detach`. Link ids are global and ifindexes per namespace, so a link is only detached
/// if it is on this ifindex AND holds the program the kernel reports on it here.
///
/// # Errors
///
/// [`SysError`] if `bpf_xdp_query` fails (ENODEV if `ifindex` is gone) or BPF_LINK_DETACH of the
/// link found fails (EPERM without root, or CAP_NET_ADMIN + CAP_BPF). Links the caller may not open
/// are skipped, and a failed netlink detach is ignored.
pub fn force_detach(ifindex: u32) -> Result<(), SysError> {
    let Some(here) = query_xdp(ifindex)? else { return Ok(()) };
    // Links first: walk all link ids looking for the XDP link holding that program.
    let mut id = 0u32;
    while let Some(next) = sys::bpf::link_next_id(id) {
        id = next;
        let Some(fd) = sys::bpf::link_fd_by_id(id) else { continue };
        let Ok(info) = sys::bpf::link_info(fd.as_fd()) else { continue };
        if !info.is_xdp || info.prog_id != here.id {
            continue;
        }
        if info.ifindex == ifindex {
            sys::bpf::link_detach(fd.as_fd(), &format!("link id {id}"))?;
        }
    }
    sys::bpf::xdp_detach_netlink(ifindex);
    Ok(())
}

/// An attached XDP program. Dropping it (or the process dying) detaches it.
#[derive(Debug)]
pub struct XdpLink {
    link: OwnedFd,
    ifindex: u32,
    mode: XdpMode,
}

impl XdpLink {
    /// Attaches the loaded program `prog` to `iface` as `opts` asks: in `opts.mode`, or with
    /// `None` native and then skb if the driver refuses native, on this same program (nothing is
    /// reloaded for a fallback). Each mode is one BPF_LINK_CREATE; the kernel must then report
    /// our program on the interface, and the mode obtained is read back from it. Refuses with
    /// [`BpfError::Occupied`] if a program is already attached, unless `opts.force`. Needs
    /// root, or CAP_NET_ADMIN + CAP_BPF; Linux >= 5.9 (BPF_LINK_CREATE for XDP).
    ///
    /// # Errors
    ///
    /// [`BpfError::Occupied`]; [`BpfError::ModeUnsupported`] / [`BpfError::MtuTooLarge`] when
    /// native is refused (the one mode asked); [`BpfError::AllModesRefused`] listing each
    /// mode's error; [`BpfError::NotAttached`]; [`BpfError::Sys`] for a failed call (EPERM
    /// without the privileges).
    pub fn attach(prog: BorrowedFd<'_>, iface: &Iface, opts: AttachOpts) -> Result<Attached<Self>, BpfError> {
        attach::with_fallback(iface, opts, |m| Self::attach_mode(prog, iface, m, opts.force))
    }

    /// One BPF_LINK_CREATE in `mode` (see [`XdpLink::attach`]).
    fn attach_mode(prog: BorrowedFd<'_>, iface: &Iface, mode: XdpMode, force: bool) -> Result<Self, BpfError> {
        let ifindex = iface.ifindex();
        if let Some(p) = query_xdp(ifindex)? {
            if !force {
                return Err(BpfError::Occupied { iface: iface.name().to_string(), id: p.id, mode: p.mode });
            }
            force_detach(ifindex)?;
        }
        let link = sys::bpf::link_create_xdp(prog.as_raw_fd(), ifindex, mode.flags(), || {
            format!("bpf_link_create(BPF_XDP, {iface}, {} mode)", mode.name())
        });
        let link = match link {
            Ok(fd) => fd,
            Err(e) => {
                if e.errno == libc::ERANGE && mode == XdpMode::Native {
                    let driver = iface.dev().driver().unwrap_or_default();
                    let (limit, max_hint) = mtu_limit_text(&driver);
                    let mtu = iface.dev().mtu().unwrap_or(0);
                    return Err(BpfError::MtuTooLarge {
                        iface: iface.name().to_string(),
                        mtu,
                        limit,
                        max_hint,
                        cause: e,
                    });
                }
                if matches!(e.errno, libc::EOPNOTSUPP | libc::EINVAL) && mode == XdpMode::Native {
                    return Err(BpfError::ModeUnsupported { iface: iface.name().to_string(), mode, cause: e });
                }
                return Err(e.into());
            }
        };
        let me = Self { link, ifindex, mode };
        // Never trust the call alone: the kernel must report our program on the interface.
        let ours = link_info(me.link.as_fd())?.prog_id;
        match query_xdp(ifindex)? {
            Some(p) if p.id == ours => Ok(me),
            other => Err(BpfError::NotAttached {
                iface: iface.name().to_string(),
                ifindex,
                ours,
                found: other.map_or("no XDP program".into(), |p| format!("program id {}", p.id)),
            }),
        }
    }

    /// Id of the program this link holds.
    ///
    /// # Errors
    ///
    /// [`SysError`] if `bpf_obj_get_info_by_fd` on the link fails.
    pub fn prog_id(&self) -> Result<u32, SysError> {
        Ok(link_info(self.link.as_fd())?.prog_id)
    }

    /// The link's fd (to pin it).
    pub fn fd(&self) -> &OwnedFd {
        &self.link
    }

    /// The mode the program was attached in.
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// The interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Detaches now (same as drop, but reports errors).
    ///
    /// # Errors
    ///
    /// [`SysError`] if BPF_LINK_DETACH fails, except ENOLINK (already detached, e.g. the interface
    /// was deleted), which is success.
    pub fn detach(self) -> Result<(), SysError> {
        match sys::bpf::link_detach(self.link.as_fd(), "xdp link") {
            Err(e) if e.errno != libc::ENOLINK => Err(e),
            _ => Ok(()),
        }
    }
}

fn owned_prog_fd(fd: std::os::fd::BorrowedFd<'_>) -> Result<OwnedFd, SysError> {
    fd.try_clone_to_owned().map_err(|e| SysError { call: "dup(prog fd)".into(), errno: e.raw_os_error().unwrap_or(0) })
}

/// Loads the skeleton `$skel` (a module in `skel`) and returns (prog fd, map handles...).
macro_rules! load_skel {
    ($builder:ty, $name:literal, |$open:ident| $setup:block, |$loaded:ident| $extract:block) => {{
        let mut storage = MaybeUninit::uninit();
        let builder = <$builder>::default();
        #[allow(unused_mut)]
        let mut $open = builder.open(&mut storage).map_err(|cause| BpfError::Load { prog: $name, cause })?;
        $setup
        let $loaded = $open.load().map_err(|cause| BpfError::Load { prog: $name, cause })?;
        $extract
    }};
}

/// `xsk_redirect` attached to an interface: frames of queue q go to the XSK in slot q.
#[derive(Debug)]
pub struct XskRedirect {
    link: XdpLink,
    xsks: MapHandle,
}

/// How to load [`XskRedirect`] (load-time properties; the attach ones are [`AttachOpts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XskRedirectOpts {
    /// Sockets on each queue (sharing one UMEM's FILL and COMPLETION rings,
    /// [`crate::xsk::Sharing::SameQueue`]): queue q's frames go round robin (per CPU) to XSKMAP
    /// slots `q * socks_per_queue ..` (insert with [`XskRedirect::insert`] at those slots).
    /// 1..=64 (clamped).
    pub socks_per_queue: u32,
    /// The frags-aware program (`xdp.frags`, BPF_F_XDP_HAS_FRAGS, kernel >= 5.18) for
    /// multi-buffer sockets: it attaches natively whatever the MTU, where a single-buffer
    /// program is refused above one page. A load-time property: choosing it is choosing which
    /// program to load, the same for both attach modes.
    pub frags: bool,
}

impl Default for XskRedirectOpts {
    fn default() -> Self {
        Self { socks_per_queue: 1, frags: false }
    }
}

impl XskRedirect {
    /// Loads `bpf/xsk_redirect.bpf.c` as `opts` says (not attached: [`Loaded::attach`]).
    /// Needs root, or CAP_BPF (+ CAP_NET_ADMIN to attach).
    ///
    /// # Errors
    ///
    /// [`BpfError::Load`] (verifier, privileges, a kernel < 5.18 for `frags`),
    /// [`BpfError::Map`], [`BpfError::Sys`].
    pub fn load(opts: XskRedirectOpts) -> Result<Loaded<Self>, BpfError> {
        let XskRedirectOpts { socks_per_queue, frags } = opts;
        let (prog, xsks) = load_skel!(
            skel::xsk_redirect::XskRedirectSkelBuilder,
            "xsk_redirect",
            |open| {
                if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
                    ro.socks_per_queue = socks_per_queue.clamp(1, 64);
                }
                open.progs.xsk_redirect.set_autoload(!frags);
                open.progs.xsk_redirect_frags.set_autoload(frags);
            },
            |s| {
                let p = if frags { &s.progs.xsk_redirect_frags } else { &s.progs.xsk_redirect };
                let prog = owned_prog_fd(p.as_fd())?;
                let xsks = MapHandle::try_from(&s.maps.xsks).map_err(|cause| BpfError::Map { map: "xsks", cause })?;
                (prog, xsks)
            }
        );
        Ok(Loaded::new(prog, move |link| Self { link, xsks }))
    }

    /// Puts the AF_XDP socket `xsk_fd` into XSKMAP slot `queue_id`.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`xsks`) if the update is refused: E2BIG for `queue_id` beyond the
    /// XSKMAP's size, EOPNOTSUPP if `xsk_fd` is not an AF_XDP socket (kernel/bpf/xskmap.c).
    pub fn insert(&self, queue_id: u32, xsk_fd: RawFd) -> Result<(), BpfError> {
        self.xsks
            .update(&queue_id.to_ne_bytes(), &(xsk_fd as u32).to_ne_bytes(), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "xsks", cause })
    }

    /// The attachment.
    pub fn link(&self) -> &XdpLink {
        &self.link
    }
}

/// `xdp_drop` attached to an interface: counts per CPU and drops.
#[derive(Debug)]
pub struct XdpDrop {
    link: XdpLink,
    stats: MapHandle,
}

impl XdpDrop {
    /// Loads `bpf/xdp_drop.bpf.c` (not attached: [`Loaded::attach`]). Needs root, or CAP_BPF.
    ///
    /// # Errors
    ///
    /// [`BpfError::Load`], [`BpfError::Map`], [`BpfError::Sys`].
    pub fn load() -> Result<Loaded<Self>, BpfError> {
        let (prog, stats) = load_skel!(skel::xdp_drop::XdpDropSkelBuilder, "xdp_drop", |open| {}, |s| {
            let prog = owned_prog_fd(s.progs.xdp_drop.as_fd())?;
            let stats =
                MapHandle::try_from(&s.maps.drop_stats).map_err(|cause| BpfError::Map { map: "drop_stats", cause })?;
            (prog, stats)
        });
        Ok(Loaded::new(prog, move |link| Self { link, stats }))
    }

    /// (packets, bytes) dropped so far, summed over CPUs.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`drop_stats`) if the per-CPU lookup fails.
    pub fn counters(&self) -> Result<(u64, u64), BpfError> {
        let per_cpu = self
            .stats
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "drop_stats", cause })?
            .unwrap_or_default();
        Ok(per_cpu
            .iter()
            .filter_map(|v| crate::abi::read::<crate::abi::fp_pkt_stats>(v))
            .fold((0, 0), |(p, b), c| (p + c.packets, b + c.bytes)))
    }

    /// The attachment.
    pub fn link(&self) -> &XdpLink {
        &self.link
    }
}

/// The live-frames generator program (`bpf/xdp_gen.bpf.c`), loaded but not attached: it runs
/// through BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES (kernel >= 5.18,
/// Documentation/bpf/bpf_prog_run.rst) and XDP_REDIRECTs every frame out of one interface.
#[derive(Debug)]
pub struct XdpGen {
    prog: OwnedFd,
    seq: MapHandle,
    pace: MapHandle,
    hdr: MapHandle,
}

impl XdpGen {
    /// Loads the program with `out_ifindex` (in the calling thread's network namespace) as the
    /// interface every frame is sent out of.
    ///
    /// # Errors
    ///
    /// [`BpfError::Unsupported`] if the kernel has no live frames
    /// ([`Feature::LiveFrames`](crate::features::Feature::LiveFrames), Linux >= 5.18; probed once
    /// per process by [`crate::features::probe`]); [`BpfError::Load`] if loading fails (needs
    /// root, or CAP_BPF + CAP_NET_ADMIN); [`BpfError::Map`] / [`BpfError::Sys`] if a map handle
    /// or the program fd cannot be taken.
    pub fn load(out_ifindex: u32) -> Result<Self, BpfError> {
        Self::load_flows(out_ifindex, None)
    }

    /// As [`XdpGen::load`], and with `flows` every frame carries one of its 5-tuples: frame
    /// `seq` of a CPU gets flow `(seq - 1) % n` ([`Flows`](crate::packet::Flows): the source
    /// address's last byte and the source port rewritten, IPv4 header and UDP checksums fixed
    /// incrementally in the program). Frames may be IPv4 or IPv6 (as
    /// [`build_udp_frame`](crate::packet::build_udp_frame) makes them). Same errors.
    ///
    /// # Errors
    ///
    /// As [`XdpGen::load`].
    pub fn load_flows(out_ifindex: u32, flows: Option<&crate::packet::Flows>) -> Result<Self, BpfError> {
        crate::features::check(crate::features::Feature::LiveFrames)?;
        let (prog, seq, pace, hdr) = load_skel!(
            skel::xdp_gen::XdpGenSkelBuilder,
            "xdp_gen",
            |open| {
                if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
                    ro.out_ifindex = out_ifindex;
                    if let Some(f) = flows {
                        let [k0, k1, k2] = f.keys();
                        ro.flows = f.n();
                        ro.flow_k0 = k0;
                        ro.flow_k1 = k1;
                        ro.flow_k2 = k2;
                    }
                }
            },
            |s| {
                let prog = owned_prog_fd(s.progs.xdp_gen.as_fd())?;
                let seq =
                    MapHandle::try_from(&s.maps.gen_seq).map_err(|cause| BpfError::Map { map: "gen_seq", cause })?;
                let pace =
                    MapHandle::try_from(&s.maps.gen_pace).map_err(|cause| BpfError::Map { map: "gen_pace", cause })?;
                let hdr =
                    MapHandle::try_from(&s.maps.gen_hdr).map_err(|cause| BpfError::Map { map: "gen_hdr", cause })?;
                (prog, seq, pace, hdr)
            }
        );
        Ok(Self { prog, seq, pace, hdr })
    }

    /// Paces the frames the program sends on CPU `cpu` to one per `interval_ns` (0: unpaced),
    /// per frame inside the program: a run that is not yet due is XDP_DROPped (its page goes
    /// back to the run's page pool) and not counted in [`XdpGen::per_cpu_seq`]. Resets the
    /// CPU's window counts ([`XdpGen::pace_windows`]). `cpu` < 256 (`FP_GEN_MAX_CPUS`).
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`gen_pace`) if the update is refused, e.g. E2BIG for `cpu` >= 256.
    pub fn set_pace(&self, cpu: usize, interval_ns: u64) -> Result<(), BpfError> {
        let v = crate::abi::fp_gen_pace { interval_ns, ..Default::default() };
        self.pace
            .update(&(cpu as u32).to_ne_bytes(), bytemuck::bytes_of(&v), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "gen_pace", cause })
    }

    /// CPU `cpu`'s paced 1 ms windows since [`XdpGen::set_pace`]: (whole windows, of those
    /// within 20% of the nominal rate). A window with no frame counts, as not within.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`gen_pace`) if the lookup call fails; a `cpu` >= 256 reads as (0, 0).
    pub fn pace_windows(&self, cpu: usize) -> Result<(u64, u64), BpfError> {
        let v = self
            .pace
            .lookup(&(cpu as u32).to_ne_bytes(), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "gen_pace", cause })?
            .and_then(|b| crate::abi::read::<crate::abi::fp_gen_pace>(&b))
            .unwrap_or_default();
        Ok((v.windows, v.within_20pct))
    }

    /// Runs the program `repeat` times over `frame` in live-frames mode on the calling CPU,
    /// `batch_size` frames per kernel batch (1..=256, the kernel's limit). Each run sends one frame.
    ///
    /// Each call sets up and tears down a page pool. Measured on a 6.18 VM (strace -T):
    /// back-to-back calls cost ~24 ms each beyond their frames however few they carry
    /// (mostly waiting, not CPU; a lone call of up to ~100 frames every 50 ms or more returns
    /// in ~0.1 ms). So callers pass large `repeat` values, pace inside the program
    /// ([`XdpGen::set_pace`]) and count frames with [`XdpGen::per_cpu_seq`]. A signal interrupts the call: it then returns
    /// `Ok(false)` (the kernel's EINTR) having sent part of the frames; `Ok(true)` means all.
    ///
    /// # Errors
    ///
    /// [`SysError`] (errno EIO) if the `gen_hdr` map update fails; the failed BPF_PROG_RUN
    /// otherwise: EINVAL for a `batch_size` above 256 or a frame the kernel refuses, EPERM without
    /// root or CAP_BPF + CAP_NET_ADMIN. EINTR is not an error (`Ok(false)`).
    pub fn run(&self, frame: &[u8], repeat: u32, batch_size: u32) -> Result<bool, SysError> {
        // What the program puts back in every frame (struct fp_gen_hdr): MACs and TTL.
        if frame.len() >= 34 {
            let mut h = crate::abi::fp_gen_hdr { set: 1, ..Default::default() };
            h.macs.copy_from_slice(&frame[..12]);
            h.ttl = if frame[12..14] == [0x86, 0xdd] { frame.get(21).copied().unwrap_or(64) } else { frame[22] };
            self.hdr
                .update(&0u32.to_ne_bytes(), bytemuck::bytes_of(&h), MapFlags::ANY)
                .map_err(|e| SysError { call: format!("BPF map gen_hdr update: {e}"), errno: libc::EIO })?;
        }
        let r = sys::bpf::prog_test_run(
            self.prog.as_fd(),
            frame,
            repeat,
            sys::bpf::BPF_F_TEST_XDP_LIVE_FRAMES,
            batch_size,
            || {
                format!("bpf_prog_test_run(xdp_gen, BPF_F_TEST_XDP_LIVE_FRAMES, repeat={repeat}, batch_size={batch_size}, len={})", frame.len())
            },
        );
        match r {
            Err(e) if e.errno == libc::EINTR => return Ok(false),
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        Ok(true)
    }

    /// Sum of [`XdpGen::per_cpu_seq`]: frames generated on all CPUs since load.
    ///
    /// # Errors
    ///
    /// As [`XdpGen::per_cpu_seq`].
    pub fn total_sent(&self) -> Result<u64, BpfError> {
        Ok(self.per_cpu_seq()?.iter().sum())
    }

    /// Per-CPU sequence numbers so far (index = CPU): the count of frames each CPU generated.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`gen_seq`) if the per-CPU lookup fails.
    pub fn per_cpu_seq(&self) -> Result<Vec<u64>, BpfError> {
        let v = self
            .seq
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "gen_seq", cause })?
            .unwrap_or_default();
        // The value is a plain __u64 (bpf/xdp_gen.bpf.c); a short value reads as 0.
        Ok(v.iter().map(|b| crate::abi::read::<u64>(b).unwrap_or(0)).collect())
    }
}

/// True if running as root or with CAP_NET_ADMIN and CAP_BPF (cap numbers 12 and 39).
pub fn have_privileges() -> bool {
    sys::geteuid() == 0 || (sys::has_capability(12) && sys::has_capability(39))
}
