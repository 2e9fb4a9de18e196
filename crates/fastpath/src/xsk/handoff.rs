//! Sockets for unprivileged programs: the XSKMAP handed over a Unix socket, as the AF_XDP
//! device plugin for Kubernetes does.
//!
//! The privileged side (`fastpath filter load --xsk-handoff PATH`) loads and attaches the
//! classifier and serves its XSKMAP fd at PATH ([`Server`]). The unprivileged side
//! ([`request_xsk_map`]) receives that fd, creates and binds its AF_XDP socket itself (CAP_NET_RAW;
//! no program is loaded or attached) and puts the socket into the map at its queue id
//! ([`HandedXskMap`]): `bpf(BPF_MAP_UPDATE_ELEM)` on a map fd one holds needs no capability (the
//! kernel checks the fd's mode only, `map_get_sys_perms` in kernel/bpf/syscall.c).
//!
//! # The protocol
//!
//! As spoken by the AF_XDP device plugin (github.com/intel/afxdp-plugins-for-kubernetes,
//! `constants/constants.go` "Handshake" and `internal/udsserver/udsserver.go`) and by its DPDK
//! client (`use_cni`: DPDK doc/guides/howto/af_xdp_dp.rst, drivers/net/af_xdp/rte_eth_af_xdp.c
//! `uds_get_xskmap_fd`): a `SOCK_SEQPACKET` Unix socket (the plugin's "unixpacket"; DPDK
//! connects with `SOCK_SEQPACKET`, so a stream socket would be refused), one request or answer
//! per message, no terminator, at most 64 bytes:
//!
//! ```text
//!   client                         server
//!   /connect,<pod or host name>    /host_ok            (/host_nak: name refused; /error)
//!   /version                       0.1
//!   /xsk_map_fd,<ifname>           /fd_ack + SCM_RIGHTS(XSKMAP fd)   (/fd_nak: unknown ifname)
//!   /fin                           /fin_ack            (the server closes)
//!   anything else                  /nak
//! ```
//!
//! The first request names the client's host (DPDK sends `gethostname()`; the plugin checks it
//! against the pod that owns the device). fastpath has no pods: any non-empty name is accepted
//! and logged; who may connect is decided by the peer's credentials instead (`SO_PEERCRED`, the
//! uid at `connect`) against an allow list. A peer not on it gets `/error` in answer to its
//! first request and nothing else. A request before `/connect`, or a second `/connect`, is out
//! of order: `/error`, and the server closes. The plugin's `/config_busy_poll` is not offered
//! (answered `/nak`, the plugin's "not implemented"). Nothing but the XSKMAP of the one interface
//! served is ever sent: no other map, no program fd.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::bpf::BpfError;
use crate::sys::{unix, SysError};

