//! Unix domain sockets of the XSKMAP hand-off (`crate::uds`): `SOCK_SEQPACKET`
//! listen, connect and socketpair, `accept`, `SO_PEERCRED`, receive/send timeouts, and one
//! message with at most one file descriptor attached (`SCM_RIGHTS`).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use super::SysError;

/// `sockaddr_un` for `path`; ENAMETOOLONG if it does not fit `sun_path` with its NUL.
fn sockaddr(path: &Path, call: &str) -> Result<libc::sockaddr_un, SysError> {
    // SAFETY: sockaddr_un is plain integers and a byte array: valid when all-zero.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let b = path.as_os_str().as_bytes();
    if b.is_empty() || b.len() >= a.sun_path.len() || b.contains(&0) {
        return Err(SysError { call: format!("{call}({})", path.display()), errno: libc::ENAMETOOLONG });
    }
    for (d, s) in a.sun_path.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    Ok(a)
}

fn seqpacket(call: &str) -> Result<OwnedFd, SysError> {
    // SAFETY: plain syscall with constant arguments; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(SysError::last(format!("socket(AF_UNIX, SOCK_SEQPACKET) for {call}")));
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `socket(AF_UNIX, SOCK_SEQPACKET)`, [`refuse_passed_fds`], `bind(path)`, `listen(backlog)`.
/// The kernel creates the socket file and refuses (EADDRINUSE) if anything exists at `path`, a
/// symlink included. Returns the socket and whether peers are refused descriptors (false: a
/// kernel without `SO_PASSRIGHTS`, before 6.16).
pub fn seqpacket_listen(path: &Path, backlog: i32) -> Result<(OwnedFd, bool), SysError> {
    let a = sockaddr(path, "bind")?;
    let fd = seqpacket("bind")?;
    // Before bind: no connection can be made before the setting is in place.
    let refused = refuse_passed_fds(fd.as_fd())?;
    // SAFETY: a is a valid sockaddr_un and the length is its size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&a as *const libc::sockaddr_un).cast(),
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(SysError::last(format!("bind(AF_UNIX, {})", path.display())));
    }
    // SAFETY: plain syscall on a descriptor we own.
    if unsafe { libc::listen(fd.as_raw_fd(), backlog) } < 0 {
        return Err(SysError::last(format!("listen({}, {backlog})", path.display())));
    }
    Ok((fd, refused))
}

/// `setsockopt(SOL_SOCKET, SO_PASSRIGHTS, 0)`: nobody can send this socket (or, set on a
/// listening socket, any connection accepted from it) a descriptor; the sender's `sendmsg`
/// with `SCM_RIGHTS` fails with EPERM. A descriptor received is one this process then closes,
/// and the last close of some runs for as long as the sender chose (a TCP socket with unsent
/// data and `SO_LINGER`, a FUSE file): refused, it cannot stall the receiver. Ok(false) if the
/// kernel lacks the option (ENOPROTOOPT: before Linux 6.16).
pub fn refuse_passed_fds(fd: BorrowedFd<'_>) -> Result<bool, SysError> {
    match super::xsk::setsockopt_int(
        &fd.as_raw_fd(),
        libc::SOL_SOCKET,
        super::uapi::SO_PASSRIGHTS,
        0,
        "SOL_SOCKET, SO_PASSRIGHTS",
    ) {
        Ok(()) => Ok(true),
        Err(e) if e.errno == libc::ENOPROTOOPT => Ok(false),
        Err(e) => Err(e),
    }
}

