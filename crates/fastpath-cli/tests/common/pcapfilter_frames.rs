//! Crafted frames and pcap-filter expressions of the `fastpath capture EXPRESSION` tests: the
//! unit test of the translation (src/pcap_expr.rs includes this file) and the differential
//! test against tcpdump (tests/capture_filter.rs). Addresses of the test beds (10.99.0.0/24,
//! fd99::/64), to a unicast MAC address no interface has, so no stack answers them.
#![allow(dead_code)]

/// Expressions of the differential test: wholly at the driver, partly, wholly after the copy,
/// with `not`, and the `port`/`host` subtleties (tcp, udp and sctp; both directions; ARP).
pub const EXPRESSIONS: &[&str] = &[
    "udp port 53 and host 10.99.0.1",
    "port 53",
    "dst host 10.99.0.2",
    "ip6",
    "not port 53",
    "not ip",
    "tcp[tcpflags] & tcp-syn != 0",
    "tcp port 80 and tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn",
    "vlan 100 and udp",
    "net 10.99.0.0/30 and not udp",
    "portrange 5000-5100 or icmp6",
    "host fd99::2 and (tcp or udp)",
    "greater 1000 or ip6 host fd99::1",
    "src and dst host 10.99.0.4",
    "not (host 10.99.0.1 or arp)",
];

/// More expressions for the unit test only.
pub const UNIT_EXPRESSIONS: &[&str] = &[
    "src port 53",
    "arp or icmp",
    "ip or arp",
    "host 10.99.0.1 or 10.99.0.5",
    "tcp port 80 or 443",
    "vlan",
    "not vlan",
    "udp or not tcp",
    "ip and not (udp or tcp)",
    "len < 100",
    "icmp or vlan 200",
    "sctp port 53",
    "ip src 10.99.0.1",
    "dst port 53 or src port 53 and udp",
    "port 53 or arp",
    "not dst net fd99::/120",
    "ether proto 0x88b5",
    "tcp src port 80 || !udp && ip",
    "rarp or ip6 net fd99::/64",
    "(tcp[13] & 2) != 0 and ip",
    "host (10.99.0.1 or 10.99.0.2)",
    "udp and (ip[6:2] & 0x1fff) != 0",
];

const DST_MAC: [u8; 6] = [0x0a, 0xbb, 0xcc, 0xdd, 0xee, 0x02];
const SRC_MAC: [u8; 6] = [0x0a, 0xbb, 0xcc, 0xdd, 0xee, 0x01];

fn eth(tags: &[(u16, u16)], ethertype: u16) -> Vec<u8> {
    let mut f = DST_MAC.to_vec();
    f.extend_from_slice(&SRC_MAC);
    for (tpid, id) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&id.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

fn v4(s: u8, d: u8) -> ([u8; 4], [u8; 4]) {
    ([10, 99, 0, s], [10, 99, 0, d])
}

fn v6(s: u8, d: u8) -> ([u8; 16], [u8; 16]) {
    let mut a = [0u8; 16];
    a[0] = 0xfd;
    a[1] = 0x99;
    let mut b = a;
    a[15] = s;
    b[15] = d;
    (a, b)
}

fn udp(sp: u16, dp: u16, payload: usize) -> Vec<u8> {
    let mut h = sp.to_be_bytes().to_vec();
    h.extend_from_slice(&dp.to_be_bytes());
    h.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend((0..payload).map(|i| (i * 7) as u8));
    h
}

fn tcp(sp: u16, dp: u16, flags: u8, payload: usize) -> Vec<u8> {
    let mut h = sp.to_be_bytes().to_vec();
    h.extend_from_slice(&dp.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    h.extend((0..payload).map(|i| (i * 13) as u8));
    h
}

fn icmp(ty: u8, payload: usize) -> Vec<u8> {
    let mut h = vec![ty, 0, 0, 0, 0, 1, 0, 1];
    h.extend((0..payload).map(|i| i as u8));
    h
}

/// An IPv4 packet: `frag` is the flags + offset field, `opts` the option bytes (a multiple of 4).
fn ipv4(tags: &[(u16, u16)], addrs: ([u8; 4], [u8; 4]), proto: u8, frag: u16, opts: &[u8], l4: &[u8]) -> Vec<u8> {
    let mut f = eth(tags, 0x0800);
    let ihl = 20 + opts.len();
    let total = (ihl + l4.len()) as u16;
    f.extend_from_slice(&[0x40 | (ihl / 4) as u8, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0x12, 0x34]);
    f.extend_from_slice(&frag.to_be_bytes());
    f.extend_from_slice(&[64, proto, 0, 0]);
    f.extend_from_slice(&addrs.0);
    f.extend_from_slice(&addrs.1);
    f.extend_from_slice(opts);
    f.extend_from_slice(l4);
    f
}

/// An IPv6 packet: `next` the first next header, `rest` the extension headers and L4 bytes.
fn ipv6(addrs: ([u8; 16], [u8; 16]), next: u8, rest: &[u8]) -> Vec<u8> {
    let mut f = eth(&[], 0x86dd);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(rest.len() as u16).to_be_bytes());
    f.extend_from_slice(&[next, 64]);
    f.extend_from_slice(&addrs.0);
    f.extend_from_slice(&addrs.1);
    f.extend_from_slice(rest);
    f
}

fn arp(tags: &[(u16, u16)], ethertype: u16, op: u16, spa: u8, tpa: u8) -> Vec<u8> {
    let mut f = eth(tags, ethertype);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4]);
    f.extend_from_slice(&op.to_be_bytes());
    f.extend_from_slice(&SRC_MAC);
    f.extend_from_slice(&[10, 99, 0, spa]);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&[10, 99, 0, tpa]);
    f
}

