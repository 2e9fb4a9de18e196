//! Named packet fixtures, one per branch of the classifier's parser and each action, run through
//! the BPF program with BPF_PROG_TEST_RUN: action and counters checked, hexdump on mismatch.

use fastpath::bpf::Classifier;
use fastpath::rules::compile::compile;
use fastpath::rules::parse_toml;

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
            frame: cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 44, &[6, 0, 0, 0x10, 0, 0, 0, 1], &[0; 8])),
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
    // Malformed: every header boundary, and the length fields that lie.
    let good4 = u4([10, 1, 9, 9], 5500);
    for (name, cut) in
        [("truncated in ethernet", 13), ("truncated in ipv4 header", 20), ("truncated in udp header", 40)]
    {
        v.push(F { name, frame: good4[..cut.max(14)].to_vec(), action: XDP_PASS, counted: "malformed" });
    }
    let mut ihl4 = good4.clone();
    ihl4[14] = 0x44;
    v.push(F { name: "ipv4 IHL 4", frame: ihl4, action: XDP_PASS, counted: "malformed" });
    let mut long = good4.clone();
    long[16..18].copy_from_slice(&200u16.to_be_bytes());
    v.push(F { name: "ipv4 total length beyond frame", frame: long, action: XDP_PASS, counted: "malformed" });
    let mut v6lie = cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 6, &[], &tcp(1, 80, 0x02)));
    v6lie[18..20].copy_from_slice(&500u16.to_be_bytes());
    v.push(F { name: "ipv6 payload length lies", frame: v6lie, action: XDP_PASS, counted: "malformed" });
    let v6cut = cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 6, &[], &tcp(1, 80, 0x02)));
    v.push(F { name: "truncated in ipv6 header", frame: v6cut[..40].to_vec(), action: XDP_PASS, counted: "malformed" });
    let mut v6tcp = cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 6, &[], &tcp(1, 80, 0x02)[..12]));
    v6tcp[18..20].copy_from_slice(&12u16.to_be_bytes());
    v.push(F {
        name: "tcp header cut short inside the ipv6 payload",
        frame: v6tcp,
        action: XDP_PASS,
        counted: "malformed",
    });
    v.push(F {
        name: "truncated in vlan tag",
        frame: eth(&[(0x8100, 100)], 0x0800)[..16].to_vec(),
        action: XDP_PASS,
        counted: "malformed",
    });
    v.push(F {
        name: "ipv6 extension header longer than the packet",
        frame: cat(eth(&[], 0x86dd), ipv6(V6A, V6B, 0, &[6, 4, 0, 0, 0, 0, 0, 0], &[])),
        action: XDP_PASS,
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

#[test]
fn every_branch_gives_its_action_and_counter() {
    if fastpath::sys::geteuid() != 0 {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "needs root and CI forbids skipping");
        eprintln!("SKIPPED every_branch_gives_its_action_and_counter: needs root");
        return;
    }
    let set = parse_toml("fixtures.toml", RULES).unwrap();
    let c = compile("fixtures.toml", &set).unwrap();
    let cls = Classifier::load().unwrap();
    for f in fixtures() {
        let active = cls.swap_in(&c, &|i| fastpath::sys::if_nametoindex(i)).unwrap();
        // The reference agrees with the expectation, too.
        let reference = match fastpath::rules::reference::classify(&set, &f.frame) {
            fastpath::rules::reference::Verdict::Rule(i) => format!("rule {i}"),
            fastpath::rules::reference::Verdict::NoMatch => "no_match".into(),
            fastpath::rules::reference::Verdict::Malformed => "malformed".into(),
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
                ["no_match", "malformed"].iter().filter(|n| t.packets(n) > 0).map(|n| format!("{n}={}", t.packets(n))),
            )
            .collect();
        assert_eq!(
            counted,
            vec![format!("{}=1", f.counted)],
            "counters of fixture {:?}\n{}",
            f.name,
            hexdump(&f.frame)
        );
    }
}
