//! `action = "syncookie"`: the cookie in Rust (the arithmetic of
//! bpf/include/fastpath_syncookie.h, for tests and tools that craft or check cookies), the
//! shared configuration (`sc_config`: SipHash key, advertised MSS and window scale), and the tc
//! ingress program (bpf/syncookie_tc.bpf.c) that creates the request sockets, attached as a tcx
//! link. Design: docs/ARCHITECTURE.md, "SYN cookies at the driver".
//!
//! Kernel requirements: the tc program calls the `bpf_sk_assign_tcp_reqsk` kfunc
//! (net/core/filter.c, Linux >= 6.9) and attaches with BPF_TCX_INGRESS (Linux >= 6.6); the
//! kernel takes its request socket only with `net.ipv4.tcp_syncookies` != 0 (cookie_v4_check in
//! net/ipv4/syncookies.c returns early otherwise), checked before attaching.

use std::mem::MaybeUninit;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};

use super::maps::{Array, PerCpuArray};
use super::{skel, BpfError};
use crate::abi::{fp_pkt_stats, fp_sc_config};

/// CLOCK_MONOTONIC ns >> this is the cookie's period (68.7 s); an ACK is accepted in the period
/// its cookie was made and the next (`FP_SC_PERIOD_SHIFT`).
pub const PERIOD_SHIFT: u32 = 36;

/// Client MSS classes over IPv4 kept in the cookie's low 3 bits (`SC_MSS_V4`).
pub const MSS_V4: [u16; 8] = [536, 1220, 1300, 1380, 1400, 1440, 1460, 8960];
/// The same over IPv6 (`SC_MSS_V6`).
pub const MSS_V6: [u16; 8] = [1220, 1280, 1360, 1380, 1400, 1420, 1440, 8940];

/// The MSS index of a client MSS: the largest entry <= `mss`, 0 below the second.
pub fn mss_index(mss: u16, v6: bool) -> u32 {
    let tab = if v6 { &MSS_V6 } else { &MSS_V4 };
    (1..8).rev().find(|&k| mss >= tab[k]).unwrap_or(0) as u32
}

