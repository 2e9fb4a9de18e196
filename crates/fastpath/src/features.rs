//! Which AF_XDP / XDP features the running kernel has: probed lazily, once per process, cached.
//!
//! [`check`] and [`status`] answer for one feature and run only that feature's probe group (the
//! AF_XDP socket probes, the live-frames run, the tracepoints, or the NAPI requests), the first time one of its
//! features is asked for (a [`OnceLock`] per group, as libbpf's `feat_supported(cache, id)`);
//! [`probe`] answers for all of them (`fastpath probe`, `doctor`). Each probe tries the real thing on a harmless object and reads the
//! kernel's answer; the kernel version decides only where a probe cannot run (no privilege),
//! and [`FeatureStatus::how`] says which it was.
//!
//! | feature | min kernel | probe |
//! |---|---|---|
//! | [`Feature::NeedWakeup`] | 5.4 | `getsockopt(SOL_XDP, XDP_MMAP_OFFSETS)` on an unbound AF_XDP socket writes the v2 layout (128 bytes, with `flags` per ring) |
//! | [`Feature::BusyPoll`] | 5.11 | `setsockopt(SOL_SOCKET, SO_PREFER_BUSY_POLL, 1)` and `SO_BUSY_POLL_BUDGET` on that socket (a UDP socket without CAP_NET_RAW): anything but ENOPROTOOPT |
//! | [`Feature::XdpOptions`] | 5.3 | `getsockopt(SOL_XDP, XDP_OPTIONS)` on that socket |
//! | [`Feature::SharedUmem`] | 4.18 | a socket with a UMEM bound in copy mode to `lo` queue 0, a second one bound with `XDP_SHARED_UMEM` to the same queue |
//! | [`Feature::SharedUmemOtherQueue`] | 5.10 | a third socket with its own FILL/COMPLETION rings bound with `XDP_SHARED_UMEM` to `lo` of a private network namespace (another device) |
//! | [`Feature::LiveFrames`] | 5.18 | a 2-instruction XDP program (`return XDP_DROP`) run once with `BPF_F_TEST_XDP_LIVE_FRAMES` over a 64-byte zero frame |
//! | [`Feature::MaxTxSkbBudget`] | 6.17 | `setsockopt(SOL_XDP, XDP_MAX_TX_SKB_BUDGET, 32)` on a socket with a 64-entry TX ring |
//! | [`Feature::MultiBuffer`] | 6.6 | a socket bound with `XDP_COPY \| XDP_USE_SG` to `lo` queue 0 (EBUSY also proves the flag was accepted: flags are checked first) |
//! | [`Feature::NapiGet`] | 6.9 | the `netdev` generic netlink family's `napi-get` dump of ifindex 1 (`lo`, no NAPI): answered, or EOPNOTSUPP |
//! | [`Feature::NapiSet`] | 6.13 | `napi-set` of NAPI id 0 (never a NAPI) with `defer-hard-irqs`: ENOENT proves the command (EOPNOTSUPP: none) |
//! | [`Feature::IrqSuspend`] | 6.14 | the same with `irq-suspend-timeout` only: ENOENT proves the attribute (EINVAL: unknown to the op's policy) |
//! | [`Feature::XdpTracepoints`] | 5.5 | `/sys/kernel/btf/vmlinux` has `btf_trace_xdp_exception`, and a `tp_btf` program on it attaches with `bpf_raw_tracepoint_open` |
//!
//! Fallbacks to the kernel version (`uname -r`): the AF_XDP probes when `socket(AF_XDP)` is
//! refused with EPERM/EACCES (needs CAP_NET_RAW); the live-frames and tracepoint probes when
//! loading a program is refused with EPERM (needs CAP_BPF); the other-queue shared UMEM bind when
//! `unshare(CLONE_NEWNET)` is refused (needs CAP_SYS_ADMIN): then `setsockopt(XDP_UMEM_FILL_RING)`
//! on a socket without a UMEM of its own decides, which only 5.10's buffer pools accept; and
//! `lo` queue 0 held by another AF_XDP socket for 200 ms (EBUSY) for the same-queue probe.
//!
//! Nothing is left behind: every socket, program and namespace is closed before [`probe`]
//! returns; no frame reaches any interface (the live-frames program drops its one frame).
//!
//! Kernel sources: include/uapi/linux/if_xdp.h, net/xdp/xsk.c (`xsk_setsockopt`,
//! `xsk_getsockopt`, `xsk_bind`), include/uapi/asm-generic/socket.h, net/core/sock.c,
//! Documentation/networking/af_xdp.rst, Documentation/bpf/bpf_prog_run.rst,
//! net/bpf/test_run.c, include/trace/events/xdp.h.

use std::fmt::Write as _;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use serde::Serialize;

#[cfg(feature = "netlink")]
use crate::netdev::genl::{
    Netdev, NAPI_A_DEFER_HARD_IRQS, NAPI_A_ID, NAPI_A_IFINDEX, NAPI_A_IRQ_SUSPEND_TIMEOUT, NAPI_GET, NAPI_SET,
};
use crate::sys::probe::{self as sp, Insn, ProgSpec};
use crate::sys::uapi::XDP_MAX_TX_SKB_BUDGET;
use crate::sys::{self, SysError};
use libc::{SO_BUSY_POLL_BUDGET, SO_PREFER_BUSY_POLL};

