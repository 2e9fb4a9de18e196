//! `fastpath fwd` on a forwarding test bed (a -- f -- b, fastpath_testbed::FwdBed): every frame
//! forwarded exactly once and intact, with the TTL / hop limit and MACs the kernel's forwarding
//! would give it (L3) or untouched (L2); TTL 1 answered by the kernel; the ports followed
//! through link down/up and delete/re-create under traffic with every frame accounted for.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{n, privileged, run, serial, stderr, Running};
use fastpath::io::{Port, PortSpec};
use fastpath::packet::SeqTracker;
use fastpath_testbed::{FwdBed, FwdBedInfo};

/// What a receiver saw of fastpath frames: the tracker, and frames whose TTL or MACs were not
/// the expected ones.
#[derive(Default)]
struct Seen {
    tracker: SeqTracker,
    wrong_ttl: u64,
    wrong_mac: u64,
    last_rx: Option<Instant>,
}

/// Receives on `iface` in `ns` (AF_PACKET TPACKET_V3, after the kernel took the frame) until
/// `stop`; checks every fastpath frame's TTL / hop limit and MACs.
fn receiver(
    ns: String,
    iface: String,
    want_ttl: u8,
    want_src: String,
    want_dst: String,
    stop: Arc<AtomicBool>,
) -> (std::thread::JoinHandle<()>, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let s2 = seen.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        fastpath_testbed::enter_netns(&ns).expect("enter netns");
        let mut port = fastpath::io::open(&iface, &PortSpec::Tpacket(Default::default())).expect("open tpacket");
        ready_tx.send(()).unwrap();
        while !stop.load(Ordering::Relaxed) {
            let mut s = s2.lock().unwrap();
            let _ = port.rx_burst(64, 20, |f| {
                if fastpath::packet::payload(f).is_none() {
                    return;
                }
                s.tracker.record(f);
                s.last_rx = Some(Instant::now());
                let ttl = if f[12..14] == [0x86, 0xdd] { f[21] } else { f[22] };
                if ttl != want_ttl {
                    s.wrong_ttl += 1;
                }
                if common::mac(f[0..6].try_into().unwrap()) != want_dst
                    || common::mac(f[6..12].try_into().unwrap()) != want_src
                {
                    s.wrong_mac += 1;
                }
            });
        }
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).expect("receiver ready");
    (h, seen)
}

fn gen(ns: &str, iface: &str, dst_mac: &str, src: &str, dst: &str, count: u64, rate: u64) -> u64 {
    let o = run(&[
        "gen",
        "--engine",
        "xsk",
        "--netns",
        ns,
        "-i",
        iface,
        "--dst-mac",
        dst_mac,
        "--src-ip",
        src,
        "--dst-ip",
        dst,
        "--count",
        &count.to_string(),
        "--rate",
        &rate.to_string(),
        "--json",
    ]);
    assert!(o.status.success(), "gen: {}", stderr(&o));
    n(&common::last_json(&o)["totals"]["tx_packets"])
}

fn start_fwd(b: &FwdBedInfo, mode: &str) -> Running {
    Running::start(&[
        "fwd",
        "--netns",
        &b.ns_f,
        "-i",
        &b.iface_fa,
        "-i",
        &b.iface_fb,
        "--mode",
        mode,
        "--duration",
        "300",
        "--json",
    ])
}

fn port<'a>(summary: &'a serde_json::Value, iface: &str) -> &'a serde_json::Value {
    summary["ports"].as_array().unwrap().iter().find(|p| p["iface"] == iface).unwrap_or_else(|| panic!("{summary}"))
}

