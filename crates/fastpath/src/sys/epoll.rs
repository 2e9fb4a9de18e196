//! epoll with per-instance busy polling (`EPIOCSPARAMS`, kernel >= 6.9;
//! Documentation/networking/napi.rst "epoll-based busy polling", ioctl_eventpoll(2)).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::SysError;

/// `epoll_create1(EPOLL_CLOEXEC)`.
pub fn create() -> Result<OwnedFd, SysError> {
    // SAFETY: plain syscall, no pointers.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return Err(SysError::last("epoll_create1(EPOLL_CLOEXEC)"));
    }
    // SAFETY: fd is a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `epoll_ctl(ep, EPOLL_CTL_ADD, fd, {EPOLLIN})`.
pub fn add_in(ep: &OwnedFd, fd: RawFd) -> Result<(), SysError> {
    let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
    // SAFETY: ev is a live epoll_event; the kernel copies it.
    if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
        return Err(SysError::last(format!("epoll_ctl(EPOLL_CTL_ADD, fd={fd}, EPOLLIN)")));
    }
    Ok(())
}

/// `ioctl(ep, EPIOCSPARAMS, {busy_poll_usecs, busy_poll_budget, prefer_busy_poll})`.
pub fn set_busy_poll(ep: &OwnedFd, usecs: u32, budget: u16, prefer: bool) -> Result<(), SysError> {
    let p = libc::epoll_params {
        busy_poll_usecs: usecs,
        busy_poll_budget: budget,
        prefer_busy_poll: prefer as u8,
        __pad: 0,
    };
    // SAFETY: p is a live epoll_params; EPIOCSPARAMS only reads it.
    if unsafe { libc::ioctl(ep.as_raw_fd(), libc::EPIOCSPARAMS, &p) } < 0 {
        return Err(SysError::last(format!(
            "ioctl(epoll, EPIOCSPARAMS, busy_poll_usecs={usecs}, busy_poll_budget={budget}, prefer_busy_poll={})",
            prefer as u8
        )));
    }
    Ok(())
}

/// `epoll_wait(ep, 1 event, timeout_ms)`: true if an event came; EINTR counts as none.
pub fn wait_one(ep: &OwnedFd, timeout_ms: i32) -> Result<bool, SysError> {
    let mut ev = libc::epoll_event { events: 0, u64: 0 };
    // SAFETY: ev is a live array of one epoll_event the kernel writes.
    let n = unsafe { libc::epoll_wait(ep.as_raw_fd(), &mut ev, 1, timeout_ms) };
    if n < 0 {
        let e = SysError::last(format!("epoll_wait(timeout={timeout_ms})"));
        if e.errno == libc::EINTR {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(n > 0)
}