/// A kernel feature fastpath may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    /// AF_XDP `XDP_USE_NEED_WAKEUP` and the ring `flags` word (XDP_RING_NEED_WAKEUP), >= 5.4.
    NeedWakeup,
    /// Preferred busy polling: `SO_PREFER_BUSY_POLL` and `SO_BUSY_POLL_BUDGET`, >= 5.11.
    BusyPoll,
    /// `getsockopt(SOL_XDP, XDP_OPTIONS)`: whether a bound socket got zero-copy, >= 5.3.
    XdpOptions,
    /// `XDP_SHARED_UMEM`: sockets on the same device and queue share one UMEM and its
    /// FILL/COMPLETION rings, >= 4.18.
    SharedUmem,
    /// `XDP_SHARED_UMEM` onto another queue or device, each socket with its own FILL and
    /// COMPLETION rings (buffer pools), >= 5.10.
    SharedUmemOtherQueue,
    /// BPF_PROG_RUN with `BPF_F_TEST_XDP_LIVE_FRAMES`: the in-kernel generator, >= 5.18.
    LiveFrames,
    /// `setsockopt(SOL_XDP, XDP_MAX_TX_SKB_BUDGET)`: copy-mode TX frames per sendmsg, >= 6.17.
    MaxTxSkbBudget,
    /// AF_XDP multi-buffer: bind flag `XDP_USE_SG` (frames over several UMEM chunks), >= 6.6.
    MultiBuffer,
    /// The `xdp` tracepoints (xdp_exception, xdp_redirect_err, ...) as `tp_btf` programs:
    /// needs kernel BTF (CONFIG_DEBUG_INFO_BTF), >= 5.5.
    XdpTracepoints,
    /// `napi-get` of the `netdev` netlink family: NAPI instances and their settings, >= 6.9.
    NapiGet,
    /// `napi-set`: `defer-hard-irqs` and `gro-flush-timeout` per NAPI instance, >= 6.13 (before:
    /// the per-device sysfs knobs).
    NapiSet,
    /// `napi-set` of `irq-suspend-timeout`: IRQ suspension under epoll busy polling, >= 6.14.
    IrqSuspend,
}

impl Feature {
    /// Every feature, in table order.
    pub const ALL: [Feature; 12] = [
        Feature::NeedWakeup,
        Feature::BusyPoll,
        Feature::XdpOptions,
        Feature::SharedUmem,
        Feature::SharedUmemOtherQueue,
        Feature::LiveFrames,
        Feature::MaxTxSkbBudget,
        Feature::MultiBuffer,
        Feature::XdpTracepoints,
        Feature::NapiGet,
        Feature::NapiSet,
        Feature::IrqSuspend,
    ];

    /// Short name (table and JSON key), e.g. `need_wakeup`.
    pub fn key(self) -> &'static str {
        match self {
            Feature::NeedWakeup => "need_wakeup",
            Feature::BusyPoll => "busy_poll",
            Feature::XdpOptions => "xdp_options",
            Feature::SharedUmem => "shared_umem",
            Feature::SharedUmemOtherQueue => "shared_umem_other_queue",
            Feature::LiveFrames => "live_frames",
            Feature::MaxTxSkbBudget => "max_tx_skb_budget",
            Feature::MultiBuffer => "multi_buffer",
            Feature::XdpTracepoints => "xdp_tracepoints",
            Feature::NapiGet => "napi_get",
            Feature::NapiSet => "napi_set",
            Feature::IrqSuspend => "irq_suspend",
        }
    }

    /// What it is, as an error message names it, e.g. `AF_XDP need_wakeup (XDP_USE_NEED_WAKEUP)`.
    pub fn name(self) -> &'static str {
        match self {
            Feature::NeedWakeup => "AF_XDP need_wakeup (XDP_USE_NEED_WAKEUP)",
            Feature::BusyPoll => "busy poll (SO_PREFER_BUSY_POLL, SO_BUSY_POLL_BUDGET)",
            Feature::XdpOptions => "getsockopt XDP_OPTIONS",
            Feature::SharedUmem => "shared UMEM on one queue (XDP_SHARED_UMEM)",
            Feature::SharedUmemOtherQueue => {
                "shared UMEM across queues and devices (XDP_SHARED_UMEM with own FILL/COMPLETION rings)"
            }
            Feature::LiveFrames => "live frames (BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES)",
            Feature::MaxTxSkbBudget => "XDP_MAX_TX_SKB_BUDGET",
            Feature::MultiBuffer => "AF_XDP multi-buffer (XDP_USE_SG)",
            Feature::XdpTracepoints => "xdp tracepoints (tp_btf, kernel BTF)",
            Feature::NapiGet => "netdev napi-get",
            Feature::NapiSet => "per-NAPI settings (netdev napi-set)",
            Feature::IrqSuspend => "IRQ suspension (netdev napi-set irq-suspend-timeout)",
        }
    }

    /// The first Linux release with it, e.g. `"5.4"`.
    pub fn min_kernel(self) -> &'static str {
        match self {
            Feature::NeedWakeup => "5.4",
            Feature::BusyPoll => "5.11",
            Feature::XdpOptions => "5.3",
            Feature::SharedUmem => "4.18",
            Feature::SharedUmemOtherQueue => "5.10",
            Feature::LiveFrames => "5.18",
            Feature::MaxTxSkbBudget => "6.17",
            Feature::MultiBuffer => "6.6",
            Feature::XdpTracepoints => "5.5",
            Feature::NapiGet => "6.9",
            Feature::NapiSet => "6.13",
            Feature::IrqSuspend => "6.14",
        }
    }

    fn min_version(self) -> (u32, u32) {
        parse_version(self.min_kernel()).expect("min_kernel is MAJOR.MINOR")
    }
}

/// A feature the running kernel lacks. The message is one line:
/// `<feature> is not supported by this kernel (needs Linux >= X)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{feature} is not supported by this kernel (needs Linux >= {min_kernel})")]
#[non_exhaustive]
pub struct Unsupported {
    /// [`Feature::name`].
    pub feature: &'static str,
    /// [`Feature::min_kernel`].
    pub min_kernel: &'static str,
}

impl Unsupported {
    /// `feature` missing: its [`Feature::name`] and [`Feature::min_kernel`].
    pub fn of(feature: Feature) -> Self {
        Self { feature: feature.name(), min_kernel: feature.min_kernel() }
    }
}

