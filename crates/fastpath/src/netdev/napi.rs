//! NAPI instances and their interrupt-deferral settings: read with the `netdev` family's
//! `napi-get` (kernel >= 6.9), set per instance with `napi-set` (kernel >= 6.13; the
//! `irq-suspend-timeout` from 6.14), or, on older kernels, per device through `/sys/class/net/DEV/napi_defer_hard_irqs`
//! and `/sys/class/net/DEV/gro_flush_timeout`; and [`NapiProfile`], the busy-poll profile that
//! sets them on every NAPI of an interface and puts the previous values back when dropped.
//!
//! What the settings do (Documentation/networking/napi.rst, "Busy polling" and "IRQ
//! suspension"; the attribute docs of include/uapi/linux/netdev.h):
//!
//! - `defer-hard-irqs`: how many consecutive empty polls may pass before the device's
//!   interrupts (for veth: the peer's `napi_schedule`) are re-enabled; with a preferred busy
//!   poller (`SO_PREFER_BUSY_POLL`) the application's polls keep the NAPI to themselves.
//! - `gro-flush-timeout` (ns): the watchdog that schedules the NAPI when the application has
//!   not polled for that long (and holds GRO super-frames until it fires).
//! - `irq-suspend-timeout` (ns): with epoll busy polling and `prefer_busy_poll`, interrupts stay
//!   suspended while epoll keeps finding events, up to this long (fs/eventpoll.c,
//!   `napi_suspend_irqs`).
//!
//! Attribute and command numbers: include/uapi/linux/netdev.h (enum netdev_a_napi; the
//! commands NETDEV_CMD_NAPI_GET = 11, NETDEV_CMD_NAPI_SET = 14). `napi-set` needs
//! CAP_NET_ADMIN (GENL_ADMIN_PERM); `napi-get` needs no privilege. Everything works in the
//! calling thread's network namespace, except the sysfs fallback, which sees the namespace of
//! whoever mounted `/sys` (`ip netns exec` remounts it; a thread that only `setns()`-ed does
//! not): it checks that `/sys/class/net/DEV/ifindex` is the interface's and refuses otherwise.

use std::io;
use std::path::PathBuf;

use serde::Serialize;

use super::genl::{self, Attrs, Netdev, NAPI_GET, NAPI_SET};
use super::Iface;

/// Largest `defer-hard-irqs` the kernel accepts (netdev.yaml: `max: s32-max`).
pub const MAX_DEFER_HARD_IRQS: u32 = i32::MAX as u32;

/// One NAPI instance, as `napi-get` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Napi {
    /// NAPI id (what `SO_INCOMING_NAPI_ID` and busy polling name).
    pub id: u32,
    /// Interface index.
    pub ifindex: u32,
    /// Interrupt vector, if the driver names one (veth: none).
    pub irq: Option<u32>,
    /// PID of its kernel thread when threaded, else none.
    pub pid: Option<u32>,
    /// Consecutive empty polls before interrupts come back (>= 6.13).
    pub defer_hard_irqs: Option<u32>,
    /// Watchdog timeout, nanoseconds (>= 6.13).
    pub gro_flush_timeout_ns: Option<u64>,
    /// IRQ suspension timeout, nanoseconds (>= 6.14).
    pub irq_suspend_timeout_ns: Option<u64>,
}

impl Napi {
    fn from_attrs(a: &Attrs) -> Option<Self> {
        let u32_of = |k| genl::uint(a, k).map(|v| v as u32);
        Some(Self {
            id: u32_of(genl::NAPI_A_ID)?,
            ifindex: u32_of(genl::NAPI_A_IFINDEX)?,
            irq: u32_of(genl::NAPI_A_IRQ),
            pid: u32_of(genl::NAPI_A_PID),
            defer_hard_irqs: u32_of(genl::NAPI_A_DEFER_HARD_IRQS),
            gro_flush_timeout_ns: genl::uint(a, genl::NAPI_A_GRO_FLUSH_TIMEOUT),
            irq_suspend_timeout_ns: genl::uint(a, genl::NAPI_A_IRQ_SUSPEND_TIMEOUT),
        })
    }

    /// The settings this instance has now (what a profile restores).
    pub fn settings(&self) -> NapiSettings {
        NapiSettings {
            defer_hard_irqs: self.defer_hard_irqs,
            gro_flush_timeout_ns: self.gro_flush_timeout_ns,
            irq_suspend_timeout_ns: self.irq_suspend_timeout_ns,
        }
    }
}

