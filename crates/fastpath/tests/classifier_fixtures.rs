//! Named packet fixtures, one per branch of the classifier's parser and each action, run through
//! the BPF program with BPF_PROG_TEST_RUN: action and counters checked, hexdump on mismatch.

use fastpath::bpf::Classifier;
use fastpath::rules::compile::compile;
use fastpath::rules::parse_toml;
use fastpath::rules::reference::Verdict;

const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;
const XDP_TX: u32 = 3;
const XDP_REDIRECT: u32 = 4;

struct F {
    name: &'static str,
    frame: Vec<u8>,
    action: u32,
    /// "rule N", "no_match" or "malformed"
    counted: &'static str,
}

fn eth(tags: &[(u16, u16)], et: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    for (tpid, id) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&id.to_be_bytes());
    }
    f.extend_from_slice(&et.to_be_bytes());
    f
}

fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, opts: usize, frag: u16, l4: &[u8]) -> Vec<u8> {
    let ihl = 20 + opts;
    let mut h = vec![0x40 | (ihl / 4) as u8, 0];
    h.extend_from_slice(&((ihl + l4.len()) as u16).to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&[64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend(std::iter::repeat_n(1u8, opts));
    h.extend_from_slice(l4);
    h
}

fn ipv6(src: [u8; 16], dst: [u8; 16], first_nh: u8, ext: &[u8], l4: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&((ext.len() + l4.len()) as u16).to_be_bytes());
    h.extend_from_slice(&[first_nh, 64]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(ext);
    h.extend_from_slice(l4);
    h
}

fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut u = sport.to_be_bytes().to_vec();
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&[0, 8, 0, 0]);
    u
}

fn tcp(sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut t = sport.to_be_bytes().to_vec();
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&[0; 8]);
    t.extend_from_slice(&[0x50, flags, 0, 0, 0, 0, 0, 0]);
    t
}

fn cat(a: Vec<u8>, b: Vec<u8>) -> Vec<u8> {
    let mut a = a;
    a.extend(b);
    a
}

const V6A: [u8; 16] = [0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5];
const V6B: [u8; 16] = [0xfd, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];

const RULES: &str = r#"
default = "pass"
[[rule]]   # 0
vlan = 100
action = "drop"
[[rule]]   # 1
eth_type = "arp"
action = "tx"
[[rule]]   # 2
src = "10.1.0.0/16"
proto = "udp"
dst_port = "5000-5999"
action = "xsk"
[[rule]]   # 3
dst = "fd00:2::/32"
proto = "tcp"
tcp_flags = "syn,!ack"
action = "drop"
[[rule]]   # 4
proto = "udp"
src_port = 53
action = "cpu"
cpus = [0]
[[rule]]   # 5
proto = "icmp"
action = "redirect"
iface = "lo"
[[rule]]   # 6
frag = "later"
action = "drop"
[[rule]]   # 7
len = "1000-1500"
action = "tx"
[[rule]]   # 8
proto = 47
action = "drop"
"#;