/// How a feature's answer was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// The kernel answered a real call.
    Probe,
    /// The probe could not run (see [`FeatureStatus::how`]); the kernel version decided.
    KernelVersion,
}

/// One feature's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FeatureStatus {
    /// The feature.
    pub feature: Feature,
    /// [`Feature::min_kernel`].
    pub min_kernel: &'static str,
    /// True if the running kernel has it.
    pub supported: bool,
    /// Probe or kernel version.
    pub method: Method,
    /// What was tried and what the kernel said, one line.
    pub how: String,
}

/// The answers for every [`Feature`], from [`probe`].
#[derive(Debug, Clone, Serialize)]
pub struct Features {
    /// The running kernel's release (`uname -r`).
    pub kernel: String,
    /// One entry per feature, in [`Feature::ALL`] order.
    pub features: Vec<FeatureStatus>,
    /// The `xdp` tracepoints the kernel's BTF lists (`btf_trace_<name>`), e.g. `xdp_exception`.
    pub xdp_tracepoints: Vec<&'static str>,
}

impl Features {
    /// The answer for `f`.
    ///
    /// # Panics
    ///
    /// Never for a [`Features`] of [`probe`] or [`probe_uncached`], which answer every feature of
    /// [`Feature::ALL`] (each probe group records each of its features on every path, probed or by
    /// kernel version); only for one built by hand without `f`.
    pub fn get(&self, f: Feature) -> &FeatureStatus {
        self.features.iter().find(|s| s.feature == f).expect("every feature is probed")
    }

    /// True if the kernel has `f`.
    pub fn supported(&self, f: Feature) -> bool {
        self.get(f).supported
    }

    /// `Ok` if the kernel has `f`, else [`Unsupported`] naming it and its minimum kernel.
    ///
    /// `FASTPATH_DENY_FEATURES=key,key` (keys of [`Feature::key`]) makes `check` refuse those
    /// features whatever the kernel says: to exercise a fallback or an error path on a kernel
    /// that has the feature (as libxdp's `LIBXDP_SKIP_DISPATCHER` does for its dispatcher).
    ///
    /// # Errors
    ///
    /// [`Unsupported`] (feature name and minimum kernel) if the kernel lacks `f`, or `f`'s key is
    /// listed in `FASTPATH_DENY_FEATURES`.
    ///
    /// # Panics
    ///
    /// As [`Features::get`].
    pub fn check(&self, f: Feature) -> Result<(), Unsupported> {
        check_status(self.get(f))
    }

    /// A plain-text table: feature, min kernel, supported, how it was decided; one line each.
    pub fn table(&self) -> String {
        let mut s = format!("kernel {}\n", self.kernel);
        let _ = writeln!(s, "{:<24} {:>10}  {:<9}  how", "feature", "min kernel", "supported");
        for f in &self.features {
            let how = match f.method {
                Method::Probe => format!("probe: {}", f.how),
                Method::KernelVersion => format!("kernel version: {}", f.how),
            };
            let yes = if f.supported { "yes" } else { "no" };
            let _ = writeln!(s, "{:<24} {:>10}  {:<9}  {how}", f.feature.key(), f.min_kernel, yes);
        }
        s
    }
}

/// The probes come in three groups that share their set-up: the AF_XDP socket probes (one
/// socket, one small UMEM, and a private network namespace for "another device"), the
/// live-frames run, and the tracepoints (kernel BTF). Each group runs at most once per process,
/// the first time one of its features is asked for (as libbpf's `feat_supported(cache, id)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Xsk,
    LiveFrames,
    Tracepoints,
    Napi,
}

impl Feature {
    fn group(self) -> Group {
        match self {
            Feature::LiveFrames => Group::LiveFrames,
            Feature::XdpTracepoints => Group::Tracepoints,
            Feature::NapiGet | Feature::NapiSet | Feature::IrqSuspend => Group::Napi,
            _ => Group::Xsk,
        }
    }
}

static KERNEL: OnceLock<(String, Option<(u32, u32)>)> = OnceLock::new();
static XSK: OnceLock<Vec<FeatureStatus>> = OnceLock::new();
static LIVE: OnceLock<Vec<FeatureStatus>> = OnceLock::new();
static NAPI: OnceLock<Vec<FeatureStatus>> = OnceLock::new();
static TRACEPOINTS: OnceLock<(Vec<FeatureStatus>, Vec<&'static str>)> = OnceLock::new();
static FEATURES: OnceLock<Features> = OnceLock::new();
static PROBE_RUNS: AtomicUsize = AtomicUsize::new(0);

fn kernel() -> &'static (String, Option<(u32, u32)>) {
    KERNEL.get_or_init(|| {
        let kernel = sp::kernel_release().unwrap_or_else(|e| format!("unknown ({e})"));
        let version = parse_version(&kernel);
        (kernel, version)
    })
}

fn prober() -> Prober {
    Prober { version: kernel().1, out: Vec::new() }
}

fn group_answers(g: Group) -> &'static [FeatureStatus] {
    let run = |f: fn(&mut Prober)| {
        PROBE_RUNS.fetch_add(1, Ordering::Relaxed);
        let mut p = prober();
        f(&mut p);
        p.out
    };
    match g {
        Group::Xsk => XSK.get_or_init(|| run(Prober::xsk_probes)),
        Group::LiveFrames => LIVE.get_or_init(|| run(Prober::live_frames)),
        Group::Napi => NAPI.get_or_init(|| run(Prober::napi)),
        Group::Tracepoints => {
            &TRACEPOINTS
                .get_or_init(|| {
                    PROBE_RUNS.fetch_add(1, Ordering::Relaxed);
                    let mut p = prober();
                    let names = p.tracepoints();
                    (p.out, names)
                })
                .0
        }
    }
}

