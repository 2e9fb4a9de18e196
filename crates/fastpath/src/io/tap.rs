//! The TAP backend of the port API: a TAP interface created through `/dev/net/tun`, packets
//! moved with one `readv` / `writev` system call each.
//!
//! ```text
//!   kernel stack of the namespace          user space (this port)
//!   route / neighbour -> fptap0 --read-->  rx_burst: readv([virtio_net_hdr,] buffer) per packet
//!   IP input  <-------- fptap0 <-write--  tx_burst: writev([virtio_net_hdr,] frame) per packet
//! ```
//!
//! What the kernel sends *out of* the tap (its egress) is what this port receives, and what
//! this port writes arrives at the kernel as if it came *in* from the wire. So a tap is the
//! way to put a user-space program "on the wire" of a namespace's stack without a NIC: no
//! XDP, no AF_PACKET, one system call per packet (see [`super::tap_uring`] for batching).
//!
//! Privileges: creating the interface needs CAP_NET_ADMIN (in the user namespace owning the
//! network namespace) and read-write access to `/dev/net/tun`. The interface is created in
//! the network namespace of the calling thread, is not persistent, and disappears when the
//! port (its last file descriptor) is dropped.
//!
//! Kernel: TAP with `IFF_NO_PI` and `IFF_VNET_HDR` works on every kernel fastpath supports
//! (>= 2.6.35 for `TUNSETVNETHDRSZ`), `IFF_MULTI_QUEUE` needs >= 3.8.
//!
//! Sources: Documentation/networking/tuntap.rst, include/uapi/linux/if_tun.h,
//! include/uapi/linux/virtio_net.h, drivers/net/tun.c.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, OwnedFd};

use super::{Port, PortError, PortStats};
use crate::sys::tun::{self, VNET_HDR_LEN};

pub use crate::sys::tun::{VirtioNetHdr, VIRTIO_NET_HDR_F_DATA_VALID, VIRTIO_NET_HDR_F_NEEDS_CSUM};

/// Largest frame a tap can hand us: its largest MTU (65521 bytes, `ip -d link` maxmtu) plus an
/// Ethernet header and a VLAN tag, rounded up; also covers 64 KiB GSO super-frames.
pub const MAX_TAP_FRAME: usize = 65_600;

/// How a tap is opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TapOptions {
    /// `IFF_MULTI_QUEUE`: several ports may open the same name, each becoming one queue of the
    /// interface (the kernel spreads its egress over them by flow hash). Every queue must be
    /// opened with the same options. Kernel >= 3.8.
    pub multi_queue: bool,
    /// `IFF_VNET_HDR`: every frame is preceded by a 10-byte `struct virtio_net_hdr`
    /// ([`VirtioNetHdr`]). The port strips it on receive and writes a zero one (no offload asked)
    /// on transmit; [`TapPort::tx_with_csum_offload`] and [`TapPort::rx_burst_hdr`] use it.
    pub vnet_hdr: bool,
    /// `TUNSETOFFLOAD` with `TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6`: this reader accepts frames
    /// whose L4 checksum is only partial (header flag `NEEDS_CSUM`) and TCP super-frames up to
    /// 64 KiB, so the kernel skips that work when it sends out of the tap. Needs `vnet_hdr`
    /// (without the header a reader cannot tell which frames carry a partial checksum: the
    /// kernel would hand over wrong checksums silently); [`TapPort::open`] refuses it alone.
    pub offload: bool,
}

impl TapOptions {
    /// These options with [`TapOptions::multi_queue`] set to `on`.
    #[must_use]
    pub fn with_multi_queue(self, on: bool) -> Self {
        Self { multi_queue: on, ..self }
    }

    /// These options with [`TapOptions::vnet_hdr`] set to `on`.
    #[must_use]
    pub fn with_vnet_hdr(self, on: bool) -> Self {
        Self { vnet_hdr: on, ..self }
    }

    /// These options with [`TapOptions::offload`] set to `on` (it needs `vnet_hdr`).
    #[must_use]
    pub fn with_offload(self, on: bool) -> Self {
        Self { offload: on, ..self }
    }
}

