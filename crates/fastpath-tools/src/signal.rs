//! Interrupting a thread blocked in a long system call (a no-op SIGUSR1 handler and
//! `pthread_kill`), and a child process as a user's Ctrl-C would (`kill(SIGINT)`).
//!
//! The crate's only `unsafe` code: three libc calls, each with its SAFETY argument.
#![allow(unsafe_code)]

use std::thread::JoinHandle;

use fastpath::SysError;

extern "C" fn noop_handler(_: libc::c_int) {}

/// The errno of the failed call just made.
fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// Installs the no-op SIGUSR1 handler, without SA_RESTART, that lets [`interrupt_thread`] break
/// a thread out of a long blocking call (e.g. a [`crate::bench::gen_live`] loop in
/// BPF_PROG_RUN of millions of repetitions, which then returns EINTR). Idempotent.
///
/// # Errors
///
/// [`SysError`] if `sigaction` fails (it does not for a valid signal).
pub fn install_interrupt_handler() -> Result<(), SysError> {
    // SAFETY: sigaction is plain data; the handler is async-signal-safe (it does nothing).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = noop_handler as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = 0;
        if libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()) < 0 {
            return Err(SysError { call: "sigaction(SIGUSR1)".into(), errno: last_errno() });
        }
    }
    Ok(())
}

/// Interrupts a blocking system call of the live thread `thread` (SIGUSR1 via `pthread_kill`;
/// the call returns EINTR). Call [`install_interrupt_handler`] first, or the signal kills the
/// process.
pub fn interrupt_thread<T>(thread: &JoinHandle<T>) {
    use std::os::unix::thread::JoinHandleExt;
    // SAFETY: `thread` is borrowed from a JoinHandle, so the thread has not been joined and its
    // pthread_t is valid; with the handler installed SIGUSR1 only interrupts a blocking call.
    unsafe { libc::pthread_kill(thread.as_pthread_t(), libc::SIGUSR1) };
}

/// Sends SIGINT to `child`, as a user's Ctrl-C would (tools that print their totals on exit:
/// testpmd, xdp-tools). `child` must not have been waited for yet (its pid is still its own:
/// the kernel does not reuse it before the parent's wait).
///
/// # Errors
///
/// [`SysError`] from kill(2): ESRCH when the process is gone.
pub fn interrupt_child(child: &std::process::Child) -> Result<(), SysError> {
    let id = child.id();
    let pid =
        libc::pid_t::try_from(id).map_err(|_| SysError { call: format!("kill({id}, SIGINT)"), errno: libc::ESRCH })?;
    // SAFETY: kill takes plain integers; the caller owns the unreaped child `pid`.
    if unsafe { libc::kill(pid, libc::SIGINT) } < 0 {
        return Err(SysError { call: "kill(SIGINT)".into(), errno: last_errno() });
    }
    Ok(())
}
