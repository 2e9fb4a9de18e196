//! The library's examples (crates/fastpath/examples), built by `cargo test`, run on test beds:
//! the minimal rxdrop counts every frame sent, and the two-queue shared-UMEM l2fwd sends every
//! frame of both queues back.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fastpath_testbed::{Testbed, TestbedConfig};

/// target/<profile>/examples/NAME, next to this test's own binary (target/<profile>/deps/).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().unwrap().parent().unwrap().join("examples").join(name);
    assert!(p.exists(), "{} not built (cargo test builds the examples)", p.display());
    p
}

#[test]
fn example_rxdrop_counts_every_frame() {
    if !privileged("example_rxdrop_counts_every_frame") {
        return;
    }
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    let c = Command::new("ip")
        .args(["netns", "exec", bed.ns_b()])
        .arg(example("rxdrop"))
        .args([bed.iface_b(), "0", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_attached(&bed, 1);
    let g = gen_xsk(&bed, &["--count", "100000", "--rate", "200000", "--duration", "30"]);
    assert!(g.status.success(), "gen: {}", stderr(&g));
    let out = c.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "rxdrop example: {text}{}", String::from_utf8_lossy(&out.stderr));
    // "rxdrop: P packets, B bytes, rx_dropped D rx_ring_full F": sent = received + named drops.
    let line = text.lines().find(|l| l.contains(" packets, ")).unwrap_or_else(|| panic!("no count line: {text}"));
    let n: Vec<u64> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    let [packets, bytes, dropped, full] = n[n.len() - 4..] else { panic!("{line}") };
    assert_eq!(packets + dropped + full, 100_000, "every frame counted once or named as dropped: {text}");
    assert_eq!(bytes, packets * 64, "{text}");
    // Not a speed: how many of the 100,000 the receiver takes before its ring overflows
    // depends on the machine's load; the exact accounting above is the claim. Some must arrive.
    assert!(packets > 0, "the example received nothing: {text}");
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none(), "the example detached its program");
}

#[test]
fn example_l2fwd_shared_umem_forwards_both_queues() {
    if !privileged("example_l2fwd_shared_umem_forwards_both_queues") {
        return;
    }
    let bed = Testbed::up(&TestbedConfig { queues: 2, ipv6: false, ..Default::default() }).expect("test bed");
    let c = Command::new("ip")
        .args(["netns", "exec", bed.ns_b()])
        .arg(example("l2fwd_shared"))
        .args([bed.iface_b(), "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_attached(&bed, 2);
    let back0 = rx_packets(bed.ns_a(), bed.iface_a());
    let g = gen_xsk(&bed, &["--queues", "2", "--count", "100000", "--rate", "200000", "--duration", "30"]);
    assert!(g.status.success(), "gen: {}", stderr(&g));
    let out = c.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "l2fwd_shared example: {text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("umem Owner") && text.contains("umem OtherQueue"), "one UMEM, two sockets: {text}");
    // "l2fwd_shared: queue Q forwarded N dropped D": each queue gets its 50,000 (gen --queues 2
    // sends half on each), every one forwarded or named as dropped by the kernel.
    let mut total = 0;
    for q in 0..2 {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("l2fwd_shared: queue {q} forwarded ")))
            .unwrap_or_else(|| panic!("no line for queue {q}: {text}"));
        let n: Vec<u64> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
        let (fwd, dropped) = (n[n.len() - 2], n[n.len() - 1]);
        assert_eq!(fwd + dropped, 50_000, "queue {q}: forwarded + dropped: {text}");
        // Not a speed (the share dropped depends on the machine's load): each queue forwards.
        assert!(fwd > 0, "queue {q} forwarded nothing: {text}");
        total += fwd;
    }
    wait_rx_settled(bed.ns_a(), bed.iface_a());
    assert_eq!(rx_packets(bed.ns_a(), bed.iface_a()) - back0, total, "the sender got each forwarded frame back once");
}

/// Waits until the example has attached its program and bound its `sockets` (XDP_STATISTICS
/// cannot be read from here, so: the program is attached, then a little for the binds).
fn wait_attached(bed: &Testbed, _sockets: u32) {
    let t0 = Instant::now();
    while attached(bed.ns_b(), bed.iface_b()).is_none() {
        assert!(t0.elapsed() < Duration::from_secs(20), "the example attached nothing in 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
}

/// The README's Rust quick start is crates/fastpath/examples/receive.rs, byte for byte (so what
/// a newcomer copies is what `cargo test` builds), and it receives: 100 frames sent at a slow
/// rate, 100 lines of their length, exit 0, nothing left attached.
#[test]
fn readme_receiver_is_the_example_and_receives() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let example_src = std::fs::read_to_string(root.join("crates/fastpath/examples/receive.rs")).unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("```rust\n{example_src}```\n")),
        "README.md's ```rust block is not crates/fastpath/examples/receive.rs: copy the file into it"
    );
    if !privileged("readme_receiver_is_the_example_and_receives") {
        return;
    }
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    let c = Command::new("ip")
        .args(["netns", "exec", bed.ns_b()])
        .arg(example("receive"))
        .args([bed.iface_b(), "100"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_attached(&bed, 1);
    // 300 frames at 1,000/s: the receiver stops at its 100th; the rest are the kernel's.
    let g = gen_xsk(&bed, &["--count", "300", "--rate", "1000", "--duration", "10"]);
    assert!(g.status.success(), "gen: {}", stderr(&g));
    let out = c.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "receive example: {text}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 100, "one line per frame, 100 frames: {text}");
    assert!(lines.iter().all(|l| *l == "64 bytes"), "every frame's length is the generator's 64: {text}");
    assert!(attached(bed.ns_b(), bed.iface_b()).is_none(), "the example detached its program");
}
