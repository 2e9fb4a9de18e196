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

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath::bpf::{Classifier, XdpGen, XdpMode};
use fastpath::netdev::NetDev;
use fastpath::rules::compile::compile;
use fastpath::rules::parse_toml;
use fastpath_testbed::{spawn_in_netns, Testbed, TestbedConfig};
use fastpath_tools::bench::{self, SendLimits};
use fastpath_tools::stats::{thousands, Counters};
use fastpath_tools::threads::Stoppable;
use serde::Serialize;

use crate::coalesce::{self, Coalescer};
use crate::error::{env, kernel, runtime, LabError, LabResult};
use crate::tools::{self, Running};

/// The service's ports: phase i listens on PORT_FIRST + i (mod PROBE_OFFSET), a fresh server
/// each phase (sockperf sets no SO_REUSEADDR, and a server killed with a connection open holds
/// its port a while); the connect probe's echo server on that port + PROBE_OFFSET, in the same
/// range (the defences' rules cover PORT_FIRST..=PORT_LAST).
const PORT_FIRST: u16 = 20000;
const PORT_LAST: u16 = 29999;
const PROBE_OFFSET: u16 = 5000;
/// The connect probe: new connections per phase, paced evenly across the service's window, each
/// given CONNECT_TIMEOUT to connect and as long again for its one-byte echo.
const PROBE_CONNECTS: u32 = 200;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The service's CPU (and its clients'); the attacker runs on the others.
pub const SERVICE_CPU: usize = 1;
/// SCHED_FIFO priority of the receiving NAPI thread (`chrt -f 50`).
const NAPI_FIFO_PRIORITY: i32 = 50;
/// Rules in front of the flood's rule for `fastpath-10k`.
const RULES_IN_FRONT: usize = 10_000;
/// The nftables table `nft` installs in the victim's namespace.
const NFT_TABLE: &str = "fastpath_ddos";
/// Distinct 5-tuples in the flood (source address and source port, seeded), so the
/// classifier's flow cache misses as under a real flood; more with more sources than this
/// (one flow per source at least, [`flood_spread`]).
const FLOOD_FLOWS: u32 = 1_000_000;
/// The first of the flood's spoofed source addresses: source i of `--flood-sources N` is
/// FLOOD_SRC_BASE + i, all within [`FLOOD_SRC_NET`]. Not from the test bed's own
/// 10.99.0.0/24 (see [`Flood::frame`]).
const FLOOD_SRC_BASE: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 128, 0, 0);
/// The range the spoofed sources come from: 10.128.0.0/9, [`MAX_FLOOD_SOURCES`] addresses.
const FLOOD_SRC_NET: &str = "10.128.0.0/9";
/// Most sources `--flood-sources` accepts: every address of 10.128.0.0/9 (2^23).
pub const MAX_FLOOD_SOURCES: u32 = fastpath::spread::MAX_SOURCES;
/// `--flood-sources` by default: 65,536, a /16 (10.128.0.0/16).
pub const DEFAULT_FLOOD_SOURCES: u32 = 65_536;
const FLOOD_SEED: u64 = 1;

/// Parses `--flood-sources`: a number of spoofed source addresses, 1..=[`MAX_FLOOD_SOURCES`].
///
/// # Errors
///
/// A one-line message naming the value and the accepted range: not a decimal number, 0, or
/// more than the range holds.
pub fn parse_flood_sources(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if (1..=MAX_FLOOD_SOURCES).contains(&n) => Ok(n),
        _ => Err(format!(
            "--flood-sources {s} is not accepted: a number of spoofed source addresses in 1..={MAX_FLOOD_SOURCES} (the addresses of {FLOOD_SRC_NET})"
        )),
    }
}

/// The flood's spread of `sources` spoofed sources: addresses FLOOD_SRC_BASE + 0..sources,
/// max(FLOOD_FLOWS, sources) flows (at most 65,536 per source), seeded with FLOOD_SEED. None for
/// `sources` outside 1..=[`MAX_FLOOD_SOURCES`].
pub fn flood_spread(sources: u32) -> Option<fastpath::spread::SourceSpread> {
    let flows = FLOOD_FLOWS.max(sources).min(sources.saturating_mul(65_536));
    fastpath::spread::SourceSpread::new(sources, flows, u32::from(FLOOD_SRC_BASE), FLOOD_SEED)
}

/// The flood `bench ddos` sends, as its attacker loads it: the template frame of `kind` from
/// `src_mac` to the victim (`mac_b`, 10.99.0.2; TCP floods to `port`) and the generator, loaded
/// to send out of `ifindex` (in the calling thread's namespace) from [`flood_spread`]`(sources)`.
///
/// Needs root (or CAP_BPF + CAP_NET_ADMIN) and Linux >= 5.18 (live frames).
///
/// # Errors
///
/// A message: `sources` out of range, or the generator could not be loaded
/// ([`XdpGen::load_spread`]).
pub fn flood_generator(
    kind: Flood,
    sources: u32,
    ifindex: u32,
    src_mac: [u8; 6],
    mac_b: [u8; 6],
    port: u16,
) -> Result<(XdpGen, Vec<u8>), String> {
    let spread = flood_spread(sources).ok_or_else(|| format!("{sources} flood sources: 1..={MAX_FLOOD_SOURCES}"))?;
    let frame = kind.frame(src_mac, mac_b, port)?;
    let gen = XdpGen::load_spread(ifindex, &spread).map_err(|e| format!("{e:#}"))?;
    Ok((gen, frame))
}

/// The rules of the classifier on the clients' veth ([`ClientsXdp`]):
/// every frame to the flood's spoofed sources (FLOOD_SRC_NET: the victim's SYN-ACKs) ends
/// there, as on a wire; the rest passes.
fn clients_xdp_rules() -> String {
    format!("default = \"pass\"\n[[rule]]\ndst = \"{FLOOD_SRC_NET}\"\naction = \"drop\"\n")
}

/// SYN flood defences: SYNs per second admitted per source address, and for all sources
/// together (the rest dropped).
const SYN_RATE_PER_SOURCE: u32 = 100;
const SYN_RATE_TOTAL: u32 = 2000;
/// ACK flood defences without state (nft, iptables, fastpath): pure ACKs per second admitted
/// per source address. A heuristic: the service's client address sends a few hundred pure ACKs
/// a second (the connect probe's handshakes and closes; ping-pong replies carry the ACK), the
/// flood's N sources (`--flood-sources`) each offered/N: with 256 sources (3,900/s each at 1M)
/// it drops the flood only above ~256k/s in all; the default 65,536 sources send 15/s each at
/// 1M, and the per-source limit passes the whole flood (the classifier's rule still has its
/// aggregate limit, 64 x this, `rate_total`'s default).
const ACK_RATE_PER_SOURCE: u32 = 1000;

/// The flood of `bench ddos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flood {
    /// 64-byte UDP to port 9.
    Udp,
    /// TCP SYNs to the service's port, from spoofed sources.
    Syn,
    /// Out-of-state TCP ACKs (no handshake before them) to the service's port, from spoofed
    /// sources.
    Ack,
}

/// A defence of `bench ddos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defence {
    /// No filter.
    None,
    /// nftables: a drop (or SYN limit) in a prerouting chain at priority raw.
    Nft,
    /// iptables: a drop (or SYN hashlimit) in the raw table's PREROUTING.
    Iptables,
    /// The fastpath classifier (XDP, native) with the one rule.
    Fastpath,
    /// The fastpath classifier with the rule last behind 10,000 others.
    Fastpath10k,
    /// The fastpath classifier with one rule `action = "syncookie"` for the service's ports
    /// (SYN cookies answered at the driver, out-of-state ACKs dropped; Linux >= 6.9). Its
    /// SYN-ACKs reach the clients through the classifier a run holds on the clients' veth
    /// (`ClientsXdp`): a veth delivers the frames its peer sends with XDP_TX only to a NAPI
    /// that XDP keeps running (crates/fastpath-cli/tests/syncookie.rs).
    FastpathSyncookie,
}

/// The flood model of a row set (docs/ARCHITECTURE.md, "The flood model").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// Every frame may wake the receiving NAPI (no interrupt coalescing).
    PerFrame,
    /// Adaptive interrupt coalescing ([`crate::coalesce`]): under load the NAPI polls at most
    /// every `rx-usecs`, idle every frame wakes it.
    Coalesced,
}

impl Model {
    /// "per-frame" or "coalesced" (the JSON's `model` of a phase).
    pub fn name(self) -> &'static str {
        match self {
            Model::PerFrame => "per-frame",
            Model::Coalesced => "coalesced",
        }
    }
}

