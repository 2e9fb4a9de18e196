//! Interrupting a thread blocked in a long system call: a no-op SIGUSR1 handler and `pthread_kill`.

use super::SysError;

extern "C" fn noop_handler(_: libc::c_int) {}

/// Installs a handler for SIGUSR1 that does nothing, without SA_RESTART, so a thread blocked in
/// a long system call (a BPF_PROG_RUN of millions of repetitions) returns EINTR when
/// [`interrupt_thread`] signals it. Idempotent.
pub fn install_interrupt_handler() -> Result<(), SysError> {
    // SAFETY: sigaction is plain data; the handler is async-signal-safe (it does nothing).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = noop_handler as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = 0;
        if libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()) < 0 {
            return Err(SysError::last("sigaction(SIGUSR1)"));
        }
    }
    Ok(())
}

/// Sends SIGUSR1 to one thread of this process (`pthread_kill`); see [`install_interrupt_handler`].
/// `thread` comes from `std::os::unix::thread::JoinHandleExt::as_pthread_t` of a live thread.
pub fn interrupt_thread(thread: libc::pthread_t) {
    // SAFETY: the caller passes the pthread_t of a thread it has not joined yet; with the
    // handler installed SIGUSR1 only interrupts a blocking call.
    unsafe { libc::pthread_kill(thread, libc::SIGUSR1) };
}

/// Sends SIGINT to `pid`, a child process the caller started and has not reaped (so the pid is
/// still that child's: the kernel does not reuse it before the parent's wait).
pub fn interrupt_child(pid: u32) -> Result<(), SysError> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| SysError { call: format!("kill({pid}, SIGINT)"), errno: libc::ESRCH })?;
    // SAFETY: kill takes plain integers; the caller owns the unreaped child `pid`.
    if unsafe { libc::kill(pid, libc::SIGINT) } < 0 {
        return Err(SysError::last("kill(SIGINT)"));
    }
    Ok(())
}
