//! The client side of the UDS protocol ([`super`]): [`request_xsk_map`] connects to a server
//! running as root, asks the XSKMAP of one interface, and checks what it gets.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::path::Path;

use super::{
    text, Exchange, HandoffError, MAX_MSG, REQ_CONNECT, REQ_FIN, REQ_VERSION, REQ_XSK_MAP_FD, RESP_FD_ACK,
    RESP_FIN_ACK, RESP_HOST_OK, TIMEOUT, VERSION,
};
use crate::bpf::BpfError;
use crate::sys::unix;

/// Receives one message; if the first receive reports `ECONNRESET`, receives once more.
///
/// A peer that closes with our request unread in its queue (the server's refusal: `/error`
/// sent at accept, the request never read) sets `ECONNRESET` on this socket
/// (`unix_release_sock()`, net/unix/af_unix.c), and the next receive reports that error
/// before it looks at the queue (`sock_error()` in `__skb_try_recv_datagram()`,
/// net/core/datagram.c). That read clears the error, so a second receive returns the answer
/// that was already queued, or 0 (end of file) if there is none.
pub(super) fn recv_queued(
    conn: BorrowedFd<'_>,
    buf: &mut [u8],
) -> Result<(usize, Option<OwnedFd>), crate::sys::SysError> {
    match unix::recv_msg(conn, buf) {
        Err(e) if e.errno == libc::ECONNRESET => match unix::recv_msg(conn, buf) {
            Ok((0, _)) => Err(e),
            r => r,
        },
        r => r,
    }
}

/// Sends `req`, waits for the answer (and any descriptor with it).
fn ask(conn: BorrowedFd<'_>, path: &Path, req: &str) -> Result<(String, Option<OwnedFd>), HandoffError> {
    let closed = || HandoffError::Closed { path: path.to_path_buf(), request: req.to_string() };
    let fail = |e: crate::sys::SysError| match e.errno {
        libc::EPIPE | libc::ECONNRESET => closed(),
        libc::EAGAIN => HandoffError::Timeout { path: path.to_path_buf(), request: req.to_string() },
        _ => HandoffError::Sys { path: path.to_path_buf(), cause: e },
    };
    // A send that finds the server gone (EPIPE, ECONNRESET) still reads what it may have
    // answered before closing (a refusal: `/error` without reading).
    if let Err(e) = unix::send_msg(conn, req.as_bytes(), None) {
        if !matches!(e.errno, libc::EPIPE | libc::ECONNRESET) {
            return Err(fail(e));
        }
    }
    let mut buf = [0u8; 128];
    match recv_queued(conn, &mut buf) {
        Ok((0, _)) => Err(closed()),
        Ok((n, fd)) => Ok((text(&buf[..n]), fd)),
        Err(e) => Err(fail(e)),
    }
}

/// The client side of the protocol on a connected socket: `/connect,<host>`, `/version`,
/// `/xsk_map_fd,<ifname>`, `/fin`. Returns the XSKMAP fd and the transcript. `path` names
/// the server in errors.
///
/// # Errors
///
/// [`HandoffError::Refused`] (an answer other than the next step's), [`HandoffError::Closed`]
/// (the server went away), [`HandoffError::Timeout`] (no answer within [`TIMEOUT`]),
/// [`HandoffError::BadFd`] (`/fd_ack` without a descriptor).
pub fn handshake(
    conn: BorrowedFd<'_>,
    path: &Path,
    host: &str,
    ifname: &str,
) -> Result<(OwnedFd, Vec<Exchange>), HandoffError> {
    unix::set_timeouts(conn, TIMEOUT).map_err(|cause| HandoffError::Sys { path: path.to_path_buf(), cause })?;
    let mut t = Vec::new();
    let mut step = |req: String, expected: &'static str, prefix: bool| -> Result<Option<OwnedFd>, HandoffError> {
        let (answer, fd) = ask(conn, path, &req)?;
        t.push((req.clone(), Some(answer.clone())));
        let ok = if prefix { !answer.is_empty() && !answer.starts_with('/') } else { answer == expected };
        if !ok {
            return Err(HandoffError::Refused { path: path.to_path_buf(), request: req, answer, expected });
        }
        Ok(fd)
    };
    step(format!("{REQ_CONNECT},{host}"), RESP_HOST_OK, false)?;
    // Any version string (not a /-message) is accepted: the plugin has only ever had 0.1.
    step(REQ_VERSION.to_string(), VERSION, true)?;
    let fd = step(format!("{REQ_XSK_MAP_FD},{ifname}"), RESP_FD_ACK, false)?;
    step(REQ_FIN.to_string(), RESP_FIN_ACK, false)?;
    let fd = fd.ok_or_else(|| HandoffError::BadFd {
        path: path.to_path_buf(),
        why: "/fd_ack came without a file descriptor".into(),
    })?;
    Ok((fd, t))
}

