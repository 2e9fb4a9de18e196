//! `fastpath bench redirect-cpu` (docs/ARCHITECTURE.md §4b): every frame of the interface through a CPUMAP to the CPUs of
//! `--cpus` (library: `fastpath::bpf::cpumap`), as xdp-bench's redirect-cpu. Interval lines give
//! the frames the interface program redirected and the frames each target CPU's CPUMAP program
//! received, per second; the summary adds per-CPU totals and, with `-e`, the XDP tracepoint
//! counters of this CPUMAP and interface, and `unaccounted` (redirected minus delivered minus
//! every tracepoint-named loss: 0 when every frame is accounted for).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath::bpf::{AttachOpts, BpfError, CpuDist, CpumapConfig, RedirectCpu, RemoteAction};
use fastpath::netdev::Iface;
use fastpath_tools::stats::rate;
use serde_json::{json, Value};

use crate::args::{BenchArgs, CpuDistArg, RemoteActionArg};
use crate::common::{check_run, enter_ns, link_lost_error};
use crate::error::{kernel, require_privileges, usage, CliResult};
use crate::report::{print_summary, Monitor};

/// `--cpus` unset: every online CPU but 0 (CPU 0 takes the receive softirq on this kind of
/// machine: the veth's NAPI runs on the sender's CPU); CPU 0 alone on a one-CPU machine.
pub fn default_cpus(online: usize) -> Vec<u32> {
    if online <= 1 {
        vec![0]
    } else {
        (1..online.min(fastpath::bpf::cpumap::MAX_CPUS + 1) as u32).collect()
    }
}

fn config(a: &BenchArgs) -> CliResult<CpumapConfig> {
    let c = &a.cpumap;
    let mut cfg = CpumapConfig::new(
        a.xsk.cpus.clone().map(|l| l.0).unwrap_or_else(|| default_cpus(fastpath::workers::online_cpus())),
    );
    cfg.dist = match c.cpu_dist {
        CpuDistArg::RoundRobin => CpuDist::RoundRobin,
        CpuDistArg::Hash => CpuDist::Hash,
        CpuDistArg::Proto => CpuDist::Proto,
    };
    cfg.qsize = c.qsize;
    cfg.remote_action = match c.remote_action {
        RemoteActionArg::Drop => RemoteAction::Drop,
        RemoteActionArg::Pass => RemoteAction::Pass,
    };
    cfg.validate(fastpath::workers::online_cpus()).map_err(|e| match e {
        // The library names the value; the option that gave it is this command's.
        BpfError::BadValue { what, value, accepted } => {
            let flag = if what == fastpath::bpf::cpumap::QSIZE { "--qsize" } else { "--cpus" };
            usage(anyhow::anyhow!("{flag} {value} is not accepted: {accepted}"))
        }
        other => usage(other),
    })?;
    Ok(cfg)
}

fn per_cpu(r: &RedirectCpu) -> Vec<u64> {
    r.delivered_per_cpu().unwrap_or_default()
}

