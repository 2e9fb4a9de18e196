//! The only place in fastpath that makes raw system calls (and the only caller of libbpf-sys).
//!
//! Crate-private, split by role: [`xsk`] (AF_XDP socket, bind, socket options, kicks, poll),
//! [`mmap`] (mappings), [`ifreq`] (interface ioctls, ethtool, `if_nametoindex`), [`bpf`]
//! (libbpf-sys calls, bpffs), [`affinity`] (CPU pinning), [`process`] (clock, euid, capabilities, memlock, page size, lock file), [`udp`]
//! (`recvmmsg`), [`epoll`] (epoll busy polling), [`packet`] (AF_PACKET), [`pidfd`] (another process's fds), [`netlink`] (the
//! sock_diag socket), [`unix`] (the Unix sockets of the XSKMAP hand-off), [`tun`] (TUN/TAP), [`probe`] (what only the feature probes need) and
//! [`uapi`] (the kernel UAPI constants and structs the `libc` crate lacks, each defined once;
//! everything else comes from `libc`). Programs and tests reach what they need through
//! the public module that owns each concern: [`crate::workers`] (pinning, online CPUs),
//! [`crate::netdev`] (link up, MAC, ifindex), [`crate::bpf`] (bpffs,
//! memlock, the reload lock), [`crate::clock`] (the monotonic and TAI clocks), [`crate::features`]
//! (euid), [`crate::xsk`] (page size), [`crate::io::udp`] (batched UDP receive).
//!
//! Every wrapper returns [`SysError`], which repeats the call and its arguments,
//! so an error printed at the top of the program says exactly what the kernel refused.
//!
//! A build without some of the optional cargo features leaves the wrappers only their modules
//! call unused; the dead-code lint holds for the default build (every feature).
#![cfg_attr(
    not(all(
        feature = "classifier",
        feature = "netlink",
        feature = "tap",
        feature = "capture",
        feature = "cpumap",
        feature = "replay",
        feature = "fwd"
    )),
    allow(dead_code)
)]

pub(crate) mod affinity;
pub(crate) mod bpf;
pub(crate) mod epoll;
pub(crate) mod ethtool;
pub(crate) mod ifreq;
pub(crate) mod mmap;
#[cfg(feature = "netlink")]
pub(crate) mod netlink;
pub(crate) mod packet;
pub(crate) mod pidfd;
pub(crate) mod probe;
pub(crate) mod process;
#[cfg(feature = "tap")]
pub(crate) mod tun;
pub(crate) mod uapi;
pub(crate) mod udp;
pub(crate) mod unix;
pub(crate) mod xsk;

pub(crate) use affinity::{online_cpus, pin_current_thread};
pub(crate) use bpf::ensure_bpffs;
pub(crate) use ifreq::{if_flags, if_hwaddr, if_mtu, if_nameindex, if_nametoindex, set_link_up};
pub(crate) use mmap::Mmap;
#[cfg(feature = "classifier")]
pub(crate) use process::random_bytes;
pub(crate) use process::{geteuid, has_capability, lock_file, monotonic_ns, page_size, raise_memlock_limit, tai_ns};
pub(crate) use xsk::{
    bind_xdp, getsockopt, kick_rx, kick_tx, poll_one, poll_readable, poll_two_readable, setsockopt, setsockopt_int,
    socket_xdp, Pod,
};

/// A failed system call: the call with its arguments, and the errno.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{call} failed: {}", errno_text(*.errno))]
pub struct SysError {
    /// The call as written in C, with its arguments, e.g. `setsockopt(SOL_XDP, XDP_UMEM_REG, len=8388608)`.
    pub call: String,
    /// The errno value.
    pub errno: i32,
}

impl SysError {
    pub(crate) fn last(call: impl Into<String>) -> Self {
        Self { call: call.into(), errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0) }
    }
}

/// `EINVAL (Invalid argument)` style text for an errno.
pub fn errno_text(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ENOPROTOOPT => "ENOPROTOOPT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::ENXIO => "ENXIO",
        libc::ENOBUFS => "ENOBUFS",
        libc::ENETDOWN => "ENETDOWN",
        libc::EACCES => "EACCES",
        libc::E2BIG => "E2BIG",
        libc::EFAULT => "EFAULT",
        libc::ERANGE => "ERANGE",
        libc::ENOLINK => "ENOLINK",
        libc::ELOOP => "ELOOP",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::ECONNRESET => "ECONNRESET",
        libc::EPIPE => "EPIPE",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::EADDRINUSE => "EADDRINUSE",
        _ => "",
    };
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    let text = text.split(" (os error").next().unwrap_or("").to_string();
    if name.is_empty() {
        text
    } else {
        format!("{name} ({text})")
    }
}