/// The answer for one feature, probing only its group the first time (cached afterwards).
/// Never fails: a probe that cannot run falls back to the kernel version. Privileges as
/// [`probe`].
///
/// # Panics
///
/// Never: each probe group records every one of its features on every path, probed or by kernel
/// version (`Prober::xsk_probes`, `live_frames`, `tracepoints`).
pub fn status(f: Feature) -> &'static FeatureStatus {
    group_answers(f.group()).iter().find(|s| s.feature == f).expect("every feature of a group is answered")
}

/// `Ok` if the kernel has `f`, else [`Unsupported`] naming it and its minimum kernel; probes
/// only `f`'s group, once per process (see [`Features::check`] for `FASTPATH_DENY_FEATURES`).
///
/// # Errors
///
/// [`Unsupported`] (feature name and minimum kernel) if the kernel lacks `f`, or `f`'s key is
/// listed in `FASTPATH_DENY_FEATURES`.
pub fn check(f: Feature) -> Result<(), Unsupported> {
    check_status(status(f))
}

fn check_status(s: &FeatureStatus) -> Result<(), Unsupported> {
    let f = s.feature;
    let denied = std::env::var("FASTPATH_DENY_FEATURES").is_ok_and(|v| v.split(',').any(|k| k.trim() == f.key()));
    if s.supported && !denied {
        Ok(())
    } else {
        Err(Unsupported { feature: f.name(), min_kernel: f.min_kernel() })
    }
}

/// Every feature of the running kernel: each group probed the first time it is needed and
/// cached (later calls return the same object at once). Never fails: a probe that cannot run
/// falls back to the kernel version. Privileges: CAP_NET_RAW (AF_XDP sockets), CAP_BPF
/// (programs), CAP_SYS_ADMIN (a private network namespace), or root; without them, version
/// fallbacks. The first call takes tens of milliseconds (one live-frames run sets up a page
/// pool); code that needs one feature calls [`check`], which runs only that feature's group.
///
/// # Examples
///
/// ```no_run
/// use fastpath::features::{self, Feature};
///
/// print!("{}", features::probe().table()); // probed once per process, then cached
/// if let Err(e) = features::check(Feature::MultiBuffer) {
///     eprintln!("{e}"); // "... is not supported by this kernel (needs Linux >= 6.6)"
/// }
/// ```
pub fn probe() -> &'static Features {
    FEATURES.get_or_init(|| {
        let features = Feature::ALL.iter().map(|f| status(*f).clone()).collect();
        group_answers(Group::Tracepoints);
        let xdp_tracepoints = TRACEPOINTS.get().map(|t| t.1.clone()).unwrap_or_default();
        Features { kernel: kernel().0.clone(), features, xdp_tracepoints }
    })
}

/// How many probe groups have run in this process: 0 before any feature was asked for, at
/// most 4 (one per group) for good.
pub fn probe_runs() -> usize {
    PROBE_RUNS.load(Ordering::Relaxed)
}

/// Runs every probe now, without the cache (for tests and diagnostics; use [`probe`]).
///
/// # Panics
///
/// Never: every probe group records each of its features on every path, so each of [`Feature::ALL`]
/// is found.
pub fn probe_uncached() -> Features {
    let mut p = prober();
    p.xsk_probes();
    p.live_frames();
    p.napi();
    let xdp_tracepoints = p.tracepoints();
    let features = Feature::ALL
        .iter()
        .map(|f| p.out.iter().find(|s| s.feature == *f).cloned().expect("every feature probed"))
        .collect();
    Features { kernel: kernel().0.clone(), features, xdp_tracepoints }
}

/// `MAJOR.MINOR` of a release string like `6.18.44-fc-v595`.
fn parse_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

fn ok_or_errno(r: Result<(), SysError>) -> Result<(), i32> {
    r.map_err(|e| e.errno)
}

fn is_privilege(errno: i32) -> bool {
    errno == libc::EPERM || errno == libc::EACCES
}

/// `XDP_DROP` (enum xdp_action, include/uapi/linux/bpf.h), as the immediate of `mov r0`.
const XDP_DROP: i32 = sys::bpf::XDP_DROP as i32;
const BTF_TRACE_PREFIX: &str = "btf_trace_";
/// Tracepoints of include/trace/events/xdp.h (some since removed, e.g. xdp_redirect_map).
const XDP_TRACEPOINTS: [&str; 10] = [
    "xdp_exception",
    "xdp_bulk_tx",
    "xdp_redirect",
    "xdp_redirect_err",
    "xdp_redirect_map",
    "xdp_redirect_map_err",
    "xdp_cpumap_kthread",
    "xdp_cpumap_enqueue",
    "xdp_devmap_xmit",
    "mem_disconnect",
];

/// A registered UMEM of a few frames, for bind probes.
struct ProbeUmem {
    _mem: sys::Mmap,
}

struct Prober {
    version: Option<(u32, u32)>,
    out: Vec<FeatureStatus>,
}

impl Prober {
    fn probed(&mut self, f: Feature, supported: bool, how: impl Into<String>) {
        self.out.push(FeatureStatus {
            feature: f,
            min_kernel: f.min_kernel(),
            supported,
            method: Method::Probe,
            how: how.into(),
        });
    }

    fn by_version(&mut self, f: Feature, why: &str) {
        let supported = self.version.is_some_and(|v| v >= f.min_version());
        let v = self.version.map_or("unknown".into(), |(a, b)| format!("{a}.{b}"));
        let cmp = if supported { ">=" } else { "<" };
        self.out.push(FeatureStatus {
            feature: f,
            min_kernel: f.min_kernel(),
            supported,
            method: Method::KernelVersion,
            how: format!("{v} {cmp} {} ({why})", f.min_kernel()),
        });
    }

