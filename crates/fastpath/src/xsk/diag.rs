//! Every AF_XDP socket of the current network namespace, as `ss --xdp` lists them: through
//! sock_diag (NETLINK_SOCK_DIAG, `SOCK_DIAG_BY_FAMILY` for AF_XDP: include/uapi/linux/xdp_diag.h,
//! net/xdp/xsk_diag.c; needs CONFIG_XDP_SOCKETS_DIAG, kernel >= 5.1) with the owning process
//! found by the socket's inode in /proc/PID/fd. Where the kernel has no xsk_diag (the answer is
//! ENOENT), the sockets are found in /proc instead: a socket fd whose `system.sockprotoname`
//! (getxattr on /proc/PID/fd/N, which leaves the socket untouched) is "XDP" is duplicated with
//! pidfd_getfd (kernel >= 5.6, PTRACE_MODE_ATTACH: root), kept if the duplicate is the inode
//! /proc named and SO_DOMAIN is AF_XDP, and asked for XDP_STATISTICS and XDP_OPTIONS; no other
//! process's other sockets are ever duplicated (that would re-stamp their net_cls/net_prio
//! cgroup data, net/core/sock.c `__receive_sock`); interface, queue, ring and UMEM shapes are then unknown
//! (nothing but sock_diag reports them) and the listing says so.
//!
//! Privileges: none for sock_diag (sockets of other users are listed too); the owner of a
//! socket is found only in /proc entries this process may read (root: all).

use std::collections::HashMap;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsFd, AsRawFd};

use netlink_packet_core::NlasIterator;
use serde::Serialize;

use super::XskStats;
use crate::sys::netlink::{SockDiag, NLMSG_HDRLEN};
use crate::sys::uapi::{
    XdpDiagInfo, XdpDiagMsg, XdpDiagReq, XdpDiagRing, XdpDiagStats, XdpDiagUmem, SOCK_DIAG_BY_FAMILY, XDP_DIAG_INFO,
    XDP_DIAG_MEMINFO, XDP_DIAG_RX_RING, XDP_DIAG_STATS, XDP_DIAG_TX_RING, XDP_DIAG_UID, XDP_DIAG_UMEM,
    XDP_DIAG_UMEM_COMPLETION_RING, XDP_DIAG_UMEM_FILL_RING, XDP_DU_F_ZEROCOPY, XDP_SHOW_INFO, XDP_SHOW_MEMINFO,
    XDP_SHOW_RING_CFG, XDP_SHOW_STATS, XDP_SHOW_UMEM,
};
use crate::sys::{pidfd, SysError};

// Netlink message types (include/uapi/linux/netlink.h, from libc), as nlmsg_type's u16.
const NLMSG_ERROR: u16 = libc::NLMSG_ERROR as u16;
const NLMSG_DONE: u16 = libc::NLMSG_DONE as u16;
const XDP_SHOW_ALL: u32 = XDP_SHOW_INFO | XDP_SHOW_RING_CFG | XDP_SHOW_UMEM | XDP_SHOW_MEMINFO | XDP_SHOW_STATS;
const DIAG_MSG_LEN: usize = size_of::<XdpDiagMsg>();

/// The UMEM of a socket (struct xdp_diag_umem).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UmemDiag {
    /// Bytes.
    pub size_bytes: u64,
    /// The kernel's UMEM id (sockets sharing a UMEM show the same id).
    pub id: u32,
    /// Pages pinned.
    pub num_pages: u32,
    /// Frame (chunk) size in bytes.
    pub chunk_size: u32,
    /// Headroom in bytes.
    pub headroom: u32,
    /// Interface and queue the UMEM is bound to.
    pub ifindex: u32,
    /// Queue id.
    pub queue_id: u32,
    /// Zero-copy (XDP_DU_F_ZEROCOPY).
    pub zero_copy: bool,
    /// Sockets using it.
    pub refs: u32,
}