/// This host's name (`/proc/sys/kernel/hostname`, as DPDK's `gethostname()`), "fastpath" if
/// it cannot be read; see [`host_field`].
fn hostname() -> String {
    host_field(&std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default())
}

/// The name sent with `/connect`: `raw` trimmed and cut to what fits a request of
/// [`MAX_MSG`] bytes (a host name may have 64, `/connect,` takes 9; the server only logs
/// it), "fastpath" if empty or with a comma.
pub(super) fn host_field(raw: &str) -> String {
    let mut h = raw.trim();
    let room = MAX_MSG - REQ_CONNECT.len() - 1;
    while h.len() > room {
        let mut end = room;
        while !h.is_char_boundary(end) {
            end -= 1;
        }
        h = &h[..end];
    }
    if h.is_empty() || h.contains(',') {
        return "fastpath".into();
    }
    h.to_string()
}

/// Connects to the server at `path` (waiting at most [`TIMEOUT`], a full backlog included)
/// and asks the XSKMAP of `ifname`; the server must run as one of `server_uids` (its
/// `SO_PEERCRED`; [`TRUSTED_SERVER_UIDS`](super::TRUSTED_SERVER_UIDS), root, for the CLI: anyone who could bind `path`
/// first would otherwise serve a map of their own), and the map is checked to be an XSKMAP.
///
/// # Errors
///
/// [`HandoffError::NoServer`] (nothing listens at `path`, or no room within [`TIMEOUT`]),
/// [`HandoffError::Untrusted`] (the server runs as another uid), then as [`handshake`], and
/// [`HandoffError::BadFd`] if the descriptor is not an XSKMAP.
pub fn request_xsk_map(path: &Path, ifname: &str, server_uids: &[u32]) -> Result<HandedXskMap, HandoffError> {
    let conn = unix::seqpacket_connect(path, TIMEOUT)
        .map_err(|cause| HandoffError::NoServer { path: path.to_path_buf(), cause })?;
    let uid = unix::peer_cred(conn.as_fd()).map_err(|cause| HandoffError::Sys { path: path.to_path_buf(), cause })?.1;
    if !server_uids.contains(&uid) {
        let list: Vec<String> = server_uids.iter().map(u32::to_string).collect();
        return Err(HandoffError::Untrusted { path: path.to_path_buf(), uid, trusted: list.join(",") });
    }
    let (fd, _) = handshake(conn.as_fd(), path, &hostname(), ifname)?;
    HandedXskMap::new(fd).map_err(|why| HandoffError::BadFd { path: path.to_path_buf(), why })
}

/// An XSKMAP received from a server: AF_XDP sockets bound by this process go into it at their
/// queue id ([`crate::io::afxdp::XskMap`]); no capability needed. Entries leave the map when
/// their socket closes.
#[derive(Debug)]
pub struct HandedXskMap {
    fd: OwnedFd,
    max_entries: u32,
}

impl HandedXskMap {
    /// Wraps `fd` after checking it is an XSKMAP with u32 keys and values.
    ///
    /// # Errors
    ///
    /// What the descriptor is instead, as text.
    pub fn new(fd: OwnedFd) -> Result<Self, String> {
        let (ty, k, v, max_entries) =
            crate::sys::bpf::map_info(fd.as_fd()).map_err(|e| format!("not a BPF map ({e})"))?;
        if ty != crate::sys::bpf::MAP_TYPE_XSKMAP || k != 4 || v != 4 {
            return Err(format!(
                "the map handed over is not an XSKMAP (map type {ty}, key {k} bytes, value {v} bytes)"
            ));
        }
        Ok(Self { fd, max_entries })
    }

    /// Slots (queue ids 0..max_entries).
    pub fn max_entries(&self) -> u32 {
        self.max_entries
    }
}

impl crate::io::afxdp::XskMap for HandedXskMap {
    fn insert_xsk(&self, queue_id: u32, fd: RawFd) -> Result<(), BpfError> {
        Ok(crate::sys::bpf::map_update_u32(self.fd.as_fd(), queue_id, fd as u32, "handed-over XSKMAP")?)
    }
}