fn sipround(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

/// SipHash-2-4 of the `8 * m.len()` bytes whose little-endian words are `m` (`sc_siphash`).
pub fn siphash24(k0: u64, k1: u64, m: &[u64]) -> u64 {
    let mut v = [0x736f6d6570736575 ^ k0, 0x646f72616e646f6d ^ k1, 0x6c7967656e657261 ^ k0, 0x7465646279746573 ^ k1];
    for &w in m {
        v[3] ^= w;
        sipround(&mut v);
        sipround(&mut v);
        v[0] ^= w;
    }
    let b = ((m.len() as u64) * 8) << 56;
    v[3] ^= b;
    sipround(&mut v);
    sipround(&mut v);
    v[0] ^= b;
    v[2] ^= 0xff;
    for _ in 0..4 {
        sipround(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// A connection as the client opens it: client (source) and server (destination) address and
/// port, and the client's initial sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieTuple {
    /// Client address.
    pub src: IpAddr,
    /// Server address (same family).
    pub dst: IpAddr,
    /// Client port.
    pub sport: u16,
    /// Server port.
    pub dport: u16,
    /// The client's ISN (the SYN's sequence number).
    pub isn: u32,
}

/// The key of the cookie hash, as `sc_config` holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieKey {
    /// SipHash key, first word.
    pub k0: u64,
    /// Second word.
    pub k1: u64,
}

/// The hash of `t` in `period` (`sc_hash`): message words as the BPF program reads them on this
/// host (addresses and ports in network byte order in memory).
pub fn hash(key: CookieKey, t: &CookieTuple, period: u64) -> u32 {
    let ports = u64::from(u16::from_ne_bytes(t.sport.to_be_bytes()))
        | u64::from(u16::from_ne_bytes(t.dport.to_be_bytes())) << 16
        | u64::from(t.isn) << 32;
    let h = match (t.src, t.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let w = u64::from(u32::from_ne_bytes(s.octets())) | u64::from(u32::from_ne_bytes(d.octets())) << 32;
            siphash24(key.k0, key.k1, &[w, ports, period])
        }
        (s, d) => {
            let v6 = |a: IpAddr| match a {
                IpAddr::V6(a) => a.octets(),
                IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            };
            let (s, d) = (v6(s), v6(d));
            let w = |b: &[u8; 16], i: usize| u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
            siphash24(key.k0, key.k1, &[w(&s, 0), w(&s, 1), w(&d, 0), w(&d, 1), ports, period])
        }
    };
    h as u32
}

/// The cookie (the SYN-ACK's sequence number) for `t` with MSS index `mss_idx` in `period`.
pub fn cookie(key: CookieKey, t: &CookieTuple, period: u64, mss_idx: u32) -> u32 {
    (hash(key, t, period) & !7) | (mss_idx & 7)
}

/// The period now: CLOCK_MONOTONIC (what `bpf_ktime_get_ns` reads) >> [`PERIOD_SHIFT`].
pub fn period_now() -> u64 {
    crate::sys::monotonic_ns() >> PERIOD_SHIFT
}

/// The window scale the kernel would choose for a listener of this network namespace
/// (tcp_select_initial_window in net/ipv4/tcp_output.c: ilog2 of the larger of
/// `net.ipv4.tcp_rmem`'s maximum and `net.core.rmem_max`, minus 15, clamped to 0..=14); 7 if
/// neither can be read.
pub fn netns_wscale() -> u8 {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let rmem = read("/proc/sys/net/ipv4/tcp_rmem")
        .and_then(|s| s.split_whitespace().nth(2).and_then(|v| v.parse::<u64>().ok()))
        .unwrap_or(0);
    let core = read("/proc/sys/net/core/rmem_max").and_then(|s| s.trim().parse::<u64>().ok()).unwrap_or(0);
    let space = rmem.max(core);
    if space == 0 {
        return 7;
    }
    (space.ilog2() as i64 - 15).clamp(0, 14) as u8
}

/// `net.ipv4.tcp_syncookies` of the calling thread's network namespace.
///
/// # Errors
///
/// [`BpfError::BadValue`] if it is 0 or cannot be read: the kernel then never takes the request
/// sockets the tc program creates.
pub fn check_sysctl() -> Result<(), BpfError> {
    let v = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_syncookies").map(|s| s.trim().to_string());
    match v.as_deref() {
        Ok("1") | Ok("2") => Ok(()),
        other => Err(BpfError::BadValue {
            what: "net.ipv4.tcp_syncookies",
            value: match other {
                Ok(s) => s.to_string(),
                Err(e) => format!("(unreadable: {e})"),
            },
            accepted: "1 or 2 in this network namespace: action \"syncookie\" needs the kernel's cookie path (cookie_v4_check returns early at 0); sysctl -w net.ipv4.tcp_syncookies=1".into(),
        }),
    }
}

/// The `fp_sc_config.flags` bits for the TCP options this network namespace (the calling
/// thread's) turned off: `net.ipv4.tcp_sack`, `tcp_timestamps`, `tcp_window_scaling` at 0
/// (`FP_SC_F_NO_SACK`, `FP_SC_F_NO_TS`, `FP_SC_F_NO_WS`). The `bpf_sk_assign_tcp_reqsk`
/// kfunc refuses an option whose sysctl is 0, so the SYN-ACK must not offer it. A sysctl that
/// cannot be read counts as on (its kernel default).
pub fn netns_option_flags() -> u8 {
    let off = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}")).map(|s| s.trim() == "0").unwrap_or(false)
    };
    let mut f = 0u8;
    if off("tcp_sack") {
        f |= crate::abi::FP_SC_F_NO_SACK as u8;
    }
    if off("tcp_timestamps") {
        f |= crate::abi::FP_SC_F_NO_TS as u8;
    }
    if off("tcp_window_scaling") {
        f |= crate::abi::FP_SC_F_NO_WS as u8;
    }
    f
}

/// `FP_SC_F_PARTIAL_CSUM` when `ifindex` (in the calling thread's netns) is a veth, else 0:
/// only there does XDP see a local sender's CHECKSUM_PARTIAL SYN (the checksum field holds the
/// pseudo header's sum), which the kernel takes unchecked; from a wire the kernel drops it
/// (tcp_v4_rcv, tcp_checksum_complete), and so does the classifier. A driver that cannot be
/// read counts as not a veth (the stricter check).
fn partial_csum_flag(ifindex: u32) -> u8 {
    let veth = crate::sys::ifreq::if_indextoname(ifindex)
        .and_then(|name| crate::sys::ethtool::driver(&name))
        .is_ok_and(|d| d == "veth");
    if veth {
        crate::abi::FP_SC_F_PARTIAL_CSUM as u8
    } else {
        0
    }
}

