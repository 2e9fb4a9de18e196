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

/// The XSKMAP server: a listening `SOCK_SEQPACKET` socket at a path (mode 0666: who may have
/// the map is decided by the allow list, from the peer's credentials). Removes the socket
/// file it created (same device and inode) when dropped.
#[derive(Debug)]
pub struct Server {
    listener: OwnedFd,
    /// The path as given (messages).
    path: PathBuf,
    /// The path under the canonical parent directory (every call after the checks).
    at: PathBuf,
    /// Device and inode of the socket file bound.
    ident: (u64, u64),
    /// Peers cannot send descriptors (`SO_PASSRIGHTS` 0, [`unix::refuse_passed_fds`]).
    fds_refused: bool,
}

/// Checks that nobody but root or the server's own uid can replace entries of `dir` (the
/// canonical parent of the socket): `dir` itself owned by root or `euid` and not writable by
/// group or others; each directory above it owned by root or `euid`, and not writable by
/// group or others unless sticky (as /tmp: nobody else may rename or remove what is not theirs).
fn check_parent(path: &Path, dir: &Path, euid: u32) -> Result<(), HandoffError> {
    use std::os::unix::fs::MetadataExt;
    let accepted = format!(
        "accepted is a directory owned by root (or uid {euid}, the server's) that group and others \
         cannot write (e.g. /run/fastpath, mode 0755), below directories owned by root or uid {euid} \
         that others cannot write unless sticky"
    );
    let refuse = |d: &Path, what: String| HandoffError::Path {
        path: path.to_path_buf(),
        why: format!("directory {} {what}: {accepted}", d.display()),
    };
    for (i, d) in dir.ancestors().enumerate() {
        let m = std::fs::metadata(d).map_err(|e| refuse(d, format!("cannot be read ({e})")))?;
        let (uid, mode) = (m.uid(), m.mode() & 0o7777);
        if uid != 0 && uid != euid {
            return Err(refuse(d, format!("is owned by uid {uid}")));
        }
        let writable = mode & 0o022 != 0;
        if writable && (i == 0 || mode & 0o1000 == 0) {
            return Err(refuse(d, format!("is writable by group or others (mode {mode:04o})")));
        }
    }
    Ok(())
}

