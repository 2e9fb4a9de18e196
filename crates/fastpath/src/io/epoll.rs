//! Waiting on a socket through epoll with busy polling ([`BusyPollEpoll`]): the way IRQ
//! suspension is driven (Documentation/networking/napi.rst, "IRQ suspension": with
//! `prefer_busy_poll` set on the epoll instance, `epoll_wait` busy polls the socket's NAPI and,
//! while it keeps finding events, keeps the device's interrupts suspended for up to the NAPI's
//! `irq-suspend-timeout`, set with [`crate::netdev::napi::NapiProfile`]).

use std::os::fd::{OwnedFd, RawFd};

use crate::sys::{self, SysError};

/// An epoll instance watching one socket for input, with busy polling set on the instance
/// (`EPIOCSPARAMS`, kernel >= 6.9). The NAPI it polls is the socket's (`sk_napi_id`), which
/// the kernel learns from the first packet the socket receives. Needs no privileges beyond
/// the socket's own; a `busy_poll_usecs` above `net.core.busy_poll`'s default needs none either
/// (the instance's value is used).
#[derive(Debug)]
pub struct BusyPollEpoll {
    ep: OwnedFd,
}

impl BusyPollEpoll {
    /// Watches `fd` (which must stay open as long as this value) for EPOLLIN and sets busy
    /// polling: `usecs` per wait, up to `budget` packets per poll (at most 64, NAPI_POLL_WEIGHT,
    /// without CAP_NET_ADMIN), preferring busy polling over interrupts when `prefer`.
    ///
    /// # Errors
    ///
    /// The failed call ([`SysError`]): `epoll_create1`, `epoll_ctl`, or `ioctl(EPIOCSPARAMS)`
    /// (ENOTTY before 6.9; EPERM for a budget above NAPI_POLL_WEIGHT without CAP_NET_ADMIN;
    /// EINVAL for `usecs` above INT_MAX).
    pub fn new(fd: RawFd, usecs: u32, budget: u16, prefer: bool) -> Result<Self, SysError> {
        let ep = sys::epoll::create()?;
        sys::epoll::add_in(&ep, fd)?;
        sys::epoll::set_busy_poll(&ep, usecs, budget, prefer)?;
        Ok(Self { ep })
    }

    /// `epoll_wait` for up to `timeout_ms` (0: busy poll once and return); true if the socket
    /// is readable. A signal ends the wait early with false.
    ///
    /// # Errors
    ///
    /// [`SysError`] if `epoll_wait` fails other than with EINTR.
    #[inline]
    pub fn wait(&self, timeout_ms: i32) -> Result<bool, SysError> {
        sys::epoll::wait_one(&self.ep, timeout_ms)
    }
}
