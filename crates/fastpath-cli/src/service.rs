//! The service manager's notification protocol (sd_notify(3)) for `filter load` run by systemd
//! with `Type=notify`: `READY=1` once the classifier is attached, `STATUS=` lines while it runs,
//! `RELOADING=1` around a reload, `STOPPING=1` at the end. The lines are made by the `sd-notify`
//! crate's [`NotifyState`]; the datagram is sent here, to the unix socket `NOTIFY_SOCKET` names:
//! a path, or an abstract name when it starts with `@` (the crate, 0.4.5, connects every name
//! as a path).
//!
//! Every function is a no-op without `NOTIFY_SOCKET` (a command run by hand); a failed send is
//! a warning line (the first; later ones at debug level) and otherwise ignored: the service manager's bookkeeping never stops the
//! filter.

use std::os::unix::net::{SocketAddr, UnixDatagram};

use sd_notify::NotifyState;

/// The address `NOTIFY_SOCKET` names: `@name` is the abstract socket `name` (Linux), anything
/// else a path.
fn notify_addr(v: &std::ffi::OsStr) -> std::io::Result<SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::ffi::OsStrExt;
    match v.as_bytes().strip_prefix(b"@") {
        Some(name) => SocketAddr::from_abstract_name(name),
        None => SocketAddr::from_pathname(v),
    }
}

/// One datagram of `states` (a `KEY=value` line each) to `NOTIFY_SOCKET`.
fn send_to(sock: &std::ffi::OsStr, states: &[NotifyState]) -> std::io::Result<()> {
    let msg: String = states.iter().map(|s| format!("{s}\n")).collect();
    let addr = notify_addr(sock)?;
    let d = UnixDatagram::unbound()?;
    d.send_to_addr(msg.as_bytes(), &addr)?;
    Ok(())
}

fn send(states: &[NotifyState]) {
    // Kept in the environment: every later notification goes to the same socket.
    let Some(sock) = std::env::var_os("NOTIFY_SOCKET") else { return };
    if let Err(e) = send_to(&sock, states) {
        // A warning once (STATUS= goes every 5 s), then at debug level.
        static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        let at = sock.to_string_lossy();
        if WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            log::debug!("cannot notify the service manager at NOTIFY_SOCKET={at}: {e}");
        } else {
            log::warn!("cannot notify the service manager at NOTIFY_SOCKET={at}: {e} (said once; the filter runs on)");
        }
    }
}

/// `READY=1` with `STATUS=status`: set-up is done (the classifier attached and counting).
pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// `STATUS=text`: one line the service manager shows (`systemctl status`).
pub fn status(text: &str) {
    send(&[NotifyState::Status(text)]);
}

/// `RELOADING=1` with `MONOTONIC_USEC=` (CLOCK_MONOTONIC now, in µs), as systemd >= 253 wants
/// for a reload it can match to its `ExecReload`/`Type=notify-reload`; send [`ready`] when the
/// reload is done (whether it took or not).
#[allow(dead_code)] // called at the SIGHUP reload of `filter load`
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(_) => send(&[NotifyState::Reloading]),
    }
}

/// `STOPPING=1`: the service is ending (the classifier about to be detached or left pinned).
pub fn stopping() {
    send(&[NotifyState::Stopping]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `NOTIFY_SOCKET=@name` (what systemd may pass): the datagrams reach the abstract socket
    /// `name`, one `KEY=value` line per state: READY=1 with STATUS=, then STOPPING=1.
    #[test]
    fn an_abstract_notify_socket_receives_ready_and_stopping() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("fastpath-notify-test-{}", std::process::id());
        let listener = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(&name).unwrap()).unwrap();
        listener.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        let at = std::ffi::OsString::from(format!("@{name}"));
        send_to(&at, &[NotifyState::Ready, NotifyState::Status("eth0 (native), 1 rules")]).unwrap();
        send_to(&at, &[NotifyState::Stopping]).unwrap();
        let mut b = [0u8; 512];
        let n = listener.recv(&mut b).expect("READY=1 at the abstract socket");
        assert_eq!(&b[..n], b"READY=1\nSTATUS=eth0 (native), 1 rules\n");
        let n = listener.recv(&mut b).expect("STOPPING=1 at the abstract socket");
        assert_eq!(&b[..n], b"STOPPING=1\n");
    }
}
