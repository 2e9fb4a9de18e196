//! The [`Testbed`] guard: two namespaces joined by a veth pair.

use std::marker::PhantomData;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use serde::Serialize;

use crate::name::validate_name;
use crate::netns::netns_exists;
use crate::{cmd, TestbedError};

/// IPv4 address of the sending side (`<name>a` in `<name>-a`).
pub const IP4_A: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
/// IPv4 address of the receiving side (`<name>b` in `<name>-b`).
pub const IP4_B: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);
/// IPv4 prefix length of both addresses.
pub const PREFIX4: u8 = 24;
/// IPv6 address of the sending side (`fd99::1`).
pub const IP6_A: Ipv6Addr = Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, 0, 1);
/// IPv6 address of the receiving side (`fd99::2`).
pub const IP6_B: Ipv6Addr = Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, 0, 2);
/// IPv6 prefix length of both addresses.
pub const PREFIX6: u8 = 64;
/// Largest accepted queue count (the kernel's limit for `numtxqueues`/`numrxqueues`).
pub const MAX_QUEUES: u32 = 4096;
/// `limit` of the pfifo qdisc put on the sending veth when [`TestbedConfig::sender_qdisc`] is set.
pub const SENDER_QDISC_LIMIT: u32 = 1000;

/// How to build a [`Testbed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestbedConfig {
    /// Test bed name (1 to 12 ASCII letters or digits). `None`: a unique `fp…` name made
    /// from the process id and a counter, so parallel tests in one process and in several
    /// processes never collide.
    pub name: Option<String>,
    /// Number of rx and tx queues on BOTH veth ends (at least 1). Both ends get the same
    /// count because native XDP on a veth needs its rx queues >= the peer's tx queues.
    pub queues: u32,
    /// Give the sending veth (`<name>a`) a `pfifo limit 1000` root qdisc instead of the
    /// default noqueue, so a full 256-slot veth ring makes the qdisc queue/drop instead of
    /// reporting local drops to TCP (which then stalls >= 200 ms per retry).
    pub sender_qdisc: bool,
    /// Give both ends IPv6 (fd99::1/64, fd99::2/64). `false` disables IPv6 on the veth before
    /// the links come up, so the kernels send nothing of their own (no MLD reports) and every
    /// frame on the wire is the test's: what exact packet accounting needs.
    pub ipv6: bool,
}

impl Default for TestbedConfig {
    fn default() -> Self {
        TestbedConfig { name: None, queues: 1, sender_qdisc: false, ipv6: true }
    }
}

/// Everything a user of a test bed needs to know, ready for JSON output.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct TestbedInfo {
    /// Test bed name.
    pub name: String,
    /// Sending-side namespace, `<name>-a`.
    pub ns_a: String,
    /// Receiving-side namespace, `<name>-b`.
    pub ns_b: String,
    /// Sending-side veth, `<name>a` (in `ns_a`).
    pub iface_a: String,
    /// Receiving-side veth, `<name>b` (in `ns_b`).
    pub iface_b: String,
    /// MAC of `iface_a`, `aa:bb:cc:dd:ee:ff`.
    pub mac_a: String,
    /// MAC of `iface_b`, `aa:bb:cc:dd:ee:ff`.
    pub mac_b: String,
    /// IPv4 address of `iface_a` (prefix /24).
    pub ip4_a: Ipv4Addr,
    /// IPv4 address of `iface_b` (prefix /24).
    pub ip4_b: Ipv4Addr,
    /// IPv6 address of `iface_a` (prefix /64).
    pub ip6_a: Ipv6Addr,
    /// IPv6 address of `iface_b` (prefix /64).
    pub ip6_b: Ipv6Addr,
    /// rx and tx queues on each end.
    pub queues: u32,
}

