//! One port API over every path between an interface and user space: AF_XDP, AF_PACKET
//! TPACKET_V3, TAP (readv/writev) and TAP driven by io_uring. An application picks a backend by
//! name (`--path afxdp|tpacket|tap|tap-uring`) and changes nothing else.
//!
//! Receive is zero-copy where the backend allows: [`Port::rx_burst`] hands each packet's bytes
//! to a callback in place (UMEM frame, TPACKET_V3 block, registered buffer) and releases the
//! frame when the callback returns. Transmit copies into the backend's buffers.

pub mod afxdp;
pub mod epoll;
#[cfg(feature = "tap")]
pub mod tap;
#[cfg(feature = "io-uring")]
pub mod tap_uring;
pub mod tpacket;
pub mod udp;

use serde::Serialize;

use crate::netdev::{Iface, NoSuchInterface};
use crate::sys::SysError;

/// Counters every backend reports under the same names; `drops` holds the kernel's own drop
/// counters under the kernel's names (XDP_STATISTICS fields, `tp_drops`, ...).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct PortStats {
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets the kernel accepted for transmission.
    pub tx_packets: u64,
    /// Bytes the kernel accepted for transmission.
    pub tx_bytes: u64,
    /// Kernel drop counters, by the kernel's names.
    pub drops: Vec<(String, u64)>,
}