    /// The `netdev` family's NAPI requests ([`crate::netdev::napi`]); by kernel version where
    /// the request cannot decide (no CAP_NET_ADMIN for `napi-set`).
    fn napi(&mut self) {
        let answers = probe_napi();
        for (f, a) in [Feature::NapiGet, Feature::NapiSet, Feature::IrqSuspend].into_iter().zip(answers) {
            match a {
                Ok((yes, how)) => self.probed(f, yes, how),
                Err(why) => self.by_version(f, &why),
            }
        }
    }

    fn xsk_probes(&mut self) {
        let xsk_features = [
            Feature::NeedWakeup,
            Feature::BusyPoll,
            Feature::XdpOptions,
            Feature::SharedUmem,
            Feature::SharedUmemOtherQueue,
            Feature::MaxTxSkbBudget,
            Feature::MultiBuffer,
        ];
        let sock = match sys::socket_xdp() {
            Ok(s) => s,
            Err(e) if is_privilege(e.errno) => {
                let why = format!("no AF_XDP socket without CAP_NET_RAW: {e}");
                for f in xsk_features {
                    if f == Feature::BusyPoll {
                        // SOL_SOCKET options are the same on every socket (net/core/sock.c).
                        match sp::socket_udp() {
                            Ok(udp) => self.busy_poll(&udp),
                            Err(e) => self.by_version(f, &e.to_string()),
                        }
                    } else {
                        self.by_version(f, &why);
                    }
                }
                return;
            }
            Err(e) => {
                for f in xsk_features {
                    self.probed(f, false, format!("no AF_XDP sockets: {e}"));
                }
                return;
            }
        };
        self.need_wakeup(&sock);
        self.busy_poll(&sock);
        self.xdp_options(&sock);
        drop(sock);
        self.max_tx_skb_budget();
        self.multi_buffer();
        self.shared_umem();
    }

    fn need_wakeup(&mut self, sock: &OwnedFd) {
        let r = sys::getsockopt::<libc::xdp_mmap_offsets>(
            sock,
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            "SOL_XDP, XDP_MMAP_OFFSETS",
        );
        let full = std::mem::size_of::<libc::xdp_mmap_offsets>();
        match r {
            Ok((_, len)) if len == full => self.probed(
                Feature::NeedWakeup,
                true,
                format!("getsockopt(XDP_MMAP_OFFSETS) wrote the v2 layout ({len} bytes, with ring flags)"),
            ),
            Ok((_, len)) => self.probed(
                Feature::NeedWakeup,
                false,
                format!("getsockopt(XDP_MMAP_OFFSETS) wrote {len} bytes (v1 layout, no ring flags; v2 is {full})"),
            ),
            Err(e) => self.probed(Feature::NeedWakeup, false, e.to_string()),
        }
    }

    fn busy_poll(&mut self, sock: &OwnedFd) {
        let a = ok_or_errno(sys::setsockopt_int(
            sock,
            libc::SOL_SOCKET,
            SO_PREFER_BUSY_POLL,
            1,
            "SOL_SOCKET, SO_PREFER_BUSY_POLL",
        ));
        let b = ok_or_errno(sys::setsockopt_int(
            sock,
            libc::SOL_SOCKET,
            SO_BUSY_POLL_BUDGET,
            8,
            "SOL_SOCKET, SO_BUSY_POLL_BUDGET",
        ));
        // EPERM on the budget means the option exists (raising it above the current value
        // needs CAP_NET_ADMIN); ENOPROTOOPT means the kernel does not know it (or was built
        // without CONFIG_NET_RX_BUSY_POLL).
        let known = |r: Result<(), i32>| r.is_ok() || r.is_err_and(is_privilege);
        let text = |r: Result<(), i32>| match r {
            Ok(()) => "ok".to_string(),
            Err(e) => sys::errno_text(e),
        };
        self.probed(
            Feature::BusyPoll,
            known(a) && known(b),
            format!("setsockopt(SO_PREFER_BUSY_POLL, 1): {}; setsockopt(SO_BUSY_POLL_BUDGET, 8): {}", text(a), text(b)),
        );
    }

    fn xdp_options(&mut self, sock: &OwnedFd) {
        match sys::getsockopt::<libc::xdp_options>(sock, libc::SOL_XDP, libc::XDP_OPTIONS, "SOL_XDP, XDP_OPTIONS") {
            Ok(_) => self.probed(Feature::XdpOptions, true, "getsockopt(XDP_OPTIONS) answered"),
            Err(e) => self.probed(Feature::XdpOptions, false, e.to_string()),
        }
    }

    fn max_tx_skb_budget(&mut self) {
        let r = sys::socket_xdp().and_then(|s| {
            sys::setsockopt(&s, libc::SOL_XDP, libc::XDP_TX_RING, &64u32, "SOL_XDP, XDP_TX_RING")?;
            sys::setsockopt(&s, libc::SOL_XDP, XDP_MAX_TX_SKB_BUDGET, &32u32, "SOL_XDP, XDP_MAX_TX_SKB_BUDGET")
        });
        match r {
            Ok(()) => self.probed(
                Feature::MaxTxSkbBudget,
                true,
                "setsockopt(XDP_MAX_TX_SKB_BUDGET, 32) with a 64-entry TX ring: ok",
            ),
            // The kernel knows the option but refused the value: still supported.
            Err(e) if e.errno == libc::EACCES => {
                self.probed(Feature::MaxTxSkbBudget, true, format!("{e} (option known)"))
            }
            Err(e) => self.probed(Feature::MaxTxSkbBudget, false, e.to_string()),
        }
    }

