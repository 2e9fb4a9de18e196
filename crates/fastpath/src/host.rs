//! The host facts and knobs a fastpath program needs around its ports: CPU pinning, the
//! monotonic clock, privileges, the memlock limit, interface basics, bpffs, a lock file, and a
//! batched UDP receiver for baselines.
//!
//! These are named, documented functions over the crate-private system-call layer; programs,
//! tests and examples call these instead of making system calls of their own. Every error is a
//! [`SysError`] that repeats the call and its arguments.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::AtomicBool;

use crate::sys;
pub use crate::sys::udp::RecvMmsg;
use crate::SysError;

/// Pins the calling thread to CPU `cpu` (`sched_setaffinity(0, {cpu})`).
pub fn pin_current_thread(cpu: usize) -> Result<(), SysError> {
    sys::pin_current_thread(cpu)
}

/// Number of CPUs this process may run on (`sched_getaffinity`; at least 1).
pub fn online_cpus() -> usize {
    sys::online_cpus()
}

/// CLOCK_MONOTONIC in nanoseconds: the clock `bpf_ktime_get_ns()` reads, so user-space and
/// BPF timestamps compare directly.
#[inline]
pub fn monotonic_ns() -> u64 {
    sys::monotonic_ns()
}

/// The effective user id of this process (0 = root).
pub fn euid() -> u32 {
    sys::geteuid()
}

/// The page size in bytes (`sysconf(_SC_PAGESIZE)`).
pub fn page_size() -> usize {
    sys::page_size()
}

/// Raises RLIMIT_MEMLOCK to infinity if allowed. Treat an error as a warning: with
/// CAP_IPC_LOCK the limit does not apply, and kernels >= 5.11 charge BPF maps to the memory
/// cgroup instead.
pub fn raise_memlock_limit() -> Result<(), SysError> {
    sys::raise_memlock_limit()
}

/// Sets interface `iface` administratively up (IFF_UP), in the calling thread's network
/// namespace. Needs CAP_NET_ADMIN.
pub fn set_link_up(iface: &str) -> Result<(), SysError> {
    sys::set_link_up(iface)
}

/// The hardware (MAC) address of interface `iface`, in the calling thread's network namespace.
pub fn if_hwaddr(iface: &str) -> Result<[u8; 6], SysError> {
    sys::if_hwaddr(iface)
}

/// The ifindex of interface `name` (`if_nametoindex`), in the calling thread's network namespace.
pub fn if_nametoindex(name: &str) -> Result<u32, SysError> {
    sys::if_nametoindex(name)
}

/// Mounts bpffs at `path` unless one is already mounted there (needs CAP_SYS_ADMIN). Note that
/// `ip netns exec` remounts /sys, so inside it bpffs must be mounted again before pinning.
pub fn ensure_bpffs(path: &Path) -> Result<(), SysError> {
    sys::ensure_bpffs(path)
}

/// Takes an exclusive advisory lock on `path` (created if absent; `flock(LOCK_EX)`), held until
/// the returned descriptor is dropped. Waits for another holder, giving up with EINTR once
/// `stop` is set, so a blocked wait never outlives Ctrl-C.
pub fn lock_file(path: &Path, stop: &AtomicBool) -> Result<OwnedFd, SysError> {
    sys::lock_file(path, stop)
}

/// Waits up to `timeout_ms` (-1: for ever) until `fd` is readable (`poll(POLLIN)`); false on
/// timeout or when a signal interrupted the wait.
pub fn poll_readable(fd: &impl AsFd, timeout_ms: i32) -> Result<bool, SysError> {
    sys::poll_readable(fd.as_fd().as_raw_fd(), timeout_ms)
}

/// Sets the receive buffer of socket `fd` to `bytes` (`setsockopt(SOL_SOCKET, SO_RCVBUF)`; the
/// kernel doubles the value and caps it at `net.core.rmem_max` unless the caller may exceed it).
pub fn set_socket_rcvbuf(fd: &impl AsFd, bytes: i32) -> Result<(), SysError> {
    sys::setsockopt_int(&fd.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, bytes, "SOL_SOCKET, SO_RCVBUF")
}

/// Installs the no-op SIGUSR1 handler (without SA_RESTART) that lets [`interrupt_thread`] break
/// a thread out of a long blocking call, e.g. a [`crate::bench::gen_live`] loop in BPF_PROG_RUN.
/// Idempotent.
pub fn install_interrupt_handler() -> Result<(), SysError> {
    sys::install_interrupt_handler()
}

/// Interrupts a blocking system call of the live thread `thread` (SIGUSR1 via `pthread_kill`;
/// the call returns EINTR). Call [`install_interrupt_handler`] first, or the signal kills the
/// process.
pub fn interrupt_thread<T>(thread: &std::thread::JoinHandle<T>) {
    use std::os::unix::thread::JoinHandleExt;
    sys::interrupt_thread(thread.as_pthread_t())
}