impl Server {
    /// Binds at `path`. Refused: a parent directory others could write (see below), a symlink
    /// (never followed), a file of any other kind than a socket, a socket some server still
    /// listens on. A socket nobody listens on (left by a server that died) is replaced.
    ///
    /// The parent directory must be owned by root or by this process's uid and not be
    /// writable by group or others, and the directories above it owned by root or this uid
    /// and not writable by others unless sticky: nobody else can then swap the socket for
    /// something else between the calls below. The socket's mode is set to 0666 without
    /// following a symlink (`sys::unix::chmod_socket_nofollow`).
    ///
    /// # Errors
    ///
    /// [`HandoffError::Path`] as above; [`HandoffError::Sys`] if the kernel refuses the bind
    /// (e.g. EACCES, ENAMETOOLONG).
    pub fn bind(path: &Path) -> Result<Self, HandoffError> {
        use std::os::unix::fs::FileTypeExt;
        let p = path.to_path_buf();
        let name = path.file_name().ok_or_else(|| HandoffError::Path {
            path: p.clone(),
            why: "names no file: give the path of a socket to create".into(),
        })?;
        let parent = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let real = std::fs::canonicalize(parent).map_err(|e| HandoffError::Path {
            path: p.clone(),
            why: format!("its directory {} cannot be resolved: {e}", parent.display()),
        })?;
        check_parent(path, &real, crate::sys::geteuid())?;
        let at = real.join(name);
        if let Ok(m) = std::fs::symlink_metadata(&at) {
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
            match unix::seqpacket_connect(&at, Duration::from_secs(1)) {
                Ok(_) => {
                    return Err(HandoffError::Path {
                        path: p,
                        why: "a server is listening there already: give another path".into(),
                    })
                }
                Err(e) if e.errno == libc::EAGAIN => {
                    return Err(HandoffError::Path {
                        path: p,
                        why: "a server is listening there already (its backlog full): give another path".into(),
                    })
                }
                Err(e) if e.errno == libc::ECONNREFUSED => {
                    // Left by a server that exited: nobody listens. The directory is safe
                    // (checked above): nobody else can have put it there.
                    std::fs::remove_file(&at).map_err(|e| HandoffError::Path {
                        path: p.clone(),
                        why: format!("a stale socket there cannot be removed: {e}"),
                    })?;
                }
                Err(_) => {} // e.g. EPROTOTYPE (a stream socket): the bind below says EADDRINUSE
            }
        }
        let (listener, fds_refused) = unix::seqpacket_listen(&at, MAX_CONNECTIONS as i32)
            .map_err(|cause| HandoffError::Sys { path: p.clone(), cause })?;
        let ident = match unix::chmod_socket_nofollow(&at, 0o666) {
            Ok(i) => i,
            Err(cause) => {
                // Ours (the directory is safe): not left behind.
                let _ = std::fs::remove_file(&at);
                return Err(HandoffError::Sys { path: p, cause });
            }
        };
        Ok(Server { listener, path: p, at, ident, fds_refused })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether peers are refused sending descriptors (`SO_PASSRIGHTS`, Linux >= 6.16). If not,
    /// one a peer sends is closed by the server (a refused peer's when its connection is
    /// closed, still queued), and the last close of some (a TCP socket with unsent data and
    /// `SO_LINGER`) lasts as long as the sender chose: any local user could stall the server.
    pub fn refuses_passed_fds(&self) -> bool {
        self.fds_refused
    }

    /// Serves `map` (the XSKMAP of `iface`) to every peer whose uid is in `allow`, until
    /// `stop` is set (checked every 100 ms, here and in every connection). The peer's uid
    /// (`SO_PEERCRED`) is checked right after `accept`: a uid not in `allow`, or one more
    /// connection than [`MAX_CONNECTIONS`] in all or [`MAX_PER_UID`] of one uid, is answered
    /// `/error` at once, without reading, and closed. Each connection served has a thread of
    /// its own and at most [`MAX_REQUESTS`] requests within [`CONN_DEADLINE`]. `log` gets one
    /// line per connection (who, what was asked, what was answered); when `serve` returns,
    /// every connection has ended (within 100 ms of `stop`, plus an answer being sent). At most
    /// [`LOG_BURST`] lines per [`LOG_WINDOW`] go to `log`; the others are counted, and the
    /// count is said next. An `accept` failing for want of descriptors or memory (EMFILE,
    /// ENFILE, ENOBUFS, ENOMEM) and a connection thread that cannot be started are logged and
    /// served again 100 ms later, not the end of the server. Peers
    /// cannot send descriptors ([`Server::refuses_passed_fds`]); on a kernel where they can,
    /// the first line `log` gets is a warning saying so.
    ///
    /// # Errors
    ///
    /// [`HandoffError::Sys`] if polling or accepting on the listening socket fails.
    ///
    /// # Panics
    ///
    /// If the lock of the per-uid counts is poisoned (a connection thread panicked).
    pub fn serve(
        &self,
        map: BorrowedFd<'_>,
        iface: &str,
        allow: &[u32],
        stop: &AtomicBool,
        log: &(dyn Fn(String) + Sync),
    ) -> Result<(), HandoffError> {
        let sys = |cause| HandoffError::Sys { path: self.path.clone(), cause };
        let live = std::sync::Mutex::new(std::collections::HashMap::<u32, usize>::new());
        let limit = std::sync::Mutex::new(LogLimit::new(std::time::Instant::now()));
        let limited = |line: String| {
            let mut l = limit.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match l.admit(std::time::Instant::now()) {
                Some(0) => log(line),
                Some(n) => {
                    log(self.suppressed(n));
                    log(line);
                }
                None => {}
            }
        };
        let r = self.accept_loop(map, iface, allow, stop, &limited, &live);
        let n = limit.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner).dropped;
        if n > 0 {
            log(self.suppressed(n));
        }
        r.map_err(sys)
    }

    fn suppressed(&self, n: usize) -> String {
        format!(
            "xsk-handoff {}: {n} more lines not logged (at most {LOG_BURST} per {} s)",
            self.path.display(),
            LOG_WINDOW.as_secs()
        )
    }

