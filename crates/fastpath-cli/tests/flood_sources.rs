//! `bench ddos --flood-sources N` (root): the flood `bench ddos` sends (its template frames and
//! its generator, `fastpath_lab::ddos::flood_generator`) reaches the victim from N distinct
//! source addresses, each flow one of the spread's, checksums intact; the same spread over
//! IPv6; and a per-source rate rule cannot key on such a flood (it stops most of a 256-source
//! flood and passes all of a 65,536-source one; only the rule's aggregate limit holds it).

mod common;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use fastpath::bpf::XdpGen;
use fastpath::io::{afxdp::AfXdpPort, Port};
use fastpath::netdev::NetDev;
use fastpath::xsk::{CopyMode, SocketConfig, XskConfig};
use fastpath_lab::ddos::{flood_generator, flood_spread, Flood};
use fastpath_testbed::{spawn_in_netns, Testbed, TestbedConfig};
use fastpath_tools::bench::{LiveGen, SendLimits};
use fastpath_tools::stats::Counters;

/// The flood's pace: slow enough for a copy-mode AF_XDP receiver on a loaded 2-CPU machine.
const RATE_PPS: u64 = 100_000;
/// The service's port the TCP floods go to (any: nothing listens in these tests).
const PORT: u16 = 20_000;
/// The attacker's CPU.
const FLOOD_CPU: usize = 0;

/// What reached the victim's veth: frames, frames per (source address, source port), and
/// frames whose IPv4 header or L4 checksum was wrong.
#[derive(Default)]
struct Seen {
    frames: u64,
    per_tuple: HashMap<(IpAddr, u16), u64>,
    bad_checksum: u64,
}

impl Seen {
    fn sources(&self) -> HashSet<IpAddr> {
        self.per_tuple.keys().map(|(a, _)| *a).collect()
    }
}

/// Checks the checksums of a frame and returns its (source address, source port); None for a
/// frame that does not parse (counted as bad).
fn tuple_of(f: &[u8]) -> Option<((IpAddr, u16), bool)> {
    let p = etherparse::SlicedPacket::from_ethernet(f).ok()?;
    match (&p.net, &p.transport) {
        (Some(etherparse::NetSlice::Ipv4(ip)), Some(etherparse::TransportSlice::Tcp(t))) => {
            let h = ip.header().to_header();
            let ok = h.calc_header_checksum() == h.header_checksum
                && t.to_header().calc_checksum_ipv4(&h, t.payload()).ok() == Some(t.checksum());
            Some(((IpAddr::V4(ip.header().source_addr()), t.source_port()), ok))
        }
        (Some(etherparse::NetSlice::Ipv4(ip)), Some(etherparse::TransportSlice::Udp(u))) => {
            let ok = fastpath::packet::verify(f).is_ok();
            Some(((IpAddr::V4(ip.header().source_addr()), u.source_port()), ok))
        }
        (Some(etherparse::NetSlice::Ipv6(ip)), Some(etherparse::TransportSlice::Udp(u))) => {
            let ok = fastpath::packet::verify(f).is_ok();
            Some(((IpAddr::V6(ip.header().source_addr()), u.source_port()), ok))
        }
        _ => None,
    }
}