/// Settings for one NAPI instance; `None` leaves a setting as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct NapiSettings {
    /// `defer-hard-irqs`, 0..=[`MAX_DEFER_HARD_IRQS`].
    pub defer_hard_irqs: Option<u32>,
    /// `gro-flush-timeout`, nanoseconds.
    pub gro_flush_timeout_ns: Option<u64>,
    /// `irq-suspend-timeout`, nanoseconds (kernel >= 6.14; no sysfs knob).
    pub irq_suspend_timeout_ns: Option<u64>,
}

impl NapiSettings {
    /// The busy-poll profile of Documentation/networking/napi.rst: interrupts deferred for 100
    /// empty polls and a 200 us watchdog, so that a preferred busy poller keeps the NAPI.
    pub const BUSY_POLL: NapiSettings =
        NapiSettings { defer_hard_irqs: Some(100), gro_flush_timeout_ns: Some(200_000), irq_suspend_timeout_ns: None };

    /// [`NapiSettings::BUSY_POLL`] with IRQ suspension: interrupts stay off up to 20 ms while
    /// epoll busy polling finds events (napi.rst "IRQ suspension"); kernel >= 6.14.
    pub const IRQ_SUSPEND: NapiSettings = NapiSettings {
        defer_hard_irqs: Some(100),
        gro_flush_timeout_ns: Some(200_000),
        irq_suspend_timeout_ns: Some(20_000_000),
    };

    /// # Errors
    ///
    /// [`NapiError::BadValue`] for a `defer_hard_irqs` above [`MAX_DEFER_HARD_IRQS`].
    pub fn validate(&self) -> Result<(), NapiError> {
        if let Some(d) = self.defer_hard_irqs.filter(|d| *d > MAX_DEFER_HARD_IRQS) {
            return Err(NapiError::BadValue {
                what: "defer-hard-irqs",
                value: d.to_string(),
                accepted: format!("0 to {MAX_DEFER_HARD_IRQS}"),
            });
        }
        Ok(())
    }

    fn attrs(&self, id: u32) -> Attrs {
        let mut a = vec![(genl::NAPI_A_ID, id.to_ne_bytes().to_vec())];
        if let Some(d) = self.defer_hard_irqs {
            a.push((genl::NAPI_A_DEFER_HARD_IRQS, d.to_ne_bytes().to_vec()));
        }
        if let Some(t) = self.gro_flush_timeout_ns {
            a.push((genl::NAPI_A_GRO_FLUSH_TIMEOUT, t.to_ne_bytes().to_vec()));
        }
        if let Some(t) = self.irq_suspend_timeout_ns {
            a.push((genl::NAPI_A_IRQ_SUSPEND_TIMEOUT, t.to_ne_bytes().to_vec()));
        }
        a
    }
}

/// Errors of the NAPI settings. Each is one line naming the value or the call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NapiError {
    /// A value out of range.
    #[error("{what} {value} is not accepted: use {accepted}")]
    BadValue {
        /// The setting.
        what: &'static str,
        /// The value given.
        value: String,
        /// What is accepted.
        accepted: String,
    },
    /// The kernel lacks what was asked.
    #[error(transparent)]
    Unsupported(#[from] crate::features::Unsupported),
    /// The interface has no NAPI instance to set.
    #[error("{iface} has no NAPI instance (napi-get lists none; a veth has NAPI only with an XDP program attached or GRO on)")]
    NoNapi {
        /// Interface name.
        iface: String,
    },
    /// A netlink request failed.
    #[error("netdev netlink {call} failed: {err}")]
    Netlink {
        /// The request and its arguments, e.g. `napi-set id=8193 defer-hard-irqs=100`.
        call: String,
        /// The kernel's answer (EPERM without CAP_NET_ADMIN).
        err: io::Error,
    },
    /// A NAPI instance the profile set is gone and could not be restored.
    #[error("{iface}: NAPI {ids} set by the busy-poll profile {why}")]
    NotRestored {
        /// Interface name.
        iface: String,
        /// The NAPI ids, comma-separated.
        ids: String,
        /// What happened and what may follow.
        why: String,
    },
    /// The interface was resolved in another network namespace than the calling thread's.
    #[error("{iface} was resolved in network namespace net:[{its}], this thread is in net:[{here}]: apply the profile on a thread in the interface's namespace")]
    OtherNetns {
        /// Interface name.
        iface: String,
        /// Its namespace's inode number.
        its: u32,
        /// The calling thread's.
        here: u32,
    },
    /// A sysfs knob could not be read or written.
    #[error("{path}: {err}")]
    Sysfs {
        /// The file.
        path: String,
        /// What failed.
        err: String,
    },
}