/// Sends `count` frames from one host to the other through the forwarder and checks each
/// arrived once, intact, with `ttl` and the MACs given.
#[allow(clippy::too_many_arguments)]
fn send_and_check(
    from: (&str, &str),
    to: (&str, &str),
    dst_mac: &str,
    src: &str,
    dst: &str,
    want: (u8, &str, &str),
    count: u64,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let (h, seen) = receiver(to.0.into(), to.1.into(), want.0, want.1.into(), want.2.into(), stop.clone());
    let sent = gen(from.0, from.1, dst_mac, src, dst, count, 100_000);
    assert_eq!(sent, count);
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.lock().unwrap().tracker.unique() < count && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    let s = seen.lock().unwrap();
    let what = format!("{src} -> {dst}");
    assert_eq!(s.tracker.unique(), count, "{what}: frames received once");
    assert_eq!(s.tracker.duplicates, 0, "{what}: duplicates");
    assert_eq!(s.tracker.corrupt, 0, "{what}: damaged frames (checksums after the TTL rewrite)");
    assert_eq!(s.wrong_ttl, 0, "{what}: frames with a TTL other than {}", want.0);
    assert_eq!(s.wrong_mac, 0, "{what}: frames with other MACs than {} -> {}", want.1, want.2);
}

/// L3, both directions, IPv4 and IPv6: 100,000 frames each exactly once, TTL / hop limit 63
/// (the generator sends 64), source MAC the forwarder's egress port, destination the host's.
#[test]
fn l3_forwards_every_frame_once_with_ttl_and_macs_as_the_kernel() {
    if !privileged("l3_forwards_every_frame_once_with_ttl_and_macs_as_the_kernel") {
        return;
    }
    let _s = serial();
    let bed = FwdBed::up(None).expect("fwd bed");
    let b = bed.info().clone();
    let fwd = start_fwd(&b, "l3");
    let count = 100_000u64;
    let (a, bb) = ((b.ns_a.as_str(), b.iface_a.as_str()), (b.ns_b.as_str(), b.iface_b.as_str()));
    let cases = [
        (a, bb, &b.mac_fa, b.ip4_a.to_string(), b.ip4_b.to_string(), (&b.mac_fb, &b.mac_b)),
        (bb, a, &b.mac_fb, b.ip4_b.to_string(), b.ip4_a.to_string(), (&b.mac_fa, &b.mac_a)),
        (a, bb, &b.mac_fa, b.ip6_a.to_string(), b.ip6_b.to_string(), (&b.mac_fb, &b.mac_b)),
        (bb, a, &b.mac_fb, b.ip6_b.to_string(), b.ip6_a.to_string(), (&b.mac_fa, &b.mac_a)),
    ];
    for (from, to, dmac, src, dst, (wsrc, wdst)) in cases {
        send_and_check(from, to, dmac, &src, &dst, (63, wsrc, wdst), count);
    }
    let (summary, status) = fwd.terminate();
    assert!(status.success(), "fwd exit {status}");
    for iface in [&b.iface_fa, &b.iface_fb] {
        let c = &port(&summary, iface)["counters"];
        // Two streams entered by each port; anything else forwarded is the hosts' own traffic.
        assert!(n(&c["forwarded"]) >= 2 * count, "{iface}: {c}");
        assert_eq!(n(&c["pass_malformed"]), 0, "{iface}: {c}");
        assert_eq!(n(&c["pass_no_port"]), 0, "{iface}: {c}");
    }
}

