//! The process's environment for BPF: privileges, bpffs, the memlock limit, and the lock file
//! that serialises two reloads of one pinned classifier.

use crate::sys::{self, SysError};

/// True if running as root or with CAP_NET_ADMIN and CAP_BPF (cap numbers 12 and 39).
pub fn have_privileges() -> bool {
    sys::geteuid() == 0 || (sys::has_capability(12) && sys::has_capability(39))
}

/// Mounts bpffs at `path` unless one is already mounted there. Note that `ip netns exec`
/// remounts /sys, so inside it bpffs must be mounted again before pinning.
///
/// # Errors
///
/// [`SysError`] naming `mount` and `path`: EPERM without CAP_SYS_ADMIN, ENOENT if `path` does
/// not exist.
pub fn ensure_bpffs(path: &std::path::Path) -> Result<(), SysError> {
    sys::ensure_bpffs(path)
}

/// Raises RLIMIT_MEMLOCK to infinity if allowed, for BPF maps on kernels before 5.11 (from
/// 5.11 the memory cgroup is charged instead, and with CAP_IPC_LOCK the limit does not apply):
/// treat an error as a warning.
///
/// # Errors
///
/// [`SysError`] naming `setrlimit`: EPERM without CAP_SYS_RESOURCE.
pub fn raise_memlock_limit() -> Result<(), SysError> {
    sys::raise_memlock_limit()
}

/// Takes an exclusive advisory lock on `path` (created if absent; `flock(LOCK_EX)`), held until
/// the returned descriptor is dropped: what serialises two reloads of one pinned classifier.
/// Waits for another holder, giving up with EINTR once `stop` is set, so a blocked wait never
/// outlives Ctrl-C.
///
/// # Errors
///
/// [`SysError`] naming `open` or `flock` and `path`: the directory is missing or not writable,
/// or EINTR once `stop` is set.
pub fn lock_file(
    path: &std::path::Path,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<std::os::fd::OwnedFd, SysError> {
    sys::lock_file(path, stop)
}
