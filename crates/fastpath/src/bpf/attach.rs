//! Load, then attach: a program is loaded once ([`Loaded`]) and attached to an [`Iface`] with
//! [`AttachOpts`]; the mode fallback (native, then skb) is one method, [`XdpLink::attach`],
//! which tries each mode on the SAME program fd (as libbpf's `bpf_xdp_attach` and aya's
//! `Xdp::attach` do): a program loaded without `BPF_F_XDP_DEV_BOUND_ONLY` may be attached in
//! either mode, so nothing is reloaded for a fallback. The one load-time property that depends
//! on the interface, the frags-aware program (`BPF_F_XDP_HAS_FRAGS`, for multi-buffer), is
//! chosen before loading ([`super::XskRedirect::load`]) and is the same for both modes.

use std::os::fd::{BorrowedFd, OwnedFd};

use serde::Serialize;

use super::{BpfError, XdpLink, XdpMode};
use crate::netdev::Iface;

/// How to attach ([`XdpLink::attach`], and every program type's `attach`), in the manner of
/// libbpf's `*_opts` structs: `AttachOpts::default()` is native falling back to skb, refusing
/// to replace a program fastpath did not attach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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
                let mode = match super::query_xdp(iface.ifindex()) {
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