fn fixtures() -> Vec<F> {
    let u4 = |src, dport| cat(eth(&[], 0x0800), ipv4(src, [10, 99, 0, 2], 17, 0, 0, &udp(1, dport)));
    let mut v = vec![
        F {
            name: "vlan 802.1Q id 100",
            frame: cat(eth(&[(0x8100, 100)], 0x0800), ipv4([1, 1, 1, 1], [2, 2, 2, 2], 17, 0, 0, &udp(1, 2))),
            action: XDP_DROP,
            counted: "rule 0",
        },
        F {
            name: "QinQ outer 802.1ad id 100",
            frame: cat(
                eth(&[(0x88a8, 100), (0x8100, 7)], 0x0800),
                ipv4([1, 1, 1, 1], [2, 2, 2, 2], 17, 0, 0, &udp(1, 2)),
            ),
            action: XDP_DROP,
            counted: "rule 0",
        },
        F {
            name: "QinQ outer id 7 (inner 100 does not count)",
            frame: cat(
                eth(&[(0x88a8, 7), (0x8100, 100)], 0x0800),
                ipv4([1, 1, 1, 1], [2, 2, 2, 2], 17, 0, 0, &udp(1, 2)),
            ),
            action: XDP_PASS,
            counted: "no_match",
        },
        F { name: "arp", frame: cat(eth(&[], 0x0806), vec![0; 28]), action: XDP_TX, counted: "rule 1" },
        F {
            name: "udp to xsk range, src in prefix (no socket: XDP_PASS fallback)",
            frame: u4([10, 1, 9, 9], 5500),
            action: XDP_PASS,
            counted: "rule 2",
        },
        F {
            name: "udp just above the xsk range",
            frame: u4([10, 1, 9, 9], 6000),
            action: XDP_PASS,
            counted: "no_match",
        },
        F { name: "udp src outside prefix", frame: u4([10, 2, 9, 9], 5500), action: XDP_PASS, counted: "no_match" },
        F {
            name: "ipv4 with options, udp to xsk range",
            frame: cat(eth(&[], 0x0800), ipv4([10, 1, 0, 1], [10, 99, 0, 2], 17, 8, 0, &udp(1, 5000))),
            action: XDP_PASS,
            counted: "rule 2",
        },
        F {
            name: "ipv6 tcp syn to fd00:2::/32",
            frame: cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 6, &[], &tcp(1, 80, 0x02))),
            action: XDP_DROP,
            counted: "rule 3",
        },
        F {
            name: "ipv6 tcp syn+ack (flags do not match)",
            frame: cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 6, &[], &tcp(1, 80, 0x12))),
            action: XDP_PASS,
            counted: "no_match",
        },
        F {
            name: "ipv6 hop-by-hop + dest opts + tcp syn",
            frame: cat(
                eth(&[], 0x86dd),
                ipv6(V6A, V6B, 0, &[60, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0], &tcp(1, 80, 0x02)),
            ),
            action: XDP_DROP,
            counted: "rule 3",
        },
        F {
            name: "ipv6 fragment header, first fragment, tcp syn",
            frame: cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 44, &[6, 0, 0, 1, 0, 0, 0, 1], &tcp(1, 80, 0x02))),
            action: XDP_DROP,
            counted: "rule 3",
        },
        F {
            name: "ipv6 later fragment (no L4: frag rule)",
            frame: cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 44, &[6, 0, 0, 0x40, 0, 0, 0, 1], &[0; 8])),
            action: XDP_DROP,
            counted: "rule 6",
        },
        F {
            name: "udp from port 53 to cpu",
            frame: cat(eth(&[], 0x0800), ipv4([3, 3, 3, 3], [4, 4, 4, 4], 17, 0, 0, &udp(53, 1))),
            action: XDP_REDIRECT,
            counted: "rule 4",
        },
        F {
            name: "icmp to redirect",
            frame: cat(eth(&[], 0x0800), ipv4([3, 3, 3, 3], [4, 4, 4, 4], 1, 0, 0, &[8, 0, 0, 0, 0, 0, 0, 0])),
            action: XDP_REDIRECT,
            counted: "rule 5",
        },
        F {
            name: "ipv4 first fragment of udp to xsk range",
            frame: cat(eth(&[], 0x0800), ipv4([10, 1, 0, 1], [10, 99, 0, 2], 17, 0, 0x2000, &udp(1, 5000))),
            action: XDP_PASS,
            counted: "rule 2",
        },
        F {
            name: "ipv4 later fragment: port rule must not match",
            frame: cat(eth(&[], 0x0800), ipv4([10, 1, 0, 1], [10, 99, 0, 2], 17, 0, 0x0003, &udp(1, 5000))),
            action: XDP_DROP,
            counted: "rule 6",
        },
        F {
            name: "gre (proto 47)",
            frame: cat(eth(&[], 0x0800), ipv4([3, 3, 3, 3], [4, 4, 4, 4], 47, 0, 0, &[0; 8])),
            action: XDP_DROP,
            counted: "rule 8",
        },
        F {
            name: "length 1200",
            frame: cat(eth(&[], 0x0800), ipv4([3, 3, 3, 3], [4, 4, 4, 4], 17, 0, 0, &cat(udp(9, 9), vec![0; 1158]))),
            action: XDP_TX,
            counted: "rule 7",
        },
        F {
            name: "unknown ethertype",
            frame: cat(eth(&[], 0x88cc), vec![0; 46]),
            action: XDP_PASS,
            counted: "no_match",
        },
    ];
    // Malformed: every header boundary, and the length fields that lie. The rule set looks at
    // proto and ports, so `malformed` defaults to drop.
    let good4 = u4([10, 1, 9, 9], 5500);
    for (name, cut) in
        [("truncated in ethernet", 13), ("truncated in ipv4 header", 20), ("truncated in udp header", 40)]
    {
        v.push(F { name, frame: good4[..cut.max(14)].to_vec(), action: XDP_DROP, counted: "malformed" });
    }
    let mut ihl4 = good4.clone();
    ihl4[14] = 0x44;
    v.push(F { name: "ipv4 IHL 4", frame: ihl4, action: XDP_DROP, counted: "malformed" });
    let mut long = good4.clone();
    long[16..18].copy_from_slice(&200u16.to_be_bytes());
    v.push(F { name: "ipv4 total length beyond frame", frame: long, action: XDP_DROP, counted: "malformed" });
    let mut v6lie = cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 6, &[], &tcp(1, 80, 0x02)));
    v6lie[18..20].copy_from_slice(&500u16.to_be_bytes());
    v.push(F { name: "ipv6 payload length lies", frame: v6lie, action: XDP_DROP, counted: "malformed" });
    let v6cut = cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 6, &[], &tcp(1, 80, 0x02)));
    v.push(F { name: "truncated in ipv6 header", frame: v6cut[..40].to_vec(), action: XDP_DROP, counted: "malformed" });
    let mut v6tcp = cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 6, &[], &tcp(1, 80, 0x02)[..12]));
    v6tcp[18..20].copy_from_slice(&12u16.to_be_bytes());
    v.push(F {
        name: "tcp header cut short inside the ipv6 payload",
        frame: v6tcp,
        action: XDP_DROP,
        counted: "malformed",
    });
    v.push(F {
        name: "truncated in vlan tag",
        frame: eth(&[(0x8100, 100)], 0x0800)[..16].to_vec(),
        action: XDP_DROP,
        counted: "malformed",
    });
    v.push(F {
        name: "ipv6 extension header longer than the packet",
        frame: cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 0, &[6, 4, 0, 0, 0, 0, 0, 0], &[])),
        action: XDP_DROP,
        counted: "malformed",
    });
    v
}