    /// A socket with a 4-frame UMEM, FILL/COMPLETION rings (if `own_rings`) and an RX ring.
    fn umem_socket(with_umem: bool, own_rings: bool) -> Result<(OwnedFd, Option<ProbeUmem>), SysError> {
        const FRAME: u32 = 4096;
        const FRAMES: u32 = 4;
        let s = sys::socket_xdp()?;
        let mut umem = None;
        if with_umem {
            let mem = sys::Mmap::anonymous((FRAME * FRAMES) as usize, false)?;
            let reg = libc::xdp_umem_reg {
                addr: mem.as_ptr() as u64,
                len: u64::from(FRAME * FRAMES),
                chunk_size: FRAME,
                headroom: 0,
                flags: 0,
                tx_metadata_len: 0,
            };
            sys::setsockopt(&s, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg, "SOL_XDP, XDP_UMEM_REG")?;
            umem = Some(ProbeUmem { _mem: mem });
        }
        if own_rings {
            sys::setsockopt(&s, libc::SOL_XDP, libc::XDP_UMEM_FILL_RING, &FRAMES, "SOL_XDP, XDP_UMEM_FILL_RING")?;
            sys::setsockopt(
                &s,
                libc::SOL_XDP,
                libc::XDP_UMEM_COMPLETION_RING,
                &FRAMES,
                "SOL_XDP, XDP_UMEM_COMPLETION_RING",
            )?;
        }
        sys::setsockopt(&s, libc::SOL_XDP, libc::XDP_RX_RING, &FRAMES, "SOL_XDP, XDP_RX_RING")?;
        Ok((s, umem))
    }

    fn bind(s: &OwnedFd, ifindex: u32, flags: u16, shared_fd: u32) -> Result<(), SysError> {
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: 0,
            sxdp_shared_umem_fd: shared_fd,
        };
        sys::bind_xdp(s, &addr)
    }

    /// Binds to `lo` queue 0, retrying for up to 200 ms while another socket holds it (EBUSY).
    fn bind_lo(s: &OwnedFd, lo: u32, flags: u16) -> Result<(), SysError> {
        let mut tries = 0;
        loop {
            match Self::bind(s, lo, flags, 0) {
                Err(e) if e.errno == libc::EBUSY && tries < 40 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                r => return r,
            }
        }
    }

    fn multi_buffer(&mut self) {
        let f = Feature::MultiBuffer;
        let lo = match sys::if_nametoindex("lo") {
            Ok(i) => i,
            Err(e) => return self.by_version(f, &format!("no lo to bind to: {e}")),
        };
        let flags = libc::XDP_COPY | libc::XDP_USE_SG;
        let r = Self::umem_socket(true, true).and_then(|(s, _umem)| Self::bind(&s, lo, flags, 0));
        match r {
            Ok(()) => self.probed(f, true, "bind(lo queue 0, XDP_COPY | XDP_USE_SG): ok"),
            // xsk_bind checks the flags before it looks at the queue: EBUSY means they passed.
            Err(e) if e.errno == libc::EBUSY => self.probed(f, true, format!("{e} (flags accepted; queue in use)")),
            Err(e) if is_privilege(e.errno) => self.by_version(f, &e.to_string()),
            Err(e) => self.probed(f, false, e.to_string()),
        }
    }

    fn shared_umem(&mut self) {
        let (same, other) = (Feature::SharedUmem, Feature::SharedUmemOtherQueue);
        let lo = match sys::if_nametoindex("lo") {
            Ok(i) => i,
            Err(e) => {
                let why = format!("no lo to bind to: {e}");
                self.by_version(same, &why);
                return self.by_version(other, &why);
            }
        };
        let owner = Self::umem_socket(true, true).and_then(|(s, umem)| {
            Self::bind_lo(&s, lo, libc::XDP_COPY)?;
            Ok((s, umem))
        });
        let (owner, _umem) = match owner {
            Ok(o) => o,
            Err(e) => {
                let why = format!("the UMEM owner cannot bind to lo queue 0: {e}");
                self.by_version(same, &why);
                return self.by_version(other, &why);
            }
        };
        let shared = owner.as_raw_fd() as u32;
        let flags = libc::XDP_SHARED_UMEM;
        match Self::umem_socket(false, false).and_then(|(s, _)| Self::bind(&s, lo, flags, shared)) {
            Ok(()) => self.probed(same, true, "a second socket bound with XDP_SHARED_UMEM to lo queue 0: ok"),
            Err(e) => self.probed(same, false, e.to_string()),
        }
        // Another device: lo of a private network namespace, on a thread of its own.
        let r = std::thread::scope(|sc| {
            sc.spawn(|| -> Result<Result<(), SysError>, SysError> {
                sp::unshare_netns()?;
                let lo = sys::if_nametoindex("lo")?;
                Ok(Self::umem_socket(false, true).and_then(|(s, _)| Self::bind(&s, lo, flags, shared)))
            })
            .join()
            .expect("probe thread does not panic")
        });
        match r {
            Ok(Ok(())) => self.probed(
                other,
                true,
                "a socket with its own FILL/COMPLETION rings bound with XDP_SHARED_UMEM to lo of a private netns: ok",
            ),
            Ok(Err(e)) => self.probed(other, false, e.to_string()),
            // No private namespace: a FILL ring on a socket without a UMEM of its own is what
            // 5.10's buffer pools made possible (before, EINVAL).
            Err(ns) => {
                let r = sys::socket_xdp().and_then(|s| {
                    sys::setsockopt(&s, libc::SOL_XDP, libc::XDP_UMEM_FILL_RING, &4u32, "SOL_XDP, XDP_UMEM_FILL_RING")
                });
                match r {
                    Ok(()) => self.probed(other, true, format!("{ns}; a FILL ring on a socket without a UMEM: ok")),
                    Err(e) => self.probed(other, false, format!("{ns}; {e}")),
                }
            }
        }
    }

    fn live_frames(&mut self) {
        let f = Feature::LiveFrames;
        let insns = [Insn::mov_r0(XDP_DROP), Insn::exit()];
        let spec = ProgSpec {
            prog_type: sys::bpf::BPF_PROG_TYPE_XDP,
            expected_attach_type: 0,
            attach_btf_id: 0,
            name: "fp_probe_live",
            insns: &insns,
        };
        let prog = match sp::prog_load(&spec) {
            Ok(p) => p,
            Err(e) if is_privilege(e.errno) => return self.by_version(f, &e.to_string()),
            Err(e) => return self.probed(f, false, e.to_string()),
        };
        let frame = [0u8; 64];
        match sp::prog_test_run(&prog, &frame, 1, sys::bpf::BPF_F_TEST_XDP_LIVE_FRAMES) {
            Ok(_) => {
                self.probed(f, true, "BPF_PROG_RUN(XDP_DROP program, BPF_F_TEST_XDP_LIVE_FRAMES, 64-byte frame): ok")
            }
            Err(e) if is_privilege(e.errno) => self.by_version(f, &e.to_string()),
            Err(e) => self.probed(f, false, e.to_string()),
        }
    }

    /// Returns the xdp tracepoints the kernel's BTF lists.
    fn tracepoints(&mut self) -> Vec<&'static str> {
        let f = Feature::XdpTracepoints;
        let names: Vec<String> = XDP_TRACEPOINTS.iter().map(|t| format!("{BTF_TRACE_PREFIX}{t}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let ids = match sp::vmlinux_typedef_ids(&refs) {
            Ok(ids) => ids,
            Err(e) if is_privilege(e.errno) => {
                self.by_version(f, &e.to_string());
                return Vec::new();
            }
            Err(e) => {
                self.probed(f, false, format!("no kernel BTF: {e}"));
                return Vec::new();
            }
        };
        let present: Vec<&'static str> =
            XDP_TRACEPOINTS.iter().zip(&ids).filter(|(_, id)| id.is_some()).map(|(t, _)| *t).collect();
        let Some(exception_id) = ids[0] else {
            self.probed(f, false, "the kernel's BTF has no btf_trace_xdp_exception");
            return present;
        };
        let insns = [Insn::mov_r0(0), Insn::exit()];
        let spec = ProgSpec {
            prog_type: sys::bpf::BPF_PROG_TYPE_TRACING,
            expected_attach_type: sys::bpf::BPF_TRACE_RAW_TP,
            attach_btf_id: exception_id,
            name: "fp_probe_tp",
            insns: &insns,
        };
        let listed = format!("BTF lists {}", present.join(", "));
        match sp::prog_load(&spec).and_then(|p| sp::raw_tracepoint_open(&p)) {
            Ok(_link) => {
                self.probed(f, true, format!("tp_btf/xdp_exception attached with bpf_raw_tracepoint_open; {listed}"))
            }
            Err(e) if is_privilege(e.errno) => self.by_version(f, &format!("{e}; {listed}")),
            Err(e) => self.probed(f, false, format!("{e}; {listed}")),
        }
        present
    }
}