/// The part of opening a tap that both [`TapPort`] and [`super::tap_uring::TapUringPort`]
/// share: validate, `open("/dev/net/tun")` non-blocking, `TUNSETIFF`, `TUNSETVNETHDRSZ`,
/// `TUNSETOFFLOAD`. Returns the fd and the interface's actual name.
pub(crate) fn open_tap_fd(name: &str, opts: TapOptions) -> Result<(OwnedFd, String), PortError> {
    check_name(name)?;
    if opts.offload && !opts.vnet_hdr {
        return Err(PortError::Config {
            what: "tap option",
            value: "offload without vnet_hdr".into(),
            accepted:
                "offload only together with vnet_hdr (the virtio_net_hdr says which frames carry a partial checksum)"
                    .into(),
        });
    }
    let fd = tun::open_tun(true)?;
    let mut flags = libc::IFF_TAP | libc::IFF_NO_PI;
    if opts.multi_queue {
        flags |= libc::IFF_MULTI_QUEUE;
    }
    if opts.vnet_hdr {
        flags |= libc::IFF_VNET_HDR;
    }
    let ifname = tun::set_iff(&fd, name, flags)?;
    if opts.vnet_hdr {
        tun::set_vnet_hdr_size(&fd, VNET_HDR_LEN as i32)?;
    }
    if opts.offload {
        tun::set_offload(&fd, libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6)?;
    }
    Ok((fd, ifname))
}

/// Checks an interface name the way the kernel will (`dev_valid_name`): at most 15 bytes, no
/// '/', ':', NUL or whitespace, not "." or "..". Empty, or containing `%d`, lets the kernel
/// pick (e.g. `tap%d` -> `tap0`).
///
/// # Errors
///
/// [`PortError::Config`] naming the value and what is accepted.
pub fn check_name(name: &str) -> Result<(), PortError> {
    let bad_char = name.bytes().any(|b| b == b'/' || b == b':' || b == 0 || b.is_ascii_whitespace());
    if name.len() > tun::IFNAME_MAX || bad_char || name == "." || name == ".." {
        return Err(PortError::Config {
            what: "tap interface name",
            value: format!("{name:?} ({} bytes)", name.len()),
            accepted: format!(
                "at most {} bytes (IFNAMSIZ - 1), without '/', ':', NUL or whitespace; empty or with %d lets the kernel choose",
                tun::IFNAME_MAX
            ),
        });
    }
    Ok(())
}

/// A TAP interface driven with `readv` / `writev`, one system call per packet.
///
/// Receive: the fd is non-blocking; [`Port::rx_burst`] reads until the tap's queue is empty or
/// `max` packets were handed to the callback, `poll`ing first for up to `timeout_ms` when
/// nothing waits. Every packet is read into one preallocated buffer of [`MAX_TAP_FRAME`] bytes
/// (the callback runs before the next read, so one buffer is the whole pool; nothing is
/// allocated per packet). Transmit: one `writev` per frame, with no copy (the iovec points at
/// the caller's frame, the virtio header in front when `vnet_hdr`).
///
/// Loss: when the reader is slower than the kernel's egress, the tap's queue (the interface's
/// `txqueuelen`, 1000 packets by default) overflows and the kernel counts the drops in the interface's
/// `tx_dropped` (`ip -s link`, /sys/class/net/NAME/statistics/tx_dropped). Frames written into
/// the kernel are processed synchronously inside `writev`; what the stack drops later shows in
/// its own counters (e.g. /proc/net/snmp `Udp: RcvbufErrors`).
#[derive(Debug)]
pub struct TapPort {
    fd: OwnedFd,
    ifname: String,
    opts: TapOptions,
    buf: Box<[u8]>,
    stats: PortStats,
}

impl TapPort {
    /// Creates the TAP interface `name` (or attaches one more queue to it with `multi_queue`)
    /// in the calling thread's network namespace: `open("/dev/net/tun", O_RDWR|O_NONBLOCK)`,
    /// `ioctl(TUNSETIFF, IFF_TAP|IFF_NO_PI[|IFF_MULTI_QUEUE][|IFF_VNET_HDR])`, then
    /// `TUNSETVNETHDRSZ` (10 bytes) and `TUNSETOFFLOAD` as `opts` ask. The interface starts
    /// down, without addresses: configure it with `ip` (or netlink) before traffic flows.
    ///
    /// # Errors
    ///
    /// [`PortError::Config`] naming the value for a name longer than 15 bytes (or with
    /// '/', ':', whitespace) and for `offload` without `vnet_hdr`; [`PortError::Sys`] repeating
    /// the call, e.g. `open("/dev/net/tun", ...) [/dev/net/tun missing: load the tun module ...]
    /// failed: ENOENT`, `ioctl(TUNSETIFF, name="x", IFF_TAP|IFF_NO_PI) failed: EPERM` without
    /// CAP_NET_ADMIN, or EBUSY / EINVAL when `name` exists with other flags.
    pub fn open(name: &str, opts: TapOptions) -> Result<TapPort, PortError> {
        let (fd, ifname) = open_tap_fd(name, opts)?;
        Ok(TapPort { fd, ifname, opts, buf: vec![0u8; MAX_TAP_FRAME].into_boxed_slice(), stats: PortStats::default() })
    }

