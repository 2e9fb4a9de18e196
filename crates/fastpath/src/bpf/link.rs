//! Attaching an XDP program to an interface, and asking the kernel what is attached.
//!
//! Every program is attached with `BPF_LINK_CREATE` (kernel >= 5.9). The link's only fd is held
//! by [`XdpLink`]; closing it detaches the program, so the kernel detaches it for us on every
//! exit path, even SIGKILL (Documentation/bpf/bpf_design_QA.rst, "bpf_link").
//!
//! Load, then attach: a program is loaded once ([`Loaded`]) and attached to an [`Iface`] with
//! [`AttachOpts`]; the mode fallback (native, then skb) is one method, [`XdpLink::attach`],
//! which tries each mode on the SAME program fd (as libbpf's `bpf_xdp_attach` and aya's
//! `Xdp::attach` do): a program loaded without `BPF_F_XDP_DEV_BOUND_ONLY` may be attached in
//! either mode, so nothing is reloaded for a fallback. The one load-time property that depends
//! on the interface, the frags-aware program (`BPF_F_XDP_HAS_FRAGS`, for multi-buffer), is
//! chosen before loading ([`super::XskRedirect::load`]) and is the same for both modes.
//!
//! Also here: the link query ([`link_info`]), the interface query ([`query_xdp`],
//! [`prog_name`]) and [`force_detach`]. Needs CAP_NET_ADMIN and CAP_BPF (or root).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use serde::Serialize;

use super::BpfError;
use crate::netdev::Iface;
use crate::sys::{self, SysError};

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

/// How to attach ([`XdpLink::attach`], and every program type's `attach`), in the manner of
/// libbpf's `*_opts` structs: `AttachOpts::default()` is native falling back to skb, refusing
/// to replace a program fastpath did not attach.
///
/// # Examples
///
/// ```
/// use fastpath::bpf::{AttachOpts, XdpMode};
///
/// let auto = AttachOpts::default(); // native, else skb; never replacing another program
/// assert_eq!((auto.mode, auto.force), (None, false));
/// let skb = AttachOpts::mode(Some(XdpMode::Skb)).force(true); // generic XDP, replacing
/// assert_eq!((skb.mode, skb.force), (Some(XdpMode::Skb), true));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttachOpts {
    /// The one mode to attach in (`XDP_FLAGS_DRV_MODE` or `XDP_FLAGS_SKB_MODE`); `None`: native,
    /// and skb if the driver refuses native.
    pub mode: Option<XdpMode>,
    /// Replace whatever XDP program is on the interface (else [`BpfError::Occupied`]).
    pub force: bool,
}

impl AttachOpts {
    /// `mode` (None: native then skb), not forcing.
    pub fn mode(mode: Option<XdpMode>) -> Self {
        Self { mode, force: false }
    }

    /// The same, forcing or not.
    pub fn force(self, force: bool) -> Self {
        Self { force, ..self }
    }
}

/// What the kernel reports attached on an interface (`XDP_ATTACHED_*` of
/// include/uapi/linux/if_link.h, as `bpf_xdp_query` returns it). Printed and serialized as
/// "native", "skb", "hw" or "multi".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachedMode {
    /// `XDP_ATTACHED_DRV`: in the driver.
    Drv,
    /// `XDP_ATTACHED_SKB`: generic XDP.
    Skb,
    /// `XDP_ATTACHED_HW`: offloaded to the NIC.
    Hw,
    /// `XDP_ATTACHED_MULTI`: programs in more than one mode.
    Multi,
}

impl AttachedMode {
    /// "native", "skb", "hw" or "multi".
    pub fn name(self) -> &'static str {
        match self {
            AttachedMode::Drv => "native",
            AttachedMode::Skb => "skb",
            AttachedMode::Hw => "hw",
            AttachedMode::Multi => "multi",
        }
    }

    /// The request mode that gives this attach mode, if any.
    pub fn xdp_mode(self) -> Option<XdpMode> {
        match self {
            AttachedMode::Drv => Some(XdpMode::Native),
            AttachedMode::Skb => Some(XdpMode::Skb),
            AttachedMode::Hw | AttachedMode::Multi => None,
        }
    }
}

