//! Conformance of the TAP backends (`tap`: readv/writev, `tap-uring`: io_uring). Every
//! privileged test runs the SAME generic function once per backend, inside a network namespace
//! of its own (`fptap<pid><tag>`, deleted on drop even when the test fails), on an interface
//! `fptap0` with 10.99.5.1/24; the peer 10.99.5.2 (02:00:00:00:00:02) exists only as a
//! permanent neighbour entry, i.e. it is the port itself.
//!
//! - tx: 100,000 UDP frames written by the port reach a kernel UDP socket exactly once, intact;
//!   any loss would show in `Udp: RcvbufErrors`.
//! - rx: 100,000 datagrams the kernel sends out of the tap reach rx_burst exactly once, intact;
//!   received + the tap's `tx_dropped` == sent.
//! - csum: a frame with only the pseudo-header sum and VIRTIO_NET_HDR_F_NEEDS_CSUM is accepted;
//!   a wrong full checksum is dropped and counted in `Udp: InCsumErrors`; a forwarded
//!   NEEDS_CSUM frame comes back out of the tap with the checksum the kernel computed.
//! - offload: with TUNSETOFFLOAD the kernel hands over partial checksums flagged NEEDS_CSUM.
//!
//! Rates are printed (run with `--nocapture`); they are measured by the tests' own clocks
//! under the pacing windows described at each test, so they are lower bounds, not benchmarks.
//! Privileged tests hold one lock so they do not share the 2 CPUs with each other.

use std::fs::File;
use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fastpath::io::tap::{TapOptions, TapPort, VirtioNetHdr, VIRTIO_NET_HDR_F_NEEDS_CSUM};
use fastpath::io::tap_uring::TapUringPort;
use fastpath::io::{Port, PortError};
use fastpath::packet::{self, build_udp_frame, stamp, Payload, UdpFrameSpec, PAYLOAD_LEN, PAYLOAD_MAGIC};
use fastpath_tools::payload::SeqTracker;

const COUNT: u64 = 100_000;
const IFACE: &str = "fptap0";
const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 99, 5, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 99, 5, 2);
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const FAR: Ipv4Addr = Ipv4Addr::new(10, 99, 5, 3);
const FAR_MAC: [u8; 6] = [2, 0, 0, 0, 0, 3];
const FRAME_LEN: usize = 64;

static SERIAL: Mutex<()> = Mutex::new(());

// ---------------------------------------------------------------- the two backends

/// What the generic tests need beyond [`Port`].
trait Backend: Port + Sized + std::fmt::Debug {
    fn open_tap(name: &str, opts: TapOptions) -> Result<Self, PortError>;
    fn mac(&self) -> [u8; 6];
    fn tx_csum(&mut self, frame: &[u8], csum_start: u16, csum_offset: u16) -> Result<bool, PortError>;
    fn rx_hdr(
        &mut self,
        max: usize,
        timeout_ms: i32,
        f: &mut dyn FnMut(&VirtioNetHdr, &[u8]),
    ) -> Result<usize, PortError>;
}

impl Backend for TapPort {
    fn open_tap(name: &str, opts: TapOptions) -> Result<Self, PortError> {
        TapPort::open(name, opts)
    }
    fn mac(&self) -> [u8; 6] {
        TapPort::mac(self).unwrap()
    }
    fn tx_csum(&mut self, frame: &[u8], s: u16, o: u16) -> Result<bool, PortError> {
        self.tx_with_csum_offload(frame, s, o)
    }
    fn rx_hdr(&mut self, max: usize, t: i32, f: &mut dyn FnMut(&VirtioNetHdr, &[u8])) -> Result<usize, PortError> {
        self.rx_burst_hdr(max, t, f)
    }
}

impl Backend for TapUringPort {
    fn open_tap(name: &str, opts: TapOptions) -> Result<Self, PortError> {
        TapUringPort::open(name, opts)
    }
    fn mac(&self) -> [u8; 6] {
        TapUringPort::mac(self).unwrap()
    }
    fn tx_csum(&mut self, frame: &[u8], s: u16, o: u16) -> Result<bool, PortError> {
        self.tx_with_csum_offload(frame, s, o)
    }
    fn rx_hdr(&mut self, max: usize, t: i32, f: &mut dyn FnMut(&VirtioNetHdr, &[u8])) -> Result<usize, PortError> {
        self.rx_burst_hdr(max, t, f)
    }
}