impl Flood {
    /// "udp" or "syn".
    pub fn name(self) -> &'static str {
        match self {
            Flood::Udp => "udp",
            Flood::Syn => "syn",
            Flood::Ack => "ack",
        }
    }

    /// The flood's template frame from `src_mac` to the victim: UDP to port 9, or a TCP SYN
    /// or ACK to the service's port, from FLOOD_SRC_BASE (the generator's spread rewrites the
    /// address within FLOOD_SRC_NET and the port; no route back from the victim: its answers
    /// go nowhere, as to spoofed sources). Not from the test bed's own 10.99.0.0/24: a flow
    /// could carry the victim's own address, a martian the victim's kernel drops uncounted
    /// (drop reason IP_LOCAL_SOURCE), and the victim could not account for every flood frame.
    fn frame(self, src_mac: [u8; 6], mac_b: [u8; 6], port: u16) -> Result<Vec<u8>, String> {
        match self {
            Flood::Udp => {
                let spec = fastpath::packet::UdpFrameSpec {
                    src_mac,
                    dst_mac: mac_b,
                    src_ip: FLOOD_SRC_BASE.into(),
                    dst_ip: fastpath_testbed::IP4_B.into(),
                    src_port: 9000,
                    dst_port: 9,
                    frame_len: 64,
                };
                let mut f = vec![0u8; 64];
                fastpath::packet::build_udp_frame(&spec, &mut f);
                Ok(f)
            }
            Flood::Syn => syn_frame(src_mac, mac_b, port),
            Flood::Ack => ack_frame(src_mac, mac_b, port),
        }
    }

    /// The nftables rules (prerouting, priority raw) of the `nft` defence.
    fn nft_rules(self) -> String {
        match self {
            Flood::Udp => "  udp dport 9 counter drop\n".into(),
            Flood::Syn => format!(
                "  tcp dport {PORT_FIRST}-{PORT_LAST} tcp flags & (syn | ack) == syn meter fastpath_syn {{ ip saddr limit rate over {SYN_RATE_PER_SOURCE}/second }} counter drop\n  tcp dport {PORT_FIRST}-{PORT_LAST} tcp flags & (syn | ack) == syn limit rate over {SYN_RATE_TOTAL}/second counter drop\n"
            ),
            Flood::Ack => format!(
                "  tcp dport {PORT_FIRST}-{PORT_LAST} tcp flags & (fin | syn | rst | psh | ack) == ack meter fastpath_ack {{ ip saddr limit rate over {ACK_RATE_PER_SOURCE}/second }} counter drop\n"
            ),
        }
    }

    /// The iptables rules (`-t raw`, PREROUTING, in order) of the `iptables` defence.
    fn iptables_rules(self) -> Vec<Vec<String>> {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ports = format!("{PORT_FIRST}:{PORT_LAST}");
        match self {
            Flood::Udp => vec![v(&["-p", "udp", "--dport", "9", "-j", "DROP"])],
            Flood::Syn => {
                // SYNs to the service's ports over a hashlimit: per source, then in all.
                let over = |name: &str, mode: &[&str], rate: u32| {
                    let mut r =
                        v(&["-p", "tcp", "--dport", &ports, "--syn", "-m", "hashlimit", "--hashlimit-name", name]);
                    r.extend(v(mode));
                    r.extend(v(&["--hashlimit-above", &format!("{rate}/sec"), "-j", "DROP"]));
                    r
                };
                vec![
                    over("fastpath_syn_src", &["--hashlimit-mode", "srcip"], SYN_RATE_PER_SOURCE),
                    over("fastpath_syn_all", &[], SYN_RATE_TOTAL),
                ]
            }
            // Pure ACKs (no other flag) to the service's ports over a per-source hashlimit.
            Flood::Ack => vec![v(&[
                "-p",
                "tcp",
                "--dport",
                &ports,
                "--tcp-flags",
                "FIN,SYN,RST,PSH,ACK",
                "ACK",
                "-m",
                "hashlimit",
                "--hashlimit-name",
                "fastpath_ack_src",
                "--hashlimit-mode",
                "srcip",
                "--hashlimit-above",
                &format!("{ACK_RATE_PER_SOURCE}/sec"),
                "-j",
                "DROP",
            ])],
        }
    }

    /// The classifier rule that meets the flood (last in the rule set); the same rule for every
    /// flood under `fastpath-syncookie`.
    fn classifier_rule(self, d: Defence) -> String {
        if d == Defence::FastpathSyncookie {
            return syncookie_rule();
        }
        match self {
            Flood::Udp => "[[rule]]\nname = \"flood\"\nproto = \"udp\"\ndst_port = 9\naction = \"drop\"\n".into(),
            Flood::Syn => format!(
                "[[rule]]\nname = \"syn\"\nproto = \"tcp\"\ndst_port = \"{PORT_FIRST}-{PORT_LAST}\"\ntcp_flags = \"syn,!ack\"\naction = \"pass\"\nrate = {SYN_RATE_PER_SOURCE}\nrate_total = {SYN_RATE_TOTAL}\n"
            ),
            Flood::Ack => format!(
                "[[rule]]\nname = \"ack\"\nproto = \"tcp\"\ndst_port = \"{PORT_FIRST}-{PORT_LAST}\"\ntcp_flags = \"ack,!fin,!syn,!rst,!psh\"\naction = \"pass\"\nrate = {ACK_RATE_PER_SOURCE}\n"
            ),
        }
    }

    /// The defence `d` against this flood, in words (the survivable-rate lines).
    pub fn describe_defence(self, d: Defence) -> String {
        match (self, d) {
            (_, Defence::None) if self != Flood::Udp => "no filter (SYN cookies on)".into(),
            (_, Defence::None) => "no filter".into(),
            (_, Defence::FastpathSyncookie) => d.describe().into(),
            (Flood::Udp, _) => d.describe().into(),
            (Flood::Syn, Defence::Nft) => format!("nftables raw-table SYN limit: {SYN_RATE_PER_SOURCE}/s per source (meter), {SYN_RATE_TOTAL}/s in all"),
            (Flood::Syn, Defence::Iptables) => format!("iptables raw-table SYN limit (hashlimit): {SYN_RATE_PER_SOURCE}/s per source, {SYN_RATE_TOTAL}/s in all"),
            (Flood::Syn, _) => format!("{}: SYNs rate-limited, {SYN_RATE_PER_SOURCE}/s per source, {SYN_RATE_TOTAL}/s in all", d.describe()),
            (Flood::Ack, Defence::Nft) => format!("nftables raw-table pure-ACK limit (stateless): {ACK_RATE_PER_SOURCE}/s per source (meter)"),
            (Flood::Ack, Defence::Iptables) => format!("iptables raw-table pure-ACK limit (stateless, hashlimit): {ACK_RATE_PER_SOURCE}/s per source"),
            (Flood::Ack, _) => format!("{}: pure ACKs rate-limited (stateless), {ACK_RATE_PER_SOURCE}/s per source", d.describe()),
        }
    }
}

/// A TCP SYN from 10.128.0.0:40000 to the victim's `port`, padded to 60 bytes (Ethernet's
/// minimum without FCS; the IP total length excludes the padding).
fn syn_frame(src_mac: [u8; 6], dst_mac: [u8; 6], port: u16) -> Result<Vec<u8>, String> {
    let b = etherparse::PacketBuilder::ethernet2(src_mac, dst_mac)
        .ipv4(FLOOD_SRC_BASE.octets(), fastpath_testbed::IP4_B.octets(), 64)
        .tcp(40000, port, 1, 64240)
        .syn();
    let mut f = Vec::with_capacity(60);
    b.write(&mut f, &[]).map_err(|e| e.to_string())?;
    f.resize(60, 0);
    Ok(f)
}

/// The rule of `fastpath-syncookie`: SYN cookies for the service's ports.
fn syncookie_rule() -> String {
    format!(
        "[[rule]]\nname = \"syncookie\"\nproto = \"tcp\"\ndst_port = \"{PORT_FIRST}-{PORT_LAST}\"\naction = \"syncookie\"\n"
    )
}

/// A pure TCP ACK from 10.128.0.0:40000 to the victim's `port`, out of state (no handshake
/// before it; sequence 0x1234_5678, acknowledging 0x9abc_def0: the flows vary the source, so
/// its acknowledgement number is no valid cookie but by a 2^-24 chance), padded to 60 bytes.
fn ack_frame(src_mac: [u8; 6], dst_mac: [u8; 6], port: u16) -> Result<Vec<u8>, String> {
    let b = etherparse::PacketBuilder::ethernet2(src_mac, dst_mac)
        .ipv4(FLOOD_SRC_BASE.octets(), fastpath_testbed::IP4_B.octets(), 64)
        .tcp(40000, port, 0x1234_5678, 64240)
        .ack(0x9abc_def0);
    let mut f = Vec::with_capacity(60);
    b.write(&mut f, &[]).map_err(|e| e.to_string())?;
    f.resize(60, 0);
    Ok(f)
}

/// An offered flood rate: frames per second, or `max` (as fast as the generator goes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloodRate {
    /// This many frames per second.
    Pps(u64),
    /// As fast as the generator goes.
    Max,
}

impl FromStr for FloodRate {
    type Err = String;
    /// `250k`, `1M`, `1.5M`, `300000` or `max`; 1,000 ..= 100,000,000 frames/s.
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "max" {
            return Ok(FloodRate::Max);
        }
        let bad = || {
            format!("flood rate {s:?} is not accepted: a rate in frames/s such as 250k, 1M, 1.5M or 300000 (1k..=100M), or max")
        };
        let (num, mult) = match s.as_bytes().last() {
            Some(b'k') => (&s[..s.len() - 1], 1e3),
            Some(b'M') => (&s[..s.len() - 1], 1e6),
            _ => (s, 1.0),
        };
        let v: f64 = num.parse().map_err(|_| bad())?;
        let pps = v * mult;
        if !pps.is_finite() || !(1e3..=1e8).contains(&pps) {
            return Err(bad());
        }
        Ok(FloodRate::Pps(pps.round() as u64))
    }
}

impl fmt::Display for FloodRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FloodRate::Max => write!(f, "max"),
            FloodRate::Pps(p) if p % 1_000_000 == 0 => write!(f, "{}M", p / 1_000_000),
            FloodRate::Pps(p) if *p >= 1_000_000 && p % 100_000 == 0 => write!(f, "{}M", *p as f64 / 1e6),
            FloodRate::Pps(p) if p % 1_000 == 0 => write!(f, "{}k", p / 1_000),
            FloodRate::Pps(p) => write!(f, "{p}"),
        }
    }
}

/// Parses `--flood-rates`: a comma-separated list of [`FloodRate`]s, each once.
///
/// # Errors
///
/// A one-line message naming the value and what is accepted: a rate that does not parse, or
/// one listed twice.
pub fn parse_flood_rates(s: &str) -> Result<Vec<FloodRate>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let r: FloodRate = part.trim().parse()?;
        if out.contains(&r) {
            return Err(format!(
                "--flood-rates {s} is not accepted: {r} is listed twice (each rate once, e.g. 250k,1M,max)"
            ));
        }
        out.push(r);
    }
    Ok(out)
}

/// One phase's result.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// The flood model of the row set ("per-frame", "coalesced"; [`Model::name`]).
    pub model: &'static str,
    /// "none" for the no-flood phase and the unfiltered floods, else the defence's name.
    pub defence: &'static str,
    /// The offered rate as given ("250k", "max"), or "" with no flood.
    pub offered: String,
    /// The offered rate in frames/s: the nominal one, or for "max" the generator's measured.
    pub offered_pps: f64,
    /// 0 when the service was unreachable (see `service_error`).
    pub transactions_per_s: f64,
    /// sockperf's latency: half the TCP round trip, microseconds (None: unreachable).
    pub latency_p50_us: Option<f64>,
    /// 99th percentile, microseconds (None: unreachable).
    pub latency_p99_us: Option<f64>,
    /// 99.9th percentile, microseconds (None: unreachable).
    pub latency_p999_us: Option<f64>,
    /// Maximum, microseconds (None: unreachable).
    pub latency_max_us: Option<f64>,
    /// sockperf's last line when it measured nothing (e.g. its connection timed out).
    pub service_error: Option<String>,
    /// Flood frames the generator sent per second (over the whole flood).
    pub flood_sent_pps: f64,
    /// Frames per second the receiving veth accepted during the service's window (its
    /// rx_queue_*_xdp_packets): the load the victim's CPU saw.
    pub reaching_victim_pps: f64,
    /// Flood frames generated over the whole flood ...
    pub flood_sent: u64,
    /// ... of which the receiving veth accepted (the sender's `tx_queue_*_xdp_xmit`) ...
    pub flood_accepted: u64,
    /// ... and refused (`tx_queue_*_xdp_xmit_errors`: its 256-slot ring was full).
    pub flood_refused: u64,
    /// Share of the paced flood's 1 ms windows that held the nominal rate within 20%
    /// (None for "max" and no flood).
    pub paced_windows_within_20pct: Option<f64>,
    /// The service CPU's time in softirq, % (/proc/stat), during the service's window.
    pub service_cpu_softirq_pct: f64,
    /// The receiving NAPI thread's CPU time, % of one CPU (/proc/PID/stat), same window.
    pub napi_thread_cpu_pct: f64,
    /// Frames the defence dropped during the phase, by its own counter (nft/iptables rule
    /// counter, the classifier's rule counter); 0 without a defence.
    pub dropped_by_defence: u64,
    /// UDP flood: flood frames that got past the defence to the victim's UDP layer during the
    /// phase (Udp NoPorts + InErrors of its namespace: nothing listens on port 9), so that
    /// flood_accepted = dropped_by_defence + this; None for the SYN flood and without a flood.
    pub flood_reached_stack: Option<u64>,
    /// Coalesced model: share of the service's window, %, in which the controller held the
    /// victim's NAPI at a coalescing level (polls every rx-usecs); None in the per-frame model.
    pub napi_coalescing_pct: Option<f64>,
    /// `fastpath-syncookie`: SYN-ACKs with cookies the classifier sent per second during the
    /// phase (its `syncookie_synack` counter between the phase's two counter reads, before the
    /// flood starts and after it ends; the service's handshakes included); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syncookie_synack_per_s: Option<f64>,
    /// `fastpath-syncookie`: the SYN-ACKs of `syncookie_synack_per_s`, counted (every flood SYN
    /// the victim accepted and did not drop, plus the clients' own SYNs and retransmissions);
    /// absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syncookie_synack_sent: Option<u64>,
    /// The connect probe (from ns a, on the service's CPU): new TCP connections attempted during
    /// the service's window, paced evenly, to an echo server on the service's port + 5000.
    pub connects_attempted: u32,
    /// Those that connected within 1 s and had their one byte echoed within 1 s more.
    pub connects_succeeded: u32,
    /// Connect time (connect() called to established) of the successful ones, ms, median;
    /// None if none succeeded.
    pub connect_p50_ms: Option<f64>,
    /// The same, 99th percentile (nearest rank).
    pub connect_p99_ms: Option<f64>,
}