impl std::fmt::Display for AttachedMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for AttachedMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A program attached, and what was obtained.
#[derive(Debug)]
pub struct Attached<T> {
    /// The program; dropping it detaches it.
    pub prog: T,
    /// The mode the kernel reports after attaching (never merely the one asked for).
    pub mode: XdpMode,
    /// Fallbacks taken, one line each.
    pub notes: Vec<String>,
}

impl<T> Attached<T> {
    /// The same attachment holding `f(prog)`.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Attached<U> {
        Attached { prog: f(self.prog), mode: self.mode, notes: self.notes }
    }
}

/// A program loaded into the kernel and not attached yet (what a program type's `load`
/// returns); [`Loaded::attach`] attaches it, with mode fallback, and gives the program type.
pub struct Loaded<T> {
    prog: OwnedFd,
    make: Box<dyn FnOnce(XdpLink) -> T + Send>,
}

impl<T> std::fmt::Debug for Loaded<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded").field("prog", &self.prog).finish_non_exhaustive()
    }
}

impl<T> Loaded<T> {
    /// `prog` (its fd), to become `make(link)` once attached.
    pub(crate) fn new(prog: OwnedFd, make: impl FnOnce(XdpLink) -> T + Send + 'static) -> Self {
        Self { prog, make: Box::new(make) }
    }

    /// The program's fd.
    pub fn prog_fd(&self) -> BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.prog.as_fd()
    }

    /// Attaches the loaded program to `iface` as `opts` asks ([`XdpLink::attach`]: one mode,
    /// or native then skb on this same program). Needs root, or CAP_NET_ADMIN + CAP_BPF;
    /// Linux >= 5.9 (BPF_LINK_CREATE for XDP).
    ///
    /// # Errors
    ///
    /// As [`XdpLink::attach`]: [`BpfError::Occupied`], [`BpfError::ModeUnsupported`],
    /// [`BpfError::MtuTooLarge`], [`BpfError::AllModesRefused`], [`BpfError::NotAttached`],
    /// [`BpfError::Sys`] (EPERM without the privileges).
    pub fn attach(self, iface: &Iface, opts: AttachOpts) -> Result<Attached<T>, BpfError> {
        use std::os::fd::AsFd;
        let a = XdpLink::attach(self.prog.as_fd(), iface, opts)?;
        Ok(a.map(self.make))
    }
}

/// A loaded program that can be attached: [`Loaded`], [`super::LoadedClassifier`], or a caller's
/// choice between them (what `io::afxdp::open_queues` takes).
pub trait Attach {
    /// What the attached program is.
    type Output;
    /// Attaches as `opts` asks, on the already loaded program ([`XdpLink::attach`]).
    ///
    /// # Errors
    ///
    /// As [`XdpLink::attach`].
    fn attach_to(self, iface: &Iface, opts: AttachOpts) -> Result<Attached<Self::Output>, BpfError>;
}

impl<T> Attach for Loaded<T> {
    type Output = T;
    fn attach_to(self, iface: &Iface, opts: AttachOpts) -> Result<Attached<T>, BpfError> {
        self.attach(iface, opts)
    }
}

#[cfg(feature = "classifier")]
impl Attach for super::LoadedClassifier {
    type Output = super::AttachedClassifier;
    fn attach_to(self, iface: &Iface, opts: AttachOpts) -> Result<Attached<Self::Output>, BpfError> {
        self.attach(iface, opts)
    }
}

