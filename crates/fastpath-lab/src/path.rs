//! A receive path the front end opens for an experiment (the `fastpath` command opens its own
//! session: XDP program and AF_XDP socket, as `bench rxdrop` does), so that demo and compare
//! measure exactly the path the command runs. At the bottom: uses only [`crate::error`].

use std::sync::Arc;

use fastpath::io::afxdp::AfXdpPort;
use fastpath::rules::compile::Compiled;
use fastpath::xsk::XskStats;

use crate::error::LabResult;

/// What to open.
#[derive(Debug, Clone, Copy)]
pub struct RxRequest<'a> {
    /// The receiving interface (in the calling thread's namespace).
    pub iface: &'a str,
    /// The CPU the receiving loop runs on.
    pub cpu: usize,
    /// In-kernel XDP_DROP only (no socket), instead of the redirect program and a socket.
    pub drop_only: bool,
    /// Copy mode forced (else the front end's default: zero-copy where the driver has it).
    pub copy: bool,
    /// The rule classifier with these rules in front of the socket, instead of the redirect
    /// program.
    pub rules: Option<&'a Compiled>,
}

/// An opened receive path, native XDP mode; closed (program detached) on drop. Used on the
/// thread that opened it.
pub trait RxPath {
    /// The AF_XDP socket; None for XDP_DROP only.
    fn port(&mut self) -> Option<&mut AfXdpPort>;
    /// The socket's XDP_STATISTICS now; None without a socket or when they cannot be read.
    fn xsk_stats(&self) -> Option<XskStats>;
    /// Packets XDP_DROP has dropped so far (0 when unreadable); None without that program.
    fn drop_packets(&self) -> Option<u64>;
    /// The XDP mode obtained ("native" / "skb"), None without a program.
    fn xdp_mode(&self) -> Option<&'static str>;
    /// The copy mode obtained ("copy" / "zero-copy"), None without a socket.
    fn copy_mode(&self) -> Option<&'static str>;
}

/// Opens a [`RxPath`]; called in the receiving namespace's thread. Its errors carry the front
/// end's class (usage, environment, kernel...).
pub type OpenRx = Arc<dyn Fn(&RxRequest) -> LabResult<Box<dyn RxPath>> + Send + Sync>;
