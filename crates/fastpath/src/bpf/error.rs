//! [`BpfError`]: the errors of the BPF area (loading, attaching, pinning, maps), each naming
//! the interface, program or map and the kernel's answer; which command-line option to use
//! instead is the caller's to say.

use super::{AttachedMode, XdpMode};
use crate::sys::SysError;

/// Errors of the BPF area.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    #[error("{iface} already has XDP program id {id} ({mode}) that fastpath did not attach")]
    Occupied {
        /// Interface.
        iface: String,
        /// Program id.
        id: u32,
        /// Its attach mode, as the kernel reports it.
        mode: AttachedMode,
    },
    /// The XDP program on the interface is fastpath's own classifier, left attached and pinned
    /// by `fastpath filter load --detach` ([`super::classifier::pinned_prog_id`] matches it).
    #[error("fastpath's classifier pinned at {dir} runs on {iface} (XDP program id {id}, {mode})")]
    PinnedClassifier {
        /// Interface.
        iface: String,
        /// Program id.
        id: u32,
        /// Its attach mode, as the kernel reports it.
        mode: AttachedMode,
        /// Its pin directory ([`super::classifier::pin_dir`]).
        dir: String,
    },
    /// The driver refuses the attach mode.
    #[error("{iface} refuses XDP in {mode} mode ({cause})")]
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
        "{iface} refuses native XDP: its MTU {mtu} is too large for a single-buffer XDP program ({limit}; {cause}); an MTU of {max_hint} fits"
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
        /// What the value is, e.g. "CPUMAP queue size" (the library names no command-line option).
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

impl BpfError {
    /// True if this error is the driver refusing one attach mode, so that `--xdp-mode auto`
    /// should try the next mode: anything but a foreign program in the way or a load failure.
    pub fn is_mode_refusal(&self) -> bool {
        matches!(self, BpfError::ModeUnsupported { .. } | BpfError::MtuTooLarge { .. } | BpfError::Sys(_))
    }

    /// True if the kernel refused to load a program with EOPNOTSUPP (for a device-bound
    /// program: the device's driver has no native XDP).
    pub fn is_load_unsupported(&self) -> bool {
        matches!(self, BpfError::Load { cause, .. } if cause.kind() == libbpf_rs::ErrorKind::Unsupported)
    }
}
