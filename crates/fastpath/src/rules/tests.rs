use super::reference::{classify, parse, Verdict};
use super::*;

/// Home slots of the keys of `table_home_is_pinned` (computed once with this hash).
const HOME_UDP_DPORT2: usize = 22265;
const HOME_T1_UDP_DPORT2: usize = 19008;
const HOME_SRC_10_0_0_1: usize = 59306;
const HOME_V6_VLAN7: usize = 18556;
/// Longest distance from home of `table_takes_a_full_load_within_the_probe_bound`'s keys at full
/// load (measured with this hash and these keys; docs/ARCHITECTURE.md §4 cites it).
const MAX_DIST_FULL_LOAD: usize = 8;

fn set(text: &str) -> RuleSet {
    parse_toml("t.toml", text).unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str) -> String {
    parse_toml("t.toml", text).unwrap_err().to_string()
}

#[test]
fn parses_every_field_and_action() {
    let s = set(r#"
default = "drop"
[[rule]]
name = "a"
priority = 5
vlan = 100
eth_type = "ipv4"
src = "10.0.0.0/8"
dst = "10.99.0.2"
proto = "tcp"
src_port = 1000
dst_port = "5000-5999"
tcp_flags = "syn,!ack"
len = "64-128"
frag = "none"
action = "cpu"
cpus = [0]
rate = 100
[[rule]]
dst = "fd99::/64"
action = "redirect"
iface = "lo"
[[rule]]
action = "tx"
priority = 1
"#);
    assert_eq!(s.default, Action::Drop);
    assert_eq!(s.rules.len(), 3);
    assert_eq!(s.rules[0].action, Action::Redirect("lo".into()), "priority 0 (the default) first");
    assert_eq!(s.rules[1].action, Action::Tx, "then priority 1");
    let a = &s.rules[2];
    assert_eq!(a.name, "a");
    assert_eq!(a.m.vlan, Some(100));
    assert_eq!(a.m.src.unwrap().to_string(), "10.0.0.0/8");
    assert_eq!(a.m.dst.unwrap().len, 32);
    assert_eq!(a.m.dst_port, Some((5000, 5999)));
    assert_eq!(a.m.tcp_flags, Some((0x12, 0x02)));
    assert_eq!(a.m.len, Some((64, 128)));
    assert_eq!(a.action, Action::Cpu(vec![0]));
    assert_eq!(a.rate_pps, Some(100));
    assert_eq!(s.rules[0].m.eth_type, Some(0x86dd), "an IPv6 prefix implies eth_type ipv6");
}

#[test]
fn errors_name_file_line_column_and_what_is_accepted() {
    let e = err("[[rule]]\naction = \"drop\"\ndst_port = \"9000-80\"\n");
    assert!(e.starts_with("t.toml:3:12: dst_port \"9000-80\" is upside down"), "{e}");
    let e = err("[[rule]]\naction = \"drop\"\nsrc = \"10.0.0.300/8\"\n");
    assert!(e.starts_with("t.toml:3:7: src") && e.contains("IPv4 or IPv6 prefix"), "{e}");
    let e = err("[[rule]]\naction = \"drop\"\nsrc = \"10.0.0.1/8\"\n");
    assert!(e.contains("host bits") && e.contains("10.0.0.0/8"), "{e}");
    let e = err("[[rule]]\naction = \"drop\"\ncolour = 3\n");
    assert!(e.starts_with("t.toml:3:1:") && e.contains("unknown field `colour`"), "{e}");
    let e = err("[[rule]\naction = \"drop\"\n");
    assert!(e.starts_with("t.toml:1:"), "{e}");
    let e = err("[[rule]]\naction = \"redirect\"\niface = \"nosuch0\"\n");
    assert!(e.starts_with("t.toml:3:9:") && e.contains("nosuch0") && e.contains("no such interface"), "{e}");
    let e = err("[[rule]]\naction = \"teleport\"\n");
    assert!(e.contains("drop, pass, xsk, cpu, tx, redirect or syncookie"), "{e}");
    let e = err("[[rule]]\nproto = \"icmp\"\ndst_port = 5\naction = \"drop\"\n");
    assert!(e.contains("no ports"), "{e}");
    let e = err("[[rule]]\ntcp_flags = \"syn,fyn\"\naction = \"drop\"\n");
    assert!(e.contains("\"fyn\""), "{e}");
    assert_eq!(err("[[rule]]\n").lines().count(), 1);
}

#[test]
fn cli_rules_parse_like_toml() {
    let s = parse_rule_texts(
        "--rule",
        &["proto=udp,dst_port=9,action=drop".into(), "tcp_flags=syn+!ack,action=pass".into()],
        Action::Pass,
    )
    .unwrap();
    assert_eq!(s.rules[0].m.proto, Some(17));
    assert_eq!(s.rules[0].m.dst_port, Some((9, 9)));
    assert_eq!(s.rules[1].m.tcp_flags, Some((0x12, 0x02)));
    let e = parse_rule_texts("--rule", &["proto=udp,dst_port=70000,action=drop".into()], Action::Pass)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("--rule 1:1:11: dst_port 70000"), "{e}");
}