fn nl(call: impl Into<String>) -> impl FnOnce(io::Error) -> NapiError {
    let call = call.into();
    move |err| NapiError::Netlink { call, err }
}

/// Every NAPI instance of interface `ifindex` (`napi-get` dump filtered by ifindex, kernel >=
/// 6.9), in the kernel's order. No privileges.
///
/// # Errors
///
/// [`NapiError::Unsupported`] without `napi-get` (no `netdev` family, or EOPNOTSUPP);
/// [`NapiError::Netlink`] for any other failure (ENODEV: no such ifindex in this namespace).
pub fn napis(ifindex: u32) -> Result<Vec<Napi>, NapiError> {
    let unsupported =
        || NapiError::Unsupported(crate::features::Unsupported { feature: "netdev napi-get", min_kernel: "6.9" });
    let nd = Netdev::open().map_err(nl("open"))?.ok_or_else(unsupported)?;
    dump_napis(&nd, ifindex).map_err(|e| match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) => unsupported(),
        _ => NapiError::Netlink { call: format!("napi-get ifindex={ifindex}"), err: e },
    })
}

fn dump_napis(nd: &Netdev, ifindex: u32) -> io::Result<Vec<Napi>> {
    let all = nd.dump(NAPI_GET, vec![(genl::NAPI_A_IFINDEX, ifindex.to_ne_bytes().to_vec())])?;
    Ok(all.iter().filter_map(Napi::from_attrs).filter(|n| n.ifindex == ifindex).collect())
}

/// The NAPI id RX queue `queue` of interface `ifindex` is linked to (`queue-get`, kernel >=
/// 6.8), in the calling thread's namespace; `None` when the driver links none (veth does not
/// call `netif_queue_set_napi`; virtio_net, mlx5, ice do). An AF_XDP socket bound to the
/// queue takes its NAPI id from this link (`xsk_bind`, `rxq->napi`; copy and zero-copy mode
/// since 6.15), and busy polling polls that NAPI: without it the socket busy polls nothing.
/// No privileges.
///
/// # Errors
///
/// [`NapiError::Unsupported`] without `queue-get` (no `netdev` family, or EOPNOTSUPP);
/// [`NapiError::Netlink`] otherwise (ENODEV: no such ifindex; EINVAL: no such queue).
pub fn rx_queue_napi(ifindex: u32, queue: u32) -> Result<Option<u32>, NapiError> {
    let unsupported =
        || NapiError::Unsupported(crate::features::Unsupported { feature: "netdev queue-get", min_kernel: "6.8" });
    let nd = Netdev::open().map_err(nl("open"))?.ok_or_else(unsupported)?;
    match nd.queue_get(ifindex, 0, queue) {
        Ok(a) => Ok(genl::uint(&a, genl::QUEUE_A_NAPI_ID).map(|v| v as u32)),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Err(unsupported()),
        Err(e) => Err(NapiError::Netlink { call: format!("queue-get ifindex={ifindex} type=rx id={queue}"), err: e }),
    }
}

/// Sets `s` on NAPI instance `id` (`napi-set`, kernel >= 6.13, `irq-suspend-timeout` >= 6.14).
/// Needs CAP_NET_ADMIN.
///
/// # Errors
///
/// [`NapiError::BadValue`] ([`NapiSettings::validate`]); [`NapiError::Netlink`] with the
/// kernel's errno: EOPNOTSUPP (no `napi-set`), EINVAL (an attribute this kernel does not know,
/// e.g. `irq-suspend-timeout` before 6.14), ENOENT (no such NAPI), EPERM.
pub fn napi_set(id: u32, s: &NapiSettings) -> Result<(), NapiError> {
    s.validate()?;
    let nd = Netdev::open().map_err(nl("open"))?.ok_or_else(|| NapiError::Netlink {
        call: "napi-set".into(),
        err: io::Error::from_raw_os_error(libc::EOPNOTSUPP),
    })?;
    nd.ack(NAPI_SET, s.attrs(id)).map_err(nl(describe_set(id, s)))
}

