//! Seeded random rule sets and frames for the classifier's differential tests.
#![allow(dead_code)]

use fastpath::rules::{parse_toml, RuleSet};

/// splitmix64: small, seeded, reproducible.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

const V4_PREFIXES: &[&str] =
    &["10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.2.3/32", "192.168.0.0/16", "0.0.0.0/0"];
const V6_PREFIXES: &[&str] = &["fd00::/8", "fd00:1::/32", "fd00:1::5/128", "::/0"];
const PORTS: &[&str] = &["53", "80", "\"1000-2000\"", "\"1500-1600\"", "\"5000-5999\"", "\"0-1023\""];
const FLAGS: &[&str] = &["syn", "syn,!ack", "!syn", "ack", "fin,!rst", "rst"];
const LENS: &[&str] = &[
    "\"60-64\"",
    "\"64-128\"",
    "\"100-1500\"",
    "64",
    "\"3000-9000\"",
    "\"1515-65535\"",
    "\"60-3520\"",
    "\"3521-9100\"",
];

/// A random, valid rule set of 1..=max_rules rules with every action (drop, pass, tx, xsk,
/// cpu on CPU 0, redirect to `lo`), some with rate limits too high to bite, a random default
/// and a random (or absent) `malformed` setting.
pub fn rule_set(r: &mut Rng, max_rules: u64) -> (String, RuleSet) {
    loop {
        let n = 1 + r.below(max_rules);
        let mut t = format!("default = \"{}\"\n", r.pick(&["drop", "pass", "tx", "xsk"]));
        match r.below(3) {
            0 => t.push_str("malformed = \"drop\"\n"),
            1 => t.push_str("malformed = \"pass\"\n"),
            _ => {}
        }
        for _ in 0..n {
            t.push_str("[[rule]]\n");
            if r.chance(30) {
                t.push_str(&format!("priority = {}\n", r.below(5)));
            }
            let v6 = r.chance(30);
            if r.chance(15) {
                t.push_str(&format!("vlan = {}\n", r.pick(&[10, 20])));
            }
            if r.chance(10) {
                t.push_str(&format!("eth_type = \"{}\"\n", if v6 { "ipv6" } else { r.pick(&["ipv4", "arp"]) }));
            }
            let pre = if v6 { V6_PREFIXES } else { V4_PREFIXES };
            if r.chance(40) {
                t.push_str(&format!("src = \"{}\"\n", r.pick(pre)));
            }
            if r.chance(30) {
                t.push_str(&format!("dst = \"{}\"\n", r.pick(pre)));
            }
            let proto = if r.chance(50) { Some(*r.pick(&["tcp", "udp", "icmp", "47"])) } else { None };
            if let Some(p) = proto {
                if p == "47" {
                    t.push_str("proto = 47\n");
                } else {
                    t.push_str(&format!("proto = \"{p}\"\n"));
                }
            }
            let l4ok = matches!(proto, None | Some("tcp") | Some("udp"));
            let mut has_l4 = false;
            if l4ok && r.chance(35) {
                t.push_str(&format!("dst_port = {}\n", r.pick(PORTS)));
                has_l4 = true;
            }
            if l4ok && r.chance(15) {
                t.push_str(&format!("src_port = {}\n", r.pick(PORTS)));
                has_l4 = true;
            }
            if matches!(proto, None | Some("tcp")) && r.chance(20) {
                t.push_str(&format!("tcp_flags = \"{}\"\n", r.pick(FLAGS)));
                has_l4 = true;
            }
            if r.chance(15) {
                t.push_str(&format!("len = {}\n", r.pick(LENS)));
            }
            if r.chance(15) {
                let f = if has_l4 { *r.pick(&["none", "first"]) } else { *r.pick(&["none", "first", "later"]) };
                t.push_str(&format!("frag = \"{f}\"\n"));
            }
            match *r.pick(&["drop", "pass", "tx", "xsk", "cpu", "redirect"]) {
                "cpu" => t.push_str("action = \"cpu\"\ncpus = [0]\n"),
                "redirect" => t.push_str("action = \"redirect\"\niface = \"lo\"\n"),
                a => t.push_str(&format!("action = \"{a}\"\n")),
            }
            // Rate limits exercise the program's buckets without ever biting in a test run.
            if r.chance(10) {
                t.push_str("rate = 1000000000\n");
            }
            if r.chance(10) {
                t.push_str("rate_total = 1000000000\n");
            }
        }
        // Retry sets the compiler refuses (more distinct field combinations than it holds).
        if let Ok(set) = parse_toml("random", &t) {
            if fastpath::rules::compile::compile("random", &set).is_ok() {
                return (t, set);
            }
        }
    }
}