/// Errors of the port API.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PortError {
    /// A value outside what the backend accepts.
    #[error("{what} {value} is not accepted: {accepted}")]
    Config {
        /// The setting.
        what: &'static str,
        /// The value given.
        value: String,
        /// What is accepted.
        accepted: String,
    },
    /// An unknown backend name.
    #[error("path {0:?} is not accepted: use one of {paths}", paths = PATHS.join(", "))]
    UnknownPath(String),
    /// A system call failed.
    #[error(transparent)]
    Sys(#[from] SysError),
    /// The AF_XDP backend failed.
    #[error(transparent)]
    Xsk(#[from] crate::xsk::XskError),
    /// The XDP program of the AF_XDP backend failed.
    #[error(transparent)]
    Bpf(#[from] crate::bpf::BpfError),
}

/// Largest frame the default [`Port::tx_stamped`] / [`Port::fwd_burst`] stage on the stack.
pub const STAGE_FRAME_BYTES: usize = 2048;
/// Frames the default [`Port::tx_stamped`] / [`Port::fwd_burst`] stage per call.
pub const STAGE_FRAMES: usize = 32;

/// A packet I/O port. One thread uses a port at a time.
///
/// Every per-packet callback is a generic `FnMut` (monomorphised, no `dyn` on the per-packet
/// path); runtime choice of backend is [`AnyPort`], dispatched once per burst.
pub trait Port: Send {
    /// The backend's name: "afxdp", "tpacket", "tap" or "tap-uring".
    fn path(&self) -> &'static str;

    /// Receives up to `max` packets, calling `f` with each packet's bytes (in place where the
    /// backend allows); each frame is released to the kernel when `f` returns. Waits up to
    /// `timeout_ms` for the first packet (0: do not wait). Returns the number received.
    ///
    /// # Errors
    ///
    /// The backend's failed call ([`PortError::Sys`]), e.g. ENETDOWN or ENXIO once the interface is
    /// down or gone; a wait interrupted by a signal is not an error.
    fn rx_burst<F: FnMut(&[u8])>(&mut self, max: usize, timeout_ms: i32, f: F) -> Result<usize, PortError>;

    /// Hands `frames` (whole Ethernet frames) to the kernel for transmission; returns how many
    /// it accepted, in order (the caller retries the rest).
    ///
    /// # Errors
    ///
    /// [`PortError::Config`] for a frame the backend cannot carry (empty, or longer than its frame
    /// or MTU); the backend's failed call otherwise ([`PortError::Sys`], e.g. the TX wake-up). A
    /// full ring or queue is not an error: fewer frames are accepted.
    fn tx_burst(&mut self, frames: &[&[u8]]) -> Result<usize, PortError>;

    /// Sends up to `n` copies of `template`, each changed by `stamp(i, bytes)` (i = 0.. in
    /// order) in the backend's own buffer where it has one (UMEM frame, TX ring slot); returns
    /// how many were accepted: the first k of the `i`s. The default stages up to
    /// [`STAGE_FRAMES`] frames of at most [`STAGE_FRAME_BYTES`] on the stack and calls
    /// [`Port::tx_burst`].
    ///
    /// # Errors
    ///
    /// [`PortError::Config`] if `template` is empty or (in the default) longer than
    /// [`STAGE_FRAME_BYTES`]; as [`Port::tx_burst`].
    fn tx_stamped<F: FnMut(usize, &mut [u8])>(
        &mut self,
        template: &[u8],
        n: usize,
        mut stamp: F,
    ) -> Result<usize, PortError> {
        check_stage_len(template.len())?;
        let mut stage = [[0u8; STAGE_FRAME_BYTES]; STAGE_FRAMES];
        let len = template.len();
        let k = n.min(STAGE_FRAMES);
        for (i, buf) in stage.iter_mut().take(k).enumerate() {
            buf[..len].copy_from_slice(template);
            stamp(i, &mut buf[..len]);
        }
        let refs: [&[u8]; STAGE_FRAMES] = std::array::from_fn(|i| &stage[i][..len]);
        self.tx_burst(&refs[..k])
    }

    /// Receives up to `max` packets and calls `f` with each one's bytes, writable; the ones for
    /// which `f` returns true are sent back out of this port (l2fwd). Waits like
    /// [`Port::rx_burst`]. Returns (received, forwarded). The default stages up to
    /// [`STAGE_FRAMES`] frames on the stack (longer frames than [`STAGE_FRAME_BYTES`] are
    /// received and not forwarded) and calls [`Port::tx_burst`], retrying until all are taken.
    ///
    /// # Errors
    ///
    /// As [`Port::rx_burst`] and [`Port::tx_burst`]; frames received before a failed send are lost.
    fn fwd_burst<F: FnMut(&mut [u8]) -> bool>(
        &mut self,
        max: usize,
        timeout_ms: i32,
        mut f: F,
    ) -> Result<(usize, usize), PortError> {
        let mut stage = [[0u8; STAGE_FRAME_BYTES]; STAGE_FRAMES];
        let mut lens = [0usize; STAGE_FRAMES];
        let mut k = 0;
        let got = self.rx_burst(max.min(STAGE_FRAMES), timeout_ms, |p| {
            if p.len() <= STAGE_FRAME_BYTES {
                let b = &mut stage[k][..p.len()];
                b.copy_from_slice(p);
                if f(b) {
                    lens[k] = p.len();
                    k += 1;
                }
            }
        })?;
        let refs: [&[u8]; STAGE_FRAMES] = std::array::from_fn(|i| &stage[i][..lens[i]]);
        let mut off = 0;
        let mut idle = 0;
        while off < k && idle < 10_000 {
            let n = self.tx_burst(&refs[off..k])?;
            idle = if n == 0 { idle + 1 } else { 0 };
            off += n;
        }
        Ok((got, off))
    }

    /// TX frames the kernel finished with since the last call, for backends that complete
    /// asynchronously (AF_XDP's COMPLETION ring); `None` for backends whose frames are done
    /// once accepted (a copy was taken).
    ///
    /// # Errors
    ///
    /// The backend's failed call (the default never fails).
    fn tx_reap(&mut self) -> Result<Option<u64>, PortError> {
        Ok(None)
    }

    /// Pushes queued TX frames out; returns the frames accepted and not yet reaped as completed
    /// by [`Port::tx_reap`] (0 for backends that complete on accept).
    ///
    /// # Errors
    ///
    /// The backend's failed call, e.g. the TX wake-up (the default never fails).
    fn tx_outstanding(&mut self) -> Result<u64, PortError> {
        Ok(0)
    }

    /// How many frames one [`Port::tx_stamped`] call should offer to move the most per
    /// system call.
    fn tx_batch_hint(&self) -> usize {
        STAGE_FRAMES
    }

    /// Counters, including the kernel's drop counters.
    ///
    /// # Errors
    ///
    /// [`PortError::Sys`] if the backend's statistics call fails (e.g. `getsockopt` XDP_STATISTICS
    /// or PACKET_STATISTICS).
    fn stats(&mut self) -> Result<PortStats, PortError>;
}

fn check_stage_len(len: usize) -> Result<(), PortError> {
    if len == 0 || len > STAGE_FRAME_BYTES {
        return Err(PortError::Config {
            what: "frame length",
            value: len.to_string(),
            accepted: format!("1 to {STAGE_FRAME_BYTES} bytes"),
        });
    }
    Ok(())
}

/// Any backend, chosen at run time; dispatches once per burst.
#[derive(Debug)]
pub enum AnyPort {
    /// AF_XDP.
    AfXdp(Box<afxdp::AfXdpPort>),
    /// AF_PACKET TPACKET_V3.
    Tpacket(tpacket::TpacketPort),
    /// TAP, readv/writev.
    #[cfg(feature = "tap")]
    Tap(tap::TapPort),
    /// TAP, io_uring.
    #[cfg(feature = "io-uring")]
    TapUring(Box<tap_uring::TapUringPort>),
}

/// The backend's file descriptor (the AF_XDP or AF_PACKET socket, the TAP device), e.g. for
/// tokio's `AsyncFd`; readable when [`Port::rx_burst`] has frames to take.
impl std::os::fd::AsFd for AnyPort {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            AnyPort::AfXdp(p) => std::os::fd::AsFd::as_fd(&**p),
            AnyPort::Tpacket(p) => std::os::fd::AsFd::as_fd(p),
            #[cfg(feature = "tap")]
            AnyPort::Tap(p) => std::os::fd::AsFd::as_fd(p),
            #[cfg(feature = "io-uring")]
            AnyPort::TapUring(p) => std::os::fd::AsFd::as_fd(&**p),
        }
    }
}

