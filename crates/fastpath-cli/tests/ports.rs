//! Port API conformance: the same receive and transmit test, run per backend on a test bed
//! (root). Every frame sent is received exactly once with its bytes intact, or counted by a
//! named kernel drop counter.

mod common;

use std::time::{Duration, Instant};

use common::*;
use fastpath::io::tpacket::{TpacketOptions, TpacketPort};
use fastpath::io::{afxdp::AfXdpPort, AnyPort, Port};
use fastpath::packet::{build_udp_frame, stamp, Payload, UdpFrameSpec};
use fastpath::xsk::{CopyMode, XskConfig};
use fastpath_testbed::{Testbed, TestbedConfig};
use fastpath_tools::payload::SeqTracker;

const N: u64 = 100_000;

fn open(path: &str, iface: &str) -> AnyPort {
    match path {
        "afxdp" => AnyPort::AfXdp(Box::new(
            AfXdpPort::open(
                &fastpath::netdev::Iface::resolve(iface).unwrap(),
                0,
                &{
                    let mut c = XskConfig::default();
                    c.socket.copy_mode = CopyMode::Copy;
                    c.socket.tx_skb_budget = Some(256);
                    c
                },
                fastpath::bpf::AttachOpts::mode(None),
            )
            .unwrap_or_else(|e| panic!("{e}")),
        )),
        "tpacket" => AnyPort::Tpacket(
            TpacketPort::open(&fastpath::netdev::Iface::resolve(iface).unwrap(), TpacketOptions::default())
                .unwrap_or_else(|e| panic!("{e}")),
        ),
        other => panic!("no backend {other}"),
    }
}

/// Receive: N frames paced by AF_XDP TX from ns a reach the port in ns b exactly once, intact,
/// or are counted by the port's named kernel drop counters: sent = received + drops, exactly.
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
            if port.rx_burst(256, 100, |p: &[u8]| t.record(p)).unwrap() > 0 {
                idle = Instant::now();
            }
        }
        (t, port.stats().unwrap())
    });
    rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let g = gen_xsk(&bed, &["--count", &N.to_string(), "--rate", "100000", "--json", "--duration", "60"]);
    assert!(g.status.success(), "{}", stderr(&g));
    let (t, stats) = h.join().unwrap().unwrap();
    let drops: u64 = stats
        .drops
        .iter()
        .filter(|(k, _)| {
            k != "tp_freeze_q_cnt"
                && k != "rx_fill_ring_empty_descs"
                && k.starts_with(if path == "afxdp" { "rx_" } else { "tp_" })
        })
        .map(|(_, v)| v)
        .sum();
    assert_eq!((t.corrupt, t.duplicates, t.foreign), (0, 0, 0), "{path}: corrupt, duplicate, foreign frames");
    assert_eq!(
        t.unique() + drops,
        N,
        "{path}: received {} + named drops {drops} ({:?}) = sent {N}",
        t.unique(),
        stats.drops
    );
    // Not a speed (a receiver starved by a loaded machine drops, and says so above): this only
    // keeps the test from passing vacuously. At the paced 100 kpps a receiver sharing each core
    // with a CPU hog still takes far more than half.
    assert!(t.unique() >= N / 2, "{path}: received only {} of {N}: {:?}", t.unique(), stats.drops);
    assert_eq!(stats.rx_packets, t.unique(), "{path}: the port's own rx counter = frames it handed over");
}

