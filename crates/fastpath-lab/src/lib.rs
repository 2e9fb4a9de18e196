//! fastpath's lab: the experiments that build test beds and drive other programs.
//!
//! It owns `fastpath demo` (AF_XDP rxdrop against in-kernel XDP_DROP), `fastpath compare`
//! (every receive path side by side), `fastpath compare --inject` (TAP and io_uring TAP) and
//! `fastpath bench ddos` (the service under a flood, by defence) and `fastpath bench pingpong`
//! (round-trip latency, AF_XDP against the kernel's UDP socket): their test beds, the other
//! programs they start (nft, iptables, sockperf, iperf3, and ethtool / ip inside a namespace,
//! all in [`tools`]), their measurement loops, their result structs and their table and SVG
//! renderings. The product crates (the `fastpath` library and the `fastpath` command) drive no
//! other program; the command turns its flags into this crate's option structs, prints, and
//! writes files.
//!
//! Layers: [`error`], [`tools`], [`frame`], [`path`] and [`progress`] at the bottom; [`peers`] (the drivers of
//! dpdk-testpmd and xdp-tools, `compare --peers`) above them; the experiments ([`demo`],
//! [`compare`], [`inject`], [`ddos`], [`pingpong`]) above those, none using another.
//!
//! Privileges: every experiment needs root (it creates network namespaces and attaches XDP
//! programs); the pure functions (parsers, renderings) need none.

pub mod coalesce;
pub mod compare;
pub mod ddos;
pub mod demo;
pub mod error;
pub mod frame;
pub mod inject;
pub mod path;
pub mod peers;
pub mod pingpong;
pub mod progress;
pub mod tools;

pub use error::{LabError, LabResult};
