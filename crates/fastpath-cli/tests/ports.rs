//! Port API conformance: the same receive and transmit test, run per backend on a test bed
//! (root). Every frame sent is received exactly once with its bytes intact, or counted by a
//! named kernel drop counter.

mod common;

use std::time::{Duration, Instant};

use common::*;
use fastpath::io::tpacket::{TpacketOptions, TpacketPort};
use fastpath::io::{afxdp::AfXdpPort, Port};
use fastpath::packet::{build_udp_frame, stamp, Payload, SeqTracker, UdpFrameSpec};
use fastpath::xsk::{CopyMode, XskConfig};
use fastpath_testbed::{Testbed, TestbedConfig};

const N: u64 = 100_000;

fn open(path: &str, iface: &str) -> Box<dyn Port> {
    match path {
        "afxdp" => Box::new(AfXdpPort::open(iface, 0, &XskConfig { copy_mode: CopyMode::Copy, tx_skb_budget: Some(256), ..Default::default() }, None, false).unwrap_or_else(|e| panic!("{e}"))),
        "tpacket" => Box::new(TpacketPort::open(iface, TpacketOptions::default()).unwrap_or_else(|e| panic!("{e}"))),
        other => panic!("no backend {other}"),
    }
}

/// Receive: N frames paced by AF_XDP TX from ns a reach the port in ns b exactly once, intact.
fn receive(path: &'static str) {
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("bed");
    let (ns_b, if_b) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    let (tx, rx) = std::sync::mpsc::channel();
    let h = fastpath_testbed::spawn_in_netns(&ns_b, move || {
        let mut port = open(path, &if_b);
        tx.send(()).unwrap();
        let mut t = SeqTracker::default();
        let mut idle = Instant::now();
        while t.unique() < N && idle.elapsed() < Duration::from_secs(5) {
            if port.rx_burst(256, 100, &mut |p| t.record(p)).unwrap() > 0 {
                idle = Instant::now();
            }
        }
        (t, port.stats().unwrap())
    });
    rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let g = run(&["gen", "--engine", "xsk", "--netns", bed.ns_a(), "-i", bed.iface_a(), "--dst-mac", &mac(bed.mac_b()), "--count", &N.to_string(), "--rate", "100000", "--json", "--duration", "60"]);
    assert!(g.status.success(), "{}", stderr(&g));
    let (t, stats) = h.join().unwrap().unwrap();
    let drops: u64 = stats.drops.iter().filter(|(k, _)| k != "tp_freeze_q_cnt" && k != "rx_fill_ring_empty_descs" && k.starts_with(if path == "afxdp" { "rx_" } else { "tp_" })).map(|(_, v)| v).sum();
    assert_eq!((t.corrupt, t.duplicates, t.foreign), (0, 0, 0), "{path}: corrupt, duplicate, foreign frames");
    assert_eq!(t.unique() + drops, N, "{path}: received {} + named drops {drops} ({:?}) = sent {N}", t.unique(), stats.drops);
    assert_eq!(drops, 0, "{path}: at 100 kpps nothing should drop: {:?}", stats.drops);
    assert_eq!(stats.rx_packets, N, "{path}: the port's own rx counter");
}

