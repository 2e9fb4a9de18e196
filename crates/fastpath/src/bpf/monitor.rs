//! Drop accounting from the kernel's XDP tracepoints, as xdp-bench (xdp-tools) does with `-e`
//! (docs/ARCHITECTURE.md §6).
//!
//! [`XdpMonitor::attach`] loads `bpf/xdp_monitor.bpf.c` and attaches one BTF-enabled raw
//! tracepoint program (`tp_btf`) to each of these tracepoints, all declared in the kernel's
//! `include/trace/events/xdp.h`:
//!
//! | tracepoint | fired by (kernel source) | counted as |
//! |---|---|---|
//! | `xdp_exception` | `trace_xdp_exception()`: a program returned `XDP_ABORTED` or an invalid action, or the driver failed an `XDP_TX`/`XDP_REDIRECT` (drivers, `net/core/dev.c`) | [`XdpMonitorStats::exceptions`], by XDP action |
//! | `xdp_redirect_err` (and `xdp_redirect_map_err` where it still exists, kernels < 5.17ish) | `xdp_do_redirect()` / `xdp_do_generic_redirect()` in `net/core/filter.c` when the redirect target refused | [`XdpMonitorStats::redirect_errors`], by errno |
//! | `xdp_cpumap_enqueue` | `bq_flush_to_queue()` in `kernel/bpf/cpumap.c`: a bulk moved into the target CPU's ring | [`XdpMonitorStats::cpumap_enqueue`], by target CPU |
//! | `xdp_cpumap_kthread` | `cpu_map_kthread_run()` in `kernel/bpf/cpumap.c`: one round of the CPUMAP kthread | [`XdpMonitorStats::cpumap_kthread`], by the kthread's CPU |
//! | `xdp_devmap_xmit` | `bq_xmit_all()` in `kernel/bpf/devmap.c`: one `ndo_xdp_xmit` bulk of a redirect to a device (DEVMAP or `bpf_redirect`) | [`XdpMonitorStats::devmap_xmit`] |
//!
//! Units: every counter is a count of frames, except `bulks`, `sched`, `calls` and `err`,
//! which count tracepoint firings. Counters are cumulative since attach; take two
//! [`XdpMonitor::snapshot`]s and [`XdpMonitorStats::delta`] them.
//!
//! Tracepoints are system-wide: without a [`MonitorFilter`] the counts include every interface
//! in every network namespace. The interface filter (ifindex and network namespace) applies
//! where the tracepoint names a device (`xdp_exception`, `xdp_redirect_err`: the receiving
//! device; `xdp_devmap_xmit`: either device); the CPUMAP filter (a map id) to
//! `xdp_cpumap_enqueue` and `xdp_cpumap_kthread`.
//!
//! Requirements: CAP_BPF + CAP_PERFMON (or root); kernel BTF (`/sys/kernel/btf/vmlinux`,
//! CONFIG_DEBUG_INFO_BTF=y); Linux >= 5.5 for `tp_btf` and >= 5.10 for the CPUMAP program
//! verdicts in `xdp_cpumap_kthread` (`struct xdp_cpumap_stats`). A missing feature is
//! [`BpfError::Unsupported`], found by [`XdpMonitor::probe`] before anything is loaded.
//! Detaching is dropping the monitor (or the process ending): the links are file descriptors.

use std::collections::BTreeMap;
use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use serde::Serialize;

use bytemuck::{bytes_of, Zeroable};

use super::{skel, BpfError};
use crate::abi::{self, fp_mon_config, fp_mon_devmap, fp_mon_enqueue, fp_mon_kthread};
use crate::sys::bpf::{Btf, BTF_KIND_STRUCT, BTF_KIND_TYPEDEF};

/// Tracepoints of the `xdp` group the monitor needs, with the first kernel that has each in a
/// form the monitor reads.
const REQUIRED: &[(&str, &str)] = &[
    ("xdp_exception", "5.5"),
    ("xdp_redirect_err", "5.5"),
    ("xdp_cpumap_enqueue", "5.5"),
    ("xdp_cpumap_kthread", "5.10"),
    ("xdp_devmap_xmit", "5.5"),
];

