//! AF_XDP sockets: `socket(AF_XDP)`, `bind`, `setsockopt`/`getsockopt` (also used by the
//! AF_PACKET backend), the TX/RX kicks and `poll`.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::SysError;

/// `socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0)`. Needs CAP_NET_RAW. Kernel >= 4.18.
pub fn socket_xdp() -> Result<OwnedFd, SysError> {
    // SAFETY: plain syscall with constant arguments; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(SysError::last("socket(AF_XDP, SOCK_RAW, 0)"));
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, level, name, value)`; `label` is how the call is named in errors,
/// e.g. `SOL_XDP, XDP_RX_RING` (the value's length is appended).
pub fn setsockopt<T>(fd: &impl AsRawFd, level: i32, name: i32, value: &T, label: &str) -> Result<(), SysError> {
    let len = std::mem::size_of::<T>();
    // SAFETY: value points to a live T of len bytes; the kernel only reads it.
    let rc =
        unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, (value as *const T).cast(), len as libc::socklen_t) };
    if rc < 0 {
        return Err(SysError::last(format!("setsockopt({label}, len={len})")));
    }
    Ok(())
}

/// `setsockopt` of an `int` value; errors read `setsockopt(SOL_SOCKET, SO_BUSY_POLL, 20)`.
pub fn setsockopt_int(fd: &impl AsRawFd, level: i32, name: i32, value: i32, label: &str) -> Result<(), SysError> {
    // SAFETY: value is a live c_int; the kernel only reads it.
    let rc = unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, (&value as *const i32).cast(), 4) };
    if rc < 0 {
        return Err(SysError::last(format!("setsockopt({label}, {value})")));
    }
    Ok(())
}

/// `getsockopt(fd, level, name)` into a `T`; returns the value and the length the kernel wrote
/// (older kernels write shorter versions of some structs, e.g. `xdp_statistics`).
pub fn getsockopt<T: Pod>(fd: &impl AsRawFd, level: i32, name: i32, label: &str) -> Result<(T, usize), SysError> {
    // SAFETY: Pod types are valid when all-zero.
    let mut value: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: value is a live T and len its size; the kernel writes at most len bytes.
    let rc = unsafe { libc::getsockopt(fd.as_raw_fd(), level, name, (&mut value as *mut T).cast(), &mut len) };
    if rc < 0 {
        return Err(SysError::last(format!("getsockopt({label})")));
    }
    Ok((value, len as usize))
}

/// Plain C structs that are valid when all-zero and may be filled by the kernel.
///
/// # Safety
/// Implement only for `repr(C)` types of integers (no pointers, references or enums).
pub unsafe trait Pod: Copy {}
// SAFETY: repr(C) structs of u64/u32 (include/uapi/linux/if_xdp.h).
unsafe impl Pod for libc::xdp_statistics {}
// SAFETY: as above.
unsafe impl Pod for libc::xdp_mmap_offsets {}
// SAFETY: as above.
unsafe impl Pod for libc::xdp_options {}
// SAFETY: a plain integer.
unsafe impl Pod for i32 {}

/// `bind(fd, sockaddr_xdp)`.
pub fn bind_xdp(fd: &impl AsRawFd, addr: &libc::sockaddr_xdp) -> Result<(), SysError> {
    // SAFETY: addr is a valid sockaddr_xdp and the length matches it.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (addr as *const libc::sockaddr_xdp).cast(),
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(SysError::last(format!(
            "bind(AF_XDP, ifindex={}, queue_id={}, flags={:#x})",
            addr.sxdp_ifindex, addr.sxdp_queue_id, addr.sxdp_flags
        )));
    }
    Ok(())
}

/// TX kick: `sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0)`. EAGAIN, EBUSY and ENOBUFS mean
/// "the kernel is busy, try again" (Documentation/networking/af_xdp.rst) and are not errors.
#[inline]
pub fn kick_tx(fd: RawFd) -> Result<(), SysError> {
    // SAFETY: a zero-length send with null buffers is how AF_XDP is kicked.
    let rc = unsafe { libc::sendto(fd, std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
    if rc < 0 {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if matches!(errno, libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN | libc::EINTR) {
            return Ok(());
        }
        return Err(SysError { call: "sendto(xsk, NULL, 0, MSG_DONTWAIT)".into(), errno });
    }
    Ok(())
}

/// RX kick / busy-poll driver: `recvfrom(fd, NULL, 0, MSG_DONTWAIT, NULL, NULL)`; errors are ignored
/// (EAGAIN is the normal answer).
#[inline]
pub fn kick_rx(fd: RawFd) {
    // SAFETY: a zero-length receive with null buffers only drives NAPI / wakes the driver.
    unsafe {
        libc::recvfrom(fd, std::ptr::null_mut(), 0, libc::MSG_DONTWAIT, std::ptr::null_mut(), std::ptr::null_mut());
    }
}

/// `poll([fd], events, timeout_ms)`; returns the revents (0 on timeout). EINTR is reported as 0.
pub fn poll_one(fd: RawFd, events: i16, timeout_ms: i32) -> Result<i16, SysError> {
    let mut pfd = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: pfd is a valid array of one pollfd.
    let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if rc < 0 {
        let e = SysError::last(format!("poll(xsk, events={events:#x}, timeout={timeout_ms})"));
        if e.errno == libc::EINTR {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(pfd.revents)
}

/// `poll([a, b], POLLIN, timeout_ms)`: returns when either is readable or on timeout (EINTR
/// counts as a timeout).
pub fn poll_two_readable(fds: [RawFd; 2], timeout_ms: i32) -> Result<(), SysError> {
    let mut pfd = fds.map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
    // SAFETY: pfd is a valid array of two pollfd.
    let rc = unsafe { libc::poll(pfd.as_mut_ptr(), 2, timeout_ms) };
    if rc < 0 {
        let e = SysError::last(format!("poll(xsk pair, POLLIN, timeout={timeout_ms})"));
        if e.errno != libc::EINTR {
            return Err(e);
        }
    }
    Ok(())
}

/// `poll([fd], POLLIN, timeout_ms)`: true if readable.
pub fn poll_readable(fd: RawFd, timeout_ms: i32) -> Result<bool, SysError> {
    Ok(poll_one(fd, libc::POLLIN, timeout_ms)? & libc::POLLIN != 0)
}