/// Per defence: the highest offered rate at which the service kept >= 50% of its no-flood
/// transactions/s (None: not even the lowest).
#[derive(Debug, Clone, Serialize)]
pub struct Survival {
    /// The flood model ([`Model::name`]).
    pub model: &'static str,
    /// The defence's name.
    pub defence: &'static str,
    /// The survivable rate as given ("250k"), None: not even the lowest.
    pub survivable: Option<String>,
    /// The same in frames/s.
    pub survivable_pps: Option<f64>,
}

/// A defence installed in the victim's namespace; removed on drop (and with the namespace).
enum Installed {
    None,
    Nft {
        ns: String,
    },
    Iptables {
        ns: String,
        rules: Vec<Vec<String>>,
    },
    Classifier {
        done: Arc<AtomicBool>,
        req: mpsc::Sender<mpsc::Sender<(u64, Option<u64>)>>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

impl Defence {
    /// Its name on the command line and in the JSON ("none", "nft", "fastpath-10k"...).
    pub fn name(self) -> &'static str {
        match self {
            Defence::None => "none",
            Defence::Nft => "nft",
            Defence::Iptables => "iptables",
            Defence::Fastpath => "fastpath",
            Defence::Fastpath10k => "fastpath-10k",
            Defence::FastpathSyncookie => "fastpath-syncookie",
        }
    }
    /// The defence in words.
    pub fn describe(self) -> &'static str {
        match self {
            Defence::None => "no filter",
            Defence::Nft => "nftables raw-table drop (prerouting, priority raw)",
            Defence::Iptables => "iptables raw-table drop (PREROUTING)",
            Defence::Fastpath => "fastpath classifier, one rule (XDP, native)",
            Defence::Fastpath10k => "fastpath classifier, the rule last behind 10,000 others",
            Defence::FastpathSyncookie => "fastpath classifier, one rule action = \"syncookie\" for the service's ports (SYN-ACKs with cookies at the driver, out-of-state ACKs dropped)",
        }
    }
}

/// The flood rule's drop counter in the nftables table (`nft -j list table`).
fn nft_count(ns: &str) -> LabResult<u64> {
    tools::nft_packets(ns, NFT_TABLE)
}

/// Udp NoPorts + InErrors of namespace `ns` (/proc/net/snmp): where a UDP datagram to a port
/// nobody listens on, or a damaged one, ends in the stack.
fn udp_unwanted(ns: &str) -> LabResult<u64> {
    let out = tools::ns_snmp(ns)?;
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("Udp:")).collect();
    let [names, values, ..] = lines.as_slice() else {
        return Err(runtime(anyhow!("no Udp lines in /proc/net/snmp of {ns}")));
    };
    let v: Vec<(&str, u64)> =
        names.split_whitespace().zip(values.split_whitespace()).map(|(n, v)| (n, v.parse().unwrap_or(0))).collect();
    Ok(v.iter().filter(|(n, _)| *n == "NoPorts" || *n == "InErrors").map(|(_, v)| v).sum())
}

/// The flood rule's packet counter in iptables' raw PREROUTING chain.
fn iptables_count(ns: &str) -> LabResult<u64> {
    let out = tools::iptables_raw_listing(ns)?;
    Ok(out
        .lines()
        .filter(|l| {
            // The match is the last word: "udp dpt:9" or "tcp dpts:20000:29999 ... limit: above ...".
            let dports = format!("dpts:{PORT_FIRST}:{PORT_LAST}");
            l.contains("DROP") && l.split_whitespace().any(|w| w == "dpt:9" || w == dports)
        })
        .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        .sum())
}

/// The rule set of a classifier defence: the flood's rule alone, or last behind
/// [`RULES_IN_FRONT`] others (source /32s with UDP ports, destination /24s; none matches the
/// flood). Returns the TOML text and the flood rule's index.
fn classifier_rules(in_front: usize, kind: Flood, d: Defence) -> (String, usize) {
    let mut t = fastpath::rules::mixed_rules_toml(in_front, 0);
    t += &kind.classifier_rule(d);
    (t, in_front)
}

impl Installed {
    fn install(d: Defence, bed: &Testbed, kind: Flood) -> LabResult<Self> {
        let ns = bed.ns_b().to_string();
        match d {
            Defence::None => Ok(Installed::None),
            Defence::Nft => {
                let script = tools::nft_raw_table(NFT_TABLE, &kind.nft_rules(), true);
                tools::nft_apply(&ns, &script).map_err(|e| match e {
                    tools::ToolError::Start(e) => env(anyhow!("nft (Debian package nftables): {e}")),
                    tools::ToolError::Io(e) => runtime(anyhow!("nft -f -: {e}")),
                    tools::ToolError::Failed(s) => runtime(anyhow!("nft -f - failed: {}", s.trim())),
                })?;
                Ok(Installed::Nft { ns })
            }
            Defence::Iptables => {
                // The rules added so far are held by `inst`: on an error its drop removes them,
                // so nothing is left half-applied.
                let mut inst = Installed::Iptables { ns: ns.clone(), rules: Vec::new() };
                for r in kind.iptables_rules() {
                    tools::iptables_raw_append(&ns, &r)?;
                    if let Installed::Iptables { rules, .. } = &mut inst {
                        rules.push(r);
                    }
                }
                Ok(inst)
            }
            Defence::Fastpath | Defence::Fastpath10k | Defence::FastpathSyncookie => {
                let in_front = if d == Defence::Fastpath10k { RULES_IN_FRONT } else { 0 };
                let (text, index) = classifier_rules(in_front, kind, d);
                let iface = bed.iface_b().to_string();
                let done = Arc::new(AtomicBool::new(false));
                let syncookie = d == Defence::FastpathSyncookie;
                let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
                let (req_tx, req_rx) = mpsc::channel::<mpsc::Sender<(u64, Option<u64>)>>();
                let d2 = done.clone();
                // The classifier is loaded, attached and held by a thread in the victim's
                // namespace; it answers counter requests until `done`.
                let h = spawn_in_netns(&ns, move || {
                    let cls = match classifier_on("ddos rules", &text, &iface) {
                        Ok(c) => {
                            let _ = ready_tx.send(Ok(()));
                            c
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    while !d2.load(Ordering::Relaxed) {
                        if let Ok(reply) = req_rx.recv_timeout(Duration::from_millis(20)) {
                            let set = cls.active().unwrap_or(fastpath::bpf::SetIndex::Zero);
                            // syncookie: every frame it dropped (bad cookie, invalid, malformed), and the
                            // SYN-ACKs it sent; UDP: the flood rule's drops; SYN and ACK: what
                            // the rate limits dropped.
                            let n = match kind {
                                _ if syncookie => cls
                                    .totals(set)
                                    .map(|t| {
                                        // All its XDP drops: syncookie_ack_bad + syncookie_invalid
                                        // and `malformed` frames (dropped before the rule).
                                        (t.packets("drop"), Some(t.packets("syncookie_synack")))
                                    })
                                    .unwrap_or((0, Some(0))),
                                Flood::Udp => (
                                    cls.rule_counters(set, index + 1)
                                        .ok()
                                        .and_then(|v| v.get(index).map(|c| c.0))
                                        .unwrap_or(0),
                                    None,
                                ),
                                Flood::Syn | Flood::Ack => {
                                    (cls.totals(set).map(|t| t.packets("rate_dropped")).unwrap_or(0), None)
                                }
                            };
                            let _ = reply.send(n);
                        }
                    }
                });
                let r = match ready_rx.recv_timeout(Duration::from_secs(60)) {
                    Ok(Ok(())) => {
                        return Ok(Installed::Classifier {
                            done,
                            req: req_tx,
                            thread: Some(std::thread::spawn(move || {
                                let _ = h.join();
                            })),
                        })
                    }
                    Ok(Err(e)) => Err(kernel(anyhow!("loading the classifier defence: {e}"))),
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        Err(runtime(anyhow!("the classifier defence did not start within 60 s")))
                    }
                    // The thread ended before loading: entering the namespace failed.
                    Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
                        Ok(Err(e)) => Err(LabError::from(e)),
                        _ => Err(runtime(anyhow!("the classifier defence's thread ended before loading"))),
                    },
                };
                // Nothing stays attached: the thread sees `done` and detaches what it holds.
                done.store(true, Ordering::Relaxed);
                r
            }
        }
    }

    /// Frames the defence has dropped so far, and SYN-ACKs it has sent (`fastpath-syncookie`
    /// only, else None).
    fn counters(&self) -> LabResult<(u64, Option<u64>)> {
        match self {
            Installed::None => Ok((0, None)),
            Installed::Nft { ns } => Ok((nft_count(ns)?, None)),
            Installed::Iptables { ns, .. } => Ok((iptables_count(ns)?, None)),
            Installed::Classifier { req, .. } => {
                let (tx, rx) = mpsc::channel();
                req.send(tx).map_err(|_| runtime(anyhow!("the classifier defence's thread ended")))?;
                rx.recv_timeout(Duration::from_secs(10))
                    .map_err(|_| runtime(anyhow!("the classifier defence did not answer")))
            }
        }
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        match self {
            Installed::None => {}
            Installed::Nft { ns } => {
                tools::nft_delete_table(ns, NFT_TABLE);
            }
            Installed::Iptables { ns, rules } => {
                for r in rules.iter() {
                    tools::iptables_raw_delete(ns, r);
                }
            }
            Installed::Classifier { done, thread, .. } => {
                done.store(true, Ordering::Relaxed);
                if let Some(t) = thread.take() {
                    let _ = t.join();
                }
            }
        }
    }
}

