//! `make conformance`: every scenario of `fastpath_conformance::scenarios` in the four modes
//! the kernel's suite runs on veth (XDP in skb and in drv mode, each in softirq and busy-poll
//! mode) on one 4-queue veth bed; one line per scenario and mode, then a summary per XDP mode
//! and one for the whole run. Exits 1 if any scenario
//! FAILs or is MISSING, or if the bed cannot be built (root is needed: in CI a test that
//! cannot run fails). `CONFORMANCE=NAME[,NAME]` runs only those scenarios.

use std::io::Write;
use std::time::Instant;

use fastpath_conformance::{scenarios, xdp_name, Mode, Napi, Outcome};

fn main() {
    let only: Option<Vec<String>> =
        std::env::var("CONFORMANCE").ok().map(|s| s.split(',').map(|n| n.trim().to_uppercase()).collect());
    // As every privileged test of the project (fastpath_testbed::gate): without root it fails,
    // or skips loudly when FASTPATH_TEST_UNPRIVILEGED=1 asks for the unprivileged subset
    // (never under CI=true; docs/ARCHITECTURE.md §8).
    match fastpath_testbed::gate::skip_or_fail("conformance", (!fastpath_testbed::gate::is_root()).then_some("root")) {
        Ok(true) => {}
        Ok(false) => return,
        Err(m) => {
            eprintln!("{m}");
            std::process::exit(1);
        }
    }
    let bed = match fastpath_conformance::xsk::bed() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("conformance: cannot run: {e}");
            std::process::exit(1);
        }
    };
    // Per XDP mode (skb, drv): passed, failed, missing, not runnable here.
    let mut counts = [[0usize; 4]; 2];
    for mode in Mode::ALL {
        // Busy-poll mode as the kernel's suite runs it: both veths defer their interrupts
        // (napi_defer_hard_irqs 2, gro_flush_timeout 200 µs) so that the sockets' busy
        // polling, not the softirq, drives the NAPI; put back afterwards.
        let _napi = match mode.napi {
            Napi::BusyPoll => match fastpath_conformance::xsk::NapiDefer::set(&bed, 2, 200_000) {
                Ok(g) => Some(g),
                Err(e) => {
                    eprintln!("conformance: busy-poll mode: {e}");
                    drop(bed);
                    std::process::exit(1);
                }
            },
            Napi::Softirq => None,
        };
        for s in scenarios::all() {
            if only.as_ref().is_some_and(|o| !o.iter().any(|n| n == s.name)) {
                continue;
            }
            let t0 = Instant::now();
            // A scenario that panics is a FAIL of its own, not the end of the table.
            let o =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (s.run)(&bed, mode))).unwrap_or_else(|p| {
                    let why = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    let _ = bed.set_mtu(1500);
                    Outcome::Fail(format!("panicked: {why}"))
                });
            println!(
                "{:<36} {:<3} {:<9} {:<12} {} ({:.1} s)",
                s.name,
                xdp_name(mode.xdp),
                mode.napi_name(),
                o.word(),
                o.detail(),
                t0.elapsed().as_secs_f64()
            );
            let _ = std::io::stdout().flush();
            let per_xdp = &mut counts[usize::from(mode.xdp == fastpath::bpf::XdpMode::Native)];
            per_xdp[match o {
                Outcome::Pass(_) => 0,
                Outcome::Fail(_) => 1,
                Outcome::Missing(_) => 2,
                Outcome::NotHere(_) => 3,
            }] += 1;
        }
    }
    for (name, [p, f, m, n]) in ["skb", "drv"].iter().zip(counts) {
        println!("conformance {name}: {p} passed, {f} failed, {m} missing in fastpath, {n} not runnable here");
    }
    let [pass, fail, missing, not_here] = [0, 1, 2, 3].map(|i| counts[0][i] + counts[1][i]);
    println!("conformance: {pass} passed, {fail} failed, {missing} missing in fastpath, {not_here} not runnable here");
    drop(bed);
    if fail + missing > 0 {
        std::process::exit(1);
    }
}