/// One AF_XDP socket.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct XskSocketInfo {
    /// The socket's inode (as `ss` and /proc/PID/fd show it).
    pub inode: u64,
    /// A process holding it, its command name and the fd number there.
    pub pid: Option<u32>,
    /// Command name (/proc/PID/comm).
    pub comm: Option<String>,
    /// The fd in that process.
    pub fd: Option<i32>,
    /// Owner uid (sock_diag only).
    pub uid: Option<u32>,
    /// Bound interface and queue (sock_diag only).
    pub ifindex: Option<u32>,
    /// Queue id.
    pub queue_id: Option<u32>,
    /// RX / TX / FILL / COMPLETION ring sizes in descriptors (sock_diag only; None: no ring).
    pub rx_ring: Option<u32>,
    /// TX ring size.
    pub tx_ring: Option<u32>,
    /// FILL ring size (a socket sharing another's has none).
    pub fill_ring: Option<u32>,
    /// COMPLETION ring size.
    pub comp_ring: Option<u32>,
    /// Its UMEM (sock_diag only).
    pub umem: Option<UmemDiag>,
    /// Zero-copy data path (sock_diag: the UMEM's flag; /proc: XDP_OPTIONS).
    pub zero_copy: Option<bool>,
    /// Socket memory (SK_MEMINFO_* u32 values, sock_diag only).
    pub meminfo: Option<Vec<u32>>,
    /// The XDP_STATISTICS counters.
    pub stats: Option<XskStats>,
}

/// How the sockets were found.
#[derive(Debug, Clone, Serialize)]
pub struct XskListing {
    /// "sock_diag" or "proc" (the fallback).
    pub source: &'static str,
    /// Why the fallback was used, and what it cannot show.
    pub note: Option<String>,
    /// The sockets, by inode.
    pub sockets: Vec<XskSocketInfo>,
}

/// Errors of a listing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiagError {
    /// The netlink socket or a system call failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A system call failed.
    #[error(transparent)]
    Sys(#[from] SysError),
    /// The kernel's answer does not parse.
    #[error("sock_diag answer: {0}")]
    Malformed(String),
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off + 4).map(|x| u32::from_ne_bytes([x[0], x[1], x[2], x[3]]))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    b.get(off..off + 8).map(|x| {
        let mut a = [0u8; 8];
        a.copy_from_slice(x);
        u64::from_ne_bytes(a)
    })
}

/// Parses the payload of one `xdp_diag_msg` answer (the message and its attributes). Short or
/// malformed attributes are refused, never read past.
///
/// # Errors
///
/// [`DiagError::Malformed`] for a message shorter than `struct xdp_diag_msg`, an attribute that
/// does not parse, or one shorter than its type (include/uapi/linux/xdp_diag.h).
pub fn parse_diag_msg(b: &[u8]) -> Result<XskSocketInfo, DiagError> {
    if b.len() < DIAG_MSG_LEN {
        return Err(DiagError::Malformed(format!("xdp_diag_msg of {} bytes ({DIAG_MSG_LEN} expected)", b.len())));
    }
    let ino = u32_at(b, offset_of!(XdpDiagMsg, xdiag_ino)).unwrap_or(0) as u64;
    let mut s = XskSocketInfo { inode: ino, ..Default::default() };
    for nla in NlasIterator::new(&b[DIAG_MSG_LEN..]) {
        let nla = nla.map_err(|e| DiagError::Malformed(e.to_string()))?;
        let v = nla.value();
        let short = |need: usize| {
            if v.len() < need {
                Err(DiagError::Malformed(format!("attribute {} of {} bytes ({need} expected)", nla.kind(), v.len())))
            } else {
                Ok(())
            }
        };
        match nla.kind() {
            XDP_DIAG_INFO => {
                short(size_of::<XdpDiagInfo>())?;
                s.ifindex = u32_at(v, offset_of!(XdpDiagInfo, ifindex));
                s.queue_id = u32_at(v, offset_of!(XdpDiagInfo, queue_id));
            }
            XDP_DIAG_UID => {
                short(4)?;
                s.uid = u32_at(v, 0);
            }
            XDP_DIAG_RX_RING | XDP_DIAG_TX_RING | XDP_DIAG_UMEM_FILL_RING | XDP_DIAG_UMEM_COMPLETION_RING => {
                short(size_of::<XdpDiagRing>())?;
                let e = u32_at(v, offset_of!(XdpDiagRing, entries));
                match nla.kind() {
                    XDP_DIAG_RX_RING => s.rx_ring = e,
                    XDP_DIAG_TX_RING => s.tx_ring = e,
                    XDP_DIAG_UMEM_FILL_RING => s.fill_ring = e,
                    _ => s.comp_ring = e,
                }
            }
            XDP_DIAG_UMEM => {
                short(size_of::<XdpDiagUmem>())?;
                let f = |off: usize| u32_at(v, off).unwrap_or(0);
                let flags = f(offset_of!(XdpDiagUmem, flags));
                s.umem = Some(UmemDiag {
                    size_bytes: u64_at(v, offset_of!(XdpDiagUmem, size)).unwrap_or(0),
                    id: f(offset_of!(XdpDiagUmem, id)),
                    num_pages: f(offset_of!(XdpDiagUmem, num_pages)),
                    chunk_size: f(offset_of!(XdpDiagUmem, chunk_size)),
                    headroom: f(offset_of!(XdpDiagUmem, headroom)),
                    ifindex: f(offset_of!(XdpDiagUmem, ifindex)),
                    queue_id: f(offset_of!(XdpDiagUmem, queue_id)),
                    zero_copy: flags & XDP_DU_F_ZEROCOPY != 0,
                    refs: f(offset_of!(XdpDiagUmem, refs)),
                });
                s.zero_copy = Some(flags & XDP_DU_F_ZEROCOPY != 0);
            }
            XDP_DIAG_MEMINFO => s.meminfo = Some(v.chunks_exact(4).map(|c| u32_at(c, 0).unwrap_or(0)).collect()),
            XDP_DIAG_STATS => {
                short(size_of::<XdpDiagStats>())?;
                let r = |off: usize| u64_at(v, off).unwrap_or(0);
                s.stats = Some(XskStats {
                    rx_dropped: r(offset_of!(XdpDiagStats, n_rx_dropped)),
                    rx_invalid_descs: r(offset_of!(XdpDiagStats, n_rx_invalid)),
                    rx_ring_full: r(offset_of!(XdpDiagStats, n_rx_full)),
                    rx_fill_ring_empty_descs: r(offset_of!(XdpDiagStats, n_fill_ring_empty)),
                    tx_invalid_descs: r(offset_of!(XdpDiagStats, n_tx_invalid)),
                    tx_ring_empty_descs: r(offset_of!(XdpDiagStats, n_tx_ring_empty)),
                });
            }
            _ => {}
        }
    }
    Ok(s)
}