// ---------------------------------------------------------------- privileges, namespaces

/// True if the test can run; otherwise it fails, or skips loudly when the unprivileged subset
/// is asked for (fastpath_testbed::gate).
fn privileged(test: &str) -> bool {
    let missing = if fastpath::features::euid() != 0 {
        Some("root (CAP_NET_ADMIN, CAP_SYS_ADMIN for setns)")
    } else if !std::path::Path::new("/dev/net/tun").exists() {
        Some("/dev/net/tun (modprobe tun)")
    } else if Command::new("ip").arg("-V").output().is_err() {
        Some("the `ip` command (iproute2)")
    } else {
        None
    };
    fastpath_testbed::gate::can_run(test, missing)
}

/// Runs `ip` with `args`; panics with its stderr on failure.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// A network namespace of ours, deleted on drop (also when the test panics).
struct Netns {
    name: String,
}

impl Netns {
    fn new(tag: &str) -> Self {
        let name = format!("fptap{}{tag}", std::process::id());
        let _ = Command::new("ip").args(["netns", "delete", &name]).output();
        ip(&["netns", "add", &name]);
        Netns { name }
    }

    /// `ip -n NS args...`
    fn ip(&self, args: &[&str]) {
        let mut v = vec!["-n", self.name.as_str()];
        v.extend_from_slice(args);
        ip(&v);
    }

    /// The tap's `tx_dropped` (packets the kernel could not queue to the reader), read in the
    /// namespace's own /sys (`ip netns exec` mounts it; a setns()-ed thread sees the host's).
    fn tap_tx_dropped(&self) -> u64 {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name, "cat", &format!("/sys/class/net/{IFACE}/statistics/tx_dropped")])
            .output()
            .expect("ip netns exec cat");
        assert!(out.status.success(), "reading tx_dropped: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().parse().expect("a number")
    }

    /// True while `fptap0` exists in the namespace.
    fn has_iface(&self) -> bool {
        Command::new("ip")
            .args(["-n", &self.name, "link", "show", IFACE])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    }

    /// Runs `f` on a thread that entered the namespace (threads it spawns inherit it).
    fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| {
                enter_netns(&self.name);
                f()
            })
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e))
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        match Command::new("ip").args(["netns", "delete", &self.name]).output() {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!("ip netns delete {}: {}", self.name, String::from_utf8_lossy(&o.stderr)),
            Err(e) => eprintln!("ip netns delete {}: {e}", self.name),
        }
    }
}

/// Moves the calling thread into namespace `name`, and proves it did (so nothing of the test
/// can land in the host's namespace).
fn enter_netns(name: &str) {
    let f = File::open(format!("/var/run/netns/{name}")).expect("open the namespace file");
    // SAFETY: setns on a valid namespace fd; it changes only the calling thread's network
    // namespace, which this thread owns for the rest of its life.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns({name}): {}", std::io::Error::last_os_error());
    let want = f.metadata().unwrap();
    let got = std::fs::metadata("/proc/thread-self/ns/net").unwrap();
    assert_eq!((want.dev(), want.ino()), (got.dev(), got.ino()), "thread is not in namespace {name}");
}

/// Writes a sysctl of the calling thread's network namespace (/proc/sys/net resolves by the
/// writer's namespace).
fn sysctl(path: &str, value: &str) {
    std::fs::write(format!("/proc/sys/{path}"), value).unwrap_or_else(|e| panic!("sysctl {path}={value}: {e}"));
}

/// A counter of the calling thread's namespace from /proc/thread-self/net/snmp, e.g.
/// `snmp("Udp:", "RcvbufErrors")`.
fn snmp(proto: &str, field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap();
    let mut lines = text.lines().filter(|l| l.starts_with(proto));
    let names: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let values: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let i = names.iter().position(|n| *n == field).unwrap_or_else(|| panic!("no {proto} {field}"));
    values[i].parse().unwrap()
}

fn udp_snmp(field: &str) -> u64 {
    snmp("Udp:", field)
}