/// `socket(AF_UNIX, SOCK_SEQPACKET)`, [`set_timeouts`] to `timeout`, then `connect(path)`:
/// the send timeout set first bounds the connect too (a listener whose backlog is full makes
/// `connect` wait for room, `unix_stream_connect` in net/unix/af_unix.c; EAGAIN after
/// `timeout`). The socket keeps both timeouts.
pub fn seqpacket_connect(path: &Path, timeout: Duration) -> Result<OwnedFd, SysError> {
    let a = sockaddr(path, "connect")?;
    let fd = seqpacket("connect")?;
    set_timeouts(fd.as_fd(), timeout)?;
    // SAFETY: a is a valid sockaddr_un and the length is its size.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&a as *const libc::sockaddr_un).cast(),
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(SysError::last(format!("connect(AF_UNIX, {})", path.display())));
    }
    Ok(fd)
}

/// Sets the mode of the socket file at `path` without following a symlink: `open(path,
/// O_PATH | O_NOFOLLOW)`, `fstat` (refused with ENOTSOCK unless it is a socket: a symlink
/// opened with O_NOFOLLOW is the link itself), then `chmod("/proc/self/fd/N")`, which changes
/// the inode that descriptor holds and no other. Returns that inode's (device, inode number).
pub fn chmod_socket_nofollow(path: &Path, mode: u32) -> Result<(u64, u64), SysError> {
    use std::os::unix::fs::MetadataExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SysError { call: format!("open({}, O_PATH)", path.display()), errno: libc::EINVAL })?;
    // SAFETY: c is a valid NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(SysError::last(format!("open({}, O_PATH | O_NOFOLLOW)", path.display())));
    }
    // SAFETY: fd is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let proc = format!("/proc/self/fd/{}", fd.as_raw_fd());
    // fstat of an O_PATH descriptor (through /proc/self/fd: the magic link resolves to it).
    let m = std::fs::metadata(&proc).map_err(|e| SysError {
        call: format!("fstat({}, O_PATH)", path.display()),
        errno: e.raw_os_error().unwrap_or(libc::EIO),
    })?;
    if m.mode() & libc::S_IFMT != libc::S_IFSOCK {
        return Err(SysError { call: format!("chmod({}): not a socket", path.display()), errno: libc::ENOTSOCK });
    }
    let cp = std::ffi::CString::new(proc).expect("no NUL");
    // SAFETY: cp is a valid NUL-terminated path; the result is checked.
    if unsafe { libc::chmod(cp.as_ptr(), mode as libc::mode_t) } < 0 {
        return Err(SysError::last(format!("chmod({}, {mode:o})", path.display())));
    }
    Ok((m.dev(), m.ino()))
}

/// `socketpair(AF_UNIX, SOCK_SEQPACKET)` (the protocol tests).
#[cfg(test)]
pub fn seqpacket_pair() -> Result<(OwnedFd, OwnedFd), SysError> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is an array of two ints the kernel fills.
    let rc = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
    if rc < 0 {
        return Err(SysError::last("socketpair(AF_UNIX, SOCK_SEQPACKET)"));
    }
    // SAFETY: both are fresh descriptors we own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `accept4(fd, NULL, NULL, SOCK_CLOEXEC)`.
pub fn accept(fd: BorrowedFd<'_>) -> Result<OwnedFd, SysError> {
    // SAFETY: null address pointers are allowed; the result is checked.
    let c = unsafe { libc::accept4(fd.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC) };
    if c < 0 {
        return Err(SysError::last("accept4(AF_UNIX)"));
    }
    // SAFETY: c is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(c) })
}

/// The peer's credentials as the kernel recorded them at `connect` (`SO_PEERCRED`): pid, uid,
/// gid.
pub fn peer_cred(fd: BorrowedFd<'_>) -> Result<(i32, u32, u32), SysError> {
    // SAFETY: ucred is three integers: valid when all-zero.
    let mut c: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: c is a live ucred and len its size; the kernel writes at most len bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(SysError::last("getsockopt(SOL_SOCKET, SO_PEERCRED)"));
    }
    Ok((c.pid, c.uid, c.gid))
}