impl std::os::fd::AsRawFd for AnyPort {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(self))
    }
}

macro_rules! each {
    ($self:ident, $p:ident => $e:expr) => {
        match $self {
            AnyPort::AfXdp($p) => $e,
            AnyPort::Tpacket($p) => $e,
            #[cfg(feature = "tap")]
            AnyPort::Tap($p) => $e,
            #[cfg(feature = "io-uring")]
            AnyPort::TapUring($p) => $e,
        }
    };
}

impl Port for AnyPort {
    fn path(&self) -> &'static str {
        each!(self, p => p.path())
    }
    fn rx_burst<F: FnMut(&[u8])>(&mut self, max: usize, timeout_ms: i32, f: F) -> Result<usize, PortError> {
        each!(self, p => p.rx_burst(max, timeout_ms, f))
    }
    fn tx_burst(&mut self, frames: &[&[u8]]) -> Result<usize, PortError> {
        each!(self, p => p.tx_burst(frames))
    }
    fn tx_stamped<F: FnMut(usize, &mut [u8])>(
        &mut self,
        template: &[u8],
        n: usize,
        stamp: F,
    ) -> Result<usize, PortError> {
        each!(self, p => p.tx_stamped(template, n, stamp))
    }
    fn fwd_burst<F: FnMut(&mut [u8]) -> bool>(
        &mut self,
        max: usize,
        timeout_ms: i32,
        f: F,
    ) -> Result<(usize, usize), PortError> {
        each!(self, p => p.fwd_burst(max, timeout_ms, f))
    }
    fn tx_reap(&mut self) -> Result<Option<u64>, PortError> {
        each!(self, p => p.tx_reap())
    }
    fn tx_outstanding(&mut self) -> Result<u64, PortError> {
        each!(self, p => p.tx_outstanding())
    }
    fn tx_batch_hint(&self) -> usize {
        each!(self, p => p.tx_batch_hint())
    }
    fn stats(&mut self) -> Result<PortStats, PortError> {
        each!(self, p => p.stats())
    }
}

/// Backend names, for `--path`: "afxdp", "tpacket", then "tap" (feature `tap`) and
/// "tap-uring" (feature `io-uring`).
pub const PATHS: &[&str] = &[
    "afxdp",
    "tpacket",
    #[cfg(feature = "tap")]
    "tap",
    #[cfg(feature = "io-uring")]
    "tap-uring",
];