/// Compiles the rule set `text` (named `what` in errors), loads a classifier with it and
/// attaches it (native XDP) to `iface` in the calling thread's namespace; dropping the returned
/// classifier detaches it.
fn classifier_on(what: &str, text: &str, iface: &str) -> Result<Classifier, String> {
    let set = parse_toml(what, text).map_err(|e| e.to_string())?;
    let c = compile(what, &set).map_err(|e| e.to_string())?;
    let dev = fastpath::netdev::Iface::resolve(iface).map_err(|e| e.to_string())?;
    let cls = Classifier::load().map_err(|e| format!("{e:#}"))?;
    cls.swap_in(&c).map_err(|e| format!("{e:#}"))?;
    let a = cls.attach(&dev, fastpath::bpf::AttachOpts::mode(Some(XdpMode::Native))).map_err(|e| format!("{e:#}"))?;
    Ok(a.prog)
}

/// The classifier on the clients' veth in ns a (native XDP), held by a thread for as long as
/// this lives and detached on drop: it drops frames to the flood's spoofed sources
/// ([`clients_xdp_rules`]) and passes the rest. The drop is the wire: the victim's answers to
/// a TCP flood (the kernel's SYN-ACKs and RSTs, the classifier's XDP_TX SYN-ACKs) leave a
/// NIC's host, while a veth's are received on the victim's CPU (the clients' veth NAPI or
/// backlog is scheduled there by the sender) and would go up ns a's stack to be dropped as not
/// local; an XDP drop leaves that CPU only the poll. A veth also delivers the frames its peer
/// sends with XDP_TX only to a NAPI that XDP keeps running (drivers/net/veth.c: veth_xdp_xmit
/// queues them on the peer's xdp_ring, polled by its NAPI, which exists only with XDP or GRO),
/// so the SYN-ACKs `action = "syncookie"` sends need it.
struct ClientsXdp {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<(), fastpath_testbed::TestbedError>>>,
}

impl ClientsXdp {
    /// Attaches it; on an error nothing stays attached.
    fn start(bed: &Testbed) -> LabResult<Self> {
        let iface = bed.iface_a().to_string();
        let done = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<Result<(), String>>();
        let d2 = done.clone();
        let h =
            spawn_in_netns(bed.ns_a(), move || match classifier_on("clients' veth", &clients_xdp_rules(), &iface) {
                Ok(_held) => {
                    let _ = tx.send(Ok(()));
                    while !d2.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok(())) => Ok(ClientsXdp { done, thread: Some(h) }),
            Ok(Err(e)) => Err(kernel(anyhow!(
                "loading the classifier on the clients' veth (TCP floods and fastpath-syncookie need it): {e}"
            ))),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                done.store(true, Ordering::Relaxed);
                Err(runtime(anyhow!("the classifier on the clients' veth did not start within 60 s")))
            }
            // The thread ended before loading: entering the namespace failed.
            Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
                Ok(Err(e)) => Err(LabError::from(e)),
                _ => Err(runtime(anyhow!("the classifier thread of the clients' veth ended before loading"))),
            },
        }
    }
}

