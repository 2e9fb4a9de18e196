//! CPU placement of threads: pinning the calling thread to a CPU, and the CPUs this process may
//! run on. (The tools' thread helpers, spawning pinned workers, joining them, stopping them and
//! interrupting a blocked one, are in the fastpath-tools crate.)

use crate::SysError;

/// Pins the calling thread to CPU `cpu` (`sched_setaffinity(0, {cpu})`).
///
/// # Errors
///
/// [`SysError`] if the kernel refuses: `cpu` is not online or not in this process's cpuset
/// (EINVAL).
pub fn pin_current_thread(cpu: usize) -> Result<(), SysError> {
    crate::sys::pin_current_thread(cpu)
}

/// Number of CPUs this process may run on (`sched_getaffinity`; at least 1).
pub fn online_cpus() -> usize {
    crate::sys::online_cpus()
}
