//! `fastpath gen --flows N --seed S` (root): the receiver sees exactly N distinct 5-tuples, each
//! the same number of times, intact, for IPv4 and IPv6 and for both engines (xsk, xdp-live);
//! they are the tuples the library's `Flows` promises for that seed. Bad values get a one-line
//! refusal.

mod common;

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use common::*;
use fastpath::io::{afxdp::AfXdpPort, Port};
use fastpath::packet::{self, FiveTuple, Flows};
use fastpath::xsk::{CopyMode, SocketConfig, XskConfig};
use fastpath_testbed::{Testbed, TestbedConfig};

const FLOWS: u32 = 1000;
const PER_FLOW: u64 = 10;
const COUNT: u64 = FLOWS as u64 * PER_FLOW;

/// What the receiver saw: frames per 5-tuple, and frames that failed the full check.
struct Seen {
    per_tuple: HashMap<FiveTuple, u64>,
    corrupt: u64,
    frames: u64,
}

/// Runs `gen --engine ENGINE --flows FLOWS --seed SEED --count COUNT` (paced) into an AF_XDP
/// receiver on the other end of a fresh test bed and returns what arrived.
fn send(engine: &str, src: &str, dst: &str, seed: &str) -> Seen {
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    let (ns_b, if_b) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    let (tx, rx) = std::sync::mpsc::channel();
    let h = fastpath_testbed::spawn_in_netns(&ns_b, move || {
        let cfg = XskConfig {
            socket: SocketConfig { copy_mode: CopyMode::Copy, ..Default::default() },
            ..Default::default()
        };
        let mut port = AfXdpPort::open(&if_b, 0, &cfg, None, false).unwrap_or_else(|e| panic!("{e}"));
        tx.send(()).unwrap();
        let mut seen = Seen { per_tuple: HashMap::new(), corrupt: 0, frames: 0 };
        let mut idle = Instant::now();
        while seen.frames < COUNT && idle.elapsed() < Duration::from_secs(5) {
            let n = port
                .rx_burst(256, 100, |p: &[u8]| {
                    seen.frames += 1;
                    if packet::verify(p).is_err() {
                        seen.corrupt += 1;
                    }
                    if let Some(t) = packet::five_tuple(p) {
                        *seen.per_tuple.entry(t).or_default() += 1;
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
    let g = run(&[
        "gen",
        "--engine",
        engine,
        "--netns",
        bed.ns_a(),
        "-i",
        bed.iface_a(),
        "--dst-mac",
        &mac(bed.mac_b()),
        "--src-ip",
        src,
        "--dst-ip",
        dst,
        "--flows",
        &FLOWS.to_string(),
        "--seed",
        seed,
        "--count",
        &COUNT.to_string(),
        "--rate",
        "20000",
        "--duration",
        "60",
        "--json",
    ]);
    assert!(g.status.success(), "gen failed: {}", stderr(&g));
    let sent = n(&last_json(&g)["totals"]["tx_packets"]);
    assert_eq!(sent, COUNT, "gen sent {sent}, not --count {COUNT}");
    h.join().unwrap().unwrap()
}

/// The tuples `Flows::new(FLOWS, seed)` gives a template from `src` to `dst`, UDP port 9000 -> 9.
fn expected(src: &str, dst: &str, seed: u64) -> HashMap<FiveTuple, u64> {
    let f = Flows::new(FLOWS, seed).unwrap();
    let (src, dst): (IpAddr, IpAddr) = (src.parse().unwrap(), dst.parse().unwrap());
    (0..FLOWS)
        .map(|i| {
            let t = f.mix(i);
            let s = match src {
                IpAddr::V4(a) => {
                    let mut o = a.octets();
                    o[3] = (t >> 16) as u8;
                    IpAddr::from(o)
                }
                IpAddr::V6(a) => {
                    let mut o = a.octets();
                    o[15] = (t >> 16) as u8;
                    IpAddr::from(o)
                }
            };
            ((s, dst, 17u8, t as u16, 9u16), PER_FLOW)
        })
        .collect()
}

fn flows_arrive(engine: &str, src: &str, dst: &str) {
    let seed = 7u64;
    let seen = send(engine, src, dst, &seed.to_string());
    let what = format!("gen --engine {engine} --src-ip {src} --flows {FLOWS} --count {COUNT}");
    assert_eq!(seen.frames, COUNT, "{what}: received {} frames", seen.frames);
    assert_eq!(seen.corrupt, 0, "{what}: frames failing the checksum/length check");
    assert_eq!(seen.per_tuple.len(), FLOWS as usize, "{what}: distinct 5-tuples");
    let bad: Vec<_> = seen.per_tuple.iter().filter(|(_, &c)| c != PER_FLOW).take(5).collect();
    assert!(bad.is_empty(), "{what}: every flow {PER_FLOW} times; these were not: {bad:?}");
    assert_eq!(seen.per_tuple, expected(src, dst, seed), "{what}: not the tuples of seed {seed}");
}

#[test]
fn flows_xsk_ipv4() {
    if privileged("flows_xsk_ipv4") {
        let _s = serial();
        flows_arrive("xsk", "10.99.0.1", "10.99.0.2");
    }
}

#[test]
fn flows_xsk_ipv6() {
    if privileged("flows_xsk_ipv6") {
        let _s = serial();
        flows_arrive("xsk", "fd99::1", "fd99::2");
    }
}

#[test]
fn flows_xdp_live_ipv4() {
    if privileged("flows_xdp_live_ipv4") {
        let _s = serial();
        flows_arrive("xdp-live", "10.99.0.1", "10.99.0.2");
    }
}

#[test]
fn flows_xdp_live_ipv6() {
    if privileged("flows_xdp_live_ipv6") {
        let _s = serial();
        flows_arrive("xdp-live", "fd99::1", "fd99::2");
    }
}

/// Two seeds give different tuples (the seed is used), and no seed is seed 1.
#[test]
fn seeds_differ() {
    let (a, b) = (expected("10.99.0.1", "10.99.0.2", 1), expected("10.99.0.1", "10.99.0.2", 2));
    assert_ne!(a, b);
}

/// Bad --flows / --seed / address values: one line naming the value and what is accepted, exit
/// 2, before anything is touched (no interface needed to be refused).
#[test]
fn bad_flows_are_refused() {
    for (args, needles) in [
        (vec!["--flows", "0"], vec!["--flows 0", "1..=16777216"]),
        (vec!["--flows", "16777217"], vec!["--flows 16777217", "1..=16777216"]),
        (vec!["--flows", "many"], vec!["--flows many", "1..=16777216"]),
        (vec!["--flows=-5"], vec!["--flows -5", "1..=16777216"]),
        (vec!["--flows", "10", "--seed=-1"], vec!["--seed -1", "0..=18446744073709551615"]),
        (vec!["--flows", "10", "--seed", "x"], vec!["--seed x", "0..=18446744073709551615"]),
        (vec!["--seed", "3"], vec!["--flows"]),
        (vec!["--flows", "10", "--src-ip", "fd99::1"], vec!["--src-ip fd99::1", "--dst-ip 10.99.0.2", "IPv6"]),
        (
            vec!["--flows", "10", "--src-ip", "fd99::1", "--dst-ip", "fd99::2", "--frame-len", "64"],
            vec!["--frame-len 64", "82..=1514"],
        ),
    ] {
        for engine in ["xsk", "xdp-live"] {
            let mut a = vec!["gen", "--engine", engine, "-i", "fpnosuch0", "--duration", "0"];
            a.extend_from_slice(&args);
            assert_one_line_refusal(&format!("{a:?}"), &run(&a), 2, &needles);
        }
    }
}