impl Drop for ClientsXdp {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts the service (sockperf server on the service's CPU) and returns once its port listens
/// (ss). One per phase: a server whose client vanished under a flood can stop answering.
fn start_server(bed: &Testbed, port: u16) -> LabResult<Running> {
    let server = tools::sockperf_server(bed.ns_b(), Some(SERVICE_CPU), "10.99.0.2", port)
        .map_err(|e| env(anyhow!("starting sockperf server: {e}")))?;
    let t0 = Instant::now();
    loop {
        if tools::tcp_listening(bed.ns_b(), port) {
            return Ok(server);
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(runtime(anyhow!("the sockperf server did not listen on port {port} within 10 s")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The connect probe's echo server: a thread in ns b, on the service's CPU, accepting on
/// 10.99.0.2:`port` and echoing one byte per connection; stopped (and its port closed) on drop.
struct EchoServer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<(), fastpath_testbed::TestbedError>>>,
}

impl EchoServer {
    fn start(bed: &Testbed, port: u16) -> LabResult<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let (tx, rx) = mpsc::channel::<Result<(), String>>();
        let thread = spawn_in_netns(bed.ns_b(), move || {
            let _ = fastpath::workers::pin_current_thread(SERVICE_CPU);
            let l = match std::net::TcpListener::bind((fastpath_testbed::IP4_B, port))
                .and_then(|l| l.set_nonblocking(true).map(|_| l))
            {
                Ok(l) => {
                    let _ = tx.send(Ok(()));
                    l
                }
                Err(e) => {
                    let _ = tx.send(Err(format!("binding the connect probe's echo server to port {port}: {e}")));
                    return;
                }
            };
            while !st.load(Ordering::Relaxed) {
                match l.accept() {
                    // A thread per connection (inheriting the namespace and CPU): one whose byte
                    // is late holds back no other.
                    Ok((mut c, _)) => {
                        std::thread::spawn(move || {
                            use std::io::{Read, Write};
                            let _ = c.set_nonblocking(false);
                            let _ = c.set_read_timeout(Some(CONNECT_TIMEOUT));
                            let mut b = [0u8; 1];
                            if c.read_exact(&mut b).is_ok() {
                                let _ = c.write_all(&b);
                            }
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(EchoServer { stop, thread: Some(thread) }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(runtime(anyhow!("{e}")))
            }
            Err(_) => {
                stop.store(true, Ordering::Relaxed);
                Err(runtime(anyhow!("the connect probe's echo server did not start within 10 s")))
            }
        }
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One phase's connect probe.
#[derive(Debug, Default)]
struct Probe {
    attempted: u32,
    succeeded: u32,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
}

/// The nearest-rank `q` quantile (0..=1) of sorted `v`; None if empty.
fn quantile(v: &[f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

/// Starts the connect probe: a thread in ns a pinned to the service's CPU (as sockperf's
/// clients: the attacker holds the others) making [`PROBE_CONNECTS`] new connections to
/// 10.99.0.2:`port`, one every `secs` / PROBE_CONNECTS, each in a thread of its own (so a lost
/// SYN does not hold back the next): connect within [`CONNECT_TIMEOUT`], send a byte, read its
/// echo within CONNECT_TIMEOUT, close. Joined, it gives the counts and connect times.
fn spawn_connect_probe(bed: &Testbed, port: u16, secs: f64) -> std::thread::JoinHandle<LabResult<Probe>> {
    let ns = bed.ns_a().to_string();
    std::thread::spawn(move || {
        let h = spawn_in_netns(&ns, move || {
            let _ = fastpath::workers::pin_current_thread(SERVICE_CPU);
            let addr = std::net::SocketAddr::from((fastpath_testbed::IP4_B, port));
            let every = Duration::from_secs_f64(secs.max(0.01) / f64::from(PROBE_CONNECTS));
            let t0 = Instant::now();
            let mut tries = Vec::new();
            for i in 0..PROBE_CONNECTS {
                let at = t0 + every * i;
                if let Some(d) = at.checked_duration_since(Instant::now()) {
                    std::thread::sleep(d);
                }
                // Threads inherit the namespace and the CPU affinity of this one.
                tries.push(std::thread::spawn(move || -> Option<f64> {
                    use std::io::{Read, Write};
                    let t = Instant::now();
                    let mut c = std::net::TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).ok()?;
                    let ms = t.elapsed().as_secs_f64() * 1e3;
                    c.set_read_timeout(Some(CONNECT_TIMEOUT)).ok()?;
                    c.write_all(&[7]).ok()?;
                    let mut b = [0u8; 1];
                    c.read_exact(&mut b).ok()?;
                    (b[0] == 7).then_some(ms)
                }));
            }
            let mut ok: Vec<f64> = tries.into_iter().filter_map(|t| t.join().ok().flatten()).collect();
            ok.sort_by(f64::total_cmp);
            Probe {
                attempted: PROBE_CONNECTS,
                succeeded: ok.len() as u32,
                p50_ms: quantile(&ok, 0.5),
                p99_ms: quantile(&ok, 0.99),
            }
        });
        match h.join() {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(e)) => Err(LabError::from(e)),
            Err(_) => Err(runtime(anyhow!("the connect probe's thread panicked"))),
        }
    })
}

/// (busy-or-not total, softirq) jiffies of one CPU from /proc/stat.
fn cpu_jiffies(cpu: usize) -> (u64, u64) {
    let name = format!("cpu{cpu}");
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.split_whitespace().next() == Some(name.as_str())).map(|l| {
                let v: Vec<u64> = l.split_whitespace().skip(1).take(8).filter_map(|x| x.parse().ok()).collect();
                (v.iter().sum(), v.get(6).copied().unwrap_or(0))
            })
        })
        .unwrap_or((0, 0))
}

/// CPU time of the threads `pids` so far, ns (/proc/PID/schedstat, first field: time spent
/// running; Documentation/scheduler/sched-stats.rst).
fn thread_run_ns(pids: &[i32]) -> u64 {
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

struct Ctx<'a> {
    bed: &'a Testbed,
    model: Model,
    /// The coalesced model's controller (None: per frame).
    coalescer: Option<&'a Coalescer>,
    kind: Flood,
    /// Spoofed source addresses of the flood ([`flood_spread`]).
    flood_sources: u32,
    /// Phases started so far: phase i's service listens on PORT_FIRST + i.
    phases: std::sync::atomic::AtomicU32,
    napi_pids: Vec<i32>,
    flood_cpus: Vec<usize>,
    secs: f64,
    stop: &'a Arc<AtomicBool>,
}

/// The flood's thread; on drop (an early return) it is told to stop and joined, so no
/// generator outlives its phase.
struct FloodGuard(Stoppable<Result<FloodResult, fastpath_testbed::TestbedError>>);

/// Frames sent, seconds, (accepted, refused) by the veth, share of 1 ms windows within 20%.
type FloodTotals = (u64, f64, (u64, u64), Option<f64>);
type FloodResult = Result<FloodTotals, String>;

impl FloodGuard {
    fn finish(self) -> LabResult<FloodTotals> {
        self.0
            .join()
            .map_err(|_| runtime(anyhow!("flood thread panicked")))?
            .map_err(|e| runtime(anyhow!("{e}")))?
            .map_err(|e| runtime(anyhow!("{e}")))
    }
}

/// Starts the flood from ns a and returns once the generator runs (or failed to start).
fn start_flood(cx: &Ctx, r: FloodRate, port: u16) -> LabResult<FloodGuard> {
    let bed = cx.bed;
    let done = Arc::new(AtomicBool::new(false));
    let (iface, mac_b, d, cpus, kind, sources) =
        (bed.iface_a().to_string(), bed.mac_b(), done.clone(), cx.flood_cpus.clone(), cx.kind, cx.flood_sources);
    let rate_pps = match r {
        FloodRate::Pps(p) => Some(p),
        FloodRate::Max => None,
    };
    let (started_tx, started_rx) = mpsc::channel::<Result<(), String>>();
    let thread = spawn_in_netns(bed.ns_a(), move || -> FloodResult {
        let setup = (|| -> Result<_, String> {
            let dev = NetDev::by_name(&iface).map_err(|e| e.to_string())?;
            let eth0 = dev.ethtool_stats().map_err(|e| e.to_string())?;
            let src_mac = dev.mac().map_err(|e| e.to_string())?;
            let (gen, frame) = flood_generator(kind, sources, dev.ifindex, src_mac, mac_b, port)?;
            let gen = Arc::new(gen);
            let counters: Vec<Arc<Counters>> = cpus.iter().map(|_| Arc::new(Counters::default())).collect();
            let t0 = Instant::now();
            let live = bench::LiveGen::start(gen, &frame, &cpus, SendLimits { count: None, rate_pps }, 64, &counters)
                .map_err(|e| e.to_string())?;
            Ok((dev, eth0, t0, live))
        })();
        let (dev, eth0, t0, live) = match setup {
            Ok(v) => {
                let _ = started_tx.send(Ok(()));
                v
            }
            Err(e) => {
                let _ = started_tx.send(Err(e.clone()));
                return Err(e);
            }
        };
        let pace = live.pace();
        while !d.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let sent = live.stop().map_err(|e| e.to_string())?;
        let secs = t0.elapsed().as_secs_f64();
        // Let the frames still in the veth ring land before reading what it took.
        std::thread::sleep(Duration::from_millis(100));
        let eth = fastpath::netdev::stats_delta(&eth0, &dev.ethtool_stats().map_err(|e| e.to_string())?);
        let sum = |err: bool| -> u64 {
            eth.iter().filter(|(k, _)| k.contains("xdp_xmit") && k.contains("err") == err).map(|(_, v)| v).sum()
        };
        Ok((sent, secs, (sum(false), sum(true)), pace.share_within_20pct()))
    });
    let guard = FloodGuard(Stoppable::new(done, thread));
    match started_rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(())) => Ok(guard),
        Ok(Err(e)) => Err(kernel(anyhow!("starting the flood: {e}"))),
        Err(_) => match guard.finish() {
            Err(e) => Err(e),
            Ok(_) => Err(runtime(anyhow!("the flood did not start within 30 s"))),
        },
    }
}

fn phase(cx: &Ctx, defence: Defence, inst: &Installed, rate: Option<FloodRate>) -> LabResult<Phase> {
    let bed = cx.bed;
    let n = cx.phases.fetch_add(1, Ordering::Relaxed);
    let port = PORT_FIRST + (n % u32::from(PROBE_OFFSET)) as u16;
    let _server = start_server(bed, port)?;
    let echo = EchoServer::start(bed, port + PROBE_OFFSET)?;
    // The defence's counter, and the victim's UDP layer, before any flood frame.
    let (drop0, synack0) = inst.counters()?;
    let t_counters = Instant::now();
    let udp_flood = rate.is_some() && cx.kind == Flood::Udp;
    let stack0 = if udp_flood { Some(udp_unwanted(bed.ns_b())?) } else { None };
    let flood = match rate {
        Some(r) => Some(start_flood(cx, r, port)?),
        None => None,
    };
    // Let the paced flood settle into its schedule before the service's window.
    std::thread::sleep(Duration::from_millis(200));
    let accepted = |bed: &Testbed| -> u64 {
        Testbed::ethtool_stats(bed.ns_b(), bed.iface_b())
            .unwrap_or_default()
            .iter()
            .filter(|(k, _)| k.ends_with("xdp_packets"))
            .map(|(_, v)| *v)
            .sum()
    };
    let acc0 = accepted(bed);
    let coalescing_ns = || cx.coalescer.map(|c| c.stats().coalescing_ns.load(Ordering::Relaxed));
    let co0 = coalescing_ns();
    let (cpu0, napi0, t_acc) = (cpu_jiffies(SERVICE_CPU), thread_run_ns(&cx.napi_pids), Instant::now());
    // The connect probe, from ns a, beside the service's clients.
    let probe = spawn_connect_probe(bed, port + PROBE_OFFSET, cx.secs);
    // The service's clients, from ns a.
    // `timeout -s KILL`: a client whose SYN was lost at the full ring would retry its connect
    // for minutes; after the window and a margin the service counts as unreachable.
    let out = tools::sockperf_ping_pong_pinned(
        bed.ns_a(),
        SERVICE_CPU,
        "10.99.0.2",
        port,
        cx.secs as u64,
        cx.secs as u64 + 5,
    );
    let elapsed = t_acc.elapsed().as_secs_f64();
    let probe = probe.join().map_err(|_| runtime(anyhow!("the connect probe panicked")))??;
    drop(echo);
    let (cpu1, napi1) = (cpu_jiffies(SERVICE_CPU), thread_run_ns(&cx.napi_pids));
    let coalescing_pct = match (co0, coalescing_ns()) {
        (Some(a), Some(b)) => Some((100.0 * b.saturating_sub(a) as f64 / 1e9 / elapsed).min(100.0)),
        _ => None,
    };
    let reaching = accepted(bed).saturating_sub(acc0) as f64 / elapsed;
    let softirq_pct = 100.0 * (cpu1.1 - cpu0.1) as f64 / (cpu1.0 - cpu0.0).max(1) as f64;
    let napi_pct = 100.0 * napi1.saturating_sub(napi0) as f64 / 1e9 / elapsed;
    let (sent, flood_secs, link, paced) = match flood {
        Some(f) => f.finish()?,
        None => (0, 1.0, Default::default(), None),
    };
    let (drop1, synack1) = inst.counters()?;
    let dropped = drop1.saturating_sub(drop0);
    let synack_sent = match (synack0, synack1) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let synack_per_s = synack_sent.map(|s| s as f64 / t_counters.elapsed().as_secs_f64());
    let reached_stack = match stack0 {
        Some(s0) => Some(udp_unwanted(bed.ns_b())?.saturating_sub(s0)),
        None => None,
    };
    let text = out.map_err(|e| env(anyhow!("running sockperf (Debian package sockperf): {e}")))?;
    if cx.stop.load(Ordering::Relaxed) {
        return Err(runtime(anyhow!("interrupted")));
    }
    let label = match rate {
        Some(r) => format!("{} flood {r}", defence.name()),
        None => "no flood".into(),
    };
    // Under a flood the service may be unreachable (its SYN lost at the full ring): that is a
    // result, 0 transactions/s; without a flood it is an error.
    let (tps, p50, p99, p999, max) = match tools::parse_sockperf(&text) {
        Some(s) => (s.transactions_per_s, Some(s.p50_us), Some(s.p99_us), Some(s.p999_us), Some(s.max_us)),
        None if rate.is_some() => (0.0, None, None, None, None),
        None => {
            return Err(runtime(anyhow!(
                "sockperf printed no statistics ({label}): {}",
                text.lines().last().unwrap_or("")
            )))
        }
    };
    let unreachable = (tps == 0.0).then(|| text.lines().last().unwrap_or("").trim().to_string());
    let sent_pps = sent as f64 / flood_secs;
    Ok(Phase {
        model: cx.model.name(),
        defence: if rate.is_some() { defence.name() } else { "none" },
        offered: rate.map(|r| r.to_string()).unwrap_or_default(),
        offered_pps: match rate {
            Some(FloodRate::Pps(p)) => p as f64,
            Some(FloodRate::Max) => sent_pps,
            None => 0.0,
        },
        transactions_per_s: tps,
        latency_p50_us: p50,
        latency_p99_us: p99,
        latency_p999_us: p999,
        latency_max_us: max,
        service_error: unreachable,
        flood_sent_pps: sent_pps,
        reaching_victim_pps: if rate.is_some() { reaching } else { 0.0 },
        flood_sent: sent,
        flood_accepted: link.0,
        flood_refused: link.1,
        paced_windows_within_20pct: paced,
        service_cpu_softirq_pct: softirq_pct,
        napi_thread_cpu_pct: napi_pct,
        dropped_by_defence: dropped,
        flood_reached_stack: reached_stack,
        napi_coalescing_pct: coalescing_pct,
        syncookie_synack_per_s: synack_per_s,
        syncookie_synack_sent: synack_sent,
        connects_attempted: probe.attempted,
        connects_succeeded: probe.succeeded,
        connect_p50_ms: probe.p50_ms,
        connect_p99_ms: probe.p99_ms,
    })
}

/// A latency for the table: one decimal, or "-" when the service was unreachable.
fn us(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into())
}

/// A connect time for the table: ms with two decimals, or "-" when none succeeded.
fn ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into())
}

/// The survivable flood rate of each defence (see [`Survival`]) in one model, from the phases
/// of [`DdosBed::run`] (those of other models are ignored) and that model's no-flood
/// transactions/s.
pub fn survival(phases: &[Phase], model: Model, defences: &[Defence], baseline_tps: f64) -> Vec<Survival> {
    defences
        .iter()
        .map(|d| {
            let best = phases
                .iter()
                .filter(|p| p.model == model.name() && p.defence == d.name() && !p.offered.is_empty())
                .filter(|p| p.transactions_per_s >= 0.5 * baseline_tps)
                .max_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps));
            Survival {
                model: model.name(),
                defence: d.name(),
                survivable: best.map(|p| p.offered.clone()),
                survivable_pps: best.map(|p| p.offered_pps),
            }
        })
        .collect()
}

/// trans/s against offered flood rate, one line per defence; a dashed line at the no-flood
/// figure and one at half of it. `cmd`: the command line shown under the chart; `flood`: the
/// flood's name in the title ("UDP", "SYN").
pub fn svg(
    phases: &[Phase],
    defences: &[Defence],
    rates: &[FloodRate],
    baseline: f64,
    cmd: &str,
    flood: &str,
) -> String {
    let (w, h, l, r, t, b) = (760.0, 440.0, 80.0, 190.0, 40.0, 70.0);
    let pw = w - l - r;
    let ph = h - t - b;
    let ymax = phases.iter().map(|p| p.transactions_per_s).fold(baseline, f64::max) * 1.1;
    let x = |i: usize| l + pw * (i as f64 + 0.5) / rates.len().max(1) as f64;
    let y = |v: f64| t + ph * (1.0 - v / ymax.max(1.0));
    let colors = ["#888888", "#1f77b4", "#2ca02c", "#d62728", "#9467bd"];
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"10\" y=\"22\" font-size=\"14\" font-weight=\"bold\">TCP transactions/s of the service under a {flood} flood, by defence</text>\n"
    );
    s += &format!("<line x1=\"{l}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", t + ph, l + pw, t + ph);
    s += &format!("<line x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" y2=\"{}\" stroke=\"black\"/>\n", t + ph);
    for k in 0..=4 {
        let v = ymax * k as f64 / 4.0;
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
            l - 6.0,
            y(v) + 4.0,
            thousands(v.round() as u64)
        );
    }
    for (i, rt) in rates.iter().enumerate() {
        s += &format!("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{rt}</text>\n", x(i), t + ph + 18.0);
    }
    s += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">offered flood rate (frames/s)</text>\n",
        l + pw / 2.0,
        t + ph + 38.0
    );
    for (v, label) in [(baseline, "no flood"), (baseline / 2.0, "50% (survivable)")] {
        s += &format!(
            "<line x1=\"{l}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"#aaa\" stroke-dasharray=\"4 3\"/>\n<text x=\"{2}\" y=\"{3}\" fill=\"#666\">{label}</text>\n",
            y(v),
            l + pw,
            l + pw + 6.0,
            y(v) + 4.0
        );
    }
    for (di, d) in defences.iter().enumerate() {
        let c = colors[di % colors.len()];
        let pts: Vec<String> = rates
            .iter()
            .enumerate()
            .filter_map(|(i, rt)| {
                phases
                    .iter()
                    .find(|p| p.defence == d.name() && p.offered == rt.to_string())
                    .map(|p| format!("{:.1},{:.1}", x(i), y(p.transactions_per_s)))
            })
            .collect();
        s += &format!("<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>\n", pts.join(" "));
        for p in &pts {
            let (px, py) = p.split_once(',').unwrap_or(("0", "0"));
            s += &format!("<circle cx=\"{px}\" cy=\"{py}\" r=\"3\" fill=\"{c}\"/>\n");
        }
        let ly = t + 16.0 * di as f64 + 60.0;
        s += &format!(
            "<line x1=\"{0}\" y1=\"{ly}\" x2=\"{1}\" y2=\"{ly}\" stroke=\"{c}\" stroke-width=\"2\"/><text x=\"{2}\" y=\"{3}\">{4}</text>\n",
            l + pw + 6.0,
            l + pw + 26.0,
            l + pw + 30.0,
            ly + 4.0,
            d.name()
        );
    }
    s += &format!("<text x=\"10\" y=\"{}\" fill=\"#666\">{cmd}</text>\n</svg>\n", h - 10.0);
    s
}

