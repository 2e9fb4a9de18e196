//! `fastpath ss`: the AF_XDP sockets of a namespace, with their owner, against iproute2's
//! `ss --xdp` where the kernel has AF_XDP sock_diag.

mod common;

use common::*;
use fastpath_testbed::{Testbed, TestbedConfig};
use serde_json::Value;

fn ss(ns: &str) -> Value {
    let o = run(&["ss", "--netns", ns, "--json"]);
    assert!(o.status.success(), "ss: {}", stderr(&o));
    last_json(&o)
}

/// The inodes `ss --xdp` lists in `ns` (iproute2; the inode is the Local Address column's
/// "ino:N" or a bare number, depending on the version).
fn iproute2_inodes(ns: &str) -> Vec<u64> {
    let o =
        std::process::Command::new("ip").args(["netns", "exec", ns, "ss", "--xdp", "-a", "-n", "-e"]).output().unwrap();
    assert!(o.status.success(), "ss --xdp: {}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let mut v: Vec<u64> = text
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("ino:").unwrap_or(w).parse::<u64>().ok().filter(|&n| n > 1000))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// rxdrop running in b (queue 0) and l2fwd in a (queue 1): `fastpath ss` in each namespace
/// lists that namespace's socket with its process and the XDP_STATISTICS counters, and not the
/// other's. With AF_XDP sock_diag in the kernel it also gives interface, queue, the ring sizes
/// asked for and the UMEM, and lists the same sockets as iproute2's `ss --xdp`; without it
/// (CONFIG_XDP_SOCKETS_DIAG unset, as on this project's CI machine) it says so, and `ss --xdp`
/// lists none either. Closed sockets are gone from the listing.
#[test]
fn ss_lists_the_sockets_of_the_namespace_with_their_owners() {
    if !privileged("ss_lists_the_sockets_of_the_namespace_with_their_owners") {
        return;
    }
    let _s = serial();
    let bed = Testbed::up(&TestbedConfig { ipv6: false, queues: 2, ..Default::default() }).expect("test bed");
    let common = ["--json", "--duration", "60", "--ring-size", "512"];
    let (nb, ib, na, ia) = (bed.ns_b(), bed.iface_b(), bed.ns_a(), bed.iface_a());
    let rx = Running::start(&[&["bench", "rxdrop", "--queue", "0", "--netns", nb, "-i", ib][..], &common].concat());
    let fw = Running::start(&[&["bench", "l2fwd", "--queue", "1", "--netns", na, "-i", ia][..], &common].concat());
    for (ns, who, pid, queue, other) in
        [(nb, "rxdrop", rx.child.id(), 0, fw.child.id()), (na, "l2fwd", fw.child.id(), 1, rx.child.id())]
    {
        let v = ss(ns);
        let socks = v["sockets"].as_array().expect("sockets");
        let s = socks.iter().find(|s| s["pid"] == pid).unwrap_or_else(|| panic!("{who} (pid {pid}) not listed: {v}"));
        assert!(socks.iter().all(|s| s["pid"] != other), "another namespace's socket listed: {v}");
        assert_eq!(s["comm"], "fastpath", "{s}");
        assert!(s["stats"]["rx_dropped"].is_u64(), "XDP_STATISTICS: {s}");
        let mut ours: Vec<u64> = socks.iter().map(|s| n(&s["inode"])).collect();
        ours.sort();
        let theirs = iproute2_inodes(ns);
        if v["source"] == "sock_diag" {
            assert_eq!((n(&s["rx_ring"]), n(&s["tx_ring"]), n(&s["fill_ring"])), (512, 512, 1024), "{s}");
            assert_eq!(n(&s["queue_id"]), queue, "{s}");
            assert!(n(&s["ifindex"]) > 1, "{s}");
            assert_eq!(n(&s["umem"]["chunk_size"]), 4096, "{s}");
            assert_eq!(ours, theirs, "fastpath ss and ss --xdp list the same sockets");
        } else {
            assert_eq!(v["source"], "proc", "{v}");
            assert!(v["note"].as_str().unwrap().contains("CONFIG_XDP_SOCKETS_DIAG"), "{v}");
            assert!(theirs.is_empty(), "ss --xdp found sockets, so sock_diag exists: {theirs:?}");
        }
    }
    let (_, st) = rx.terminate();
    assert!(st.success());
    let (_, st) = fw.terminate();
    assert!(st.success());
    for ns in [nb, na] {
        let v = ss(ns);
        assert!(v["sockets"].as_array().unwrap().is_empty(), "closed sockets are gone: {v}");
    }
}
