//! Network device facts: ifindex, queue count, driver name, and the driver's own counters
//! (ETHTOOL_GSTATS), all read in the calling thread's network namespace.
//!
//! Source: include/uapi/linux/ethtool.h (struct ethtool_channels, ethtool_drvinfo,
//! ethtool_sset_info, ethtool_gstrings, ethtool_stats). Needs no privileges.
//! [`watch`]: link, neighbour and address changes as rtnetlink notifications. [`napi`]: NAPI
//! instances, their interrupt-deferral settings and the busy-poll profile.

use crate::sys::{self, SysError};

#[cfg(feature = "netlink")]
pub(crate) mod genl;
#[cfg(feature = "netlink")]
pub mod napi;
#[cfg(feature = "netlink")]
pub mod watch;
#[cfg(feature = "netlink")]
pub mod xdp_features;

/// What became of an interface since it was resolved ([`NetDev::link_event`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEvent {
    /// No interface of that name any more.
    Deleted,
    /// Deleted, and an interface of the same name made again (another ifindex).
    Recreated {
        /// The new interface's index.
        ifindex: u32,
    },
    /// Administratively down (IFF_UP clear).
    Down,
}

impl std::fmt::Display for LinkEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkEvent::Deleted => write!(f, "was deleted"),
            LinkEvent::Recreated { ifindex } => write!(f, "was deleted and recreated (now ifindex {ifindex})"),
            LinkEvent::Down => write!(f, "was set down"),
        }
    }
}

/// Polls an interface for loss: deleted (or recreated) at any time, or set down once it has
/// been seen up (an interface down from the start is the user's choice, not a loss).
#[derive(Debug, Clone)]
pub struct LinkWatch {
    dev: NetDev,
    seen_up: bool,
}

impl LinkWatch {
    /// Starts watching `dev` (resolved earlier; its ifindex is the one that must stay).
    pub fn new(dev: NetDev) -> Self {
        let seen_up = dev.link_event().is_none();
        Self { dev, seen_up }
    }

    /// What happened since the last call, if the interface is lost.
    pub fn poll(&mut self) -> Option<LinkEvent> {
        match self.dev.link_event() {
            None => {
                self.seen_up = true;
                None
            }
            Some(LinkEvent::Down) if !self.seen_up => None,
            Some(LinkEvent::Down) => Some(self.dev.down_or_deleted()),
            e => e,
        }
    }
}

/// IFNAMSIZ: an interface name is at most 15 bytes plus the NUL.
pub const IFNAMSIZ: usize = 16;

/// Checks an interface name the way the kernel does (net/core/dev.c `dev_valid_name`):
/// non-empty, shorter than IFNAMSIZ (at most 15 bytes), not "." or "..", and no '/', ':' or
/// whitespace. Names become parts of paths (pin directories) and ioctl requests, so this runs
/// before either. The error says what is wrong and what is accepted.
///
/// # Errors
///
/// The message above if `name` breaks any of these rules.
pub fn validate_ifname(name: &str) -> Result<(), String> {
    let why = if name.is_empty() {
        "it is empty"
    } else if name.len() >= IFNAMSIZ {
        "it is longer than 15 bytes"
    } else if name == "." || name == ".." {
        "it is \".\" or \"..\""
    } else if name.bytes().any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0) {
        "it contains '/', ':', a NUL or whitespace"
    } else {
        return Ok(());
    };
    Err(format!(
        "interface name {name:?} is not accepted ({why}): use 1 to 15 bytes (at most 15 bytes, IFNAMSIZ-1), not \".\" or \"..\", without '/', ':' or whitespace"
    ))
}

/// An interface's state, read by name in the calling thread's netns ([`link_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkState {
    /// Its ifindex (another one after a delete and re-create).
    pub ifindex: u32,
    /// IFF_UP and IFF_RUNNING (administratively up and carrier on: for a veth, its peer up too).
    pub up: bool,
    /// MTU in bytes.
    pub mtu: u32,
    /// Ethernet address.
    pub mac: [u8; 6],
}

