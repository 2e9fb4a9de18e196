//! fastpath: the fastest path between a Linux network interface and a user-space program.
//!
//! - [`xsk`]: AF_XDP sockets (UMEM, FILL/RX/TX/COMPLETION rings, mode negotiation, statistics).
//! - [`abi`]: the kernel/user ABI of the BPF programs, generated from bpf/include/fastpath_abi.h.
//! - [`features`]: which AF_XDP / XDP features the running kernel has (probed once, cached).
//! - [`bpf`]: the XDP programs (`xsk_redirect`, `xdp_drop`, `xdp_gen`), attached with bpf_link.
//! - [`packet`]: building and checking the generator's UDP/IPv4 test frames.
//! - [`pcapfilter`]: a pcap-filter expression (tcpdump's) compiled and run by libpcap.
//! - [`bench`](mod@bench): the run loops of `fastpath bench` (rxdrop, txonly, l2fwd) and the generator.
//! - [`io`]: one port API (rx_burst / tx_burst) over AF_XDP, TPACKET_V3, TAP and TAP + io_uring.
//! - [`netdev`]: interface facts and the driver's counters.
//! - [`workers`]: worker threads spawned pinned to a CPU, joined together, or held with their
//!   stop flag; CPU pinning and the online CPUs.
//! - [`SysError`]: a failed system call, with the call and its arguments (the crate-private
//!   `sys` module is the only one that makes system calls).
#![warn(missing_docs)]

pub mod abi;
pub mod bench;
pub mod bpf;
pub mod features;
pub mod io;
pub mod netdev;
pub mod packet;
pub mod pcapfilter;
pub mod replay;
pub mod rules;
pub mod stats;
pub(crate) mod sys;
pub mod workers;
pub mod xsk;

pub use sys::SysError;