/// What [`XdpMonitor::probe`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MonitorProbe {
    /// The kernel still has the `xdp_redirect_map_err` tracepoint (removed in newer kernels).
    pub has_redirect_map_err: bool,
}

/// What the monitor counts; 0 in a field means everything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MonitorFilter {
    /// Interface index (in the namespace of the device): `xdp_exception` and
    /// `xdp_redirect_err` of frames received on it, `xdp_devmap_xmit` of frames from or to it.
    pub ifindex: u32,
    /// CPUMAP id (`bpf_map_info.id`): `xdp_cpumap_enqueue` and `xdp_cpumap_kthread` of it only.
    pub cpumap_id: u32,
    /// With `ifindex`: the device's network namespace (inode number of `/proc/PID/ns/net`);
    /// 0 = any namespace.
    pub netns_ino: u32,
}

/// The inode number of the calling thread's network namespace (0 if it cannot be read).
pub fn current_netns_ino() -> u32 {
    std::fs::read_link("/proc/thread-self/ns/net")
        .ok()
        .and_then(|p| p.to_string_lossy().trim_start_matches("net:[").trim_end_matches(']').parse::<u32>().ok())
        .unwrap_or(0)
}

/// Counts by XDP action (`xdp_exception`): frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct XdpActions {
    /// XDP_ABORTED (0): the program failed.
    pub aborted: u64,
    /// XDP_DROP (1).
    pub drop: u64,
    /// XDP_PASS (2).
    pub pass: u64,
    /// XDP_TX (3): the driver could not transmit.
    pub tx: u64,
    /// XDP_REDIRECT (4): the driver could not redirect.
    pub redirect: u64,
    /// Any other action value (invalid).
    pub unknown: u64,
}

/// `xdp_cpumap_enqueue` of one target CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CpumapEnqueue {
    /// Frames offered to the CPU's ring, drops included (the kernel's `processed`).
    pub processed: u64,
    /// Frames the ring refused (full: it holds `qsize` frames).
    pub drops: u64,
    /// Bulks flushed (tracepoint firings).
    pub bulks: u64,
}

impl CpumapEnqueue {
    /// Frames that made it into the ring: `processed - drops`.
    pub fn enqueued(&self) -> u64 {
        self.processed.saturating_sub(self.drops)
    }
}

/// `xdp_cpumap_kthread` on one CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CpumapKthread {
    /// Frames taken from the ring.
    pub processed: u64,
    /// Frames dropped for want of an skb (the kernel's `drops`).
    pub drops: u64,
    /// Rounds that ended in a reschedule (firings).
    pub sched: u64,
    /// XDP_PASS verdicts of the CPUMAP entry's program (frames).
    pub xdp_pass: u64,
    /// XDP_DROP (and aborted, and failed redirect) verdicts of that program.
    pub xdp_drop: u64,
    /// XDP_REDIRECT verdicts of that program.
    pub xdp_redirect: u64,
}

/// `xdp_devmap_xmit`, all devices (or the filtered one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DevmapXmit {
    /// Frames the target driver took.
    pub sent: u64,
    /// Frames it refused (on veth: its 256-slot ring was full).
    pub drops: u64,
    /// Calls that returned an error (firings).
    pub err: u64,
    /// Calls (firings).
    pub calls: u64,
}

