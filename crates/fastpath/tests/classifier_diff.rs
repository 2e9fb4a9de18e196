//! Differential tests: the compiled tables (Rust lookup, and the BPF program itself through
//! BPF_PROG_TEST_RUN) against the reference classifier, on seeded random rule sets and frames.

mod common;

use common::{frame, rule_set, Rng};
use fastpath::rules::compile::{compile, lookup_in};
use fastpath::rules::reference::{classify, parse, Verdict};
use fastpath::rules::Action;

/// The XDP return code of an action under BPF_PROG_TEST_RUN: xsk falls back to XDP_PASS (no
/// socket in the XSKMAP); cpu and redirect return XDP_REDIRECT (their map entries exist).
fn xdp_code(a: &Action) -> u32 {
    match a {
        Action::Drop => 1,
        Action::Pass | Action::Xsk => 2,
        Action::Tx => 3,
        Action::Cpu(_) | Action::Redirect(_) => 4,
    }
}

fn hexdump(f: &[u8]) -> String {
    f.chunks(16)
        .map(|c| c.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// No root needed: compile + table lookup agree with the linear reference.
#[test]
fn compiled_tables_agree_with_reference() {
    let seed = std::env::var("FASTPATH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_0001u64);
    let mut r = Rng(seed);
    for round in 0..40 {
        let (text, set) = rule_set(&mut r, 40);
        let c = compile("random", &set).unwrap();
        let map = c.entries.iter().copied().collect();
        for _ in 0..2_500 {
            let f = frame(&mut r);
            let want = match classify(&set, &f) {
                Verdict::Rule(i) => Some(i),
                _ => None,
            };
            let got = parse(&f).ok().and_then(|p| lookup_in(&c, &map, &p));
            assert_eq!(got, want, "seed {seed} round {round}\nrules:\n{text}\nframe:\n{}", hexdump(&f));
        }
    }
}

/// The BPF program agrees with the reference on action and counters (per rule, per action,
/// no_match, malformed, bad_fragment) for 100,000 random frames over 5 random rule sets with
/// every action, rate limits, malformed policies, long IPv6 chains and tiny fragments (seeded;
/// FASTPATH_SEED=n to vary).
#[test]
fn bpf_agrees_with_reference() {
    if fastpath::host::euid() != 0 {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "bpf_agrees_with_reference needs root and CI forbids skipping"
        );
        eprintln!("SKIPPED bpf_agrees_with_reference: needs root");
        return;
    }
    let seed = std::env::var("FASTPATH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_0002u64);
    let mut r = Rng(seed);
    let cls = fastpath::bpf::Classifier::load().unwrap_or_else(|e| panic!("{e:#}"));
    let mut seen = (0u64, 0u64, 0u64, 0u64);
    for round in 0..5 {
        let (text, set) = rule_set(&mut r, 60);
        let c = compile("random", &set).unwrap();
        let active = cls.swap_in(&c, &|i| fastpath::host::if_nametoindex(i)).unwrap();
        let mut per_rule = vec![0u64; set.rules.len()];
        let (mut no_match, mut malformed, mut bad_frag) = (0u64, 0u64, 0u64);
        let mut per_action = std::collections::BTreeMap::<&str, u64>::new();
        let malformed_action = set.malformed_action();
        for _ in 0..20_000 {
            let mut f = frame(&mut r);
            // BPF_PROG_TEST_RUN refuses XDP input shorter than an Ethernet header (EINVAL), so
            // frames truncated below 14 bytes are left to the Rust-only test above.
            while f.len() < 14 {
                f = frame(&mut r);
            }
            let v = classify(&set, &f);
            let taken = match v {
                Verdict::Rule(i) => {
                    per_rule[i] += 1;
                    &set.rules[i].action
                }
                Verdict::NoMatch => {
                    no_match += 1;
                    &set.default
                }
                Verdict::Malformed => {
                    malformed += 1;
                    &malformed_action
                }
                Verdict::BadFragment => {
                    bad_frag += 1;
                    &Action::Drop
                }
            };
            *per_action.entry(taken.name()).or_default() += 1;
            let want = xdp_code(taken);
            let got = cls.test_run(&f).unwrap();
            assert_eq!(
                got,
                want,
                "seed {seed} round {round}: {v:?}\nrules:\n{text}\nframe ({} bytes):\n{}",
                f.len(),
                hexdump(&f)
            );
        }
        let counters = cls.rule_counters(active, set.rules.len()).unwrap();
        let got: Vec<u64> = counters.iter().map(|c| c.0).collect();
        assert_eq!(got, per_rule, "per-rule counters, seed {seed} round {round}\nrules:\n{text}");
        let t = cls.totals(active).unwrap();
        assert_eq!(t.packets("no_match"), no_match, "no_match counter");
        assert_eq!(t.packets("malformed"), malformed, "malformed counter");
        assert_eq!(t.packets("bad_fragment"), bad_frag, "bad_fragment counter");
        assert_eq!(t.packets("rate_dropped"), 0, "rate limits set too high to bite");
        for name in ["pass", "drop", "xsk", "cpu", "tx", "redirect"] {
            let want = per_action.get(name).copied().unwrap_or(0);
            assert_eq!(t.packets(name), want, "action total {name}, seed {seed} round {round}\nrules:\n{text}");
        }
        seen.0 += malformed;
        seen.1 += no_match;
        seen.2 += per_rule.iter().sum::<u64>();
        seen.3 += bad_frag;
    }
    assert!(
        seen.0 > 5_000 && seen.1 > 1_000 && seen.2 > 10_000 && seen.3 > 500,
        "the random frames exercise every outcome (malformed, no match, matched, bad fragment): {seen:?}"
    );
}