/// Reads an interface's [`LinkState`]; `None` if no interface has that name. Four system calls
/// (if_nametoindex, SIOCGIFFLAGS, SIOCGIFMTU, SIOCGIFHWADDR): cheap enough to poll ten times
/// a second.
pub fn link_state(name: &str) -> Option<LinkState> {
    Iface::resolve(name).ok()?.state()
}

/// [`LinkState`] of `name`, whose ifindex is known.
fn state_of(name: &str, ifindex: u32) -> Option<LinkState> {
    let flags = sys::if_flags(name).ok()?;
    let running = libc::IFF_UP as u32 | libc::IFF_RUNNING as u32;
    Some(LinkState {
        ifindex,
        up: flags & running == running,
        mtu: sys::if_mtu(name).ok()?,
        mac: sys::if_hwaddr(name).ok()?,
    })
}

/// Checks whether a name still resolves to `ifindex`, in the calling thread's netns.
pub fn check_name(name: &str, ifindex: u32) -> Option<LinkEvent> {
    match sys::if_nametoindex(name) {
        Err(_) => Some(LinkEvent::Deleted),
        Ok(i) if i != ifindex => Some(LinkEvent::Recreated { ifindex: i }),
        Ok(_) => None,
    }
}

/// No interface of that name in the calling thread's network namespace (`if_nametoindex`
/// failed: ENODEV, or the name cannot be an interface name). The one place this error is made:
/// [`Iface::resolve`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("interface {iface:?} does not exist in this network namespace (see `ip link`)")]
pub struct NoSuchInterface {
    /// The name asked for.
    pub iface: String,
    /// The errno of `if_nametoindex` (ENODEV when no interface has the name).
    pub errno: i32,
}

/// An interface resolved ONCE, by name, in the network namespace the calling thread is in:
/// its name, its ifindex and that namespace. Everything below the command line (socket bind,
/// port opens, XDP attach) takes `&Iface` and works by its ifindex; nothing resolves the name
/// again (as xdp-tools' `struct iface` filled when arguments are parsed, or aya's attach by
/// ifindex). An ifindex only means something in its namespace: use an `Iface` on a thread in
/// the namespace it was resolved in ([`Iface::netns_ino`]).
///
/// # Examples
///
/// ```
/// use fastpath::netdev::Iface;
///
/// let lo = Iface::resolve("lo")?; // in the calling thread's network namespace
/// assert_eq!(lo.name(), "lo");
/// assert!(lo.ifindex() > 0);
/// let e = Iface::resolve("nosuchif0").unwrap_err();
/// assert_eq!(e.iface, "nosuchif0");
/// # Ok::<(), fastpath::netdev::NoSuchInterface>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    dev: NetDev,
    netns_ino: u32,
}

impl Iface {
    /// Resolves `name` (`if_nametoindex`) in the calling thread's network namespace (a CLI
    /// enters `--netns` with setns before this). Needs no privileges.
    ///
    /// # Errors
    ///
    /// [`NoSuchInterface`]: no interface of that name in this network namespace.
    pub fn resolve(name: &str) -> Result<Self, NoSuchInterface> {
        let ifindex =
            sys::if_nametoindex(name).map_err(|e| NoSuchInterface { iface: name.to_string(), errno: e.errno })?;
        Ok(Self {
            dev: NetDev { name: name.to_string(), ifindex },
            netns_ino: crate::bpf::monitor::current_netns_ino(),
        })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.dev.name
    }

    /// The interface index (in [`Iface::netns_ino`]'s namespace).
    pub fn ifindex(&self) -> u32 {
        self.dev.ifindex
    }

    /// The inode number of the network namespace it was resolved in (`/proc/thread-self/ns/net`;
    /// 0 if that could not be read).
    pub fn netns_ino(&self) -> u32 {
        self.netns_ino
    }

    /// Its [`LinkState`] now (flags, MTU and MAC read by name; the ifindex is the resolved
    /// one); `None` if they cannot be read (the interface went away).
    pub fn state(&self) -> Option<LinkState> {
        state_of(&self.dev.name, self.dev.ifindex)
    }

    /// Its facts (queue counts, driver, MTU, counters), read by name when asked.
    pub fn dev(&self) -> &NetDev {
        &self.dev
    }
}

impl std::fmt::Display for Iface {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.dev.name)
    }
}