fn describe_set(id: u32, s: &NapiSettings) -> String {
    let mut t = format!("napi-set id={id}");
    if let Some(d) = s.defer_hard_irqs {
        t += &format!(" defer-hard-irqs={d}");
    }
    if let Some(g) = s.gro_flush_timeout_ns {
        t += &format!(" gro-flush-timeout={g}");
    }
    if let Some(i) = s.irq_suspend_timeout_ns {
        t += &format!(" irq-suspend-timeout={i}");
    }
    t
}

/// True if the per-device sysfs knobs exist (`/sys/class/net/lo/napi_defer_hard_irqs` and
/// `gro_flush_timeout`; `napi_defer_hard_irqs` since 5.7).
pub fn sysfs_knobs() -> bool {
    let d = PathBuf::from("/sys/class/net/lo");
    d.join("napi_defer_hard_irqs").exists() && d.join("gro_flush_timeout").exists()
}

/// Where a profile's settings went.
#[derive(Debug)]
enum Applied {
    /// Per NAPI, with each instance's previous settings.
    PerNapi(Vec<Napi>),
    /// Per device through sysfs, each knob as written.
    Sysfs(Vec<SysfsKnob>),
}

/// One sysfs knob a profile wrote.
#[derive(Debug, Clone)]
struct SysfsKnob {
    path: PathBuf,
    /// Its contents before (trimmed).
    old: String,
    /// What the profile wrote.
    written: String,
}

/// Where the per-device knobs are.
const SYSFS_NET: &str = "/sys/class/net";

/// The busy-poll profile of one interface: `settings` on every NAPI of the interface
/// (`napi-set`, kernel >= 6.13; on older kernels the per-device sysfs knobs, which cannot
/// carry `irq-suspend-timeout`), and the previous values put back by [`NapiProfile::restore`]
/// or on drop (also when unwinding). Applying is all or nothing: if one instance refuses, those
/// already set are restored before the error returns. Needs CAP_NET_ADMIN (root for sysfs).
///
/// The restore puts back only what the profile set, and only where the value is still the
/// profile's (two profiles on one interface dropped in any order leave the values of before
/// both when they set the same values; otherwise what another profile or an administrator set
/// meanwhile is left, with a warning). A NAPI instance that goes away before the restore is
/// not necessarily done with: drivers that use `netif_napi_add_config` (6.13+) keep a disabled
/// instance's settings (a link down, a queue-count change) and give them back when it is
/// enabled again, so the restore looks for it again and reports what it cannot restore
/// ([`NapiProfile::restore`]). A veth's NAPI (no config kept) is deleted with its XDP program
/// when GRO is off, and a new one starts from the device's values: drop the profile before
/// detaching the XDP program anyway.
#[derive(Debug)]
pub struct NapiProfile {
    iface: String,
    ifindex: u32,
    /// The network namespace the profile was applied in (its inode number, and an fd of it to
    /// restore from, whatever namespace the restoring thread is in).
    netns_ino: u32,
    netns: Option<std::os::fd::OwnedFd>,
    settings: NapiSettings,
    applied: Option<Applied>,
}