/// Transmit: N frames sent with tx_burst from ns b arrive in ns a (AF_XDP rxdrop --verify)
/// exactly once, intact.
fn transmit(path: &'static str) {
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("bed");
    let rx = Running::start(&[
        "bench",
        "rxdrop",
        "--netns",
        bed.ns_a(),
        "-i",
        bed.iface_a(),
        "--verify",
        "--json",
        "--duration",
        "120",
        "--poll",
        "--ring-size",
        "8192",
        "--frame-count",
        "16384",
        "--frame-size",
        "2048",
    ]);
    let (ns_b, if_b, mac_a, mac_b) = (bed.ns_b().to_string(), bed.iface_b().to_string(), bed.mac_a(), bed.mac_b());
    let sent = fastpath_testbed::run_in_netns(&ns_b, move || {
        let mut port = open(path, &if_b);
        let spec = UdpFrameSpec {
            src_mac: mac_b,
            dst_mac: mac_a,
            src_ip: fastpath_testbed::IP4_B.into(),
            dst_ip: fastpath_testbed::IP4_A.into(),
            src_port: 7,
            dst_port: 9,
            frame_len: 64,
        };
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
    let mut o = TpacketOptions::default();
    o.block_size = 10_000;
    let e = o.validate().unwrap_err().to_string();
    assert_eq!(e, "TPACKET block size 10000 is not accepted: use a multiple of the page size (4096 bytes)");
    let mut o = TpacketOptions::default();
    o.frame_size = 100;
    let e = o.validate().unwrap_err().to_string();
    assert!(e.contains("frame size 100"), "{e}");
}

// ---- Conformance: ONE pair of generic checks run for every backend (afxdp, tpacket, tap,
// tap-uring) against the kernel as the peer: frames the port sends reach a kernel UDP socket
// exactly once, and datagrams the kernel sends reach rx_burst exactly once, intact, or are
// counted by a named drop counter. A new backend is added to these four tests and cannot
// quietly behave differently.

fn payload_bytes(seq: u64) -> [u8; 20] {
    let mut p = [0u8; 20];
    p[0..2].copy_from_slice(&fastpath::packet::PAYLOAD_MAGIC.to_le_bytes());
    p[4..12].copy_from_slice(&seq.to_le_bytes());
    p
}

/// Where a port under test sits and who its kernel peer is.
#[derive(Clone)]
struct Env {
    /// Namespace of the port.
    port_ns: String,
    /// Interface (or TAP name) the port opens.
    iface: String,
    /// Namespace of the kernel peer's UDP socket.
    peer_ns: String,
    /// The peer's address, and the port's (pretend) address.
    peer_ip: &'static str,
    port_ip: &'static str,
    /// MACs: frames the port sends go to `peer_mac` from `port_mac`.
    peer_mac: [u8; 6],
    port_mac: [u8; 6],
    /// A TAP port: the interface is made by opening the port, then configured here.
    tap: bool,
}

fn open_in_env(path: &str, env: &Env) -> AnyPort {
    use fastpath::io::{self, tap::TapOptions, PortSpec};
    match path {
        "tap" | "tap-uring" => {
            let spec = if path == "tap" {
                PortSpec::Tap(TapOptions::default())
            } else {
                PortSpec::TapUring(TapOptions::default())
            };
            let port = io::open(&env.iface, &spec).unwrap_or_else(|e| panic!("{e}"));
            let ip = |args: &str| {
                let o =
                    fastpath_testbed::ns_command(&env.port_ns, "ip").args(args.split_whitespace()).output().unwrap();
                assert!(o.status.success(), "ip {args}: {}", String::from_utf8_lossy(&o.stderr));
            };
            // No IPv6 on the TAP: its MLD/ND frames would land in the TAP's queue and, when it
            // overflows, in tx_dropped, which this test counts as drops of its own datagrams.
            let o = fastpath_testbed::ns_command(&env.port_ns, "sysctl")
                .args(["-qw", &format!("net.ipv6.conf.{}.disable_ipv6=1", env.iface)])
                .output()
                .unwrap();
            assert!(o.status.success(), "sysctl disable_ipv6: {}", String::from_utf8_lossy(&o.stderr));
            ip(&format!("addr add {}/24 dev {}", env.peer_ip, env.iface));
            ip(&format!("neigh replace {} lladdr {} dev {} nud permanent", env.port_ip, mac(env.port_mac), env.iface));
            ip(&format!("link set dev {} up", env.iface));
            port
        }
        other => open(other, &env.iface),
    }
}

/// The veth test bed: the port on b, the kernel peer in a.
fn veth_env(bed: &Testbed) -> Env {
    Env {
        port_ns: bed.ns_b().into(),
        iface: bed.iface_b().into(),
        peer_ns: bed.ns_a().into(),
        peer_ip: "10.99.0.1",
        port_ip: "10.99.0.2",
        peer_mac: bed.mac_a(),
        port_mac: bed.mac_b(),
        tap: false,
    }
}

/// A TAP in ns b: the kernel peer is ns b's own stack behind the TAP.
fn tap_env(bed: &Testbed) -> Env {
    Env {
        port_ns: bed.ns_b().into(),
        iface: "fpconf0".into(),
        peer_ns: bed.ns_b().into(),
        peer_ip: "10.99.8.1",
        port_ip: "10.99.8.2",
        peer_mac: [0; 6], // read from the TAP once it exists
        port_mac: [2, 0, 0, 0, 0, 2],
        tap: true,
    }
}

/// Frames the port sends reach a kernel UDP socket exactly once (payload intact).
fn kernel_peer_tx(path: &'static str, env: &Env) {
    let (tx_ready, rx_ready) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<[u8; 6]>();
    let e2 = env.clone();
    // The port is opened first (a TAP exists only then); the peer's socket is bound after.
    let sender = fastpath_testbed::spawn_in_netns(&env.port_ns, move || {
        let mut port = open_in_env(path, &e2);
        fd_is_the_ports(path, &port, &e2.iface);
        let peer_mac = if e2.tap { fastpath::netdev::if_hwaddr(&e2.iface).unwrap() } else { e2.peer_mac };
        tx_ready.send(()).unwrap();
        let _ = go_rx.recv().unwrap();
        let spec = UdpFrameSpec {
            src_mac: e2.port_mac,
            dst_mac: peer_mac,
            src_ip: e2.port_ip.parse().unwrap(),
            dst_ip: e2.peer_ip.parse().unwrap(),
            src_port: 7,
            dst_port: 9999,
            frame_len: 64,
        };
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
        std::thread::sleep(Duration::from_millis(300));
    });
    rx_ready.recv_timeout(Duration::from_secs(20)).unwrap();
    let addr = format!("{}:9999", env.peer_ip);
    let sock = fastpath_testbed::run_in_netns(&env.peer_ns, move || {
        let s = std::net::UdpSocket::bind(&addr).unwrap();
        fastpath::io::udp::set_socket_rcvbuf(&s, 8 << 20).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        s
    })
    .unwrap();
    go_tx.send([0; 6]).unwrap();
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
    sender.join().unwrap().unwrap();
    assert_eq!((unique, dup), (N, 0), "{path}: frames the port sent, as the kernel UDP socket got them");
}

/// Datagrams the kernel sends reach rx_burst exactly once, checksums and payload intact, or are
/// counted by a named drop counter (the port's, or the TAP's): sent = received + drops, exactly.
fn kernel_peer_rx(path: &'static str, env: &Env) {
    let (tx, rx) = std::sync::mpsc::channel();
    let e2 = env.clone();
    let h = fastpath_testbed::spawn_in_netns(&env.port_ns, move || {
        let mut port = open_in_env(path, &e2);
        tx.send(()).unwrap();
        let mut t = SeqTracker::default();
        let mut idle = Instant::now();
        while t.unique() < N && idle.elapsed() < Duration::from_secs(3) {
            if port.rx_burst(256, 100, |p: &[u8]| t.record(p)).unwrap() > 0 {
                idle = Instant::now();
            }
        }
        // The port's own drop counters (XDP_STATISTICS rx_*, tp_drops).
        let drops: u64 = port
            .stats()
            .unwrap()
            .drops
            .iter()
            .filter(|(k, _)| matches!(k.as_str(), "rx_dropped" | "rx_ring_full" | "rx_invalid_descs" | "tp_drops"))
            .map(|(_, v)| v)
            .sum::<u64>()
            + if e2.tap { tap_drops(&e2) } else { 0 };
        (t, drops) // the port (and a TAP device with it) goes only after its counters are read
    });
    rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let (peer_ip, port_ip) = (env.peer_ip, env.port_ip);
    fastpath_testbed::run_in_netns(&env.peer_ns, move || {
        let s = std::net::UdpSocket::bind(format!("{peer_ip}:7000")).unwrap();
        let start = Instant::now();
        for seq in 1..=N {
            while ((start.elapsed().as_secs_f64() * 100_000.0) as u64) < seq {
                std::hint::spin_loop();
            }
            s.send_to(&payload_bytes(seq), format!("{port_ip}:7777")).unwrap();
        }
    })
    .unwrap();
    let (t, drops) = h.join().unwrap().unwrap();
    assert_eq!((t.corrupt, t.duplicates), (0, 0), "{path}: damaged or duplicated datagrams");
    assert_eq!(
        t.unique() + drops,
        N,
        "{path}: every datagram the kernel sent reached rx_burst once ({}) or a named drop counter ({drops})",
        t.unique()
    );
    // Exact accounting is the requirement; this only keeps the test from passing vacuously. Not
    // a speed: at the paced 100 kpps a receiver sharing each core with a CPU hog (and with the
    // spinning sender) still takes far more than half.
    assert!(t.unique() >= N / 2, "{path}: received only {} of {N} ({drops} dropped)", t.unique());
}

/// Where a TAP's overflow is counted: the device's tx_dropped (a full ring) and its qdisc's
/// drops (when the driver stops the queue). Read while the TAP still exists.
fn tap_drops(env: &Env) -> u64 {
    let o = fastpath_testbed::ns_command(&env.port_ns, "ip")
        .args(["-j", "-s", "link", "show", "dev", &env.iface])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("ip -j -s link prints JSON");
    let mut d = v[0]["stats64"]["tx"]["dropped"]
        .as_u64()
        .unwrap_or_else(|| panic!("no stats64.tx.dropped in `ip -j -s link` output: {v}"));
    let o = fastpath_testbed::ns_command(&env.port_ns, "tc")
        .args(["-s", "-j", "qdisc", "show", "dev", &env.iface])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("tc -s -j qdisc prints JSON");
    d += v.as_array().into_iter().flatten().filter_map(|q| q["drops"].as_u64()).sum::<u64>();
    d
}

/// What a port's `AsFd` hands out (for tokio's `AsyncFd` or poll) is its own socket or device:
/// an AF_XDP socket, an AF_PACKET socket, or the TAP device of that interface (its fdinfo names
/// the interface: drivers/net/tun.c tun_chr_show_fdinfo).
fn fd_is_the_ports(path: &str, port: &AnyPort, iface: &str) {
    use std::os::fd::{AsFd, AsRawFd};
    let fd = port.as_fd().as_raw_fd();
    assert_eq!(fd, port.as_raw_fd(), "{path}: AsFd and AsRawFd agree");
    let mut domain: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: fd is open for the port's lifetime; domain and len are valid for the call.
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_DOMAIN, (&raw mut domain).cast(), &mut len) };
    match path {
        "afxdp" => assert_eq!((rc, domain), (0, libc::AF_XDP), "{path}: fd {fd} is an AF_XDP socket"),
        "tpacket" => assert_eq!((rc, domain), (0, libc::AF_PACKET), "{path}: fd {fd} is an AF_PACKET socket"),
        _ => {
            let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap();
            assert!(info.contains(&format!("iff:\t{iface}")), "{path}: fd {fd} is the TAP of {iface}: {info}");
        }
    }
}