/// What `bench ddos` is asked for (the front end has checked every value).
#[derive(Debug, Clone)]
pub struct DdosOptions {
    /// The flood.
    pub flood: Flood,
    /// The defences, each once, in order.
    pub defences: Vec<Defence>,
    /// The offered flood rates, each once, in order.
    pub rates: Vec<FloodRate>,
    /// The attacker's CPUs, one flood thread each (none of them [`SERVICE_CPU`]).
    pub flood_cpus: Vec<usize>,
    /// Seconds per phase; 0 = set up and tear down ([`DdosBed::smoke`]).
    pub duration_s: f64,
    /// The flood models, each a row set, in order (each once).
    pub models: Vec<Model>,
    /// The coalesced model's `rx-usecs` (1..=[`coalesce::MAX_RX_USECS`]).
    pub rx_usecs: u32,
    /// Spoofed source addresses of the flood, 1..=[`MAX_FLOOD_SOURCES`] (10.128.0.0 up;
    /// [`DEFAULT_FLOOD_SOURCES`] by default, 256 for the single /24 of earlier runs).
    pub flood_sources: u32,
}

/// The test bed of `bench ddos`, ready for its phases; removed on drop.
pub struct DdosBed {
    bed: Testbed,
    napi_pids: Vec<i32>,
    flood: Flood,
    defences: Vec<Defence>,
    rates: Vec<FloodRate>,
    flood_cpus: Vec<usize>,
    secs: f64,
    notes: Vec<String>,
    models: Vec<Model>,
    rx_usecs: u32,
    flood_sources: u32,
}

/// Checks the programs `bench ddos` drives (sockperf; nft and iptables when those defences are
/// asked for: without iptables its rows are left out, with a note) and builds its test bed:
/// no qdisc and no TSO on the sending veth, the receiving NAPI threaded on [`SERVICE_CPU`] at
/// SCHED_FIFO.
///
/// Needs root: creates network namespaces, runs ethtool in one.
///
/// # Errors
///
/// [`LabError::Usage`] for no model, a model twice, rx-usecs outside 1..=1000 with the
/// coalesced model, or flood sources outside 1..=[`MAX_FLOOD_SOURCES`]; [`LabError::Unsupported`] for the coalesced model on a kernel without the
/// netdev family's `napi-set` (Linux < 6.13), before any test bed exists;
/// [`LabError::Environment`] when sockperf (or nft, with that defence) is missing or ethtool
/// cannot be started, [`LabError::Testbed`] when the test bed cannot be made,
/// [`LabError::Runtime`] when ethtool fails.
pub fn prepare(o: &DdosOptions) -> LabResult<DdosBed> {
    // The models: at least one, each once; the coalesced one needs a period and, before any
    // test bed exists (rather than after the per-frame rows ran), the kernel's napi-set.
    let names = || o.models.iter().map(|m| m.name()).collect::<Vec<_>>().join(",");
    if o.models.is_empty() || (1..o.models.len()).any(|i| o.models[..i].contains(&o.models[i])) {
        return Err(crate::error::usage(anyhow!(
            "models [{}] are not accepted: one or both of per-frame, coalesced, each once",
            names()
        )));
    }
    if !(1..=MAX_FLOOD_SOURCES).contains(&o.flood_sources) {
        return Err(crate::error::usage(anyhow!(
            "flood sources {} is not accepted: 1..={MAX_FLOOD_SOURCES} spoofed addresses ({FLOOD_SRC_NET})",
            o.flood_sources
        )));
    }
    if o.models.contains(&Model::Coalesced) {
        if !(1..=1000).contains(&o.rx_usecs) {
            return Err(crate::error::usage(anyhow!("rx-usecs {} is not accepted: 1..=1000 microseconds", o.rx_usecs)));
        }
        fastpath::features::check(fastpath::features::Feature::NapiSet).map_err(|u| {
            LabError::Unsupported(anyhow!("the coalesced flood model needs {u}: use --model per-frame"))
        })?;
    }
    if !tools::installed("sockperf") {
        return Err(env(anyhow!("bench ddos needs sockperf (apt-get install sockperf)")));
    }
    let mut notes = Vec::new();
    let mut defences = o.defences.clone();
    if defences.contains(&Defence::Nft) && !tools::installed("nft") {
        return Err(env(anyhow!("--defences nft needs nft (apt-get install nftables)")));
    }
    if defences.contains(&Defence::Iptables) && !tools::installed("iptables") {
        defences.retain(|d| *d != Defence::Iptables);
        notes.push(
            "iptables: the command is not installed (Debian package iptables); its rows are left out".to_string(),
        );
    }
    // No qdisc on the sender: when the victim's receive ring is full the service's packets are
    // lost with the flood's, as at a NIC's ring, instead of waiting in a qdisc for a free slot
    // (which would give them priority over the flood).
    let bed = Testbed::up(&TestbedConfig { name: None, queues: 1, sender_qdisc: false, ipv6: false })?;
    // Without TSO on the sending veth every TCP skb is eligible for the receiving veth's NAPI
    // (veth_skb_is_eligible_for_gro, drivers/net/veth.c): the service's packets then always
    // travel the same ring and NAPI as the flood, with or without an XDP program attached, as
    // at a NIC. With TSO they would bypass NAPI (netif_rx) unless a program is attached.
    tools::ns_run(
        bed.ns_a(),
        "ethtool",
        &["-K", bed.iface_a(), "tso", "off"],
        "ethtool -K tso off (the sending veth)",
    )?;
    bed.set_rx_napi_cpu(Some(SERVICE_CPU))?;
    let napi_pids = bed.set_rx_napi_fifo(NAPI_FIFO_PRIORITY)?;
    // Whole seconds: sockperf's -t takes whole seconds.
    let secs = if o.duration_s > 0.0 { o.duration_s.round().max(1.0) } else { 1.0 };
    Ok(DdosBed {
        bed,
        napi_pids,
        flood: o.flood,
        defences,
        rates: o.rates.clone(),
        flood_cpus: o.flood_cpus.clone(),
        secs,
        notes,
        models: o.models.clone(),
        rx_usecs: o.rx_usecs,
        flood_sources: o.flood_sources,
    })
}

impl DdosBed {
    /// The defences measured (those asked for, less iptables when it is not installed).
    pub fn defences(&self) -> &[Defence] {
        &self.defences
    }

    /// Notes for the reader (a defence left out).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Seconds per phase: whole seconds, at least 1.
    pub fn secs(&self) -> f64 {
        self.secs
    }

    /// Spoofed source addresses of the flood (`--flood-sources`).
    pub fn flood_sources(&self) -> u32 {
        self.flood_sources
    }

    /// The test bed's name.
    pub fn testbed_name(&self) -> &str {
        self.bed.name()
    }

    /// Sets everything up once and tears it down: the service's server, every defence.
    ///
    /// # Errors
    ///
    /// As [`DdosBed::run`]'s setup: sockperf, nft or iptables failed, the classifier could
    /// not be loaded.
    pub fn smoke(&self) -> LabResult<()> {
        drop(start_server(&self.bed, PORT_FIRST)?);
        let _clients = if self.clients_xdp() { Some(ClientsXdp::start(&self.bed)?) } else { None };
        for d in &self.defences {
            drop(Installed::install(*d, &self.bed, self.flood)?);
        }
        if self.models.contains(&Model::Coalesced) {
            self.coalescer()?.stop()?;
        }
        Ok(())
    }

    /// The model of the run in one line (see the module's documentation).
    pub fn model(&self) -> String {
        format!(
            "model: a NIC queue whose interrupt lands on the service's CPU: the receiving veth's NAPI threaded, pinned to CPU {SERVICE_CPU} with SCHED_FIFO {NAPI_FIFO_PRIORITY}; the service's packets share its ring and NAPI with the flood (no TSO, no qdisc on the sending veth); service and clients on CPU {SERVICE_CPU}; attacker (xdp-live, paced per frame, {}) on CPU {}",
            match self.flood {
                Flood::Udp => format!("64-byte UDP to port 9 {}", self.sources_text()),
                Flood::Syn => format!("TCP SYNs to the service's port {}, SYN cookies on", self.sources_text()),
                Flood::Ack => format!(
                    "out-of-state TCP ACKs (fixed sequence and acknowledgement numbers) to the service's port {}, SYN cookies on",
                    self.sources_text()
                ),
            },
            self.flood_cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
        ) + &if self.clients_xdp() {
            format!("; in every phase an XDP program on the clients' veth (ns a) drops what the victim sends to the spoofed sources ({FLOOD_SRC_NET}: SYN-ACKs, RSTs), as a NIC's would leave on the wire, instead of ns a's stack dropping them on the victim's CPU; it also lets the classifier's XDP_TX SYN-ACKs arrive (a veth delivers them only to a peer running XDP)")
        } else {
            String::new()
        }
    }

