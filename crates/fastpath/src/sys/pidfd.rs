//! Another process's file descriptors: what /proc says a socket fd is (its protocol, without
//! touching it) and a duplicate of one (pidfd_open + pidfd_getfd).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::SysError;

/// The protocol name of the socket behind `/proc/PID/fd/N` (`"XDP"`, `"UDP"`, `"TCP"`,
/// `"NETLINK"`, ...): the `system.sockprotoname` extended attribute sockfs gives every socket
/// inode (net/socket.c, `sockfs_xattr_get`: `sock->sk->sk_prot_creator->name`). getxattr
/// follows the /proc magic link to the socket's inode without opening it, so nothing about the
/// socket changes. `None` if the fd is not a socket, is gone, or may not be read (root reads
/// every process's).
pub fn sockprotoname(proc_fd_path: &str) -> Option<String> {
    let path = std::ffi::CString::new(proc_fd_path).ok()?;
    let mut buf = [0u8; 64];
    // SAFETY: path is NUL-terminated, the name a static NUL-terminated string, buf writable
    // for its length; the kernel writes at most that many bytes.
    let n =
        unsafe { libc::getxattr(path.as_ptr(), c"system.sockprotoname".as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n <= 0 {
        return None;
    }
    let v = &buf[..n as usize];
    let v = v.split(|&b| b == 0).next().unwrap_or(v);
    Some(String::from_utf8_lossy(v).into_owned())
}

/// `pidfd_open(pid, 0)`: a file descriptor that refers to process `pid` (pidfd_open(2),
/// kernel >= 5.3), closed on exec.
///
/// Errors: ESRCH (no such process), EINVAL (`pid` is not a thread-group leader), EMFILE /
/// ENFILE, ENOSYS (kernel < 5.3); the error names the call as `pidfd_open(PID)`.
pub(crate) fn pidfd_open(pid: u32) -> Result<OwnedFd, SysError> {
    // SAFETY: a plain syscall with integer arguments; the result is checked before use.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) } as i32;
    if pidfd < 0 {
        return Err(SysError::last(format!("pidfd_open({pid})")));
    }
    // SAFETY: a fresh fd the kernel just gave us, owned here only.
    Ok(unsafe { OwnedFd::from_raw_fd(pidfd) })
}

/// `pidfd_getfd(pidfd, fd, 0)`: a duplicate, in this process, of the fd `fd` of the process
/// `pidfd` refers to (pidfd_getfd(2), kernel >= 5.6), closed on exec. `pid` only names the
/// process in the error. Needs PTRACE_MODE_ATTACH_REALCREDS on the target (root, or the same
/// user with ptrace permission). Duplicating a socket this way re-stamps its cgroup net_cls
/// classid and net_prio index with the caller's cgroup (net/core/sock.c, `__receive_sock`).
///
/// Errors: EBADF (no such fd there), EPERM (no ptrace permission), ESRCH (the process is
/// gone), ENOSYS (kernel < 5.6); the error names the call as `pidfd_getfd(PID, FD)`.
pub(crate) fn pidfd_getfd(pidfd: &OwnedFd, pid: u32, fd: i32) -> Result<OwnedFd, SysError> {
    // SAFETY: a plain syscall with integer arguments (pidfd is a valid open fd); the result
    // is checked before use.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) } as i32;
    if got < 0 {
        return Err(SysError::last(format!("pidfd_getfd({pid}, {fd})")));
    }
    // SAFETY: a fresh fd the kernel just gave us, owned here only.
    Ok(unsafe { OwnedFd::from_raw_fd(got) })
}

/// A duplicate of process `pid`'s fd `fd`: [`pidfd_open`] then [`pidfd_getfd`] (kernel >= 5.6,
/// PTRACE_MODE_ATTACH_REALCREDS on the target: root). Call it only for sockets that are meant
/// to be inspected (see [`pidfd_getfd`] on cgroup data).
///
/// Errors: those of the two calls.
pub fn dup_from(pid: u32, fd: i32) -> Result<OwnedFd, SysError> {
    let pidfd = pidfd_open(pid)?;
    pidfd_getfd(&pidfd, pid, fd)
}

/// The inode number of an open fd (fstat's st_ino).
pub fn inode_of(fd: &OwnedFd) -> Result<u64, SysError> {
    // SAFETY: fstat fills a zeroed stat struct for a valid fd.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd.as_raw_fd(), &mut st) < 0 {
            return Err(SysError::last("fstat"));
        }
        Ok(st.st_ino)
    }
}