impl NapiProfile {
    /// Applies `settings` to every NAPI of `iface`, on a thread in the namespace `iface` was
    /// resolved in (refused otherwise); the profile keeps that namespace, and restores in it
    /// from any thread.
    ///
    /// # Errors
    ///
    /// [`NapiError::OtherNetns`] when the calling thread is not in `iface`'s namespace;
    /// [`NapiError::BadValue`]; [`NapiError::Unsupported`] for `irq_suspend_timeout_ns` on a
    /// kernel without it (< 6.14), or for no way at all (neither `napi-set` nor sysfs knobs);
    /// [`NapiError::NoNapi`] when the interface has no NAPI; [`NapiError::Netlink`] /
    /// [`NapiError::Sysfs`] for a refused change (EPERM without CAP_NET_ADMIN). Nothing stays
    /// changed on error.
    pub fn apply(iface: &Iface, settings: &NapiSettings) -> Result<Self, NapiError> {
        settings.validate()?;
        use crate::features::{check, Feature};
        if settings.irq_suspend_timeout_ns.is_some() {
            check(Feature::IrqSuspend)?;
        }
        let here = crate::bpf::monitor::current_netns_ino();
        if iface.netns_ino() != here {
            return Err(NapiError::OtherNetns { iface: iface.name().to_string(), its: iface.netns_ino(), here });
        }
        let netns = std::fs::File::open("/proc/thread-self/ns/net")
            .map_err(|e| NapiError::Sysfs { path: "/proc/thread-self/ns/net".into(), err: e.to_string() })?;
        let mut p = Self {
            iface: iface.name().to_string(),
            ifindex: iface.ifindex(),
            netns_ino: here,
            netns: Some(netns.into()),
            settings: *settings,
            applied: None,
        };
        if check(Feature::NapiSet).is_ok() {
            let list = napis(iface.ifindex())?;
            if list.is_empty() {
                return Err(NapiError::NoNapi { iface: p.iface.clone() });
            }
            let mut done = Vec::with_capacity(list.len());
            for n in list {
                if let Err(e) = napi_set(n.id, settings) {
                    p.applied = Some(Applied::PerNapi(done));
                    return Err(e); // p drops here: restores what was set
                }
                done.push(n);
            }
            p.applied = Some(Applied::PerNapi(done));
            return Ok(p);
        }
        if !sysfs_knobs() {
            return Err(NapiError::Unsupported(crate::features::Unsupported {
                feature: "NAPI settings (netdev napi-set, or the sysfs knobs napi_defer_hard_irqs / gro_flush_timeout)",
                min_kernel: "5.7",
            }));
        }
        p.apply_sysfs(std::path::Path::new(SYSFS_NET), iface)?;
        Ok(p)
    }

    /// The sysfs fallback: `settings` into `<net_root>/<iface>/napi_defer_hard_irqs` and
    /// `gro_flush_timeout`. Each knob is recorded in `self.applied` as soon as it is written, so
    /// an error at any later step (reading the next knob included) leaves it to the restore.
    fn apply_sysfs(&mut self, net_root: &std::path::Path, iface: &Iface) -> Result<(), NapiError> {
        let dir = net_root.join(iface.name());
        let idx = std::fs::read_to_string(dir.join("ifindex")).unwrap_or_default();
        if idx.trim() != iface.ifindex().to_string() {
            return Err(NapiError::Sysfs {
                path: dir.display().to_string(),
                err: format!(
                    "this /sys shows another network namespace than the one {} (ifindex {}) is in: run under `ip netns exec`",
                    iface.name(),
                    iface.ifindex()
                ),
            });
        }
        self.applied = Some(Applied::Sysfs(Vec::new()));
        let knobs = [
            ("napi_defer_hard_irqs", self.settings.defer_hard_irqs.map(|v| v as u64)),
            ("gro_flush_timeout", self.settings.gro_flush_timeout_ns),
        ];
        for (knob, value) in knobs {
            let Some(value) = value else { continue };
            let path = dir.join(knob);
            let sys_err = |e: io::Error| NapiError::Sysfs { path: path.display().to_string(), err: e.to_string() };
            let old = std::fs::read_to_string(&path).map_err(sys_err)?;
            std::fs::write(&path, value.to_string()).map_err(sys_err)?;
            if let Some(Applied::Sysfs(saved)) = &mut self.applied {
                saved.push(SysfsKnob { path: path.clone(), old: old.trim().to_string(), written: value.to_string() });
            }
        }
        Ok(())
    }

    /// The interface's name.
    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// The settings applied.
    pub fn settings(&self) -> &NapiSettings {
        &self.settings
    }