/// A fresh `sc_config`: a random key (getrandom), the MSS advertised for an interface MTU of
/// `mtu` bytes (MTU - 40 over IPv4, MTU - 60 over IPv6) and this namespace's window scale.
pub(crate) fn new_config(mtu: u32) -> Result<fp_sc_config, BpfError> {
    let mut k = [0u8; 16];
    crate::sys::random_bytes(&mut k)?;
    let mut c = fp_sc_config {
        k0: u64::from_ne_bytes(k[..8].try_into().unwrap_or([0; 8])),
        k1: u64::from_ne_bytes(k[8..].try_into().unwrap_or([0; 8])),
        wscale: netns_wscale(),
        ..bytemuck::Zeroable::zeroed()
    };
    set_mtu(&mut c, mtu);
    Ok(c)
}

/// The MSS options of `c` for an interface MTU of `mtu` bytes.
pub(crate) fn set_mtu(c: &mut fp_sc_config, mtu: u32) {
    c.mss_v4 = mtu.saturating_sub(40).clamp(536, 65495) as u16;
    c.mss_v6 = mtu.saturating_sub(60).clamp(1220, 65475) as u16;
}

/// Writes the IPv4 subnet broadcast addresses of the calling thread's network namespace
/// ([`crate::netdev::watch::ipv4_broadcasts`], interface `ifindex`'s first) into
/// `c.bcast4`: SYNs to them are not answered (bpf/classifier.bpf.c, sc_bogus), as the kernel
/// does not answer them. At most `FP_SC_MAX_BCAST4` (16); further ones are not checked.
/// Returns whether `c` changed.
///
/// # Errors
///
/// [`BpfError::Sys`] if the RTM_GETADDR dump fails.
pub(crate) fn set_broadcasts(c: &mut fp_sc_config, ifindex: u32) -> Result<bool, BpfError> {
    let all = crate::netdev::watch::ipv4_broadcasts(ifindex).map_err(|e| {
        BpfError::Sys(crate::sys::SysError {
            call: "netlink RTM_GETADDR dump (IPv4 broadcast addresses)".into(),
            errno: e.raw_os_error().unwrap_or(libc::EIO),
        })
    })?;
    let mut b = [0u32; crate::abi::FP_SC_MAX_BCAST4 as usize];
    let n = all.len().min(b.len());
    for (d, a) in b.iter_mut().zip(&all) {
        *d = u32::from_ne_bytes(a.octets());
    }
    let changed = c.bcast4 != b || usize::from(c.n_bcast4) != n;
    c.bcast4 = b;
    c.n_bcast4 = n as u8;
    Ok(changed)
}

/// Loads bpf/syncookie_tc.bpf.c on the classifier's maps (`cls_active`, `cls_stats`,
/// `sc_config`, reused) and attaches it to tc ingress of `ifindex` as a tcx link; returns the
/// link (dropping its last descriptor and pin detaches it). Checks
/// `net.ipv4.tcp_syncookies` first and records the namespace's option sysctls in `sc_config`
/// ([`netns_option_flags`]); a later change of any of them needs a reload. Needs root (CAP_BPF + CAP_NET_ADMIN), Linux >= 6.9.
///
/// # Errors
///
/// [`BpfError::BadValue`] (tcp_syncookies 0), [`BpfError::Load`] (verifier, or a kernel
/// without the kfunc), [`BpfError::Map`], [`BpfError::Sys`] (BPF_LINK_CREATE refused).
/// The classifier's maps the tc program shares (bpf/syncookie_tc.bpf.c reuses their fds).
pub(crate) struct TcMaps<'a> {
    /// `cls_active`: the rule set in force.
    pub cls_active: &'a Array<u32>,
    /// `cls_stats`: the per-set counters the tc program adds to.
    pub cls_stats: &'a PerCpuArray<fp_pkt_stats>,
    /// `sc_config`: the cookie key, MSS and flags, shared with the XDP side.
    pub sc_config: &'a Array<fp_sc_config>,
}

pub(crate) fn attach_tc(maps: TcMaps<'_>, ifindex: u32) -> Result<OwnedFd, BpfError> {
    check_sysctl()?;
    // The option sysctls of this namespace, read where tcp_syncookies is. Callers attach the
    // tc program before the XDP program can answer with this config (a fresh attach), or
    // before the flip to a set with a syncookie rule: no SYN-ACK is made from a stale value,
    // and the classifier's NO_META bit is kept.
    let mut c = maps.sc_config.get(0)?.unwrap_or_else(bytemuck::Zeroable::zeroed);
    c.flags = (c.flags & crate::abi::FP_SC_F_NO_META as u8) | netns_option_flags() | partial_csum_flag(ifindex);
    maps.sc_config.set(0, &c)?;
    let prog = load_tc(maps)?;
    Ok(crate::sys::bpf::link_create_tcx_ingress(prog.as_raw_fd(), ifindex, || {
        format!("bpf_link_create(syncookie_tc, ifindex {ifindex}, BPF_TCX_INGRESS)")
    })?)
}

