//! CPU affinity: pinning a thread, the CPUs this process may use.

use super::SysError;

/// `sched_setaffinity(0, {cpu})`: pin the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> Result<(), SysError> {
    // SAFETY: cpu_set_t is plain data; CPU_SET only writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(SysError { call: format!("sched_setaffinity(0, cpu={cpu})"), errno: libc::EINVAL });
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) < 0 {
            return Err(SysError::last(format!("sched_setaffinity(0, cpu={cpu})")));
        }
    }
    Ok(())
}

/// Number of CPUs this process may run on (`sched_getaffinity`).
pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