fn hexdump(f: &[u8]) -> String {
    f.chunks(16)
        .map(|c| c.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `fixtures` through the program loaded with `rules`: the reference, the action and
/// exactly one counter must agree with each fixture's expectation.
fn check(rules: &str, fixtures: Vec<F>) {
    let set = parse_toml("fixtures.toml", rules).unwrap();
    let c = compile("fixtures.toml", &set).unwrap();
    let cls = Classifier::load().unwrap();
    for f in fixtures {
        let active = cls.swap_in(&c).unwrap();
        // The reference agrees with the expectation, too.
        let reference = match fastpath::rules::reference::classify(&set, &f.frame) {
            Verdict::Rule(i) => format!("rule {i}"),
            Verdict::NoMatch => "no_match".into(),
            Verdict::Malformed => "malformed".into(),
            Verdict::BadFragment => "bad_fragment".into(),
        };
        assert_eq!(reference, f.counted, "reference on fixture {:?}\n{}", f.name, hexdump(&f.frame));
        let got = cls.test_run(&f.frame).unwrap();
        assert_eq!(got, f.action, "action of fixture {:?}\n{}", f.name, hexdump(&f.frame));
        let per_rule = cls.rule_counters(active, set.rules.len()).unwrap();
        let t = cls.totals(active).unwrap();
        let counted: Vec<String> = per_rule
            .iter()
            .enumerate()
            .filter(|(_, c)| c.0 > 0)
            .map(|(i, c)| format!("rule {i}={}", c.0))
            .chain(
                ["no_match", "malformed", "bad_fragment"]
                    .iter()
                    .filter(|n| t.packets(n) > 0)
                    .map(|n| format!("{n}={}", t.packets(n))),
            )
            .collect();
        assert_eq!(
            counted,
            vec![format!("{}=1", f.counted)],
            "counters of fixture {:?}\n{}",
            f.name,
            hexdump(&f.frame)
        );
        let actions: u64 = ["pass", "drop", "xsk", "cpu", "tx", "redirect"].iter().map(|n| t.packets(n)).sum();
        assert_eq!(actions, 1, "exactly one action counted for fixture {:?}: {t:?}", f.name);
    }
}

fn root_or_skip(name: &str) -> bool {
    fastpath_testbed::gate::privileged(name)
}

#[test]
fn every_branch_gives_its_action_and_counter() {
    if root_or_skip("every_branch_gives_its_action_and_counter") {
        check(RULES, fixtures());
    }
}

/// `proto = "tcp", dst_port = 22, action = "drop"` must stop everything the kernel would hand to
/// TCP port 22: the bypasses found by attacking the first release, each as a fixture.
const SSH_RULES: &str = r#"
default = "pass"
[[rule]]   # 0
proto = "tcp"
dst_port = 22
action = "drop"
"#;

/// IPv4 with a raw fragment field (flags + offset in 8-byte units) and an L4 payload as given.
fn frag4(proto: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
    cat(eth(&[], 0x0800), ipv4([10, 99, 0, 1], [10, 99, 0, 2], proto, 0, frag, l4))
}

/// `n` Destination Options headers (8 bytes each, PadN) chained before `last`.
fn dest_opts(n: usize, last: u8) -> Vec<u8> {
    let mut ext = Vec::new();
    for i in 0..n {
        ext.extend_from_slice(&[if i + 1 == n { last } else { 60 }, 0, 1, 4, 0, 0, 0, 0]);
    }
    ext
}

fn ssh_fixtures() -> Vec<F> {
    let syn22 = tcp(40000, 22, 0x02);
    let mut v = vec![
        F { name: "tcp syn to 22, whole", frame: frag4(6, 0, &syn22), action: XDP_DROP, counted: "rule 0" },
        F {
            name: "ipv4 first fragment with the whole tcp header, to 22",
            frame: frag4(6, 0x2000, &syn22),
            action: XDP_DROP,
            counted: "rule 0",
        },
        F {
            name: "RFC 1858 tiny first fragment: 8 bytes of tcp (ports only)",
            frame: frag4(6, 0x2000, &syn22[..8]),
            action: XDP_DROP,
            counted: "bad_fragment",
        },
        F {
            name: "tiny first fragment: 16 bytes of tcp (flags in the next one)",
            frame: frag4(6, 0x2000, &syn22[..16]),
            action: XDP_DROP,
            counted: "bad_fragment",
        },
        F {
            name: "RFC 3128 overlapping fragment: tcp at offset 8 bytes",
            frame: frag4(6, 0x2001, &syn22[8..]),
            action: XDP_DROP,
            counted: "bad_fragment",
        },
        F {
            name: "tcp later fragment at offset 16 bytes (inside the tcp header)",
            frame: frag4(6, 0x0002, &[0; 8]),
            action: XDP_DROP,
            counted: "bad_fragment",
        },
        F {
            name: "tcp later fragment at offset 24 bytes: no ports, no match (the first one is judged)",
            frame: frag4(6, 0x0003, &[0; 8]),
            action: XDP_PASS,
            counted: "no_match",
        },
        F {
            name: "udp later fragment at offset 8 bytes is past the udp header",
            frame: frag4(17, 0x0001, &[0; 8]),
            action: XDP_PASS,
            counted: "no_match",
        },
        F {
            name: "tiny first fragment of udp (4 bytes)",
            frame: frag4(17, 0x2000, &udp(1, 22)[..4]),
            action: XDP_DROP,
            counted: "bad_fragment",
        },
        F {
            name: "three vlan tags (the parser reads two): malformed",
            frame: cat(
                eth(&[(0x88a8, 1), (0x8100, 2), (0x8100, 3)], 0x0800),
                ipv4([10, 99, 0, 1], [10, 99, 0, 2], 6, 0, 0, &syn22),
            ),
            action: XDP_DROP,
            counted: "malformed",
        },
        F {
            name: "ipv6 first fragment without the tcp header (RFC 7112)",
            frame: cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 44, &[6, 0, 0, 1, 0, 0, 0, 1], &syn22[..8])),
            action: XDP_DROP,
            counted: "bad_fragment",
        },
        F {
            name: "ipv6 first fragment whose chain goes on past it (RFC 7112)",
            frame: cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 44, &[60, 0, 0, 1, 0, 0, 0, 1], &[6, 1, 0, 0, 0, 0, 0, 0])),
            action: XDP_DROP,
            counted: "bad_fragment",
        },
        F {
            name: "ipv6 later fragment: its payload is data, not a header chain",
            frame: cat(
                eth(&[], 0x86dd),
                ipv6(V6A, V6B, 44, &[60, 0, 0, 0x18, 0, 0, 0, 1], &[6, 200, 0, 0, 0, 0, 0, 0]),
            ),
            action: XDP_PASS,
            counted: "no_match",
        },
        F {
            name: "ipv6 tcp later fragment at offset 8 bytes",
            frame: cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 44, &[6, 0, 0, 0x08, 0, 0, 0, 1], &[0; 8])),
            action: XDP_DROP,
            counted: "bad_fragment",
        },
        F {
            name: "ipv6 first fragment, then an atomic fragment header, 8 bytes of tcp",
            frame: cat(
                eth(&[], 0x86dd),
                ipv6(V6A, V6B, 44, &[44, 0, 0, 1, 0, 0, 0, 1, 6, 0, 0, 0, 0, 0, 0, 2], &syn22[..8]),
            ),
            action: XDP_DROP,
            counted: "bad_fragment",
        },
        F {
            name: "ipv6 later fragment at offset 8 claiming udp (reassembly ignores its next header)",
            frame: cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 44, &[17, 0, 0, 0x08, 0, 0, 0, 1], &[0; 8])),
            action: XDP_DROP,
            counted: "bad_fragment",
        },
    ];
    // Chains of 1..=10 Destination Options headers before tcp/22: up to the bound the rule sees
    // port 22; past it the protocol is unknown, which is malformed (dropped), never no_match.
    for n in 1..=10usize {
        let name: &'static str = Box::leak(format!("ipv6 {n} destination options headers, tcp to 22").into_boxed_str());
        let within = n <= fastpath::rules::reference::MAX_IPV6_EXT;
        v.push(F {
            name,
            frame: cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 60, &dest_opts(n, 6), &syn22)),
            action: XDP_DROP,
            counted: if within { "rule 0" } else { "malformed" },
        });
    }
    v
}

