//! The experiment of `fastpath bench ddos`: does the end host keep serving under attack, and which defence keeps
//! it serving at which flood rate. A test bed of its own; a TCP request/response service
//! (sockperf server, ping-pong) in the receiving namespace; one phase with no flood, then for
//! each defence (`--defences`) one phase per offered flood rate (`--flood-rates`), each of
//! `--duration` seconds. Per phase: TCP transactions/s and latency percentiles, the flood
//! offered / reaching the victim / refused, how evenly it was paced, the service CPU's softirq
//! share and the NAPI thread's share, and the frames the defence dropped by its own counter.
//! Per defence: the survivable flood rate (the highest offered rate at which the service keeps
//! at least half its no-flood transactions/s).
//!
//! The model (docs/ARCHITECTURE.md, "The flood model"): a NIC queue whose interrupt lands on
//! the service's CPU. The receiving veth's NAPI runs threaded, pinned to the service's CPU 1
//! with SCHED_FIFO priority 50, so receive processing preempts the service there as a NIC's
//! softirq would; the service's packets share the receive ring and NAPI with the flood and are
//! lost with it when the ring is full (no TSO and no qdisc on the sending veth), as at a NIC's
//! ring; the
//! service and its clients run on CPU 1; the attacker (the xdp-live generator, paced per
//! frame in its program) runs on CPU 0.
//!
//! Two models of how the flood reaches the receiving NAPI, each a row set of its own
//! ([`Model`], `--model`): per frame (every frame may wake the NAPI thread), and coalesced
//! (adaptive interrupt coalescing as a NIC with `rx-usecs`, [`crate::coalesce`]: under load
//! the NAPI polls at most every rx-usecs and the service's packets wait with the flood's batch;
//! idle it is woken per frame).
//!
//! The module's files, one concern each, bottom up (none imports a file listed after it):
//! `flood.rs` (the floods: kinds, frames, rates, spoofed sources, the generator's thread),
//! `service.rs` (the service under attack: its ports and CPU, the sockperf server, the connect
//! probe and its echo server), `clients_xdp.rs` (the classifier on the clients' veth),
//! `defence.rs` (the defences: their rules per flood, installing them, their drop counters),
//! `bed.rs` (the options, the test bed, the run's descriptions), `phase.rs` (the phase loop and
//! its accounting), `report.rs` (the survivable rates, the tables and the SVG chart).

mod bed;
mod clients_xdp;
mod defence;
mod flood;
mod phase;
mod report;
mod service;

pub use bed::{prepare, DdosBed, DdosOptions};
pub use defence::Defence;
pub use flood::{
    flood_generator, flood_spread, parse_flood_rates, parse_flood_sources, Flood, FloodRate, Model,
    DEFAULT_FLOOD_SOURCES, MAX_FLOOD_SOURCES,
};
pub use phase::Phase;
pub use report::{survival, svg, Survival};
pub use service::SERVICE_CPU;
