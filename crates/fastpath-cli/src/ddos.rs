//! `fastpath bench ddos`: the flags into the lab's options (fastpath_lab::ddos holds the
//! experiment: its test bed, the flood, the defences, sockperf, the table and the chart), the
//! `-e` tracepoint counters over the run, the `--svg` file and the output.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::anyhow;
use fastpath_lab::coalesce::{DEFAULT_RX_USECS, MAX_RX_USECS};
use fastpath_lab::ddos::{
    self, parse_flood_rates, DdosBed, DdosOptions, Defence, Flood, FloodRate, Model, SERVICE_CPU,
};
use serde_json::json;

use crate::args::{BenchArgs, DefenceArg, FloodKind, ModelArg};
use crate::error::{env, require_privileges, runtime, usage, CliResult};

fn flood(k: FloodKind) -> Flood {
    match k {
        FloodKind::Udp => Flood::Udp,
        FloodKind::Syn => Flood::Syn,
        FloodKind::Ack => Flood::Ack,
    }
}

fn defence(d: DefenceArg) -> Defence {
    match d {
        DefenceArg::None => Defence::None,
        DefenceArg::Nft => Defence::Nft,
        DefenceArg::Iptables => Defence::Iptables,
        DefenceArg::Fastpath => Defence::Fastpath,
        DefenceArg::Fastpath10k => Defence::Fastpath10k,
        DefenceArg::FastpathSyncookie => Defence::FastpathSyncookie,
    }
}

pub fn run(a: &BenchArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    if let Some(p) = &a.ddos.svg {
        crate::outfile::check(p, a.ddos.overwrite, "--svg").map_err(usage)?;
    }
    let ncpu = fastpath::workers::online_cpus();
    if ncpu < 2 {
        return Err(env(anyhow!(
            "bench ddos needs 2 CPUs (the attacker's and the service's); this machine has {ncpu}"
        )));
    }
    // The attacker's CPUs: every CPU but the service's, from CPU 0 up.
    let attacker: Vec<usize> = (0..ncpu).filter(|&c| c != SERVICE_CPU).collect();
    if a.flood_threads == 0 || a.flood_threads as usize > attacker.len() {
        return Err(usage(anyhow!(
            "--flood-threads {} is not accepted: 1..={} (one per CPU other than the service's CPU {SERVICE_CPU})",
            a.flood_threads,
            attacker.len()
        )));
    }
    let rates = match &a.ddos.flood_rates {
        Some(s) => parse_flood_rates(s).map_err(|e| usage(anyhow!("{e}")))?,
        None => match a.frame.rate {
            Some(r) => vec![r.to_string().parse::<FloodRate>().map_err(|e| usage(anyhow!("--rate: {e}")))?],
            None => parse_flood_rates("25k,50k,100k,250k,1M,2M,max").map_err(|e| usage(anyhow!("{e}")))?,
        },
    };
    let mut defences: Vec<Defence> = Vec::new();
    for d in a.ddos.defences.iter().map(|d| defence(*d)) {
        if defences.contains(&d) {
            let list: Vec<&str> = a.ddos.defences.iter().map(|d| defence(*d).name()).collect();
            return Err(usage(anyhow!("--defences {} is not accepted: {} is listed twice", list.join(","), d.name())));
        }
        defences.push(d);
    }
    let models = match a.ddos.model {
        ModelArg::PerFrame => vec![Model::PerFrame],
        ModelArg::Coalesced => vec![Model::Coalesced],
        ModelArg::Both => vec![Model::PerFrame, Model::Coalesced],
    };
    let rx_usecs = match a.ddos.rx_usecs {
        Some(_) if !models.contains(&Model::Coalesced) => {
            return Err(usage(anyhow!(
                "--rx-usecs is not accepted with --model per-frame: it sets the coalesced model's rx-usecs (--model coalesced or both)"
            )))
        }
        Some(u) if !(1..=MAX_RX_USECS).contains(&u) => {
            return Err(usage(anyhow!(
                "--rx-usecs {u} is not accepted: 1..={MAX_RX_USECS} microseconds (no coalescing: --model per-frame)"
            )))
        }
        Some(u) => u,
        None => DEFAULT_RX_USECS,
    };
    require_privileges("bench ddos")?;
    let kind = flood(a.ddos.flood);
    let o = DdosOptions {
        flood: kind,
        defences,
        rates,
        flood_cpus: attacker[..a.flood_threads as usize].to_vec(),
        duration_s: a.run.duration,
        models,
        rx_usecs,
        flood_sources: a.ddos.flood_sources,
    };
    let bed = ddos::prepare(&o)?;
    if a.run.duration == 0.0 {
        // Smoke mode: set up (test bed, server, every defence) and tear down.
        bed.smoke()?;
        println!("bench ddos: set up and torn down (--duration 0)");
        return Ok(());
    }
    let model = bed.model();
    // -e: the XDP tracepoint counters over the whole run (system-wide: the flood's refusals
    // are counted at the sending veth, in the other namespace).
    let tp = if a.run.extended { crate::report::tracepoints() } else { None };
    let tp0 = tp.and_then(|t| t.snapshot().ok());
    // One line per phase on stderr, with or without --json.
    let phases = bed.run(&stop, &mut |l| eprintln!("{l}"))?;
    // Per model: its no-flood trans/s and survivable rates.
    let baselines: Vec<(Model, f64)> = bed.models().iter().map(|m| (*m, DdosBed::baseline(&phases, *m))).collect();
    let surv: Vec<ddos::Survival> =
        baselines.iter().flat_map(|(m, b)| ddos::survival(&phases, *m, bed.defences(), *b)).collect();
    let (first, baseline) = baselines[0];
    let tracepoints = match (tp.and_then(|t| t.snapshot().ok()), &tp0) {
        (Some(t1), Some(t0)) => Some(t1.delta(t0)),
        _ => None,
    };
    if let Some(p) = &a.ddos.svg {
        let text = bed.svg(first, &phases, baseline);
        crate::outfile::write(p, a.ddos.overwrite, "--svg", text.as_bytes()).map_err(runtime)?;
    }
    if a.run.json {
        let mut o = json!({"type": "summary", "bench": "ddos", "flood": kind.name(), "flood_sources": bed.flood_sources(), "testbed": bed.testbed_name(), "duration_s": bed.secs(),
            "model": model, "no_flood_transactions_per_s": baseline, "phases": phases, "survivable": surv,
            "notes": bed.notes(), "rx_usecs": bed.models().contains(&Model::Coalesced).then(|| bed.rx_usecs()),
            "models": baselines.iter().map(|(m, b)| json!({"model": m.name(), "description": bed.model_line(*m),
                "no_flood_transactions_per_s": b})).collect::<Vec<_>>()});
        if let Some(t) = &tracepoints {
            o["tracepoints"] = json!(t);
        }
        println!("{o}");
        return Ok(());
    }
    println!("{model}");
    for n in bed.notes() {
        println!("note: {n}");
    }
    for (m, b) in &baselines {
        println!("{}", bed.model_line(*m));
        print!("{}", bed.table(*m, &phases, &surv, *b));
    }
    if baselines.len() == 2 {
        print!("{}", bed.side_by_side(&phases, &surv));
    }
    if let Some(t) = &tracepoints {
        println!("XDP tracepoints over the run (all interfaces):");
        for l in crate::report::tracepoint_lines(t, 0) {
            println!("{l}");
        }
    }
    Ok(())
}