/// Pads to the Ethernet minimum (60 bytes without the FCS), as a NIC sends it.
fn pad(mut f: Vec<u8>) -> Vec<u8> {
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const FIN: u8 = 0x01;
const MF: u16 = 0x2000;

/// The frames, each with a name: IPv4/IPv6 TCP/UDP/ICMP/ICMPv6, SCTP, ARP and RARP, 802.1Q,
/// 802.1ad and 0x9100 tags, IPv4 first and later fragments (and a tiny first one), IPv4
/// options and an Authentication Header, IPv6 hop-by-hop and fragment headers, a malformed
/// IPv4 header, port 53 in both directions, SYN, SYN-ACK, ACK, FIN, 42 to 1514 bytes; no two
/// alike.
pub fn sample_frames() -> Vec<(&'static str, Vec<u8>)> {
    let mut v: Vec<(&'static str, Vec<u8>)> = vec![
        ("v4 udp dns query", pad(ipv4(&[], v4(1, 2), 17, 0, &[], &udp(40000, 53, 30)))),
        ("v4 udp dns reply", ipv4(&[], v4(2, 1), 17, 0, &[], &udp(53, 40000, 150))),
        ("v4 udp to 9", pad(ipv4(&[], v4(3, 4), 17, 0, &[], &udp(5000, 9, 4)))),
        ("v4 tcp syn", pad(ipv4(&[], v4(1, 2), 6, 0, &[], &tcp(40001, 80, SYN, 0)))),
        ("v4 tcp syn-ack", pad(ipv4(&[], v4(2, 1), 6, 0, &[], &tcp(80, 40001, SYN | ACK, 0)))),
        ("v4 tcp ack 1514", ipv4(&[], v4(1, 2), 6, 0, &[], &tcp(40001, 80, ACK, 1460))),
        ("v4 tcp from 53", pad(ipv4(&[], v4(5, 6), 6, 0, &[], &tcp(53, 1234, ACK, 2)))),
        ("v4 icmp echo", ipv4(&[], v4(1, 2), 1, 0, &[], &icmp(8, 56))),
        ("v4 icmp other", pad(ipv4(&[], v4(7, 1), 1, 0, &[], &icmp(3, 8)))),
        ("v4 udp first fragment", ipv4(&[], v4(1, 2), 17, MF, &[], &udp(40002, 53, 200))),
        ("v4 udp later fragment", ipv4(&[], v4(1, 2), 17, 185, &[], &[0x55; 120])),
        ("v4 tcp later fragment", ipv4(&[], v4(3, 2), 6, 100, &[], &[0x66; 80])),
        ("v4 tcp tiny first fragment", pad(ipv4(&[], v4(1, 2), 6, MF, &[], &tcp(40003, 80, SYN, 0)[..8]))),
        ("v4 ip options udp 53", pad(ipv4(&[], v4(1, 9), 17, 0, &[1, 1, 1, 0], &udp(40004, 53, 10)))),
        ("v4 sctp 53", pad(ipv4(&[], v4(1, 2), 132, 0, &[], &[0x0b, 0xb8, 0, 53, 0, 0, 0, 0, 0, 0, 0, 0]))),
        ("v4 udp 53 both ways", pad(ipv4(&[], v4(4, 4), 17, 0, &[], &udp(53, 53, 12)))),
        ("v4 udp to 5050", pad(ipv4(&[], v4(1, 2), 17, 0, &[], &udp(1000, 5050, 20)))),
        ("v4 tcp fin", pad(ipv4(&[], v4(2, 1), 6, 0, &[], &tcp(80, 40001, FIN | ACK, 0)))),
        ("v4 udp 1400", ipv4(&[], v4(1, 2), 17, 0, &[], &udp(40005, 9, 1372))),
        ("v6 udp dns query", ipv6(v6(1, 2), 17, &udp(40000, 53, 30))),
        ("v6 udp dns reply", ipv6(v6(2, 1), 17, &udp(53, 40000, 300))),
        ("v6 tcp syn 443", ipv6(v6(1, 2), 6, &tcp(40001, 443, SYN, 0))),
        ("v6 tcp from 53", ipv6(v6(5, 2), 6, &tcp(53, 2000, ACK, 100))),
        ("v6 icmp6 echo", ipv6(v6(1, 2), 58, &icmp(128, 32))),
        ("v4 udp to 5100 from 53", pad(ipv4(&[], v4(6, 5), 17, 0, &[], &udp(53, 5100, 2)))),
        ("arp request", arp(&[], 0x0806, 1, 1, 2)),
        ("arp reply", pad(arp(&[], 0x0806, 2, 2, 1))),
        ("rarp", pad(arp(&[], 0x8035, 3, 1, 1))),
        ("vlan 100 v4 udp 53", ipv4(&[(0x8100, 100)], v4(1, 2), 17, 0, &[], &udp(40006, 53, 40))),
        ("vlan 200 v4 tcp syn", pad(ipv4(&[(0x8100, 200)], v4(1, 2), 6, 0, &[], &tcp(40007, 80, SYN, 0)))),
        ("qinq 300/100 v4 udp", ipv4(&[(0x88a8, 300), (0x8100, 100)], v4(1, 2), 17, 0, &[], &udp(40008, 53, 20))),
        ("0x9100 tag 100 v4 udp", ipv4(&[(0x9100, 100)], v4(1, 2), 17, 0, &[], &udp(40009, 53, 20))),
        ("vlan 100 arp", arp(&[(0x8100, 100)], 0x0806, 1, 1, 2)),
        ("unknown ethertype", {
            let mut f = eth(&[], 0x88b5);
            f.extend((0..986).map(|i| (i * 3) as u8));
            f
        }),
    ];
    // IPv4 with an Authentication Header (RFC 4302: next header, length in 4-byte words - 2,
    // reserved, SPI, sequence, 4 bytes of ICV) around UDP to port 53.
    let mut ah = vec![17, 2, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0xaa, 0xbb, 0xcc, 0xdd];
    ah.extend(udp(40010, 53, 10));
    v.push(("v4 ah udp 53", pad(ipv4(&[], v4(8, 2), 51, 0, &[], &ah))));
    // IPv6 hop-by-hop options (8 bytes: next header, length 0, PadN) then UDP to port 53.
    let mut hbh = vec![17, 0, 1, 4, 0, 0, 0, 0];
    hbh.extend(udp(40011, 53, 10));
    v.push(("v6 hop-by-hop udp 53", ipv6(v6(3, 2), 0, &hbh)));
    // IPv6 fragment header, first fragment (offset 0, M set), UDP to port 53.
    let mut fr = vec![17, 0, 0, 1, 0, 0, 0, 7];
    fr.extend(udp(40012, 53, 40));
    v.push(("v6 first fragment udp 53", ipv6(v6(1, 2), 44, &fr)));
    // IPv6 fragment header, a later fragment (offset 64 bytes) of UDP.
    let mut fl = vec![17, 0, 0, 64, 0, 0, 0, 7];
    fl.extend([0x77; 40]);
    v.push(("v6 later fragment udp", ipv6(v6(1, 2), 44, &fl)));
    // IPv4 whose total length says more than the frame holds (malformed to the classifier).
    let mut bad = pad(ipv4(&[], v4(1, 2), 17, 0, &[], &udp(40013, 53, 4)));
    bad[16] = 0x05;
    v.push(("v4 malformed total length", bad));
    v
}