/// Parses a buffer of netlink messages answering the dump: the sockets, and whether NLMSG_DONE
/// was seen. A netlink error answer is returned as its errno.
fn parse_dump(buf: &[u8], out: &mut Vec<XskSocketInfo>) -> Result<bool, DiagError> {
    let mut off = 0;
    while off + NLMSG_HDRLEN <= buf.len() {
        let len = u32_at(buf, off + offset_of!(libc::nlmsghdr, nlmsg_len)).unwrap_or(0) as usize;
        let t = off + offset_of!(libc::nlmsghdr, nlmsg_type);
        let kind = u16::from_ne_bytes([buf[t], buf[t + 1]]);
        if len < NLMSG_HDRLEN || off + len > buf.len() {
            return Err(DiagError::Malformed(format!("netlink message of length {len} at {off}")));
        }
        let payload = &buf[off + NLMSG_HDRLEN..off + len];
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let errno = u32_at(payload, offset_of!(libc::nlmsgerr, error)).map(|e| -(e as i32)).unwrap_or(0);
                return Err(std::io::Error::from_raw_os_error(errno).into());
            }
            SOCK_DIAG_BY_FAMILY => out.push(parse_diag_msg(payload)?),
            _ => {}
        }
        off += libc::NLMSG_ALIGN(len) as usize;
    }
    Ok(false)
}

/// `struct xdp_diag_req` asking for every AF_XDP socket and everything about it, as bytes.
fn diag_request() -> [u8; size_of::<XdpDiagReq>()] {
    let mut req = [0u8; size_of::<XdpDiagReq>()];
    req[offset_of!(XdpDiagReq, sdiag_family)] = libc::AF_XDP as u8;
    let show = offset_of!(XdpDiagReq, xdiag_show);
    req[show..show + 4].copy_from_slice(&XDP_SHOW_ALL.to_ne_bytes());
    req
}