    /// "from N sources (FIRST..LAST), F flows (each source 1/N of the flood)".
    fn sources_text(&self) -> String {
        let flows = flood_spread(self.flood_sources).map_or(0, |s| s.flows().n());
        let first = FLOOD_SRC_BASE;
        let last = std::net::Ipv4Addr::from(u32::from(first) + self.flood_sources - 1);
        format!(
            "from {} spoofed sources ({first}..{last}, --flood-sources), {} flows: each source 1/{} of the flood",
            thousands(u64::from(self.flood_sources)),
            thousands(u64::from(flows)),
            thousands(u64::from(self.flood_sources))
        )
    }

    /// Whether the run holds [`ClientsXdp`] in every phase: TCP floods (the victim answers
    /// them) and `fastpath-syncookie` (its XDP_TX SYN-ACKs reach a veth peer only through XDP).
    fn clients_xdp(&self) -> bool {
        self.flood != Flood::Udp || self.defences.contains(&Defence::FastpathSyncookie)
    }

    /// The flood models measured, in order.
    pub fn models(&self) -> &[Model] {
        &self.models
    }

    /// The coalesced model's `rx-usecs`.
    pub fn rx_usecs(&self) -> u32 {
        self.rx_usecs
    }

    /// One flood model in one line: what reaches the receiving NAPI and what the service's own
    /// packets experience.
    pub fn model_line(&self, m: Model) -> String {
        match m {
            Model::PerFrame => "per-frame model: no interrupt coalescing: every frame may wake the receiving NAPI thread (it polls what is there and sleeps again); the service's packets wait for no timer".into(),
            Model::Coalesced => {
                let on = coalesce::COALESCE_ON_PPS;
                format!(
                    "coalesced model: adaptive interrupt coalescing as a NIC with rx-usecs {u} (Intel X710/i40e's default: 50 us, adaptive): a controller samples the victim's received frames every {ms} ms and from {on_k}k frames/s (back below {off_k}k) sets its NAPI's defer-hard-irqs {d} and gro-flush-timeout {u} us (netdev napi-set), so under load it polls at most every {u} us, a batch per poll; below that no deferral, every frame wakes it. Under load the service's packets wait up to {u} us with the flood's batch, as at a NIC; the service alone (below {on_k}k frames/s) waits for no timer. The flood leaves the generator paced per frame (the wire's arrivals; the batching is the receiver's); only the victim's queue coalesces (the clients' veth does not)",
                    u = self.rx_usecs,
                    ms = coalesce::SAMPLE_MS,
                    on_k = on / 1e3,
                    off_k = on / 2e3,
                    d = coalesce::DEFER_HARD_IRQS,
                )
            }
        }
    }

    /// The command line that reproduces the run.
    pub fn command(&self) -> String {
        let models = if self.models.len() == 2 { "both" } else { self.models[0].name() };
        let mut c = format!(
            "fastpath bench ddos --flood {} --duration {} --flood-rates {} --defences {} --model {models}",
            self.flood.name(),
            self.secs,
            self.rates.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(","),
            self.defences.iter().map(|d| d.name()).collect::<Vec<_>>().join(",")
        );
        c += &format!(" --flood-sources {}", self.flood_sources);
        if self.models.contains(&Model::Coalesced) {
            c += &format!(" --rx-usecs {}", self.rx_usecs);
        }
        c
    }

    /// The coalesced model's controller on the victim's veth, on the attacker's first CPU (not
    /// the service's).
    fn coalescer(&self) -> LabResult<Coalescer> {
        Coalescer::start(self.bed.ns_b(), self.bed.iface_b(), self.rx_usecs, self.flood_cpus.first().copied())
    }

    /// The phases: no flood first, then per defence one per offered rate. `progress` gets one
    /// line as each phase starts, with the time left ([`crate::progress`]), and one at the end.
    /// Stops with an error when `stop` is raised.
    ///
    /// Needs root: attaches XDP programs, drives nft, iptables and sockperf in the namespaces.
    ///
    /// # Errors
    ///
    /// [`LabError::Environment`] when sockperf cannot be run, [`LabError::Kernel`] when the
    /// flood or the classifier cannot be loaded, [`LabError::Runtime`] when a program fails,
    /// the service answers nothing without a flood, or `stop` is raised.
    pub fn run(&self, stop: &Arc<AtomicBool>, progress: &mut dyn FnMut(&str)) -> LabResult<Vec<Phase>> {
        let mut phases = Vec::new();
        // Planned: the phase's seconds and some 3 s of set-up (server, defence, flood) each.
        let per_model = 1 + self.defences.len() * self.rates.len();
        let mut pr = crate::progress::Progress::new(
            "bench ddos",
            vec![self.secs + 3.0; per_model * self.models.len()],
            progress,
        );
        // TCP floods: the victim answers them (SYN-ACKs, RSTs; the classifier's SYN-ACKs with
        // XDP_TX), so every phase, the no-flood one too, runs with the clients' veth dropping
        // frames to the spoofed sources (see ClientsXdp); the UDP flood is answered only by
        // rate-limited ICMP, but fastpath-syncookie's SYN-ACKs to the service's client need it
        // there too (so a UDP run's rows depend on whether that defence is in it: the model
        // line says which).
        let _clients = if self.clients_xdp() { Some(ClientsXdp::start(&self.bed)?) } else { None };
        for m in &self.models {
            // The controller runs through the model's phases; dropped (settings restored) on
            // an error.
            let co = match m {
                Model::PerFrame => None,
                Model::Coalesced => Some(self.coalescer()?),
            };
            let cx = Ctx {
                bed: &self.bed,
                model: *m,
                coalescer: co.as_ref(),
                kind: self.flood,
                flood_sources: self.flood_sources,
                phases: std::sync::atomic::AtomicU32::new(phases.len() as u32),
                napi_pids: self.napi_pids.clone(),
                flood_cpus: self.flood_cpus.clone(),
                secs: self.secs,
                stop,
            };
            pr.phase(&format!("{}, no flood", m.name()));
            phases.push(phase(&cx, Defence::None, &Installed::None, None)?);
            for d in &self.defences {
                let inst = Installed::install(*d, &self.bed, self.flood)?;
                for r in &self.rates {
                    pr.phase(&format!("{}, {} against {r}", m.name(), d.name()));
                    phases.push(phase(&cx, *d, &inst, Some(*r))?);
                }
            }
            if let Some(c) = co {
                c.stop()?;
            }
        }
        pr.finish();
        Ok(phases)
    }

    /// The no-flood transactions/s of model `m` in `phases` (0 when it has none).
    pub fn baseline(phases: &[Phase], m: Model) -> f64 {
        phases.iter().find(|p| p.model == m.name() && p.offered.is_empty()).map_or(0.0, |p| p.transactions_per_s)
    }

    /// Both models side by side (only with both): per defence and rate the trans/s as a share
    /// of the model's no-flood figure and the NAPI thread's CPU share, then the survivable
    /// rates; every line ending in a newline.
    pub fn side_by_side(&self, phases: &[Phase], surv: &[Survival]) -> String {
        let (pf, co) = (Model::PerFrame, Model::Coalesced);
        let (b_pf, b_co) = (Self::baseline(phases, pf), Self::baseline(phases, co));
        let mut s = format!(
            "models side by side (trans/s as % of the model's no-flood {} / {}; NAPI thread CPU %):\n{:<18} {:>7} {:>12} {:>12} {:>11} {:>11}\n",
            thousands(b_pf.round() as u64),
            thousands(b_co.round() as u64),
            "defence",
            "offered",
            "per-frame %",
            "coalesced %",
            "napi% p-f",
            "napi% coal"
        );
        let find = |m: Model, d: Defence, r: &FloodRate| {
            phases.iter().find(|p| p.model == m.name() && p.defence == d.name() && p.offered == r.to_string())
        };
        let pct = |p: Option<&Phase>, b: f64| {
            p.map(|p| format!("{:.0}", 100.0 * p.transactions_per_s / b.max(1.0))).unwrap_or_else(|| "-".into())
        };
        let napi = |p: Option<&Phase>| p.map(|p| format!("{:.0}", p.napi_thread_cpu_pct)).unwrap_or_else(|| "-".into());
        for d in &self.defences {
            for r in &self.rates {
                let (a, b) = (find(pf, *d, r), find(co, *d, r));
                s += &format!(
                    "{:<18} {:>7} {:>12} {:>12} {:>11} {:>11}\n",
                    d.name(),
                    r.to_string(),
                    pct(a, b_pf),
                    pct(b, b_co),
                    napi(a),
                    napi(b)
                );
            }
        }
        s += "survivable flood rate, per-frame / coalesced:\n";
        for d in &self.defences {
            let of = |m: Model| {
                surv.iter()
                    .find(|v| v.model == m.name() && v.defence == d.name())
                    .and_then(|v| v.survivable.clone())
                    .unwrap_or_else(|| format!("< {}", self.rates.first().map(|r| r.to_string()).unwrap_or_default()))
            };
            s += &format!("  {:<13} {} / {}\n", d.name(), of(pf), of(co));
        }
        s
    }

