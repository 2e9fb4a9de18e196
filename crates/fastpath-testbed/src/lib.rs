//! RAII network-namespace test bed for fastpath: two network namespaces joined by a veth pair.
//!
//! ```text
//!   namespace <name>-a (sender)                    namespace <name>-b (receiver)
//!   <name>a  10.99.0.1/24  fd99::1/64  <== veth ==>  <name>b  10.99.0.2/24  fd99::2/64
//! ```
//!
//! [`Testbed::up`] builds it with `ip`, `ethtool` and `tc` (iproute2 and ethtool must be
//! installed; root is needed) and the guard deletes both namespaces on drop, which also
//! destroys the veth pair. Default names are unique per process and per call, so tests may
//! run in parallel. Nothing is ever created in, or sent to, the caller's own namespace.
//! Code that must open sockets inside a namespace runs on a thread that entered it:
//! [`run_in_netns`], [`spawn_in_netns`], [`enter_netns`].
//!
//! Facts about veth that shaped this crate (measured on a 6.18 kernel):
//!
//! - Native XDP on a veth needs its rx queue count >= the peer's tx queue count, so both ends
//!   get the same count ([`TestbedConfig::queues`]).
//! - A veth accepts XDP-redirected frames (DEVMAP, live-frames generators, `XDP_TX` from the
//!   peer) only when the receiving end has an XDP program attached OR GRO enabled; otherwise
//!   the sender refuses them or they vanish. The test bed turns GRO on at both ends.
//! - The receiving veth's NAPI work runs on the SENDING CPU by default (in the sender's
//!   softirq). [`Testbed::set_rx_napi_cpu`] moves it to pinned kernel threads instead.
//! - The veth ring is 256 slots; overflow shows only in the sender's `xdp_xmit_errors` /
//!   the peer's drop counters, see [`Testbed::ethtool_stats`]. A veth without a qdisc
//!   reports a full ring to TCP as a local drop, hence [`TestbedConfig::sender_qdisc`].
//! - Neighbour entries are static (`nud permanent`) both ways, so no ARP or neighbour
//!   discovery runs; IPv6 addresses skip DAD and router solicitations are off. IPv6 still
//!   sends a few MLD reports right after the links come up: filter by protocol when counting.
//! - `ip netns exec` remounts `/sys` for the namespace; a thread that merely `setns()`-ed
//!   still sees the old `/sys` (but its own `/proc/sys/net` and sockets).
#![warn(missing_docs)]

mod bed;
mod cmd;
mod error;
mod fwd;
pub mod gate;
mod name;
mod netns;

pub use bed::{
    default_name_prefix, Testbed, TestbedConfig, TestbedInfo, IP4_A, IP4_B, IP6_A, IP6_B, MAX_QUEUES, PREFIX4, PREFIX6,
    SENDER_QDISC_LIMIT,
};
pub use error::TestbedError;
pub use fwd::{
    FwdBed, FwdBedInfo, FWD_IP4_A, FWD_IP4_B, FWD_IP4_FA, FWD_IP4_FB, FWD_IP6_A, FWD_IP6_B, FWD_IP6_FA, FWD_IP6_FB,
};
pub use name::MAX_NAME_LEN;
pub use netns::{enter_netns, list, netns_where, run_in_netns, spawn_in_netns, NetnsWhere, NETNS_RUN_DIR};

/// A [`std::process::Command`] that runs `program` inside network namespace `ns`
/// (`ip netns exec <ns> <program>`, which also gives it the namespace's own `/sys`).
/// Add arguments with `.arg()` / `.args()`.
pub fn ns_command(ns: &str, program: &str) -> std::process::Command {
    let mut c = std::process::Command::new("ip");
    c.args(["netns", "exec", ns, program]);
    c
}