/// A test bed: namespaces `<name>-a` (sender) and `<name>-b` (receiver) joined by the veth
/// pair `<name>a` <-> `<name>b`. Torn down on drop when owned (see [`Testbed::owned`]).
///
/// Not `Send`: network-namespace state belongs to a thread, so the guard stays on the
/// thread that made it. Use [`crate::run_in_netns`] / [`crate::spawn_in_netns`] to run code
/// inside either namespace.
///
/// (`tests/compile_fail.rs` holds the compiler to that, its message pinned.)
#[derive(Debug)]
pub struct Testbed {
    name: String,
    ns_a: String,
    ns_b: String,
    iface_a: String,
    iface_b: String,
    mac_a: [u8; 6],
    mac_b: [u8; 6],
    queues: u32,
    owned: bool,
    torn_down: bool,
    _not_send: PhantomData<*const ()>,
}

/// Serialises `ip netns add` within this process: iproute2 makes `/var/run/netns` a shared
/// mount point on first use, which races when several threads do it at once.
static NETNS_ADD_LOCK: Mutex<()> = Mutex::new(());
static NAME_COUNTER: AtomicU32 = AtomicU32::new(0);

fn base36(mut n: u64, min_width: usize) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    while n > 0 || out.len() < min_width {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
    }
    out.reverse();
    String::from_utf8(out).expect("ascii")
}

/// How every default test bed name of process `pid` begins (`fp` + its pid in 5 base-36
/// digits): to find the beds another process made.
pub fn default_name_prefix(pid: u32) -> String {
    format!("fp{}", base36(u64::from(pid), 5))
}

/// `fp` + process id (5 base-36 digits, fixed width, covers pid_max 4194304) + counter
/// (base 36): at most 12 characters until the counter passes 36^5.
pub(crate) fn default_name() -> String {
    loop {
        let n = NAME_COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}{}", default_name_prefix(std::process::id()), base36(u64::from(n), 1));
        // A bed left behind by a crashed process that had our pid: skip its name.
        if !netns_exists(&format!("{name}-a")) && !netns_exists(&format!("{name}-b")) {
            return name;
        }
    }
}