    /// "napi-set" or "sysfs": how the settings were applied.
    pub fn method(&self) -> &'static str {
        match self.applied {
            Some(Applied::Sysfs(_)) => "sysfs",
            _ => "napi-set",
        }
    }

    /// The NAPI instances set, with the settings they had before (empty for sysfs).
    pub fn previous(&self) -> &[Napi] {
        match &self.applied {
            Some(Applied::PerNapi(v)) => v,
            _ => &[],
        }
    }

    /// Puts back the previous value of each setting the profile set, where it is still the
    /// profile's value; returns a warning for each setting left alone because something else
    /// changed it meanwhile (another profile, an administrator). Settings the profile did not
    /// set (e.g. `irq-suspend-timeout` of [`NapiSettings::BUSY_POLL`]) are never written.
    ///
    /// A NAPI instance that is gone by id (ENOENT: disabled by a link down or a queue change,
    /// or deleted) is looked for again: the interface's NAPIs are listed again, and one with a
    /// new id that carries the profile's values (a driver that keeps per-NAPI config,
    /// `netif_napi_add_config`, 6.13+, gives it back on enable) is restored in its place; one
    /// with a new id and other values means the device made fresh instances (nothing to
    /// restore). What is left is an error ([`NapiError::NotRestored`]): such an instance may
    /// come back with the profile's values when it is enabled again.
    ///
    /// # Errors
    ///
    /// The first refused restore ([`NapiError::Netlink`], [`NapiError::Sysfs`],
    /// [`NapiError::NotRestored`]); the others are still tried.
    pub fn restore(mut self) -> Result<Vec<String>, NapiError> {
        self.restore_now()
    }

    fn restore_now(&mut self) -> Result<Vec<String>, NapiError> {
        let applied = self.applied.take();
        if applied.is_none() || crate::bpf::monitor::current_netns_ino() == self.netns_ino {
            return self.restore_applied(applied);
        }
        // Another namespace: restore from a thread that enters the profile's.
        let Some(fd) = &self.netns else {
            return Err(NapiError::OtherNetns {
                iface: self.iface.clone(),
                its: self.netns_ino,
                here: crate::bpf::monitor::current_netns_ino(),
            });
        };
        let this = &*self;
        std::thread::scope(|sc| {
            sc.spawn(move || {
                use std::os::fd::AsRawFd;
                // SAFETY: setns on an open namespace fd; affects this (new, scoped) thread only.
                if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(NapiError::Netlink {
                        call: format!("setns(net:[{}]) to restore {}", this.netns_ino, this.iface),
                        err: io::Error::last_os_error(),
                    });
                }
                this.restore_applied(applied)
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    fn restore_applied(&self, applied: Option<Applied>) -> Result<Vec<String>, NapiError> {
        let mut warn = Vec::new();
        let r = match applied {
            Some(Applied::PerNapi(v)) => self.restore_per_napi(v, &mut warn),
            Some(Applied::Sysfs(v)) => {
                let mut first = None;
                for k in v.into_iter().rev() {
                    match std::fs::read_to_string(&k.path) {
                        Ok(now) if now.trim() != k.written => warn.push(format!(
                            "{}: {} is {} now, not the {} the busy-poll profile wrote: left as it is",
                            self.iface,
                            k.path.display(),
                            now.trim(),
                            k.written
                        )),
                        Ok(_) => {
                            if let Err(e) = std::fs::write(&k.path, &k.old) {
                                first.get_or_insert(NapiError::Sysfs {
                                    path: k.path.display().to_string(),
                                    err: e.to_string(),
                                });
                            }
                        }
                        Err(e) => {
                            first.get_or_insert(NapiError::Sysfs {
                                path: k.path.display().to_string(),
                                err: e.to_string(),
                            });
                        }
                    }
                }
                first.map_or(Ok(()), Err)
            }
            None => Ok(()),
        };
        r.map(|()| warn)
    }

    /// True if `n` has every value this profile set.
    fn carries_profile(&self, n: &Napi) -> bool {
        let s = &self.settings;
        (s.defer_hard_irqs.is_some() || s.gro_flush_timeout_ns.is_some() || s.irq_suspend_timeout_ns.is_some())
            && s.defer_hard_irqs.is_none_or(|v| n.defer_hard_irqs == Some(v))
            && s.gro_flush_timeout_ns.is_none_or(|v| n.gro_flush_timeout_ns == Some(v))
            && s.irq_suspend_timeout_ns.is_none_or(|v| n.irq_suspend_timeout_ns == Some(v))
    }

    /// Restores on `now` (the instance as it is) the settings of `prev` this profile set and
    /// `now` still has; warns for the others.
    fn put_back(&self, now: &Napi, prev: &Napi, warn: &mut Vec<String>) -> Result<(), NapiError> {
        let mut back = NapiSettings::default();
        let s = &self.settings;
        let mut field = |name: &str, set: Option<u64>, cur: Option<u64>, old: Option<u64>| -> Option<u64> {
            let set = set?;
            if cur != Some(set) {
                warn.push(format!(
                    "{}: NAPI {} {name} is {} now, not the {set} the busy-poll profile set: left as it is",
                    self.iface,
                    now.id,
                    cur.map_or("unknown".to_string(), |c| c.to_string())
                ));
                return None;
            }
            old
        };
        back.defer_hard_irqs = field(
            "defer-hard-irqs",
            s.defer_hard_irqs.map(u64::from),
            now.defer_hard_irqs.map(u64::from),
            prev.defer_hard_irqs.map(u64::from),
        )
        .map(|v| v as u32);
        back.gro_flush_timeout_ns =
            field("gro-flush-timeout", s.gro_flush_timeout_ns, now.gro_flush_timeout_ns, prev.gro_flush_timeout_ns);
        back.irq_suspend_timeout_ns = field(
            "irq-suspend-timeout",
            s.irq_suspend_timeout_ns,
            now.irq_suspend_timeout_ns,
            prev.irq_suspend_timeout_ns,
        );
        if back == NapiSettings::default() {
            return Ok(());
        }
        napi_set(now.id, &back)
    }

    fn restore_per_napi(&self, saved: Vec<Napi>, warn: &mut Vec<String>) -> Result<(), NapiError> {
        let now = match napis(self.ifindex) {
            Ok(v) => v,
            // The device is gone, and its NAPIs and their config with it.
            Err(NapiError::Netlink { err, .. }) if err.raw_os_error() == Some(libc::ENODEV) => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut first = None;
        let mut gone = Vec::new();
        for prev in &saved {
            match now.iter().find(|n| n.id == prev.id) {
                Some(n) => {
                    if let Err(e) = self.put_back(n, prev, warn) {
                        first.get_or_insert(e);
                    }
                }
                None => gone.push(prev),
            }
        }
        // Instances with ids the profile never saw: those carrying its values first.
        let mut fresh: Vec<&Napi> = now.iter().filter(|n| !saved.iter().any(|p| p.id == n.id)).collect();
        fresh.sort_by_key(|n| (!self.carries_profile(n), n.id));
        let mut fresh = fresh.into_iter();
        let mut lost = Vec::new();
        for prev in gone {
            match fresh.next() {
                Some(n) if self.carries_profile(n) => {
                    if let Err(e) = self.put_back(n, prev, warn) {
                        first.get_or_insert(e);
                    }
                }
                // A fresh instance with other values: the device replaced it; nothing to undo.
                Some(_) => {}
                None => lost.push(prev.id.to_string()),
            }
        }
        if !lost.is_empty() {
            first.get_or_insert(NapiError::NotRestored {
                iface: self.iface.clone(),
                ids: lost.join(","),
                why: "is gone (disabled by a link down or a queue change?) and was not restored: a driver that keeps per-NAPI config gives it back with the profile's values when it enables it; check with napi-get and set it back with napi-set".into(),
            });
        }
        first.map_or(Ok(()), Err)
    }
}

impl Drop for NapiProfile {
    /// Restores ([`NapiProfile::restore`]); what it cannot restore, or leaves alone, is a
    /// warning on standard error.
    fn drop(&mut self) {
        match self.restore_now() {
            Ok(w) => w.iter().for_each(|w| eprintln!("fastpath: warning: {w}")),
            Err(e) => eprintln!("fastpath: warning: busy-poll profile not restored: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_validate_and_encode() {
        let bad = NapiSettings { defer_hard_irqs: Some(u32::MAX), ..Default::default() };
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("defer-hard-irqs 4294967295") && e.contains("2147483647"), "{e}");
        let a = NapiSettings::IRQ_SUSPEND.attrs(7);
        assert_eq!(a[0], (genl::NAPI_A_ID, 7u32.to_ne_bytes().to_vec()));
        assert_eq!(a[1], (genl::NAPI_A_DEFER_HARD_IRQS, 100u32.to_ne_bytes().to_vec()));
        assert_eq!(a[2], (genl::NAPI_A_GRO_FLUSH_TIMEOUT, 200_000u64.to_ne_bytes().to_vec()));
        assert_eq!(a[3], (genl::NAPI_A_IRQ_SUSPEND_TIMEOUT, 20_000_000u64.to_ne_bytes().to_vec()));
        assert_eq!(NapiSettings::default().attrs(1).len(), 1);
    }

    /// A fake `/sys/class/net/lo` with the knobs given, under a directory of its own.
    fn fake_sysfs(tag: &str, knobs: &[(&str, &str)]) -> (PathBuf, Iface) {
        let lo = Iface::resolve("lo").expect("lo");
        let root = std::env::temp_dir().join(format!("fastpath-napi-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("lo")).unwrap();
        std::fs::write(root.join("lo/ifindex"), format!("{}\n", lo.ifindex())).unwrap();
        for (k, v) in knobs {
            std::fs::write(root.join("lo").join(k), v).unwrap();
        }
        (root, lo)
    }

    fn profile_of(lo: &Iface, settings: NapiSettings) -> NapiProfile {
        NapiProfile {
            iface: lo.name().to_string(),
            ifindex: lo.ifindex(),
            netns_ino: lo.netns_ino(),
            netns: None,
            settings,
            applied: None,
        }
    }

    #[test]
    fn sysfs_knob_written_before_a_failing_step_is_restored() {
        // gro_flush_timeout is missing: reading it fails after napi_defer_hard_irqs was written.
        let (root, lo) = fake_sysfs("fail", &[("napi_defer_hard_irqs", "0\n")]);
        let mut p = profile_of(&lo, NapiSettings::BUSY_POLL);
        let e = p.apply_sysfs(&root, &lo).unwrap_err().to_string();
        assert!(e.contains("gro_flush_timeout"), "{e}");
        assert_eq!(std::fs::read_to_string(root.join("lo/napi_defer_hard_irqs")).unwrap().trim(), "100");
        drop(p);
        assert_eq!(std::fs::read_to_string(root.join("lo/napi_defer_hard_irqs")).unwrap().trim(), "0");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn sysfs_restore_leaves_a_knob_someone_else_changed() {
        let (root, lo) = fake_sysfs("other", &[("napi_defer_hard_irqs", "0\n"), ("gro_flush_timeout", "0\n")]);
        let mut p = profile_of(&lo, NapiSettings::BUSY_POLL);
        p.apply_sysfs(&root, &lo).unwrap();
        std::fs::write(root.join("lo/gro_flush_timeout"), "5000\n").unwrap();
        let w = p.restore().unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("gro_flush_timeout is 5000 now, not the 200000"), "{w:?}");
        assert_eq!(std::fs::read_to_string(root.join("lo/napi_defer_hard_irqs")).unwrap().trim(), "0");
        assert_eq!(std::fs::read_to_string(root.join("lo/gro_flush_timeout")).unwrap().trim(), "5000");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn napi_get_of_an_unknown_ifindex_is_enodev_not_empty() {
        match napis(999_999) {
            Err(NapiError::Netlink { err, .. }) => assert_eq!(err.raw_os_error(), Some(libc::ENODEV)),
            Err(NapiError::Unsupported(_)) => eprintln!("skipped: no napi-get"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn queue_get_of_lo_finds_no_napi() {
        // lo's RX queue 0 exists and is linked to no NAPI; no privileges needed.
        match rx_queue_napi(1, 0) {
            Ok(id) => assert_eq!(id, None),
            Err(NapiError::Unsupported(_)) => eprintln!("skipped: no queue-get"),
            Err(e) => panic!("{e}"),
        }
        if let Ok(eth) = std::env::var("FASTPATH_TEST_QUEUE_GET_IFINDEX") {
            eprintln!("queue-get ifindex {eth} rx 0: {:?}", rx_queue_napi(eth.parse().unwrap(), 0));
        }
    }

    #[test]
    fn napi_from_attrs_reads_4_and_8_byte_uints() {
        let a: Attrs = vec![
            (genl::NAPI_A_IFINDEX, 5u32.to_ne_bytes().to_vec()),
            (genl::NAPI_A_ID, 8193u32.to_ne_bytes().to_vec()),
            (genl::NAPI_A_DEFER_HARD_IRQS, 2u32.to_ne_bytes().to_vec()),
            (genl::NAPI_A_GRO_FLUSH_TIMEOUT, 20_000u32.to_ne_bytes().to_vec()),
            (genl::NAPI_A_IRQ_SUSPEND_TIMEOUT, (1u64 << 40).to_ne_bytes().to_vec()),
        ];
        let n = Napi::from_attrs(&a).unwrap();
        assert_eq!((n.id, n.ifindex, n.irq, n.pid), (8193, 5, None, None));
        assert_eq!(
            n.settings(),
            NapiSettings {
                defer_hard_irqs: Some(2),
                gro_flush_timeout_ns: Some(20_000),
                irq_suspend_timeout_ns: Some(1 << 40)
            }
        );
        assert!(Napi::from_attrs(&a[2..].to_vec()).is_none());
    }
}