/// Opens the port on fptap0 (IPv6 off so no MLD noise), gives it 10.99.5.1/24, brings it up
/// and makes 10.99.5.2 (and 10.99.5.3) permanent neighbours. Runs in the namespace thread.
fn setup<P: Backend>(ns: &Netns, opts: TapOptions) -> P {
    let port = P::open_tap(IFACE, opts).unwrap_or_else(|e| panic!("open {IFACE}: {e}"));
    sysctl(&format!("net/ipv6/conf/{IFACE}/disable_ipv6"), "1");
    ns.ip(&["addr", "add", "10.99.5.1/24", "dev", IFACE]);
    ns.ip(&["link", "set", IFACE, "up"]);
    ns.ip(&["neigh", "add", "10.99.5.2", "lladdr", "02:00:00:00:00:02", "dev", IFACE, "nud", "permanent"]);
    ns.ip(&["neigh", "add", "10.99.5.3", "lladdr", "02:00:00:00:00:03", "dev", IFACE, "nud", "permanent"]);
    port
}

fn udp_socket(addr: &str, rcvbuf: i32) -> UdpSocket {
    let s = UdpSocket::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}"));
    // SAFETY: setsockopt with a live int of the right size; SO_RCVBUFFORCE (root) passes
    // net.core.rmem_max.
    let rc = unsafe {
        libc::setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, (&rcvbuf as *const i32).cast(), 4)
    };
    assert_eq!(rc, 0, "SO_RCVBUFFORCE: {}", std::io::Error::last_os_error());
    s
}

/// The UDP payload our frames carry for `seq` (what `stamp` writes at frame offset 42), padded
/// to the frame's UDP payload length.
fn expected_payload(stream: u16, seq: u64) -> [u8; FRAME_LEN - packet::PAYLOAD_OFF] {
    let mut p = [0u8; FRAME_LEN - packet::PAYLOAD_OFF];
    // After the stamp: the template's fill pattern (packet::fill_byte of the frame offset).
    for (i, b) in p.iter_mut().enumerate().skip(PAYLOAD_LEN) {
        *b = packet::fill_byte(packet::PAYLOAD_OFF + i);
    }
    p[0..2].copy_from_slice(&PAYLOAD_MAGIC.to_le_bytes());
    p[2..4].copy_from_slice(&stream.to_le_bytes());
    p[4..12].copy_from_slice(&seq.to_le_bytes());
    p[12..20].copy_from_slice(&tstamp(seq).to_le_bytes());
    p
}

