//! The AF_XDP device plugin's UDS (Unix domain socket) protocol: sockets for unprivileged
//! programs, the XSKMAP handed over a Unix socket, as the AF_XDP device plugin for Kubernetes
//! does. The server is `server.rs`, the client `client.rs`; this file holds what both speak
//! (the messages, the limits, [`HandoffError`]).
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
//! and logged (a `/connect` over 64 bytes too, its name cut: the plugin's pod-side client sends
//! a pod's host name whole, [`CUT_CONNECT`]); who may connect is decided by the peer's credentials instead (`SO_PEERCRED`, the
//! uid at `connect`) against an allow list. A peer not on it gets `/error` at once, unread,
//! and is closed. No peer can send the server a descriptor (`SO_PASSRIGHTS`, Linux 6.16+:
//! closing one can block for as long as its sender chose). An allowed uid controls the whole XSKMAP (any queue's slot; it may pass the
//! fd on): the allowed uids must trust each other. The client takes the map only from a server
//! running as root ([`TRUSTED_SERVER_UIDS`]). A request before `/connect`, or a second `/connect`, is out
//! of order: `/error`, and the server closes. The plugin's `/config_busy_poll` is not offered
//! (answered `/nak`, the plugin's "not implemented"). Nothing but the XSKMAP of the one interface
//! served is ever sent: no other map, no program fd.

mod client;
mod server;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Duration;

use crate::sys::SysError;

pub use client::{handshake, request_xsk_map, HandedXskMap};
pub use server::{serve_conn, Server};

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
/// Largest request (the plugin's `udsMsgBufSize`) and answer (DPDK's `UDS_MAX_CMD_RESP` is 128);
/// a longer first `/connect` is cut, not refused (see [`CUT_CONNECT`]).
pub const MAX_MSG: usize = 64;
/// Marks, in the transcript and the log, a first `/connect` longer than [`MAX_MSG`] bytes,
/// served with its name cut there (the name is only logged). The plugin's own pod-side client
/// (`pkg/goclient`) sends its host name whole: `/connect, ` and a pod's host name of up to 63
/// bytes is 73. Any other request longer than [`MAX_MSG`] is not read: `/error` before
/// `/connect`, `/nak` after.
pub const CUT_CONNECT: &str = " [cut at 64 bytes]";
/// Connections [`Server::serve`] serves at once; one more is answered `/error` and closed.
pub const MAX_CONNECTIONS: usize = 16;
/// Connections of one uid served at once; one more is answered `/error` and closed.
pub const MAX_PER_UID: usize = 4;
/// Requests served on one connection; the server closes after answering the last.
pub const MAX_REQUESTS: usize = 8;
/// How long the server serves one connection, all requests together: it closes then.
pub const CONN_DEADLINE: Duration = Duration::from_secs(10);
/// How long the client waits for `connect` and for each answer.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// The uids a client accepts as the server (`SO_PEERCRED` of the listening side): root.
pub const TRUSTED_SERVER_UIDS: &[u32] = &[0];
/// Log lines [`Server::serve`] writes per [`LOG_WINDOW`] at most (one per connection): the
/// lines over it are counted, and the count said when the next window starts (a local user
/// connecting in a loop cannot flood the server's log).
pub const LOG_BURST: usize = 50;
/// See [`LOG_BURST`].
pub const LOG_WINDOW: Duration = Duration::from_secs(10);

/// A failed hand-off, naming the socket path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandoffError {
    /// The path cannot be served (an existing file that is not a stale socket, a symlink, a
    /// live server already there).
    #[error("XSKMAP server socket {path}: {why}")]
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
    #[error("no XSKMAP server at {path} ({cause})")]
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
    /// The server runs as a uid not trusted to serve (not root, by default).
    #[error("XSKMAP server at {path} runs as uid {uid}, not as uid {trusted}: not used (whoever binds the path first serves it; serve it from a directory only root can write)")]
    Untrusted {
        /// The socket path.
        path: PathBuf,
        /// The server's uid (`SO_PEERCRED`).
        uid: u32,
        /// The uids accepted.
        trusted: String,
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

/// The text of a message (lossy UTF-8, NULs cut: DPDK sends C strings).
fn text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}
