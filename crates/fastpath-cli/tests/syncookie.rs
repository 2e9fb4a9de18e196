//! `action = "syncookie"` on a real kernel (root, Linux >= 6.9): crafted SYNs answered with the
//! right SYN-ACK and crafted ACKs dropped, with exact counters (BPF_PROG_TEST_RUN in the server's
//! namespace, where the listener is); IPv4 and IPv6 clients connect through the rule with their
//! options kept; a client connects while spoofed SYNs flood the port; the tc program comes and
//! goes with the rule.

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use fastpath::bpf::syncookie::{self, CookieKey, CookieTuple};
use fastpath::bpf::{Classifier, SetIndex, XdpMode};
use fastpath::rules::compile::compile;
use fastpath::rules::parse_toml;
use fastpath_testbed::{Testbed, TestbedConfig};

const PORT: u16 = 8080;
const RULES: &str =
    "default = \"pass\"\n[[rule]]\nname = \"web\"\nproto = \"tcp\"\ndst_port = 8080\naction = \"syncookie\"\n";
const NO_SC_RULES: &str = "default = \"pass\"\n[[rule]]\nproto = \"udp\"\ndst_port = 9\naction = \"drop\"\n";

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;

fn sum16(b: &[u8], mut acc: u64) -> u64 {
    for c in b.chunks(2) {
        acc += u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    acc
}

fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// A TCP segment to build.
#[derive(Clone)]
struct Seg {
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    opts: Vec<u8>,
    payload: Vec<u8>,
    vlan: Option<u16>,
    /// The data offset written, if not the true one (crafted).
    doff: Option<u8>,
    /// IPv4 MF flag (a first fragment).
    more_frags: bool,
    /// IPv4: the fragment offset in 8-byte units (a later fragment when > 0).
    frag_units: u16,
    /// IPv4: an Authentication Header (RFC 4302, 12-byte ICV) before TCP.
    ah: bool,
    /// IPv6: one extension header before TCP: 0 hop-by-hop, 60 destination options (PadN),
    /// 44 a fragment header of a first fragment (offset 0, M set).
    v6_ext: Option<u8>,
}

impl Seg {
    fn new(src: IpAddr, dst: IpAddr, sport: u16, flags: u8) -> Seg {
        Seg {
            src,
            dst,
            sport,
            dport: PORT,
            seq: 1000,
            ack: 0,
            flags,
            opts: vec![],
            payload: vec![],
            vlan: None,
            doff: None,
            more_frags: false,
            frag_units: 0,
            ah: false,
            v6_ext: None,
        }
    }

    /// Ethernet (from `smac` to `dmac`), VLAN, IP, TCP with correct checksums.
    fn frame(&self, smac: [u8; 6], dmac: [u8; 6]) -> Vec<u8> {
        let mut opts = self.opts.clone();
        while opts.len() % 4 != 0 {
            opts.push(0);
        }
        let mut tcp = Vec::new();
        tcp.extend(self.sport.to_be_bytes());
        tcp.extend(self.dport.to_be_bytes());
        tcp.extend(self.seq.to_be_bytes());
        tcp.extend(self.ack.to_be_bytes());
        tcp.push(self.doff.unwrap_or(5 + opts.len() as u8 / 4) << 4);
        tcp.push(self.flags);
        tcp.extend(64240u16.to_be_bytes());
        tcp.extend([0, 0, 0, 0]);
        tcp.extend(&opts);
        tcp.extend(&self.payload);
        let tlen = tcp.len() as u64;
        let mut f = Vec::new();
        f.extend(dmac);
        f.extend(smac);
        if let Some(v) = self.vlan {
            f.extend([0x81, 0x00]);
            f.extend(v.to_be_bytes());
        }
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let pseudo = sum16(&s.octets(), sum16(&d.octets(), 6 + tlen));
                let c = !fold(sum16(&tcp, pseudo));
                tcp[16..18].copy_from_slice(&c.to_be_bytes());
                f.extend([0x08, 0x00]);
                let ah_len = if self.ah { 24 } else { 0 };
                let mut ip = vec![0x45, 0];
                ip.extend(((20 + ah_len + tcp.len()) as u16).to_be_bytes());
                let frag = self.frag_units
                    | if self.more_frags { 0x2000 } else { 0 }
                    | if self.more_frags || self.frag_units > 0 { 0 } else { 0x4000 };
                ip.extend([0, 1]);
                ip.extend(frag.to_be_bytes());
                ip.extend([64, if self.ah { 51 } else { 6 }, 0, 0]);
                ip.extend(s.octets());
                ip.extend(d.octets());
                let c = !fold(sum16(&ip, 0));
                ip[10..12].copy_from_slice(&c.to_be_bytes());
                f.extend(ip);
                if self.ah {
                    // next header TCP, length (24 / 4 - 2), reserved, SPI, sequence, ICV
                    f.extend([6, 4, 0, 0, 0, 0, 0x10, 0x01, 0, 0, 0, 1]);
                    f.extend([0xa5; 12]);
                }
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let pseudo = sum16(&s.octets(), sum16(&d.octets(), 6 + tlen));
                let c = !fold(sum16(&tcp, pseudo));
                tcp[16..18].copy_from_slice(&c.to_be_bytes());
                f.extend([0x86, 0xdd]);
                let ext = if self.v6_ext.is_some() { 8 } else { 0 };
                f.extend([0x60, 0, 0, 0]);
                f.extend(((tcp.len() + ext) as u16).to_be_bytes());
                f.push(self.v6_ext.unwrap_or(6));
                f.push(64);
                f.extend(s.octets());
                f.extend(d.octets());
                match self.v6_ext {
                    // next header TCP, offset 0 with M set, identification
                    Some(44) => f.extend([6, 0, 0, 1, 0, 0, 0x12, 0x34]),
                    // next header TCP, length 0 (8 bytes), PadN of 4
                    Some(_) => f.extend([6, 0, 1, 4, 0, 0, 0, 0]),
                    None => {}
                }
            }
            _ => panic!("mixed families"),
        }
        f.extend(tcp);
        while f.len() < 60 {
            f.push(0);
        }
        f
    }

    fn tuple(&self) -> CookieTuple {
        CookieTuple { src: self.src, dst: self.dst, sport: self.sport, dport: self.dport, isn: self.seq }
    }
}

/// MSS 1460, SACK permitted, timestamps (TSval `tsval`), window scale 7: what Linux offers.
fn linux_syn_opts(mss: u16, tsval: u32) -> Vec<u8> {
    let mut o = vec![2, 4];
    o.extend(mss.to_be_bytes());
    o.extend([4, 2, 8, 10]);
    o.extend(tsval.to_be_bytes());
    o.extend([0, 0, 0, 0, 1, 3, 3, 7]);
    o
}

/// What a SYN-ACK says.
#[derive(Debug)]
struct SynAck {
    vlan: Option<u16>,
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    mss: Option<u16>,
    ws: Option<u8>,
    sack: bool,
    ts: Option<(u32, u32)>,
    len: usize,
}

/// Parses a SYN-ACK the program wrote, checking every checksum.
fn parse_synack(f: &[u8]) -> SynAck {
    let (vlan, l3) =
        if f[12..14] == [0x81, 0x00] { (Some(u16::from_be_bytes([f[14], f[15]]) & 0xfff), 18) } else { (None, 14) };
    let et = u16::from_be_bytes([f[l3 - 2], f[l3 - 1]]);
    let (src, dst, l4, pseudo) = if et == 0x0800 {
        let ip = &f[l3..l3 + 20];
        assert_eq!(fold(sum16(ip, 0)), 0xffff, "IPv4 header checksum");
        let tot = u16::from_be_bytes([ip[2], ip[3]]) as usize;
        assert_eq!(tot, 60, "IPv4 total length");
        let s: [u8; 4] = ip[12..16].try_into().unwrap();
        let d: [u8; 4] = ip[16..20].try_into().unwrap();
        (IpAddr::from(s), IpAddr::from(d), l3 + 20, sum16(&s, sum16(&d, 6 + 40)))
    } else {
        assert_eq!(et, 0x86dd);
        let ip = &f[l3..l3 + 40];
        assert_eq!(u16::from_be_bytes([ip[4], ip[5]]), 40, "IPv6 payload length");
        assert_eq!(ip[6], 6);
        let s: [u8; 16] = ip[8..24].try_into().unwrap();
        let d: [u8; 16] = ip[24..40].try_into().unwrap();
        (IpAddr::from(s), IpAddr::from(d), l3 + 40, sum16(&s, sum16(&d, 6 + 40)))
    };
    let t = &f[l4..l4 + 40];
    assert_eq!(fold(sum16(t, pseudo)), 0xffff, "TCP checksum");
    assert_eq!(t[12] >> 4, 10, "data offset");
    let (mut mss, mut ws, mut sack, mut ts) = (None, None, false, None);
    let mut i = 20;
    while i < 40 {
        match t[i] {
            0 => break,
            1 => i += 1,
            2 => {
                mss = Some(u16::from_be_bytes([t[i + 2], t[i + 3]]));
                i += 4
            }
            3 => {
                ws = Some(t[i + 2]);
                i += 3
            }
            4 => {
                sack = true;
                i += 2
            }
            8 => {
                ts = Some((
                    u32::from_be_bytes(t[i + 2..i + 6].try_into().unwrap()),
                    u32::from_be_bytes(t[i + 6..i + 10].try_into().unwrap()),
                ));
                i += 10
            }
            k => panic!("option {k} in a SYN-ACK"),
        }
    }
    SynAck {
        vlan,
        src,
        dst,
        sport: u16::from_be_bytes([t[0], t[1]]),
        dport: u16::from_be_bytes([t[2], t[3]]),
        seq: u32::from_be_bytes(t[4..8].try_into().unwrap()),
        ack: u32::from_be_bytes(t[8..12].try_into().unwrap()),
        flags: t[13],
        mss,
        ws,
        sack,
        ts,
        len: f.len(),
    }
}

