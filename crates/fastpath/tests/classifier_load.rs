//! The classifier loaded for real: it passes the verifier, classifies, never reuses a verdict
//! across reloads, and its rate limits hold (per source, under spoofed sources, across CPUs).

/// True if root; without it the test fails, or skips loudly when the unprivileged subset is
/// asked for (fastpath_testbed::gate). The harness names the test's thread after the test.
fn root() -> bool {
    fastpath_testbed::gate::privileged(std::thread::current().name().unwrap_or("classifier_load"))
}

/// A 64-byte Ethernet + IPv4 (total length 50) + UDP frame, addresses and ports zero.
fn udp4() -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&50u16.to_be_bytes());
    f[23] = 17;
    f
}

/// Parses, compiles and swaps in `rules`; returns the rule set now active.
fn install(c: &fastpath::bpf::LoadedClassifier, rules: &str) -> fastpath::bpf::SetIndex {
    let set = fastpath::rules::parse_toml("t", rules).unwrap();
    c.swap_in(&fastpath::rules::compile::compile("t", &set).unwrap()).unwrap()
}
#[test]
fn loads_and_runs() {
    if !root() {
        return;
    }
    let c = fastpath::bpf::Classifier::load().unwrap_or_else(|e| panic!("{e:#}"));
    install(&c, "[[rule]]\nproto=\"udp\"\ndst_port=9\naction=\"drop\"\n");
    let mut f = udp4();
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    assert_eq!(c.test_run(&f).unwrap(), 1, "XDP_DROP");
    f[37] = 10;
    assert_eq!(c.test_run(&f).unwrap(), 2, "XDP_PASS");
    // The flow cache now holds both frames' verdicts; a reload must not reuse them.
    for (rules, port9, port10) in [
        ("[[rule]]\nproto=\"udp\"\ndst_port=10\naction=\"drop\"\n", 2, 1),
        ("[[rule]]\nproto=\"udp\"\naction=\"tx\"\n", 3, 3),
        ("[[rule]]\nproto=\"udp\"\ndst_port=9\naction=\"drop\"\n", 1, 2),
    ] {
        install(&c, rules);
        for _ in 0..2 {
            f[37] = 9;
            assert_eq!(c.test_run(&f).unwrap(), port9, "port 9 after reload to {rules:?}");
            f[37] = 10;
            assert_eq!(c.test_run(&f).unwrap(), port10, "port 10 after reload to {rules:?}");
        }
    }
}

/// `rate = 1000`: a burst from one source gets one second's worth (1,000) through, the rest is
/// dropped and counted as rate_dropped; another source has its own bucket.
#[test]
fn rate_limit_per_source() {
    if !root() {
        return;
    }
    let c = fastpath::bpf::Classifier::load().unwrap();
    let active = install(&c, "[[rule]]\nproto=\"udp\"\naction=\"pass\"\nrate=1000\n");
    let mut f = udp4();
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    let t0 = std::time::Instant::now();
    let passed = (0..3000).filter(|_| c.test_run(&f).unwrap() == 2).count();
    let refill = (t0.elapsed().as_secs_f64() * 1000.0).ceil() as usize;
    assert!((1000..=1000 + refill + 1).contains(&passed), "{passed} passed of 3000 (1000 + refill {refill} expected)");
    let t = c.totals(active).unwrap();
    assert_eq!(t.packets("rate_dropped") as usize, 3000 - passed);
    f[26..30].copy_from_slice(&[10, 0, 0, 2]);
    assert_eq!(c.test_run(&f).unwrap(), 2, "another source has a full bucket");
}

