//! Process-wide facts and resources: the monotonic clock, euid, capabilities, RLIMIT_MEMLOCK,
//! the page size, an advisory lock file.

use std::os::fd::{AsRawFd, OwnedFd};

use super::SysError;

/// CLOCK_MONOTONIC in nanoseconds: the clock `bpf_ktime_get_ns()` reads.
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_TAI in nanoseconds: the clock of copy-mode AF_XDP TX timestamps (net/xdp/xsk.c,
/// `ktime_get_tai_fast_ns`) and of launch times on a device whose PTP clock runs on TAI.
#[inline]
pub fn tai_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_TAI, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Effective user id (0 = root).
pub fn geteuid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// True if the process has capability `cap` (CAP_* number) in its effective set,
/// read from /proc/self/status `CapEff`.
pub fn has_capability(cap: u32) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|mask| mask & (1u64 << cap) != 0)
}

/// Raise RLIMIT_MEMLOCK to infinity if allowed. Failure is returned but callers treat it as a
/// warning: with CAP_IPC_LOCK the limit does not apply (and kernels >= 5.11 charge BPF maps to memcg).
pub fn raise_memlock_limit() -> Result<(), SysError> {
    let lim = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: lim is a valid rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) } < 0 {
        return Err(SysError::last("setrlimit(RLIMIT_MEMLOCK, RLIM_INFINITY)"));
    }
    Ok(())
}

/// The page size (`sysconf(_SC_PAGESIZE)`).
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory arguments.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// Takes an exclusive advisory lock (`flock(LOCK_EX)`) on `path` (created if absent), held
/// until the returned fd is dropped: serialises concurrent `fastpath filter reload`s. Waits
/// for another holder with `LOCK_NB` retries every 20 ms, giving up with EINTR once `stop` is
/// set (a signal), so a blocked wait never outlives Ctrl-C.
pub fn lock_file(path: &std::path::Path, stop: &std::sync::atomic::AtomicBool) -> Result<OwnedFd, SysError> {
    if let Some(d) = path.parent() {
        let _ = std::fs::create_dir_all(d);
    }
    let f =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(|e| SysError {
            call: format!("open({})", path.display()),
            errno: e.raw_os_error().unwrap_or(0),
        })?;
    let fd: OwnedFd = f.into();
    loop {
        // SAFETY: fd is a valid open file.
        if unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(fd);
        }
        let e = SysError::last(format!("flock({}, LOCK_EX)", path.display()));
        if e.errno != libc::EWOULDBLOCK && e.errno != libc::EINTR {
            return Err(e);
        }
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(SysError { call: format!("flock({}, LOCK_EX)", path.display()), errno: libc::EINTR });
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Fills `buf` from the kernel's random pool (getrandom(2), flags 0: blocks only until the pool
/// is initialised at boot).
///
/// # Errors
///
/// The failed call ([`SysError`]).
pub fn random_bytes(buf: &mut [u8]) -> Result<(), SysError> {
    let mut at = 0;
    while at < buf.len() {
        // SAFETY: the pointer and length describe the unfilled rest of `buf`.
        let n = unsafe { libc::getrandom(buf[at..].as_mut_ptr().cast(), buf.len() - at, 0) };
        if n < 0 {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            if errno == libc::EINTR {
                continue;
            }
            return Err(SysError { call: format!("getrandom(len={})", buf.len() - at), errno });
        }
        at += n as usize;
    }
    Ok(())
}