/// A deterministic "timestamp", so every payload byte can be checked.
fn tstamp(seq: u64) -> u64 {
    seq.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The seq of a UDP payload as the socket returns it (the fastpath payload starts at offset 0).
fn seq_of(udp_payload: &[u8]) -> Option<u64> {
    let mut f = [0u8; packet::PAYLOAD_OFF + PAYLOAD_LEN];
    f[packet::PAYLOAD_OFF..].copy_from_slice(udp_payload.get(..PAYLOAD_LEN)?);
    packet::payload(&f).map(|p| p.seq)
}

fn spec(dst_mac: [u8; 6], dst: Ipv4Addr, dst_port: u16) -> UdpFrameSpec {
    UdpFrameSpec {
        src_mac: PEER_MAC,
        dst_mac,
        src_ip: PEER.into(),
        dst_ip: dst.into(),
        src_port: 5555,
        dst_port,
        frame_len: FRAME_LEN,
    }
}

fn rate(n: u64, d: Duration) -> String {
    let pps = n as f64 / d.as_secs_f64();
    format!("{:.0} pps ({n} in {:.3} s)", pps, d.as_secs_f64())
}

// ---------------------------------------------------------------- tx: port -> kernel socket

/// The sender keeps at most this many datagrams not yet read by the socket: 2048 x ~1 KiB of
/// skb truesize stays far below the 8 MiB receive buffer, so the socket never overflows.
const TX_WINDOW: u64 = 2048;
const TX_BATCH: usize = 64;

fn tx_conformance<P: Backend>(tag: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ns = Netns::new(tag);
    ns.run(|| {
        let mut port: P = setup(&ns, TapOptions::default());
        assert_eq!(port.path(), if tag.contains("uring") { "tap-uring" } else { "tap" });
        let sock = udp_socket("10.99.5.1:9999", 8 << 20);
        sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let rcvbuf_errors0 = udp_snmp("RcvbufErrors");
        let in_errors0 = udp_snmp("InErrors");
        let mac = port.mac();
        let received = AtomicU64::new(0);
        let sender_done = AtomicBool::new(false);

        let (tx_time, e2e_time, seen, dup, bad) = std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut seen = vec![false; COUNT as usize + 1];
                let (mut dup, mut bad) = (0u64, 0u64);
                let mut buf = [0u8; 2048];
                let mut idle_since: Option<Instant> = None;
                let mut last = Instant::now();
                loop {
                    match sock.recv_from(&mut buf) {
                        Ok((n, from)) => {
                            idle_since = None;
                            last = Instant::now();
                            assert_eq!(from, "10.99.5.2:5555".parse().unwrap());
                            let seq = seq_of(&buf[..n]).filter(|s| (1..=COUNT).contains(s));
                            match seq {
                                Some(q) if buf[..n] == expected_payload(1, q) => {
                                    if std::mem::replace(&mut seen[q as usize], true) {
                                        dup += 1;
                                    }
                                }
                                _ => bad += 1,
                            }
                            let r = received.fetch_add(1, Ordering::Release) + 1;
                            if r == COUNT {
                                break;
                            }
                        }
                        Err(_) => {
                            if sender_done.load(Ordering::Acquire) {
                                let since = *idle_since.get_or_insert_with(Instant::now);
                                if since.elapsed() > Duration::from_secs(2) {
                                    break;
                                }
                            }
                        }
                    }
                }
                (seen.iter().filter(|b| **b).count() as u64, dup, bad, last)
            });

            let mut frames = vec![[0u8; FRAME_LEN]; TX_BATCH];
            for f in frames.iter_mut() {
                build_udp_frame(&spec(mac, LOCAL, 9999), f);
            }
            let start = Instant::now();
            let mut next = 1u64;
            while next <= COUNT {
                let k = ((COUNT - next + 1) as usize).min(TX_BATCH);
                for (i, f) in frames[..k].iter_mut().enumerate() {
                    let seq = next + i as u64;
                    stamp(f, &Payload { stream: 1, seq, tstamp_ns: tstamp(seq) });
                }
                let mut done = 0;
                while done < k {
                    while (next - 1 + done as u64).saturating_sub(received.load(Ordering::Acquire)) > TX_WINDOW {
                        std::thread::yield_now();
                    }
                    let refs: Vec<&[u8]> = frames[done..k].iter().map(|f| &f[..]).collect();
                    done += port.tx_burst(&refs).unwrap_or_else(|e| panic!("tx_burst: {e}"));
                }
                next += k as u64;
            }
            let tx_time = start.elapsed();
            sender_done.store(true, Ordering::Release);
            let (seen, dup, bad, last) = reader.join().unwrap();
            (tx_time, last - start, seen, dup, bad)
        });

        let rcvbuf_errors = udp_snmp("RcvbufErrors") - rcvbuf_errors0;
        let in_errors = udp_snmp("InErrors") - in_errors0;
        let st = port.stats().unwrap();
        eprintln!(
            "[{tag}] tx {COUNT} x {FRAME_LEN} B frames: port tx_burst {} | until the socket read the last: {} | RcvbufErrors {rcvbuf_errors}",
            rate(COUNT, tx_time),
            rate(seen, e2e_time)
        );
        assert_eq!(st.tx_packets, COUNT, "port tx_packets");
        assert_eq!(st.tx_bytes, COUNT * FRAME_LEN as u64, "port tx_bytes");
        assert_eq!((dup, bad), (0, 0), "duplicates / damaged payloads");
        assert_eq!(rcvbuf_errors, 0, "Udp RcvbufErrors: the socket overflowed at this pacing");
        assert_eq!(in_errors, 0, "Udp InErrors");
        assert_eq!(seen, COUNT, "every frame sent arrives exactly once");

        // Phase 2, the port alone: frames to 10.99.5.77 (on the link, not local) with
        // forwarding off are dropped right after the route lookup and counted in
        // Ip InAddrErrors, so nothing downstream paces the port. Unpaced.
        sysctl("net/ipv4/ip_forward", "0");
        let addr_errors0 = snmp("Ip:", "InAddrErrors");
        let mut frames = vec![[0u8; FRAME_LEN]; TX_BATCH];
        for f in frames.iter_mut() {
            build_udp_frame(&spec(mac, Ipv4Addr::new(10, 99, 5, 77), 9999), f);
        }
        let start = Instant::now();
        let mut sent = 0u64;
        while sent < COUNT {
            let k = ((COUNT - sent) as usize).min(TX_BATCH);
            for (i, f) in frames[..k].iter_mut().enumerate() {
                let seq = sent + 1 + i as u64;
                stamp(f, &Payload { stream: 9, seq, tstamp_ns: tstamp(seq) });
            }
            let refs: Vec<&[u8]> = frames[..k].iter().map(|f| &f[..]).collect();
            let mut done = 0;
            while done < k {
                done += port.tx_burst(&refs[done..]).unwrap_or_else(|e| panic!("tx_burst: {e}"));
            }
            sent += k as u64;
        }
        let blast = start.elapsed();
        let addr_errors = snmp("Ip:", "InAddrErrors") - addr_errors0;
        eprintln!("[{tag}] tx {COUNT} x {FRAME_LEN} B frames, dropped by the kernel at the route lookup: port tx_burst {} | Ip InAddrErrors {addr_errors}", rate(COUNT, blast));
        assert_eq!(addr_errors, COUNT, "every frame reached IP input and was counted in Ip InAddrErrors");
        assert_eq!(port.stats().unwrap().tx_packets, 2 * COUNT);
        drop(port);
    });
    // The tap is not persistent: it goes with the port.
    let t = Instant::now();
    while ns.has_iface() && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!ns.has_iface(), "{IFACE} still exists after the port was dropped");
}

