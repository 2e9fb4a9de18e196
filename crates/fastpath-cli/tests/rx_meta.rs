//! `bench rxdrop --rx-meta` on veth (root): the driver's RX metadata in front of every frame,
//! through the device-bound `xsk_redirect_meta` (Linux >= 6.3).
//!
//! What veth answers (drivers/net/veth.c, veth_xdp_rx_timestamp / _rx_hash / _rx_vlan_tag): for
//! a frame that came as an skb (sent by an AF_XDP socket in copy mode, or the stack), the skb's
//! hash with type none and its hardware timestamp (0 on veth: no timestamp); for a frame that
//! came as an xdp_frame (XDP_REDIRECTed into the veth, as `gen --engine xdp-live` sends), no
//! skb and so -ENODATA for everything. The port must give `None` for what the driver did not
//! give, never a value read from bytes nobody wrote.

mod common;

use common::*;
use fastpath_testbed::{Testbed, TestbedConfig};
use serde_json::Value;

fn bed() -> Testbed {
    Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed")
}

/// rxdrop --rx-meta --verify while `gen` sends `count` frames of 8 flows with `engine`; the
/// summary.
fn run_meta(bed: &Testbed, engine: &str, count: u64) -> Value {
    let rx = Running::start(&[
        "bench",
        "rxdrop",
        "--netns",
        bed.ns_b(),
        "-i",
        bed.iface_b(),
        "--rx-meta",
        "--verify",
        "--poll",
        "--json",
        "--duration",
        "60",
        "--interval",
        "100",
    ]);
    assert_eq!(rx.ready["path"]["rx_meta"], true, "{}", rx.ready);
    let rx0 = rx_packets(bed.ns_b(), bed.iface_b());
    let dst = mac(bed.mac_b());
    let c = count.to_string();
    let g = run(&[
        "gen",
        "--engine",
        engine,
        "--netns",
        bed.ns_a(),
        "-i",
        bed.iface_a(),
        "--dst-mac",
        &dst,
        "--flows",
        "8",
        "--count",
        &c,
        "--rate",
        "50000",
        "--duration",
        "30",
        "--cpu",
        "0",
    ]);
    assert!(g.status.success(), "gen failed: {}", stderr(&g));
    wait_rx_packets(bed.ns_b(), bed.iface_b(), rx0, count);
    let (s, status) = rx.terminate();
    assert!(status.success(), "rxdrop: {s}");
    assert_eq!(n(&s["verify"]["unique"]), count, "every frame once: {}", s["verify"]);
    s
}

#[test]
fn frames_sent_as_skbs_carry_veths_hash_and_nothing_else() {
    if !privileged("frames_sent_as_skbs_carry_veths_hash_and_nothing_else") {
        return;
    }
    let _g = serial();
    let bed = bed();
    let s = run_meta(&bed, "xsk", 20_000);
    let m = &s["rx_meta"];
    assert_eq!(n(&m["frames"]), 20_000, "{m}");
    assert_eq!(n(&m["no_room"]), 0, "veth keeps room for the metadata: none passed to the stack: {m}");
    assert_eq!(n(&m["with_hash"]), 20_000, "veth hashes every skb: {m}");
    assert_eq!(m["hash_types"], serde_json::json!({"none": 20_000}), "veth's type: none (not an L4 hash)");
    assert_eq!(n(&m["with_timestamp"]), 0, "veth has no RX timestamp (0 is none): {m}");
    assert_eq!(n(&m["with_vlan"]), 0, "untagged frames: {m}");
    assert!(m["first"]["hash"].is_array() && m["first"]["timestamp"].is_null() && m["first"]["vlan"].is_null(), "{m}");
    // veth implements all three kfuncs: from an skb it answers the timestamp (0: none taken)
    // and the hash, and has no VLAN tag for an untagged frame.
    let a = &m["answers"];
    assert_eq!(n(&a["timestamp"]["answered"]), 20_000, "veth answers the timestamp of an skb (with 0): {a}");
    assert_eq!(n(&a["hash"]["answered"]), 20_000, "{a}");
    assert_eq!(n(&a["vlan"]["no_data"]), 20_000, "veth has no tag for an untagged skb: {a}");
}