fn sock_diag() -> Result<Vec<XskSocketInfo>, DiagError> {
    // A failed call keeps the bare errno text the listing has always shown (DiagError::Io).
    let io = |e: SysError| DiagError::Io(std::io::Error::from_raw_os_error(e.errno));
    let sock = SockDiag::open().map_err(io)?;
    sock.send_dump(&diag_request()).map_err(io)?;
    let mut out = Vec::new();
    let mut rx = Vec::with_capacity(65536);
    loop {
        let n = sock.recv(&mut rx).map_err(io)?;
        if n == 0 || parse_dump(&rx[..n], &mut out)? {
            return Ok(out);
        }
    }
}

/// socket inode -> (pid, comm, fd) from /proc/*/fd (the first holder found).
fn owners() -> HashMap<u64, (u32, String, i32)> {
    let mut m = HashMap::new();
    let Ok(procs) = std::fs::read_dir("/proc") else { return m };
    for p in procs.flatten() {
        let Ok(pid) = p.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { continue };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string();
        for f in fds.flatten() {
            let Ok(fd) = f.file_name().to_string_lossy().parse::<i32>() else { continue };
            let Ok(link) = std::fs::read_link(f.path()) else { continue };
            let link = link.to_string_lossy();
            if let Some(ino) = link.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']')) {
                if let Ok(ino) = ino.parse::<u64>() {
                    m.entry(ino).or_insert((pid, comm.clone(), fd));
                }
            }
        }
    }
    m
}

/// The /proc fallback (see the module docs). A process's fds are not per namespace, so the
/// sockets kept are those whose holder is in this thread's network namespace (the same
/// /proc/PID/ns/net inode), as sock_diag would list them.
fn from_proc() -> Vec<XskSocketInfo> {
    let mine = std::fs::metadata("/proc/thread-self/ns/net").ok().map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    let mut out: Vec<XskSocketInfo> = Vec::new();
    for (ino, (pid, comm, fd)) in owners() {
        let theirs =
            std::fs::metadata(format!("/proc/{pid}/ns/net")).ok().map(|m| std::os::unix::fs::MetadataExt::ino(&m));
        if mine.is_some() && theirs != mine {
            continue;
        }
        // Only what /proc says is an AF_XDP socket is duplicated: pidfd_getfd on any other
        // socket would re-stamp its net_cls classid and net_prio index with our cgroup
        // (net/core/sock.c, __receive_sock). The name is sk_prot_creator's (net/xdp/xsk.c:
        // xsk_proto.name = "XDP").
        if pidfd::sockprotoname(&format!("/proc/{pid}/fd/{fd}")).as_deref() != Some("XDP") {
            continue;
        }
        let Ok(dup) = pidfd::dup_from(pid, fd) else { continue };
        // The fd may have been closed and its number reused since /proc was read.
        if pidfd::inode_of(&dup).ok() != Some(ino) {
            continue;
        }
        let dom: Result<(i32, usize), _> =
            crate::sys::getsockopt(&dup.as_raw_fd(), libc::SOL_SOCKET, libc::SO_DOMAIN, "SOL_SOCKET, SO_DOMAIN");
        if !matches!(dom, Ok((d, _)) if d == libc::AF_XDP) {
            continue;
        }
        let opts: Option<(libc::xdp_options, usize)> =
            crate::sys::getsockopt(&dup.as_raw_fd(), libc::SOL_XDP, libc::XDP_OPTIONS, "SOL_XDP, XDP_OPTIONS").ok();
        out.push(XskSocketInfo {
            inode: ino,
            pid: Some(pid),
            comm: Some(comm),
            fd: Some(fd),
            zero_copy: opts.map(|(o, _)| o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0),
            stats: XskStats::read(dup.as_fd()).ok(),
            ..Default::default()
        });
    }
    out.sort_by_key(|s| s.inode);
    out
}