#[test]
fn no_crafted_tcp_frame_slips_past_a_port_drop_rule() {
    if root_or_skip("no_crafted_tcp_frame_slips_past_a_port_drop_rule") {
        check(SSH_RULES, ssh_fixtures());
    }
}

/// `malformed = "pass"` is honoured (and counted); a set with no proto/port/flag/frag rule gives
/// malformed frames its default action.
#[test]
fn malformed_policy_is_what_the_rule_set_says() {
    if !root_or_skip("malformed_policy_is_what_the_rule_set_says") {
        return;
    }
    let chain9 = cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 60, &dest_opts(9, 6), &tcp(1, 22, 2)));
    let cut = frag4(6, 0, &tcp(1, 22, 2)[..10]);
    let tiny = frag4(6, 0x2000, &tcp(1, 22, 2)[..8]);
    let pass = format!("malformed = \"pass\"\n{SSH_RULES}");
    let fx = |action| {
        vec![
            F { name: "9-header chain", frame: chain9.clone(), action, counted: "malformed" },
            F { name: "tcp header cut", frame: cut.clone(), action, counted: "malformed" },
            F {
                name: "tiny fragment is dropped whatever the policy",
                frame: tiny.clone(),
                action: XDP_DROP,
                counted: "bad_fragment",
            },
        ]
    };
    check(&pass, fx(XDP_PASS));
    // Steering on addresses only: malformed frames get the default (tx here, to tell it apart).
    let shallow = "default = \"tx\"\n[[rule]]\nsrc = \"10.1.0.0/16\"\naction = \"xsk\"\n";
    check(shallow, fx(XDP_TX));
    let explicit_drop = format!("malformed = \"drop\"\n{shallow}");
    check(&explicit_drop, fx(XDP_DROP));
    // An address drop rule: a third VLAN tag or a 9-header chain must not carry a frame of a
    // dropped source past it, so malformed frames are dropped.
    let guard = "default = \"pass\"\n[[rule]]\nsrc = \"10.1.0.0/16\"\naction = \"drop\"\n";
    check(guard, fx(XDP_DROP));
}
