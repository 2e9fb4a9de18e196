//! AF_XDP TX metadata on veth (root; Linux >= 6.8, the UMEM flag >= 6.11): `gen --engine xsk`
//! with `--tx-csum`, `--tx-timestamp`, `--tx-launch-time` into `bench rxdrop --verify`.
//!
//! What the kernel does in copy mode (net/xdp/xsk.c, xsk_skb_metadata / xsk_destruct_skb): a
//! checksum request makes the skb CHECKSUM_PARTIAL; with XDP_UMEM_TX_SW_CSUM the kernel
//! completes it on the CPU at once (`--tx-csum`, `--tx-csum sw`), without it the skb leaves
//! partial for the device, and a veth completes nothing: the receiver's AF_XDP socket sees the
//! pseudo-header sum (`--tx-csum device`, which is how these tests prove the frames left
//! partial). A timestamp request is answered by the kernel itself in copy mode, on any driver:
//! CLOCK_TAI when it frees the skb, written into the completion's metadata. Launch time needs a
//! driver with xsk-features `tx-launch-time-fifo` (igc, stmmac; Linux >= 6.14): refused on veth.
//!
//! The checksums are checked by our own code (`packet::verify`, behind `--verify`; checked in
//! turn against etherparse in the packet module's unit tests), not by tshark.

mod common;

use common::*;
use std::time::Duration;

use fastpath::io::afxdp::AfXdpPort;
use fastpath::io::Port;
use fastpath::xsk::{CopyMode, TxCsum, TxMeta, Umem, UmemConfig, XskConfig, TX_META_LEN};
use fastpath_testbed::{Testbed, TestbedConfig};
use serde_json::Value;

fn bed() -> Testbed {
    Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed")
}

/// `rxdrop --verify` on b while `gen --engine xsk` sends `count` frames from a with `extra`;
/// (gen's summary, rxdrop's summary).
fn send_verified(bed: &Testbed, count: u64, extra: &[&str]) -> (Value, Value) {
    let rx = Running::start(&[
        "bench",
        "rxdrop",
        "--netns",
        bed.ns_b(),
        "-i",
        bed.iface_b(),
        "--verify",
        "--poll",
        "--json",
        "--duration",
        "60",
        "--interval",
        "100",
    ]);
    let rx0 = rx_packets(bed.ns_b(), bed.iface_b());
    let c = count.to_string();
    let mut args = vec!["--count", &c, "--rate", "50000", "--duration", "30", "--cpu", "0", "--json"];
    args.extend_from_slice(extra);
    let g = gen_xsk(bed, &args);
    assert!(g.status.success(), "gen {extra:?} failed: {}", stderr(&g));
    wait_rx_packets(bed.ns_b(), bed.iface_b(), rx0, count);
    let (s, status) = rx.terminate();
    assert!(status.success(), "rxdrop: {s}");
    (last_json(&g), s)
}

#[test]
fn frames_sent_with_a_checksum_request_arrive_with_a_correct_checksum() {
    if !privileged("frames_sent_with_a_checksum_request_arrive_with_a_correct_checksum") {
        return;
    }
    let _g = serial();
    let bed = bed();
    let count = 20_000;
    let (g, s) = send_verified(&bed, count, &["--tx-csum", "--flows", "8"]);
    let tm = &g["path"]["tx_meta"];
    assert_eq!(tm["checksum"], "sw", "{tm}");
    assert_eq!(tm["csum_at"], serde_json::json!([34, 6]), "the UDP header of an IPv4 frame, checksum at +6");
    assert_eq!(n(&tm["tx_metadata_len"]), 24);
    assert_eq!(n(&g["totals"]["tx_completed"]), count);
    let v = &s["verify"];
    assert_eq!(n(&v["corrupt"]), 0, "every checksum completed by the kernel: {v}");
    assert_eq!(n(&v["unique"]), count, "every frame once: {v}");
}

#[test]
fn without_sw_csum_the_partial_checksum_reaches_the_receiver_on_veth() {
    if !privileged("without_sw_csum_the_partial_checksum_reaches_the_receiver_on_veth") {
        return;
    }
    let _g = serial();
    let bed = bed();
    let count = 5_000;
    let (g, s) = send_verified(&bed, count, &["--tx-csum", "device"]);
    assert_eq!(g["path"]["tx_meta"]["checksum"], "device");
    let v = &s["verify"];
    assert_eq!(n(&v["frames"]), count, "{v}");
    // The pseudo-header sum matches the full checksum only where the rest sums to 0 mod
    // 0xffff: about 1 frame in 65,535.
    assert!(n(&v["corrupt"]) >= count - 5, "veth left them partial, and --verify saw it: {v}");
}

