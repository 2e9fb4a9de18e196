//! Jumbo frames over AF_XDP multi-buffer (XDP_USE_SG, kernel >= 6.6): on a veth pair at MTU
//! 9000, 9,014-byte frames take three 4,096-byte UMEM frames each. `gen --engine xsk` (the
//! txonly loop) sends them split over frames, rxdrop and l2fwd take them whole, and every frame
//! arrives exactly once and intact (checksums, and the template's fill pattern, which a
//! reordered buffer breaks even where the checksum cannot see it). The AF_XDP forwarder's jumbo
//! test is in fwd.rs.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::*;
use fastpath_testbed::{Testbed, TestbedConfig};

const FRAME_LEN: u64 = 9014;

/// A test bed at MTU 9000 without IPv6 (no kernel frames of its own on the wire).
fn jumbo_bed() -> Testbed {
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    bed.set_mtu(9000).expect("mtu 9000");
    bed
}

/// Buffering for the receiver: 8,192 descriptors (2,730 jumbo packets, 55 ms at 50,000/s).
const RX_ARGS: [&str; 8] = ["--ring-size", "8192", "--frame-count", "16384", "--frame-size", "4096", "--cpu", "1"];

/// `gen --engine xsk` of `count` jumbo frames at `rate`; the sender's summary, checked complete.
fn send(bed: &Testbed, count: u64, rate: u64, extra: &[&str]) -> serde_json::Value {
    let (c, r) = (count.to_string(), rate.to_string());
    let mut args =
        vec!["--frame-len", "9014", "--count", &c, "--rate", &r, "--json", "--duration", "120", "--cpu", "0"];
    args.extend_from_slice(extra);
    let g = gen_xsk(bed, &args);
    assert!(g.status.success(), "gen: {}", stderr(&g));
    let gs = last_json(&g);
    assert_eq!(gs["path"]["multi_buffer"], true, "the sender's socket is multi-buffer: {gs}");
    assert_eq!(n(&gs["totals"]["tx_packets"]), count, "{gs}");
    assert_eq!(n(&gs["totals"]["tx_completed"]), count, "completions count packets, not frames: {gs}");
    assert_eq!(n(&gs["totals"]["tx_bytes"]), count * FRAME_LEN, "{gs}");
    assert_eq!(n(&gs["delivered"]), count, "the receiving veth took every frame: {gs}");
    gs
}

/// rxdrop, native, multi-buffer: 100,000 IPv4 and 20,000 IPv6 frames of 9,014 bytes, each
/// received once and verified whole (the receiver gathers the three buffers of each into one
/// packet), or counted by the kernel at a full RX ring (rx_ring_full): the two add up to what was
/// sent, exactly, and most reach the socket.
#[test]
fn jumbo_frames_through_gen_and_rxdrop_exactly_once_intact() {
    if !privileged("jumbo_frames_through_gen_and_rxdrop_exactly_once_intact") {
        return;
    }
    let _s = serial();
    let bed = jumbo_bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let mut args = vec!["bench", "rxdrop", "--netns", ns, "-i", i, "--xdp-mode", "native", "--verify", "--json"];
    args.extend_from_slice(&["--duration", "120", "--poll"]);
    args.extend_from_slice(&RX_ARGS);
    for (count, ips) in [(100_000u64, None), (20_000, Some(["--src-ip", "fd99::1", "--dst-ip", "fd99::2"]))] {
        let rx = Running::start(&args);
        assert_eq!(rx.ready["path"]["xdp_mode"], "native", "frags-aware program attached natively at MTU 9000");
        assert_eq!(rx.ready["path"]["multi_buffer"], true, "{}", rx.ready);
        let rx0 = rx_packets(ns, i);
        send(&bed, count, 50_000, ips.as_ref().map(|a| &a[..]).unwrap_or(&[]));
        wait_rx_packets(ns, i, rx0, count);
        let (s, status) = rx.terminate();
        assert!(status.success());
        let v = &s["verify"];
        assert_eq!((n(&v["corrupt"]), n(&v["duplicates"]), n(&v["foreign"])), (0, 0, 0), "{v}");
        // Every packet arrived once, intact, or the kernel counted where it was dropped: a full
        // RX ring (the receiver fell a ring behind: XDP_STATISTICS rx_ring_full, the same
        // packets in the veth's rx_queue_0_drops), exactly. None lost without a count.
        let ring_full = n(&s["xdp_statistics"]["rx_ring_full"]);
        let other = n(&s["xdp_statistics"]["rx_dropped"]) + n(&s["xdp_statistics"]["rx_fill_ring_empty_descs"]);
        assert_eq!((n(&v["unique"]) + ring_full, other), (count, 0), "received once + rx_ring_full = sent: {s}");
        assert!(ring_full * 2 < count, "most packets reach the socket (a full ring is a loaded machine's): {s}");
        let got = count - ring_full;
        assert_eq!(n(&s["totals"]["rx_packets"]), got, "packets, not frames: {s}");
        assert_eq!(n(&s["totals"]["rx_bytes"]), got * FRAME_LEN, "{s}");
        assert!(attached(ns, i).is_none());
    }
}