/// A network interface, resolved by name in the current network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetDev {
    /// Interface name.
    pub name: String,
    /// Interface index.
    pub ifindex: u32,
}

impl NetDev {
    /// Resolves `name`. Error: the interface does not exist in this network namespace.
    ///
    /// # Errors
    ///
    /// [`SysError`] from `if_nametoindex` (ENODEV: no such interface in this network namespace;
    /// EINVAL for a name with a NUL).
    pub fn by_name(name: &str) -> Result<Self, SysError> {
        Ok(Self { name: name.to_string(), ifindex: sys::if_nametoindex(name)? })
    }

    /// For an interface just seen down: deleting a device closes it first
    /// (`unregister_netdevice_many`: `dev_close_many`, then unlist), so look again 100 ms later
    /// and report a deletion as one.
    pub fn down_or_deleted(&self) -> LinkEvent {
        std::thread::sleep(std::time::Duration::from_millis(100));
        check_name(&self.name, self.ifindex).unwrap_or(LinkEvent::Down)
    }

    /// `None` while the interface is still there (same ifindex) and up; otherwise what
    /// happened to it. Two system calls (if_nametoindex, SIOCGIFFLAGS): cheap enough to poll
    /// several times a second from a monitoring loop.
    pub fn link_event(&self) -> Option<LinkEvent> {
        if let Some(e) = check_name(&self.name, self.ifindex) {
            return Some(e);
        }
        match sys::if_flags(&self.name) {
            Ok(f) if f & libc::IFF_UP as u32 == 0 => Some(LinkEvent::Down),
            Ok(_) => None,
            Err(_) => check_name(&self.name, self.ifindex),
        }
    }

    /// Number of receive queues (rx + combined channels from ETHTOOL_GCHANNELS); queue ids
    /// 0..n can be bound by an AF_XDP socket. `None` when the driver does not report channels
    /// (EOPNOTSUPP): then only the kernel's bind can tell.
    ///
    /// # Errors
    ///
    /// [`SysError`] if ETHTOOL_GCHANNELS fails other than with EOPNOTSUPP (ENODEV once the
    /// interface is gone).
    pub fn rx_queue_count(&self) -> Result<Option<u32>, SysError> {
        Ok(self.channels()?.map(|ch| (ch.rx_count + ch.combined_count).max(1)))
    }

    /// ETHTOOL_GCHANNELS; `None` when the driver does not report channels (EOPNOTSUPP).
    fn channels(&self) -> Result<Option<sys::ethtool::Channels>, SysError> {
        sys::ethtool::channels(&self.name)
    }

    /// Number of transmit queues (tx + combined channels from ETHTOOL_GCHANNELS); `None` when
    /// the driver does not report channels.
    ///
    /// # Errors
    ///
    /// As [`NetDev::rx_queue_count`].
    pub fn tx_queue_count(&self) -> Result<Option<u32>, SysError> {
        Ok(self.channels()?.map(|ch| (ch.tx_count + ch.combined_count).max(1)))
    }

    /// Every interface of the current network namespace, by name (if_nameindex(3): the
    /// namespace the calling thread is in, unlike /sys/class/net, which shows the namespace
    /// sysfs was mounted in).
    ///
    /// # Errors
    ///
    /// [`SysError`] if `if_nameindex` fails (ENOBUFS / ENOMEM; it uses an RTM_GETLINK netlink
    /// dump).
    pub fn all() -> Result<Vec<NetDev>, SysError> {
        let mut out: Vec<NetDev> =
            sys::if_nameindex()?.into_iter().map(|(name, ifindex)| NetDev { name, ifindex }).collect();
        out.sort_by_key(|d| d.ifindex);
        Ok(out)
    }

    /// True if generic receive offload is on (ETHTOOL_GGRO). On a veth, GRO (or an XDP
    /// program) is what gives the device the NAPI that frames redirected into its peer need.
    ///
    /// # Errors
    ///
    /// [`SysError`] if the ETHTOOL_GGRO ioctl fails (ENODEV once the interface is gone,
    /// EOPNOTSUPP).
    pub fn gro_enabled(&self) -> Result<bool, SysError> {
        sys::ethtool::gro(&self.name)
    }