fn fmt_mac(mac: [u8; 6]) -> String {
    mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for byte in &mut mac {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *byte = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// Facts about one veth end read from `ip -d -o link show`.
struct LinkFacts {
    mac: [u8; 6],
    tx_queues: u32,
    rx_queues: u32,
}

fn link_facts(ns: &str, iface: &str) -> Result<LinkFacts, TestbedError> {
    let args = ["-n", ns, "-d", "-o", "link", "show", "dev", iface];
    let out = cmd::run("ip", &args)?;
    let cmd_line = format!("ip {}", args.join(" "));
    let tokens: Vec<&str> = out.split_whitespace().collect();
    let after = |key: &str| tokens.iter().position(|t| *t == key).and_then(|i| tokens.get(i + 1).copied());
    let parse_err = |detail: String| TestbedError::Parse { cmd: cmd_line.clone(), detail };
    let mac = after("link/ether").and_then(parse_mac).ok_or_else(|| parse_err("no `link/ether <mac>`".to_owned()))?;
    let count =
        |key: &str| after(key).and_then(|v| v.parse::<u32>().ok()).ok_or_else(|| parse_err(format!("no `{key} <n>`")));
    Ok(LinkFacts { mac, tx_queues: count("numtxqueues")?, rx_queues: count("numrxqueues")? })
}

/// Deletes a namespace if it exists. `Ok` if it is gone afterwards.
pub(crate) fn del_netns(ns: &str) -> Result<(), TestbedError> {
    if !netns_exists(ns) {
        return Ok(());
    }
    match cmd::run("ip", &["netns", "del", ns]) {
        Err(_) if !netns_exists(ns) => Ok(()),
        other => other.map(drop),
    }
}

/// Namespaces created so far by [`Testbed::up`]; deleted on drop unless disarmed.
pub(crate) struct Rollback(pub(crate) Vec<String>);

impl Drop for Rollback {
    fn drop(&mut self) {
        for ns in self.0.iter().rev() {
            if let Err(e) = del_netns(ns) {
                eprintln!("fastpath-testbed: cleanup after failed setup: {e}");
            }
        }
    }
}

pub(crate) fn netns_add(ns: &str) -> Result<(), TestbedError> {
    let _guard = NETNS_ADD_LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    cmd::run("ip", &["netns", "add", ns]).map(drop)
}

/// Kernel threads whose name starts with `napi/<iface>-`, as `(pid, comm)`.
fn napi_threads(iface: &str) -> Vec<(i32, String)> {
    let prefix = format!("napi/{iface}-");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(comm) = std::fs::read_to_string(entry.path().join("comm")) else {
            continue;
        };
        let comm = comm.trim_end_matches('\n');
        // Kernels before 6.x truncate /proc/<pid>/comm of kthreads to 15 bytes; this one
        // shows the full name. Accept a truncated name that is a prefix of ours.
        let truncated = comm.len() == 15 && prefix.starts_with(comm);
        if comm.starts_with(&prefix) || truncated {
            found.push((pid, comm.to_owned()));
        }
    }
    found.sort();
    found
}

impl Testbed {
    /// Creates the test bed: namespaces `<name>-a` (sender) and `<name>-b` (receiver), the
    /// veth pair `<name>a` (in a) <-> `<name>b` (in b) with `queues` rx and tx queues on both
    /// ends, addresses 10.99.0.1/24 + fd99::1/64 on a and 10.99.0.2/24 + fd99::2/64 on b
    /// (IPv6 without DAD), `lo` and both links up, GRO on both ends, permanent neighbour
    /// entries both ways (no ARP/ND needed), `accept_ra=0`, and optionally a pfifo qdisc on
    /// the sending end.
    ///
    /// Needs root. On failure part-way, everything created so far is removed before the
    /// error is returned; namespaces that already existed are never touched.
    ///
    /// # Errors
    ///
    /// [`TestbedError::InvalidQueues`] or [`TestbedError::InvalidName`] for a bad `cfg`, before
    /// anything is created; [`TestbedError::NeedsRoot`] without root (CAP_SYS_ADMIN and
    /// CAP_NET_ADMIN); [`TestbedError::Command`] naming the `ip` / `ethtool` / `tc` / `sh` command
    /// that failed (e.g. a namespace of that name already exists); [`TestbedError::Spawn`] if one
    /// cannot be started (not installed).
    pub fn up(cfg: &TestbedConfig) -> Result<Testbed, TestbedError> {
        if cfg.queues == 0 || cfg.queues > MAX_QUEUES {
            return Err(TestbedError::InvalidQueues { queues: cfg.queues, max: MAX_QUEUES });
        }
        let name = match &cfg.name {
            Some(n) => {
                validate_name(n)?;
                n.clone()
            }
            None => default_name(),
        };
        let ns_a = format!("{name}-a");
        let ns_b = format!("{name}-b");
        let iface_a = format!("{name}a");
        let iface_b = format!("{name}b");
        let q = cfg.queues;

        let mut rollback = Rollback(Vec::new());
        netns_add(&ns_a)?;
        rollback.0.push(ns_a.clone());
        netns_add(&ns_b)?;
        rollback.0.push(ns_b.clone());

        for ns in [&ns_a, &ns_b] {
            cmd::run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
        }
        // Created from inside ns a, peer placed directly into ns b: nothing ever appears in
        // the caller's namespace.
        cmd::ip(&format!(
            "-n {ns_a} link add {iface_a} numtxqueues {q} numrxqueues {q} \
             type veth peer name {iface_b} netns {ns_b} numtxqueues {q} numrxqueues {q}"
        ))?;

        let ends = [(&ns_a, &iface_a, IP4_A, IP6_A), (&ns_b, &iface_b, IP4_B, IP6_B)];
        for (ns, iface, ip4, ip6) in ends {
            if !cfg.ipv6 {
                cmd::write_in(ns, &format!("/proc/sys/net/ipv6/conf/{iface}/disable_ipv6"), "1")?;
            } else {
                // No router solicitations from this end (fewer stray packets in tests).
                cmd::write_in(ns, &format!("/proc/sys/net/ipv6/conf/{iface}/accept_ra"), "0")?;
            }
            let a4 = format!("{ip4}/{PREFIX4}");
            cmd::run("ip", &["-n", ns, "addr", "add", &a4, "dev", iface])?;
            if cfg.ipv6 {
                let a6 = format!("{ip6}/{PREFIX6}");
                cmd::run("ip", &["-n", ns, "addr", "add", &a6, "dev", iface, "nodad"])?;
            }
        }
        for (ns, iface, _, _) in ends {
            cmd::run("ip", &["-n", ns, "link", "set", "dev", iface, "up"])?;
        }
        for (ns, iface, _, _) in ends {
            cmd::run_in(ns, "ethtool", &["-K", iface, "gro", "on"])?;
        }

        let a = link_facts(&ns_a, &iface_a)?;
        let b = link_facts(&ns_b, &iface_b)?;
        let (mac_a, mac_b) = (fmt_mac(a.mac), fmt_mac(b.mac));
        let neighbours: [(_, _, _, [IpAddr; 2]); 2] = [
            (&ns_a, &iface_a, &mac_b, [IP4_B.into(), IP6_B.into()]),
            (&ns_b, &iface_b, &mac_a, [IP4_A.into(), IP6_A.into()]),
        ];
        for (ns, iface, peer_mac, peers) in neighbours {
            for peer in peers.into_iter().filter(|p| cfg.ipv6 || p.is_ipv4()) {
                cmd::ip(&format!("-n {ns} neigh replace {peer} lladdr {peer_mac} dev {iface} nud permanent"))?;
            }
        }
        if cfg.sender_qdisc {
            let limit = SENDER_QDISC_LIMIT;
            cmd::run(
                "tc",
                &format!("-n {ns_a} qdisc replace dev {iface_a} root pfifo limit {limit}")
                    .split_whitespace()
                    .collect::<Vec<_>>(),
            )?;
        }

        rollback.0.clear();
        Ok(Testbed {
            name,
            ns_a,
            ns_b,
            iface_a,
            iface_b,
            mac_a: a.mac,
            mac_b: b.mac,
            queues: a.tx_queues.min(a.rx_queues),
            owned: true,
            torn_down: false,
            _not_send: PhantomData,
        })
    }

    /// Adopts an existing test bed by name (e.g. for `fastpath testbed info` / `down`),
    /// reading MACs and queue count from the interfaces.
    ///
    /// An adopted bed is NOT torn down on drop unless [`Testbed::owned`]`(true)` is called;
    /// [`Testbed::down`] always tears it down.
    ///
    /// # Errors
    ///
    /// [`TestbedError::InvalidName`] for a bad `name`; [`TestbedError::NotFound`] if either
    /// namespace is missing; those of `ip -d link show` in each namespace
    /// ([`TestbedError::Command`], [`TestbedError::NeedsRoot`], [`TestbedError::Spawn`]), or
    /// [`TestbedError::Parse`] if its output has no MAC or queue counts.
    pub fn open(name: &str) -> Result<Testbed, TestbedError> {
        validate_name(name)?;
        let ns_a = format!("{name}-a");
        let ns_b = format!("{name}-b");
        for ns in [&ns_a, &ns_b] {
            if !netns_exists(ns) {
                return Err(TestbedError::NotFound { name: name.to_owned(), missing: ns.clone() });
            }
        }
        let iface_a = format!("{name}a");
        let iface_b = format!("{name}b");
        let a = link_facts(&ns_a, &iface_a)?;
        let b = link_facts(&ns_b, &iface_b)?;
        Ok(Testbed {
            name: name.to_owned(),
            ns_a,
            ns_b,
            iface_a,
            iface_b,
            mac_a: a.mac,
            mac_b: b.mac,
            queues: a.tx_queues.min(a.rx_queues),
            owned: false,
            torn_down: false,
            _not_send: PhantomData,
        })
    }

    /// Sets whether dropping this guard tears the test bed down (`true` for [`Testbed::up`],
    /// `false` for [`Testbed::open`]).
    #[must_use]
    pub fn owned(mut self, owned: bool) -> Self {
        self.owned = owned;
        self
    }

    /// Whether dropping this guard tears the test bed down.
    pub fn is_owned(&self) -> bool {
        self.owned
    }

    /// Test bed name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sending-side namespace, `<name>-a`.
    pub fn ns_a(&self) -> &str {
        &self.ns_a
    }

    /// Receiving-side namespace, `<name>-b`.
    pub fn ns_b(&self) -> &str {
        &self.ns_b
    }

    /// Sending-side veth `<name>a`, in [`Testbed::ns_a`].
    pub fn iface_a(&self) -> &str {
        &self.iface_a
    }

    /// Receiving-side veth `<name>b`, in [`Testbed::ns_b`].
    pub fn iface_b(&self) -> &str {
        &self.iface_b
    }

    /// MAC address of [`Testbed::iface_a`].
    pub fn mac_a(&self) -> [u8; 6] {
        self.mac_a
    }

    /// MAC address of [`Testbed::iface_b`].
    pub fn mac_b(&self) -> [u8; 6] {
        self.mac_b
    }

    /// IPv4 address of [`Testbed::iface_a`]: 10.99.0.1 (/24).
    pub fn ip4_a(&self) -> Ipv4Addr {
        IP4_A
    }

    /// IPv4 address of [`Testbed::iface_b`]: 10.99.0.2 (/24).
    pub fn ip4_b(&self) -> Ipv4Addr {
        IP4_B
    }

    /// IPv6 address of [`Testbed::iface_a`]: fd99::1 (/64).
    pub fn ip6_a(&self) -> Ipv6Addr {
        IP6_A
    }

    /// IPv6 address of [`Testbed::iface_b`]: fd99::2 (/64).
    pub fn ip6_b(&self) -> Ipv6Addr {
        IP6_B
    }

    /// Number of rx (and tx) queues on each veth end.
    pub fn queues(&self) -> u32 {
        self.queues
    }

    /// All of the above as one serialisable value.
    pub fn info(&self) -> TestbedInfo {
        TestbedInfo {
            name: self.name.clone(),
            ns_a: self.ns_a.clone(),
            ns_b: self.ns_b.clone(),
            iface_a: self.iface_a.clone(),
            iface_b: self.iface_b.clone(),
            mac_a: fmt_mac(self.mac_a),
            mac_b: fmt_mac(self.mac_b),
            ip4_a: IP4_A,
            ip4_b: IP4_B,
            ip6_a: IP6_A,
            ip6_b: IP6_B,
            queues: self.queues,
        }
    }

    /// Moves the receiving veth's (`<name>b`) NAPI polling to kernel threads pinned to `cpu`,
    /// or with `None` turns threaded NAPI off again.
    ///
    /// By default a veth's receive NAPI runs in softirq on the SENDING CPU. With `Some(cpu)`
    /// this writes 1 to `/sys/class/net/<name>b/threaded` (inside ns b), waits up to 1 s for
    /// the `napi/<name>b-<id>` kernel threads (one per rx queue) and sets their affinity to
    /// `cpu`. Beware: a user-space consumer on the same CPU competes with them.
    ///
    /// # Errors
    ///
    /// [`TestbedError::Affinity`] for a `cpu` beyond the CPU set size, or if `sched_setaffinity` of
    /// a NAPI thread fails (EINVAL: CPU not online; EPERM without CAP_SYS_NICE);
    /// [`TestbedError::Command`] / [`TestbedError::NeedsRoot`] if writing
    /// `/sys/class/net/<name>b/threaded` fails (threaded NAPI: Linux >= 5.12);
    /// [`TestbedError::NoNapiThreads`] if no NAPI thread appears within 1 s.
    pub fn set_rx_napi_cpu(&self, cpu: Option<usize>) -> Result<(), TestbedError> {
        let path = format!("/sys/class/net/{}/threaded", self.iface_b);
        let Some(cpu) = cpu else {
            return cmd::write_in(&self.ns_b, &path, "0");
        };
        let mut set = CpuSet::new();
        set.set(cpu).map_err(|cause| TestbedError::Affinity {
            pid: 0,
            comm: String::new(),
            cpu,
            cause,
            hint: " (CPU number beyond the CPU set size)",
        })?;
        cmd::write_in(&self.ns_b, &path, "1")?;

        let deadline = Instant::now() + Duration::from_secs(1);
        let threads = loop {
            let found = napi_threads(&self.iface_b);
            let enough = found.len() >= self.queues as usize;
            if enough || Instant::now() >= deadline {
                break found;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        if threads.is_empty() {
            return Err(TestbedError::NoNapiThreads { ns: self.ns_b.clone(), iface: self.iface_b.clone() });
        }
        for (pid, comm) in threads {
            match sched_setaffinity(Pid::from_raw(pid), &set) {
                Ok(()) | Err(nix::Error::ESRCH) => {}
                Err(cause) => {
                    return Err(TestbedError::Affinity {
                        pid,
                        comm,
                        cpu,
                        hint: if cause == nix::Error::EINVAL { " (CPU not online)" } else { "" },
                        cause,
                    })
                }
            }
        }
        Ok(())
    }

    /// Gives the receiving veth's NAPI kernel threads (see [`Testbed::set_rx_napi_cpu`], which
    /// must have turned threaded NAPI on) the real-time policy SCHED_FIFO at `priority`
    /// (1..=99), as `chrt -f -p PRIORITY PID` would, and returns their thread ids.
    ///
    /// Why: a NIC's receive softirq runs with priority over any task on the CPU its interrupt
    /// lands on; a threaded NAPI is an ordinary task and would share that CPU fairly with a
    /// service. SCHED_FIFO restores the priority (sched(7)). Needs CAP_SYS_NICE.
    ///
    /// # Errors
    ///
    /// [`TestbedError::NoNapiThreads`] if threaded NAPI is not on; [`TestbedError::Scheduler`] if
    /// `sched_setscheduler` fails (EINVAL for a priority outside 1..=99, EPERM without
    /// CAP_SYS_NICE). A thread that exited meanwhile (ESRCH) is skipped.
    pub fn set_rx_napi_fifo(&self, priority: i32) -> Result<Vec<i32>, TestbedError> {
        let threads = napi_threads(&self.iface_b);
        if threads.is_empty() {
            return Err(TestbedError::NoNapiThreads { ns: self.ns_b.clone(), iface: self.iface_b.clone() });
        }
        for (pid, comm) in &threads {
            let param = libc::sched_param { sched_priority: priority };
            // SAFETY: a plain system call on a thread id with a valid sched_param.
            if unsafe { libc::sched_setscheduler(*pid, libc::SCHED_FIFO, &param) } != 0 {
                let cause = nix::Error::last();
                if cause != nix::Error::ESRCH {
                    return Err(TestbedError::Scheduler { pid: *pid, comm: comm.clone(), priority, cause });
                }
            }
        }
        Ok(threads.into_iter().map(|(pid, _)| pid).collect())
    }

    /// Sets the MTU of both veth ends (`ip link set dev ... mtu`), e.g. 9000 for jumbo frames:
    /// above ~3500 on x86-64 a veth refuses native XDP programs without frags support.
    ///
    /// # Errors
    ///
    /// [`TestbedError::Command`] if `ip link set ... mtu` refuses `mtu` (a veth takes 68 to 65535),
    /// [`TestbedError::NeedsRoot`] without CAP_NET_ADMIN, [`TestbedError::Spawn`] without `ip`.
    pub fn set_mtu(&self, mtu: u32) -> Result<(), TestbedError> {
        for (ns, iface) in [(&self.ns_a, &self.iface_a), (&self.ns_b, &self.iface_b)] {
            cmd::run("ip", &["-n", ns, "link", "set", "dev", iface, "mtu", &mtu.to_string()])?;
        }
        Ok(())
    }

    /// `ethtool -S <iface>` run inside namespace `ns`, as `(name, value)` pairs in the
    /// driver's order. For a veth: `peer_ifindex`, `rx_queue_<i>_xdp_packets`,
    /// `rx_queue_<i>_xdp_drops`, `tx_queue_<i>_xdp_xmit`, `tx_queue_<i>_xdp_xmit_errors`, ...
    ///
    /// # Errors
    ///
    /// Those of running `ip netns exec <ns> ethtool -S <iface>`: [`TestbedError::Spawn`] if `ip`
    /// cannot be started; [`TestbedError::Command`] / [`TestbedError::NeedsRoot`] if it fails
    /// (no such namespace or interface, `ethtool` not installed). Lines that do not parse are
    /// skipped.
    pub fn ethtool_stats(ns: &str, iface: &str) -> Result<Vec<(String, u64)>, TestbedError> {
        let out = cmd::run_in(ns, "ethtool", &["-S", iface])?;
        Ok(out
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                Some((k.trim().to_owned(), v.trim().parse::<u64>().ok()?))
            })
            .collect())
    }

    /// Waits until the receiving veth (`<name>b`) has taken in nothing new for 150 ms, at most
    /// `max`: frames a sender already counted as delivered may still sit in the veth's ring (its
    /// NAPI runs later on a loaded machine). Call it after the sender stops and before reading
    /// the receiver's counters, instead of a fixed sleep. Returns whether it settled in time.
    pub fn wait_rx_settled(&self, max: std::time::Duration) -> bool {
        let path = format!("/sys/class/net/{}/statistics/rx_packets", self.iface_b());
        let read = || cmd::run_in(self.ns_b(), "cat", &[&path]).ok().and_then(|s| s.trim().parse::<u64>().ok());
        let t0 = std::time::Instant::now();
        let (mut last, mut still) = (read(), 0);
        while t0.elapsed() < max {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let now = read();
            still = if now == last { still + 1 } else { 0 };
            if still >= 3 {
                return true;
            }
            last = now;
        }
        false
    }

    /// Tears the test bed down: `ip netns del` of both namespaces, which also destroys the
    /// veth pair. Idempotent (missing namespaces are fine); always tears down, owned or not.
    /// Both deletions are attempted; the first error is returned.
    ///
    /// # Errors
    ///
    /// The first failure of `ip netns del` ([`TestbedError::Command`], [`TestbedError::NeedsRoot`],
    /// [`TestbedError::Spawn`]).
    pub fn down(mut self) -> Result<(), TestbedError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), TestbedError> {
        if self.torn_down {
            return Ok(());
        }
        self.torn_down = true;
        let ra = del_netns(&self.ns_a);
        let rb = del_netns(&self.ns_b);
        ra.and(rb)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        if let Err(e) = self.teardown() {
            eprintln!("fastpath-testbed: tearing down test bed `{}` failed: {e}", self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated() {
        assert!(validate_name("fp1").is_ok());
        assert!(validate_name("abcdefghij12").is_ok());
        for bad in ["", "abcdefghij123", "a-b", "a b", "é"] {
            let e = validate_name(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("`{bad}`")), "{e}");
            assert!(e.contains("accepted"), "{e}");
        }
    }

    #[test]
    fn default_names_are_unique_and_valid() {
        let a = default_name();
        let b = default_name();
        assert_ne!(a, b);
        validate_name(&a).unwrap();
        assert!(a.starts_with("fp"));
        // pid_max is 4194304: 5 base-36 digits.
        assert_eq!(base36(4_194_304, 5).len(), 5);
        assert_eq!(base36(0, 1), "0");
        assert_eq!(base36(35, 2), "0z");
    }

    #[test]
    fn macs_round_trip() {
        let m = parse_mac("0a:1b:2c:3d:4e:5f").unwrap();
        assert_eq!(m, [0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f]);
        assert_eq!(fmt_mac(m), "0a:1b:2c:3d:4e:5f");
        assert!(parse_mac("0a:1b:2c:3d:4e").is_none());
        assert!(parse_mac("0a:1b:2c:3d:4e:5f:00").is_none());
        assert!(parse_mac("0a:1b:2c:3d:4e:zz").is_none());
    }

    #[test]
    fn bad_queue_count_is_rejected_before_anything_runs() {
        let e = Testbed::up(&TestbedConfig { queues: 0, ..TestbedConfig::default() }).unwrap_err();
        assert_eq!(e.to_string(), "invalid queue count 0: accepted 1 to 4096");
    }
}