/// `SO_RCVTIMEO` and `SO_SNDTIMEO`: a blocked receive or send fails with EAGAIN after `t`.
pub fn set_timeouts(fd: BorrowedFd<'_>, t: Duration) -> Result<(), SysError> {
    let tv = libc::timeval { tv_sec: t.as_secs() as libc::time_t, tv_usec: t.subsec_micros() as libc::suseconds_t };
    for (name, label) in
        [(libc::SO_RCVTIMEO, "SOL_SOCKET, SO_RCVTIMEO"), (libc::SO_SNDTIMEO, "SOL_SOCKET, SO_SNDTIMEO")]
    {
        super::xsk::setsockopt(&fd.as_raw_fd(), libc::SOL_SOCKET, name, &tv, label)?;
    }
    Ok(())
}

/// Sends `msg` as one message (`MSG_NOSIGNAL`: a closed peer is EPIPE, not SIGPIPE), with
/// `pass` attached as `SCM_RIGHTS` if given.
pub fn send_msg(fd: BorrowedFd<'_>, msg: &[u8], pass: Option<BorrowedFd<'_>>) -> Result<(), SysError> {
    let mut iov = libc::iovec { iov_base: msg.as_ptr() as *mut libc::c_void, iov_len: msg.len() };
    // Room for one cmsghdr with one int, aligned as cmsghdr (u64 words).
    let mut control = [0u64; 4];
    // SAFETY: msghdr is integers and pointers: valid when all-zero (null pointers, no control).
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    if let Some(p) = pass {
        // SAFETY: CMSG_SPACE is arithmetic on a constant size.
        let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
        debug_assert!(space <= std::mem::size_of_val(&control));
        mh.msg_control = control.as_mut_ptr().cast();
        mh.msg_controllen = space;
        // SAFETY: msg_control points to `space` zeroed, aligned bytes, enough for one cmsghdr
        // with one int (CMSG_FIRSTHDR is non-null for a control buffer that large); the
        // pointers CMSG_FIRSTHDR / CMSG_DATA return lie inside it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&mh);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), p.as_raw_fd());
        }
    }
    // SAFETY: mh points to a live iovec over `msg` and, if set, the live control buffer.
    let n = unsafe { libc::sendmsg(fd.as_raw_fd(), &mh, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(SysError::last(format!(
            "sendmsg(AF_UNIX, {} bytes{})",
            msg.len(),
            if pass.is_some() { ", SCM_RIGHTS" } else { "" }
        )));
    }
    Ok(())
}

/// Receives one message into `buf`: its length (0: the peer closed) and the first descriptor
/// attached with `SCM_RIGHTS`, if any (any others are closed). A message longer than `buf` is
/// cut: `MSG_TRUNC` is reported as EMSGSIZE, `buf` then holding its first `buf.len()` bytes.
/// EAGAIN after the receive timeout.
pub fn recv_msg(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<(usize, Option<OwnedFd>), SysError> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut control = [0u64; 8];
    // SAFETY: msghdr is integers and pointers: valid when all-zero.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.as_mut_ptr().cast();
    mh.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: mh points to the live iovec over `buf` and the live control buffer, with their
    // sizes; the kernel writes at most those.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut mh, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(SysError::last("recvmsg(AF_UNIX)"));
    }
    let mut got: Option<OwnedFd> = None;
    // SAFETY: the kernel filled msg_control (msg_controllen bytes); CMSG_FIRSTHDR/NXTHDR walk
    // inside it, and each SCM_RIGHTS payload holds (cmsg_len - CMSG_LEN(0)) / 4 descriptors
    // the kernel installed in this process, owned by us from now on.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&mh);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                for i in 0..count {
                    let f = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i)));
                    if got.is_none() {
                        got = Some(f);
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&mh, c);
        }
    }
    if mh.msg_flags & libc::MSG_TRUNC != 0 {
        return Err(SysError { call: format!("recvmsg(AF_UNIX, {} bytes)", buf.len()), errno: libc::EMSGSIZE });
    }
    Ok((n as usize, got))
}
