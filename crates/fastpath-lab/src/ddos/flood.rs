//! The floods of `bench ddos`: their kinds ([`Flood`]) and template frames, the offered rates
//! ([`FloodRate`]), the spoofed sources (`--flood-sources`, [`flood_spread`]), the generator
//! ([`flood_generator`]) and the flood's thread of one phase ([`start_flood`]); and the flood
//! models of a row set ([`Model`]).

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath::bpf::XdpGen;
use fastpath::netdev::NetDev;
use fastpath_testbed::{spawn_in_netns, Testbed};
use fastpath_tools::bench::{self, SendLimits};
use fastpath_tools::stats::Counters;
use fastpath_tools::threads::Stoppable;

use crate::error::{kernel, runtime, LabResult};

/// Distinct 5-tuples in the flood (source address and source port, seeded), so the
/// classifier's flow cache misses as under a real flood; more with more sources than this
/// (one flow per source at least, [`flood_spread`]).
pub(super) const FLOOD_FLOWS: u32 = 1_000_000;
/// The first of the flood's spoofed source addresses: source i of `--flood-sources N` is
/// FLOOD_SRC_BASE + i, all within [`FLOOD_SRC_NET`]. Not from the test bed's own
/// 10.99.0.0/24 (see [`Flood::frame`]).
pub(super) const FLOOD_SRC_BASE: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 128, 0, 0);
/// The range the spoofed sources come from: 10.128.0.0/9, [`MAX_FLOOD_SOURCES`] addresses.
pub(super) const FLOOD_SRC_NET: &str = "10.128.0.0/9";
/// Most sources `--flood-sources` accepts: every address of FLOOD_SRC_NET, 10.128.0.0/9 (2^23).
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

/// The flood's thread; on drop (an early return) it is told to stop and joined, so no
/// generator outlives its phase.
pub(super) struct FloodGuard(Stoppable<Result<FloodResult, fastpath_testbed::TestbedError>>);

/// Frames sent, seconds, (accepted, refused) by the veth, share of 1 ms windows within 20%.
type FloodTotals = (u64, f64, (u64, u64), Option<f64>);
type FloodResult = Result<FloodTotals, String>;

impl FloodGuard {
    pub(super) fn finish(self) -> LabResult<FloodTotals> {
        self.0
            .join()
            .map_err(|_| runtime(anyhow!("flood thread panicked")))?
            .map_err(|e| runtime(anyhow!("{e}")))?
            .map_err(|e| runtime(anyhow!("{e}")))
    }
}

/// Starts the flood `kind` from ns a of `bed`, to the service's `port`, at `r`, from `sources`
/// spoofed sources ([`flood_spread`]), one generator thread on each of `cpus`; returns once the
/// generator runs (or failed to start).
pub(super) fn start_flood(
    bed: &Testbed,
    kind: Flood,
    sources: u32,
    cpus: &[usize],
    r: FloodRate,
    port: u16,
) -> LabResult<FloodGuard> {
    let done = Arc::new(AtomicBool::new(false));
    let (iface, mac_b, d, cpus) = (bed.iface_a().to_string(), bed.mac_b(), done.clone(), cpus.to_vec());
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
}
