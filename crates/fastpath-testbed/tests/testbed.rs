//! Privileged tests of the test bed: they create real namespaces and veth pairs (root needed).
//! Without root they fail, or skip loudly with FASTPATH_TEST_UNPRIVILEGED=1 (never under CI=true).

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use fastpath_testbed::{
    enter_netns, list, ns_command, run_in_netns, spawn_in_netns, Testbed, TestbedConfig, TestbedError,
};

/// True if root; without it the test fails, or skips loudly when the unprivileged subset is
/// asked for (`fastpath_testbed::gate`). The harness names the test's thread after the test.
fn require_root() -> bool {
    fastpath_testbed::gate::privileged(std::thread::current().name().unwrap_or("testbed"))
}

fn netns_names() -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

fn ns_exists(ns: &str) -> bool {
    netns_names().iter().any(|n| n == ns)
}

/// Runs a command in a namespace, asserts success, returns stdout.
fn ns_output(ns: &str, program: &str, args: &[&str]) -> String {
    let out = ns_command(ns, program).args(args).output().unwrap();
    assert!(out.status.success(), "{program} {args:?} in {ns} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn has_program(p: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
}

/// Sends a datagram from ns a to ns b and gets it echoed back; returns the echoed payload
/// and the source address the server saw.
fn udp_echo(bed: &Testbed, src: IpAddr, dst: IpAddr) -> (Vec<u8>, SocketAddr) {
    let (tx, rx) = mpsc::channel();
    let server = spawn_in_netns(bed.ns_b(), move || {
        let sock = UdpSocket::bind(SocketAddr::new(dst, 0)).unwrap();
        tx.send(sock.local_addr().unwrap()).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut buf = [0u8; 256];
        let (n, from) = sock.recv_from(&mut buf).unwrap();
        sock.send_to(&buf[..n], from).unwrap();
        from
    });
    let server_addr = rx.recv_timeout(Duration::from_secs(5)).expect("server thread did not start in ns b");
    let payload = b"fastpath-testbed echo".to_vec();
    let sent = payload.clone();
    let reply = run_in_netns(bed.ns_a(), move || {
        let sock = UdpSocket::bind(SocketAddr::new(src, 0)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        sock.send_to(&sent, server_addr).unwrap();
        let mut buf = [0u8; 256];
        let (n, from) = sock.recv_from(&mut buf).unwrap();
        assert_eq!(from, server_addr);
        buf[..n].to_vec()
    })
    .unwrap();
    let seen_from = server.join().unwrap().unwrap();
    assert_eq!(reply, payload);
    (reply, seen_from)
}

fn count_queues(ns: &str, iface: &str) -> (usize, usize) {
    let out = ns_output(ns, "ls", &[&format!("/sys/class/net/{iface}/queues")]);
    let rx = out.split_whitespace().filter(|q| q.starts_with("rx-")).count();
    let tx = out.split_whitespace().filter(|q| q.starts_with("tx-")).count();
    (rx, tx)
}

#[test]
fn up_two_queues_connects_and_drop_removes_everything() {
    if !require_root() {
        return;
    }
    let bed = Testbed::up(&TestbedConfig { queues: 2, ..TestbedConfig::default() }).unwrap();
    let (ns_a, ns_b) = (bed.ns_a().to_owned(), bed.ns_b().to_owned());
    assert_eq!(ns_a, format!("{}-a", bed.name()));
    assert_eq!(ns_b, format!("{}-b", bed.name()));
    assert_eq!(bed.iface_a(), format!("{}a", bed.name()));
    assert_eq!(bed.iface_b(), format!("{}b", bed.name()));
    assert!(ns_exists(&ns_a) && ns_exists(&ns_b));
    assert_eq!(bed.queues(), 2);

    // IPv4 and IPv6 reach the other side, with the expected source addresses.
    let (_, from4) = udp_echo(&bed, bed.ip4_a().into(), bed.ip4_b().into());
    assert_eq!(from4.ip(), IpAddr::from(bed.ip4_a()));
    let (_, from6) = udp_echo(&bed, bed.ip6_a().into(), bed.ip6_b().into());
    assert_eq!(from6.ip(), IpAddr::from(bed.ip6_a()));
    if has_program("ping") {
        ns_output(&ns_a, "ping", &["-c1", "-W1", "10.99.0.2"]);
        ns_output(&ns_a, "ping", &["-6", "-c1", "-W1", "fd99::2"]);
    } else {
        // deps.sh installs iputils-ping: under CI a missing ping is a broken install step.
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "`ping` is not installed (scripts/deps.sh installs iputils-ping)"
        );
        eprintln!("note: `ping` is not installed; connectivity checked with UDP only");
    }

    // 2 rx and 2 tx queues on both ends.
    assert_eq!(count_queues(&ns_a, bed.iface_a()), (2, 2));
    assert_eq!(count_queues(&ns_b, bed.iface_b()), (2, 2));

    // GRO on both ends, permanent neighbours both ways, MACs as reported.
    for (ns, iface) in [(&ns_a, bed.iface_a()), (&ns_b, bed.iface_b())] {
        let k = ns_output(ns, "ethtool", &["-k", iface]);
        assert!(k.contains("generic-receive-offload: on"), "{k}");
        let neigh = ns_output(ns, "ip", &["neigh", "show", "dev", iface]);
        assert_eq!(neigh.matches("PERMANENT").count(), 2, "{neigh}");
    }
    let info = bed.info();
    let mac_b = info.mac_b.clone();
    assert!(ns_output(&ns_a, "ip", &["neigh", "show", "dev", bed.iface_a()]).contains(&mac_b));
    assert!(ns_output(&ns_b, "ip", &["link", "show", "dev", bed.iface_b()]).contains(&mac_b));
    assert_eq!(info.mac_a.len(), 17);
    assert_ne!(bed.mac_a(), bed.mac_b());

    // info() serialises with the addresses as strings.
    let json = serde_json::to_value(&info).unwrap();
    assert_eq!(json["ip4_b"], "10.99.0.2");
    assert_eq!(json["ip6_a"], "fd99::1");
    assert_eq!(json["queues"], 2);
    assert_eq!(json["ns_a"], ns_a.as_str());

    // Threads that entered a namespace see its interfaces, not the other side's.
    let (ia, ib) = (bed.iface_a().to_owned(), bed.iface_b().to_owned());
    let dev = run_in_netns(&ns_a, || std::fs::read_to_string("/proc/thread-self/net/dev").unwrap()).unwrap();
    assert!(dev.contains(&format!("{ia}:")) && !dev.contains(&format!("{ib}:")), "{dev}");

    // Nothing of ours in the caller's namespace.
    let here = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap();
    assert!(!here.contains(&format!("{ia}:")) && !here.contains(&format!("{ib}:")));

    // veth statistics are readable.
    let stats = Testbed::ethtool_stats(&ns_b, bed.iface_b()).unwrap();
    assert!(stats.iter().any(|(k, _)| k == "peer_ifindex"), "{stats:?}");
    assert!(stats.iter().any(|(k, _)| k == "rx_queue_1_xdp_drops"), "{stats:?}");

    drop(bed);
    assert!(!ns_exists(&ns_a), "{ns_a} left behind");
    assert!(!ns_exists(&ns_b), "{ns_b} left behind");
}

#[test]
fn parallel_default_beds_do_not_collide() {
    if !require_root() {
        return;
    }
    let workers: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(|| {
                let bed = Testbed::up(&TestbedConfig::default()).unwrap();
                udp_echo(&bed, bed.ip4_a().into(), bed.ip4_b().into());
                let name = bed.name().to_owned();
                bed.down().unwrap();
                name
            })
        })
        .collect();
    let names: Vec<String> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    assert_ne!(names[0], names[1]);
    for n in &names {
        assert!(!ns_exists(&format!("{n}-a")) && !ns_exists(&format!("{n}-b")));
    }
}

