//! fastpath: the fastest path between a Linux network interface and a user-space program.
//!
//! - [`xsk`]: AF_XDP sockets (UMEM, FILL/RX/TX/COMPLETION rings, mode negotiation, statistics).
//! - [`bpf`]: the XDP programs (`xsk_redirect`, `xdp_drop`, `xdp_gen`), attached with bpf_link.
//! - [`packet`]: building and checking the generator's UDP/IPv4 test frames.
//! - [`bench`]: the run loops of `fastpath bench` (rxdrop, txonly, l2fwd) and the generator.
//! - [`netdev`]: interface facts and the driver's counters.
//! - [`sys`]: the only module that makes raw system calls.
#![warn(missing_docs)]

pub mod bench;
pub mod bpf;
pub mod netdev;
pub mod packet;
pub mod rules;
pub mod stats;
pub mod sys;
pub mod xsk;