/// A flood from spoofed sources: `rate = 10` per source would admit 10 from every new address,
/// so the rule's aggregate bucket (`rate_total = 200`) must bound the whole flood, and once it
/// is empty a brand-new source is not admitted.
#[test]
fn rate_limit_holds_under_spoofed_sources() {
    if !root() {
        return;
    }
    let c = fastpath::bpf::Classifier::load().unwrap();
    for (rules, total) in [
        ("[[rule]]\nproto=\"udp\"\naction=\"pass\"\nrate=10\nrate_total=200\n", 200usize),
        // No rate_total: 64 sources' worth of the per-source rate.
        ("[[rule]]\nproto=\"udp\"\naction=\"pass\"\nrate=5\n", 5 * fastpath::rules::RATE_TOTAL_SOURCES as usize),
    ] {
        let active = install(&c, rules);
        let mut f = udp4();
        let n = 20_000u32;
        let t0 = std::time::Instant::now();
        let passed = (0..n)
            .filter(|i| {
                // Every frame from a new source address.
                f[26..30].copy_from_slice(&(0x0a00_0000 + i).to_be_bytes());
                c.test_run(&f).unwrap() == 2
            })
            .count();
        let refill = (t0.elapsed().as_secs_f64() * total as f64).ceil() as usize;
        eprintln!(
            "{rules:?}: {passed} of {n} frames from {n} sources passed in {:.3} s (aggregate {total}/s)",
            t0.elapsed().as_secs_f64()
        );
        assert!(
            (total..=total + refill + 1).contains(&passed),
            "{rules:?}: {passed} of {n} spoofed frames passed; the aggregate admits {total} + refill {refill}"
        );
        let t = c.totals(active).unwrap();
        assert_eq!(t.packets("rate_dropped") as usize, n as usize - passed, "every refused frame is counted");
        // The aggregate is empty: a brand-new source gets only what it refills meanwhile, not
        // its own (full) per-source burst.
        f[26..30].copy_from_slice(&[192, 0, 2, 1]);
        let t1 = std::time::Instant::now();
        let fresh = (0..20).filter(|_| c.test_run(&f).unwrap() == 2).count();
        let refill = (t1.elapsed().as_secs_f64() * total as f64).ceil() as usize;
        assert!(
            fresh <= 1 + refill,
            "{rules:?}: a new source after the flood got {fresh} of 20 through (refill {refill})"
        );
    }
}