    /// The interface's name as the kernel created it.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The options the port was opened with.
    pub fn options(&self) -> TapOptions {
        self.opts
    }

    /// The interface's MAC address (`SIOCGIFHWADDR` through the tap fd; random at creation,
    /// locally administered).
    ///
    /// # Errors
    ///
    /// [`PortError::Sys`] if `ioctl(SIOCGIFHWADDR)` fails.
    pub fn mac(&self) -> Result<[u8; 6], PortError> {
        Ok(tun::hwaddr(&self.fd)?)
    }

    /// Like [`Port::rx_burst`], also handing over each packet's virtio header (all zero when
    /// the port has no `vnet_hdr`). With `offload`, a header with `flags & NEEDS_CSUM` means the
    /// frame's L4 checksum field holds only the pseudo-header sum: the checksum over
    /// `csum_start..` still has to be computed; `gso_type != 0` marks a super-frame of segments
    /// of `gso_size` payload bytes.
    ///
    /// # Errors
    ///
    /// [`PortError::Sys`] if `readv` or `poll` fails with anything but EAGAIN / EINTR (e.g. EBADFD
    /// once the tap was detached).
    pub fn rx_burst_hdr<F: FnMut(&VirtioNetHdr, &[u8])>(
        &mut self,
        max: usize,
        timeout_ms: i32,
        mut f: F,
    ) -> Result<usize, PortError> {
        let fd = self.fd.as_raw_fd();
        let vnet = self.opts.vnet_hdr;
        let mut count = 0;
        let mut waited = false;
        while count < max {
            let mut hdr = [0u8; VNET_HDR_LEN];
            let got = if vnet {
                tun::readv(fd, &mut [IoSliceMut::new(&mut hdr), IoSliceMut::new(&mut self.buf)])?
            } else {
                tun::readv(fd, &mut [IoSliceMut::new(&mut self.buf)])?
            };
            let Some(n) = got else {
                if count == 0 && timeout_ms > 0 && !waited {
                    waited = true;
                    if tun::poll_in(fd, timeout_ms)? {
                        continue;
                    }
                }
                break;
            };
            let n = if vnet { n.saturating_sub(VNET_HDR_LEN) } else { n };
            let len = n.min(self.buf.len());
            let h = VirtioNetHdr::from_bytes(&hdr).unwrap_or_default();
            f(&h, &self.buf[..len]);
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += len as u64;
            count += 1;
        }
        Ok(count)
    }

    /// Writes one frame with header `hdr` (the port must have `vnet_hdr`). Returns false when
    /// the kernel could not take it now (EAGAIN / ENOBUFS): try again.
    ///
    /// # Errors
    ///
    /// [`PortError::Config`] if the port has no `vnet_hdr` or the frame is not 14 to
    /// [`MAX_TAP_FRAME`] bytes; [`PortError::Sys`] if `writev` fails with anything but EAGAIN /
    /// ENOBUFS / EINTR: EIO while the interface is down, EINVAL for a header the kernel refuses
    /// (drivers/net/tun.c).
    pub fn tx_with_hdr(&mut self, hdr: &VirtioNetHdr, frame: &[u8]) -> Result<bool, PortError> {
        if !self.opts.vnet_hdr {
            return Err(PortError::Config {
                what: "virtio_net_hdr on a tap opened with vnet_hdr",
                value: "false".into(),
                accepted: "open the port with TapOptions { vnet_hdr: true, .. }".into(),
            });
        }
        check_frame(frame)?;
        let h = hdr.to_bytes();
        let ok = tun::writev(self.fd.as_raw_fd(), &[IoSlice::new(&h), IoSlice::new(frame)])?.is_some();
        if ok {
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += frame.len() as u64;
        }
        Ok(ok)
    }

