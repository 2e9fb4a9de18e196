//! The protocol's tests: each side against the other, and against a peer speaking raw messages.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::client::{host_field, recv_queued};
use super::server::{refuse, serve_conn_within, LogLimit};
use super::*;
use crate::sys::unix;

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
        let h =
            s.spawn(|| server.serve(map.as_fd(), "veth0", &[me], &stop, &|l| lines.lock().unwrap().push(l)).unwrap());
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
        let first = unix::send_msg(c.as_fd(), b"/connect,pod", None).and_then(|_| unix::recv_msg(c.as_fd(), &mut buf));
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