/// Frames the stack sends, one UDP socket (source port) per flow: veth answers each skb's hash,
/// the same for every frame of a flow and a different one for each flow (as RSS spreads flows).
/// (This kernel has no 802.1Q support to send tagged skbs; the VLAN kfunc is checked through
/// its answers above.)
#[test]
fn frames_the_stack_sends_carry_a_hash_per_flow() {
    if !privileged("frames_the_stack_sends_carry_a_hash_per_flow") {
        return;
    }
    let _g = serial();
    let bed = bed();
    const FLOWS: u64 = 4;
    const PER_FLOW: u64 = 200;
    let (src, dst) = (bed.ip4_a(), bed.ip4_b());
    // The receiver's XDP program takes its ARP replies too: its address is given by hand.
    let o = fastpath_testbed::ns_command(bed.ns_a(), "ip")
        .args(["neigh", "replace", &dst.to_string(), "lladdr", &mac(bed.mac_b()), "dev", bed.iface_a()])
        .args(["nud", "permanent"])
        .output()
        .expect("ip neigh");
    assert!(o.status.success(), "ip neigh: {}", stderr(&o));
    let rx = Running::start(&[
        "bench",
        "rxdrop",
        "--netns",
        bed.ns_b(),
        "-i",
        bed.iface_b(),
        "--rx-meta",
        "--poll",
        "--json",
        "--duration",
        "60",
        "--interval",
        "100",
    ]);
    let rx0 = rx_packets(bed.ns_b(), bed.iface_b());
    fastpath_testbed::run_in_netns(bed.ns_a(), move || {
        // One socket (one source port) per flow, paced so the veth's ring never overflows.
        for _ in 0..FLOWS {
            let s = std::net::UdpSocket::bind((src, 0)).expect("bind");
            for i in 0..PER_FLOW {
                s.send_to(&[0u8; 32], (dst, 9)).expect("send");
                if i % 25 == 24 {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            }
        }
    })
    .expect("netns");
    wait_rx_packets(bed.ns_b(), bed.iface_b(), rx0, FLOWS * PER_FLOW);
    let (s, status) = rx.terminate();
    assert!(status.success(), "rxdrop: {s}");
    let m = &s["rx_meta"];
    assert_eq!(n(&m["frames"]), FLOWS * PER_FLOW, "{m}");
    assert_eq!(n(&m["with_hash"]), FLOWS * PER_FLOW, "{m}");
    assert_eq!(n(&m["distinct_hashes"]), FLOWS, "one hash per flow, a different one for each: {m}");
}

#[test]
fn frames_redirected_in_as_xdp_frames_get_none_not_garbage() {
    if !privileged("frames_redirected_in_as_xdp_frames_get_none_not_garbage") {
        return;
    }
    let _g = serial();
    let bed = bed();
    let s = run_meta(&bed, "xdp-live", 20_000);
    let m = &s["rx_meta"];
    assert_eq!(n(&m["frames"]), 20_000, "{m}");
    for k in ["with_hash", "with_timestamp", "with_vlan", "distinct_hashes"] {
        assert_eq!(n(&m[k]), 0, "{k}: an xdp_frame has no skb, veth answers -ENODATA: {m}");
    }
    let no_data = serde_json::json!({"answered": 0, "no_data": 20_000, "other": 0, "unsupported": 0});
    assert_eq!(
        m["answers"],
        serde_json::json!({"timestamp": no_data, "hash": no_data, "vlan": no_data}),
        "veth was asked and had nothing (ENODATA), not unsupported: {m}"
    );
    assert_eq!(
        m["first"],
        serde_json::json!({"hash": null, "timestamp": null, "vlan": null,
            "errno": {"timestamp": 61, "hash": 61, "vlan": 61}})
    );
}

#[test]
fn rx_meta_is_refused_where_it_cannot_work() {
    if !privileged("rx_meta_is_refused_where_it_cannot_work") {
        return;
    }
    let _g = serial();
    let bed = bed();
    let (ns, i) = (bed.ns_b(), bed.iface_b());
    let base = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["bench", "rxdrop", "--netns", ns, "-i", i, "--rx-meta", "--duration", "0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let call = |v: Vec<String>| run(&v.iter().map(String::as_str).collect::<Vec<_>>());
    assert_one_line_refusal(
        "with txonly",
        &call(base(&[]).into_iter().map(|s| if s == "rxdrop" { "txonly".into() } else { s }).collect()),
        2,
        &["--rx-meta", "rxdrop"],
    );
    assert_one_line_refusal("with --path", &call(base(&["--path", "tpacket"])), 2, &["--rx-meta", "--path afxdp"]);
    assert_one_line_refusal("skb mode", &call(base(&["--xdp-mode", "skb"])), 2, &["--rx-meta", "native XDP"]);
    bed.set_mtu(9000).unwrap();
    assert_one_line_refusal("multi-buffer MTU", &call(base(&[])), 2, &["--rx-meta", "MTU 9000"]);
    assert!(attached(ns, i).is_none(), "nothing left attached");
}
