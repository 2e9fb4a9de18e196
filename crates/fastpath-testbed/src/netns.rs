//! Named network namespaces: entering them on a thread, listing test beds.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::PathBuf;
use std::thread::JoinHandle;

use nix::sched::{setns, CloneFlags};

use crate::{cmd, TestbedError};

/// Directory where `ip netns` keeps its namespace files (bind mounts of `/proc/<pid>/ns/net`).
pub const NETNS_RUN_DIR: &str = "/var/run/netns";

pub(crate) fn netns_path(name: &str) -> PathBuf {
    PathBuf::from(NETNS_RUN_DIR).join(name)
}

/// True when the named namespace file exists.
pub(crate) fn netns_exists(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && netns_path(name).exists()
}

/// Enters the named network namespace (`/var/run/netns/<name>`, as made by `ip netns add`)
/// on the CALLING THREAD only, with `setns(fd, CLONE_NEWNET)`.
///
/// Sockets created by this thread afterwards live in that namespace; other threads are not
/// affected. Note that `/sys` is NOT remounted (it still shows the namespace that mounted it);
/// use `ip netns exec` for sysfs. There is no way back except entering another named
/// namespace, so prefer [`run_in_netns`] / [`spawn_in_netns`], which use a fresh thread.
///
/// # Errors
///
/// [`TestbedError::Netns`]: EINVAL for a name that is not a file name, the errno of opening
/// `/var/run/netns/<name>` (ENOENT: no such namespace), or of `setns` (EPERM without CAP_SYS_ADMIN;
/// [`TestbedError::needs_root`] then says so).
pub fn enter_netns(name: &str) -> Result<(), TestbedError> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(TestbedError::Netns {
            ns: name.to_owned(),
            op: "look up".to_owned(),
            cause: nix::Error::EINVAL,
            hint: " (a namespace name is a file name under /var/run/netns)",
        });
    }
    let path = netns_path(name);
    let file = File::open(&path).map_err(|e| TestbedError::Netns {
        ns: name.to_owned(),
        op: format!("open {}", path.display()),
        cause: e.raw_os_error().map_or(nix::Error::EIO, nix::Error::from_raw),
        hint: if e.kind() == std::io::ErrorKind::NotFound { " (no such namespace; see `ip netns list`)" } else { "" },
    })?;
    setns(&file, CloneFlags::CLONE_NEWNET).map_err(|cause| TestbedError::Netns {
        ns: name.to_owned(),
        op: "setns(CLONE_NEWNET)".to_owned(),
        cause,
        hint: if cause == nix::Error::EPERM { " (needs root / CAP_SYS_ADMIN)" } else { "" },
    })
}

/// Runs `f` on a new thread that first enters network namespace `ns`, waits for it and
/// returns its result.
///
/// A panic in `f` is propagated to the caller (re-raised with the original payload).
///
/// # Errors
///
/// As [`enter_netns`], without running `f`.
///
/// # Panics
///
/// If `f` panics (its payload re-raised), or the operating system cannot create a thread.
pub fn run_in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> Result<T, TestbedError> {
    match spawn_in_netns(ns, f).join() {
        Ok(result) => result,
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

/// Spawns (does not join) a thread that first enters network namespace `ns` and then runs
/// `f`; the thread's result is `Err` if entering failed (then `f` is not run).
///
/// The thread is named `netns-<ns>`.
///
/// # Panics
///
/// Like [`std::thread::spawn`], if the operating system cannot create a thread.
pub fn spawn_in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> JoinHandle<Result<T, TestbedError>> {
    let ns = ns.to_owned();
    std::thread::Builder::new()
        .name(format!("netns-{ns}"))
        .spawn(move || {
            enter_netns(&ns)?;
            Ok(f())
        })
        .expect("failed to spawn a thread")
}

/// Where an interface of some name may be: the default network namespace (that of PID 1) or a
/// named one (`/var/run/netns/NAME`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetnsWhere {
    /// The namespace of PID 1 (`/proc/1/ns/net`).
    Default,
    /// `/var/run/netns/NAME`.
    Named(String),
}

/// The network namespaces other than the calling thread's, among the default one and those
/// named under `/var/run/netns` (at most 256 of them), in which `probe` returns true: each is
/// entered on a short-lived thread of its own that runs `probe` there (e.g. "has an interface
/// of this name"). A namespace named twice (a name for the default one) is probed once. Needs
/// root (CAP_SYS_ADMIN to enter a namespace); namespaces that cannot be entered are skipped.
pub fn netns_where(probe: impl Fn() -> bool + Send + Sync + Clone + 'static) -> Vec<NetnsWhere> {
    use std::os::unix::fs::MetadataExt;
    let ino = |p: &std::path::Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let mut seen: BTreeSet<(u64, u64)> = ino(std::path::Path::new("/proc/thread-self/ns/net")).into_iter().collect();
    let mut names: Vec<String> = std::fs::read_dir(NETNS_RUN_DIR)
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names.truncate(256);
    let candidates = std::iter::once((NetnsWhere::Default, PathBuf::from("/proc/1/ns/net")))
        .chain(names.into_iter().map(|n| (NetnsWhere::Named(n.clone()), netns_path(&n))));
    let mut out = Vec::new();
    for (w, path) in candidates {
        let Some(id) = ino(&path) else { continue };
        if !seen.insert(id) {
            continue;
        }
        let p = probe.clone();
        let found = std::thread::Builder::new()
            .name("netns-probe".into())
            .spawn(move || {
                let f = File::open(&path).ok()?;
                setns(&f, CloneFlags::CLONE_NEWNET).ok()?;
                Some(p())
            })
            .ok()
            .and_then(|t| t.join().ok())
            .flatten();
        if found == Some(true) {
            out.push(w);
        }
    }
    out
}

/// All network namespace names from `ip netns list`.
pub(crate) fn all_netns() -> Result<BTreeSet<String>, TestbedError> {
    let out = cmd::run("ip", &["netns", "list"])?;
    Ok(out.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_owned).collect())
}

/// Names of the test beds present: every `<name>` for which both namespaces `<name>-a` and
/// `<name>-b` exist (per `ip netns list`) and `<name>` is a valid test bed name. Sorted.
///
/// # Errors
///
/// Those of running `ip netns list`: [`TestbedError::Spawn`] if `ip` cannot be started
/// (iproute2 missing), [`TestbedError::Command`] / [`TestbedError::NeedsRoot`] if it fails.
pub fn list() -> Result<Vec<String>, TestbedError> {
    let all = all_netns()?;
    Ok(all
        .iter()
        .filter_map(|ns| ns.strip_suffix("-a"))
        .filter(|base| crate::name::validate_name(base).is_ok())
        .filter(|base| all.contains(&format!("{base}-b")))
        .map(str::to_owned)
        .collect())
}
