//! A batched UDP receiver and the socket knobs around it, for the kernel-stack baselines the
//! lab measures fastpath against (`recvmmsg(2)`, `poll(2)`, `SO_RCVBUF` in socket(7)).

use std::os::fd::{AsFd, AsRawFd};

pub use crate::sys::udp::RecvMmsg;
use crate::sys::{self, SysError};

/// Waits up to `timeout_ms` (-1: for ever) until `fd` is readable (`poll(POLLIN)`); false on
/// timeout or when a signal interrupted the wait.
///
/// # Errors
///
/// [`SysError`] naming `poll` if the kernel refuses (EINVAL, ENOMEM).
pub fn poll_readable(fd: &impl AsFd, timeout_ms: i32) -> Result<bool, SysError> {
    sys::poll_readable(fd.as_fd().as_raw_fd(), timeout_ms)
}

/// Sets the receive buffer of socket `fd` to `bytes` (`setsockopt(SOL_SOCKET, SO_RCVBUF)`; the
/// kernel doubles the value and caps it at `net.core.rmem_max` unless the caller may exceed it).
///
/// # Errors
///
/// [`SysError`] naming `SOL_SOCKET, SO_RCVBUF` if `fd` is not a socket (ENOTSOCK).
pub fn set_socket_rcvbuf(fd: &impl AsFd, bytes: i32) -> Result<(), SysError> {
    sys::setsockopt_int(&fd.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, bytes, "SOL_SOCKET, SO_RCVBUF")
}