    /// [`Server::serve`] after the log is limited.
    fn accept_loop(
        &self,
        map: BorrowedFd<'_>,
        iface: &str,
        allow: &[u32],
        stop: &AtomicBool,
        log: &(dyn Fn(String) + Sync),
        live: &std::sync::Mutex<std::collections::HashMap<u32, usize>>,
    ) -> Result<(), SysError> {
        if !self.fds_refused {
            log(format!(
                "warning: xsk-handoff {}: this kernel has no SO_PASSRIGHTS (Linux < 6.16): a peer can send a descriptor whose close blocks (a TCP socket with SO_LINGER), stalling the server",
                self.path.display()
            ));
        }
        std::thread::scope(|scope| {
            while !stop.load(Ordering::Relaxed) {
                if !crate::sys::poll_readable(self.listener.as_raw_fd(), 100)? {
                    continue;
                }
                let conn = match unix::accept(self.listener.as_fd()) {
                    Ok(c) => c,
                    Err(e) if matches!(e.errno, libc::EAGAIN | libc::EINTR | libc::ECONNABORTED) => continue,
                    // Out of descriptors or memory: the connection stays queued, the listener
                    // readable; waiting instead of spinning, and the server goes on.
                    Err(e) if matches!(e.errno, libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
                        log(format!("xsk-handoff {}: {e}: retrying in 100 ms", self.path.display()));
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let (uid, who) = match unix::peer_cred(conn.as_fd()) {
                    Ok((pid, uid, _)) => (Some(uid), format!("uid {uid} pid {pid}")),
                    Err(e) => (None, format!("unknown peer ({e})")),
                };
                let Some(uid) = uid.filter(|u| allow.contains(u)) else {
                    let list: Vec<String> = allow.iter().map(u32::to_string).collect();
                    let said = refuse(conn.as_fd());
                    log(format!(
                        "xsk-handoff {}: refused {who} (not among the allowed uids {}): {said}",
                        self.path.display(),
                        list.join(",")
                    ));
                    continue;
                };
                let busy = {
                    let mut l = live.lock().expect("per-uid counts");
                    let total: usize = l.values().sum();
                    let mine = l.entry(uid).or_insert(0);
                    let busy = total >= MAX_CONNECTIONS || *mine >= MAX_PER_UID;
                    if !busy {
                        *mine += 1;
                    }
                    busy
                };
                if busy {
                    let said = refuse(conn.as_fd());
                    log(format!(
                        "xsk-handoff {}: refused {who} (busy: {MAX_CONNECTIONS} connections in all or {MAX_PER_UID} of this uid served already): {said}",
                        self.path.display()
                    ));
                    continue;
                }
                let release = move || {
                    if let Some(n) = live.lock().expect("per-uid counts").get_mut(&uid) {
                        *n = n.saturating_sub(1);
                    }
                };
                let w = who.clone();
                let spawned = std::thread::Builder::new().name("xsk-handoff".into()).spawn_scoped(scope, move || {
                    let t = serve_conn(conn.as_fd(), map, iface, stop);
                    drop(conn);
                    release();
                    let said: Vec<String> =
                        t.iter().map(|(q, a)| format!("{q:?} -> {}", a.as_deref().unwrap_or("(nothing)"))).collect();
                    let said = if said.is_empty() { "(no request)".to_string() } else { said.join(", ") };
                    log(format!("xsk-handoff {}: {w}: {said}", self.path.display()));
                });
                if let Err(e) = spawned {
                    // The connection went with the closure (closed, unanswered).
                    release();
                    log(format!(
                        "xsk-handoff {}: {who}: closed unanswered, no thread to serve it ({e})",
                        self.path.display()
                    ));
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            Ok(())
        })
    }
}

/// The log lines of [`Server::serve`]: at most [`LOG_BURST`] per [`LOG_WINDOW`].
#[derive(Debug)]
struct LogLimit {
    start: std::time::Instant,
    logged: usize,
    /// Lines not logged, not yet said.
    dropped: usize,
}

impl LogLimit {
    fn new(now: std::time::Instant) -> Self {
        Self { start: now, logged: 0, dropped: 0 }
    }

    /// Whether a line may be logged at `now`: `None` if not (counted), else how many were
    /// not logged before it (to say first).
    fn admit(&mut self, now: std::time::Instant) -> Option<usize> {
        if now.saturating_duration_since(self.start) >= LOG_WINDOW {
            self.start = now;
            self.logged = 0;
        }
        if self.logged >= LOG_BURST {
            self.dropped += 1;
            return None;
        }
        self.logged += 1;
        Some(std::mem::take(&mut self.dropped))
    }
}

/// Answers `/error` on a connection not served (a refused uid, too many connections) at once,
/// without reading from it; the caller closes it. The log text.
fn refuse(conn: BorrowedFd<'_>) -> String {
    // A fresh connection's receive queue is empty: the send does not wait; bounded anyway.
    let sent = unix::set_timeouts(conn, Duration::from_millis(100)).is_ok()
        && unix::send_msg(conn, RESP_ERROR.as_bytes(), None).is_ok();
    format!("(not read) -> {}", if sent { RESP_ERROR } else { "(nothing)" })
}

impl Drop for Server {
    /// Removes the socket file if it is still the one bound (same device and inode).
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::symlink_metadata(&self.at) {
            if (m.dev(), m.ino()) == self.ident {
                let _ = std::fs::remove_file(&self.at);
            }
        }
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

/// Serves one connection (the server side of the protocol, to a peer that passed the allow
/// list) until `/fin`, an out-of-order request, the peer closing, [`MAX_REQUESTS`] requests,
/// [`CONN_DEADLINE`] since the start, or `stop` (checked every 100 ms). Returns the
/// transcript (at most [`MAX_REQUESTS`] exchanges).
pub fn serve_conn(conn: BorrowedFd<'_>, map: BorrowedFd<'_>, iface: &str, stop: &AtomicBool) -> Vec<Exchange> {
    serve_conn_within(conn, map, iface, stop, CONN_DEADLINE)
}

/// [`serve_conn`] with its deadline `within` from now.
fn serve_conn_within(
    conn: BorrowedFd<'_>,
    map: BorrowedFd<'_>,
    iface: &str,
    stop: &AtomicBool,
    within: Duration,
) -> Vec<Exchange> {
    let deadline = std::time::Instant::now() + within;
    let left = || deadline.saturating_duration_since(std::time::Instant::now());
    let mut t = Vec::new();
    let mut connected = false;
    let mut buf = [0u8; MAX_MSG];
    while t.len() < MAX_REQUESTS {
        loop {
            let l = left();
            if stop.load(Ordering::Relaxed) || l.is_zero() {
                return t;
            }
            // Any event (a message, the peer's close, an error) means the receive below
            // returns at once; 0 is the 100 ms slice (or EINTR) passing.
            match crate::sys::poll_one(conn.as_raw_fd(), libc::POLLIN, l.as_millis().clamp(1, 100) as i32) {
                Ok(0) => {}
                Ok(_) => break,
                Err(_) => return t,
            }
        }
        // Readable (a message or the peer's close): the receive does not wait; every call
        // is bounded by what is left of the deadline anyway.
        if unix::set_timeouts(conn, left().max(Duration::from_millis(1))).is_err() {
            return t;
        }
        let req = match unix::recv_msg(conn, &mut buf) {
            Ok((0, _)) => return t,
            Ok((n, _)) => text(&buf[..n]), // a descriptor sent to us is closed (dropped)
            // Cut at MAX_MSG bytes: taken only as the first /connect (see CUT_CONNECT).
            Err(e) if e.errno == libc::EMSGSIZE => match text(&buf) {
                r if !connected && arg_of(&r, REQ_CONNECT).is_some() => format!("{r}{CUT_CONNECT}"),
                _ => "(a request over 64 bytes)".to_string(),
            },
            Err(_) => return t,
        };
        let (answer, fd, end): (&str, Option<BorrowedFd<'_>>, bool) = if !connected {
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
    t
}

/// Receives one message; if the first receive reports `ECONNRESET`, receives once more.
///
/// A peer that closes with our request unread in its queue (the server's refusal: `/error`
/// sent at accept, the request never read) sets `ECONNRESET` on this socket
/// (`unix_release_sock()`, net/unix/af_unix.c), and the next receive reports that error
/// before it looks at the queue (`sock_error()` in `__skb_try_recv_datagram()`,
/// net/core/datagram.c). That read clears the error, so a second receive returns the answer
/// that was already queued, or 0 (end of file) if there is none.
fn recv_queued(conn: BorrowedFd<'_>, buf: &mut [u8]) -> Result<(usize, Option<OwnedFd>), crate::sys::SysError> {
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
fn host_field(raw: &str) -> String {
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
/// `SO_PEERCRED`; [`TRUSTED_SERVER_UIDS`], root, for the CLI: anyone who could bind `path`
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
        let server = std::thread::spawn(move || serve_conn(s.as_fd(), map.as_fd(), "veth0", &AtomicBool::new(false)));
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

    /// Sends `msgs` one by one, each answer read before the next, until the server closes,
    /// then closes: what the client got (the answer, whether a descriptor came with it) and the
    /// server's transcript.
    fn session(msgs: &[String]) -> (Vec<(String, bool)>, Vec<Exchange>) {
        let (s, c) = unix::seqpacket_pair().unwrap();
        let map = some_fd();
        let server = std::thread::spawn(move || serve_conn(s.as_fd(), map.as_fd(), "veth0", &AtomicBool::new(false)));
        let mut got = Vec::new();
        let mut buf = [0u8; 128];
        for m in msgs {
            if unix::send_msg(c.as_fd(), m.as_bytes(), None).is_err() {
                break;
            }
            match recv_queued(c.as_fd(), &mut buf) {
                Ok((n, fd)) if n > 0 => got.push((text(&buf[..n]), fd.is_some())),
                _ => break,
            }
        }
        drop(c);
        (got, server.join().unwrap())
    }

    #[test]
    fn the_plugin_clients_whole_pod_host_name_is_cut_not_refused() {
        // The AF_XDP device plugin's pod-side client (pkg/goclient) as it speaks: "/connect, "
        // and the host name uncut (a pod's has up to 63 bytes: 73 in all), "/version",
        // "/xsk_map_fd, <device>", then it closes without /fin.
        let host = "p".repeat(63);
        let msgs = [format!("/connect, {host}"), "/version".into(), "/xsk_map_fd, veth0".into()];
        let (got, t) = session(&msgs);
        let want = [("/host_ok", false), ("0.1", false), ("/fd_ack", true)];
        assert_eq!(got, want.map(|(a, fd)| (a.to_string(), fd)), "{t:?}");
        let cut = format!("/connect, {}{CUT_CONNECT}", &host[..MAX_MSG - "/connect, ".len()]);
        assert_eq!(t[0].0, cut, "the log says the name was cut");
        assert_eq!(t.len(), 3, "the session ends when the client closes: {t:?}");
        assert!(CUT_CONNECT.contains(&MAX_MSG.to_string()));
        // Only the first /connect is taken cut: any other request over MAX_MSG is not read.
        let long = "v".repeat(60);
        let (got, t) = session(&[format!("/xsk_map_fd, {long}")]);
        assert_eq!((got[0].0.as_str(), t[0].0.as_str()), ("/error", "(a request over 64 bytes)"));
        let (got, _) = session(&[msgs[0].clone(), format!("/xsk_map_fd, {long}"), msgs[0].clone()]);
        let got: Vec<&str> = got.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(got, ["/host_ok", "/nak", "/nak"], "after /connect, a long request is a bad one");
    }

    #[test]
    fn the_longest_host_name_fits_a_request() {
        // HOST_NAME_MAX is 64: "/connect," and 64 bytes would be 73, over what a server reads
        // (MAX_MSG; the plugin's own server reads 64 bytes too): fastpath's client cuts it.
        let long = "h".repeat(64);
        let h = host_field(&format!("{long}\n"));
        assert_eq!(h.len(), MAX_MSG - "/connect,".len());
        let t = client_says(&[&format!("/connect,{h}"), "/fin"]);
        assert_eq!(answers(&t), ["/host_ok", "/fin_ack"]);
        assert_eq!(host_field(&"é".repeat(40)).len(), 54, "cut at a character boundary");
        assert_eq!(host_field(" \n"), "fastpath");
        assert_eq!(host_field("a,b"), "fastpath");
    }

    #[test]
    fn a_refusal_queued_before_a_close_is_read_not_lost() {
        // The race CI met: the server answers /error at accept without reading; the client's
        // /connect is already in the server's queue when the server closes.
        let race = || {
            let (s, c) = unix::seqpacket_pair().unwrap();
            assert_eq!(refuse(s.as_fd()), "(not read) -> /error");
            unix::send_msg(c.as_fd(), b"/connect,pod", None).unwrap();
            drop(s);
            c
        };
        let mut buf = [0u8; 128];
        // What the kernel does: the first receive reports ECONNRESET, the answer is still queued.
        let c = race();
        assert_eq!(unix::recv_msg(c.as_fd(), &mut buf).unwrap_err().errno, libc::ECONNRESET);
        // The client's receive reads it.
        let c = race();
        let (n, fd) = recv_queued(c.as_fd(), &mut buf).unwrap();
        assert_eq!((text(&buf[..n]).as_str(), fd.is_none()), ("/error", true));
        // Closed with nothing queued: still ECONNRESET (the client's Closed), not a hang and
        // not a made-up answer.
        let (s, c) = unix::seqpacket_pair().unwrap();
        unix::send_msg(c.as_fd(), b"/connect,pod", None).unwrap();
        drop(s);
        assert_eq!(recv_queued(c.as_fd(), &mut buf).unwrap_err().errno, libc::ECONNRESET);
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

    /// Whether the server closes the connection after answering `msgs`, the client still
    /// open (within 2 s).
    fn server_closes_after(msgs: &[&str]) -> bool {
        let (s, c) = unix::seqpacket_pair().unwrap();
        let map = some_fd();
        let server = std::thread::spawn(move || {
            let stop = AtomicBool::new(false);
            serve_conn_within(s.as_fd(), map.as_fd(), "veth0", &stop, Duration::from_secs(3))
        });
        unix::set_timeouts(c.as_fd(), Duration::from_secs(2)).unwrap();
        let mut buf = [0u8; 128];
        for m in msgs {
            unix::send_msg(c.as_fd(), m.as_bytes(), None).unwrap();
            unix::recv_msg(c.as_fd(), &mut buf).unwrap();
        }
        let closed = matches!(unix::recv_msg(c.as_fd(), &mut buf), Ok((0, _)));
        drop(c);
        server.join().unwrap();
        closed
    }

    #[test]
    fn out_of_order_gets_error_and_the_end() {
        for first in ["/version", "/xsk_map_fd,veth0", "/fin", "garbage"] {
            let t = client_says(&[first]);
            assert_eq!(answers(&t), ["/error"], "{first} before /connect");
            assert!(server_closes_after(&[first]), "{first} before /connect: the end");
        }
        let t = client_says(&["/connect,a", "/connect,b"]);
        assert_eq!(answers(&t), ["/host_ok", "/error"]);
        assert!(server_closes_after(&["/connect,a", "/connect,b"]));
        let t = client_says(&["/connect,"]);
        assert_eq!(answers(&t), ["/host_nak"]);
        assert!(server_closes_after(&["/connect,"]));
        assert!(server_closes_after(&["/connect,a", "/fin"]));
        // Not the end: the server waits for the next request.
        assert!(!server_closes_after(&["/connect,a", "/version", "/xsk_map_fd,eth9", "hello"]));
    }

    #[test]
    fn a_peer_not_allowed_gets_error_and_nothing_else() {
        let (s, c) = unix::seqpacket_pair().unwrap();
        let map = some_fd();
        let _ = map;
        // Answered and closed before the client says anything: the client still reads the
        // refusal, not a closed connection.
        assert_eq!(refuse(s.as_fd()), "(not read) -> /error");
        drop(s);
        let e = handshake(c.as_fd(), Path::new("/test"), "pod", "veth0").unwrap_err();
        assert!(matches!(&e, HandoffError::Refused { answer, .. } if answer == "/error"), "{e}");
    }

    #[test]
    fn client_and_server_agree() {
        let (s, c) = unix::seqpacket_pair().unwrap();
        let map = some_fd();
        let server = std::thread::spawn(move || serve_conn(s.as_fd(), map.as_fd(), "veth0", &AtomicBool::new(false)));
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
        let dir = private_dir("serve");
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
            let _silent = unix::seqpacket_connect(&path, TIMEOUT).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            let t0 = std::time::Instant::now();
            let c = unix::seqpacket_connect(&path, TIMEOUT).unwrap();
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
        let dir = private_dir("bind");
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
        assert!(matches!(request_xsk_map(&dir.join("none"), "veth0", &[0]), Err(HandoffError::NoServer { .. })));
        drop(s);
        assert!(!sock.exists(), "the server removes its socket");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A private directory (mode 0700) for a socket, removed afterwards.
    fn private_dir(tag: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("fastpath-handoff-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    #[test]
    fn bind_refuses_a_directory_others_can_write_and_sets_the_mode_itself() {
        use std::os::unix::fs::PermissionsExt;
        let dir = private_dir("perm");
        let open = dir.join("open");
        std::fs::create_dir(&open).unwrap();
        for mode in [0o777, 0o1777, 0o775, 0o757] {
            std::fs::set_permissions(&open, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = Server::bind(&open.join("sock")).unwrap_err();
            assert!(
                matches!(&e, HandoffError::Path { why, .. } if why.contains("writable by group or others")),
                "{mode:o}: {e}"
            );
            assert!(!open.join("sock").exists());
        }
        // Through a symlinked directory: the real one is checked.
        std::os::unix::fs::symlink(&open, dir.join("via")).unwrap();
        assert!(matches!(Server::bind(&dir.join("via").join("sock")), Err(HandoffError::Path { .. })));
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        let s = Server::bind(&open.join("sock")).unwrap();
        let m = std::fs::symlink_metadata(open.join("sock")).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o666);
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn drop_removes_only_the_socket_it_created() {
        let dir = private_dir("drop");
        let sock = dir.join("sock");
        let s = Server::bind(&sock).unwrap();
        // Replaced while the socket's inode still exists: the new file cannot reuse it.
        std::fs::write(dir.join("other"), b"someone else's").unwrap();
        std::fs::rename(dir.join("other"), &sock).unwrap();
        drop(s);
        assert_eq!(std::fs::read(&sock).unwrap(), b"someone else's");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_connection_ends_at_the_request_cap_the_deadline_or_stop() {
        // The cap: an allowed peer asking forever gets MAX_REQUESTS answers, then the end.
        let (s, c) = unix::seqpacket_pair().unwrap();
        let map = some_fd();
        let server = std::thread::spawn(move || serve_conn(s.as_fd(), map.as_fd(), "veth0", &AtomicBool::new(false)));
        unix::set_timeouts(c.as_fd(), Duration::from_secs(2)).unwrap();
        let mut buf = [0u8; 128];
        unix::send_msg(c.as_fd(), b"/connect,pod", None).unwrap();
        unix::recv_msg(c.as_fd(), &mut buf).unwrap();
        for _ in 1..MAX_REQUESTS {
            unix::send_msg(c.as_fd(), b"/version", None).unwrap();
            unix::recv_msg(c.as_fd(), &mut buf).unwrap();
        }
        assert_eq!(server.join().unwrap().len(), MAX_REQUESTS);
        let _ = unix::send_msg(c.as_fd(), b"/version", None);
        assert!(matches!(unix::recv_msg(c.as_fd(), &mut buf), Ok((0, _))), "closed after the cap");
        // The deadline: a peer that goes silent after /connect is closed when it passes.
        let (s, c) = unix::seqpacket_pair().unwrap();
        let map = some_fd();
        let t0 = std::time::Instant::now();
        let server = std::thread::spawn(move || {
            serve_conn_within(s.as_fd(), map.as_fd(), "veth0", &AtomicBool::new(false), Duration::from_millis(400))
        });
        unix::set_timeouts(c.as_fd(), Duration::from_secs(3)).unwrap();
        unix::send_msg(c.as_fd(), b"/connect,pod", None).unwrap();
        unix::recv_msg(c.as_fd(), &mut buf).unwrap();
        assert!(matches!(unix::recv_msg(c.as_fd(), &mut buf), Ok((0, _))), "closed at the deadline");
        let waited = t0.elapsed();
        assert!(waited >= Duration::from_millis(350) && waited < Duration::from_secs(2), "{waited:?}");
        assert_eq!(server.join().unwrap().len(), 1);
        // Stop: a silent peer does not keep the server (nor `filter load`) from exiting.
        let (s, _c) = unix::seqpacket_pair().unwrap();
        let stop = AtomicBool::new(false);
        let map = some_fd();
        std::thread::scope(|sc| {
            let h = sc.spawn(|| serve_conn(s.as_fd(), map.as_fd(), "veth0", &stop));
            std::thread::sleep(Duration::from_millis(150));
            let t0 = std::time::Instant::now();
            stop.store(true, Ordering::Relaxed);
            assert!(h.join().unwrap().is_empty());
            assert!(t0.elapsed() < Duration::from_millis(500));
        });
    }

    /// `sendmsg` of `/connect,pod` with a descriptor attached; the errno if refused.
    fn send_with_fd(c: BorrowedFd<'_>) -> Option<i32> {
        let f = some_fd();
        unix::send_msg(c, b"/connect,pod", Some(f.as_fd())).err().map(|e| e.errno)
    }

    #[test]
    fn peers_cannot_send_descriptors() {
        // A descriptor sent to the server is closed by it (a refused peer's too, still queued
        // when its connection is closed), and the last close of a TCP socket with unsent data
        // and SO_LINGER lasts as long as the sender chose: refused by the kernel, at the
        // sender's sendmsg, from connect on (before accept: what a refused peer would use) and
        // on a connection being served.
        let dir = private_dir("passfd");
        let path = dir.join("sock");
        let server = Server::bind(&path).unwrap();
        if !server.refuses_passed_fds() {
            eprintln!("skipped: this kernel has no SO_PASSRIGHTS");
            return;
        }
        let early = unix::seqpacket_connect(&path, TIMEOUT).unwrap();
        assert_eq!(send_with_fd(early.as_fd()), Some(libc::EPERM), "before accept");
        drop(early);
        let stop = AtomicBool::new(false);
        let me = crate::sys::geteuid();
        let map = some_fd();
        let lines = std::sync::Mutex::new(Vec::new());
        let served = std::thread::scope(|s| {
            let h = s.spawn(|| server.serve(map.as_fd(), "veth0", &[me], &stop, &|l| lines.lock().unwrap().push(l)));
            let c = unix::seqpacket_connect(&path, TIMEOUT).unwrap();
            let mut buf = [0u8; 64];
            let first =
                unix::send_msg(c.as_fd(), b"/connect,pod", None).and_then(|_| unix::recv_msg(c.as_fd(), &mut buf));
            let served = first.map(|(n, _)| text(&buf[..n])).ok();
            let r = send_with_fd(c.as_fd());
            stop.store(true, Ordering::Relaxed);
            h.join().unwrap().unwrap();
            (served, r)
        });
        assert_eq!(served, (Some(RESP_HOST_OK.to_string()), Some(libc::EPERM)), "while served");
        let lines = lines.into_inner().unwrap();
        assert!(!lines.iter().any(|l| l.contains("SO_PASSRIGHTS")), "{lines:?}");
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_log_is_limited_and_says_what_it_left_out() {
        let t0 = std::time::Instant::now();
        let mut l = LogLimit::new(t0);
        for _ in 0..LOG_BURST {
            assert_eq!(l.admit(t0), Some(0));
        }
        for _ in 0..7 {
            assert_eq!(l.admit(t0 + LOG_WINDOW / 2), None);
        }
        assert_eq!(l.dropped, 7);
        // The next window: the first line comes with the count, once.
        assert_eq!(l.admit(t0 + LOG_WINDOW), Some(7));
        assert_eq!(l.admit(t0 + LOG_WINDOW), Some(0));
    }

    #[test]
    fn a_connection_flood_does_not_flood_the_log() {
        let dir = private_dir("flood");
        let path = dir.join("sock");
        let server = Server::bind(&path).unwrap();
        let stop = AtomicBool::new(false);
        let other = crate::sys::geteuid().wrapping_add(1);
        let lines = std::sync::Mutex::new(Vec::new());
        let map = some_fd();
        std::thread::scope(|s| {
            let h = s.spawn(|| server.serve(map.as_fd(), "veth0", &[other], &stop, &|l| lines.lock().unwrap().push(l)));
            let mut buf = [0u8; 16];
            let answered = (0..3 * LOG_BURST)
                .filter(|_| {
                    let c = unix::seqpacket_connect(&path, TIMEOUT).unwrap();
                    matches!(unix::recv_msg(c.as_fd(), &mut buf), Ok((6, _))) && &buf[..6] == b"/error"
                })
                .count();
            stop.store(true, Ordering::Relaxed);
            h.join().unwrap().unwrap();
            assert_eq!(answered, 3 * LOG_BURST, "every one refused");
        });
        let lines = lines.into_inner().unwrap();
        assert_eq!(lines.len(), LOG_BURST + 1, "{lines:?}");
        let n = 2 * LOG_BURST;
        assert!(
            lines[LOG_BURST].ends_with(&format!(": {n} more lines not logged (at most {LOG_BURST} per 10 s)")),
            "{lines:?}"
        );
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn refused_uids_and_untrusted_servers() {
        let dir = private_dir("uids");
        let path = dir.join("sock");
        let server = Server::bind(&path).unwrap();
        let stop = AtomicBool::new(false);
        let me = crate::sys::geteuid();
        let lines = std::sync::Mutex::new(Vec::new());
        let map = some_fd();
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                server.serve(map.as_fd(), "veth0", &[me.wrapping_add(1)], &stop, &|l| lines.lock().unwrap().push(l))
            });
            // Silent peers of a refused uid: each answered /error at once, none held.
            let silent: Vec<_> =
                (0..2 * MAX_CONNECTIONS).map(|_| unix::seqpacket_connect(&path, TIMEOUT).unwrap()).collect();
            let mut buf = [0u8; 16];
            for c in &silent {
                let (n, _) = unix::recv_msg(c.as_fd(), &mut buf).unwrap();
                assert_eq!(&buf[..n], b"/error");
            }
            // A client trusting only another uid as the server refuses this one.
            let e = request_xsk_map(&path, "veth0", &[me.wrapping_add(1)]).unwrap_err();
            assert!(matches!(e, HandoffError::Untrusted { uid, .. } if uid == me), "{e}");
            stop.store(true, Ordering::Relaxed);
            h.join().unwrap().unwrap();
        });
        let lines = lines.into_inner().unwrap();
        // The silent peers first, each answered; then the client that refused the server,
        // which may have closed before its /error went out.
        assert!((2 * MAX_CONNECTIONS..=2 * MAX_CONNECTIONS + 1).contains(&lines.len()), "{lines:?}");
        assert!(lines.iter().all(|l| l.contains("refused")), "{lines:?}");
        assert!(lines[..2 * MAX_CONNECTIONS].iter().all(|l| l.ends_with("(not read) -> /error")), "{lines:?}");
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