    /// True if rx VLAN offload is on (ETHTOOL_GFLAGS, ETH_FLAG_RXVLAN; `ethtool -k` calls it
    /// rx-vlan-offload): the NIC strips the outer 802.1Q tag into the descriptor before XDP
    /// runs, so an XDP program does not see it in the frame. On a veth the tag is stripped
    /// when the sending peer has tx VLAN offload on (a VLAN device above it), whatever this says.
    ///
    /// # Errors
    ///
    /// [`SysError`] if the ETHTOOL_GFLAGS ioctl fails (ENODEV once the interface is gone,
    /// EOPNOTSUPP).
    pub fn rx_vlan_offload(&self) -> Result<bool, SysError> {
        sys::ethtool::rx_vlan_offload(&self.name)
    }

    /// The interface's Ethernet address.
    ///
    /// # Errors
    ///
    /// [`SysError`] if SIOCGIFHWADDR fails (ENODEV once the interface is gone).
    pub fn mac(&self) -> Result<[u8; 6], SysError> {
        sys::if_hwaddr(&self.name)
    }

    /// The IP MTU in bytes (SIOCGIFMTU), read now.
    ///
    /// # Errors
    ///
    /// [`SysError`] if SIOCGIFMTU fails (ENODEV once the interface is gone).
    pub fn mtu(&self) -> Result<u32, SysError> {
        sys::if_mtu(&self.name)
    }

    /// The driver's name (ETHTOOL_GDRVINFO), e.g. "veth", "ice", "mlx5_core".
    ///
    /// # Errors
    ///
    /// [`SysError`] if ETHTOOL_GDRVINFO fails (ENODEV once the interface is gone, EOPNOTSUPP for a
    /// device without ethtool ops).
    pub fn driver(&self) -> Result<String, SysError> {
        sys::ethtool::driver(&self.name)
    }

    /// The driver's counters (what `ethtool -S` shows), in the driver's order and names:
    /// ETHTOOL_GSSET_INFO, then ETHTOOL_GSTRINGS and ETHTOOL_GSTATS.
    ///
    /// # Errors
    ///
    /// [`SysError`] if one of the three ethtool ioctls fails (EOPNOTSUPP for a driver without
    /// counters, ENODEV once the interface is gone), or EAGAIN if the counter count keeps changing
    /// between them.
    pub fn ethtool_stats(&self) -> Result<Vec<(String, u64)>, SysError> {
        sys::ethtool::stats(&self.name)
    }
}

/// Differences `after - before` of two `ethtool_stats` snapshots, keeping the non-zero ones
/// and dropping gauges that are not counters (`peer_ifindex`).
pub fn stats_delta(before: &[(String, u64)], after: &[(String, u64)]) -> Vec<(String, u64)> {
    after
        .iter()
        .filter(|(k, _)| k != "peer_ifindex")
        .filter_map(|(k, v)| {
            let b = before.iter().find(|(bk, _)| bk == k).map(|(_, bv)| *bv).unwrap_or(0);
            let d = v.wrapping_sub(b);
            (d != 0).then(|| (k.clone(), d))
        })
        .collect()
}

/// The interface's own packet counters, as the kernel's `/proc/net/dev` shows them for the
/// calling thread's network namespace. On a veth, `tx_packets` counts frames the peer accepted
/// and `tx_dropped` frames it refused (a full 256-slot ring: `xdp_xmit_errors` of XDP-redirected
/// frames and skbs `veth_xmit` dropped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkStats {
    /// Packets received.
    pub rx_packets: u64,
    /// Packets dropped on receive.
    pub rx_dropped: u64,
    /// Packets transmitted (on a veth: accepted by the peer).
    pub tx_packets: u64,
    /// Packets dropped on transmit (on a veth: refused by the peer).
    pub tx_dropped: u64,
}

impl LinkStats {
    /// `self - before`, per field (wrapping).
    pub fn delta(&self, before: &LinkStats) -> LinkStats {
        LinkStats {
            rx_packets: self.rx_packets.wrapping_sub(before.rx_packets),
            rx_dropped: self.rx_dropped.wrapping_sub(before.rx_dropped),
            tx_packets: self.tx_packets.wrapping_sub(before.tx_packets),
            tx_dropped: self.tx_dropped.wrapping_sub(before.tx_dropped),
        }
    }