#[test]
fn tx_timestamps_come_back_in_copy_mode_from_the_kernel() {
    if !privileged("tx_timestamps_come_back_in_copy_mode_from_the_kernel") {
        return;
    }
    let _g = serial();
    let bed = bed();
    let count = 10_000;
    let tai0 = fastpath::clock::tai_ns();
    let (g, s) = send_verified(&bed, count, &["--tx-timestamp", "--tx-csum"]);
    let tai1 = fastpath::clock::tai_ns();
    let t = &g["tx_timestamps"];
    assert_eq!(n(&t["requested"]), count, "{t}");
    // Copy mode: the kernel writes its software timestamp (xsk_destruct_skb) whatever the driver;
    // veth has no xsk-features at all.
    assert_eq!(n(&t["returned"]), count, "{t}");
    let (first, last) = (n(&t["first_ns"]), n(&t["last_ns"]));
    assert!(tai0 <= first && first <= last && last <= tai1, "CLOCK_TAI, within the run: {tai0} {t} {tai1}");
    assert_eq!(g["path"]["tx_meta"]["xsk_features"], serde_json::json!([]), "veth: none");
    assert!(g["path"]["notes"].to_string().contains("software"), "{}", g["path"]["notes"]);
    assert_eq!(n(&s["verify"]["corrupt"]), 0, "the timestamp overwrote the request, not the frame");
}

/// The timestamp a completion carries is the kernel's, taken when the frame left (the skb freed),
/// not when the sender got round to reaping it: one frame sent, the completion reaped a second
/// later, its timestamp within the send (up to a generous 300 ms for a loaded machine).
#[test]
fn tx_timestamp_is_when_the_frame_left_not_when_it_was_reaped() {
    if !privileged("tx_timestamp_is_when_the_frame_left_not_when_it_was_reaped") {
        return;
    }
    let _g = serial();
    let bed = bed();
    let (if_a, dst) = (bed.iface_a().to_string(), bed.mac_b());
    let (sent0, sent1, reaped, t) = fastpath_testbed::run_in_netns(bed.ns_a(), move || {
        let mut cfg = XskConfig::default();
        cfg.umem.tx_metadata_len = TX_META_LEN;
        cfg.socket.copy_mode = CopyMode::Copy;
        let iface = fastpath::netdev::Iface::resolve(&if_a).unwrap();
        let mut port =
            AfXdpPort::open(&iface, 0, &cfg, fastpath::bpf::AttachOpts::default()).unwrap_or_else(|e| panic!("{e}"));
        let req = TxMeta { csum: None, timestamp: true, launch_time_ns: None };
        port.set_tx_meta(Some(req), None).expect("TX metadata");
        let spec = fastpath::packet::UdpFrameSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: dst,
            src_ip: std::net::Ipv4Addr::new(10, 99, 0, 1).into(),
            dst_ip: std::net::Ipv4Addr::new(10, 99, 0, 2).into(),
            src_port: 9000,
            dst_port: 9,
            frame_len: 64,
        };
        let mut frame = vec![0u8; 64];
        fastpath::packet::build_udp_frame(&spec, &mut frame);
        let sent0 = fastpath::clock::tai_ns();
        assert_eq!(port.tx_burst(&[&frame]).expect("send"), 1);
        let sent1 = fastpath::clock::tai_ns();
        std::thread::sleep(Duration::from_secs(1));
        // The completion is reaped by the next burst (nothing to send).
        let reaped = fastpath::clock::tai_ns();
        port.tx_burst(&[]).expect("reap");
        (sent0, sent1, reaped, port.tx_timestamps())
    })
    .expect("netns");
    assert_eq!((t.requested, t.returned), (1, 1), "{t:?}");
    let ts = t.first_ns.expect("a timestamp");
    assert!(
        sent0 <= ts && ts <= sent1 + 300_000_000,
        "the kernel's CLOCK_TAI when the frame left: sent in [{sent0}, {sent1}], stamped {ts}, \
         reaped from {reaped} (+{} ms)",
        ts.saturating_sub(sent1) / 1_000_000
    );
}

#[test]
fn launch_time_is_refused_where_the_driver_lacks_it() {
    if !privileged("launch_time_is_refused_where_the_driver_lacks_it") {
        return;
    }
    let _g = serial();
    let bed = bed();
    let o = gen_xsk(&bed, &["--count", "10", "--tx-launch-time", "1000000"]);
    assert_one_line_refusal("launch time on veth", &o, 6, &["veth", "tx-launch-time-fifo", "6.14"]);
    assert!(attached(bed.ns_a(), bed.iface_a()).is_none(), "nothing left attached");
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let r = |a: &[&str]| run(a);
    assert_one_line_refusal(
        "rxdrop",
        &r(&["bench", "rxdrop", "--netns", ns, "-i", i, "--tx-csum", "--duration", "1"]),
        2,
        &["--tx-csum", "txonly"],
    );
    assert_one_line_refusal(
        "xdp-live",
        &r(&["gen", "--netns", ns, "-i", i, "--tx-timestamp", "--count", "1"]),
        2,
        &["--tx-timestamp", "xdp-live"],
    );
    assert_one_line_refusal(
        "--path",
        &r(&["bench", "txonly", "--netns", ns, "-i", i, "--tx-csum", "--path", "tpacket", "--duration", "1"]),
        2,
        &["--tx-csum", "--path"],
    );
    assert!(attached(ns, i).is_none(), "nothing left attached");
}

