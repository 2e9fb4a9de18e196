//! fastpath-tools: the code the fastpath programs (the CLI, the lab, the tests) share that is
//! not library: run loops, replay, counters and their formatting, worker threads, signals and the
//! receiver's side of the test frames. It sits between the library (`fastpath`: sockets, UMEM,
//! rings, programs, rules, ports, netdev, features) and its users, and is not published.
//!
//! - [`bench`](mod@bench): the run loops of `fastpath bench` and `fastpath gen` (rxdrop, txonly,
//!   l2fwd over any [`fastpath::io::Port`]; the xdp-live generator), each described by a plan.
//! - [`replay`]: a capture's frames sent again on their schedule (`fastpath gen --pcap`).
//! - [`stats`]: the counter table of the run loops, thousands separators, rates, medians, CPU
//!   busy shares.
//! - [`threads`]: worker threads spawned pinned to a CPU, joined together, or held with their
//!   stop flag.
//! - [`signal`]: interrupting a thread blocked in a long system call; Ctrl-C to a child.
//! - [`payload`]: exactly-once accounting of the generator's frames at a receiver; 5-tuples.
#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod bench;
pub mod payload;
pub mod replay;
pub mod signal;
pub mod stats;
pub mod threads;