    /// The table of the phases and the survivable rates ([`survival`]), every line ending in a
    /// newline; `baseline` is the no-flood transactions/s.
    pub fn table(&self, m: Model, phases: &[Phase], surv: &[Survival], baseline: f64) -> String {
        let phases: Vec<&Phase> = phases.iter().filter(|p| p.model == m.name()).collect();
        let surv: Vec<&Survival> = surv.iter().filter(|v| v.model == m.name()).collect();
        let coalesced = m == Model::Coalesced;
        let mut s = format!(
            "{:<18} {:>7} {:>10} {:>7} {:>7} {:>8} {:>11} {:>11} {:>12} {:>7} {:>8} {:>6} {:>12} {:>8} {:>8} {:>8}{}\n",
            "defence",
            "offered",
            "trans/s",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "sent/s",
            "reached/s",
            "refused",
            "paced",
            "softirq%",
            "napi%",
            "dropped",
            "conn ok",
            "conn p50",
            "conn p99",
            if coalesced { format!(" {:>6}", "coal%") } else { String::new() }
        );
        for p in phases {
            s += &format!(
                "{:<18} {:>7} {:>10} {:>7} {:>7} {:>8} {:>11} {:>11} {:>12} {:>7} {:>8.0} {:>6.0} {:>12} {:>8} {:>8} {:>8}{}\n",
                if p.offered.is_empty() { "(no flood)" } else { p.defence },
                p.offered,
                thousands(p.transactions_per_s.round() as u64),
                us(p.latency_p50_us),
                us(p.latency_p99_us),
                us(p.latency_p999_us),
                thousands(p.flood_sent_pps.round() as u64),
                thousands(p.reaching_victim_pps.round() as u64),
                thousands(p.flood_refused),
                p.paced_windows_within_20pct.map(|v| format!("{:.0}%", 100.0 * v)).unwrap_or_else(|| "-".into()),
                p.service_cpu_softirq_pct,
                p.napi_thread_cpu_pct,
                thousands(p.dropped_by_defence),
                format!("{:.0}%", 100.0 * f64::from(p.connects_succeeded) / f64::from(p.connects_attempted.max(1))),
                ms(p.connect_p50_ms),
                ms(p.connect_p99_ms),
                if coalesced {
                    format!(" {:>6}", p.napi_coalescing_pct.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into()))
                } else {
                    String::new()
                }
            );
        }
        s += &format!(
            "survivable flood rate (highest offered rate keeping >= 50% of {} trans/s):\n",
            thousands(baseline.round() as u64)
        );
        for (sv, d) in surv.iter().zip(&self.defences) {
            s += &format!(
                "  {:<18} {:<9} {}\n",
                sv.defence,
                sv.survivable
                    .clone()
                    .unwrap_or_else(|| format!("< {}", self.rates.first().map(|r| r.to_string()).unwrap_or_default())),
                self.flood.describe_defence(*d)
            );
        }
        s += &format!(
            "(latency: sockperf's, half the TCP round trip; sockperf ping-pong --tcp from {} to 10.99.0.2; paced: share of 1 ms windows within 20% of the offered rate; conn ok: share of the connect probe's {PROBE_CONNECTS} new connections (connect within 1 s, one byte echoed) that succeeded, conn p50/p99: their connect times, ms{})\n",
            self.bed.ns_a(),
            if coalesced { "; coal%: share of the service's window the victim's NAPI was held at rx-usecs" } else { "" }
        );
        s
    }

    /// The chart of [`svg`] for this run.
    ///
    /// Of model `m`'s phases only; the model is named under the chart.
    pub fn svg(&self, m: Model, phases: &[Phase], baseline: f64) -> String {
        let ph: Vec<Phase> = phases.iter().filter(|p| p.model == m.name()).cloned().collect();
        let cmd = format!("{} ({} model)", self.command(), m.name());
        svg(&ph, &self.defences, &self.rates, baseline, &cmd, &self.flood.name().to_uppercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flood_rates_parse_and_refuse() {
        assert_eq!(
            parse_flood_rates("250k,1.5M,max,3000").unwrap(),
            vec![FloodRate::Pps(250_000), FloodRate::Pps(1_500_000), FloodRate::Max, FloodRate::Pps(3000)]
        );
        assert_eq!(FloodRate::Pps(2_000_000).to_string(), "2M");
        assert_eq!(FloodRate::Pps(250_000).to_string(), "250k");
        assert_eq!(FloodRate::Pps(1_500_000).to_string(), "1.5M");
        // Crafted: empty parts, a bare suffix, exponents past the bound, NaN/inf, a rate that
        // rounds to below 1k, a duplicate written two ways.
        for bad in [
            "", "0", "999", "1G", "-1M", "nan", "1e9", "2M,2M", "inf", "k", "M", "1e3M", "0.0009M", "1M,", "1M,1000k",
            "max,max",
        ] {
            let e = parse_flood_rates(bad).unwrap_err();
            assert!(e.contains("not accepted") && !e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn syn_frame_is_a_valid_syn_to_the_port() {
        let f = syn_frame([2; 6], [4; 6], 20007).unwrap();
        assert_eq!(f.len(), 60);
        let p = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else { panic!("not IPv4") };
        assert_eq!(ip.header().total_len(), 40, "the padding is not in the datagram");
        let Some(etherparse::TransportSlice::Tcp(t)) = &p.transport else { panic!("not TCP") };
        assert!(t.syn() && !t.ack() && t.destination_port() == 20007);
        let sum = t.to_header().calc_checksum_ipv4(&ip.header().to_header(), &[]).unwrap();
        assert_eq!(sum, t.checksum(), "TCP checksum");
    }

    /// `--flood-sources`: 1..=MAX_FLOOD_SOURCES, a one-line refusal naming the value and the
    /// range otherwise; the spread of N sources stays inside FLOOD_SRC_NET, out of the test
    /// bed's 10.99.0.0/24.
    #[test]
    fn flood_sources_parse_and_refuse() {
        assert_eq!(parse_flood_sources("1"), Ok(1));
        assert_eq!(parse_flood_sources("65536"), Ok(65_536));
        assert_eq!(parse_flood_sources("8388608"), Ok(MAX_FLOOD_SOURCES));
        for bad in ["0", "8388609", "4294967296", "-1", "", "64k", "1e5", " 256", "abc"] {
            let e = parse_flood_sources(bad).unwrap_err();
            assert_eq!(
                e,
                format!("--flood-sources {bad} is not accepted: a number of spoofed source addresses in 1..=8388608 (the addresses of 10.128.0.0/9)")
            );
        }
        for n in [1, 256, DEFAULT_FLOOD_SOURCES, MAX_FLOOD_SOURCES] {
            let s = flood_spread(n).unwrap();
            assert_eq!(s.sources(), n);
            assert!(s.flows().n() >= FLOOD_FLOWS.min(n * 65_536) && s.flows().n() >= n, "{n}");
            let last = std::net::Ipv4Addr::from(s.base() + n - 1);
            let [a, b, ..] = last.octets();
            assert!(a == 10 && b >= 128, "{n}: {last} outside 10.128.0.0/9");
        }
        assert!(flood_spread(0).is_none() && flood_spread(MAX_FLOOD_SOURCES + 1).is_none());
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        assert_eq!(quantile(&[], 0.5), None);
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        assert_eq!((quantile(&v, 0.5), quantile(&v, 0.99)), (Some(100.0), Some(198.0)));
        assert_eq!(quantile(&[3.0], 0.99), Some(3.0));
    }

    #[test]
    fn ack_frame_is_a_valid_out_of_state_ack_to_the_port() {
        let f = ack_frame([2; 6], [4; 6], 20007).unwrap();
        assert_eq!(f.len(), 60);
        let p = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else { panic!("not IPv4") };
        assert_eq!(ip.header().total_len(), 40, "the padding is not in the datagram");
        assert_eq!(ip.header().source_addr(), FLOOD_SRC_BASE);
        let Some(etherparse::TransportSlice::Tcp(t)) = &p.transport else { panic!("not TCP") };
        assert!(t.ack() && !t.syn() && !t.fin() && !t.rst() && !t.psh(), "a pure ACK");
        assert_eq!(t.destination_port(), 20007);
        assert_eq!((t.sequence_number(), t.acknowledgment_number()), (0x1234_5678, 0x9abc_def0));
        let sum = t.to_header().calc_checksum_ipv4(&ip.header().to_header(), &[]).unwrap();
        assert_eq!(sum, t.checksum(), "TCP checksum");
    }

    #[test]
    fn every_flood_and_defence_rule_set_compiles() {
        for kind in [Flood::Udp, Flood::Syn, Flood::Ack] {
            for d in [Defence::Fastpath, Defence::Fastpath10k, Defence::FastpathSyncookie] {
                let (text, index) = classifier_rules(0, kind, d);
                let set = parse_toml("t", &text).unwrap_or_else(|e| panic!("{kind:?} {d:?}: {e}"));
                compile("t", &set).unwrap_or_else(|e| panic!("{kind:?} {d:?}: {e}"));
                assert_eq!(index, 0);
                assert_eq!(text.contains("action = \"syncookie\""), d == Defence::FastpathSyncookie, "{kind:?} {d:?}");
            }
        }
        assert!(syncookie_rule().contains(&format!("dst_port = \"{PORT_FIRST}-{PORT_LAST}\"")));
        // The clients' veth drops what the victim sends to every flood flow's source (all of
        // FLOOD_SRC_NET: the first and last of the most sources, the 65,536 default's last)
        // and passes what it sends to the clients.
        let set = parse_toml("t", &clients_xdp_rules()).unwrap();
        compile("t", &set).unwrap();
        let to = |dst: std::net::Ipv4Addr| {
            let b = etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
                .ipv4(fastpath_testbed::IP4_B.octets(), dst.octets(), 64)
                .tcp(PORT_FIRST, 40000, 1, 64240)
                .syn()
                .ack(2);
            let mut f = Vec::new();
            b.write(&mut f, &[]).unwrap();
            fastpath::rules::reference::classify(&set, &f)
        };
        use fastpath::rules::reference::Verdict;
        for n in [1, 2, DEFAULT_FLOOD_SOURCES, MAX_FLOOD_SOURCES] {
            let a = std::net::Ipv4Addr::from(u32::from(FLOOD_SRC_BASE) + n - 1);
            assert_eq!(to(a), Verdict::Rule(0), "SYN-ACK to flood source {a}");
        }
        assert_eq!(to(fastpath_testbed::IP4_A), Verdict::NoMatch, "the clients' own frames pass");
        assert!(Flood::Ack.nft_rules().contains("== ack meter"));
        assert!(Flood::Ack.iptables_rules()[0].iter().any(|w| w == "FIN,SYN,RST,PSH,ACK"));
        assert_eq!(Flood::Ack.name(), "ack");
        assert_eq!(Defence::FastpathSyncookie.name(), "fastpath-syncookie");
    }

    #[test]
    fn survivable_rate_is_the_highest_rate_keeping_half() {
        let ph = |d: &'static str, off: &str, pps: f64, tps: f64| Phase {
            model: "per-frame",
            defence: d,
            offered: off.into(),
            offered_pps: pps,
            transactions_per_s: tps,
            latency_p50_us: None,
            latency_p99_us: None,
            latency_p999_us: None,
            latency_max_us: None,
            service_error: None,
            flood_sent_pps: pps,
            reaching_victim_pps: 0.0,
            flood_sent: 0,
            flood_accepted: 0,
            flood_refused: 0,
            paced_windows_within_20pct: None,
            service_cpu_softirq_pct: 0.0,
            napi_thread_cpu_pct: 0.0,
            dropped_by_defence: 0,
            flood_reached_stack: None,
            napi_coalescing_pct: None,
            syncookie_synack_per_s: None,
            syncookie_synack_sent: None,
            connects_attempted: 0,
            connects_succeeded: 0,
            connect_p50_ms: None,
            connect_p99_ms: None,
        };
        let phases = vec![
            ph("none", "", 0.0, 100.0),
            ph("none", "250k", 250e3, 40.0),
            ph("none", "1M", 1e6, 10.0),
            ph("fastpath", "250k", 250e3, 95.0),
            ph("fastpath", "1M", 1e6, 50.0),
            ph("fastpath", "max", 3.1e6, 49.9),
        ];
        let s = survival(&phases, Model::PerFrame, &[Defence::None, Defence::Fastpath], 100.0);
        assert_eq!(s[0].survivable, None);
        assert_eq!(s[1].survivable.as_deref(), Some("1M"));
        // Another model's rows do not count for this one.
        let mut co = phases.clone();
        co.push(Phase { model: "coalesced", ..ph("none", "2M", 2e6, 99.0) });
        let c = survival(&co, Model::Coalesced, &[Defence::None, Defence::Fastpath], 100.0);
        assert_eq!((c[0].survivable.as_deref(), c[1].survivable.as_deref()), (Some("2M"), None));
        assert_eq!(survival(&co, Model::PerFrame, &[Defence::None], 100.0)[0].survivable, None);
    }
}