/// Counters of the XDP tracepoints, summed over CPUs: cumulative (a snapshot) or over a
/// period (a [`XdpMonitorStats::delta`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct XdpMonitorStats {
    /// `xdp_exception` by action.
    pub exceptions: XdpActions,
    /// `xdp_redirect_err` (+ `xdp_redirect_map_err`) by errno name ("ENETDOWN"); frames.
    pub redirect_errors: BTreeMap<String, u64>,
    /// `xdp_cpumap_enqueue` by target CPU (CPUs seen so far).
    pub cpumap_enqueue: BTreeMap<u32, CpumapEnqueue>,
    /// `xdp_cpumap_kthread` by the kthread's CPU (CPUs seen so far).
    pub cpumap_kthread: BTreeMap<u32, CpumapKthread>,
    /// `xdp_devmap_xmit`.
    pub devmap_xmit: DevmapXmit,
}

/// The kernel's name of an errno as redirect errors report them, or `errno N`.
pub fn errno_name(e: u32) -> String {
    let n = match e as i32 {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::E2BIG => "E2BIG",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ERANGE => "ERANGE",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENETDOWN => "ENETDOWN",
        libc::ENOBUFS => "ENOBUFS",
        255 => "errno >= 255",
        _ => return format!("errno {e}"),
    };
    n.to_string()
}

fn sub<T: Copy + Default>(
    later: &BTreeMap<u32, T>,
    earlier: &BTreeMap<u32, T>,
    f: impl Fn(&T, &T) -> T,
) -> BTreeMap<u32, T> {
    later.iter().map(|(k, v)| (*k, f(v, earlier.get(k).unwrap_or(&T::default())))).collect()
}

impl XdpMonitorStats {
    /// `self - earlier`, field by field (keys of `self`; saturating).
    pub fn delta(&self, earlier: &XdpMonitorStats) -> XdpMonitorStats {
        let (a, b) = (&self.exceptions, &earlier.exceptions);
        XdpMonitorStats {
            exceptions: XdpActions {
                aborted: a.aborted.saturating_sub(b.aborted),
                drop: a.drop.saturating_sub(b.drop),
                pass: a.pass.saturating_sub(b.pass),
                tx: a.tx.saturating_sub(b.tx),
                redirect: a.redirect.saturating_sub(b.redirect),
                unknown: a.unknown.saturating_sub(b.unknown),
            },
            redirect_errors: self
                .redirect_errors
                .iter()
                .map(|(k, v)| (k.clone(), v.saturating_sub(earlier.redirect_errors.get(k).copied().unwrap_or(0))))
                .collect(),
            cpumap_enqueue: sub(&self.cpumap_enqueue, &earlier.cpumap_enqueue, |a, b| CpumapEnqueue {
                processed: a.processed.saturating_sub(b.processed),
                drops: a.drops.saturating_sub(b.drops),
                bulks: a.bulks.saturating_sub(b.bulks),
            }),
            cpumap_kthread: sub(&self.cpumap_kthread, &earlier.cpumap_kthread, |a, b| CpumapKthread {
                processed: a.processed.saturating_sub(b.processed),
                drops: a.drops.saturating_sub(b.drops),
                sched: a.sched.saturating_sub(b.sched),
                xdp_pass: a.xdp_pass.saturating_sub(b.xdp_pass),
                xdp_drop: a.xdp_drop.saturating_sub(b.xdp_drop),
                xdp_redirect: a.xdp_redirect.saturating_sub(b.xdp_redirect),
            }),
            devmap_xmit: DevmapXmit {
                sent: self.devmap_xmit.sent.saturating_sub(earlier.devmap_xmit.sent),
                drops: self.devmap_xmit.drops.saturating_sub(earlier.devmap_xmit.drops),
                err: self.devmap_xmit.err.saturating_sub(earlier.devmap_xmit.err),
                calls: self.devmap_xmit.calls.saturating_sub(earlier.devmap_xmit.calls),
            },
        }
    }