#[test]
fn invalid_names_are_rejected_naming_the_value() {
    // No privileges needed: validation happens before any command runs.
    for bad in ["bad-name!", "", "thirteenchars", "with space"] {
        let cfg = TestbedConfig { name: Some(bad.to_owned()), ..TestbedConfig::default() };
        let err = Testbed::up(&cfg).unwrap_err();
        assert!(matches!(err, TestbedError::InvalidName { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains(&format!("`{bad}`")), "{msg}");
        assert!(msg.contains("1 to 12 ASCII letters or digits"), "{msg}");
        assert!(!msg.contains('\n'));
        assert!(matches!(Testbed::open(bad), Err(TestbedError::InvalidName { .. })));
    }
}

#[test]
fn entering_a_missing_namespace_names_it() {
    let err = enter_netns("fpnosuchns0").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("`fpnosuchns0`"), "{msg}");
    let err = run_in_netns("fpnosuchns0", || 1).unwrap_err();
    assert!(err.to_string().contains("fpnosuchns0"));
}

fn napi_threads(iface: &str) -> Vec<(i32, String)> {
    let prefix = format!("napi/{iface}-");
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim_end().starts_with(&prefix) {
            let cpus = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap().trim().to_owned();
            v.push((pid, cpus));
        }
    }
    v
}

