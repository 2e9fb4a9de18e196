//! Batched datagram receive (`recvmmsg`).

use std::os::fd::AsRawFd;

use super::SysError;

/// Batched UDP receive with `recvmmsg(2)`: preallocated buffers, one system call for up to
/// `batch` datagrams (kernel >= 2.6.33).
#[derive(Debug)]
pub struct RecvMmsg {
    bufs: Vec<[u8; 2048]>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers inside point into `bufs`/`iovs`, owned by the same value.
unsafe impl Send for RecvMmsg {}

impl RecvMmsg {
    /// Buffers for `batch` datagrams of up to 2048 bytes.
    pub fn new(batch: usize) -> Self {
        let mut bufs = vec![[0u8; 2048]; batch];
        let mut iovs: Vec<libc::iovec> =
            bufs.iter_mut().map(|b| libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() }).collect();
        let hdrs = iovs
            .iter_mut()
            .map(|iov| {
                // SAFETY: all-zero is a valid msghdr; the iovec pointer is set below.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = iov;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        Self { bufs, iovs, hdrs }
    }

    /// Receives up to `batch` datagrams without blocking (`MSG_DONTWAIT`); returns how many
    /// (0 when none are queued).
    ///
    /// # Errors
    ///
    /// [`SysError`] if `recvmmsg` fails other than with EAGAIN / EINTR (which return 0), e.g. EBADF
    /// / ENOTSOCK for a bad `fd`.
    pub fn recv(&mut self, fd: &impl AsRawFd) -> Result<usize, SysError> {
        let _ = (&self.bufs, &self.iovs);
        // SAFETY: hdrs/iovs/bufs are live and consistent; the kernel writes into bufs and the
        // msg_len fields only.
        let n = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = SysError::last("recvmmsg(udp, MSG_DONTWAIT)");
            if e.errno == libc::EAGAIN || e.errno == libc::EINTR {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(n as usize)
    }
}