/// Transmit: N frames sent with tx_burst from ns b arrive in ns a (AF_XDP rxdrop --verify)
/// exactly once, intact.
fn transmit(path: &'static str) {
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("bed");
    let rx = Running::start(&["bench", "rxdrop", "--netns", bed.ns_a(), "-i", bed.iface_a(), "--verify", "--json", "--duration", "120", "--poll", "--ring-size", "8192", "--frame-count", "16384", "--frame-size", "2048"]);
    let (ns_b, if_b, mac_a, mac_b) = (bed.ns_b().to_string(), bed.iface_b().to_string(), bed.mac_a(), bed.mac_b());
    let sent = fastpath_testbed::run_in_netns(&ns_b, move || {
        let mut port = open(path, &if_b);
        let spec = UdpFrameSpec { src_mac: mac_b, dst_mac: mac_a, src_ip: fastpath_testbed::IP4_B, dst_ip: fastpath_testbed::IP4_A, src_port: 7, dst_port: 9, frame_len: 64 };
        let mut frames = vec![vec![0u8; 64]; 64];
        for f in &mut frames {
            build_udp_frame(&spec, f);
        }
        let (mut seq, start) = (0u64, Instant::now());
        while seq < N {
            // Pace at ~100 kpps in batches of 64.
            let due = (start.elapsed().as_secs_f64() * 100_000.0) as u64;
            if due <= seq {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            let n = (N - seq).min(64) as usize;
            for (i, f) in frames.iter_mut().take(n).enumerate() {
                stamp(f, &Payload { stream: 7, seq: seq + 1 + i as u64, tstamp_ns: 0 });
            }
            let refs: Vec<&[u8]> = frames.iter().take(n).map(|f| f.as_slice()).collect();
            let mut off = 0;
            while off < n {
                off += port.tx_burst(&refs[off..]).unwrap();
            }
            seq += n as u64;
        }
        std::thread::sleep(Duration::from_millis(500));
        port.stats().unwrap().tx_packets
    })
    .unwrap();
    assert_eq!(sent, N, "{path}: tx counter");
    let (s, status) = rx.terminate();
    assert!(status.success());
    let v = &s["verify"];
    assert_eq!(v["corrupt"].as_u64(), Some(0), "{path}: {v}");
    assert_eq!(v["duplicates"].as_u64(), Some(0), "{path}: {v}");
    assert_eq!(v["unique"].as_u64(), Some(N), "{path}: every frame arrived once: {v}");
}

#[test]
fn afxdp_receive() {
    if privileged("afxdp_receive") {
        receive("afxdp");
    }
}

#[test]
fn afxdp_transmit() {
    if privileged("afxdp_transmit") {
        transmit("afxdp");
    }
}

#[test]
fn tpacket_receive() {
    if privileged("tpacket_receive") {
        receive("tpacket");
    }
}

#[test]
fn tpacket_transmit() {
    if privileged("tpacket_transmit") {
        transmit("tpacket");
    }
}

#[test]
fn tpacket_block_size_not_a_page_multiple_is_refused() {
    let e = TpacketOptions { block_size: 10_000, ..Default::default() }.validate().unwrap_err().to_string();
    assert_eq!(e, "TPACKET block size 10000 is not accepted: use a multiple of the page size (4096 bytes)");
    let e = TpacketOptions { frame_size: 100, ..Default::default() }.validate().unwrap_err().to_string();
    assert!(e.contains("frame size 100"), "{e}");
}

// ---- The kernel as the peer: the same two checks the TAP suite (crates/fastpath/tests/tap.rs)
// runs for tap and tap-uring, here for afxdp and tpacket across the veth, so all four backends
// pass the same semantics: frames the port sends reach a kernel UDP socket exactly once, and
// datagrams the kernel sends reach rx_burst exactly once, intact.

fn payload_bytes(seq: u64) -> [u8; 20] {
    let mut p = [0u8; 20];
    p[0..2].copy_from_slice(&fastpath::packet::PAYLOAD_MAGIC.to_le_bytes());
    p[4..12].copy_from_slice(&seq.to_le_bytes());
    p
}

fn kernel_peer_tx(path: &'static str) {
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("bed");
    let sock = fastpath_testbed::run_in_netns(bed.ns_a(), || {
        let s = std::net::UdpSocket::bind("10.99.0.1:9999").unwrap();
        fastpath::sys::setsockopt_int(&s, 1 /* SOL_SOCKET */, 8 /* SO_RCVBUF */, 8 << 20, "SOL_SOCKET, SO_RCVBUF").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        s
    })
    .unwrap();
    let reader = std::thread::spawn(move || {
        let mut seen = vec![false; N as usize + 1];
        let (mut unique, mut dup) = (0u64, 0u64);
        let mut buf = [0u8; 2048];
        while let Ok(n) = sock.recv(&mut buf) {
            if n < 12 {
                continue;
            }
            let seq = u64::from_le_bytes(buf[4..12].try_into().unwrap()) as usize;
            if seq <= N as usize {
                if seen[seq] {
                    dup += 1;
                } else {
                    seen[seq] = true;
                    unique += 1;
                }
            }
            if unique == N {
                break;
            }
        }
        (unique, dup)
    });
    let (ns_b, if_b, mac_a, mac_b) = (bed.ns_b().to_string(), bed.iface_b().to_string(), bed.mac_a(), bed.mac_b());
    fastpath_testbed::run_in_netns(&ns_b, move || {
        let mut port = open(path, &if_b);
        let spec = UdpFrameSpec { src_mac: mac_b, dst_mac: mac_a, src_ip: fastpath_testbed::IP4_B, dst_ip: fastpath_testbed::IP4_A, src_port: 7, dst_port: 9999, frame_len: 64 };
        let mut f = vec![0u8; 64];
        build_udp_frame(&spec, &mut f);
        let start = Instant::now();
        for seq in 1..=N {
            while ((start.elapsed().as_secs_f64() * 100_000.0) as u64) < seq {
                std::hint::spin_loop();
            }
            stamp(&mut f, &Payload { stream: 0, seq, tstamp_ns: 0 });
            while port.tx_burst(&[&f]).unwrap() == 0 {}
        }
    })
    .unwrap();
    let (unique, dup) = reader.join().unwrap();
    assert_eq!((unique, dup), (N, 0), "{path}: frames the port sent, as the kernel UDP socket got them");
}

fn kernel_peer_rx(path: &'static str) {
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("bed");
    let (ns_b, if_b) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    let (tx, rx) = std::sync::mpsc::channel();
    let h = fastpath_testbed::spawn_in_netns(&ns_b, move || {
        let mut port = open(path, &if_b);
        tx.send(()).unwrap();
        let mut t = SeqTracker::default();
        let mut idle = Instant::now();
        while t.unique() < N && idle.elapsed() < Duration::from_secs(5) {
            if port.rx_burst(256, 100, &mut |p| t.record(p)).unwrap() > 0 {
                idle = Instant::now();
            }
        }
        t
    });
    rx.recv_timeout(Duration::from_secs(20)).unwrap();
    // veth offloads the UDP checksum (the frame carries only the pseudo-header sum): have the
    // kernel compute it in full so "intact" includes a correct checksum.
    let st = fastpath_testbed::ns_command(bed.ns_a(), "ethtool").args(["-K", bed.iface_a(), "tx", "off"]).output().unwrap();
    assert!(st.status.success(), "ethtool -K tx off");
    fastpath_testbed::run_in_netns(bed.ns_a(), || {
        let s = std::net::UdpSocket::bind("10.99.0.1:7000").unwrap();
        let start = Instant::now();
        for seq in 1..=N {
            while ((start.elapsed().as_secs_f64() * 100_000.0) as u64) < seq {
                std::hint::spin_loop();
            }
            s.send_to(&payload_bytes(seq), "10.99.0.2:7777").unwrap();
        }
    })
    .unwrap();
    let t = h.join().unwrap().unwrap();
    assert_eq!((t.corrupt, t.duplicates), (0, 0), "{path}: damaged or duplicated datagrams");
    assert_eq!(t.unique(), N, "{path}: every datagram the kernel sent reached rx_burst once");
}

#[test]
fn afxdp_kernel_peer() {
    if privileged("afxdp_kernel_peer") {
        kernel_peer_tx("afxdp");
        kernel_peer_rx("afxdp");
    }
}

#[test]
fn tpacket_kernel_peer() {
    if privileged("tpacket_kernel_peer") {
        kernel_peer_tx("tpacket");
        kernel_peer_rx("tpacket");
    }
}

/// PACKET_FANOUT_HASH: two TPACKET_V3 sockets in one fanout group share the traffic by flow,
/// every datagram reaching exactly one of them.
#[test]
fn tpacket_fanout_spreads_flows_over_workers() {
    use fastpath::io::tpacket::Fanout;
    if !privileged("tpacket_fanout_spreads_flows_over_workers") {
        return;
    }
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("bed");
    let (tx, rx) = std::sync::mpsc::channel();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (ns_b, if_b, tx, stop) = (bed.ns_b().to_string(), bed.iface_b().to_string(), tx.clone(), stop.clone());
            fastpath_testbed::spawn_in_netns(&ns_b, move || {
                let mut port = TpacketPort::open(&if_b, TpacketOptions { fanout: Some((77, Fanout::Hash)), tx_frames: 0, ..Default::default() }).unwrap();
                tx.send(()).unwrap();
                let mut t = SeqTracker::default();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    port.rx_burst(256, 50, &mut |p| t.record(p)).unwrap();
                }
                t
            })
        })
        .collect();
    for _ in 0..2 {
        rx.recv_timeout(Duration::from_secs(20)).unwrap();
    }
    let st = fastpath_testbed::ns_command(bed.ns_a(), "ethtool").args(["-K", bed.iface_a(), "tx", "off"]).output().unwrap();
    assert!(st.status.success());
    const M: u64 = 20_000;
    fastpath_testbed::run_in_netns(bed.ns_a(), || {
        let socks: Vec<_> = (0..16).map(|i| std::net::UdpSocket::bind(format!("10.99.0.1:{}", 7000 + i)).unwrap()).collect();
        let start = Instant::now();
        for seq in 1..=M {
            while ((start.elapsed().as_secs_f64() * 50_000.0) as u64) < seq {
                std::hint::spin_loop();
            }
            socks[(seq % 16) as usize].send_to(&payload_bytes(seq), "10.99.0.2:7777").unwrap();
        }
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let got: Vec<SeqTracker> = workers.into_iter().map(|w| w.join().unwrap().unwrap()).collect();
    let (a, b) = (got[0].unique(), got[1].unique());
    assert_eq!(a + b, M, "every datagram reached exactly one worker ({a} + {b})");
    assert!(a > 0 && b > 0, "16 flows spread over both workers ({a}, {b})");
    assert_eq!(got[0].duplicates + got[1].duplicates, 0);
}