#[test]
fn tap_tx_reaches_kernel_socket_exactly_once() {
    if privileged("tap_tx_reaches_kernel_socket_exactly_once") {
        tx_conformance::<TapPort>("tx");
    }
}

#[test]
fn tap_uring_tx_reaches_kernel_socket_exactly_once() {
    if privileged("tap_uring_tx_reaches_kernel_socket_exactly_once") {
        tx_conformance::<TapUringPort>("txuring");
    }
}

// ---------------------------------------------------------------- rx: kernel socket -> port

/// The kernel sender keeps at most this many datagrams not yet handed to rx_burst: far below
/// the tap's queue (txqueuelen, 1000 packets), so it does not overflow (tx_dropped stays 0)
/// however the threads are scheduled.
const RX_WINDOW: u64 = 256;

struct RxRun {
    sent: u64,
    tracker: SeqTracker,
    elapsed: Duration,
    dropped: u64,
}

/// The kernel sends COUNT datagrams of stream `stream` from 10.99.5.1:4444 to 10.99.5.2:7777
/// (out of the tap) on one thread, paced by `window` (None: as fast as it can), while this
/// thread receives them with rx_burst. `dropped` is the tap's tx_dropped growth.
fn rx_run<P: Backend>(ns: &Netns, port: &mut P, stream: u16, window: Option<u64>) -> RxRun {
    let sock = UdpSocket::bind("10.99.5.1:4444").unwrap();
    let dropped0 = ns.tap_tx_dropped();
    let delivered = AtomicU64::new(0);
    let sender_done = AtomicBool::new(false);
    let sent = AtomicU64::new(0);
    let mut tracker = SeqTracker::default();
    let mut matched = 0u64;
    let start = Instant::now();
    let mut last = start;
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut p = [0u8; PAYLOAD_LEN];
            for seq in 1..=COUNT {
                if let Some(w) = window {
                    while (seq - 1).saturating_sub(delivered.load(Ordering::Acquire)) > w {
                        std::thread::yield_now();
                    }
                }
                p[0..2].copy_from_slice(&PAYLOAD_MAGIC.to_le_bytes());
                p[2..4].copy_from_slice(&stream.to_le_bytes());
                p[4..12].copy_from_slice(&seq.to_le_bytes());
                p[12..20].copy_from_slice(&tstamp(seq).to_le_bytes());
                loop {
                    match sock.send_to(&p, "10.99.5.2:7777") {
                        Ok(_) => break,
                        Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => std::thread::yield_now(),
                        Err(e) => panic!("send_to: {e}"),
                    }
                }
                sent.fetch_add(1, Ordering::Release);
            }
            sender_done.store(true, Ordering::Release);
        });
        let mut idle_since: Option<Instant> = None;
        loop {
            let n = port
                .rx_burst(64, 100, |frame: &[u8]| {
                    if frame.len() >= 38 && frame[36..38] == 7777u16.to_be_bytes() {
                        tracker.record(frame);
                        matched += 1;
                    } else {
                        tracker.foreign += 1;
                    }
                })
                .unwrap_or_else(|e| panic!("rx_burst: {e}"));
            if n > 0 {
                idle_since = None;
                last = Instant::now();
                delivered.store(matched, Ordering::Release);
                if matched >= COUNT && tracker.unique() == COUNT {
                    break;
                }
            } else if sender_done.load(Ordering::Acquire) {
                let since = *idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_millis(500) {
                    break;
                }
            }
        }
    });
    let dropped = ns.tap_tx_dropped() - dropped0;
    RxRun { sent: sent.load(Ordering::Acquire), tracker, elapsed: last - start, dropped }
}