/// Every AF_XDP socket of the current network namespace (see the module docs).
///
/// # Errors
///
/// [`DiagError::Io`] if the NETLINK_SOCK_DIAG socket, the dump request or a receive fails, or the
/// kernel answers the dump with an error other than ENOENT (no AF_XDP sock_diag: the /proc listing
/// is returned instead); [`DiagError::Malformed`] for an answer that does not parse.
pub fn list() -> Result<XskListing, DiagError> {
    match sock_diag() {
        Ok(mut sockets) => {
            let own = owners();
            for s in &mut sockets {
                if let Some((pid, comm, fd)) = own.get(&s.inode) {
                    (s.pid, s.comm, s.fd) = (Some(*pid), Some(comm.clone()), Some(*fd));
                }
            }
            sockets.sort_by_key(|s| s.inode);
            Ok(XskListing { source: "sock_diag", note: None, sockets })
        }
        Err(DiagError::Io(e)) if e.raw_os_error() == Some(libc::ENOENT) => Ok(XskListing {
            source: "proc",
            note: Some(
                "this kernel has no AF_XDP sock_diag (CONFIG_XDP_SOCKETS_DIAG, so `ss --xdp` lists nothing either): sockets found through /proc and pidfd_getfd; interface, queue, rings and UMEM unknown"
                    .into(),
            ),
            sockets: from_proc(),
        }),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nla(kind: u16, v: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(v);
        while b.len() % 4 != 0 {
            b.push(0);
        }
        b
    }

    fn msg(ino: u32, attrs: &[Vec<u8>]) -> Vec<u8> {
        let mut m = vec![libc::AF_XDP as u8, 3, 0, 0];
        m.extend_from_slice(&ino.to_ne_bytes());
        m.extend_from_slice(&[0u8; 8]);
        for a in attrs {
            m.extend_from_slice(a);
        }
        m
    }

    #[test]
    fn a_full_answer_parses() {
        let info: Vec<u8> = [7u32, 3].iter().flat_map(|x| x.to_ne_bytes()).collect();
        let mut umem = Vec::new();
        umem.extend_from_slice(&(1u64 << 25).to_ne_bytes());
        for x in [9u32, 8192, 4096, 0, 7, 3, 1, 2] {
            umem.extend_from_slice(&x.to_ne_bytes());
        }
        let stats: Vec<u8> = (1u64..=6).flat_map(|x| x.to_ne_bytes()).collect();
        let m = msg(
            4242,
            &[
                nla(XDP_DIAG_INFO, &info),
                nla(XDP_DIAG_RX_RING, &2048u32.to_ne_bytes()),
                nla(XDP_DIAG_UMEM_FILL_RING, &4096u32.to_ne_bytes()),
                nla(XDP_DIAG_UMEM, &umem),
                nla(XDP_DIAG_STATS, &stats),
                nla(77, &[1, 2, 3]),
            ],
        );
        let s = parse_diag_msg(&m).unwrap();
        assert_eq!(
            (s.inode, s.ifindex, s.queue_id, s.rx_ring, s.tx_ring, s.fill_ring),
            (4242, Some(7), Some(3), Some(2048), None, Some(4096))
        );
        let u = s.umem.unwrap();
        assert_eq!((u.size_bytes, u.id, u.chunk_size, u.zero_copy, u.refs), (1 << 25, 9, 4096, true, 2));
        let st = s.stats.unwrap();
        assert_eq!((st.rx_dropped, st.rx_ring_full, st.tx_ring_empty_descs), (1, 3, 6));
    }

    /// Crafted answers: truncated messages and attributes are refused, not read past.
    #[test]
    fn crafted_answers_are_refused_not_read_past() {
        assert!(parse_diag_msg(&[0u8; 15]).is_err());
        assert!(parse_diag_msg(&msg(1, &[nla(XDP_DIAG_INFO, &[1, 2, 3])])).is_err(), "INFO of 3 bytes");
        assert!(parse_diag_msg(&msg(1, &[nla(XDP_DIAG_UMEM, &[0u8; 39])])).is_err(), "UMEM of 39 bytes");
        assert!(parse_diag_msg(&msg(1, &[nla(XDP_DIAG_STATS, &[0u8; 47])])).is_err(), "STATS of 47 bytes");
        let mut bad_len = msg(1, &[nla(XDP_DIAG_RX_RING, &5u32.to_ne_bytes())]);
        bad_len[16] = 200; // an attribute claiming 200 bytes
        assert!(parse_diag_msg(&bad_len).is_err());
        // A netlink message whose length runs past the buffer.
        let mut nl = vec![0u8; 16];
        nl[0..4].copy_from_slice(&64u32.to_ne_bytes());
        nl[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        assert!(parse_dump(&nl, &mut Vec::new()).is_err());
        let mut zero = vec![0u8; 16];
        zero[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        assert!(parse_dump(&zero, &mut Vec::new()).is_err(), "length 0 would loop forever");
    }
}