    /// Writes one frame whose L4 checksum the KERNEL completes: a virtio header with
    /// `flags = VIRTIO_NET_HDR_F_NEEDS_CSUM`, `csum_start` (bytes from the start of the
    /// Ethernet frame to the L4 header, 34 for IPv4 without options) and `csum_offset` (where
    /// the checksum sits in the L4 header: 6 for UDP, 16 for TCP). The checksum field must hold
    /// the one's complement sum of the pseudo-header (not inverted), as a NIC with checksum
    /// offload expects. The kernel treats the frame as `CHECKSUM_PARTIAL`: local delivery trusts
    /// it, and forwarding or sending it out of a device without checksum offload computes
    /// the checksum in software (`skb_checksum_help`).
    ///
    /// Returns false when the kernel could not take the frame now (try again).
    ///
    /// # Errors
    ///
    /// [`PortError::Config`] if the port has no `vnet_hdr`, `csum_start + csum_offset + 2`
    /// exceeds the frame, or the frame is not 14 to [`MAX_TAP_FRAME`] bytes; a
    /// [`PortError::Sys`] with EINVAL if the kernel rejects the header, else as
    /// [`TapPort::tx_with_hdr`].
    pub fn tx_with_csum_offload(&mut self, frame: &[u8], csum_start: u16, csum_offset: u16) -> Result<bool, PortError> {
        let hdr = csum_offload_hdr(frame, csum_start, csum_offset)?;
        self.tx_with_hdr(&hdr, frame)
    }
}

/// The virtio header asking the kernel to fill the checksum at `csum_start + csum_offset`.
pub(crate) fn csum_offload_hdr(frame: &[u8], csum_start: u16, csum_offset: u16) -> Result<VirtioNetHdr, PortError> {
    let end = csum_start as usize + csum_offset as usize + 2;
    if end > frame.len() {
        return Err(PortError::Config {
            what: "checksum position csum_start + csum_offset + 2",
            value: end.to_string(),
            accepted: format!("at most the frame length, {} bytes", frame.len()),
        });
    }
    Ok(VirtioNetHdr {
        flags: tun::VIRTIO_NET_HDR_F_NEEDS_CSUM,
        gso_type: tun::VIRTIO_NET_HDR_GSO_NONE,
        hdr_len: end as u16,
        gso_size: 0,
        csum_start,
        csum_offset,
    })
}

/// A tap refuses frames shorter than an Ethernet header (EINVAL); say so by name instead.
pub(crate) fn check_frame(frame: &[u8]) -> Result<(), PortError> {
    if frame.len() < 14 || frame.len() > MAX_TAP_FRAME {
        return Err(PortError::Config {
            what: "frame length",
            value: frame.len().to_string(),
            accepted: format!("14 (an Ethernet header) to {MAX_TAP_FRAME} bytes"),
        });
    }
    Ok(())
}

impl Port for TapPort {
    fn path(&self) -> &'static str {
        "tap"
    }

    fn rx_burst<F: FnMut(&[u8])>(&mut self, max: usize, timeout_ms: i32, mut f: F) -> Result<usize, PortError> {
        self.rx_burst_hdr(max, timeout_ms, |_, frame| f(frame))
    }

    /// One `writev` per frame. A frame the kernel refuses (bad length, EINVAL for a malformed
    /// header) ends the burst: the frames before it count as accepted and the error surfaces
    /// on the retry.
    fn tx_burst(&mut self, frames: &[&[u8]]) -> Result<usize, PortError> {
        let fd = self.fd.as_raw_fd();
        let zero = [0u8; VNET_HDR_LEN];
        let mut sent = 0;
        for frame in frames {
            let r = check_frame(frame).and_then(|()| {
                let r = if self.opts.vnet_hdr {
                    tun::writev(fd, &[IoSlice::new(&zero), IoSlice::new(frame)])
                } else {
                    tun::writev(fd, &[IoSlice::new(frame)])
                };
                r.map_err(PortError::from)
            });
            match r {
                Ok(Some(_)) => {
                    sent += 1;
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += frame.len() as u64;
                }
                Ok(None) => break,
                Err(_) if sent > 0 => break,
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }

    /// Packets and bytes counted in user space (bytes without the virtio header). `drops` is
    /// empty: the one loss point, the tap's queue, is the interface's `tx_dropped`, which lives
    /// in the interface's namespace (`ip -n NS -s link show NAME`).
    fn stats(&mut self) -> Result<PortStats, PortError> {
        Ok(self.stats.clone())
    }
}

/// The TAP device's file descriptor, e.g. for tokio's `AsyncFd` or `poll`; it stays owned by the TapPort.
impl std::os::fd::AsFd for TapPort {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.fd)
    }
}

impl std::os::fd::AsRawFd for TapPort {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(self))
    }
}
