//! One port API over every path between an interface and user space: AF_XDP, AF_PACKET
//! TPACKET_V3, TAP (readv/writev) and TAP driven by io_uring. An application picks a backend by
//! name (`--path afxdp|tpacket|tap|tap-uring`) and changes nothing else.
//!
//! Receive is zero-copy where the backend allows: [`Port::rx_burst`] hands each packet's bytes
//! to a callback in place (UMEM frame, TPACKET_V3 block, registered buffer) and releases the
//! frame when the callback returns. Transmit copies into the backend's buffers.

pub mod afxdp;
pub mod tap;
pub mod tap_uring;
pub mod tpacket;

use serde::Serialize;

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
    #[error("path {0:?} is not accepted: use afxdp, tpacket, tap or tap-uring")]
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

/// A packet I/O port. One thread uses a port at a time.
pub trait Port: Send {
    /// The backend's name: "afxdp", "tpacket", "tap" or "tap-uring".
    fn path(&self) -> &'static str;

    /// Receives up to `max` packets, calling `f` with each packet's bytes (in place where the
    /// backend allows); each frame is released to the kernel when `f` returns. Waits up to
    /// `timeout_ms` for the first packet (0: do not wait). Returns the number received.
    fn rx_burst(&mut self, max: usize, timeout_ms: i32, f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError>;

    /// Hands `frames` (whole Ethernet frames) to the kernel for transmission; returns how many
    /// it accepted, in order (the caller retries the rest).
    fn tx_burst(&mut self, frames: &[&[u8]]) -> Result<usize, PortError>;

    /// Counters, including the kernel's drop counters.
    fn stats(&mut self) -> Result<PortStats, PortError>;
}

/// Backend names, for `--path`.
pub const PATHS: [&str; 4] = ["afxdp", "tpacket", "tap", "tap-uring"];

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
    Tap(tap::TapOptions),
    /// The same TAP device driven by io_uring.
    TapUring(tap::TapOptions),
}

/// Opens the backend named by `spec` on `iface` (for TAP: the device name) in the calling
/// thread's network namespace.
pub fn open(iface: &str, spec: &PortSpec) -> Result<Box<dyn Port>, PortError> {
    Ok(match spec {
        PortSpec::AfXdp { queue, config } => Box::new(afxdp::AfXdpPort::open(iface, *queue, config, None, false)?),
        PortSpec::Tpacket(o) => Box::new(tpacket::TpacketPort::open(iface, *o)?),
        PortSpec::Tap(o) => Box::new(tap::TapPort::open(iface, *o)?),
        PortSpec::TapUring(o) => Box::new(tap_uring::TapUringPort::open(iface, *o)?),
    })
}