/// One generic conformance check per backend: the same two functions, run for every path.
fn conformance(path: &'static str) {
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("bed");
    let env = if path.starts_with("tap") { tap_env(&bed) } else { veth_env(&bed) };
    if !env.tap {
        // Full UDP checksums from the peer's kernel (veth would leave them partial).
        let st = fastpath_testbed::ns_command(bed.ns_a(), "ethtool")
            .args(["-K", bed.iface_a(), "tx", "off"])
            .output()
            .unwrap();
        assert!(st.status.success(), "ethtool -K tx off");
    }
    kernel_peer_tx(path, &env);
    kernel_peer_rx(path, &env);
}

#[test]
fn conformance_afxdp() {
    if privileged("conformance_afxdp") {
        conformance("afxdp");
    }
}

#[test]
fn conformance_tpacket() {
    if privileged("conformance_tpacket") {
        conformance("tpacket");
    }
}

#[test]
fn conformance_tap() {
    if privileged("conformance_tap") {
        conformance("tap");
    }
}

#[test]
fn conformance_tap_uring() {
    if privileged("conformance_tap_uring") {
        conformance("tap-uring");
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
                let mut port = TpacketPort::open(&fastpath::netdev::Iface::resolve(&if_b).unwrap(), {
                    let mut o = TpacketOptions::default();
                    o.fanout = Some((77, Fanout::Hash));
                    o.tx_frames = 0;
                    o
                })
                .unwrap();
                tx.send(()).unwrap();
                let mut t = SeqTracker::default();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    port.rx_burst(256, 50, |p: &[u8]| t.record(p)).unwrap();
                }
                t
            })
        })
        .collect();
    for _ in 0..2 {
        rx.recv_timeout(Duration::from_secs(20)).unwrap();
    }
    let st =
        fastpath_testbed::ns_command(bed.ns_a(), "ethtool").args(["-K", bed.iface_a(), "tx", "off"]).output().unwrap();
    assert!(st.status.success());
    const M: u64 = 20_000;
    fastpath_testbed::run_in_netns(bed.ns_a(), || {
        let socks: Vec<_> =
            (0..16).map(|i| std::net::UdpSocket::bind(format!("10.99.0.1:{}", 7000 + i)).unwrap()).collect();
        let start = Instant::now();
        for seq in 1..=M {
            while ((start.elapsed().as_secs_f64() * 50_000.0) as u64) < seq {
                std::hint::spin_loop();
            }
            socks[(seq % 16) as usize].send_to(&payload_bytes(seq), "10.99.0.2:7777").unwrap();
        }
    })
    .unwrap();
    wait_rx_settled(bed.ns_b(), bed.iface_b());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let got: Vec<SeqTracker> = workers.into_iter().map(|w| w.join().unwrap().unwrap()).collect();
    let (a, b) = (got[0].unique(), got[1].unique());
    assert_eq!(a + b, M, "every datagram reached exactly one worker ({a} + {b})");
    assert!(a > 0 && b > 0, "16 flows spread over both workers ({a}, {b})");
    assert_eq!(got[0].duplicates + got[1].duplicates, 0);
}