    /// Every counter with a name that says what it counts, e.g.
    /// `("xdp_redirect_err ENETDOWN", 12)`, `("cpumap_enqueue drops to cpu 1", 3456)`.
    /// Zero counters included; drop counters have "drops", "err" or "xdp_exception" in the name.
    pub fn fields(&self) -> Vec<(String, u64)> {
        let e = &self.exceptions;
        let mut v: Vec<(String, u64)> = [
            ("XDP_ABORTED", e.aborted),
            ("XDP_DROP", e.drop),
            ("XDP_PASS", e.pass),
            ("XDP_TX", e.tx),
            ("XDP_REDIRECT", e.redirect),
            ("unknown action", e.unknown),
        ]
        .into_iter()
        .map(|(n, c)| (format!("xdp_exception {n}"), c))
        .collect();
        v.extend(self.redirect_errors.iter().map(|(n, c)| (format!("xdp_redirect_err {n}"), *c)));
        for (cpu, q) in &self.cpumap_enqueue {
            v.push((format!("cpumap_enqueue to cpu {cpu}"), q.processed));
            v.push((format!("cpumap_enqueue drops to cpu {cpu}"), q.drops));
            v.push((format!("cpumap_enqueue bulks to cpu {cpu}"), q.bulks));
        }
        for (cpu, k) in &self.cpumap_kthread {
            v.push((format!("cpumap_kthread cpu {cpu} processed"), k.processed));
            v.push((format!("cpumap_kthread cpu {cpu} drops"), k.drops));
            v.push((format!("cpumap_kthread cpu {cpu} sched"), k.sched));
            v.push((format!("cpumap_kthread cpu {cpu} xdp_pass"), k.xdp_pass));
            v.push((format!("cpumap_kthread cpu {cpu} xdp_drop"), k.xdp_drop));
            v.push((format!("cpumap_kthread cpu {cpu} xdp_redirect"), k.xdp_redirect));
        }
        let d = &self.devmap_xmit;
        v.push(("devmap_xmit sent".into(), d.sent));
        v.push(("devmap_xmit drops".into(), d.drops));
        v.push(("devmap_xmit err".into(), d.err));
        v.push(("devmap_xmit calls".into(), d.calls));
        v
    }

    /// The non-zero counters as `name: value` lines (`xdp_redirect_err ENETDOWN: 12`).
    pub fn lines(&self) -> Vec<String> {
        self.fields().into_iter().filter(|(_, c)| *c != 0).map(|(n, c)| format!("{n}: {c}")).collect()
    }

    /// Frames lost at a tracepoint-named place: exceptions, redirect errors, CPUMAP enqueue
    /// and kthread drops, devmap xmit drops.
    pub fn total_drops(&self) -> u64 {
        let e = &self.exceptions;
        e.aborted
            + e.drop
            + e.pass
            + e.tx
            + e.redirect
            + e.unknown
            + self.redirect_errors.values().sum::<u64>()
            + self.cpumap_enqueue.values().map(|q| q.drops).sum::<u64>()
            + self.cpumap_kthread.values().map(|k| k.drops).sum::<u64>()
            + self.devmap_xmit.drops
    }
}

/// The XDP tracepoint monitor: attached on creation, detached on drop.
#[derive(Debug)]
pub struct XdpMonitor {
    _links: Vec<libbpf_rs::Link>,
    config: MapHandle,
    exception: MapHandle,
    redirect_err: MapHandle,
    enqueue: MapHandle,
    kthread: MapHandle,
    devmap: MapHandle,
    probe: MonitorProbe,
}

/// The per-CPU values of `key` in `map`, each read as the map's value type `T` (a struct of
/// [`crate::abi`], or `u64`).
fn per_cpu<T: bytemuck::Pod>(map: &MapHandle, name: &'static str, key: u32) -> Result<Vec<T>, BpfError> {
    let per_cpu =
        map.lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY).map_err(|cause| BpfError::Map { map: name, cause })?;
    Ok(per_cpu.unwrap_or_default().iter().filter_map(|v| abi::read::<T>(v)).collect())
}

/// A `u64` counter of a per-CPU map, summed over CPUs.
fn sum_u64(map: &MapHandle, name: &'static str, key: u32) -> Result<u64, BpfError> {
    Ok(per_cpu::<u64>(map, name, key)?.iter().sum())
}