/// Which backend to open, with its options.
#[derive(Debug, Clone)]
pub enum PortSpec {
    /// AF_XDP on (interface, queue), behind `xsk_redirect` (native, skb fallback).
    AfXdp {
        /// Queue id.
        queue: u32,
        /// Socket and UMEM shape.
        config: crate::xsk::XskConfig,
    },
    /// AF_PACKET TPACKET_V3.
    Tpacket(tpacket::TpacketOptions),
    /// A TAP device of this name (created if absent), readv/writev.
    #[cfg(feature = "tap")]
    Tap(tap::TapOptions),
    /// The same TAP device driven by io_uring.
    #[cfg(feature = "io-uring")]
    TapUring(tap::TapOptions),
}

/// Opens the backend named by `spec` on the interface named `name`, in the calling thread's
/// network namespace: for AF_XDP and TPACKET the name is resolved here, once
/// ([`Iface::resolve`]), and the port opened with [`open_iface`]; a TAP device is opened (or
/// created) by its name. Privileges: as the backend's `open`.
///
/// # Errors
///
/// [`PortError::Xsk`] ([`crate::xsk::XskError::NoSuchInterface`]) if no interface has the name;
/// as the backend's `open`.
///
/// # Examples
///
/// An echo on `eth0` over TPACKET_V3: each burst of received frames goes back out. Any backend
/// serves the same code; only the [`PortSpec`] changes (`PortSpec::AfXdp { queue: 0, config:
/// XskConfig::default() }` for AF_XDP).
///
/// ```no_run
/// use fastpath::io::tpacket::TpacketOptions;
/// use fastpath::io::{open, Port, PortSpec};
///
/// let mut port = open("eth0", &PortSpec::Tpacket(TpacketOptions::default()))?;
/// let mut frames: Vec<Vec<u8>> = Vec::new();
/// for _ in 0..1000 {
///     frames.clear();
///     port.rx_burst(64, 100, |bytes| frames.push(bytes.to_vec()))?; // waits up to 100 ms
///     let out: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
///     let mut sent = 0;
///     while sent < out.len() {
///         sent += port.tx_burst(&out[sent..])?; // a full ring takes fewer: the rest again
///     }
/// }
/// println!("{:?}", port.stats()?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open(name: &str, spec: &PortSpec) -> Result<AnyPort, PortError> {
    Ok(match spec {
        PortSpec::AfXdp { .. } | PortSpec::Tpacket(_) => open_iface(&Iface::resolve(name)?, spec)?,
        #[cfg(feature = "tap")]
        PortSpec::Tap(o) => AnyPort::Tap(tap::TapPort::open(name, *o)?),
        #[cfg(feature = "io-uring")]
        PortSpec::TapUring(o) => AnyPort::TapUring(Box::new(tap_uring::TapUringPort::open(name, *o)?)),
    })
}

/// Opens the backend named by `spec` on `iface`, resolved by the caller (a TAP device: by its
/// name). AF_XDP attaches `xsk_redirect` natively, falling back to skb, not forcing.
///
/// # Errors
///
/// As the backend's `open`.
pub fn open_iface(iface: &Iface, spec: &PortSpec) -> Result<AnyPort, PortError> {
    Ok(match spec {
        PortSpec::AfXdp { queue, config } => {
            AnyPort::AfXdp(Box::new(afxdp::AfXdpPort::open(iface, *queue, config, crate::bpf::AttachOpts::default())?))
        }
        PortSpec::Tpacket(o) => AnyPort::Tpacket(tpacket::TpacketPort::open(iface, *o)?),
        #[cfg(feature = "tap")]
        PortSpec::Tap(o) => AnyPort::Tap(tap::TapPort::open(iface.name(), *o)?),
        #[cfg(feature = "io-uring")]
        PortSpec::TapUring(o) => AnyPort::TapUring(Box::new(tap_uring::TapUringPort::open(iface.name(), *o)?)),
    })
}

impl From<NoSuchInterface> for PortError {
    fn from(e: NoSuchInterface) -> Self {
        PortError::Xsk(e.into())
    }
}