/// Receives on the victim's veth (ns b, AF_XDP copy mode) while `send` floods from ns a, until
/// `count` frames arrived or none came for 3 s; returns what arrived and the frames sent.
fn capture(bed: &Testbed, count: u64, send: impl FnOnce() -> u64 + Send + 'static) -> (Seen, u64) {
    let (ns_b, if_b) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    let (tx, rx) = std::sync::mpsc::channel();
    let h = spawn_in_netns(&ns_b, move || {
        let cfg = XskConfig {
            socket: SocketConfig { copy_mode: CopyMode::Copy, ..Default::default() },
            ..Default::default()
        };
        let mut port = AfXdpPort::open(
            &fastpath::netdev::Iface::resolve(&if_b).unwrap(),
            0,
            &cfg,
            fastpath::bpf::AttachOpts { mode: None, force: false },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        tx.send(()).unwrap();
        let mut seen = Seen::default();
        let mut idle = Instant::now();
        while seen.frames < count && idle.elapsed() < Duration::from_secs(3) {
            let n = port
                .rx_burst(256, 100, |p: &[u8]| {
                    seen.frames += 1;
                    match tuple_of(p) {
                        Some((t, ok)) => {
                            *seen.per_tuple.entry(t).or_default() += 1;
                            seen.bad_checksum += u64::from(!ok);
                        }
                        None => seen.bad_checksum += 1,
                    }
                })
                .unwrap();
            if n > 0 {
                idle = Instant::now();
            }
        }
        seen
    });
    rx.recv_timeout(Duration::from_secs(20)).expect("receiver ready");
    let sent = spawn_in_netns(bed.ns_a(), send).join().unwrap().unwrap();
    (h.join().unwrap().unwrap(), sent)
}

/// Sends `count` frames of `frame` with `gen` out of the calling thread's namespace, paced at
/// RATE_PPS on FLOOD_CPU; returns the frames sent and the seconds it took.
fn paced(gen: XdpGen, frame: &[u8], count: u64) -> (u64, f64) {
    let t0 = Instant::now();
    let live = LiveGen::start(
        Arc::new(gen),
        frame,
        &[FLOOD_CPU],
        SendLimits { count: Some(count), rate_pps: Some(RATE_PPS) },
        64,
        &[Arc::new(Counters::default())],
    )
    .unwrap();
    while !live.done_flag().load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let secs = t0.elapsed().as_secs_f64();
    (live.stop().unwrap(), secs)
}

/// `bench ddos`'s flood of `kind` from `sources` sources, `count` frames, from ns a.
fn lab_flood(bed: &Testbed, kind: Flood, sources: u32, count: u64) -> impl FnOnce() -> (u64, f64) + Send + 'static {
    let (iface, mac_b) = (bed.iface_a().to_string(), bed.mac_b());
    move || {
        let dev = NetDev::by_name(&iface).unwrap();
        let (gen, frame) = flood_generator(kind, sources, dev.ifindex, dev.mac().unwrap(), mac_b, PORT).unwrap();
        paced(gen, &frame, count)
    }
}

/// The tuples of flows 0..count of `spread` (count <= its flows: frame j carries flow j - 1).
fn expected_v4(spread: &fastpath::spread::SourceSpread, count: u64) -> HashSet<(IpAddr, u16)> {
    (0..count as u32).map(|i| (IpAddr::V4(std::net::Ipv4Addr::from(spread.address_of(i))), spread.port_of(i))).collect()
}

/// What the spread promises at the victim: every frame one of the spread's first `sent` flows,
/// checksums intact, and (nearly) every source seen: all `sources` when every frame arrived
/// (any `sources` consecutive frames come from distinct addresses), at most 5% missing when the
/// veth or the receiver lost some (each source sent `sent / sources` >= 4 frames: a loaded
/// machine lost 35% of 200k frames/s, missing 2.6% of the sources with 3 frames each).
fn assert_spread(what: &str, seen: &Seen, sent: u64, sources: u32, expected: &HashSet<(IpAddr, u16)>) {
    assert!(sent >= 4 * u64::from(sources), "{what}: sent {sent}");
    assert_eq!(seen.bad_checksum, 0, "{what}: frames with a wrong checksum (or unparsable) at the victim");
    let foreign: Vec<_> = seen.per_tuple.keys().filter(|t| !expected.contains(t)).take(5).collect();
    assert!(foreign.is_empty(), "{what}: tuples that are none of the spread's flows: {foreign:?}");
    let distinct = seen.sources().len() as u64;
    eprintln!("{what}: {} of {sent} frames arrived, from {distinct} distinct sources", seen.frames);
    assert!(distinct <= u64::from(sources), "{what}: {distinct} sources");
    if seen.frames == sent {
        assert_eq!(distinct, u64::from(sources), "{what}: every frame arrived, so every source did");
    } else {
        assert!(
            distinct * 100 >= u64::from(sources) * 95,
            "{what}: {distinct} of {sources} sources seen at the victim ({} of {sent} frames arrived)",
            seen.frames
        );
    }
}