impl XdpMonitor {
    /// Checks, without loading anything, that the kernel has BTF and every tracepoint the
    /// monitor attaches to.
    ///
    /// # Errors
    ///
    /// [`BpfError::MissingFeature`] naming the feature and the first kernel that has it: kernel
    /// BTF (Linux >= 5.5, CONFIG_DEBUG_INFO_BTF=y), a required `xdp:` tracepoint, or
    /// `struct xdp_cpumap_stats` (Linux >= 5.10).
    pub fn probe() -> Result<MonitorProbe, BpfError> {
        Self::probe_btf(std::path::Path::new("/sys/kernel/btf/vmlinux"))
    }

    /// [`XdpMonitor::probe`] against the kernel BTF at `path` (the running kernel's is
    /// `/sys/kernel/btf/vmlinux`).
    ///
    /// # Errors
    ///
    /// As [`XdpMonitor::probe`]; a missing or unparsable file at `path` is reported as missing
    /// kernel BTF.
    pub fn probe_btf(path: &std::path::Path) -> Result<MonitorProbe, BpfError> {
        let unsupported = || BpfError::MissingFeature {
            feature: format!("kernel BTF ({}, CONFIG_DEBUG_INFO_BTF=y) for tp_btf tracepoint programs", path.display()),
            min_kernel: "5.5",
        };
        if !path.exists() {
            return Err(unsupported());
        }
        let btf = Btf::parse(path).ok_or_else(unsupported)?;
        for (tp, min) in REQUIRED {
            // A tracepoint usable by tp_btf has a `btf_trace_<name>` typedef in the kernel's BTF.
            if !btf.has_type(&format!("btf_trace_{tp}"), BTF_KIND_TYPEDEF) {
                return Err(BpfError::MissingFeature {
                    feature: format!("tracepoint xdp:{tp} (tp_btf)"),
                    min_kernel: min,
                });
            }
        }
        if !btf.has_type("xdp_cpumap_stats", BTF_KIND_STRUCT) {
            return Err(BpfError::MissingFeature {
                feature: "CPUMAP program statistics in xdp:xdp_cpumap_kthread (struct xdp_cpumap_stats)".into(),
                min_kernel: "5.10",
            });
        }
        Ok(MonitorProbe { has_redirect_map_err: btf.has_type("btf_trace_xdp_redirect_map_err", BTF_KIND_TYPEDEF) })
    }

    /// Probes ([`XdpMonitor::probe`]), loads `bpf/xdp_monitor.bpf.c` and attaches its programs
    /// to the XDP tracepoints, counting everything (see [`XdpMonitor::set_filter`]). On any
    /// error nothing stays attached. Needs CAP_BPF + CAP_PERFMON (or root).
    ///
    /// # Errors
    ///
    /// As [`XdpMonitor::probe`]; [`BpfError::Load`] if loading fails (verifier, privileges);
    /// [`BpfError::AttachTracepoint`] naming the tracepoint that could not be attached (EPERM
    /// without CAP_BPF + CAP_PERFMON); [`BpfError::Map`] if a map handle cannot be taken.
    pub fn attach() -> Result<Self, BpfError> {
        let probe = Self::probe()?;
        let mut storage = MaybeUninit::uninit();
        let builder = skel::xdp_monitor::XdpMonitorSkelBuilder::default();
        let mut open = builder.open(&mut storage).map_err(|cause| BpfError::Load { prog: "xdp_monitor", cause })?;
        if !probe.has_redirect_map_err {
            open.progs.tp_xdp_redirect_map_err.set_autoload(false);
        }
        let s = open.load().map_err(|cause| BpfError::Load { prog: "xdp_monitor", cause })?;
        let mut links = Vec::new();
        let progs = [
            ("tp_btf/xdp_exception", Some(&s.progs.tp_xdp_exception)),
            ("tp_btf/xdp_redirect_err", Some(&s.progs.tp_xdp_redirect_err)),
            ("tp_btf/xdp_redirect_map_err", probe.has_redirect_map_err.then_some(&s.progs.tp_xdp_redirect_map_err)),
            ("tp_btf/xdp_cpumap_enqueue", Some(&s.progs.tp_xdp_cpumap_enqueue)),
            ("tp_btf/xdp_cpumap_kthread", Some(&s.progs.tp_xdp_cpumap_kthread)),
            ("tp_btf/xdp_devmap_xmit", Some(&s.progs.tp_xdp_devmap_xmit)),
        ];
        for (name, p) in progs {
            if let Some(p) = p {
                links.push(p.attach().map_err(|cause| BpfError::AttachTracepoint { tracepoint: name, cause })?);
            }
        }
        let h = |m: &libbpf_rs::MapMut<'_>, name: &'static str| {
            MapHandle::try_from(m).map_err(|cause| BpfError::Map { map: name, cause })
        };
        Ok(Self {
            config: h(&s.maps.mon_config, "mon_config")?,
            exception: h(&s.maps.mon_exception, "mon_exception")?,
            redirect_err: h(&s.maps.mon_redirect_err, "mon_redirect_err")?,
            enqueue: h(&s.maps.mon_enqueue, "mon_enqueue")?,
            kthread: h(&s.maps.mon_kthread, "mon_kthread")?,
            devmap: h(&s.maps.mon_devmap, "mon_devmap")?,
            _links: links,
            probe,
        })
    }

