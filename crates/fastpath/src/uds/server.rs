//! The server side of the UDS protocol ([`super`]): [`Server`] binds the socket at a path
//! checked to be safe, and serves the XSKMAP to allowed peers, one thread per connection.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{
    text, Exchange, HandoffError, CONN_DEADLINE, CUT_CONNECT, LOG_BURST, LOG_WINDOW, MAX_CONNECTIONS, MAX_MSG,
    MAX_PER_UID, MAX_REQUESTS, REQ_CONNECT, REQ_FIN, REQ_VERSION, REQ_XSK_MAP_FD, RESP_ERROR, RESP_FD_ACK, RESP_FD_NAK,
    RESP_FIN_ACK, RESP_HOST_NAK, RESP_HOST_OK, RESP_NAK, VERSION,
};
use crate::sys::{unix, SysError};

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
pub(super) struct LogLimit {
    start: std::time::Instant,
    logged: usize,
    /// Lines not logged, not yet said.
    pub(super) dropped: usize,
}

impl LogLimit {
    pub(super) fn new(now: std::time::Instant) -> Self {
        Self { start: now, logged: 0, dropped: 0 }
    }

    /// Whether a line may be logged at `now`: `None` if not (counted), else how many were
    /// not logged before it (to say first).
    pub(super) fn admit(&mut self, now: std::time::Instant) -> Option<usize> {
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
pub(super) fn refuse(conn: BorrowedFd<'_>) -> String {
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
pub(super) fn serve_conn_within(
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