/// True if `cookie` is the model's cookie for `t` in this period or the one before.
fn model_agrees(key: CookieKey, t: &CookieTuple, cookie: u32, mss_idx: u32) -> bool {
    let p = syncookie::period_now();
    cookie == syncookie::cookie(key, t, p, mss_idx) || cookie == syncookie::cookie(key, t, p.wrapping_sub(1), mss_idx)
}

/// Waits until at least 3 s remain in the cookie period, so "this period" and "the one before"
/// stay what the test computed while it runs.
fn away_from_period_edge() {
    let period_ns = 1u64 << syncookie::PERIOD_SHIFT;
    loop {
        let now = fastpath_now_ns();
        let left = period_ns - (now & (period_ns - 1));
        if left > 3_000_000_000 {
            return;
        }
        std::thread::sleep(Duration::from_nanos(left + 10_000_000));
    }
}

fn fastpath_now_ns() -> u64 {
    // CLOCK_MONOTONIC, what bpf_ktime_get_ns reads.
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The tests' serial lock and a fresh default test bed for `test`, or None where it may not
/// run ([`privileged`]: it panics under CI=true instead).
fn serial_bed(test: &str) -> Option<(std::sync::MutexGuard<'static, ()>, Testbed)> {
    if !privileged(test) {
        return None;
    }
    let g = serial();
    Some((g, Testbed::up(&TestbedConfig::default()).expect("bed")))
}

/// Client and server addresses, IPv4 then IPv6.
type Ips = (IpAddr, IpAddr, IpAddr, IpAddr);

/// The bed's addresses ([`Ips`]) and MACs (client, server), for crafted frames.
fn endpoints(bed: &Testbed) -> (Ips, ([u8; 6], [u8; 6])) {
    let ips = (IpAddr::V4(bed.ip4_a()), IpAddr::V4(bed.ip4_b()), IpAddr::V6(bed.ip6_a()), IpAddr::V6(bed.ip6_b()));
    (ips, (bed.mac_a(), bed.mac_b()))
}

fn counters(cls: &fastpath::bpf::LoadedClassifier, set: SetIndex) -> std::collections::HashMap<&'static str, u64> {
    cls.totals(set).unwrap().counters.iter().map(|c| (c.0, c.1)).collect()
}

/// Crafted SYNs and ACKs through the program (BPF_PROG_TEST_RUN in the server's namespace, with
/// a listener on the port): SYNs answered with a correct SYN-ACK whose cookie the Rust model
/// computes too; ACKs with a wrong, foreign or expired cookie dropped; malformed and
/// out-of-state segments dropped; every counter exact.
#[test]
fn crafted_segments_exact_counters() {
    let Some((_g, bed)) = serial_bed("crafted_segments_exact_counters") else {
        return;
    };
    let ((a4, b4, a6, b6), (ma, mb)) = endpoints(&bed);
    fastpath_testbed::run_in_netns(bed.ns_b(), move || {
        let _l4 = TcpListener::bind(SocketAddr::new(b4, PORT)).unwrap();
        let _l6 = TcpListener::bind(SocketAddr::new(b6, PORT)).unwrap();
        let cls = Classifier::load().unwrap_or_else(|e| panic!("{e:#}"));
        let set = cls.swap_in(&compile("t", &parse_toml("t", RULES).unwrap()).unwrap()).unwrap();
        let key = cls.syncookie_key().unwrap();
        let (mss4, mss6, wscale) = cls.syncookie_config().unwrap();
        assert_eq!((mss4, mss6), (1460, 1440), "loaded, not attached: a 1500-byte MTU's");
        away_from_period_edge();
        let run = |f: &[u8]| cls.test_run_out(f).unwrap();

        // ---- SYNs answered: IPv4 and IPv6 with Linux's options, VLAN, payload, no options, no TS.
        let mut synacks = 0;
        for (src, dst, vlan, payload) in
            [(a4, b4, None, 0), (a6, b6, None, 0), (a4, b4, Some(100), 0), (a4, b4, None, 100), (a6, b6, Some(7), 33)]
        {
            let mut s = Seg::new(src, dst, 40000 + synacks, SYN);
            s.seq = 0x1234_5678;
            s.vlan = vlan;
            s.opts = linux_syn_opts(if src.is_ipv6() { 1440 } else { 1460 }, 0xabcd_0001);
            s.payload = vec![0x5a; payload];
            let (rc, out) = run(&s.frame(ma, mb));
            assert_eq!(rc, 3, "XDP_TX for {vlan:?} {src} payload {payload}");
            let sa = parse_synack(&out);
            assert_eq!(&out[0..6], &ma, "back to the client's MAC");
            assert_eq!(&out[6..12], &mb);
            assert_eq!(sa.vlan, vlan, "the VLAN tag is kept");
            assert_eq!((sa.src, sa.dst, sa.sport, sa.dport), (dst, src, PORT, s.sport));
            assert_eq!(sa.flags, SYN | ACK);
            assert_eq!(sa.ack, 0x1234_5679, "acks the SYN only, never its payload");
            assert_eq!(sa.len, if src.is_ipv6() { 80 } else { 60 } + if vlan.is_some() { 18 } else { 14 });
            assert_eq!(sa.mss, Some(if src.is_ipv6() { mss6 } else { mss4 }));
            assert!(sa.sack, "SACK permitted offered back");
            assert_eq!(sa.ws, Some(wscale), "our window scale");
            let (tsval, tsecr) = sa.ts.expect("timestamps");
            assert_eq!(tsecr, 0xabcd_0001, "echoes the client's TSval");
            assert_eq!(tsval & 0x3f, 7 | 0x10, "the client's wscale 7 and SACK in TSval's low bits");
            assert!(model_agrees(key, &s.tuple(), sa.seq, 6), "the cookie is the model's (MSS index 6)");
            synacks += 1;
        }
        // No options at all: MSS 536 (index 0) kept, nothing else offered.
        let s = Seg::new(a4, b4, 41000, SYN);
        let (rc, out) = run(&s.frame(ma, mb));
        assert_eq!(rc, 3);
        let sa = parse_synack(&out);
        assert_eq!((sa.ws, sa.sack, sa.ts), (None, false, None), "{sa:?}");
        assert!(model_agrees(key, &s.tuple(), sa.seq, 0));
        synacks += 1;
        // Window scale and SACK but no timestamps: neither can be carried back, neither offered.
        let mut s = Seg::new(a4, b4, 41001, SYN);
        s.opts = vec![2, 4, 0x05, 0xb4, 4, 2, 1, 3, 3, 7]; // MSS 1460
        let (rc, out) = run(&s.frame(ma, mb));
        assert_eq!(rc, 3);
        let sa = parse_synack(&out);
        assert_eq!((sa.ws, sa.sack, sa.ts, sa.mss), (None, false, None, Some(mss4)), "{sa:?}");
        assert!(model_agrees(key, &s.tuple(), sa.seq, 6));
        synacks += 1;

        // ---- Dropped as invalid: crafted headers and out-of-state segments.
        let mut invalid = Vec::new();
        let mut s = Seg::new(a4, b4, 42000, SYN);
        s.doff = Some(4);
        invalid.push(("doff 4", s));
        let mut s = Seg::new(a4, b4, 42001, SYN);
        s.doff = Some(15);
        invalid.push(("doff past the IP payload", s));
        let mut s = Seg::new(a4, b4, 42002, SYN);
        s.opts = vec![1, 1, 1, 1, 8, 10, 0, 0];
        invalid.push(("an option running past the header", s));
        let mut s = Seg::new(a4, b4, 42003, SYN);
        s.opts = vec![3, 0, 0, 0];
        invalid.push(("an option of length 0", s));
        invalid.push(("SYN+RST", Seg::new(a4, b4, 42004, SYN | RST)));
        invalid.push(("SYN+FIN", Seg::new(a4, b4, 42005, SYN | FIN)));
        invalid.push(("SYN+ACK to the listener", Seg::new(a4, b4, 42006, SYN | ACK)));
        invalid.push(("RST without a connection", Seg::new(a4, b4, 42007, RST)));
        invalid.push(("FIN without ACK", Seg::new(a4, b4, 42008, FIN)));
        invalid.push(("no flags", Seg::new(a4, b4, 42009, 0)));
        let mut s = Seg::new(a4, b4, 42010, SYN);
        s.more_frags = true;
        invalid.push(("a SYN in a first fragment", s));
        let mut s = Seg::new(a6, b6, 42011, SYN);
        s.v6_ext = Some(0);
        invalid.push(("an IPv6 SYN behind a hop-by-hop header", s));
        for (what, s) in &invalid {
            assert_eq!(run(&s.frame(ma, mb)).0, 1, "{what}: XDP_DROP");
        }

        // ---- ACKs: the cookie decides.
        let p = syncookie::period_now();
        let ack_with = |src: IpAddr, dst: IpAddr, sport: u16, cookie: u32| {
            let mut s = Seg::new(src, dst, sport, ACK);
            s.seq = 0x0101_0102;
            s.ack = cookie.wrapping_add(1);
            s
        };
        let tuple =
            |src: IpAddr, dst: IpAddr, sport: u16| CookieTuple { src, dst, sport, dport: PORT, isn: 0x0101_0101 };
        let mut bad = Vec::new();
        bad.push(("a random cookie", ack_with(a4, b4, 43000, 0x5eed_1234)));
        bad.push(("no handshake at all (seq/ack 0)", {
            let mut s = Seg::new(a4, b4, 43001, ACK);
            s.seq = 0;
            s
        }));
        let other = syncookie::cookie(key, &tuple(a4, b4, 43003), p, 6);
        bad.push(("a cookie of another 4-tuple (replayed)", ack_with(a4, b4, 43002, other)));
        let old = syncookie::cookie(key, &tuple(a4, b4, 43004), p.wrapping_sub(2), 6);
        bad.push(("a cookie two periods old", ack_with(a4, b4, 43004, old)));
        let wrong_key = syncookie::cookie(CookieKey { k0: key.k0 ^ 1, k1: key.k1 }, &tuple(a4, b4, 43005), p, 6);
        bad.push(("a cookie under another key", ack_with(a4, b4, 43005, wrong_key)));
        bad.push(("IPv6, a random cookie", ack_with(a6, b6, 43006, 0x0bad_c0de)));
        // A valid cookie with hash bits below bit 16 changed: every one of the 29 is checked.
        for (sport, src, dst, flip) in
            [(43008, a4, b4, 1u32 << 3), (43009, a4, b4, 1 << 15), (43010, a4, b4, 0xfff8), (43011, a6, b6, 1 << 9)]
        {
            let valid = syncookie::cookie(key, &tuple(src, dst, sport), p, 6);
            bad.push(("a valid cookie with a hash bit below 16 changed", ack_with(src, dst, sport, valid ^ flip)));
        }
        let mut s = ack_with(a4, b4, 43007, syncookie::cookie(key, &tuple(a4, b4, 43007), p, 6));
        s.flags = ACK | RST;
        invalid.push(("ACK+RST with a valid cookie", s.clone()));
        assert_eq!(run(&s.frame(ma, mb)).0, 1, "ACK+RST: XDP_DROP");
        for (what, s) in &bad {
            assert_eq!(run(&s.frame(ma, mb)).0, 1, "{what}: XDP_DROP");
        }
        let mut good = Vec::new();
        for (i, (src, dst, period)) in
            [(a4, b4, p), (a4, b4, p.wrapping_sub(1)), (a6, b6, p), (a6, b6, p.wrapping_sub(1))].into_iter().enumerate()
        {
            let sport = 44000 + i as u16;
            good.push(ack_with(src, dst, sport, syncookie::cookie(key, &tuple(src, dst, sport), period, 5)));
        }
        let mut with_data = good[0].clone();
        with_data.sport = 44100;
        with_data.ack = syncookie::cookie(key, &tuple(a4, b4, 44100), p, 5).wrapping_add(1);
        with_data.flags = ACK | 0x08;
        with_data.payload = b"GET / HTTP/1.0\r\n\r\n".to_vec();
        good.push(with_data);
        for s in &good {
            assert_eq!(run(&s.frame(ma, mb)).0, 2, "a valid cookie from {} port {}: XDP_PASS", s.src, s.sport);
        }

        let c = counters(&cls, set);
        let n_invalid = invalid.len() as u64;
        assert_eq!(c["syncookie_synack"], synacks as u64, "{c:?}");
        assert_eq!(c["syncookie_invalid"], n_invalid, "{c:?}");
        assert_eq!(c["syncookie_ack_bad"], bad.len() as u64, "{c:?}");
        assert_eq!(c["syncookie_ack_ok"], good.len() as u64, "{c:?}");
        assert_eq!(c["syncookie_conn"], 0, "{c:?}");
        assert_eq!((c["syncookie_reqsk"], c["syncookie_tc_fail"]), (0, 0), "no tc program under test_run");
        assert_eq!(c["tx"], synacks as u64, "{c:?}");
        assert_eq!(c["drop"], n_invalid + bad.len() as u64, "{c:?}");
        assert_eq!(c["pass"], good.len() as u64, "{c:?}");
        assert_eq!(
            cls.rule_counters(set, 1).unwrap()[0].0,
            synacks as u64 + n_invalid + (bad.len() + good.len()) as u64
        );
    })
    .unwrap();
    bed.down().unwrap();
}