#[test]
fn rx_napi_can_be_pinned_and_released() {
    if !require_root() {
        return;
    }
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu = if ncpu >= 2 { 1 } else { 0 };
    let bed = Testbed::up(&TestbedConfig { queues: 2, ..TestbedConfig::default() }).unwrap();
    let threaded = format!("/sys/class/net/{}/threaded", bed.iface_b());
    bed.set_rx_napi_cpu(Some(cpu)).unwrap();
    assert_eq!(ns_output(bed.ns_b(), "cat", &[&threaded]).trim(), "1");
    let threads = napi_threads(bed.iface_b());
    assert_eq!(threads.len(), 2, "one NAPI thread per rx queue: {threads:?}");
    for (pid, cpus) in &threads {
        assert_eq!(cpus, &cpu.to_string(), "napi thread {pid} not pinned");
    }
    // Traffic still flows with the receive path on the pinned threads.
    udp_echo(&bed, bed.ip4_a().into(), bed.ip4_b().into());

    bed.set_rx_napi_cpu(None).unwrap();
    assert_eq!(ns_output(bed.ns_b(), "cat", &[&threaded]).trim(), "0");
    std::thread::sleep(Duration::from_millis(200));
    assert!(napi_threads(bed.iface_b()).is_empty());
    udp_echo(&bed, bed.ip4_a().into(), bed.ip4_b().into());
}

/// Deletes a hand-made namespace even if the test panics.
struct HandMade(String);
impl Drop for HandMade {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn failure_half_way_leaves_nothing_behind() {
    if !require_root() {
        return;
    }
    let name = format!("fc{:x}", std::process::id());
    let ns_a = format!("{name}-a");
    let ns_b = format!("{name}-b");
    assert!(Command::new("ip").args(["netns", "add", &ns_b]).status().unwrap().success());
    let hand_made = HandMade(ns_b.clone());

    let err = Testbed::up(&TestbedConfig { name: Some(name.clone()), ..TestbedConfig::default() }).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TestbedError::Command { .. }), "{msg}");
    assert!(msg.contains(&format!("ip netns add {ns_b}")) && msg.contains("exists"), "{msg}");
    assert!(!msg.contains('\n'));
    assert!(!ns_exists(&ns_a), "{ns_a} left behind after a failed up()");
    assert!(ns_exists(&ns_b), "up() must not delete a namespace it did not create");
    drop(hand_made);
    assert!(!ns_exists(&ns_b));
}

#[test]
fn open_adopts_without_owning_and_down_is_idempotent() {
    if !require_root() {
        return;
    }
    let bed = Testbed::up(&TestbedConfig { queues: 3, sender_qdisc: true, ..TestbedConfig::default() }).unwrap();
    let name = bed.name().to_owned();
    let qdisc = ns_output(bed.ns_a(), "tc", &["qdisc", "show", "dev", bed.iface_a()]);
    assert!(qdisc.contains("pfifo") && qdisc.contains("limit 1000"), "{qdisc}");
    assert!(list().unwrap().contains(&name));

    let adopted = Testbed::open(&name).unwrap();
    assert!(!adopted.is_owned());
    assert_eq!(adopted.info(), bed.info());
    drop(adopted);
    assert!(ns_exists(bed.ns_a()) && ns_exists(bed.ns_b()), "dropping an adopted bed tore it down");

    // Explicit down() tears down even an adopted bed; a second down() is fine.
    Testbed::open(&name).unwrap().down().unwrap();
    assert!(!list().unwrap().contains(&name));
    assert!(bed.down().is_ok(), "down() must be idempotent");
    match Testbed::open(&name) {
        Err(TestbedError::NotFound { name: n, .. }) => assert_eq!(n, name),
        other => panic!("expected NotFound, got {other:?}"),
    }
}

#[test]
fn panics_inside_a_namespace_propagate() {
    if !require_root() {
        return;
    }
    let bed = Testbed::up(&TestbedConfig::default()).unwrap();
    let ns = bed.ns_a().to_owned();
    let caught = std::panic::catch_unwind(move || {
        let _ = run_in_netns(&ns, || panic!("boom in netns"));
    });
    let payload = caught.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom in netns"));
}