    /// What the probe found at attach.
    pub fn probe_result(&self) -> MonitorProbe {
        self.probe
    }

    /// Counts only what `f` selects from now on (counts so far stay).
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`mon_config`) if the update fails.
    pub fn set_filter(&self, f: MonitorFilter) -> Result<(), BpfError> {
        let v = fp_mon_config { ifindex: f.ifindex, cpumap_id: f.cpumap_id, netns_ino: f.netns_ino, _pad: 0 };
        self.config
            .update(&0u32.to_ne_bytes(), bytes_of(&v), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "mon_config", cause })
    }

    /// The filter in force.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`mon_config`) if the lookup fails.
    pub fn filter(&self) -> Result<MonitorFilter, BpfError> {
        let v = self
            .config
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(|cause| BpfError::Map { map: "mon_config", cause })?
            .and_then(|v| abi::read::<fp_mon_config>(&v))
            .unwrap_or_else(Zeroable::zeroed);
        Ok(MonitorFilter { ifindex: v.ifindex, cpumap_id: v.cpumap_id, netns_ino: v.netns_ino })
    }

    /// Sets the interface part of the filter to `ifindex` in the calling thread's network
    /// namespace (0: every interface), keeping the CPUMAP part.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`mon_config`) if the lookup or the update fails.
    pub fn set_ifindex(&self, ifindex: u32) -> Result<(), BpfError> {
        self.set_filter(MonitorFilter { ifindex, netns_ino: current_netns_ino(), ..self.filter()? })
    }

    /// Sets the CPUMAP part of the filter (0: every CPUMAP), keeping the interface part.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] (`mon_config`) if the lookup or the update fails.
    pub fn set_cpumap_id(&self, cpumap_id: u32) -> Result<(), BpfError> {
        self.set_filter(MonitorFilter { cpumap_id, ..self.filter()? })
    }

    /// The counters since attach, summed over CPUs.
    ///
    /// # Errors
    ///
    /// [`BpfError::Map`] naming the first per-CPU lookup that fails.
    pub fn snapshot(&self) -> Result<XdpMonitorStats, BpfError> {
        let mut s = XdpMonitorStats::default();
        let mut ex = [0u64; 6];
        for (i, e) in ex.iter_mut().enumerate() {
            *e = sum_u64(&self.exception, "mon_exception", i as u32)?;
        }
        s.exceptions =
            XdpActions { aborted: ex[0], drop: ex[1], pass: ex[2], tx: ex[3], redirect: ex[4], unknown: ex[5] };
        for e in 0..256u32 {
            let n = sum_u64(&self.redirect_err, "mon_redirect_err", e)?;
            if n != 0 {
                s.redirect_errors.insert(errno_name(e), n);
            }
        }
        let ncpu = libbpf_rs::num_possible_cpus().unwrap_or(1).min(256);
        for cpu in 0..ncpu as u32 {
            let mut e = CpumapEnqueue::default();
            for v in per_cpu::<fp_mon_enqueue>(&self.enqueue, "mon_enqueue", cpu)? {
                e.processed += v.processed;
                e.drops += v.drops;
                e.bulks += v.bulks;
            }
            if e != CpumapEnqueue::default() {
                s.cpumap_enqueue.insert(cpu, e);
            }
        }
        // One value per CPU: the kthread's own CPU.
        for (cpu, v) in per_cpu::<fp_mon_kthread>(&self.kthread, "mon_kthread", 0)?.iter().enumerate() {
            let k = CpumapKthread {
                processed: v.processed,
                drops: v.drops,
                sched: v.sched,
                xdp_pass: v.xdp_pass,
                xdp_drop: v.xdp_drop,
                xdp_redirect: v.xdp_redirect,
            };
            if k != CpumapKthread::default() {
                s.cpumap_kthread.insert(cpu as u32, k);
            }
        }
        for d in per_cpu::<fp_mon_devmap>(&self.devmap, "mon_devmap", 0)? {
            s.devmap_xmit.sent += d.sent;
            s.devmap_xmit.drops += d.drops;
            s.devmap_xmit.err += d.err;
            s.devmap_xmit.calls += d.calls;
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_and_names() {
        let mut a = XdpMonitorStats::default();
        a.redirect_errors.insert(errno_name(libc::ENETDOWN as u32), 2);
        a.cpumap_enqueue.insert(1, CpumapEnqueue { processed: 10, drops: 1, bulks: 1 });
        let mut b = a.clone();
        *b.redirect_errors.get_mut("ENETDOWN").expect("key") += 12;
        b.cpumap_enqueue.insert(1, CpumapEnqueue { processed: 5000, drops: 3457, bulks: 100 });
        b.exceptions.aborted = 3;
        let d = b.delta(&a);
        assert_eq!(d.redirect_errors["ENETDOWN"], 12);
        assert_eq!(d.cpumap_enqueue[&1].enqueued(), 4990 - 3456);
        let lines = d.lines();
        assert!(lines.contains(&"xdp_redirect_err ENETDOWN: 12".to_string()), "{lines:?}");
        assert!(lines.contains(&"cpumap_enqueue drops to cpu 1: 3456".to_string()), "{lines:?}");
        assert!(lines.contains(&"xdp_exception XDP_ABORTED: 3".to_string()), "{lines:?}");
        assert_eq!(d.total_drops(), 3 + 12 + 3456);
        assert_eq!(errno_name(300), "errno 300");
    }

    #[test]
    fn no_btf_is_named_with_its_kernel() {
        let e = XdpMonitor::probe_btf(std::path::Path::new("/nonexistent/vmlinux")).expect_err("no BTF");
        assert!(matches!(e, BpfError::MissingFeature { min_kernel: "5.5", .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "kernel BTF (/nonexistent/vmlinux, CONFIG_DEBUG_INFO_BTF=y) for tp_btf tracepoint programs is not available in this kernel: needs Linux >= 5.5"
        );
        // A file that is no BTF at all.
        let e = XdpMonitor::probe_btf(std::path::Path::new("/proc/self/status")).expect_err("not BTF");
        assert!(matches!(e, BpfError::MissingFeature { .. }), "{e:?}");
    }

    #[test]
    fn this_kernel_has_every_tracepoint() {
        // 6.18 here: every tracepoint but xdp_redirect_map_err (removed upstream).
        if std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            let p = XdpMonitor::probe().expect("probe");
            eprintln!("{p:?}");
        }
    }
}