/// Loads the tc ingress program on `maps` (not attached): its descriptor, for a new tcx link
/// ([`attach_tc`]) or to replace the program of a pinned one (BPF_LINK_UPDATE, on an upgrade).
/// `sc_config` is left as it is.
///
/// # Errors
///
/// [`BpfError::Load`], [`BpfError::Map`], [`BpfError::Sys`] (dup of the program fd).
pub(crate) fn load_tc(maps: TcMaps<'_>) -> Result<OwnedFd, BpfError> {
    let mut storage = MaybeUninit::uninit();
    let load_err = |cause| BpfError::Load { prog: "syncookie_tc", cause };
    let mut open = skel::syncookie_tc::SyncookieTcSkelBuilder::default().open(&mut storage).map_err(load_err)?;
    let reuse = |m: &mut libbpf_rs::OpenMapMut<'_>, fd: std::os::fd::BorrowedFd<'_>, map: &'static str| {
        m.reuse_fd(fd).map_err(|cause| BpfError::Map { map, cause })
    };
    reuse(&mut open.maps.cls_active, maps.cls_active.handle().as_fd(), "cls_active")?;
    reuse(&mut open.maps.cls_stats, maps.cls_stats.handle().as_fd(), "cls_stats")?;
    reuse(&mut open.maps.sc_config, maps.sc_config.handle().as_fd(), "sc_config")?;
    let s = open.load().map_err(load_err)?;
    // The program lives on after the skeleton while this descriptor (or a link) holds it.
    s.progs.syncookie_tc.as_fd().try_clone_to_owned().map_err(|e| {
        BpfError::Sys(crate::sys::SysError {
            call: "dup(syncookie_tc fd)".into(),
            errno: e.raw_os_error().unwrap_or(0),
        })
    })
}

/// How many programs run at tcx ingress of interface `ifindex` (of the calling thread's network
/// namespace): 1 while a classifier with a syncookie rule is attached there and nothing else
/// uses tcx. Linux >= 6.6.
///
/// # Errors
///
/// The failed query ([`crate::sys::SysError`]).
pub fn tcx_ingress_programs(ifindex: u32) -> Result<u32, crate::sys::SysError> {
    crate::sys::bpf::tcx_ingress_count(ifindex)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_matches_the_reference_vectors() {
        // SipHash-2-4 paper, appendix A: key 00..0f, message 00..0e (15 bytes) -> a129ca6149be45e5.
        // Our messages are whole words; check against std's SipHasher (SipHash-2-4) on 16 bytes.
        #[allow(deprecated)]
        let want = {
            use std::hash::Hasher;
            let mut h = std::hash::SipHasher::new_with_keys(0x0706050403020100, 0x0f0e0d0c0b0a0908);
            h.write(&(0u8..16).collect::<Vec<_>>());
            h.finish()
        };
        let m = [u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]), u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15])];
        assert_eq!(siphash24(0x0706050403020100, 0x0f0e0d0c0b0a0908, &m), want);
    }

    #[test]
    fn mss_index_picks_the_largest_class_not_above() {
        assert_eq!(mss_index(1460, false), 6);
        assert_eq!(mss_index(1459, false), 5);
        assert_eq!(mss_index(100, false), 0);
        assert_eq!(mss_index(9000, false), 7);
        assert_eq!(mss_index(1440, true), 6);
        assert_eq!(mss_index(1000, true), 0);
    }

    #[test]
    fn cookie_carries_the_mss_index_and_depends_on_every_field() {
        let key = CookieKey { k0: 1, k1: 2 };
        let t = CookieTuple {
            src: "10.99.0.2".parse().unwrap(),
            dst: "10.99.0.1".parse().unwrap(),
            sport: 40000,
            dport: 80,
            isn: 7,
        };
        let c = cookie(key, &t, 100, 5);
        assert_eq!(c & 7, 5);
        for other in [
            CookieTuple { sport: 40001, ..t },
            CookieTuple { dport: 81, ..t },
            CookieTuple { isn: 8, ..t },
            CookieTuple { src: "10.99.0.3".parse().unwrap(), ..t },
        ] {
            assert_ne!(cookie(key, &other, 100, 5), c, "{other:?}");
        }
        assert_ne!(cookie(key, &t, 101, 5), c);
        assert_ne!(cookie(CookieKey { k0: 1, k1: 3 }, &t, 100, 5), c);
    }
}