    /// Parses the line of `iface` in the text of `/proc/net/dev`.
    pub fn parse(proc_net_dev: &str, iface: &str) -> Option<LinkStats> {
        proc_net_dev.lines().find_map(|l| {
            let (name, rest) = l.split_once(':')?;
            if name.trim() != iface {
                return None;
            }
            let v: Vec<u64> = rest.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            // rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes packets errs drop ...
            (v.len() >= 12).then(|| LinkStats {
                rx_packets: v[1],
                rx_dropped: v[3],
                tx_packets: v[9],
                tx_dropped: v[11],
            })
        })
    }
}

impl NetDev {
    /// The interface's [`LinkStats`] now (read in the calling thread's network namespace).
    ///
    /// # Errors
    ///
    /// [`SysError`] if `/proc/thread-self/net/dev` cannot be read, or ENODEV if it has no line for
    /// the interface (not in this network namespace).
    pub fn link_stats(&self) -> Result<LinkStats, SysError> {
        let err = |errno| SysError { call: format!("read /proc/thread-self/net/dev ({})", self.name), errno };
        let text = std::fs::read_to_string("/proc/thread-self/net/dev")
            .map_err(|e| err(e.raw_os_error().unwrap_or(libc::EIO)))?;
        LinkStats::parse(&text, &self.name).ok_or_else(|| err(libc::ENODEV))
    }
}

/// Sets interface `iface` administratively up (IFF_UP), in the calling thread's network
/// namespace.
///
/// # Errors
///
/// [`SysError`] naming `SIOCSIFFLAGS` and `iface`: ENODEV if it does not exist, EPERM without
/// CAP_NET_ADMIN.
pub fn set_link_up(iface: &str) -> Result<(), SysError> {
    sys::set_link_up(iface)
}

/// The hardware (MAC) address of interface `iface`, in the calling thread's network namespace.
///
/// # Errors
///
/// [`SysError`] naming `SIOCGIFHWADDR` and `iface`: ENODEV if it does not exist.
pub fn if_hwaddr(iface: &str) -> Result<[u8; 6], SysError> {
    sys::if_hwaddr(iface)
}

/// The ifindex of interface `name` (`if_nametoindex`), in the calling thread's network
/// namespace. Code that works on one interface resolves it once with [`Iface::resolve`]; this
/// is for names met later (a rule's redirect target, a test's peer).
///
/// # Errors
///
/// [`SysError`]: ENODEV if `name` does not exist in this network namespace.
pub fn if_nametoindex(name: &str) -> Result<u32, SysError> {
    sys::if_nametoindex(name)
}
#[cfg(test)]
mod link_stats_tests {
    use super::*;

    #[test]
    fn parses_proc_net_dev() {
        let t = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n fp1a: 6400 100 0 3 0 0 0 0 12800 200 0 7 0 0 0 0\n";
        let s = LinkStats::parse(t, "fp1a").expect("fp1a");
        assert_eq!(s, LinkStats { rx_packets: 100, rx_dropped: 3, tx_packets: 200, tx_dropped: 7 });
        assert!(LinkStats::parse(t, "fp1").is_none());
        let d = s.delta(&LinkStats { rx_packets: 50, rx_dropped: 1, tx_packets: 20, tx_dropped: 7 });
        assert_eq!(d, LinkStats { rx_packets: 50, rx_dropped: 2, tx_packets: 180, tx_dropped: 0 });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_are_checked_like_the_kernel() {
        for ok in ["eth0", "veth-a", "a", "abcdefghijklmno", "fp1b", "v.10", "x..y"] {
            assert_eq!(validate_ifname(ok), Ok(()), "{ok}");
        }
        for bad in ["", ".", "..", "../x", "a/b", "a:b", "a b", "a\tb", "abcdefghijklmnop", "é12345678901234"] {
            let e = validate_ifname(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")) && e.contains("1 to 15 bytes"), "{bad:?}: {e}");
        }
    }
}