/// `fastpath bench redirect-cpu`.
pub fn run(a: &BenchArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    check_run(&a.run)?;
    if a.xsk.iface.is_empty() {
        return Err(usage(anyhow!("bench redirect-cpu needs -i/--iface")));
    }
    // Every value is checked before anything is loaded or attached.
    let cfg = config(a)?;
    require_privileges("bench redirect-cpu")?;
    let metrics = crate::metrics::start(a.run.metrics)?;
    enter_ns(&a.xsk.netns)?;
    let iface = Iface::resolve(&a.xsk.iface)?;
    let tp = if a.run.extended { Some(crate::report::attach_tracepoints()?) } else { None };
    let opts = AttachOpts::mode(a.xsk.xdp_mode.mode()).force(a.xsk.force);
    let att = RedirectCpu::load(&cfg).and_then(|p| p.attach(&iface, opts)).map_err(|e| match e {
        BpfError::BadValue { .. } => usage(e),
        e => crate::error::CliError::from(e),
    })?;
    let (rc, mode, notes) = (att.prog, att.mode, att.notes);
    let cpumap_id = rc.cpumap_id().map_err(kernel)?;
    if let Some(t) = tp {
        // Only this CPUMAP's enqueue/kthread events; the interface filter is set by the monitor.
        t.set_cpumap_id(cpumap_id).map_err(kernel)?;
    }
    let link_watch = fastpath::netdev::LinkWatch::new(iface.dev().clone());
    let path = json!({
        "iface": a.xsk.iface, "queue": 0, "driver": iface.dev().driver().unwrap_or_default(), "xdp_mode": mode.name(),
        "cpus": cfg.cpus, "cpu_dist": cfg.dist.name(), "qsize": cfg.qsize, "remote_action": cfg.remote_action.name(),
        "cpumap_id": cpumap_id,
    });
    if a.run.json {
        println!("{}", json!({"type": "ready", "bench": "redirect-cpu", "path": path}));
    } else {
        println!(
            "fastpath redirect-cpu: {} driver {} xdp {} -> CPUMAP to cpus {:?} ({}), qsize {}, remote action {}",
            a.xsk.iface,
            path["driver"].as_str().unwrap_or("-"),
            mode.name(),
            cfg.cpus,
            cfg.dist.name(),
            cfg.qsize,
            cfg.remote_action.name()
        );
        for n in &notes {
            println!("note: {n}");
        }
    }
    let _ = std::io::stdout().flush();
    let cpus = cfg.cpus.clone();
    let extra = || -> Vec<(String, u64)> {
        let d = per_cpu(&rc);
        let mut v = vec![
            ("redirected_packets".to_string(), rc.redirected().unwrap_or(0)),
            ("delivered_packets".to_string(), d.iter().sum()),
        ];
        v.extend(cpus.iter().map(|&c| (format!("cpu{c}_packets"), d.get(c as usize).copied().unwrap_or(0))));
        v
    };
    let mon = Monitor {
        metrics: metrics.as_ref(),
        ethtool_dev: Some(iface.dev().clone()),
        watch_link: Some(link_watch),
        extra: Some(&extra),
        ..Monitor::for_run(format!("{}:cpumap", a.xsk.iface), &[], vec![], &a.run)
    };
    let d0 = per_cpu(&rc);
    let w = mon.start();
    let never = AtomicBool::new(false);
    mon.watch(&w, &stop, &never);
    if let Some(ev) = mon.link_lost() {
        drop(rc);
        return Err(link_lost_error(&a.xsk.iface, ev));
    }
    // Frames already redirected may still sit in a CPU's queue: wait until the counts stop
    // moving (50 ms unchanged, at most 2 s) rather than a fixed sleep.
    let t0 = Instant::now();
    let mut last = (rc.redirected().unwrap_or(0), per_cpu(&rc));
    while t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(50));
        let now = (rc.redirected().unwrap_or(0), per_cpu(&rc));
        if now == last {
            break;
        }
        last = now;
    }
    let summary = mon.finish(w);
    let d1 = per_cpu(&rc);
    let delivered_per_cpu: BTreeMap<String, u64> = (0..fastpath::workers::online_cpus())
        .map(|c| {
            let v = d1.get(c).copied().unwrap_or(0).saturating_sub(d0.get(c).copied().unwrap_or(0));
            (c.to_string(), v)
        })
        .collect();
    let redirected = summary.extra.get("redirected_packets").copied().unwrap_or(0);
    let delivered = summary.extra.get("delivered_packets").copied().unwrap_or(0);
    let mut extra_out = serde_json::Map::new();
    extra_out.insert("redirected".into(), json!(redirected));
    extra_out.insert("delivered".into(), json!(delivered));
    extra_out.insert("delivered_pps".into(), json!(rate(delivered, (summary.duration_s * 1e9) as u64).round() as u64));
    extra_out.insert("delivered_per_cpu".into(), json!(delivered_per_cpu));
    if let Some(t) = &summary.tracepoints {
        // Between the interface program and the CPUMAP program a frame is lost only where a
        // tracepoint names it: the queue was full, the redirect failed, the program aborted.
        let named = t.cpumap_enqueue.values().map(|q| q.drops).sum::<u64>()
            + t.redirect_errors.values().sum::<u64>()
            + t.exceptions.aborted
            + t.exceptions.redirect
            + t.exceptions.unknown;
        extra_out.insert("named_drops".into(), json!(named));
        extra_out.insert("unaccounted".into(), json!(redirected as i64 - delivered as i64 - named as i64));
    }
    print_summary("redirect-cpu", &path, &summary, &[], a.run.json, Value::Object(extra_out));
    drop(rc); // detaches
    Ok(())
}