/// The aggregate bucket holds when two CPUs hit it at once (a CPU whose clock reading is older
/// than the bucket's last update must not see a wrapped, "very long" interval and refill it):
/// its burst of 200 and what it refilled meanwhile pass, no more and no fewer (the bucket is
/// updated under its spin lock), and every other frame is counted as rate_dropped.
#[test]
fn rate_total_holds_across_cpus() {
    if !root() {
        return;
    }
    let c = fastpath::bpf::Classifier::load().unwrap();
    let active = install(&c, "[[rule]]\nproto=\"udp\"\naction=\"pass\"\nrate_total=200\n");
    let cpus = fastpath::workers::online_cpus().clamp(1, 4);
    let n = 20_000u32;
    let t0 = std::time::Instant::now();
    let passed: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..cpus)
            .map(|cpu| {
                let c = &c;
                s.spawn(move || {
                    let _ = fastpath::workers::pin_current_thread(cpu);
                    let mut f = udp4();
                    (0..n)
                        .filter(|i| {
                            f[26..30].copy_from_slice(&(0x0b00_0000 + (cpu as u32) * n + i).to_be_bytes());
                            c.test_run(&f).unwrap() == 2
                        })
                        .count()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let secs = t0.elapsed().as_secs_f64();
    let refill = (secs * 200.0).ceil() as usize;
    eprintln!("{cpus} CPUs x {n} frames in {secs:.3} s: {passed} passed (rate_total 200/s)");
    // The refill is the measured time's worth, so a slower (loaded) machine only widens it.
    assert!((200..=200 + refill + 1).contains(&passed), "{passed} passed; the aggregate admits 200 + refill {refill}");
    let t = c.totals(active).unwrap();
    let tried = cpus * n as usize;
    assert_eq!(t.packets("rate_dropped") as usize, tried - passed, "every refused frame is counted");
}

/// The open-addressing rule table in the program: a match-all rule behind another matches;
/// reloads swap sets whose tables hold other keys, and a key of an earlier install of the same
/// set (its half of the table rewritten) never matches again, even where the new set's tuples
/// would read it; a tuple too big for the table is looked up in the hash, beside tuples in the
/// table.
#[test]
fn rule_table_reloads_and_hash_fallback() {
    if !root() {
        return;
    }
    let c = fastpath::bpf::Classifier::load().unwrap_or_else(|e| panic!("{e:#}"));
    let mut f = udp4();
    let port = |f: &mut Vec<u8>, p: u16| f[36..38].copy_from_slice(&p.to_be_bytes());
    let src = |f: &mut Vec<u8>, a: [u8; 4]| f[26..30].copy_from_slice(&a);
    // Set A: port 9 drop, everything else tx (the match-all rule).
    let a = "[[rule]]\nproto=\"udp\"\ndst_port=9\naction=\"drop\"\n[[rule]]\naction=\"tx\"\n";
    // Set B: port 10 drop; no match-all, default pass.
    let b = "[[rule]]\nproto=\"udp\"\ndst_port=10\naction=\"drop\"\n";
    // Set C (into A's half again): A's tuple 0 shape (udp, destination port) where a leftover
    // A slot would match: C's port classes are 0-4 (class 1, its rule) and 5-65535 (class 2),
    // so port 9 or 11 gives class 2, A's key for port 9, at A's home slot; C has no entry there.
    // A leftover would tx them (C's rule 0); right is C's default, pass.
    let cc = "[[rule]]\nproto=\"udp\"\ndst_port=\"0-4\"\naction=\"tx\"\n";
    let s0 = install(&c, a);
    port(&mut f, 9);
    assert_eq!(c.test_run(&f).unwrap(), 1, "A: port 9 drop");
    port(&mut f, 11);
    assert_eq!(c.test_run(&f).unwrap(), 3, "A: the match-all rule");
    let s1 = install(&c, b);
    assert_ne!(s0, s1);
    port(&mut f, 9);
    assert_eq!(c.test_run(&f).unwrap(), 2, "B: port 9 passes");
    port(&mut f, 10);
    assert_eq!(c.test_run(&f).unwrap(), 1, "B: port 10 drop");
    assert_eq!(install(&c, cc), s0);
    for p in [9, 10, 11] {
        port(&mut f, p);
        assert_eq!(c.test_run(&f).unwrap(), 2, "C: port {p} passes (A's keys are gone from set {s0})");
    }
    port(&mut f, 3);
    assert_eq!(c.test_run(&f).unwrap(), 3, "C: port 3 tx");

    // A tuple of TABLE_MAX_ENTRIES + 1 /32 sources (the hash) between two in the table.
    let n = fastpath::rules::compile::TABLE_MAX_ENTRIES + 1;
    let mut text = String::from("[[rule]]\nproto=\"udp\"\ndst_port=7\naction=\"tx\"\n");
    for i in 0..n {
        text += &format!("[[rule]]\nsrc=\"10.{}.{}.{}/32\"\naction=\"drop\"\n", i >> 16, (i >> 8) & 255, i & 255);
    }
    text += "[[rule]]\ndst=\"192.168.0.0/16\"\naction=\"tx\"\n";
    let set = fastpath::rules::parse_toml("t", &text).unwrap();
    let comp = fastpath::rules::compile::compile("t", &set).unwrap();
    assert_eq!(comp.in_table, vec![true, false, true]);
    c.swap_in(&comp).unwrap();
    for (s, d, p, want) in [
        ([10u8, 0, 0, 5], [1u8, 1, 1, 1], 7u16, 3u32),
        ([10, 0, 128, 0], [1, 1, 1, 1], 8, 1),
        ([10, 0, 128, 1], [192, 168, 1, 1], 8, 3),
        ([11, 0, 0, 1], [1, 1, 1, 1], 8, 2),
    ] {
        src(&mut f, s);
        f[30..34].copy_from_slice(&d);
        port(&mut f, p);
        assert_eq!(c.test_run(&f).unwrap(), want, "src {s:?} dst {d:?} port {p}");
    }
}

/// A match-all rule alone is tuple 0 with an all-zero key, like an empty slot's contents, in
/// slot 0 of set 0 (the second install lands in set 0, whose key then has `set` 0 too: all of
/// it zero): it matches every packet. A set with no rules installed there afterwards matches
/// nothing.
#[test]
fn match_all_alone_in_set_zero() {
    if !root() {
        return;
    }
    let c = fastpath::bpf::Classifier::load().unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(install(&c, "[[rule]]\nproto=\"udp\"\ndst_port=9\naction=\"drop\"\n"), fastpath::bpf::SetIndex::One);
    let all = "[[rule]]\naction=\"tx\"\n";
    let comp = fastpath::rules::compile::compile("t", &fastpath::rules::parse_toml("t", all).unwrap()).unwrap();
    assert_eq!(comp.entries, vec![(fastpath::rules::compile::Key::default(), 0)], "one all-zero key");
    assert_eq!(c.swap_in(&comp).unwrap(), fastpath::bpf::SetIndex::Zero);
    let mut f = udp4();
    for (s, p) in [([0u8, 0, 0, 0], 0u16), ([10, 0, 0, 1], 9), ([192, 0, 2, 7], 53)] {
        f[26..30].copy_from_slice(&s);
        f[36..38].copy_from_slice(&p.to_be_bytes());
        assert_eq!(c.test_run(&f).unwrap(), 3, "the match-all rule: src {s:?} port {p}");
    }
    let mut arp = udp4();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(c.test_run(&arp).unwrap(), 3, "the match-all rule: ARP");
    let n = c.rule_counters(fastpath::bpf::SetIndex::Zero, 1).unwrap()[0].0;
    assert_eq!(n, 4, "every frame counted on rule 0");
    // A set with no rules (default pass) into set 0 again, and into set 1: nothing matches.
    for want in [fastpath::bpf::SetIndex::One, fastpath::bpf::SetIndex::Zero] {
        assert_eq!(install(&c, "default=\"pass\"\n"), want);
        assert_eq!(c.test_run(&f).unwrap(), 2, "empty set {want:?}: the default");
        assert_eq!(c.test_run(&arp).unwrap(), 2, "empty set {want:?}: the default (ARP)");
    }
}

/// The program's probe loop beyond distance 0: 16 source /32 keys sharing one home slot near the
/// end of the set's half (found by brute force with the Rust hash), so the run wraps to slot 0,
/// the 16th key at distance 15, and 3 keys of a home 3 slots on, placed first and pushed past
/// the run by Robin Hood (distances up to 16 + 2 - 3). A packet of each hits its own rule (per
/// rule counters); one more address of that home, not installed, and one of the others' home
/// match nothing. If the Rust and program hashes differed, the keys would not share a home in
/// the program and most would not be found within the probe bound.
#[test]
fn rule_table_probe_runs_in_the_program() {
    use fastpath::rules::compile::{table_home, Key, TABLE_PROBES, TABLE_SLOTS};
    if !root() {
        return;
    }
    let home = TABLE_SLOTS - 5;
    let key = |a: u32| {
        // An IPv4 source rule constrains the EtherType too.
        let mut k = Key { eth_type: 0x0800, ..Key::default() };
        k.src[..4].copy_from_slice(&a.to_be_bytes());
        k
    };
    // Addresses from 10.1.0.0 on whose key has home `h`, the first `n`.
    let find =
        |h: usize, n: usize| -> Vec<u32> { (0x0a01_0000u32..).filter(|&a| table_home(&key(a)) == h).take(n).collect() };
    let pushed = find((home + 3) % TABLE_SLOTS, 4);
    let run = find(home, TABLE_PROBES + 1);
    // Rules: the 3 pushed keys first (placed first), then the run's 16; each its own rule.
    let addrs: Vec<u32> = pushed[..3].iter().chain(&run[..TABLE_PROBES]).copied().collect();
    let mut text = String::from("default=\"pass\"\n");
    for a in &addrs {
        text += &format!("[[rule]]\nsrc=\"{}/32\"\naction=\"drop\"\n", std::net::Ipv4Addr::from(*a));
    }
    let comp = fastpath::rules::compile::compile("t", &fastpath::rules::parse_toml("t", &text).unwrap()).unwrap();
    assert_eq!(comp.in_table, vec![true]);
    for (i, a) in addrs.iter().enumerate() {
        assert!(comp.entries.contains(&(key(*a), i as u32)), "the compiler's key of rule {i} is the one searched");
    }
    let last = comp.table[(home + TABLE_PROBES - 1) % TABLE_SLOTS].unwrap();
    assert_eq!(
        (last.rule as usize, last.dist as usize),
        (3 + TABLE_PROBES - 1, TABLE_PROBES - 1),
        "16th at distance 15"
    );
    let longest = comp.table.iter().flatten().map(|s| s.dist).max().unwrap();
    assert_eq!(longest as usize, TABLE_PROBES - 1);
    let c = fastpath::bpf::Classifier::load().unwrap_or_else(|e| panic!("{e:#}"));
    let set = c.swap_in(&comp).unwrap();
    let mut f = udp4();
    for a in &addrs {
        f[26..30].copy_from_slice(&a.to_be_bytes());
        assert_eq!(c.test_run(&f).unwrap(), 1, "{} drop", std::net::Ipv4Addr::from(*a));
    }
    let counts = c.rule_counters(set, addrs.len()).unwrap();
    for (i, (n, _)) in counts.iter().enumerate() {
        assert_eq!(*n, 1, "rule {i} ({}) hit once", std::net::Ipv4Addr::from(addrs[i]));
    }
    for a in [run[TABLE_PROBES], pushed[3]] {
        f[26..30].copy_from_slice(&a.to_be_bytes());
        assert_eq!(c.test_run(&f).unwrap(), 2, "{} (same home, not installed) passes", std::net::Ipv4Addr::from(a));
    }
}