/// The server side of a test: the classifier with the syncookie rule attached on the server's
/// interface (native XDP), listeners on the port, a thread accepting and echoing, and what
/// TCP_INFO says of each accepted connection.
struct Server {
    /// The cookie key in force (for crafting ACKs that are almost valid).
    key: CookieKey,
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Result<ServerReport, fastpath_testbed::TestbedError>>,
    client_xdp: std::thread::JoinHandle<Result<(), fastpath_testbed::TestbedError>>,
}

#[derive(Debug, Default)]
struct ServerReport {
    /// (options, snd_wscale, rcv_wscale, snd_mss) per accepted connection, in accept order.
    infos: Vec<(u8, u8, u8, u32)>,
    counters: std::collections::HashMap<&'static str, u64>,
    wscale: u8,
    tc_before: u32,
    tc_after_swap: u32,
}

/// SYNs the kernel would never answer are not answered (no reflection, no L2 amplification):
/// broadcast or multicast destination MAC, multicast source MAC, loopback, multicast, 0/8 or
/// equal IPv4 addresses, ::, ::1, ff00::/8 or equal IPv6 addresses; each dropped and counted
/// `syncookie_invalid`, exactly; a proper SYN still gets its SYN-ACK. Checked to fail without
/// sc_bogus (each got XDP_TX).
#[test]
fn syns_the_kernel_would_drop_are_not_answered() {
    let Some((_g, bed)) = serial_bed("syns_the_kernel_would_drop_are_not_answered") else {
        return;
    };
    let ((a4, b4, a6, b6), (ma, mb)) = endpoints(&bed);
    fastpath_testbed::run_in_netns(bed.ns_b(), move || {
        let _l4 = TcpListener::bind(SocketAddr::new(b4, PORT)).unwrap();
        let cls = Classifier::load().unwrap_or_else(|e| panic!("{e:#}"));
        let set = cls.swap_in(&compile("t", &parse_toml("t", RULES).unwrap()).unwrap()).unwrap();
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let bcast = [0xff; 6];
        let mcast = [0x01, 0x00, 0x5e, 0x00, 0x00, 0x01];
        type Case = (&'static str, IpAddr, IpAddr, [u8; 6], [u8; 6]);
        let cases: Vec<Case> = vec![
            ("broadcast dst MAC", a4, b4, ma, bcast),
            ("multicast dst MAC", a4, b4, ma, mcast),
            ("multicast src MAC", a4, b4, mcast, mb),
            ("loopback src", ip("127.0.0.1"), b4, ma, mb),
            ("0/8 src", ip("0.0.0.0"), b4, ma, mb),
            ("multicast dst", a4, ip("224.0.0.1"), ma, mb),
            ("broadcast dst", a4, ip("255.255.255.255"), ma, mb),
            ("loopback dst", a4, ip("127.0.0.1"), ma, mb),
            ("src = dst", b4, b4, ma, mb),
            ("v6 :: src", ip("::"), b6, ma, mb),
            ("v6 ::1 src", ip("::1"), b6, ma, mb),
            ("v6 multicast src", ip("ff02::1"), b6, ma, mb),
            ("v6 multicast dst", a6, ip("ff02::1"), ma, mb),
            ("v6 src = dst", b6, b6, ma, mb),
        ];
        for (i, (what, src, dst, smac, dmac)) in cases.iter().enumerate() {
            let mut s = Seg::new(*src, *dst, 41000 + i as u16, SYN);
            s.opts = linux_syn_opts(1460, 1);
            let (rc, _) = cls.test_run_out(&s.frame(*smac, *dmac)).unwrap();
            assert_eq!(rc, 1, "XDP_DROP for {what}");
        }
        let mut s = Seg::new(a4, b4, 42000, SYN);
        s.opts = linux_syn_opts(1460, 1);
        assert_eq!(cls.test_run_out(&s.frame(ma, mb)).unwrap().0, 3, "a proper SYN is answered");
        let c = counters(&cls, set);
        assert_eq!(c["syncookie_invalid"], cases.len() as u64, "{c:?}");
        assert_eq!(c["syncookie_synack"], 1, "{c:?}");
    })
    .unwrap();
    bed.down().unwrap();
}

/// A SYN for a tuple the kernel holds a non-listening socket for (here: established; TIME_WAIT
/// reuse takes the same path) goes to the kernel (XDP_PASS, `syncookie_conn`) instead of a
/// cookie SYN-ACK. Checked to fail without the lookup (XDP_TX).
#[test]
fn syn_of_a_known_connection_goes_to_the_kernel() {
    let Some((_g, bed)) = serial_bed("syn_of_a_known_connection_goes_to_the_kernel") else {
        return;
    };
    let (b4, ma, mb, ifc) = (bed.ip4_b(), bed.mac_a(), bed.mac_b(), bed.iface_b().to_string());
    let add = fastpath_testbed::ns_command(bed.ns_b(), "ip")
        .args(["addr", "add", "10.99.0.77/32", "dev", &ifc])
        .status()
        .unwrap();
    assert!(add.success());
    fastpath_testbed::run_in_netns(bed.ns_b(), move || {
        let l = TcpListener::bind(SocketAddr::new(IpAddr::V4(b4), PORT)).unwrap();
        let other: IpAddr = "10.99.0.77".parse().unwrap();
        let sock = socket2_connect(other, SocketAddr::new(IpAddr::V4(b4), PORT));
        let (_srv, _) = l.accept().unwrap();
        let sport = sock.local_addr().unwrap().port();
        let cls = Classifier::load().unwrap_or_else(|e| panic!("{e:#}"));
        let set = cls.swap_in(&compile("t", &parse_toml("t", RULES).unwrap()).unwrap()).unwrap();
        let mut s = Seg::new(other, IpAddr::V4(b4), sport, SYN);
        s.opts = linux_syn_opts(1460, 1);
        assert_eq!(cls.test_run_out(&s.frame(ma, mb)).unwrap().0, 2, "XDP_PASS: the connection's");
        let mut s = Seg::new(other, IpAddr::V4(b4), sport.wrapping_add(1).max(1024), SYN);
        s.opts = linux_syn_opts(1460, 1);
        assert_eq!(cls.test_run_out(&s.frame(ma, mb)).unwrap().0, 3, "another port: answered");
        let c = counters(&cls, set);
        assert_eq!((c["syncookie_conn"], c["syncookie_synack"]), (1, 1), "{c:?}");
    })
    .unwrap();
    bed.down().unwrap();
}

/// A TCP connection from `from` (any port) to `to`, IPv4 or IPv6.
fn socket2_connect(from: IpAddr, to: SocketAddr) -> TcpStream {
    /// `a` port `port` as a sockaddr_in or sockaddr_in6 (bytes) and its length.
    fn sockaddr(a: IpAddr, port: u16) -> (libc::sockaddr_storage, u32) {
        // SAFETY: all-zero is a valid sockaddr_storage; the family's fields are set below.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        match a {
            IpAddr::V4(v) => {
                // SAFETY: sockaddr_storage is large and aligned enough for a sockaddr_in.
                let sa = unsafe { &mut *(&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
                sa.sin_family = libc::AF_INET as u16;
                sa.sin_addr.s_addr = u32::from_ne_bytes(v.octets());
                sa.sin_port = port.to_be();
                (ss, std::mem::size_of::<libc::sockaddr_in>() as u32)
            }
            IpAddr::V6(v) => {
                // SAFETY: sockaddr_storage is large and aligned enough for a sockaddr_in6.
                let sa = unsafe { &mut *(&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
                sa.sin6_family = libc::AF_INET6 as u16;
                sa.sin6_addr.s6_addr = v.octets();
                sa.sin6_port = port.to_be();
                (ss, std::mem::size_of::<libc::sockaddr_in6>() as u32)
            }
        }
    }
    let family = if from.is_ipv6() { libc::AF_INET6 } else { libc::AF_INET };
    // SAFETY: a plain socket(2) call.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM, 0) };
    assert!(fd >= 0);
    // SAFETY: fd is a fresh socket we own.
    let s = unsafe { <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let (sa, len) = sockaddr(from, 0);
    // SAFETY: sa holds a valid sockaddr of `len` bytes.
    let rc = unsafe { libc::bind(fd, (&sa as *const libc::sockaddr_storage).cast(), len) };
    assert_eq!(rc, 0, "bind {from}: {}", std::io::Error::last_os_error());
    let (da, len) = sockaddr(to.ip(), to.port());
    // SAFETY: da holds a valid sockaddr of `len` bytes.
    let rc = unsafe { libc::connect(fd, (&da as *const libc::sockaddr_storage).cast(), len) };
    assert_eq!(rc, 0, "connect {to}: {}", std::io::Error::last_os_error());
    s
}

fn tcp_info(fd: i32) -> libc::tcp_info {
    // SAFETY: all-zero is a valid tcp_info.
    let mut ti: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: ti/len describe a valid buffer for TCP_INFO.
    let rc = unsafe {
        libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, (&mut ti as *mut libc::tcp_info).cast(), &mut len)
    };
    assert_eq!(rc, 0, "getsockopt(TCP_INFO)");
    ti
}

/// Starts the server with the classifier attached in `mode`. The client's interface gets an XDP
/// program too (a classifier passing everything): a veth delivers the frames its peer sends
/// with XDP_TX only to a NAPI that XDP keeps running (GRO alone left them queued here).
fn start_server(bed: &Testbed, echo: bool, mode: XdpMode) -> Server {
    let (ns_a, iface_a) = (bed.ns_a().to_string(), bed.iface_a().to_string());
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let client_xdp = fastpath_testbed::spawn_in_netns(&ns_a, move || {
        let dev = fastpath::netdev::Iface::resolve(&iface_a).unwrap();
        let cls = Classifier::load().unwrap();
        cls.swap_in(&compile("c", &parse_toml("c", "default = \"pass\"\n").unwrap()).unwrap()).unwrap();
        let _att = cls.attach(&dev, fastpath::bpf::AttachOpts::mode(Some(XdpMode::Native))).unwrap();
        tx.send(()).unwrap();
        while !st.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    rx.recv_timeout(Duration::from_secs(30)).expect("client XDP up");
    let (ns, iface) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    let (b4, b6) = (bed.ip4_b(), bed.ip6_b());
    let st = stop.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = fastpath_testbed::spawn_in_netns(&ns, move || {
        let dev = fastpath::netdev::Iface::resolve(&iface).unwrap();
        let ifindex = dev.ifindex();
        let cls = Classifier::load().unwrap();
        cls.swap_in(&compile("t", &parse_toml("t", RULES).unwrap()).unwrap()).unwrap();
        let cls =
            cls.attach(&dev, fastpath::bpf::AttachOpts::mode(Some(mode))).unwrap_or_else(|e| panic!("{e:#}")).prog;
        let mut rep = ServerReport { wscale: cls.syncookie_config().unwrap().2, ..Default::default() };
        rep.tc_before = syncookie::tcx_ingress_programs(ifindex).unwrap();
        let l4 = TcpListener::bind(SocketAddr::new(IpAddr::V4(b4), PORT)).unwrap();
        let l6 = TcpListener::bind(SocketAddr::new(IpAddr::V6(b6), PORT)).unwrap();
        l4.set_nonblocking(true).unwrap();
        l6.set_nonblocking(true).unwrap();
        tx.send(cls.syncookie_key().unwrap()).unwrap();
        let mut workers = Vec::new();
        while !st.load(Ordering::Relaxed) {
            let mut idle = true;
            for l in [&l4, &l6] {
                if let Ok((mut s, _)) = l.accept() {
                    idle = false;
                    let ti = tcp_info(s.as_raw_fd());
                    rep.infos.push((
                        ti.tcpi_options,
                        ti.tcpi_snd_rcv_wscale & 0xf,
                        ti.tcpi_snd_rcv_wscale >> 4,
                        ti.tcpi_snd_mss,
                    ));
                    if echo {
                        workers.push(std::thread::spawn(move || {
                            s.set_nonblocking(false).unwrap();
                            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                            let mut buf = [0u8; 64];
                            while let Ok(n) = s.read(&mut buf) {
                                if n == 0 || s.write_all(&buf[..n]).is_err() {
                                    break;
                                }
                            }
                        }));
                    }
                }
            }
            if idle {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        for w in workers {
            let _ = w.join();
        }
        let set = cls.active().unwrap();
        rep.counters = cls.totals(set).unwrap().counters.iter().map(|c| (c.0, c.1)).collect();
        // The rule goes: the tc program goes with it.
        cls.swap_in(&compile("t", &parse_toml("t", NO_SC_RULES).unwrap()).unwrap()).unwrap();
        rep.tc_after_swap = syncookie::tcx_ingress_programs(ifindex).unwrap();
        rep
    });
    let key = rx.recv_timeout(Duration::from_secs(30)).expect("server up");
    Server { key, stop, handle, client_xdp }
}

impl Server {
    fn finish(self) -> ServerReport {
        std::thread::sleep(Duration::from_millis(300));
        self.stop.store(true, Ordering::Relaxed);
        self.client_xdp.join().unwrap().unwrap();
        self.handle.join().unwrap().unwrap()
    }
}

/// One connection from the client's namespace: connect, send `msg`, read it back; returns the
/// client's own TCP_INFO (its rcv_wscale is what it offered).
fn echo_once(ns: &str, to: SocketAddr, msg: &'static [u8]) -> libc::tcp_info {
    fastpath_testbed::run_in_netns(ns, move || {
        let mut c =
            TcpStream::connect_timeout(&to, Duration::from_secs(5)).unwrap_or_else(|e| panic!("connect {to}: {e}"));
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(msg).unwrap();
        let mut buf = vec![0u8; msg.len()];
        c.read_exact(&mut buf).unwrap();
        assert_eq!(buf, msg, "echoed through {to}");
        tcp_info(c.as_raw_fd())
    })
    .unwrap()
}

/// IPv4 and IPv6 clients connect through the syncookie rule and exchange data; the server's
/// TCP_INFO shows MSS, window scale (both ways), SACK and timestamps kept; the tc program made
/// one request socket per connection; with the rule gone, the tc program is gone.
#[test]
fn clients_connect_with_options_kept() {
    connect_with_options_kept("clients_connect_with_options_kept", XdpMode::Native);
}

/// The same with the classifier in generic (skb) mode, where the tc program checks every ACK
/// that finds a listener (the XDP metadata mark does not reach it there).
#[test]
fn clients_connect_with_options_kept_generic_xdp() {
    connect_with_options_kept("clients_connect_with_options_kept_generic_xdp", XdpMode::Skb);
}

fn connect_with_options_kept(test: &str, mode: XdpMode) {
    let Some((_g, bed)) = serial_bed(test) else {
        return;
    };
    let srv = start_server(&bed, true, mode);
    let c4 = echo_once(bed.ns_a(), SocketAddr::new(IpAddr::V4(bed.ip4_b()), PORT), b"hello over IPv4");
    let c6 = echo_once(bed.ns_a(), SocketAddr::new(IpAddr::V6(bed.ip6_b()), PORT), b"hello over IPv6");
    let rep = srv.finish();
    assert_eq!(rep.tc_before, 1, "the tc program is attached with the rule");
    assert_eq!(rep.tc_after_swap, 0, "and detached when the rule goes");
    assert_eq!(rep.infos.len(), 2, "{rep:?}");
    for ((opts, snd_ws, rcv_ws, snd_mss), (client, mss)) in rep.infos.iter().zip([(&c4, 1460u32), (&c6, 1440)]) {
        assert_eq!(opts & 0x7, 0x7, "timestamps, SACK and window scaling negotiated: {rep:?}");
        assert_eq!(*rcv_ws, rep.wscale, "the server receives with the scale the SYN-ACK advertised");
        assert_eq!(*snd_ws, client.tcpi_snd_rcv_wscale >> 4, "and sends with the client's");
        assert_eq!(*snd_mss, mss - 12, "the client's MSS kept (minus the timestamp option)");
    }
    let c = &rep.counters;
    assert_eq!(c["syncookie_synack"], 2, "{c:?}");
    // Exact: one request socket per connection, and every ACK passed with a valid cookie went
    // through tc (marked, or checked there in generic mode) and made one or failed. Not exact:
    // the handshake ACK and the first data segment can be checked in one NAPI batch before the
    // connection exists (both ack_ok); the second then finds the new socket at tc (tc_fail).
    assert_eq!(c["syncookie_reqsk"], 2, "{c:?}");
    assert!(c["syncookie_ack_ok"] >= 2, "{c:?}");
    assert_eq!(c["syncookie_ack_ok"], c["syncookie_reqsk"] + c["syncookie_tc_fail"], "{c:?}");
    assert_eq!(c["syncookie_ack_bad"], 0, "{c:?}");
    assert_eq!(c["syncookie_invalid"], 0, "{c:?}");
    assert!(c["syncookie_conn"] >= 4, "data and FIN segments of the two connections: {c:?}");
    bed.down().unwrap();
}

/// A client without timestamps (net.ipv4.tcp_timestamps = 0 in its namespace): it still
/// connects; the MSS is kept, window scaling and SACK are not (nothing carries them back).
#[test]
fn client_without_timestamps_keeps_mss_only() {
    let Some((_g, bed)) = serial_bed("client_without_timestamps_keeps_mss_only") else {
        return;
    };
    let set =
        fastpath_testbed::ns_command(bed.ns_a(), "sysctl").args(["-qw", "net.ipv4.tcp_timestamps=0"]).status().unwrap();
    assert!(set.success());
    let srv = start_server(&bed, true, XdpMode::Native);
    echo_once(bed.ns_a(), SocketAddr::new(IpAddr::V4(bed.ip4_b()), PORT), b"no timestamps");
    let rep = srv.finish();
    assert_eq!(rep.infos.len(), 1, "{rep:?}");
    let (opts, _, _, snd_mss) = rep.infos[0];
    assert_eq!(opts & 0x7, 0, "no timestamps, SACK or window scaling: {rep:?}");
    assert_eq!(snd_mss, 1460, "the MSS from the cookie");
    assert_eq!(rep.counters["syncookie_reqsk"], 1);
    bed.down().unwrap();
}

/// A server namespace with net.ipv4.tcp_sack = 0: the SYN-ACK does not offer SACK (the kfunc
/// would refuse the request socket with sack_ok, -EINVAL), the client connects with timestamps
/// and window scaling and without SACK, and the tc program never failed. Checked to fail
/// without the loader's FP_SC_F_NO_SACK: the connection is reset.
#[test]
fn server_without_sack_negotiates_none() {
    let Some((_g, bed)) = serial_bed("server_without_sack_negotiates_none") else {
        return;
    };
    let set = fastpath_testbed::ns_command(bed.ns_b(), "sysctl").args(["-qw", "net.ipv4.tcp_sack=0"]).status().unwrap();
    assert!(set.success());
    let srv = start_server(&bed, true, XdpMode::Native);
    let client = echo_once(bed.ns_a(), SocketAddr::new(IpAddr::V4(bed.ip4_b()), PORT), b"no sack");
    let rep = srv.finish();
    assert_eq!(rep.infos.len(), 1, "{rep:?}");
    let (opts, _, _, _) = rep.infos[0];
    assert_eq!(opts & 0x7, 0x5, "timestamps and window scaling, no SACK (server): {rep:?}");
    assert_eq!(client.tcpi_options & 0x2, 0, "no SACK on the client either");
    let c = &rep.counters;
    assert_eq!(c["syncookie_reqsk"], 1, "{c:?}");
    assert_eq!(c["syncookie_tc_fail"], 0, "{c:?}");
    bed.down().unwrap();
}

/// An AF_PACKET socket sending whole frames out of one interface (the calling thread's
/// namespace); closed on drop.
struct RawSender {
    fd: i32,
    sll: libc::sockaddr_ll,
}

impl RawSender {
    fn new(iface: &str) -> RawSender {
        // SAFETY: a plain socket(2) call.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        assert!(fd >= 0, "socket(AF_PACKET)");
        // SAFETY: all-zero is a valid sockaddr_ll; the fields are set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = fastpath::netdev::Iface::resolve(iface).unwrap().ifindex() as i32;
        sll.sll_halen = 6;
        RawSender { fd, sll }
    }

    /// sendto(2) of `f`: the bytes sent, or the errno.
    fn send(&self, f: &[u8]) -> Result<usize, i32> {
        // SAFETY: f and sll are valid for the call.
        let n = unsafe {
            libc::sendto(
                self.fd,
                f.as_ptr().cast(),
                f.len(),
                0,
                (&self.sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if n < 0 {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        } else {
            Ok(n as usize)
        }
    }
}

impl Drop for RawSender {
    fn drop(&mut self) {
        // SAFETY: fd is ours.
        unsafe { libc::close(self.fd) };
    }
}

/// Spoofed SYNs from many sources flood the port over AF_PACKET while a client makes new
/// connections: every connection succeeds, each got its request socket, and the flood was
/// answered at the driver.
#[test]
fn client_connects_through_a_syn_flood() {
    let Some((_g, bed)) = serial_bed("client_connects_through_a_syn_flood") else {
        return;
    };
    let srv = start_server(&bed, true, XdpMode::Native);
    let (ns_a, if_a, ma, mb, b4) =
        (bed.ns_a().to_string(), bed.iface_a().to_string(), bed.mac_a(), bed.mac_b(), bed.ip4_b());
    let flooding = Arc::new(AtomicBool::new(true));
    let fl = flooding.clone();
    let flood = fastpath_testbed::spawn_in_netns(&ns_a, move || {
        let tx = RawSender::new(&if_a);
        let mut sent = 0u64;
        let mut i = 0u32;
        while fl.load(Ordering::Relaxed) {
            let src = IpAddr::from([10, 98, (i >> 8) as u8, i as u8]);
            let mut s = Seg::new(src, IpAddr::V4(b4), 1024 + (i % 60000) as u16, SYN);
            s.seq = i.wrapping_mul(2654435761);
            s.opts = linux_syn_opts(1460, i);
            let f = s.frame(ma, mb);
            let n = tx.send(&f).unwrap_or(0);
            if n > 0 {
                sent += 1;
            }
            i = i.wrapping_add(1);
        }
        sent
    });
    std::thread::sleep(Duration::from_millis(300));
    let to = SocketAddr::new(IpAddr::V4(b4), PORT);
    let mut connect_ms = Vec::new();
    for _ in 0..50 {
        let t0 = Instant::now();
        echo_once(bed.ns_a(), to, b"through the flood");
        connect_ms.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    flooding.store(false, Ordering::Relaxed);
    let sent = flood.join().unwrap().unwrap();
    let rep = srv.finish();
    let c = &rep.counters;
    assert_eq!(rep.infos.len(), 50, "every connection was accepted");
    // At least one request socket per connection; under the flood a client may retransmit its
    // SYN and ACK both SYN-ACKs before its socket exists: the kernel keeps the first.
    assert!(c["syncookie_reqsk"] >= 50, "a request socket per client connection: {c:?}");
    assert_eq!(c["syncookie_ack_ok"], c["syncookie_reqsk"], "every checked ACK got its request socket: {c:?}");
    assert_eq!(c["syncookie_tc_fail"], 0, "{c:?}");
    assert!(sent > 10_000, "the flood sent {sent} SYNs");
    assert!(c["syncookie_synack"] >= 50 + sent / 2, "the flood was answered at the driver: {c:?}, {sent} sent");
    connect_ms.sort_by(f64::total_cmp);
    eprintln!(
        "flood {sent} SYNs, {} answered with a cookie SYN-ACK; 50 echo round trips incl. connect: p50 {:.2} ms, max {:.2} ms",
        c["syncookie_synack"], connect_ms[25], connect_ms[49]
    );
    bed.down().unwrap();
}

/// A tcx ingress program returning TC_ACT_SHOT for every packet, loaded and attached at the end
/// of the chain of `ifindex` (the calling thread's namespace) with raw bpf(2) calls; the link's
/// descriptor (closing it detaches). The kernel here has no legacy tc classifier modules
/// (clsact filters cannot be added), so a second tcx program stands for "what runs after".
fn attach_drop_all_tcx(ifindex: u32) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // r0 = 2 (TC_ACT_SHOT); exit
    let insns: [u64; 2] = [0xb7 | 2u64 << 32, 0x95];
    let license = b"GPL\0";
    let mut load = [0u8; 128];
    load[0..4].copy_from_slice(&3u32.to_ne_bytes()); // BPF_PROG_TYPE_SCHED_CLS
    load[4..8].copy_from_slice(&2u32.to_ne_bytes());
    load[8..16].copy_from_slice(&(insns.as_ptr() as u64).to_ne_bytes());
    load[16..24].copy_from_slice(&(license.as_ptr() as u64).to_ne_bytes());
    // SAFETY: BPF_PROG_LOAD (5) with a zero-padded bpf_attr; insns and license outlive the call.
    let prog = unsafe { libc::syscall(libc::SYS_bpf, 5, load.as_ptr(), load.len()) };
    assert!(prog >= 0, "BPF_PROG_LOAD: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh descriptor we own.
    let prog = unsafe { std::os::fd::OwnedFd::from_raw_fd(prog as i32) };
    let mut link = [0u8; 64];
    link[0..4].copy_from_slice(&(prog.as_raw_fd() as u32).to_ne_bytes());
    link[4..8].copy_from_slice(&ifindex.to_ne_bytes());
    link[8..12].copy_from_slice(&46u32.to_ne_bytes()); // BPF_TCX_INGRESS; no flags: append
                                                       // SAFETY: BPF_LINK_CREATE (28) with a zero-padded bpf_attr.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, 28, link.as_ptr(), link.len()) };
    assert!(fd >= 0, "BPF_LINK_CREATE(BPF_TCX_INGRESS): {}", std::io::Error::last_os_error());
    // SAFETY: a fresh link descriptor we own.
    unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) }
}

/// The tc program never ends the tcx chain: with the syncookie rule loaded, a tcx program
/// attached after it (dropping everything) still runs, so pings fail while it is there. Checked
/// to fail with the syncookie program returning TC_ACT_OK (TCX_PASS): the pings then get through.
#[test]
fn later_tcx_programs_still_run_after_the_tc_program() {
    let Some((_g, bed)) = serial_bed("later_tcx_programs_still_run_after_the_tc_program") else {
        return;
    };
    let srv = start_server(&bed, false, XdpMode::Native);
    let (ns_a, to) = (bed.ns_a().to_string(), bed.ip4_b().to_string());
    let ping = move || {
        fastpath_testbed::ns_command(&ns_a, "ping")
            .args(["-c", "2", "-i", "0.2", "-W", "1", "-q", &to])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap()
            .success()
    };
    assert!(ping(), "ICMP passes with the syncookie tc program alone");
    let iface = bed.iface_b().to_string();
    let ping2 = ping.clone();
    let passed = fastpath_testbed::run_in_netns(bed.ns_b(), move || {
        let ping = ping2;
        let ifx = fastpath::netdev::Iface::resolve(&iface).unwrap().ifindex();
        let link = attach_drop_all_tcx(ifx);
        assert_eq!(syncookie::tcx_ingress_programs(ifx).unwrap(), 2, "ours, then the dropper");
        let passed = ping();
        drop(link);
        passed
    })
    .unwrap();
    srv.finish();
    assert!(!passed, "the later tcx program dropped the pings: the syncookie program returned TCX_NEXT");
    bed.down().unwrap();
}

/// Programs at tcx ingress of the server's interface.
fn tcx_programs(bed: &Testbed) -> u32 {
    let iface = bed.iface_b().to_string();
    fastpath_testbed::run_in_netns(bed.ns_b(), move || {
        let ifx = fastpath::netdev::Iface::resolve(&iface).unwrap().ifindex();
        syncookie::tcx_ingress_programs(ifx).unwrap()
    })
    .unwrap()
}

/// `filter load --detach` / `reload` / `unload`: the tc program is pinned with the classifier
/// while the set has a syncookie rule and only then; with net.ipv4.tcp_syncookies = 0 the load
/// is refused in one line and nothing stays attached or pinned.
#[test]
fn pinned_classifier_carries_the_tc_program() {
    let Some((_g, bed)) = serial_bed("pinned_classifier_carries_the_tc_program") else {
        return;
    };
    let (ns, ifc) = (bed.ns_b(), bed.iface_b());
    let sc = "proto=tcp,dst_port=8080,action=syncookie";
    let ok = |o: std::process::Output| assert!(o.status.success(), "{}", stderr(&o));
    ok(run(&["filter", "load", "--netns", ns, "-i", ifc, "--rule", sc, "--detach"]));
    assert_eq!(tcx_programs(&bed), 1, "attached with the rule");
    ok(run(&["filter", "reload", "--netns", ns, "-i", ifc, "--rule", "proto=udp,dst_port=9,action=drop"]));
    assert_eq!(tcx_programs(&bed), 0, "gone with the rule");
    ok(run(&["filter", "reload", "--netns", ns, "-i", ifc, "--rule", sc]));
    assert_eq!(tcx_programs(&bed), 1, "back with the rule");
    ok(run(&["filter", "unload", "--netns", ns, "-i", ifc]));
    assert_eq!(tcx_programs(&bed), 0, "gone with the classifier");
    assert!(attached(ns, ifc).is_none());

    let off = fastpath_testbed::ns_command(ns, "sysctl").args(["-qw", "net.ipv4.tcp_syncookies=0"]).status().unwrap();
    assert!(off.success());
    let o = run(&["filter", "load", "--netns", ns, "-i", ifc, "--rule", sc, "--detach"]);
    assert_one_line_refusal("tcp_syncookies 0", &o, 2, &["net.ipv4.tcp_syncookies 0 is not accepted"]);
    assert!(attached(ns, ifc).is_none(), "no XDP program left behind");
    assert_eq!(tcx_programs(&bed), 0, "no tc program left behind");
    let dir = fastpath_testbed::run_in_netns(ns, {
        let i = ifc.to_string();
        move || fastpath::bpf::classifier::pin_dir(&i)
    })
    .unwrap();
    assert!(!dir.exists(), "no pins left behind: {}", dir.display());
    bed.down().unwrap();
}

/// Spoofed out-of-state ACKs on the wire (AF_PACKET from the client's namespace, paced so the
/// veth ring loses none): every one is dropped at the driver and counted `syncookie_ack_bad`,
/// exactly, while a client still connects. Each ACK carries its tuple's valid cookie with some
/// of hash bits 3..15 changed, so a check of fewer than the cookie's 29 hash bits lets them by.
#[test]
fn ack_flood_dropped_and_counted_exactly() {
    let Some((_g, bed)) = serial_bed("ack_flood_dropped_and_counted_exactly") else {
        return;
    };
    let srv = start_server(&bed, true, XdpMode::Native);
    const N: u32 = 20_000;
    let (if_a, ma, mb, b4, key) = (bed.iface_a().to_string(), bed.mac_a(), bed.mac_b(), bed.ip4_b(), srv.key);
    let sent = fastpath_testbed::run_in_netns(bed.ns_a(), move || {
        let tx = RawSender::new(&if_a);
        let mut sent = 0u32;
        let period = syncookie::period_now();
        for i in 0..N {
            let src = IpAddr::from([10, 97, (i >> 8) as u8, i as u8]);
            let mut s = Seg::new(src, IpAddr::V4(b4), 1024 + (i % 60000) as u16, ACK);
            s.seq = i.wrapping_mul(2654435761);
            let t = CookieTuple { isn: s.seq.wrapping_sub(1), ..s.tuple() };
            // Valid now and in the next period, but for bits 3..15 (never all equal).
            let flip = ((i % 0x1fff) + 1) << 3;
            s.ack = (syncookie::cookie(key, &t, period, 6) ^ flip).wrapping_add(1);
            let f = s.frame(ma, mb);
            // A full queue (ENOBUFS) is waited out: only frames actually sent are counted,
            // so the drop count stays exact.
            loop {
                match tx.send(&f) {
                    Ok(n) => {
                        assert_eq!(n, f.len(), "sendto: a short write");
                        break;
                    }
                    Err(libc::ENOBUFS) => std::thread::sleep(Duration::from_micros(200)),
                    Err(e) => panic!("sendto: errno {e}"),
                }
            }
            sent += 1;
            if i % 64 == 63 {
                std::thread::sleep(Duration::from_micros(500));
            }
        }
        sent
    })
    .unwrap();
    echo_once(bed.ns_a(), SocketAddr::new(IpAddr::V4(b4), PORT), b"after the ACK flood");
    let rep = srv.finish();
    let c = &rep.counters;
    assert_eq!(sent, N);
    assert_eq!(c["syncookie_ack_bad"], u64::from(N), "every spoofed ACK dropped and counted: {c:?}");
    assert_eq!(c["syncookie_reqsk"], 1, "the client's connection, and nothing from the flood: {c:?}");
    assert_eq!(c["syncookie_ack_ok"], 1, "{c:?}");
    assert_eq!(c["syncookie_tc_fail"], 0, "{c:?}");
    bed.down().unwrap();
}

/// Adds `addr` (with its prefix, and `ip addr` arguments after it) to the server's interface.
fn add_server_addr(bed: &Testbed, args: &[&str]) {
    let mut cmd = fastpath_testbed::ns_command(bed.ns_b(), "ip");
    cmd.args(["addr", "add"]).args(args).args(["dev", bed.iface_b()]);
    assert!(cmd.status().unwrap().success(), "ip addr add {args:?}");
}

/// A header kind of [`segments_behind_extension_headers_and_fragments`]: its name, and what
/// puts it on a segment.
type HeaderKind = (&'static str, fn(&mut Seg));

/// Segments behind headers the cookie path does not read (an IPv6 Destination Options or
/// Fragment header, IPv4 AH, an IPv4 first fragment) pass when their tuple is a connection the
/// kernel holds (`syncookie_conn`) and are dropped otherwise (`syncookie_invalid`), even with a
/// valid cookie (which the same ACK without the header proves): no header or fragment takes an
/// ACK past the cookie check. A later IPv4 fragment (no ports) does not match the rule: the
/// default decides it. Exact counters. BPF_PROG_TEST_RUN in the server's namespace, which holds
/// both ends of one IPv4 and one IPv6 connection (this kernel has no AH, CONFIG_INET_AH unset,
/// so AH is crafted only).
#[test]
fn segments_behind_extension_headers_and_fragments() {
    let Some((_g, bed)) = serial_bed("segments_behind_extension_headers_and_fragments") else {
        return;
    };
    let ((_, b4, _, b6), (ma, mb)) = endpoints(&bed);
    add_server_addr(&bed, &["10.99.0.77/32"]);
    add_server_addr(&bed, &["fd99::77/128", "nodad"]);
    fastpath_testbed::run_in_netns(bed.ns_b(), move || {
        let (o4, o6): (IpAddr, IpAddr) = ("10.99.0.77".parse().unwrap(), "fd99::77".parse().unwrap());
        let l4 = TcpListener::bind(SocketAddr::new(b4, PORT)).unwrap();
        let l6 = TcpListener::bind(SocketAddr::new(b6, PORT)).unwrap();
        let c4 = socket2_connect(o4, SocketAddr::new(b4, PORT));
        let _s4 = l4.accept().unwrap();
        let c6 = socket2_connect(o6, SocketAddr::new(b6, PORT));
        let _s6 = l6.accept().unwrap();
        let (p4, p6) = (c4.local_addr().unwrap().port(), c6.local_addr().unwrap().port());
        let cls = Classifier::load().unwrap_or_else(|e| panic!("{e:#}"));
        let set = cls.swap_in(&compile("t", &parse_toml("t", RULES).unwrap()).unwrap()).unwrap();
        let key = cls.syncookie_key().unwrap();
        away_from_period_edge();
        let period = syncookie::period_now();
        let run = |what: &str, s: &Seg| cls.test_run_out(&s.frame(ma, mb)).unwrap_or_else(|e| panic!("{what}: {e}")).0;
        // The four header kinds, applied to a segment.
        let kinds: [HeaderKind; 4] = [
            ("IPv6 Destination Options", |s| s.v6_ext = Some(60)),
            ("IPv6 Fragment header, first fragment", |s| s.v6_ext = Some(44)),
            ("IPv4 AH", |s| s.ah = true),
            ("IPv4 first fragment", |s| {
                s.more_frags = true;
                s.payload = vec![0x42; 64];
            }),
        ];
        let v6_kind = |what: &str| what.starts_with("IPv6");

        // The connections' data segments behind each header: passed to the kernel.
        for (what, apply) in &kinds {
            let mut s = if v6_kind(what) { Seg::new(o6, b6, p6, ACK | 0x08) } else { Seg::new(o4, b4, p4, ACK | 0x08) };
            s.seq = 0x7000_0001;
            s.ack = 0x0900_0001;
            apply(&mut s);
            assert_eq!(run(what, &s), 2, "{what}: a live connection's segment passes (XDP_PASS)");
        }
        // ACKs without a connection but with a valid cookie: behind a header dropped, plain passed.
        let mut sport = 45000;
        let mut plain_ok = 0;
        for (what, apply) in &kinds {
            let (src, dst) = if v6_kind(what) { (o6, b6) } else { (o4, b4) };
            let mut s = Seg::new(src, dst, sport, ACK);
            s.seq = 0x0101_0102;
            s.ack = syncookie::cookie(key, &CookieTuple { isn: 0x0101_0101, ..s.tuple() }, period, 6).wrapping_add(1);
            assert_eq!(run(what, &s), 2, "{what}: the cookie is valid without the header");
            plain_ok += 1;
            s.sport += 1;
            s.ack = syncookie::cookie(key, &CookieTuple { isn: 0x0101_0101, ..s.tuple() }, period, 6).wrapping_add(1);
            apply(&mut s);
            assert_eq!(run(what, &s), 1, "{what}: no connection, so dropped (XDP_DROP) despite a valid cookie");
            sport += 2;
        }
        // A later IPv4 fragment: no ports, so not the rule's; default "pass".
        let mut later = Seg::new(o4, b4, 0, 0);
        later.frag_units = 185;
        later.payload = vec![0x42; 64];
        assert_eq!(run("a later fragment", &later), 2, "a later fragment gets the default (pass)");

        let c = counters(&cls, set);
        assert_eq!(c["syncookie_conn"], 4, "the connections' segments: {c:?}");
        assert_eq!(c["syncookie_invalid"], 4, "headers without a connection: {c:?}");
        assert_eq!(c["syncookie_ack_ok"], plain_ok, "{c:?}");
        assert_eq!((c["syncookie_ack_bad"], c["syncookie_synack"]), (0, 0), "{c:?}");
        assert_eq!(c["no_match"], 1, "the later fragment did not match the rule: {c:?}");
        assert_eq!(cls.rule_counters(set, 1).unwrap()[0].0, 8 + plain_ok, "{c:?}");
    })
    .unwrap();
    bed.down().unwrap();
}

/// `n` echo round trips of `msg` on `c` (connected to the echo server); panics naming the
/// round trip where the echo stalled (5 s).
fn round_trips(c: &mut TcpStream, msg: &[u8], n: usize) {
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = vec![0u8; msg.len()];
    for i in 0..n {
        c.write_all(msg).unwrap_or_else(|e| panic!("round trip {i} of {n}: write: {e}"));
        c.read_exact(&mut buf).unwrap_or_else(|e| panic!("round trip {i} of {n}: the echo stalled: {e}"));
        assert_eq!(buf, msg, "round trip {i}");
    }
}

/// An established IPv6 connection through the rule whose client then puts a Destination
/// Options header (IPV6_DSTOPTS, one PadN option) before every segment keeps flowing: 100 echo
/// round trips, its segments counted `syncookie_conn`, none `syncookie_invalid`.
#[test]
fn ipv6_connection_with_destination_options_keeps_flowing() {
    let Some((_g, bed)) = serial_bed("ipv6_connection_with_destination_options_keeps_flowing") else {
        return;
    };
    let srv = start_server(&bed, true, XdpMode::Native);
    let to = SocketAddr::new(IpAddr::V6(bed.ip6_b()), PORT);
    fastpath_testbed::run_in_netns(bed.ns_a(), move || {
        let mut c = TcpStream::connect_timeout(&to, Duration::from_secs(5)).unwrap();
        round_trips(&mut c, b"before the header", 1);
        // Next header (the kernel fills it), length 0 (8 bytes), PadN (type 1) of 4 bytes.
        let opt: [u8; 8] = [0, 0, 1, 4, 0, 0, 0, 0];
        // SAFETY: opt is an 8-byte buffer, as the length says.
        let rc =
            unsafe { libc::setsockopt(c.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_DSTOPTS, opt.as_ptr().cast(), 8) };
        assert_eq!(rc, 0, "setsockopt(IPV6_DSTOPTS): {}", std::io::Error::last_os_error());
        round_trips(&mut c, b"behind a destination options header", 100);
    })
    .unwrap();
    let rep = srv.finish();
    let c = &rep.counters;
    assert_eq!(c["syncookie_invalid"], 0, "{c:?}");
    assert!(c["syncookie_conn"] >= 100, "the connection's segments passed: {c:?}");
    bed.down().unwrap();
}

/// `Ip: ReasmOKs` of namespace `ns` (/proc/net/snmp): datagrams IPv4 reassembled there.
fn reasm_oks(ns: &str) -> u64 {
    let out = fastpath_testbed::ns_command(ns, "cat").arg("/proc/net/snmp").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut ip = text.lines().filter(|l| l.starts_with("Ip: "));
    let (names, values) = (ip.next().unwrap(), ip.next().unwrap());
    let i = names.split_whitespace().position(|n| n == "ReasmOKs").unwrap();
    values.split_whitespace().nth(i).unwrap().parse().unwrap()
}

/// An IPv4 connection through the rule whose client's segments arrive fragmented keeps flowing:
/// the client's veth has MTU 1000 under a locked route MTU of 1500 (TCP sends up to the
/// SYN-ACK's MSS, 1460) and its socket IP_PMTUDISC_OMIT (no DF), so IP fragments each 1400-byte
/// write; the server routes back with MTU 1000. 100 echo round trips; the server reassembled at
/// least 100 datagrams; no segment counted `syncookie_invalid`. The first fragment carries the
/// ports and finds the connection; the later ones have no ports and get the default (pass).
#[test]
fn fragmented_ipv4_connection_keeps_flowing() {
    let Some((_g, bed)) = serial_bed("fragmented_ipv4_connection_keeps_flowing") else {
        return;
    };
    let (a4, b4) = (bed.ip4_a().to_string(), bed.ip4_b().to_string());
    for (ns, args) in [
        (bed.ns_a(), vec!["link", "set", "dev", bed.iface_a(), "mtu", "1000"]),
        (bed.ns_a(), vec!["route", "add", &b4, "dev", bed.iface_a(), "mtu", "lock", "1500"]),
        (bed.ns_b(), vec!["route", "add", &a4, "dev", bed.iface_b(), "mtu", "1000"]),
    ] {
        assert!(fastpath_testbed::ns_command(ns, "ip").args(&args).status().unwrap().success(), "ip {args:?}");
    }
    let srv = start_server(&bed, true, XdpMode::Native);
    let before = reasm_oks(bed.ns_b());
    let to = SocketAddr::new(IpAddr::V4(bed.ip4_b()), PORT);
    fastpath_testbed::run_in_netns(bed.ns_a(), move || {
        let mut c = TcpStream::connect_timeout(&to, Duration::from_secs(5)).unwrap();
        let omit = libc::IP_PMTUDISC_OMIT;
        // SAFETY: omit is a c_int, as IP_MTU_DISCOVER takes.
        let rc = unsafe {
            libc::setsockopt(c.as_raw_fd(), libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, (&omit as *const i32).cast(), 4)
        };
        assert_eq!(rc, 0, "setsockopt(IP_MTU_DISCOVER): {}", std::io::Error::last_os_error());
        round_trips(&mut c, &[0x5a; 1400], 100);
    })
    .unwrap();
    let rep = srv.finish();
    let reassembled = reasm_oks(bed.ns_b()) - before;
    let c = &rep.counters;
    assert!(reassembled >= 100, "the client's segments arrived fragmented: {reassembled} reassembled");
    assert_eq!(c["syncookie_invalid"], 0, "{c:?}");
    assert!(c["syncookie_conn"] >= 100, "the first fragments passed as the connection's: {c:?}");
    bed.down().unwrap();
}

/// SYNs the kernel drops for their checksum or their destination are not answered: a bad TCP
/// checksum (IPv4 and IPv6; the checksum field or a payload byte changed), an IPv4 destination
/// that is a subnet broadcast address of the namespace (the /24's, a secondary /25's computed
/// one and its `brd`), each XDP_DROP and `syncookie_invalid`, exactly; SYNs with right
/// checksums (payloads of 0..3, 65 and 1001 bytes) and to the secondary unicast address are
/// answered. An address added after the attach counts from the next swap (as at a reload).
#[test]
fn syns_with_a_bad_checksum_or_to_a_subnet_broadcast_are_not_answered() {
    let Some((_g, bed)) = serial_bed("syns_with_a_bad_checksum_or_to_a_subnet_broadcast_are_not_answered") else {
        return;
    };
    let ((a4, b4, a6, b6), (ma, mb)) = endpoints(&bed);
    add_server_addr(&bed, &["10.99.0.130/25", "brd", "10.99.0.200"]);
    let (ns_b, ifc) = (bed.ns_b().to_string(), bed.iface_b().to_string());
    fastpath_testbed::run_in_netns(bed.ns_b(), move || {
        let dev = fastpath::netdev::Iface::resolve(&ifc).unwrap();
        let cls = Classifier::load().unwrap_or_else(|e| panic!("{e:#}"));
        let rules = compile("t", &parse_toml("t", RULES).unwrap()).unwrap();
        cls.swap_in(&rules).unwrap();
        let cls = cls
            .attach(&dev, fastpath::bpf::AttachOpts::mode(Some(XdpMode::Native)))
            .unwrap_or_else(|e| panic!("{e:#}"))
            .prog;
        let set = cls.active().unwrap();
        let counters = |set| -> std::collections::HashMap<&'static str, u64> {
            cls.totals(set).unwrap().counters.iter().map(|c| (c.0, c.1)).collect()
        };
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let syn = |src: IpAddr, dst: IpAddr, sport: u16, payload: usize| {
            let mut s = Seg::new(src, dst, sport, SYN);
            s.opts = linux_syn_opts(1460, 1);
            s.payload = (0..payload).map(|i| (i * 7 + 1) as u8).collect();
            s
        };
        let rc = |f: &[u8]| cls.test_run(f).unwrap();
        let mut sport = 46000;
        let (mut answered, mut invalid) = (0u64, 0u64);
        for n in [0usize, 1, 2, 3, 65, 1001] {
            for (src, dst) in [(a4, b4), (a6, b6)] {
                let s = syn(src, dst, sport, n);
                sport += 1;
                let f = s.frame(ma, mb);
                assert_eq!(rc(&f), 3, "{src}, payload {n}: a right checksum is answered (XDP_TX)");
                answered += 1;
                let l4 = if src.is_ipv6() { 54 } else { 34 };
                let mut bad = f.clone();
                bad[l4 + 16] ^= 0x01;
                assert_eq!(rc(&bad), 1, "{src}, payload {n}: checksum field changed (XDP_DROP)");
                invalid += 1;
                if n > 0 {
                    let last = l4 + 20 + s.opts.len().next_multiple_of(4) + n - 1;
                    let mut bad = f.clone();
                    bad[last] ^= 0x10;
                    assert_eq!(rc(&bad), 1, "{src}, payload {n}: last payload byte changed (XDP_DROP)");
                    invalid += 1;
                }
            }
        }
        // The checksum field holding only the pseudo header's sum (a local sender's
        // CHECKSUM_PARTIAL, as a veth delivers it): answered, as the kernel takes it there.
        let partial = |src: IpAddr, dst: IpAddr, sport: u16| {
            let s = syn(src, dst, sport, 5);
            let mut f = s.frame(ma, mb);
            let (l4, pseudo) = match (src, dst) {
                (IpAddr::V4(x), IpAddr::V4(y)) => (34, sum16(&x.octets(), sum16(&y.octets(), 6))),
                (IpAddr::V6(x), IpAddr::V6(y)) => (54, sum16(&x.octets(), sum16(&y.octets(), 6))),
                _ => unreachable!(),
            };
            let tlen = (f.len() - l4) as u64;
            f[l4 + 16..l4 + 18].copy_from_slice(&fold(pseudo + tlen).to_be_bytes());
            f
        };
        for (src, dst) in [(a4, b4), (a6, b6)] {
            assert_eq!(rc(&partial(src, dst, sport)), 3, "{src}: a partial checksum is answered");
            sport += 1;
            answered += 1;
        }
        for dst in ["10.99.0.255", "10.99.0.200"] {
            assert_eq!(rc(&syn(a4, ip(dst), 47000, 0).frame(ma, mb)), 1, "to the broadcast {dst}: XDP_DROP");
            invalid += 1;
        }
        assert_eq!(rc(&syn(a4, ip("10.99.0.130"), 47001, 0).frame(ma, mb)), 3, "to 10.99.0.130: answered");
        answered += 1;
        let late = syn(a4, ip("10.99.0.127"), 47002, 0).frame(ma, mb);
        assert_eq!(rc(&late), 3, "10.99.0.127 is no broadcast address yet: answered");
        answered += 1;
        let c = counters(set);
        assert_eq!((c["syncookie_synack"], c["syncookie_invalid"]), (answered, invalid), "{c:?}");
        assert_eq!(c["syncookie_conn"], 0, "{c:?}");

        let add = fastpath_testbed::ns_command(&ns_b, "ip")
            .args(["addr", "add", "10.99.0.66/26", "dev", &ifc])
            .status()
            .unwrap();
        assert!(add.success());
        let set2 = cls.swap_in(&rules).unwrap();
        assert_eq!(rc(&late), 1, "after the swap 10.99.0.127 is a broadcast address: XDP_DROP");
        let c = counters(set2);
        assert_eq!((c["syncookie_synack"], c["syncookie_invalid"]), (0, 1), "{c:?}");
    })
    .unwrap();
    bed.down().unwrap();
}