#[test]
fn too_many_rules_is_refused() {
    let mut text = String::new();
    for i in 0..(MAX_RULES + 1) {
        text.push_str(&format!("[[rule]]\ndst_port = {}\naction = \"drop\"\n", i % 65536));
    }
    let e = err(&text);
    assert!(e.contains(&format!("at most {MAX_RULES}")), "{e}");
}

fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&50u16.to_be_bytes());
    f[23] = 17;
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&dst);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f
}

#[test]
fn reference_first_match_and_malformed() {
    let s = set(r#"
[[rule]]
dst_port = 22
action = "pass"
[[rule]]
src = "10.0.0.0/8"
proto = "udp"
action = "drop"
"#);
    assert_eq!(classify(&s, &udp4([10, 1, 2, 3], [1, 1, 1, 1], 5, 22)), Verdict::Rule(0));
    assert_eq!(classify(&s, &udp4([10, 1, 2, 3], [1, 1, 1, 1], 5, 23)), Verdict::Rule(1));
    assert_eq!(classify(&s, &udp4([11, 1, 2, 3], [1, 1, 1, 1], 5, 23)), Verdict::NoMatch);
    let mut bad = udp4([10, 1, 2, 3], [1, 1, 1, 1], 5, 22);
    bad[14] = 0x44; // IHL 4
    assert_eq!(classify(&s, &bad), Verdict::Malformed);
    assert_eq!(classify(&s, &bad[..30]), Verdict::Malformed);
    let mut later = udp4([10, 1, 2, 3], [1, 1, 1, 1], 5, 22);
    later[20..22].copy_from_slice(&0x0010u16.to_be_bytes()); // offset 16 * 8
    let p = parse(&later).unwrap();
    assert_eq!((p.frag, p.ports), (Frag::Later, None));
    assert_eq!(classify(&s, &later), Verdict::Rule(1), "a later fragment has no ports: rule 0 cannot match it");
}

#[test]
fn compiled_lookup_agrees_with_reference() {
    use super::compile::{compile, lookup};
    let s = set(r#"
[[rule]]
dst_port = "1000-2000"
action = "drop"
[[rule]]
src = "10.0.0.0/8"
dst_port = "1500-1600"
action = "pass"
[[rule]]
tcp_flags = "!syn"
action = "tx"
[[rule]]
len = "60-70"
src_port = 7
action = "xsk"
"#);
    let c = compile("t", &s).unwrap();
    for sport in [1u16, 7, 999] {
        for dport in [0u16, 999, 1000, 1550, 2000, 2001] {
            for src in [[10u8, 0, 0, 1], [192, 168, 0, 1]] {
                let f = udp4(src, [1, 2, 3, 4], sport, dport);
                let p = parse(&f).unwrap();
                let want = match classify(&s, &f) {
                    Verdict::Rule(i) => Some(i),
                    _ => None,
                };
                assert_eq!(lookup(&c, &p), want, "sport {sport} dport {dport} src {src:?}");
            }
        }
    }
}

#[test]
fn malformed_policy_defaults_to_drop_when_rules_look_past_l3() {
    let deep = set("[[rule]]\nproto = \"tcp\"\ndst_port = 22\naction = \"drop\"\n");
    assert_eq!(deep.malformed, None);
    assert_eq!(deep.malformed_action(), Action::Drop, "port rules: malformed frames are dropped");
    for field in ["proto = \"udp\"", "src_port = 53", "tcp_flags = \"syn\"", "frag = \"first\""] {
        let s = set(&format!("default = \"pass\"\n[[rule]]\n{field}\naction = \"pass\"\n"));
        assert_eq!(s.malformed_action(), Action::Drop, "{field}");
    }
    let shallow = set("default = \"tx\"\n[[rule]]\nsrc = \"10.0.0.0/8\"\naction = \"xsk\"\n");
    assert_eq!(shallow.malformed_action(), Action::Tx, "steering on addresses only: the default action");
    let guard = set("default = \"pass\"\n[[rule]]\nsrc = \"10.0.0.0/8\"\naction = \"drop\"\n");
    assert_eq!(guard.malformed_action(), Action::Drop, "an address drop rule: malformed frames are dropped");
    let limit = set("default = \"pass\"\n[[rule]]\nsrc = \"10.0.0.0/8\"\naction = \"pass\"\nrate = 10\n");
    assert_eq!(limit.malformed_action(), Action::Drop, "a rate limit: malformed frames are dropped");
    let explicit = set("malformed = \"pass\"\n[[rule]]\nproto = \"tcp\"\ndst_port = 22\naction = \"drop\"\n");
    assert_eq!(explicit.malformed_action(), Action::Pass);
    let e = err("malformed = \"tx\"\n[[rule]]\naction = \"drop\"\n");
    assert!(e.starts_with("t.toml:1:13: malformed \"tx\" is not accepted: use drop or pass"), "{e}");
}

#[test]
fn rate_total_defaults_and_bounds() {
    let s = set("[[rule]]\naction = \"pass\"\nrate = 100\n");
    assert_eq!(s.rules[0].rate_total_pps, Some(100 * RATE_TOTAL_SOURCES));
    let s = set("[[rule]]\naction = \"pass\"\nrate_total = 5000\n");
    assert_eq!((s.rules[0].rate_pps, s.rules[0].rate_total_pps), (None, Some(5000)));
    let e = err("[[rule]]\naction = \"pass\"\nrate = 100\nrate_total = 50\n");
    assert!(e.contains("rate_total 50 is below rate 100"), "{e}");
    let e = err("[[rule]]\naction = \"pass\"\nrate_total = 0\n");
    assert!(e.contains("rate_total 0 is not accepted: use packets per second 1..=1000000000"), "{e}");
}

/// The bypasses of the first release, at the parser: what each crafted frame is.
#[test]
fn crafted_fragments_and_chains_are_rejected_not_unmatched() {
    fn v4(frag: u16, l4: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
        f.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&frag.to_be_bytes());
        f.extend_from_slice(&[64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        f.extend_from_slice(l4);
        f
    }
    let mut tcp22 = vec![0x9c, 0x40, 0, 22];
    tcp22.extend_from_slice(&[0; 8]);
    tcp22.extend_from_slice(&[0x50, 0x02, 0, 0, 0, 0, 0, 0]);
    use super::reference::Reject;
    assert_eq!(parse(&v4(0x2000, &tcp22[..8])), Err(Reject::BadFragment), "tiny first fragment");
    assert_eq!(parse(&v4(0x2001, &tcp22[8..])), Err(Reject::BadFragment), "offset 8 overlaps tcp");
    assert_eq!(parse(&v4(0x2000, &tcp22)).map(|p| p.ports), Ok(Some((40000, 22))));
    assert_eq!(parse(&v4(0x0003, &[0; 8])).map(|p| p.ports), Ok(None), "later fragment: no ports");
    assert_eq!(parse(&v4(0, &tcp22[..10])), Err(Reject::Malformed), "cut tcp header, not a fragment");
    let s = set("[[rule]]\nproto = \"tcp\"\ndst_port = 22\naction = \"drop\"\n");
    assert_eq!(classify(&s, &v4(0x2000, &tcp22[..8])), Verdict::BadFragment);
}

#[test]
fn mixed_rules_parse_and_differ_by_salt() {
    let a = crate::rules::mixed_rules_toml(1000, 0);
    let set = crate::rules::parse_toml("mixed", &a).expect("the synthetic rules parse");
    assert_eq!(set.rules.len(), 1000);
    assert_ne!(a, crate::rules::mixed_rules_toml(1000, 7), "the salt shifts the rules");
}

/// The tuple prefilter skips only tuples no entry of which can match, agrees with the lookup on
/// addresses inside and outside every prefix (including a crafted source that shares a rule's
/// first 16 bits but not its prefix), and stays off where it would not pay.
#[test]
fn prefilter_skips_only_tuples_that_cannot_match() {
    use compile::{compile, lookup, prefilter, prefilter_admits};
    let s = set(r#"
[[rule]]
src = "172.16.5.0/24"
action = "drop"
[[rule]]
dst = "192.168.7.9/32"
proto = "udp"
dst_port = 53
action = "drop"
[[rule]]
src = "8.0.0.0/6"
action = "drop"
"#);
    let c = compile("t.toml", &s).unwrap();
    let ti = |plen_src: u8, plen_dst: u8| {
        c.tuples.iter().position(|t| t.src_plen == plen_src && t.dst_plen == plen_dst).unwrap()
    };
    let (t_src, t_dst, t_short) = (ti(24, 0), ti(0, 32), ti(6, 0));
    assert_eq!(c.prefilter[t_src], prefilter::SRC);
    assert_eq!(c.prefilter[t_dst], prefilter::DST);
    // A /6 leaves fewer than 8 bits in the first 16 to tell addresses apart: no bitmap.
    assert_eq!(c.prefilter[t_short], 0);
    let a = |b: [u8; 4]| {
        let mut x = [0u8; 16];
        x[..4].copy_from_slice(&b);
        x
    };
    let other = a([10, 99, 0, 1]);
    assert!(prefilter_admits(&c, t_src, &a([172, 16, 5, 200]), &other));
    // Same first 16 bits, other /24: the bitmap admits it, the hash lookup must refuse it.
    assert!(prefilter_admits(&c, t_src, &a([172, 16, 6, 1]), &other));
    assert!(!prefilter_admits(&c, t_src, &a([172, 17, 5, 1]), &other));
    assert!(!prefilter_admits(&c, t_src, &other, &other));
    assert!(prefilter_admits(&c, t_dst, &other, &a([192, 168, 7, 9])));
    assert!(!prefilter_admits(&c, t_dst, &other, &a([192, 169, 7, 9])));
    assert!(prefilter_admits(&c, t_short, &other, &other));
    let p = |src: [u8; 4], dst: [u8; 4]| parse(&udp4(src, dst, 1000, 53)).unwrap();
    assert_eq!(lookup(&c, &p([172, 16, 5, 1], [1, 1, 1, 1])), Some(0));
    assert_eq!(lookup(&c, &p([172, 16, 6, 1], [1, 1, 1, 1])), None);
    assert_eq!(lookup(&c, &p([1, 1, 1, 1], [192, 168, 7, 9])), Some(1));
    assert_eq!(lookup(&c, &p([11, 1, 1, 1], [192, 168, 7, 8])), Some(2));
    assert_eq!(lookup(&c, &p([12, 1, 1, 1], [192, 168, 7, 8])), None);

    // 200 /8 sources fill more than half of the 256 values a /8 can take.
    let mut dense = String::new();
    for i in 0..200u32 {
        dense += &format!("[[rule]]\nsrc = \"{i}.0.0.0/8\"\naction = \"drop\"\n");
    }
    let c = compile("t.toml", &set(&dense)).unwrap();
    assert_eq!(c.prefilter, vec![0], "a dense bitmap is not consulted");
}

/// `proto` naming a header the parser walks past (IPv6 extension headers, AH) could only match
/// later fragments: refused, naming the value and why, so a `proto = 51, action = "drop"`
/// rule is never silently disarmed.
#[test]
fn proto_of_a_walked_header_is_refused() {
    for p in [0u8, 43, 44, 51, 60] {
        let e = err(&format!("[[rule]]\nproto = {p}\naction = \"drop\"\n"));
        assert!(e.contains(&format!("proto {p} is not accepted")) && e.contains("walks"), "{e}");
        let e = parse_rule_texts("--rule", &[format!("proto={p},action=drop")], Action::Pass).unwrap_err().to_string();
        assert!(e.contains(&format!("proto {p} is not accepted")), "{e}");
    }
    for p in [1u8, 6, 17, 47, 50, 58, 132] {
        set(&format!("[[rule]]\nproto = {p}\naction = \"drop\"\n"));
    }
}

#[test]
fn syncookie_only_for_one_tcp_service() {
    let s = set("[[rule]]\nproto = \"tcp\"\ndst_port = 80\naction = \"syncookie\"\n");
    assert_eq!(s.rules[0].action, Action::Syncookie);
    let c = compile::compile("t", &s).unwrap();
    assert!(c.uses_syncookie());
    assert!(!compile::compile("t", &set("[[rule]]\nproto = \"tcp\"\naction = \"drop\"\n")).unwrap().uses_syncookie());
    // The same with an address and a port range: still one service.
    set("[[rule]]\ndst = \"10.99.0.2\"\nproto = \"tcp\"\ndst_port = \"80-81\"\naction = \"syncookie\"\n");
    for (text, needle) in [
        ("dst_port = 80\naction = \"syncookie\"", "t.toml:3:10: action \"syncookie\" needs proto = \"tcp\""),
        ("proto = \"udp\"\ndst_port = 80\naction = \"syncookie\"", "needs proto = \"tcp\""),
        ("proto = \"tcp\"\naction = \"syncookie\"", "action \"syncookie\" needs a dst_port"),
        (
            "proto = \"tcp\"\ndst_port = 80\ntcp_flags = \"syn\"\naction = \"syncookie\"",
            "t.toml:4:13: tcp_flags is not accepted with action \"syncookie\"",
        ),
        ("proto = \"tcp\"\ndst_port = 80\nlen = 60\naction = \"syncookie\"", "len is not accepted"),
        ("proto = \"tcp\"\ndst_port = 80\nfrag = \"none\"\naction = \"syncookie\"", "frag is not accepted"),
        ("proto = \"tcp\"\ndst_port = 80\naction = \"syncookie\"\nrate = 10", "rate is not accepted"),
        ("proto = \"tcp\"\ndst_port = 80\naction = \"syncookie\"\nrate_total = 10", "rate_total is not accepted"),
        ("proto = \"tcp\"\ndst_port = 80\naction = \"syncook\"", "use drop, pass, xsk, cpu, tx, redirect or syncookie"),
    ] {
        let e = err(&format!("[[rule]]\n{text}\n"));
        assert!(e.contains(needle), "{text:?}: {e}");
        assert!(!e.contains('\n'), "one line: {e}");
    }
    assert!(err("default = \"syncookie\"\n").contains("default \"syncookie\" is not accepted"));
    // On the command line too.
    let cli = parse_rule_texts("--rule", &["proto=tcp,dst_port=443,action=syncookie".into()], Action::Pass).unwrap();
    assert_eq!(cli.rules[0].action, Action::Syncookie);
    assert!(parse_rule_texts("--rule", &["proto=tcp,action=syncookie".into()], Action::Pass).is_err());
}

/// Keys of tuple 0 that differ in their source address: `n` of them, rule i for key i.
fn table_keys(n: usize) -> Vec<(compile::Key, u32)> {
    (0..n)
        .map(|i| {
            let mut k = compile::Key { proto16: 0x111, ..Default::default() };
            k.src[..4].copy_from_slice(&(i as u32).to_be_bytes());
            (k, i as u32)
        })
        .collect()
}

/// Keys forced onto one home slot form a probe chain, each found from that home (also where
/// the chain wraps past the last slot); a key one probe beyond the bound is refused with a
/// one-line error and leaves the table as it was (the keys before it still found, it not).
#[test]
fn table_probe_chains_and_probe_bound() {
    use compile::{Table, TableError, TABLE_PROBES, TABLE_SLOTS};
    for home in [5usize, TABLE_SLOTS - 3] {
        let keys = table_keys(TABLE_PROBES + 1);
        let mut t = Table::default();
        t.insert_all(&keys[..TABLE_PROBES], |_| home).unwrap();
        let slots = t.clone().into_slots();
        for (k, r) in &keys[..TABLE_PROBES] {
            assert_eq!(Table::find(&slots, k, home), Some(*r), "home {home}, rule {r}");
        }
        // Not in the table: the lookup stops after TABLE_PROBES slots, all full.
        assert_eq!(Table::find(&slots, &keys[TABLE_PROBES].0, home), None);
        let e = t.insert_all(&keys[TABLE_PROBES..], |_| home).unwrap_err();
        assert_eq!(e, TableError::ProbeBound { tuple: 0, home });
        assert!(!e.to_string().contains('\n') && e.to_string().contains(&format!("{TABLE_PROBES} probes")), "{e}");
        assert_eq!(t.len(), TABLE_PROBES);
        assert!(t.clone().into_slots() == slots, "home {home}: the refused insert changed a slot");
        // All or none: a batch whose last key overflows leaves none of its keys behind.
        let mut t2 = Table::default();
        let e = t2.insert_all(&keys, |_| home).unwrap_err();
        assert!(matches!(e, TableError::ProbeBound { .. }));
        assert!(t2.is_empty());
        assert!(t2.into_slots().iter().all(|s| s.is_none()));
    }
    // A chain ends at an empty slot: a key whose home lies before a gap is not looked for past it.
    let keys = table_keys(2);
    let mut t = Table::default();
    t.insert_all(&keys[..1], |_| 10).unwrap();
    t.insert_all(&keys[1..], |_| 12).unwrap();
    let slots = t.into_slots();
    assert_eq!(Table::find(&slots, &keys[1].0, 10), None, "slot 11 is empty: the run from 10 ends there");
    assert_eq!(Table::find(&slots, &keys[1].0, 12), Some(1));
}

/// All or none when Robin Hood moved entries first: a batch whose keys displace entries already
/// placed (their keys nearer their home) and whose last key then overflows the probe bound leaves
/// every slot exactly as before, the displaced entries back where they were.
#[test]
fn table_rollback_after_robin_hood_displacement_is_exact() {
    use compile::{Table, TableError, TABLE_PROBES};
    let keys = table_keys(4 + TABLE_PROBES + 1);
    // Keys 0..4 have home 110, the others home 100.
    let home = |k: &compile::Key| if k.src[3] < 4 { 110 } else { 100 };
    let mut t = Table::default();
    t.insert_all(&keys[..4], home).unwrap();
    let before = t.clone().into_slots();
    assert_eq!(before[110].map(|s| (s.rule, s.dist)), Some((0, 0)));
    // TABLE_PROBES keys of home 100 fit, pushing keys 0..4 on past slot 115.
    let mut fits = t.clone();
    fits.insert_all(&keys[4..4 + TABLE_PROBES], home).unwrap();
    let moved = fits.into_slots();
    for (i, s) in moved[100..100 + TABLE_PROBES].iter().enumerate() {
        assert_eq!(s.map(|s| (s.rule, s.dist as usize)), Some((4 + i as u32, i)), "slot {}", 100 + i);
    }
    let mut pushed: Vec<u32> = moved[116..120].iter().map(|s| s.unwrap().rule).collect();
    pushed.sort();
    assert_eq!(pushed, [0, 1, 2, 3], "keys 0..4 moved on past slot 115");
    // One more of home 100 lies TABLE_PROBES past it: refused, and nothing moved stays moved.
    let e = t.insert_all(&keys[4..], home).unwrap_err();
    assert_eq!(e, TableError::ProbeBound { tuple: 0, home: 100 });
    assert!(t.clone().into_slots() == before, "the rollback left a slot changed");
    assert_eq!(t.len(), 4);
}

/// Robin Hood early exit: at probe j a slot whose key lies fewer than j slots past its home ends
/// the lookup (the key looked for would have taken it). A hand-laid table with a key past such a
/// slot shows the lookup stops there; a miss in a packed run reads no further than its keys'
/// distances allow.
#[test]
fn table_find_stops_at_a_nearer_key() {
    use compile::{Slot, Table, TABLE_SLOTS};
    let keys = table_keys(3);
    let mut slots: Vec<Option<Slot>> = vec![None; TABLE_SLOTS];
    slots[100] = Some(Slot { key: keys[0].0, rule: 0, dist: 0 });
    slots[101] = Some(Slot { key: keys[1].0, rule: 1, dist: 0 });
    slots[102] = Some(Slot { key: keys[2].0, rule: 2, dist: 2 });
    assert_eq!(Table::find(&slots, &keys[0].0, 100), Some(0));
    assert_eq!(Table::find(&slots, &keys[1].0, 101), Some(1));
    assert_eq!(Table::find(&slots, &keys[2].0, 100), None, "slot 101's key (distance 0) ends the probe at j = 1");
    slots[101].as_mut().unwrap().dist = 1;
    assert_eq!(Table::find(&slots, &keys[2].0, 100), Some(2), "distance 1 at j = 1 does not");
}

/// The Rust hash is pinned: these keys' home slots are constants, so a change of the hash (or
/// of the key layout) in Rust fails here, and one in the program fails the root test
/// `rule_table_probe_runs_in_the_program` (which places keys with this hash).
#[test]
fn table_home_is_pinned() {
    use compile::{table_home, Key};
    assert_eq!(table_home(&Key::default()), 0, "the all-zero key");
    let mut k = Key { proto16: 0x111, dport_class: 2, ..Default::default() };
    assert_eq!(table_home(&k), HOME_UDP_DPORT2);
    k.tuple = 1;
    assert_eq!(table_home(&k), HOME_T1_UDP_DPORT2);
    let mut k = Key::default();
    k.src[..4].copy_from_slice(&[10, 0, 0, 1]);
    assert_eq!(table_home(&k), HOME_SRC_10_0_0_1);
    k.src = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    k.vlan = 7;
    assert_eq!(table_home(&k), HOME_V6_VLAN7);
}

/// The table takes at most half its slots; one entry more is refused (one line, the counts),
/// and nothing of the refused batch is placed.
#[test]
fn table_full_is_refused() {
    use compile::{Table, TableError, TABLE_MAX_ENTRIES, TABLE_SLOTS};
    let keys = table_keys(TABLE_MAX_ENTRIES + 1);
    let mut t = Table::default();
    t.insert_all(&keys[..TABLE_MAX_ENTRIES], |k| 2 * k.src[2] as usize * 256 + 2 * k.src[3] as usize).unwrap();
    let e = t.insert_all(&keys[TABLE_MAX_ENTRIES..], |_| 1).unwrap_err();
    assert_eq!(e, TableError::Full { placed: TABLE_MAX_ENTRIES, adding: 1 });
    let msg = e.to_string();
    assert!(
        !msg.contains('\n') && msg.contains(&TABLE_MAX_ENTRIES.to_string()) && msg.contains(&TABLE_SLOTS.to_string()),
        "{msg}"
    );
    assert_eq!(Table::find(&t.into_slots(), &keys[TABLE_MAX_ENTRIES].0, 1), None);
}

/// An empty set has no table; a match-all rule (an all-zero key, like an empty slot's) is
/// placed and found; a tuple too big for the table stays in the hash while the smaller ones
/// are placed, and the lookup (table and hash as the program reads them) agrees with the
/// reference on both.
#[test]
fn compiled_table_empty_match_all_and_overflow() {
    use super::compile::{compile, lookup, TABLE_MAX_ENTRIES};
    let c = compile("t", &set("default = \"drop\"\n")).unwrap();
    assert!(c.table.is_empty() && c.in_table.is_empty());
    let f = udp4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2);
    assert_eq!(lookup(&c, &parse(&f).unwrap()), None);

    let s = set("[[rule]]\ndst_port = 9\naction = \"drop\"\n[[rule]]\naction = \"tx\"\n");
    let c = compile("t", &s).unwrap();
    assert_eq!(c.in_table, vec![true, true]);
    assert_eq!(lookup(&c, &parse(&f).unwrap()), Some(1), "the match-all rule (tuple 1)");
    // The match-all rule alone: tuple 0, its key all zero, home slot 0.
    let c = compile("t", &set("[[rule]]\naction = \"tx\"\n")).unwrap();
    assert_eq!(c.entries, vec![(compile::Key::default(), 0)]);
    assert_eq!(c.in_table, vec![true]);
    assert_eq!(c.table[0].map(|s| (s.key, s.rule, s.dist)), Some((compile::Key::default(), 0, 0)));
    assert_eq!(lookup(&c, &parse(&f).unwrap()), Some(0), "the all-zero key of the match-all rule");

    // 1 small tuple first, then one tuple of TABLE_MAX_ENTRIES + 1 source /32 rules, then one more.
    let n = TABLE_MAX_ENTRIES + 1;
    let mut text = String::from("[[rule]]\ndst_port = 7\naction = \"tx\"\n");
    for i in 0..n {
        text += &format!("[[rule]]\nsrc = \"10.{}.{}.{}/32\"\naction = \"drop\"\n", i >> 16, (i >> 8) & 255, i & 255);
    }
    text += "[[rule]]\ndst = \"192.168.0.0/16\"\naction = \"pass\"\n";
    let s = set(&text);
    let c = compile("t", &s).unwrap();
    assert_eq!(c.in_table, vec![true, false, true], "the big tuple stays in the hash");
    assert_eq!(c.table_fallback.len(), 1, "{:?}", c.table_fallback);
    assert!(
        c.table_fallback[0].0 == 1 && c.table_fallback[0].1.starts_with("rule table full"),
        "{:?}",
        c.table_fallback
    );
    for (src, dst, dport) in [
        ([10u8, 0, 0, 5], [1u8, 1, 1, 1], 7u16),
        ([10, 0, 200, 1], [1, 1, 1, 1], 9),
        ([10, 0, 0, 5], [192, 168, 3, 4], 9),
        ([11, 0, 0, 5], [192, 168, 3, 4], 9),
        ([11, 0, 0, 5], [192, 169, 3, 4], 9),
    ] {
        let f = udp4(src, dst, 1, dport);
        let want = match classify(&s, &f) {
            Verdict::Rule(i) => Some(i),
            _ => None,
        };
        assert_eq!(lookup(&c, &parse(&f).unwrap()), want, "src {src:?} dst {dst:?} dport {dport}");
    }
}

/// Filled to its limit (half its slots) with keys of one tuple through the real hash, the table
/// takes them all (Robin Hood keeps every key within [`MAX_DIST_FULL_LOAD`] of its home) and
/// finds each where the program would.
#[test]
fn table_takes_a_full_load_within_the_probe_bound() {
    use compile::{table_home, Table, TABLE_MAX_ENTRIES};
    // Scattered IPv6 sources (splitmix64), not a sequence, which the multiplicative hash would
    // spread evenly by itself.
    let mut x = 0x5eed_u64;
    let mut next = || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let keys: Vec<(compile::Key, u32)> = (0..TABLE_MAX_ENTRIES as u32)
        .map(|i| {
            let mut k = compile::Key { tuple: 3, ..Default::default() };
            k.src[..8].copy_from_slice(&next().to_ne_bytes());
            k.src[8..].copy_from_slice(&next().to_ne_bytes());
            (k, i)
        })
        .collect();
    let mut t = Table::default();
    t.insert_all(&keys, table_home).unwrap_or_else(|e| panic!("{e}"));
    // The longest distance from home at full load: exactly MAX_DIST_FULL_LOAD with this hash
    // and these keys (docs/ARCHITECTURE.md §4 cites it).
    assert!(t.max_dist() == MAX_DIST_FULL_LOAD, "longest distance {}", t.max_dist());
    let slots = t.into_slots();
    for (k, r) in &keys {
        assert_eq!(Table::find(&slots, k, table_home(k)), Some(*r));
    }
    let mut absent = keys[0].0;
    absent.dst[0] = 1;
    assert_eq!(Table::find(&slots, &absent, table_home(&absent)), None);
}

/// On sets like the benchmark's (10,000 mixed rules), every tuple fits the table: the load
/// factor and the probe bound leave room (a tuple left to the hash would be slow, not wrong).
#[test]
fn mixed_rules_fit_the_table() {
    let s = crate::rules::parse_toml("mixed", &crate::rules::mixed_rules_toml(10_000, 0)).unwrap();
    let c = compile::compile("mixed", &s).unwrap();
    assert!(c.in_table.iter().all(|b| *b), "{:?}", c.in_table);
}

/// `Rule::text` is the `--rule` form of the rule: parsed back by `parse_rule_texts`, it gives the
/// same rule (name aside), for every field and action; fields the rule does not have (an
/// eth_type its prefix implies, the default rate_total) are left out.
#[test]
fn rule_text_parses_back_into_the_same_rule() {
    let s = set(r#"
[[rule]]
name = "every field"
priority = 5
vlan = 100
src = "10.0.0.0/8"
dst = "10.99.0.2"
proto = "tcp"
src_port = 1000
dst_port = "5000-5999"
tcp_flags = "syn,!ack"
len = "64-128"
frag = "none"
action = "cpu"
cpus = [0]
rate = 100
[[rule]]
dst = "fd99::/64"
action = "redirect"
iface = "lo"
[[rule]]
eth_type = "0x88cc"
action = "tx"
priority = -1
[[rule]]
eth_type = "arp"
proto = 47
frag = "later"
action = "drop"
rate = 10
rate_total = 15
[[rule]]
proto = "udp"
src_port = "1-2"
action = "xsk"
[[rule]]
proto = "tcp"
dst_port = 443
action = "syncookie"
[[rule]]
action = "pass"
"#);
    let texts: Vec<String> = s.rules.iter().map(Rule::text).collect();
    // In match order: priority -1, the five of priority 0 in file order, then priority 5.
    assert_eq!(
        texts[6],
        "priority=5,vlan=100,src=10.0.0.0/8,dst=10.99.0.2/32,proto=tcp,src_port=1000,dst_port=5000-5999,tcp_flags=syn+!ack,len=64-128,frag=none,action=cpu,cpus=0,rate=100",
        "{texts:?}"
    );
    assert_eq!(texts[0], "priority=-1,eth_type=0x88cc,action=tx");
    assert_eq!(texts[1], "dst=fd99::/64,action=redirect,iface=lo");
    assert_eq!(texts[2], "eth_type=arp,proto=47,frag=later,action=drop,rate=10,rate_total=15");
    assert_eq!(texts[3], "proto=udp,src_port=1-2,action=xsk");
    assert_eq!(texts[4], "proto=tcp,dst_port=443,action=syncookie");
    assert_eq!(texts[5], "action=pass");
    let back = parse_rule_texts("--rule", &texts, Action::Pass).unwrap_or_else(|e| panic!("{e}: {texts:?}"));
    assert_eq!(back.rules.len(), s.rules.len());
    for (a, b) in s.rules.iter().zip(&back.rules) {
        assert_eq!(
            (&a.m, &a.action, a.priority, a.rate_pps, a.rate_total_pps),
            (&b.m, &b.action, b.priority, b.rate_pps, b.rate_total_pps),
            "{}",
            a.text()
        );
    }
}
