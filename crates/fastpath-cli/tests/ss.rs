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

/// Without AF_XDP sock_diag, `fastpath ss` finds sockets in /proc and duplicates them with
/// pidfd_getfd to read their statistics; it must duplicate nothing but AF_XDP sockets
/// (duplicating another process's socket re-stamps its net_cls classid and net_prio index with
/// our cgroup, net/core/sock.c `__receive_sock`). A python process holding UDP and TCP sockets
/// next to rxdrop's AF_XDP socket: under strace, every pidfd_getfd is of rxdrop's AF_XDP socket,
/// none of python's fds. (Before: every socket fd of every process of the namespace was
/// duplicated, python's UDP and TCP sockets and rxdrop's netlink socket among them.)
#[test]
fn ss_duplicates_only_af_xdp_sockets() {
    if !privileged("ss_duplicates_only_af_xdp_sockets") {
        return;
    }
    let _s = serial();
    let bed = Testbed::up(&TestbedConfig { ipv6: false, ..Default::default() }).expect("test bed");
    let (nb, ib) = (bed.ns_b(), bed.iface_b());
    let rx = Running::start(&["bench", "rxdrop", "--netns", nb, "-i", ib, "--json", "--duration", "60"]);
    let script = "import socket,sys,time\n\
        u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); u.bind(('0.0.0.0',0))\n\
        t=socket.socket(); t.bind(('0.0.0.0',0)); t.listen()\n\
        print('ready',flush=True); time.sleep(60)\n";
    let mut py = std::process::Command::new("ip")
        .args(["netns", "exec", nb, "python3", "-c", script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 (make deps installs it)");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(py.stdout.take().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let py_pid = py.id(); // `ip netns exec` execs python: the same process
    let log = std::env::temp_dir().join(format!("fastpath-ss-strace-{}", std::process::id()));
    let fp = std::env::var("FASTPATH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_fastpath").to_string());
    let o = std::process::Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=pidfd_open,pidfd_getfd", "-o"])
        .arg(&log)
        .args([fp.as_str(), "ss", "--netns", nb, "--json"])
        .output()
        .expect("strace (make deps installs it)");
    let _ = py.kill();
    let _ = py.wait();
    assert!(o.status.success(), "ss: {}", stderr(&o));
    let v = last_json(&o);
    assert_json_keys("ss", &v);
    let trace = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    // pidfd_open(PID, 0) = PIDFD, then pidfd_getfd(PIDFD, FD, 0): (PID, FD) of each duplicate.
    let mut pidfds = std::collections::HashMap::new();
    let mut dups: Vec<(u32, i32)> = Vec::new();
    for l in trace.lines() {
        let call = l.split_once(' ').map(|x| x.1).unwrap_or(l).trim_start();
        let args = |c: &str| -> Option<(Vec<i64>, i64)> {
            // strace pads the result column: "pidfd_getfd(4, 5, 0)        = 5".
            let (a, r) = c.rsplit_once(" = ")?;
            let a = a.trim_end().strip_suffix(')')?.split_once('(')?.1;
            let ret = r.split_whitespace().next()?.parse().ok()?;
            Some((a.split(", ").filter_map(|x| x.parse().ok()).collect(), ret))
        };
        if call.starts_with("pidfd_open(") {
            if let Some((a, ret)) = args(call) {
                pidfds.insert(ret, a[0] as u32);
            }
        } else if call.starts_with("pidfd_getfd(") {
            if let Some((a, _)) = args(call) {
                dups.push((pidfds.get(&a[0]).copied().unwrap_or(0), a[1] as i32));
            }
        }
    }
    let listed: Vec<u64> = v["sockets"].as_array().unwrap().iter().map(|s| n(&s["inode"])).collect();
    let rx_pid = rx.child.id();
    // Either path is held to something: through /proc, exactly rxdrop's AF_XDP socket is
    // duplicated (checked below); through sock_diag (a kernel with CONFIG_XDP_SOCKETS_DIAG),
    // nothing is duplicated at all.
    match v["source"].as_str() {
        Some("proc") => {
            assert!(!dups.is_empty(), "the /proc path duplicated nothing: {trace}");
            assert!(listed.len() == 1, "{v}");
        }
        Some("sock_diag") => assert!(dups.is_empty(), "sock_diag needs no pidfd_getfd, yet: {dups:?}\n{trace}"),
        other => panic!("ss reported no source ({other:?}): {v}"),
    }
    for (pid, fd) in &dups {
        assert_ne!(*pid, py_pid, "python's fd {fd} was duplicated:\n{trace}");
        assert_eq!(*pid, rx_pid, "fd {fd} of pid {pid} was duplicated:\n{trace}");
        let link = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).unwrap();
        let ino = link.to_string_lossy().trim_start_matches("socket:[").trim_end_matches(']').parse::<u64>().unwrap();
        assert!(listed.contains(&ino), "duplicated fd {fd} ({link:?}) is not the AF_XDP socket listed: {v}\n{trace}");
    }
    let (_, st) = rx.terminate();
    assert!(st.success());
}