/// l2fwd, native, multi-buffer: 100,000 jumbo frames from a to a's own address (10.99.0.1) go
/// to b's l2fwd, come back with the MACs swapped, and a's kernel delivers each to a UDP socket
/// once (it checks the UDP checksum; the test checks the length, the sequence number and every
/// byte of the fill pattern). Datagrams the socket buffer could not take are counted by a's
/// kernel (RcvbufErrors) or by b's veth (tx_dropped: a's receive ring was full): received
/// once + those = sent, exactly. TSO is off on b, so the veth hands l2fwd's frames to a's NAPI
/// ring (drivers/net/veth.c, veth_skb_is_eligible_for_gro()) where a full ring is counted per
/// device, instead of the host-wide per-CPU backlog that other tests share.
#[test]
fn jumbo_frames_through_l2fwd_exactly_once_intact() {
    if !privileged("jumbo_frames_through_l2fwd_exactly_once_intact") {
        return;
    }
    let _s = serial();
    let bed = jumbo_bed();
    let o = fastpath_testbed::ns_command(bed.ns_b(), "ethtool").args(["-K", bed.iface_b(), "tso", "off"]).output();
    assert!(o.is_ok_and(|o| o.status.success()), "ethtool -K tso off on b");
    let count = 100_000u64;
    let mut args = vec!["bench", "l2fwd", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--xdp-mode", "native"];
    args.extend_from_slice(&["--json", "--duration", "120", "--poll"]);
    args.extend_from_slice(&RX_ARGS);
    let fwd = Running::start(&args);
    assert_eq!(fwd.ready["path"]["multi_buffer"], true, "{}", fwd.ready);
    let (ready_tx, ready_rx) = mpsc::channel();
    let ns_a = bed.ns_a().to_string();
    let rx = std::thread::spawn(move || {
        fastpath_testbed::enter_netns(&ns_a).expect("enter a");
        let s = std::net::UdpSocket::bind(("10.99.0.1", 9)).expect("bind");
        fastpath::io::udp::set_socket_rcvbuf(&s, 512 << 20).expect("rcvbuf");
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        ready_tx.send(()).unwrap();
        let payload_len = (FRAME_LEN - 42) as usize;
        let mut seen = vec![false; count as usize + 1];
        let (mut once, mut dup, mut bad) = (0u64, 0u64, 0u64);
        let mut buf = vec![0u8; 65536];
        let mut frame = vec![0u8; FRAME_LEN as usize];
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        frame[14] = 0x45;
        while let Ok(len) = s.recv(&mut buf) {
            // The datagram back in its frame (headers the kernel stripped), to read it as sent.
            frame[42..].copy_from_slice(&buf[..payload_len.min(len)]);
            let seq = fastpath::packet::payload(&frame).map(|p| p.seq).unwrap_or(0);
            let fill_ok = (42 + fastpath::packet::PAYLOAD_LEN..FRAME_LEN as usize)
                .all(|o| frame[o] == fastpath::packet::fill_byte(o));
            if len != payload_len || !fill_ok || seq == 0 || seq > count {
                bad += 1;
            } else if std::mem::replace(&mut seen[seq as usize], true) {
                dup += 1;
            } else {
                once += 1;
            }
            if once == count {
                break;
            }
        }
        (once, dup, bad)
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).expect("receiver ready");
    let udp0 = common::udp_counters(bed.ns_a(), false);
    let napi_a = || -> u64 {
        let st = Testbed::ethtool_stats(bed.ns_a(), bed.iface_a()).expect("ethtool -S a");
        st.iter().filter(|(k, _)| k.starts_with("rx_queue_") && k.ends_with("_xdp_packets")).map(|(_, v)| v).sum()
    };
    let napi_a0 = napi_a();
    send(&bed, count, 25_000, &["--src-ip", "10.99.0.2", "--dst-ip", "10.99.0.1"]);
    let (once, dup, bad) = rx.join().unwrap();
    let (s, status) = fwd.terminate();
    assert!(status.success());
    let udp1 = common::udp_counters(bed.ns_a(), false);
    let d = |k: &str| udp1.get(k).copied().unwrap_or(0) - udp0.get(k).copied().unwrap_or(0);
    // A's kernel verified every UDP checksum (none failed). What a's kernel could not take
    // (its socket buffer full) it counted, and b's veth counted what a's ring could not take;
    // l2fwd lost nothing. A frame lost anywhere else (a per-CPU backlog) fails the equation.
    assert_eq!(d("InCsumErrors"), 0, "damaged on the way");
    assert_eq!((dup, bad), (0, 0), "(duplicates, damaged); l2fwd: {s}");
    let kernel = d("RcvbufErrors") + n(&s["link"]["tx_dropped"]);
    assert_eq!(once + kernel, count, "received once {once} + counted drops {kernel} = sent; l2fwd: {s}");
    let through_ring = napi_a() - napi_a0;
    assert_eq!(
        through_ring + n(&s["link"]["tx_dropped"]),
        count,
        "every frame went through a's NAPI ring or was counted refused by it"
    );
    let t = &s["totals"];
    assert_eq!(n(&t["rx_packets"]), n(&t["tx_packets"]), "l2fwd sends what it receives: {s}");
    assert_eq!(n(&t["rx_packets"]), count, "packets, not frames: {s}");
    assert_eq!(n(&t["tx_bytes"]), count * FRAME_LEN, "{s}");
}

/// Refusals: a frame longer than the MTU allows, a jumbo frame on the xdp-live engine (live
/// frames hold one page) or on TPACKET_V3: one line each, exit 2; a kernel without multi-buffer
/// at MTU 9000: one line, exit 6. Nothing is left attached.
#[test]
fn jumbo_refusals_name_the_limit() {
    if !privileged("jumbo_refusals_name_the_limit") {
        return;
    }
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    let o = gen_xsk(&bed, &["--frame-len", "9014", "--count", "1"]);
    assert_one_line_refusal("above the MTU", &o, 2, &["--frame-len 9014", "MTU 1500", "1514"]);
    bed.set_mtu(9000).expect("mtu");
    let dst = mac(bed.mac_b());
    let o = run(&["gen", "--netns", bed.ns_a(), "-i", bed.iface_a(), "--dst-mac", &dst, "--frame-len", "9014"]);
    assert_one_line_refusal("xdp-live", &o, 2, &["--frame-len 9014", "xdp-live", "--engine xsk"]);
    let o = run(&[
        "bench",
        "txonly",
        "--path",
        "tpacket",
        "--netns",
        bed.ns_a(),
        "-i",
        bed.iface_a(),
        "--frame-len",
        "9014",
    ]);
    assert_one_line_refusal("tpacket", &o, 2, &["--frame-len 9014", "tpacket", "--path afxdp"]);
    assert!(attached(bed.ns_a(), bed.iface_a()).is_none());
    // A kernel without AF_XDP multi-buffer (here: the feature table told to refuse it): rxdrop
    // and the AF_XDP forwarder at MTU 9000 name the feature, its minimum kernel and the largest
    // MTU that fits one UMEM frame; exit 6 (unsupported); nothing attached.
    for args in [
        vec!["bench", "rxdrop", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--duration", "1"],
        vec!["bench", "l2fwd", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--duration", "1"],
        vec!["gen", "--engine", "xsk", "--netns", bed.ns_b(), "-i", bed.iface_b(), "--count", "1"],
    ] {
        let o = fastpath().env("FASTPATH_DENY_FEATURES", "multi_buffer").args(&args).output().unwrap();
        assert_one_line_refusal(args[1], &o, 6, &["MTU 9000", "multi-buffer (XDP_USE_SG)", "6.6", "mtu 3822"]);
        assert!(attached(bed.ns_b(), bed.iface_b()).is_none());
    }
}

/// The port API's copying send (`tx_burst`, as `inject` uses it) on a multi-buffer socket: 2,000
/// jumbo frames handed over 16 at a time, each split over three UMEM frames and received whole,
/// once and intact by rxdrop --verify.
#[test]
fn jumbo_frames_through_tx_burst_exactly_once_intact() {
    if !privileged("jumbo_frames_through_tx_burst_exactly_once_intact") {
        return;
    }
    let _s = serial();
    let bed = jumbo_bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let mut args = vec!["bench", "rxdrop", "--netns", ns, "-i", i, "--xdp-mode", "native", "--verify", "--json"];
    args.extend_from_slice(&["--duration", "120", "--poll"]);
    args.extend_from_slice(&RX_ARGS);
    let rx = Running::start(&args);
    let rx0 = rx_packets(ns, i);
    let count = 2_000u64;
    let (ia, mac_a, mac_b) = (bed.iface_a().to_string(), bed.mac_a(), bed.mac_b());
    let sent = fastpath_testbed::spawn_in_netns(bed.ns_a(), move || {
        use fastpath::io::afxdp::AfXdpPort;
        use fastpath::io::Port;
        use fastpath::packet::{build_udp_frame, stamp, Payload, UdpFrameSpec};
        use fastpath::xsk::{CopyMode, XskConfig};
        let mut cfg = XskConfig::default();
        (cfg.socket.copy_mode, cfg.socket.multi_buffer) = (CopyMode::Copy, true);
        let mut port = AfXdpPort::open(
            &fastpath::netdev::Iface::resolve(&ia).unwrap(),
            0,
            &cfg,
            fastpath::bpf::AttachOpts::mode(Some(fastpath::bpf::XdpMode::Native)),
        )
        .unwrap();
        let spec = UdpFrameSpec {
            src_mac: mac_a,
            dst_mac: mac_b,
            src_ip: "10.99.0.1".parse().unwrap(),
            dst_ip: "10.99.0.2".parse().unwrap(),
            src_port: 9000,
            dst_port: 9,
            frame_len: FRAME_LEN as usize,
        };
        let mut frames = vec![vec![0u8; FRAME_LEN as usize]; count as usize];
        for (k, f) in frames.iter_mut().enumerate() {
            build_udp_frame(&spec, f);
            stamp(f, &Payload { stream: 3, seq: k as u64 + 1, tstamp_ns: 0 });
        }
        // One packet alone: it takes three TX slots, all reserved at once.
        assert_eq!(port.tx_burst(&[&frames[0][..]]).unwrap(), 1, "a single jumbo frame is sent");
        let mut next = 1usize;
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while next < frames.len() && std::time::Instant::now() < deadline {
            let batch: Vec<&[u8]> = frames[next..(next + 16).min(frames.len())].iter().map(|f| &f[..]).collect();
            next += port.tx_burst(&batch).unwrap();
            let _ = port.tx_reap();
            std::thread::sleep(Duration::from_micros(200));
        }
        while port.tx_outstanding().unwrap() > 0 && std::time::Instant::now() < deadline {
            let _ = port.tx_reap();
            std::thread::sleep(Duration::from_millis(1));
        }
        (next as u64, port.tx_outstanding().unwrap())
    })
    .join()
    .unwrap()
    .unwrap();
    assert_eq!(sent, (count, 0), "(handed over, not completed)");
    wait_rx_packets(ns, i, rx0, count);
    let (s, status) = rx.terminate();
    assert!(status.success());
    let v = &s["verify"];
    assert_eq!((n(&v["corrupt"]), n(&v["duplicates"]), n(&v["unique"])), (0, 0, count), "{v}");
}