/// The effective user id of this process (0 = root): what the privileged paths and tests ask
/// before they try.
pub fn euid() -> u32 {
    sys::geteuid()
}

/// What the kernel answered to one harmless request: `Ok(true)` supported, `Ok(false)` not, `Err(errno text)` when the
/// request could not decide (no privilege).
type ProbeAnswer = Result<(bool, String), String>;

/// Probes `napi-get`, `napi-set` and `irq-suspend-timeout` with harmless requests: a
/// `napi-get` dump of `lo` (which has no NAPI), and `napi-set` of NAPI id 0 (never a NAPI:
/// ids start above NR_CPUS) first with `defer-hard-irqs`, then with `irq-suspend-timeout`
/// only. ENOENT ("no such NAPI") proves the request and its attribute were accepted; EINVAL
/// for the second means the attribute is unknown (the op's policy ends before it); EOPNOTSUPP
/// means no such command. Spoken through the `netdev` family's socket (`netdev/genl.rs`), not
/// through `netdev::napi`, which itself [`check`]s these features before it acts.
#[cfg(feature = "netlink")]
fn probe_napi() -> [ProbeAnswer; 3] {
    let nd = match Netdev::open() {
        Ok(Some(nd)) => nd,
        Ok(None) => {
            let no = Ok((false, "no netdev generic netlink family (kernel < 6.3)".to_string()));
            return [no.clone(), no.clone(), no];
        }
        Err(e) => {
            let e = Err(format!("NETLINK_GENERIC socket: {e}"));
            return [e.clone(), e.clone(), e];
        }
    };
    let get = match nd.dump(NAPI_GET, vec![(NAPI_A_IFINDEX, 1u32.to_ne_bytes().to_vec())]) {
        Ok(_) => Ok((true, "napi-get dump of ifindex 1 answered".to_string())),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok((false, format!("napi-get: {e}"))),
        Err(e) => Err(format!("napi-get: {e}")),
    };
    let set_probe = |attr: u16, val: Vec<u8>, name: &str| -> ProbeAnswer {
        let r = nd.ack(NAPI_SET, vec![(NAPI_A_ID, 0u32.to_ne_bytes().to_vec()), (attr, val)]);
        match r.map_err(|e| e.raw_os_error()) {
            Err(Some(libc::ENOENT)) => Ok((true, format!("napi-set id=0 {name}: ENOENT (accepted; no such NAPI)"))),
            Err(Some(libc::EOPNOTSUPP)) => Ok((false, "napi-set: EOPNOTSUPP (no such command)".into())),
            Err(Some(libc::EINVAL)) => Ok((false, format!("napi-set id=0 {name}: EINVAL (unknown attribute)"))),
            Err(Some(e)) if e == libc::EPERM || e == libc::EACCES => {
                Err(format!("napi-set needs CAP_NET_ADMIN: {}", std::io::Error::from_raw_os_error(e)))
            }
            Err(e) => Err(format!("napi-set id=0 {name}: {e:?}")),
            Ok(()) => Ok((true, format!("napi-set id=0 {name} accepted"))),
        }
    };
    let set = set_probe(NAPI_A_DEFER_HARD_IRQS, 0u32.to_ne_bytes().to_vec(), "defer-hard-irqs");
    let suspend = match &set {
        Ok((false, why)) => Ok((false, why.clone())),
        _ => set_probe(NAPI_A_IRQ_SUSPEND_TIMEOUT, 0u64.to_ne_bytes().to_vec(), "irq-suspend-timeout"),
    };
    [get, set, suspend]
}