/// The bytes in the UMEM: the request `tx_metadata_len` bytes in front of the packet, the token
/// marked, the partial checksum in the frame; what the API refuses. Needs CAP_NET_RAW (an
/// AF_XDP socket for XDP_UMEM_REG), no interface.
#[test]
fn the_request_and_the_partial_checksum_are_in_the_umem() {
    if !privileged("the_request_and_the_partial_checksum_are_in_the_umem") {
        return;
    }
    let mut cfg = UmemConfig::default();
    (cfg.frame_count, cfg.fill_size, cfg.comp_size) = (64, 64, 64);
    (cfg.tx_metadata_len, cfg.tx_sw_csum) = (32, true);
    let (umem, mut frames) = Umem::new(&cfg).expect("UMEM with TX metadata");
    let mut f = frames.pop().unwrap();
    let base = f.addr();
    let spec = fastpath::packet::UdpFrameSpec {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src_ip: std::net::Ipv4Addr::new(10, 99, 0, 1).into(),
        dst_ip: std::net::Ipv4Addr::new(10, 99, 0, 2).into(),
        src_port: 9000,
        dst_port: 9,
        frame_len: 64,
    };
    let full = {
        let mut v = vec![0u8; 64];
        fastpath::packet::build_udp_frame(&spec, &mut v);
        v
    };
    let bytes = umem.resize_at(&mut f, 32, 64);
    bytes.copy_from_slice(&full);
    let (start, offset) = fastpath::packet::udp_csum_partial(bytes);
    assert_eq!(f.addr(), base + 32, "moved inside its own frame");
    let req = TxMeta { csum: Some(TxCsum { start, offset }), timestamp: true, launch_time_ns: None };
    umem.set_tx_meta(&mut f, &req).expect("request written");
    assert!(f.tx_meta(), "marked for XDP_TX_METADATA");
    let m = umem.meta(&f, 32);
    assert_eq!(u64::from_ne_bytes(m[0..8].try_into().unwrap()), 0b11, "XDP_TXMD_FLAGS_TIMESTAMP | _CHECKSUM");
    assert_eq!(u16::from_ne_bytes([m[8], m[9]]), 34);
    assert_eq!(u16::from_ne_bytes([m[10], m[11]]), 6);
    assert_eq!(umem.tx_completion_timestamp(&f), None, "nothing written back yet");
    // The frame holds the pseudo-header sum, not the checksum: the device must complete it.
    let d = umem.data(&f);
    let pseudo = {
        let mut acc: u32 = 17 + 30; // protocol, UDP length
        for w in d[26..34].chunks(2) {
            acc += u16::from_be_bytes([w[0], w[1]]) as u32;
        }
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    };
    assert_eq!(u16::from_be_bytes([d[40], d[41]]), pseudo);
    assert_ne!(&d[40..42], &full[40..42]);
    assert!(fastpath::packet::verify(d).is_err());
    // A resize drops the request.
    umem.resize(&mut f, 64);
    assert!(!f.tx_meta());
    assert_eq!(u64::from_ne_bytes(umem.meta(&f, 32)[0..8].try_into().unwrap()), 0, "flags cleared");
    // Refused: a packet with no room in front, a checksum outside the packet.
    let mut g = frames.pop().unwrap();
    umem.resize_at(&mut g, 16, 64);
    assert!(umem.set_tx_meta(&mut g, &req).is_err(), "16 bytes in front, tx_metadata_len 32");
    umem.resize_at(&mut g, 32, 40);
    assert!(umem.set_tx_meta(&mut g, &req).is_err(), "checksum at 40..42 of a 40-byte packet");
    assert!(!g.tx_meta());
    // Sizes the kernel would refuse are refused first.
    for (tml, sw) in [(20, false), (33, false), (256, false), (0, true)] {
        let mut c = UmemConfig::default();
        (c.tx_metadata_len, c.tx_sw_csum) = (tml, sw);
        assert!(c.validate().is_err(), "tx_metadata_len {tml}, sw csum {sw}");
    }
    for tml in [TX_META_LEN, 248] {
        let mut c = UmemConfig::default();
        c.tx_metadata_len = tml;
        assert!(c.validate().is_ok(), "tx_metadata_len {tml}");
    }
}