/// TTL 1 / hop limit 1 go to the kernel, which answers with ICMP time exceeded; the forwarder
/// counts them as pass_ttl.
#[test]
fn ttl_1_goes_to_the_kernel_which_answers_time_exceeded() {
    if !privileged("ttl_1_goes_to_the_kernel_which_answers_time_exceeded") {
        return;
    }
    let _s = serial();
    let bed = FwdBed::up(None).expect("fwd bed");
    let b = bed.info().clone();
    let fwd = start_fwd(&b, "l3");
    let ping = |args: &[&str]| {
        let o = fastpath_testbed::ns_command(&b.ns_a, "ping").args(args).output().expect("ping");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let v4 = ping(&["-c", "1", "-W", "2", "-t", "1", &b.ip4_b.to_string()]);
    assert!(v4.contains("Time to live exceeded") && v4.contains(&b.ip4_fa.to_string()), "{v4}");
    let v6 = ping(&["-6", "-c", "1", "-W", "2", "-t", "1", &b.ip6_b.to_string()]);
    assert!(v6.contains("Time exceeded"), "{v6}");
    let ok = ping(&["-c", "1", "-W", "2", &b.ip4_b.to_string()]);
    assert!(ok.contains("ttl=63"), "a normal ping crosses with TTL 63: {ok}");
    let (summary, _) = fwd.terminate();
    let c = &port(&summary, &b.iface_fa)["counters"];
    assert_eq!(n(&c["pass_ttl"]), 2, "{c}");
    assert!(n(&c["forwarded"]) >= 1, "{c}");
}

/// L2: the port pair carries frames unchanged (TTL 64, the sender's MACs).
#[test]
fn l2_port_pair_carries_frames_unchanged() {
    if !privileged("l2_port_pair_carries_frames_unchanged") {
        return;
    }
    let _s = serial();
    let bed = FwdBed::up(None).expect("fwd bed");
    let b = bed.info().clone();
    let fwd = start_fwd(&b, "l2");
    let (a, bb) = ((b.ns_a.as_str(), b.iface_a.as_str()), (b.ns_b.as_str(), b.iface_b.as_str()));
    let (src, dst) = (b.ip4_a.to_string(), b.ip4_b.to_string());
    send_and_check(a, bb, &b.mac_b, &src, &dst, (64, &b.mac_a, &b.mac_b), 100_000);
    let (src6, dst6) = (b.ip6_b.to_string(), b.ip6_a.to_string());
    send_and_check(bb, a, &b.mac_a, &src6, &dst6, (64, &b.mac_b, &b.mac_a), 100_000);
    let (summary, status) = fwd.terminate();
    assert!(status.success());
    let c = &port(&summary, &b.iface_fa)["counters"];
    assert_eq!(n(&c["drop_peer_down"]), 0, "{c}");
    assert!(n(&c["forwarded"]) >= 100_000, "{c}");
}

/// Bad input: one line, non-zero exit, nothing attached.
#[test]
fn fwd_refuses_bad_ports() {
    if !privileged("fwd_refuses_bad_ports") {
        return;
    }
    let _s = serial();
    let bed = FwdBed::up(None).expect("fwd bed");
    let b = bed.info().clone();
    let o = run(&["fwd", "--netns", &b.ns_f, "-i", &b.iface_fa]);
    common::assert_one_line_refusal("one port", &o, 2, &["-i", "2 to 64 ports"]);
    let o = run(&["fwd", "--netns", &b.ns_f, "-i", &b.iface_fa, "-i", &b.iface_fa]);
    common::assert_one_line_refusal("twice", &o, 2, &[&b.iface_fa, "twice"]);
    let o = run(&["fwd", "--netns", &b.ns_f, "-i", &b.iface_fa, "-i", "nosuch0", "--duration", "1"]);
    common::assert_one_line_refusal("missing", &o, 3, &["nosuch0", "no interface"]);
    assert!(common::attached(&b.ns_f, &b.iface_fa).is_none(), "nothing left attached after a refusal");
    let o = run(&["fwd", "--netns", &b.ns_f, "-i", &b.iface_fa, "-i", &b.iface_fb, "-i", "lo", "--mode", "l2"]);
    common::assert_one_line_refusal("odd l2", &o, 2, &["3 ports", "even"]);
    fastpath_testbed::ns_command(&b.ns_f, "sysctl").args(["-qw", "net.ipv4.ip_forward=0"]).status().unwrap();
    let o = run(&["fwd", "--netns", &b.ns_f, "-i", &b.iface_fa, "-i", &b.iface_fb, "--duration", "1"]);
    common::assert_one_line_refusal("forwarding off", &o, 3, &["ip_forward=1"]);
    assert!(common::attached(&b.ns_f, &b.iface_fa).is_none());
}