fn addr4(r: &mut Rng) -> [u8; 4] {
    match r.below(4) {
        0 => [10, 1, 2, 3],
        1 => [10, 1, 2, r.below(256) as u8],
        2 => [10, r.below(3) as u8, r.below(256) as u8, 9],
        _ => [192, 168, r.below(256) as u8, r.below(256) as u8],
    }
}

fn addr6(r: &mut Rng) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[0] = 0xfd;
    match r.below(3) {
        0 => {
            a[3] = 1;
            a[15] = 5;
        }
        1 => {
            a[3] = 1;
            a[15] = r.below(256) as u8;
        }
        _ => a[1..].iter_mut().for_each(|b| *b = r.below(256) as u8),
    }
    a
}

fn port(r: &mut Rng) -> u16 {
    let any = r.below(65536) as u16;
    *r.pick(&[53, 80, 999, 1000, 1550, 2000, 2001, 5000, 5999, 6000, 1023, 0, any])
}

/// A random frame: VLAN tags, IPv4 (with options, fragments) or IPv6 (with extension headers),
/// TCP/UDP/ICMP/other, and ~30% of them damaged (truncated anywhere, bad IHL, lengths that lie).
pub fn frame(r: &mut Rng) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    // Up to three VLAN tags (the parser reads two; a third is malformed).
    for _ in 0..r.below(4).saturating_sub(u64::from(r.chance(50))) {
        let tpid: u16 = if r.chance(50) { 0x8100 } else { 0x88a8 };
        f.extend_from_slice(&tpid.to_be_bytes());
        let id = *r.pick(&[10u16, 20, 30]);
        f.extend_from_slice(&(id | 0x2000).to_be_bytes());
    }
    let kind = r.below(10);
    let proto = *r.pick(&[6u8, 6, 17, 17, 1, 58, 47]);
    let mut l4 = Vec::new();
    match proto {
        6 => {
            l4.extend_from_slice(&port(r).to_be_bytes());
            l4.extend_from_slice(&port(r).to_be_bytes());
            l4.extend_from_slice(&[0; 8]);
            l4.push(0x50);
            l4.push(r.below(256) as u8);
            l4.extend_from_slice(&[0; 6]);
        }
        17 => {
            l4.extend_from_slice(&port(r).to_be_bytes());
            l4.extend_from_slice(&port(r).to_be_bytes());
            l4.extend_from_slice(&[0, 8, 0, 0]);
        }
        _ => l4.extend_from_slice(&[8, 0, 0, 0, 0, 0, 0, 0]),
    }
    // Some frames are larger than one page: BPF_PROG_TEST_RUN then hands the (frags-aware)
    // program a multi-buffer frame, the first buffer 3,520 bytes (4096 less headroom and
    // skb_shared_info), the rest in further buffers, as a jumbo-MTU driver does.
    let pad = if r.chance(8) { 3_400 + r.below(5_700) } else { r.below(40) };
    l4.extend(std::iter::repeat_n(0u8, pad as usize));
    // Tiny L4 headers in well-formed IP packets (a first fragment of one is a bad fragment).
    if r.chance(10) {
        let keep = r.below(l4.len() as u64) as usize;
        l4.truncate(keep);
    }
    if kind < 6 {
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        let opts = if r.chance(20) { 4 * (1 + r.below(3) as usize) } else { 0 };
        let ihl = 20 + opts;
        let total = ihl + l4.len();
        let fo: u16 = match r.below(6) {
            0 => 0x2000,
            1 => 0x2000 | (1 + r.below(100) as u16),
            2 => 1 + r.below(100) as u16,
            3 => 0x4000,
            _ => 0,
        };
        // An Authentication Header (RFC 4302) before the L4 header, now and then two.
        let mut ah = Vec::new();
        let n_ah = if r.chance(12) { 1 + u64::from(r.chance(20)) } else { 0 };
        let mut ip_proto = proto;
        for _ in 0..n_ah {
            // Length in 4-byte words minus 2: 24 bytes usually, now and then too long to fit.
            let words: u8 = if r.chance(10) { 200 } else { 4 };
            let mut h = vec![ip_proto, words, 0, 0];
            h.extend(std::iter::repeat_n(0u8, (usize::from(words) + 2) * 4 - 4));
            h.extend_from_slice(&ah);
            ah = h;
            ip_proto = 51;
        }
        let total = total + ah.len();
        f.push(0x40 | (ihl / 4) as u8);
        f.push(0);
        f.extend_from_slice(&(total as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&fo.to_be_bytes());
        f.push(64);
        f.push(ip_proto);
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&addr4(r));
        f.extend_from_slice(&addr4(r));
        f.extend(std::iter::repeat_n(1u8, opts));
        f.extend_from_slice(&ah);
        f.extend_from_slice(&l4);
    } else if kind < 9 {
        f.extend_from_slice(&0x86ddu16.to_be_bytes());
        let mut ext = Vec::new();
        let mut nh_chain = Vec::new();
        // Chains of 0..=10 extension headers: the parser walks 8.
        let n_ext = if r.chance(30) { 5 + r.below(6) } else { r.below(5) };
        for _ in 0..n_ext {
            let h = *r.pick(&[0u8, 43, 60, 44, 51]);
            nh_chain.push(h);
        }
        let mut payload = Vec::new();
        for (i, h) in nh_chain.iter().enumerate() {
            let next = nh_chain.get(i + 1).copied().unwrap_or(if proto == 1 { 58 } else { proto });
            match h {
                44 => {
                    let fo: u16 = match r.below(3) {
                        0 => 1,
                        1 => (1 + r.below(100) as u16) << 3,
                        _ => 0,
                    };
                    payload.extend_from_slice(&[next, 0]);
                    payload.extend_from_slice(&fo.to_be_bytes());
                    payload.extend_from_slice(&[0, 0, 0, 1]);
                }
                51 => {
                    payload.extend_from_slice(&[next, 1]);
                    payload.extend_from_slice(&[0; 10]);
                }
                _ => {
                    // Now and then a long one (up to 2,048 bytes): two or three push the L4
                    // header past the first buffer of a multi-buffer frame.
                    let units: u8 = if r.chance(15) { 150 + r.below(106) as u8 } else { 0 };
                    payload.extend_from_slice(&[next, units]);
                    payload.extend(std::iter::repeat_n(0u8, usize::from(units) * 8 + 6));
                }
            }
        }
        ext.extend_from_slice(&payload);
        let first = nh_chain.first().copied().unwrap_or(if proto == 1 { 58 } else { proto });
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&((ext.len() + l4.len()) as u16).to_be_bytes());
        f.push(first);
        f.push(64);
        f.extend_from_slice(&addr6(r));
        f.extend_from_slice(&addr6(r));
        f.extend_from_slice(&ext);
        f.extend_from_slice(&l4);
    } else {
        f.extend_from_slice(&0x0806u16.to_be_bytes());
        f.extend_from_slice(&[0; 28]);
    }
    // Damage.
    match r.below(20) {
        0..=2 => {
            let n = r.below(f.len() as u64) as usize;
            f.truncate(n);
        }
        3 => {
            if let Some(i) = f.windows(2).position(|w| w == [0x08, 0x00]) {
                if i + 2 < f.len() {
                    f[i + 2] = 0x40 | r.below(5) as u8;
                }
            }
        }
        4 => {
            if let Some(i) = f.windows(2).position(|w| w == [0x08, 0x00] || w == [0x86, 0xdd]) {
                let o = if f[i] == 0x08 { i + 4 } else { i + 6 };
                if o + 1 < f.len() {
                    f[o] = 0xff;
                }
            }
        }
        5 => f.extend(std::iter::repeat_n(0u8, r.below(30) as usize)),
        _ => {}
    }
    f
}
