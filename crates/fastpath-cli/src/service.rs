//! The service manager's notification protocol (sd_notify(3)) for `filter load` run by systemd
//! with `Type=notify`: `READY=1` once the classifier is attached, `STATUS=` lines while it runs,
//! `RELOADING=1` around a reload, `STOPPING=1` at the end. Sent by the `sd-notify` crate (a
//! datagram to the unix socket `NOTIFY_SOCKET` names, abstract `@` names included).
//!
//! Every function is a no-op without `NOTIFY_SOCKET` (a command run by hand); a failed send is
//! logged at debug level and otherwise ignored: the service manager's bookkeeping never stops
//! the filter.

use sd_notify::NotifyState;

fn send(states: &[NotifyState]) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    // unset_env false: every later notification goes to the same socket.
    if let Err(e) = sd_notify::notify(false, states) {
        log::debug!("sd_notify to NOTIFY_SOCKET failed: {e}");
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