fn rx_conformance<P: Backend>(tag: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ns = Netns::new(tag);
    ns.run(|| {
        let mut port: P = setup(&ns, TapOptions::default());
        // Idle: rx_burst waits its timeout and returns nothing (no busy completion loop).
        let t = Instant::now();
        assert_eq!(port.rx_burst(64, 300, |f: &[u8]| panic!("unexpected frame {f:02x?}")).unwrap(), 0);
        assert!(t.elapsed() >= Duration::from_millis(280), "an idle rx_burst(timeout 300 ms) returned after {:?}", t.elapsed());
        // Phase 1, paced: every datagram arrives.
        let r = rx_run(&ns, &mut port, 2, Some(RX_WINDOW));
        let got = r.tracker.unique();
        eprintln!(
            "[{tag}] rx {} datagrams sent by the kernel, paced (window {RX_WINDOW}): rx_burst {} | tap tx_dropped {} | foreign frames {}",
            r.sent,
            rate(got, r.elapsed),
            r.dropped,
            r.tracker.foreign
        );
        assert_eq!((r.tracker.duplicates, r.tracker.corrupt), (0, 0), "duplicates / damaged frames");
        assert_eq!(r.tracker.per_stream().iter().map(|s| s.0).collect::<Vec<_>>(), vec![2], "one stream");
        assert_eq!(r.sent, COUNT);
        assert_eq!(got + r.dropped, r.sent, "received + tx_dropped == sent");
        assert_eq!(r.dropped, 0, "the tap's queue overflowed although the sender was paced");
        let st = port.stats().unwrap();
        assert_eq!(st.rx_packets, got + r.tracker.foreign, "port rx_packets counts every frame handed over");
        assert_eq!(st.rx_bytes, st.rx_packets * 62, "62-byte frames (14 + 20 + 8 + 20)");

        // Phase 2, unpaced: whatever the reader misses must be in the tap's tx_dropped.
        let r = rx_run(&ns, &mut port, 4, None);
        let got = r.tracker.unique();
        eprintln!(
            "[{tag}] rx {} datagrams sent by the kernel, unpaced: rx_burst {} | tap tx_dropped {} | foreign frames {}",
            r.sent,
            rate(got, r.elapsed),
            r.dropped,
            r.tracker.foreign
        );
        assert_eq!((r.tracker.duplicates, r.tracker.corrupt), (0, 0), "duplicates / damaged frames");
        assert_eq!(r.sent, COUNT);
        assert_eq!(got + r.dropped, r.sent, "received + tx_dropped == sent");
    });
}

#[test]
fn tap_rx_sees_kernel_datagrams_exactly_once() {
    if privileged("tap_rx_sees_kernel_datagrams_exactly_once") {
        rx_conformance::<TapPort>("rx");
    }
}

#[test]
fn tap_uring_rx_sees_kernel_datagrams_exactly_once() {
    if privileged("tap_uring_rx_sees_kernel_datagrams_exactly_once") {
        rx_conformance::<TapUringPort>("rxuring");
    }
}

// ---------------------------------------------------------------- checksum offload