/// The SYN and UDP floods of `--flood-sources 65536` reach the victim from 65,536 distinct
/// addresses (10.128.0.0/16), every frame one of the spread's flows with valid checksums; and
/// `--flood-sources 256`, the single /24 of earlier runs, from exactly 256.
#[test]
fn flood_sources_reach_the_victim_spread() {
    if !privileged("flood_sources_reach_the_victim_spread") {
        return;
    }
    let _g = serial();
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    for (kind, sources) in [(Flood::Syn, 65_536u32), (Flood::Udp, 65_536), (Flood::Syn, 256)] {
        let count = 4 * u64::from(sources).max(1024);
        let flood = lab_flood(&bed, kind, sources, count);
        let (seen, sent) = capture(&bed, count, move || flood().0);
        let spread = flood_spread(sources).unwrap();
        let what = format!("--flood {} --flood-sources {sources}", kind.name());
        assert_spread(&what, &seen, sent, sources, &expected_v4(&spread, sent));
        for a in seen.sources() {
            let IpAddr::V4(a) = a else { panic!("{what}: {a}") };
            let first = std::net::Ipv4Addr::new(10, 128, 0, 0);
            assert!((u32::from(a) - u32::from(first)) < sources, "{what}: source {a} outside the spread");
        }
    }
}

/// The generator's spread over IPv6: the last 32 bits of the source vary over 65,536 addresses
/// (fd99:1::1:0 and up), the prefix kept, UDP checksums intact.
#[test]
fn flood_sources_spread_over_ipv6() {
    if !privileged("flood_sources_spread_over_ipv6") {
        return;
    }
    let _g = serial();
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    let sources = 65_536u32;
    let count = 4 * u64::from(sources);
    let base = 0x0001_0000u32;
    let spread = fastpath::spread::SourceSpread::new(sources, 1_000_000, base, 3).unwrap();
    let src6 = std::net::Ipv6Addr::new(0xfd99, 1, 0, 0, 0, 0, 1, 0);
    let (iface, mac_b) = (bed.iface_a().to_string(), bed.mac_b());
    let (seen, sent) = capture(&bed, count, move || {
        let dev = NetDev::by_name(&iface).unwrap();
        let spec = fastpath::packet::UdpFrameSpec {
            src_mac: dev.mac().unwrap(),
            dst_mac: mac_b,
            src_ip: src6.into(),
            dst_ip: fastpath_testbed::IP6_B.into(),
            src_port: 9000,
            dst_port: 9,
            frame_len: 86,
        };
        let mut f = vec![0u8; 86];
        fastpath::packet::build_udp_frame(&spec, &mut f);
        let gen = XdpGen::load_spread(dev.ifindex, &spread).unwrap();
        paced(gen, &f, count).0
    });
    let expected: HashSet<(IpAddr, u16)> = (0..sent as u32)
        .map(|i| {
            let mut o = src6.octets();
            o[12..].copy_from_slice(&spread.address_of(i).to_be_bytes());
            (IpAddr::from(o), spread.port_of(i))
        })
        .collect();
    assert_spread("IPv6 spread", &seen, sent, sources, &expected);
}