/// `/connect,<name>`: the first request.
pub const REQ_CONNECT: &str = "/connect";
/// The answer to an accepted `/connect`.
pub const RESP_HOST_OK: &str = "/host_ok";
/// The answer to a `/connect` whose name is refused (an empty name).
pub const RESP_HOST_NAK: &str = "/host_nak";
/// Asks the protocol version.
pub const REQ_VERSION: &str = "/version";
/// The protocol version answered to `/version` (the plugin's `handshakeHandshakeVersion`).
pub const VERSION: &str = "0.1";
/// `/xsk_map_fd,<ifname>`: asks the XSKMAP of an interface.
pub const REQ_XSK_MAP_FD: &str = "/xsk_map_fd";
/// The answer carrying the XSKMAP fd (`SCM_RIGHTS`).
pub const RESP_FD_ACK: &str = "/fd_ack";
/// No XSKMAP for that interface here.
pub const RESP_FD_NAK: &str = "/fd_nak";
/// Ends the session.
pub const REQ_FIN: &str = "/fin";
/// The answer to `/fin`.
pub const RESP_FIN_ACK: &str = "/fin_ack";
/// An unknown or malformed request (the plugin's "bad request" / "not implemented").
pub const RESP_NAK: &str = "/nak";
/// A refused peer, or a request out of order; the server closes after it.
pub const RESP_ERROR: &str = "/error";
/// Largest request (the plugin's `udsMsgBufSize`) and answer (DPDK's `UDS_MAX_CMD_RESP` is 128).
pub const MAX_MSG: usize = 64;
/// Connections [`Server::serve`] serves at once.
pub const MAX_CONNECTIONS: usize = 16;
/// How long either side waits for the other's next message.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// A failed hand-off, naming the socket path.
#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    /// The path cannot be served (an existing file that is not a stale socket, a symlink, a
    /// live server already there).
    #[error("--xsk-handoff {path}: {why}")]
    Path {
        /// The socket path.
        path: PathBuf,
        /// What is wrong and what is accepted.
        why: String,
    },
    /// A system call failed.
    #[error("xsk hand-off at {path}: {cause}")]
    Sys {
        /// The socket path.
        path: PathBuf,
        /// The call.
        cause: SysError,
    },
    /// No server at the path (nothing there, or a socket nobody listens on).
    #[error("no XSKMAP server at {path} ({cause}): start `fastpath filter load ... --xsk-handoff {path}` first")]
    NoServer {
        /// The socket path.
        path: PathBuf,
        /// The connect call.
        cause: SysError,
    },
    /// The server answered something else than the protocol's next step.
    #[error("XSKMAP server at {path} answered {answer:?} to {request:?} (expected {expected:?})")]
    Refused {
        /// The socket path.
        path: PathBuf,
        /// What was asked.
        request: String,
        /// What came back.
        answer: String,
        /// What the protocol expects.
        expected: &'static str,
    },
    /// The server closed the connection (it exited) before answering.
    #[error("XSKMAP server at {path} closed the connection before answering {request:?} (did it exit?)")]
    Closed {
        /// The socket path.
        path: PathBuf,
        /// What was asked.
        request: String,
    },
    /// No answer within [`TIMEOUT`].
    #[error("XSKMAP server at {path} did not answer {request:?} within {} s", TIMEOUT.as_secs())]
    Timeout {
        /// The socket path.
        path: PathBuf,
        /// What was asked.
        request: String,
    },
    /// `/fd_ack` came without a descriptor, or with one that is not an XSKMAP.
    #[error("XSKMAP server at {path}: {why}")]
    BadFd {
        /// The socket path.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// One message exchanged: the request and the answer (`None`: none was sent).
pub type Exchange = (String, Option<String>);

/// The XSKMAP server: a listening `SOCK_SEQPACKET` socket at a path (mode 0666: who may have
/// the map is decided by the allow list, from the peer's credentials). Removes the socket
/// file when dropped.
#[derive(Debug)]
pub struct Server {
    listener: OwnedFd,
    path: PathBuf,
}

impl Server {
    /// Binds at `path`. Refused: a symlink (never followed), a file of any other kind than a
    /// socket, a socket some server still listens on. A socket nobody listens on (left by a
    /// server that died) is replaced.
    ///
    /// # Errors
    ///
    /// [`HandoffError::Path`] as above; [`HandoffError::Sys`] if the kernel refuses the bind
    /// (e.g. EACCES, ENAMETOOLONG).
    pub fn bind(path: &Path) -> Result<Self, HandoffError> {
        use std::os::unix::fs::FileTypeExt;
        let p = path.to_path_buf();
        if let Ok(m) = std::fs::symlink_metadata(path) {
            let ft = m.file_type();
            if ft.is_symlink() {
                return Err(HandoffError::Path {
                    path: p,
                    why: "is a symlink: give the path of the socket itself (a symlink is never followed)".into(),
                });
            }
            if !ft.is_socket() {
                return Err(HandoffError::Path {
                    path: p,
                    why: "exists and is not a socket: give a new path, or the socket of a server that exited".into(),
                });
            }
            match unix::seqpacket_connect(path) {
                Ok(_) => {
                    return Err(HandoffError::Path {
                        path: p,
                        why: "a server is listening there already: give another path".into(),
                    })
                }
                Err(e) if e.errno == libc::ECONNREFUSED => {
                    // Left by a server that exited: nobody listens.
                    std::fs::remove_file(path).map_err(|e| HandoffError::Path {
                        path: p.clone(),
                        why: format!("a stale socket there cannot be removed: {e}"),
                    })?;
                }
                Err(_) => {} // e.g. EPROTOTYPE (a stream socket): the bind below says EADDRINUSE
            }
        }
        let listener =
            unix::seqpacket_listen(path, 16).map_err(|cause| HandoffError::Sys { path: p.clone(), cause })?;
        let server = Server { listener, path: p };
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
            .map_err(|e| HandoffError::Path { path: server.path.clone(), why: format!("chmod 0666: {e}") })?;
        Ok(server)
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves `map` (the XSKMAP of `iface`) to every peer whose uid is in `allow`, until
    /// `stop` is set (checked every 100 ms). Each connection is served on a thread of its own,
    /// at most [`MAX_CONNECTIONS`] at once (more wait in the listen backlog), so a peer that
    /// connects and stays silent holds up nobody else. `log` gets one line per connection
    /// (who, what was asked, what was answered); when `serve` returns, every connection has
    /// ended.
    ///
    /// # Errors
    ///
    /// [`HandoffError::Sys`] if polling or accepting on the listening socket fails.
    pub fn serve(
        &self,
        map: BorrowedFd<'_>,
        iface: &str,
        allow: &[u32],
        stop: &AtomicBool,
        log: &(dyn Fn(String) + Sync),
    ) -> Result<(), HandoffError> {
        let sys = |cause| HandoffError::Sys { path: self.path.clone(), cause };
        let live = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            while !stop.load(Ordering::Relaxed) {
                if live.load(Ordering::Acquire) >= MAX_CONNECTIONS {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                if !crate::sys::poll_readable(self.listener.as_raw_fd(), 100).map_err(sys)? {
                    continue;
                }
                let conn = match unix::accept(self.listener.as_fd()) {
                    Ok(c) => c,
                    Err(e) if matches!(e.errno, libc::EAGAIN | libc::EINTR | libc::ECONNABORTED) => continue,
                    Err(e) => return Err(sys(e)),
                };
                live.fetch_add(1, Ordering::AcqRel);
                let live = &live;
                scope.spawn(move || {
                    log(self.serve_peer(&conn, map, iface, allow));
                    live.fetch_sub(1, Ordering::AcqRel);
                });
            }
            Ok(())
        })
    }

    /// One connection, checked against `allow`; its log line.
    fn serve_peer(&self, conn: &OwnedFd, map: BorrowedFd<'_>, iface: &str, allow: &[u32]) -> String {
        let who = match unix::peer_cred(conn.as_fd()) {
            Ok((pid, uid, _)) => (Some(uid), format!("uid {uid} pid {pid}")),
            Err(e) => (None, format!("unknown peer ({e})")),
        };
        let allowed = who.0.is_some_and(|u| allow.contains(&u));
        let t = serve_conn(conn.as_fd(), allowed, map, iface);
        let said: Vec<String> =
            t.iter().map(|(q, a)| format!("{q:?} -> {}", a.as_deref().unwrap_or("(nothing)"))).collect();
        let said = if said.is_empty() { "(no request)".to_string() } else { said.join(", ") };
        if allowed {
            format!("xsk-handoff {}: {}: {said}", self.path.display(), who.1)
        } else {
            let list: Vec<String> = allow.iter().map(u32::to_string).collect();
            format!(
                "xsk-handoff {}: refused {} (not in --xsk-handoff-allow {}): {said}",
                self.path.display(),
                who.1,
                list.join(",")
            )
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The text of a message (lossy UTF-8, NULs cut: DPDK sends C strings).
fn text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// `"/cmd,arg"` (spaces around the argument ignored, as the plugin does): the argument of
/// `cmd`, or None if `req` is not `cmd` with exactly one argument.
fn arg_of<'a>(req: &'a str, cmd: &str) -> Option<&'a str> {
    let (c, a) = req.split_once(',')?;
    let a = a.trim();
    (c.trim() == cmd && !a.is_empty() && !a.contains(',')).then_some(a)
}

/// Serves one connection (the server side of the protocol; `allowed`: the peer passed the
/// allow list) until `/fin`, an out-of-order request, a refusal, the peer closing, or
/// [`TIMEOUT`] without a request. Returns the transcript.
pub fn serve_conn(conn: BorrowedFd<'_>, allowed: bool, map: BorrowedFd<'_>, iface: &str) -> Vec<Exchange> {
    let mut t = Vec::new();
    if unix::set_timeouts(conn, TIMEOUT).is_err() {
        return t;
    }
    let mut connected = false;
    let mut buf = [0u8; MAX_MSG];
    loop {
        let req = match unix::recv_msg(conn, &mut buf) {
            Ok((0, _)) => return t,
            Ok((n, _)) => text(&buf[..n]), // a descriptor sent to us is closed (dropped)
            Err(e) if e.errno == libc::EMSGSIZE => "(a request over 64 bytes)".to_string(),
            Err(_) => return t,
        };
        let (answer, fd, end): (&str, Option<BorrowedFd<'_>>, bool) = if !allowed {
            (RESP_ERROR, None, true)
        } else if !connected {
            match arg_of(&req, REQ_CONNECT) {
                Some(_) => {
                    connected = true;
                    (RESP_HOST_OK, None, false)
                }
                None if req.trim() == REQ_CONNECT || req.starts_with("/connect,") => (RESP_HOST_NAK, None, true),
                None => (RESP_ERROR, None, true),
            }
        } else if req == REQ_VERSION {
            (VERSION, None, false)
        } else if req == REQ_FIN {
            (RESP_FIN_ACK, None, true)
        } else if req.starts_with(REQ_CONNECT) {
            (RESP_ERROR, None, true)
        } else if let Some(ifname) = arg_of(&req, REQ_XSK_MAP_FD) {
            if ifname == iface {
                (RESP_FD_ACK, Some(map), false)
            } else {
                (RESP_FD_NAK, None, false)
            }
        } else {
            (RESP_NAK, None, false)
        };
        let sent = unix::send_msg(conn, answer.as_bytes(), fd).is_ok();
        t.push((req, sent.then(|| answer.to_string())));
        if end || !sent {
            return t;
        }
    }
}

/// Sends `req`, waits for the answer (and any descriptor with it).
fn ask(conn: BorrowedFd<'_>, path: &Path, req: &str) -> Result<(String, Option<OwnedFd>), HandoffError> {
    let closed = || HandoffError::Closed { path: path.to_path_buf(), request: req.to_string() };
    match unix::send_msg(conn, req.as_bytes(), None) {
        Ok(()) => {}
        Err(e) if matches!(e.errno, libc::EPIPE | libc::ECONNRESET) => return Err(closed()),
        Err(e) if e.errno == libc::EAGAIN => {
            return Err(HandoffError::Timeout { path: path.to_path_buf(), request: req.to_string() })
        }
        Err(cause) => return Err(HandoffError::Sys { path: path.to_path_buf(), cause }),
    }
    let mut buf = [0u8; 128];
    match unix::recv_msg(conn, &mut buf) {
        Ok((0, _)) => Err(closed()),
        Ok((n, fd)) => Ok((text(&buf[..n]), fd)),
        Err(e) if e.errno == libc::ECONNRESET => Err(closed()),
        Err(e) if e.errno == libc::EAGAIN => {
            Err(HandoffError::Timeout { path: path.to_path_buf(), request: req.to_string() })
        }
        Err(cause) => Err(HandoffError::Sys { path: path.to_path_buf(), cause }),
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
/// it cannot be read.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && !s.contains(','))
        .unwrap_or_else(|| "fastpath".into())
}

/// Connects to the server at `path` and asks the XSKMAP of `ifname`; the map is checked to be
/// an XSKMAP.
///
/// # Errors
///
/// [`HandoffError::NoServer`] (nothing listens at `path`), then as [`handshake`], and
/// [`HandoffError::BadFd`] if the descriptor is not an XSKMAP.
pub fn request_xsk_map(path: &Path, ifname: &str) -> Result<HandedXskMap, HandoffError> {
    let conn =
        unix::seqpacket_connect(path).map_err(|cause| HandoffError::NoServer { path: path.to_path_buf(), cause })?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A map fd to serve without BPF: any descriptor does for the protocol (the client side
    /// of these tests checks only that one arrives).
    fn some_fd() -> OwnedFd {
        std::fs::File::open("/dev/null").unwrap().into()
    }

    fn client_says(msgs: &[&str]) -> Vec<Exchange> {
        let (s, c) = unix::seqpacket_pair().unwrap();
        let map = some_fd();
        let server = std::thread::spawn(move || serve_conn(s.as_fd(), true, map.as_fd(), "veth0"));
        let mut got = Vec::new();
        let mut buf = [0u8; 128];
        for m in msgs {
            unix::send_msg(c.as_fd(), m.as_bytes(), None).unwrap();
            let (n, fd) = unix::recv_msg(c.as_fd(), &mut buf).unwrap();
            let a = text(&buf[..n]);
            assert_eq!(fd.is_some(), a == RESP_FD_ACK, "{m} -> {a}: a descriptor with /fd_ack only");
            got.push((m.to_string(), Some(a)));
        }
        drop(c);
        let t = server.join().unwrap();
        assert_eq!(t, got, "the server's transcript is what the client saw");
        got
    }

    fn answers(t: &[Exchange]) -> Vec<&str> {
        t.iter().map(|(_, a)| a.as_deref().unwrap_or("")).collect()
    }

    #[test]
    fn the_documented_sequence() {
        let t = client_says(&["/connect,pod-1", "/version", "/xsk_map_fd,veth0", "/fin"]);
        assert_eq!(answers(&t), ["/host_ok", "0.1", "/fd_ack", "/fin_ack"]);
        // The plugin's own clients put a space after the comma.
        let t = client_says(&["/connect, pod-1", "/xsk_map_fd, veth0", "/fin"]);
        assert_eq!(answers(&t), ["/host_ok", "/fd_ack", "/fin_ack"]);
    }

    #[test]
    fn unknown_interface_malformed_and_unknown_requests() {
        let t = client_says(&[
            "/connect,pod-1",
            "/xsk_map_fd,eth9",
            "/xsk_map_fd",
            "/xsk_map_fd,a,b",
            "/config_busy_poll,20,64",
            "hello",
            "/fin",
        ]);
        assert_eq!(answers(&t), ["/host_ok", "/fd_nak", "/nak", "/nak", "/nak", "/nak", "/fin_ack"]);
    }

    #[test]
    fn out_of_order_gets_error_and_the_end() {
        for first in ["/version", "/xsk_map_fd,veth0", "/fin", "garbage"] {
            let t = client_says(&[first]);
            assert_eq!(answers(&t), ["/error"], "{first} before /connect");
        }
        let t = client_says(&["/connect,a", "/connect,b"]);
        assert_eq!(answers(&t), ["/host_ok", "/error"]);
        let t = client_says(&["/connect,"]);
        assert_eq!(answers(&t), ["/host_nak"]);
    }

    #[test]
    fn a_peer_not_allowed_gets_error_and_nothing_else() {
        let (s, c) = unix::seqpacket_pair().unwrap();
        let map = some_fd();
        let server = std::thread::spawn(move || serve_conn(s.as_fd(), false, map.as_fd(), "veth0"));
        let e = handshake(c.as_fd(), Path::new("/test"), "pod", "veth0").unwrap_err();
        assert!(matches!(&e, HandoffError::Refused { answer, .. } if answer == "/error"), "{e}");
        assert_eq!(answers(&server.join().unwrap()), ["/error"]);
    }

    #[test]
    fn client_and_server_agree() {
        let (s, c) = unix::seqpacket_pair().unwrap();
        let map = some_fd();
        let server = std::thread::spawn(move || serve_conn(s.as_fd(), true, map.as_fd(), "veth0"));
        let (_fd, t) = handshake(c.as_fd(), Path::new("/test"), "pod", "veth0").unwrap();
        assert_eq!(
            t.iter().map(|(q, _)| q.as_str()).collect::<Vec<_>>(),
            ["/connect,pod", "/version", "/xsk_map_fd,veth0", "/fin"]
        );
        assert_eq!(server.join().unwrap(), t);
    }

    #[test]
    fn a_server_gone_mid_protocol_is_an_error_not_a_hang() {
        let (s, c) = unix::seqpacket_pair().unwrap();
        let server = std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            let _ = unix::recv_msg(s.as_fd(), &mut buf);
            unix::send_msg(s.as_fd(), b"/host_ok", None).unwrap();
            let _ = unix::recv_msg(s.as_fd(), &mut buf);
            drop(s); // exits before answering /version
        });
        let t0 = std::time::Instant::now();
        let e = handshake(c.as_fd(), Path::new("/test"), "pod", "veth0").unwrap_err();
        server.join().unwrap();
        assert!(matches!(&e, HandoffError::Closed { request, .. } if request == "/version"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(2));
        // A server that stays but never answers: a timeout.
        let (s, c) = unix::seqpacket_pair().unwrap();
        let e = handshake(c.as_fd(), Path::new("/test"), "pod", "veth0").unwrap_err();
        assert!(matches!(e, HandoffError::Timeout { .. }), "{e}");
        drop(s);
    }

    #[test]
    fn a_silent_peer_holds_up_nobody() {
        let dir = std::env::temp_dir().join(format!("fastpath-handoff-serve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sock");
        let server = Server::bind(&path).unwrap();
        let stop = AtomicBool::new(false);
        let me = crate::sys::geteuid();
        let lines = std::sync::Mutex::new(Vec::new());
        let map = some_fd();
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                server.serve(map.as_fd(), "veth0", &[me], &stop, &|l| lines.lock().unwrap().push(l)).unwrap()
            });
            let _silent = unix::seqpacket_connect(&path).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            let t0 = std::time::Instant::now();
            let c = unix::seqpacket_connect(&path).unwrap();
            let (_fd, t) = handshake(c.as_fd(), &path, "pod", "veth0").unwrap();
            assert_eq!(t.len(), 4);
            assert!(t0.elapsed() < Duration::from_secs(2), "served while the silent peer waits");
            drop(_silent);
            stop.store(true, Ordering::Relaxed);
            h.join().unwrap();
        });
        let lines = lines.into_inner().unwrap();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines.iter().any(|l| l.ends_with("(no request)")), "{lines:?}");
        assert!(lines.iter().any(|l| l.ends_with("\"/fin\" -> /fin_ack")), "{lines:?}");
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bind_refuses_what_it_must_not_replace() {
        let dir = std::env::temp_dir().join(format!("fastpath-handoff-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("file");
        std::fs::write(&file, b"x").unwrap();
        assert!(matches!(Server::bind(&file), Err(HandoffError::Path { .. })));
        let link = dir.join("link");
        std::os::unix::fs::symlink(dir.join("nowhere"), &link).unwrap();
        assert!(matches!(Server::bind(&link), Err(HandoffError::Path { .. })));
        assert!(!dir.join("nowhere").exists(), "the symlink was not followed");
        let sock = dir.join("sock");
        let s = Server::bind(&sock).unwrap();
        assert!(matches!(Server::bind(&sock), Err(HandoffError::Path { .. })), "a live server is not replaced");
        // A stale socket (its server gone without removing it) is replaced.
        drop(s);
        let _stale = unix::seqpacket_listen(&sock, 1).unwrap();
        drop(_stale);
        let s = Server::bind(&sock).unwrap();
        assert!(matches!(request_xsk_map(&dir.join("none"), "veth0"), Err(HandoffError::NoServer { .. })));
        drop(s);
        assert!(!sock.exists(), "the server removes its socket");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
