//! The sock_diag netlink socket (`NETLINK_SOCK_DIAG`, sock_diag(7), include/uapi/linux/sock_diag.h,
//! include/uapi/linux/netlink.h): one dump request out, its answers in. The socket itself is
//! netlink-sys's (the rust-netlink project); what the answers mean is the caller's
//! (`xsk/diag.rs` for AF_XDP). Needs no privileges.

use std::mem::{offset_of, size_of};

use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr};

use super::uapi::SOCK_DIAG_BY_FAMILY;
use super::SysError;

/// Length of `struct nlmsghdr` rounded to NLMSG_ALIGNTO (include/uapi/linux/netlink.h
/// `NLMSG_HDRLEN`): where a message's payload starts.
pub(crate) const NLMSG_HDRLEN: usize = libc::NLMSG_ALIGN(size_of::<libc::nlmsghdr>()) as usize;

/// A connected `NETLINK_SOCK_DIAG` socket of the current network namespace.
pub(crate) struct SockDiag(Socket);

fn err(call: &str, e: std::io::Error) -> SysError {
    SysError { call: call.into(), errno: e.raw_os_error().unwrap_or(0) }
}

impl SockDiag {
    /// `socket(AF_NETLINK, SOCK_DGRAM, NETLINK_SOCK_DIAG)`, bound to a port the kernel picks and
    /// connected to the kernel (port 0).
    ///
    /// Errors: the failed call and its errno (EPROTONOSUPPORT: a kernel without the sock_diag
    /// netlink family, net/core/sock_diag.c, kernel >= 3.3).
    pub(crate) fn open() -> Result<Self, SysError> {
        let mut sock = Socket::new(NETLINK_SOCK_DIAG).map_err(|e| err("socket(AF_NETLINK, NETLINK_SOCK_DIAG)", e))?;
        sock.bind_auto().map_err(|e| err("bind(AF_NETLINK, NETLINK_SOCK_DIAG, port 0)", e))?;
        sock.connect(&SocketAddr::new(0, 0)).map_err(|e| err("connect(AF_NETLINK, NETLINK_SOCK_DIAG, kernel)", e))?;
        Ok(Self(sock))
    }

    /// Sends one `SOCK_DIAG_BY_FAMILY` dump request (`NLM_F_REQUEST | NLM_F_DUMP`, sequence
    /// number 1) whose payload is `req`, the family's request struct (e.g. `struct
    /// xdp_diag_req`, include/uapi/linux/xdp_diag.h) as bytes.
    ///
    /// Errors: `send` failed (the errno: ENOBUFS, EINTR, ...). A family the kernel has no
    /// sock_diag handler for answers with an NLMSG_ERROR message (ENOENT), not here.
    pub(crate) fn send_dump(&self, req: &[u8]) -> Result<(), SysError> {
        let len = NLMSG_HDRLEN + req.len();
        let mut msg = vec![0u8; len];
        let put = |m: &mut [u8], off: usize, v: &[u8]| m[off..off + v.len()].copy_from_slice(v);
        put(&mut msg, offset_of!(libc::nlmsghdr, nlmsg_len), &(len as u32).to_ne_bytes());
        put(&mut msg, offset_of!(libc::nlmsghdr, nlmsg_type), &SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
        put(&mut msg, offset_of!(libc::nlmsghdr, nlmsg_flags), &flags.to_ne_bytes());
        put(&mut msg, offset_of!(libc::nlmsghdr, nlmsg_seq), &1u32.to_ne_bytes());
        put(&mut msg, NLMSG_HDRLEN, req);
        self.0
            .send(&msg, 0)
            .map_err(|e| err(&format!("send(NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY, len={len})"), e))?;
        Ok(())
    }

    /// Receives the next datagram of answers into `buf` (cleared first; up to its capacity) and
    /// returns its length: netlink messages, 4-byte aligned, the last one NLMSG_DONE.
    ///
    /// Errors: `recv` failed (the errno).
    pub(crate) fn recv(&self, buf: &mut Vec<u8>) -> Result<usize, SysError> {
        buf.clear();
        self.0.recv(buf, 0).map_err(|e| err("recv(NETLINK_SOCK_DIAG)", e))
    }
}