/// Loads the classifier with `rules` on the victim's veth (ns b), floods it with `bench
/// ddos`'s SYN flood from `sources` sources (`count` frames), and returns the classifier's
/// (frames seen, passed, rate_dropped) and the flood's seconds.
fn rate_limited(bed: &Testbed, rules: &'static str, sources: u32, count: u64) -> (u64, u64, u64, f64) {
    let (ns_b, if_b) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let h = spawn_in_netns(&ns_b, move || {
        let set = fastpath::rules::parse_toml("t", rules).unwrap();
        let c = fastpath::rules::compile::compile("t", &set).unwrap();
        let dev = fastpath::netdev::Iface::resolve(&if_b).unwrap();
        let cls = fastpath::bpf::Classifier::load().unwrap();
        let a = cls.attach(&dev, fastpath::bpf::AttachOpts::mode(Some(fastpath::bpf::XdpMode::Native))).unwrap();
        let active = a.prog.swap_in(&c).unwrap();
        ready_tx.send(()).unwrap();
        done_rx.recv().unwrap();
        // Let the frames still in the veth ring land.
        std::thread::sleep(Duration::from_millis(100));
        let t = a.prog.totals(active).unwrap();
        (t.packets("pass") + t.packets("drop"), t.packets("pass"), t.packets("rate_dropped"))
    });
    ready_rx.recv_timeout(Duration::from_secs(20)).expect("classifier attached");
    let (_, secs) = spawn_in_netns(bed.ns_a(), lab_flood(bed, Flood::Syn, sources, count)).join().unwrap().unwrap();
    done_tx.send(()).unwrap();
    let (seen, passed, dropped) = h.join().unwrap().unwrap();
    (seen, passed, dropped, secs)
}

/// A per-source rate rule (`rate = 20`, its aggregate out of the way) stops most of a
/// 256-source SYN flood (each source is held to its burst of 20 plus 20/s) and passes every
/// frame of the 65,536-source one (each source sends 2 frames): it cannot key on that flood.
/// With its default aggregate (`rate_total` = 64 x rate) the rule holds the many-source flood to
/// the aggregate's burst and refill.
#[test]
fn per_source_rate_cannot_key_on_many_sources() {
    if !privileged("per_source_rate_cannot_key_on_many_sources") {
        return;
    }
    let _g = serial();
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    const PER_SOURCE: &str =
        "[[rule]]\nproto = \"tcp\"\ndst_port = 20000\naction = \"pass\"\nrate = 20\nrate_total = 1000000000\n";
    const WITH_TOTAL: &str = "[[rule]]\nproto = \"tcp\"\ndst_port = 20000\naction = \"pass\"\nrate = 20\n";
    const RATE: f64 = 20.0;
    let count = 131_072u64;

    let (seen, passed, dropped, secs) = rate_limited(&bed, PER_SOURCE, 256, count);
    eprintln!("256 sources, per-source rate 20: {passed} of {seen} passed, {dropped} rate-dropped in {secs:.2} s");
    assert!(seen > count / 2, "most of the flood reached the classifier: {seen} of {count}");
    assert_eq!(seen, passed + dropped, "every frame passed or was rate-dropped");
    let allowance = 256.0 * (RATE + RATE * secs) + 256.0;
    assert!(
        (passed as f64) <= allowance,
        "256 sources: {passed} passed, more than 256 x (burst {RATE} + {RATE}/s x {secs:.2} s)"
    );
    assert!(dropped * 2 > seen, "the per-source limit stops most of a 256-source flood: {dropped} of {seen}");

    let (seen, passed, dropped, secs) = rate_limited(&bed, PER_SOURCE, 65_536, count);
    eprintln!("65536 sources, per-source rate 20: {passed} of {seen} passed, {dropped} rate-dropped in {secs:.2} s");
    assert!(seen > count / 2, "most of the flood reached the classifier: {seen} of {count}");
    assert_eq!(
        (passed, dropped),
        (seen, 0),
        "65,536 sources of 2 frames each: the per-source limit cannot key on the flood, every frame passes"
    );

    let (seen, passed, dropped, secs) = rate_limited(&bed, WITH_TOTAL, 65_536, count);
    eprintln!(
        "65536 sources, rate 20, rate_total 1280: {passed} of {seen} passed, {dropped} rate-dropped in {secs:.2} s"
    );
    let total = RATE * fastpath::rules::RATE_TOTAL_SOURCES as f64;
    assert!(
        (passed as f64) <= total + total * secs + 1.0 && dropped + passed == seen && dropped > 0,
        "the aggregate holds the many-source flood to its burst {total} + {total}/s x {secs:.2} s: {passed} of {seen} passed"
    );
}