/// Built without the `netlink` feature no request is made: the three features are decided by
/// kernel version.
#[cfg(not(feature = "netlink"))]
fn probe_napi() -> [ProbeAnswer; 3] {
    let e = Err("not probed: fastpath built without its netlink feature".to_string());
    [e.clone(), e.clone(), e]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse() {
        assert_eq!(parse_version("6.18.44-fc-v595"), Some((6, 18)));
        assert_eq!(parse_version("5.4.0-150-generic"), Some((5, 4)));
        assert_eq!(parse_version("4.18"), Some((4, 18)));
        assert_eq!(parse_version("garbage"), None);
        for f in Feature::ALL {
            assert!(parse_version(f.min_kernel()).is_some(), "{f:?}");
        }
    }

    #[test]
    fn unsupported_message_is_one_line() {
        let e = Unsupported { feature: Feature::LiveFrames.name(), min_kernel: Feature::LiveFrames.min_kernel() };
        assert_eq!(
            e.to_string(),
            "live frames (BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES) is not supported by this kernel (needs Linux >= 5.18)"
        );
    }

    #[test]
    fn version_fallback_compares_major_minor() {
        let mut p = Prober { version: Some((5, 10)), out: Vec::new() };
        p.by_version(Feature::SharedUmemOtherQueue, "test");
        p.by_version(Feature::BusyPoll, "test");
        assert!(p.out[0].supported && !p.out[1].supported);
        assert_eq!(p.out[1].method, Method::KernelVersion);
    }

    /// Privileged: each kind of probe can say no, so an "ok" is the kernel's answer: an unknown
    /// bind flag, an unknown SOL_XDP option and an unknown BPF_PROG_RUN flag are refused.
    #[test]
    fn probes_can_say_no() {
        if sys::geteuid() != 0 {
            assert!(std::env::var("CI").as_deref() != Ok("true"), "CI must run this test as root");
            eprintln!("SKIPPED probes_can_say_no: needs root");
            return;
        }
        let lo = sys::if_nametoindex("lo").expect("lo");
        let (s, _umem) = Prober::umem_socket(true, true).expect("AF_XDP socket with a UMEM");
        let e = Prober::bind(&s, lo, 1 << 15 | libc::XDP_COPY, 0).expect_err("unknown bind flag");
        assert_eq!(e.errno, libc::EINVAL, "{e}");
        let e = sys::setsockopt(&s, libc::SOL_XDP, 99, &32u32, "SOL_XDP, 99").expect_err("unknown option");
        assert_eq!(e.errno, libc::ENOPROTOOPT, "{e}");
        let insns = [Insn::mov_r0(XDP_DROP), Insn::exit()];
        let spec = ProgSpec {
            prog_type: sys::bpf::BPF_PROG_TYPE_XDP,
            expected_attach_type: 0,
            attach_btf_id: 0,
            name: "fp_probe_test",
            insns: &insns,
        };
        let prog = sp::prog_load(&spec).expect("load");
        let e = sp::prog_test_run(&prog, &[0u8; 64], 1, 1 << 30).expect_err("unknown flag");
        assert_eq!(e.errno, libc::EINVAL, "{e}");
    }

    /// Privileged: the probes run for real. On this project's machines (Linux >= 6.17) every
    /// feature must be reported supported, and by a probe when running as root.
    #[test]
    fn probe_runs_once_and_finds_everything_on_a_new_kernel() {
        if sys::geteuid() != 0 {
            assert!(std::env::var("CI").as_deref() != Ok("true"), "CI must run this test as root");
            eprintln!("SKIPPED probe_runs_once_and_finds_everything_on_a_new_kernel: needs root");
            return;
        }
        // One feature asked for: its group is probed and cached.
        assert!(check(Feature::NeedWakeup).is_ok() || parse_version(&kernel().0) < Some((5, 4)));
        assert!(XSK.get().is_some(), "need_wakeup's group ran");
        let a = probe();
        let b = probe();
        assert!(std::ptr::eq(a, b), "probe() returns the cached object");
        assert_eq!(probe_runs(), 4, "each of the four probe groups ran once");
        eprintln!("{}", a.table());
        assert_eq!(a.features.len(), Feature::ALL.len());
        let v = parse_version(&a.kernel).expect("uname -r parses");
        // CI's machines run Linux >= 6.17: there the strict assertions must run, never skip.
        assert!(
            v >= (6, 17) || std::env::var("CI").as_deref() != Ok("true"),
            "kernel {} is older than 6.17: CI must run the strict feature assertions",
            a.kernel
        );
        if v < (6, 17) {
            eprintln!("SKIPPED the strict assertions of probe_runs_once_and_finds_everything_on_a_new_kernel: kernel {} < 6.17", a.kernel);
        }
        if v >= (6, 17) {
            for s in &a.features {
                assert!(s.supported, "{} reported unsupported on {}: {}", s.feature.key(), a.kernel, s.how);
                assert_eq!(s.method, Method::Probe, "{} decided by version as root: {}", s.feature.key(), s.how);
                assert!(a.check(s.feature).is_ok());
            }
            assert!(a.xdp_tracepoints.contains(&"xdp_exception"));
        }
        let json = serde_json::to_value(a).expect("serializes");
        assert_eq!(json["features"][0]["feature"], "need_wakeup");
        assert!(json["features"][0]["supported"].is_boolean());
    }
}