/// Replaces the UDP checksum of a frame by the folded pseudo-header sum (not inverted): what a
/// stack leaves for a NIC with checksum offload (CHECKSUM_PARTIAL).
fn make_partial(frame: &mut [u8]) -> u16 {
    let udp_len = u16::from_be_bytes([frame[38], frame[39]]) as u64;
    let mut acc = 17u64 + udp_len;
    for c in frame[26..34].chunks_exact(2) {
        acc += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    let partial = acc as u16;
    frame[40..42].copy_from_slice(&partial.to_be_bytes());
    partial
}

fn recv_seq(sock: &UdpSocket) -> Option<u64> {
    let mut buf = [0u8; 2048];
    let (n, _) = sock.recv_from(&mut buf).ok()?;
    seq_of(&buf[..n])
}

fn csum_conformance<P: Backend>(tag: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ns = Netns::new(tag);
    ns.run(|| {
        let mut port: P = setup(&ns, TapOptions::default().with_vnet_hdr(true));
        let sock = udp_socket("10.99.5.1:9999", 1 << 20);
        sock.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        let mac = port.mac();
        let csum_errors0 = udp_snmp("InCsumErrors");
        let frame = |seq: u64, dst_mac, dst| {
            let mut f = [0u8; FRAME_LEN];
            build_udp_frame(&spec(dst_mac, dst, 9999), &mut f);
            stamp(&mut f, &Payload { stream: 3, seq, tstamp_ns: tstamp(seq) });
            f
        };

        // 1. Partial checksum + NEEDS_CSUM: accepted.
        let mut a = frame(1, mac, LOCAL);
        make_partial(&mut a);
        assert!(packet::verify(&a).is_err(), "a partial checksum is not a valid full one");
        assert!(port.tx_csum(&a, 34, 6).unwrap());
        // 2. A wrong full checksum without NEEDS_CSUM: dropped, counted in InCsumErrors.
        let mut b = frame(2, mac, LOCAL);
        b[41] ^= 0x55;
        assert!(port.tx_burst(&[&b[..]]).unwrap() == 1);
        // 3. A correct frame as a marker.
        let c = frame(3, mac, LOCAL);
        assert!(port.tx_burst(&[&c[..]]).unwrap() == 1);
        assert_eq!(recv_seq(&sock), Some(1), "the NEEDS_CSUM frame is accepted");
        assert_eq!(recv_seq(&sock), Some(3), "the frame with a wrong checksum is dropped, the next arrives");
        assert_eq!(udp_snmp("InCsumErrors") - csum_errors0, 1, "the wrong checksum is counted in Udp InCsumErrors");

        // 4. Proof the kernel computes the checksum: forward a NEEDS_CSUM frame back out of the
        // tap (which has no checksum offload), and read it: the checksum must now be correct.
        sysctl("net/ipv4/ip_forward", "1");
        sysctl("net/ipv4/conf/all/send_redirects", "0");
        sysctl(&format!("net/ipv4/conf/{IFACE}/send_redirects"), "0");
        let mut d = frame(4, mac, FAR);
        let partial = make_partial(&mut d);
        while port.rx_burst(64, 0, |_: &[u8]| {}).unwrap() > 0 {}
        assert!(port.tx_csum(&d, 34, 6).unwrap());
        let mut back = None;
        let t = Instant::now();
        while back.is_none() && t.elapsed() < Duration::from_secs(2) {
            port.rx_burst(64, 100, |f: &[u8]| {
                if f.len() >= 34 && f[30..34] == FAR.octets() {
                    back = Some(f.to_vec());
                }
            })
            .unwrap();
        }
        let back = back.expect("the forwarded frame comes back out of the tap");
        assert_eq!(&back[0..6], &FAR_MAC, "forwarded to 10.99.5.3's MAC");
        assert_eq!(back[22], 63, "TTL decremented by the forwarding");
        assert_ne!(u16::from_be_bytes([back[40], back[41]]), partial, "the checksum field was filled in");
        let p = packet::verify(&back).unwrap_or_else(|e| panic!("forwarded frame: {e}: {back:02x?}"));
        assert_eq!(p.seq, 4);
        eprintln!(
            "[{tag}] checksum offload: partial {partial:#06x} -> kernel-computed {:#06x}",
            u16::from_be_bytes([back[40], back[41]])
        );
    });
}

#[test]
fn tap_vnet_hdr_checksum_offload() {
    if privileged("tap_vnet_hdr_checksum_offload") {
        csum_conformance::<TapPort>("csum");
    }
}

#[test]
fn tap_uring_vnet_hdr_checksum_offload() {
    if privileged("tap_uring_vnet_hdr_checksum_offload") {
        csum_conformance::<TapUringPort>("csumuring");
    }
}

/// With `offload` (TUNSETOFFLOAD TUN_F_CSUM), the kernel leaves the UDP checksum of what it
/// sends out of the tap to the reader: the header says NEEDS_CSUM at 34 + 6.
fn offload_rx_conformance<P: Backend>(tag: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ns = Netns::new(tag);
    ns.run(|| {
        let mut port: P = setup(&ns, TapOptions::default().with_vnet_hdr(true).with_offload(true));
        let sock = UdpSocket::bind("10.99.5.1:4444").unwrap();
        sock.send_to(&expected_payload(5, 1), "10.99.5.2:7777").unwrap();
        let mut got = None;
        let t = Instant::now();
        while got.is_none() && t.elapsed() < Duration::from_secs(2) {
            port.rx_hdr(64, 100, &mut |h, f| {
                if f.len() >= 38 && f[36..38] == 7777u16.to_be_bytes() {
                    got = Some((*h, f.to_vec()));
                }
            })
            .unwrap();
        }
        let (h, mut f) = got.expect("the datagram comes out of the tap");
        assert_eq!(h.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_F_NEEDS_CSUM, "header {h:?}");
        assert_eq!((h.csum_start, h.csum_offset), (34, 6), "header {h:?}");
        let partial = u16::from_be_bytes([f[40], f[41]]);
        assert_eq!(partial, make_partial(&mut f), "the field holds the pseudo-header sum");
    });
}

#[test]
fn tap_offload_hands_over_partial_checksums() {
    if privileged("tap_offload_hands_over_partial_checksums") {
        offload_rx_conformance::<TapPort>("offl");
    }
}

#[test]
fn tap_uring_offload_hands_over_partial_checksums() {
    if privileged("tap_uring_offload_hands_over_partial_checksums") {
        offload_rx_conformance::<TapUringPort>("offluring");
    }
}

// ---------------------------------------------------------------- bad input (no privileges)

#[test]
fn too_long_name_is_refused_naming_it() {
    let name = "fptap-name-too-long";
    for r in [
        TapPort::open(name, TapOptions::default()).map(|_| ()),
        TapUringPort::open(name, TapOptions::default()).map(|_| ()),
    ] {
        let e = r.expect_err("a 19-byte name").to_string();
        assert!(e.contains(name) && e.contains("15 bytes"), "{e}");
    }
}

#[test]
fn offload_without_vnet_hdr_is_refused() {
    let e = TapPort::open("fptapx", TapOptions::default().with_offload(true)).expect_err("refused").to_string();
    assert!(e.contains("offload") && e.contains("vnet_hdr"), "{e}");
}

/// Naming and queues, per backend: an empty name lets the kernel choose (`tap<N>`);
/// `multi_queue` lets a second port attach to the same interface; without it a second open
/// of a busy name fails naming the call and the name.
fn names_and_queues<P: Backend>(tag: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ns = Netns::new(tag);
    ns.run(|| {
        let a = P::open_tap("", TapOptions::default()).unwrap();
        let b = P::open_tap("", TapOptions::default()).unwrap();
        assert_ne!(a.mac(), b.mac(), "two interfaces");
        drop((a, b));
        let mq = TapOptions::default().with_multi_queue(true);
        let q0 = P::open_tap(IFACE, mq).unwrap();
        let q1 = P::open_tap(IFACE, mq).unwrap();
        assert_eq!(q0.mac(), q1.mac(), "two queues of one interface");
        drop((q0, q1));
        let _single = P::open_tap(IFACE, TapOptions::default()).unwrap();
        let e = P::open_tap(IFACE, TapOptions::default()).expect_err("busy").to_string();
        assert!(e.contains("TUNSETIFF") && e.contains(IFACE), "{e}");
        eprintln!("[{tag}] second open of a single-queue tap: {e}");
    });
}

#[test]
fn tap_names_and_queues() {
    if privileged("tap_names_and_queues") {
        names_and_queues::<TapPort>("names");
    }
}

#[test]
fn tap_uring_names_and_queues() {
    if privileged("tap_uring_names_and_queues") {
        names_and_queues::<TapUringPort>("namesuring");
    }
}