/// Tries each mode of `opts` in turn with `attach_one` (called once per mode, on the same
/// loaded program); with more than one mode, refusals (see [`BpfError::is_mode_refusal`]) go on
/// to the next mode and are returned as notes, and if every mode is refused the error lists
/// each mode's error. Other errors return at once. The mode obtained is read back from the
/// kernel (`bpf_xdp_query`).
pub(super) fn with_fallback<T>(
    iface: &Iface,
    opts: AttachOpts,
    mut attach_one: impl FnMut(XdpMode) -> Result<T, BpfError>,
) -> Result<Attached<T>, BpfError> {
    let modes: &[XdpMode] = match opts.mode {
        Some(XdpMode::Native) => &[XdpMode::Native],
        Some(XdpMode::Skb) => &[XdpMode::Skb],
        None => &[XdpMode::Native, XdpMode::Skb],
    };
    let mut errors: Vec<String> = Vec::new();
    for &m in modes {
        match attach_one(m) {
            Ok(prog) => {
                let notes = errors.iter().map(|e| format!("{e}; fell back to {} mode", m.name())).collect();
                let mode = match query_xdp(iface.ifindex()) {
                    Ok(Some(p)) => p.mode.xdp_mode().unwrap_or(m),
                    _ => m,
                };
                return Ok(Attached { prog, mode, notes });
            }
            Err(e) if modes.len() > 1 && e.is_mode_refusal() => errors.push(format!("{}: {e}", m.name())),
            Err(e) => return Err(e),
        }
    }
    Err(BpfError::AllModesRefused { iface: iface.name().to_string(), errors: errors.join("; ") })
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
///
/// # Examples
///
/// A program loaded elsewhere (libbpf, aya, ...) attached by its fd, in native mode only:
///
/// ```no_run
/// use std::os::fd::BorrowedFd;
///
/// use fastpath::bpf::{AttachOpts, BpfError, XdpLink, XdpMode};
/// use fastpath::netdev::Iface;
///
/// fn attach_native(prog: BorrowedFd<'_>, iface: &Iface) -> Result<XdpLink, BpfError> {
///     let attached = XdpLink::attach(prog, iface, AttachOpts::mode(Some(XdpMode::Native)))?;
///     let link = attached.prog;
///     println!("program {} on ifindex {} ({})", link.prog_id()?, link.ifindex(), link.mode());
///     Ok(link) // dropping it detaches the program
/// }
/// ```
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
    /// [`BpfError::Occupied`] if a program is already attached ([`BpfError::PinnedClassifier`]
    /// if it is fastpath's classifier pinned for this interface), unless `opts.force`. Needs
    /// root, or CAP_NET_ADMIN + CAP_BPF; Linux >= 5.9 (BPF_LINK_CREATE for XDP).
    ///
    /// # Errors
    ///
    /// [`BpfError::Occupied`], [`BpfError::PinnedClassifier`]; [`BpfError::ModeUnsupported`] /
    /// [`BpfError::MtuTooLarge`] when native is refused (the one mode asked); [`BpfError::AllModesRefused`] listing each
    /// mode's error; [`BpfError::NotAttached`]; [`BpfError::Sys`] for a failed call (EPERM
    /// without the privileges).
    pub fn attach(prog: BorrowedFd<'_>, iface: &Iface, opts: AttachOpts) -> Result<Attached<Self>, BpfError> {
        with_fallback(iface, opts, |m| Self::attach_mode(prog, iface, m, opts.force))
    }

    /// One BPF_LINK_CREATE in `mode` (see [`XdpLink::attach`]).
    fn attach_mode(prog: BorrowedFd<'_>, iface: &Iface, mode: XdpMode, force: bool) -> Result<Self, BpfError> {
        let ifindex = iface.ifindex();
        if let Some(p) = query_xdp(ifindex)? {
            if !force {
                // Without the classifier feature, fastpath's pinned classifier is Occupied.
                #[cfg(feature = "classifier")]
                let dir = super::classifier::pin_dir(iface.name());
                #[cfg(feature = "classifier")]
                if super::classifier::pinned_prog_id(&dir) == Some(p.id) {
                    let dir = dir.display().to_string();
                    return Err(BpfError::PinnedClassifier {
                        iface: iface.name().to_string(),
                        id: p.id,
                        mode: p.mode,
                        dir,
                    });
                }
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
