//! `fastpath gen --pcap FILE`: a capture replayed out of an interface, frame for frame, on
//! AF_XDP TX (`--engine xsk`) or in-kernel live frames (`--engine xdp-live`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::anyhow;
use fastpath::bpf::{ReplayTiming, XdpReplay};
use fastpath::netdev::{Iface, LinkWatch};
use fastpath_tools::replay::{self, LivePlan, ReplayLive, Schedule};
use fastpath_tools::stats::{Counters, Ctr};
use serde_json::{json, Value};

use crate::args::{Engine, GenArgs};
use crate::common::{check_run, enter_ns, link_lost_error};
use crate::error::{kernel, require_privileges, runtime, usage, CliResult};
use crate::pcap_in::Capture;
use crate::report::{announce, insert_delivery, print_summary, Monitor};
use crate::session::{Role, Session};

/// What the options make of a replay: the timing, the sends in all (None: until stopped), and
/// the timing's name for the summary.
fn plan(g: &GenArgs, frames: usize) -> (ReplayTiming, Option<u64>, &'static str) {
    let (timing, name) = match (g.topspeed, g.frame.rate) {
        (true, _) => (ReplayTiming::TopSpeed, "topspeed"),
        (false, Some(r)) => (ReplayTiming::IntervalNs((1_000_000_000 / r).max(1)), "rate"),
        (false, None) => (ReplayTiming::File, "file"),
    };
    let passes = (g.loops > 0).then(|| (frames as u64).saturating_mul(g.loops));
    let total = match (passes, g.frame.count) {
        (Some(p), Some(c)) => Some(p.min(c)),
        (p, c) => p.or(c),
    };
    (timing, total, name)
}

/// The highest --rate with --pcap: sends are spaced by a whole number of nanoseconds (1e9 /
/// rate, truncated), off by under 1% up to this rate (100 ns), by up to half above 5e8.
const MAX_RATE: u64 = 10_000_000;

/// The checks made before anything is read or set up. Errors: usage (exit 2).
fn check(g: &GenArgs) -> CliResult<()> {
    check_run(&g.run)?;
    if g.xsk.iface.is_empty() {
        return Err(usage(anyhow!("gen --pcap needs -i/--iface (the interface the frames leave by)")));
    }
    if g.tx_meta.any() {
        return Err(usage(anyhow!(
            "{} is not accepted with --pcap: the file's frames leave as they are (no TX metadata); leave it out",
            g.tx_meta.first_name()
        )));
    }
    if g.threads != 1 {
        return Err(usage(anyhow!(
            "--threads {} is not accepted with --pcap: one thread sends the file's frames in order (leave --threads out)",
            g.threads
        )));
    }
    if let Some(q) = g.xsk.queues.filter(|&q| q != 1) {
        return Err(usage(anyhow!(
            "--queues {q} is not accepted with --pcap: one queue sends the file's frames in order (use -q/--queue)"
        )));
    }
    if let Some(c) = &g.xsk.cpus {
        let list = c.0.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        return Err(usage(anyhow!(
            "--cpus {list} is not accepted with --pcap: one thread sends the file's frames in order (use --cpu to pin it)"
        )));
    }
    if let Some(r) = g.frame.rate.filter(|&r| r > MAX_RATE) {
        return Err(usage(anyhow!(
            "--rate {r} is not accepted with --pcap: at most {MAX_RATE} frames/s (sends are spaced in whole nanoseconds); use --topspeed for as fast as the engine goes"
        )));
    }
    if g.frame.count == Some(0) {
        return Err(usage(anyhow!("--count 0 sends nothing: use 1.. frames, or leave --count out")));
    }
    Ok(())
}

/// With `--engine xdp-live`: at most [`fastpath::bpf::replay::max_frames`] frames (each takes a
/// kernel map slot). Errors: usage (exit 2), naming the count, the cap and --engine xsk.
fn check_live_frames(g: &GenArgs, frames: usize) -> CliResult<()> {
    use fastpath::bpf::replay::{max_frames, MAX_MAP_BYTES, SLOT_BYTES};
    if g.engine == Engine::XdpLive && frames > max_frames() {
        return Err(usage(anyhow!(
            "--pcap {:?} holds {frames} frames: --engine xdp-live keeps each in a {SLOT_BYTES}-byte kernel map slot, at most {} frames ({} MiB); use --engine xsk",
            g.pcap.as_deref().unwrap_or(std::path::Path::new("?")),
            max_frames(),
            MAX_MAP_BYTES >> 20
        )));
    }
    Ok(())
}

/// Whether `f` carries a VLAN tag (802.1Q 0x8100 or 802.1ad 0x88a8 after the MACs).
fn vlan_tagged(f: &[u8]) -> bool {
    matches!(f.get(12..14), Some([0x81, 0x00] | [0x88, 0xa8]))
}

/// The longest frame `iface` takes (its MTU + 14, + 4 for a VLAN-tagged frame as the kernel
/// allows one tag beyond the MTU, `is_skb_forwardable` and veth's XDP transmit, when the MTU
/// can be read) and, with `--engine xdp-live`, one live-frames page; the first frame longer
/// than that is refused, naming its number, its length and the limit. Errors: usage (exit 2).
fn check_lengths(g: &GenArgs, cap: &Capture, iface: &Iface) -> CliResult<()> {
    let mtu = iface.dev().mtu().ok();
    let live = (g.engine == Engine::XdpLive).then(fastpath::bpf::replay::max_frame_len);
    for (i, f) in cap.frames.iter().enumerate() {
        let why = match (mtu, live) {
            (Some(m), _) if !vlan_tagged(f) && f.len() > m as usize + 14 => {
                format!("{iface} (MTU {m}) takes at most {} bytes (the MTU + 14; + 4 with a VLAN tag)", m + 14)
            }
            (Some(m), _) if vlan_tagged(f) && f.len() > m as usize + 18 => {
                format!("{iface} (MTU {m}) takes at most {} bytes with a VLAN tag (the MTU + 18)", m + 18)
            }
            (_, Some(l)) if f.len() > l => {
                format!("--engine xdp-live sends at most {l} bytes (one live-frames page; use --engine xsk)")
            }
            _ => continue,
        };
        return Err(usage(anyhow!(
            "--pcap {:?}: frame {} is {} bytes: {why}",
            g.pcap.as_deref().unwrap_or(std::path::Path::new("?")),
            i + 1,
            f.len()
        )));
    }
    Ok(())
}

/// `fastpath gen --pcap FILE`.
///
/// # Errors
///
/// Usage (exit 2) for options or a capture that cannot be replayed (see
/// [`crate::pcap_in::read`], and frames longer than the path takes), then privileges, set-up
/// (kernel, interface), a lost link, or the sender's error.
pub fn run(g: &GenArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    check(g)?;
    let file = g.pcap.as_deref().expect("run only with --pcap");
    let cap = crate::pcap_in::read(file)?;
    check_live_frames(g, cap.frames.len())?;
    let ncpu = fastpath::workers::online_cpus();
    if let Some(c) = g.xsk.cpu.filter(|&c| c >= ncpu) {
        return Err(usage(anyhow!("--cpu {c} is not accepted: this machine has CPUs 0..={}", ncpu - 1)));
    }
    require_privileges("gen")?;
    let metrics = crate::metrics::start(g.run.metrics)?;
    enter_ns(&g.xsk.netns)?;
    let iface = Iface::resolve(&g.xsk.iface)?;
    check_lengths(g, &cap, &iface)?;
    let (timing, total, timing_name) = plan(g, cap.frames.len());
    let mut at_ns = cap.ts_ns;
    replay::make_relative(&mut at_ns);
    let mut extra = serde_json::Map::new();
    extra.insert("pcap".into(), json!(file.to_string_lossy()));
    extra.insert("pcap_format".into(), json!(cap.format));
    extra.insert("pcap_frames".into(), json!(cap.frames.len()));
    extra.insert("loops".into(), json!(g.loops));
    extra.insert("timing".into(), json!(timing_name));
    let job = Job { timing, total, at_ns, frames: cap.frames };
    match g.engine {
        Engine::Xsk => run_xsk(g, stop, iface, job, metrics.as_ref(), extra),
        Engine::XdpLive => run_live(g, stop, iface, job, metrics.as_ref(), extra),
    }
}

/// The frames and their schedule.
struct Job {
    timing: ReplayTiming,
    total: Option<u64>,
    at_ns: Vec<u64>,
    frames: fastpath_tools::replay::PackedFrames,
}

/// `--engine xsk`: an AF_XDP socket on -q, its TX ring fed the file's frames.
fn run_xsk(
    g: &GenArgs,
    stop: Arc<AtomicBool>,
    iface: Iface,
    job: Job,
    metrics: Option<&crate::metrics::MetricsServer>,
    mut extra: serde_json::Map<String, Value>,
) -> CliResult<()> {
    let mut sess = Session::open_on(iface, &g.xsk, Role::Tx, crate::session::RxChoice::Redirect)?;
    let dev = sess.iface.dev().clone();
    let link_watch = LinkWatch::new(dev.clone());
    let mut path = serde_json::to_value(&sess.info).unwrap_or(Value::Null);
    path["engine"] = json!("xsk");
    announce("gen", &path, &sess.info.notes, g.run.json);
    let mut port = sess.ports.pop().ok_or_else(|| runtime(anyhow!("the session opened no AF_XDP socket")))?;
    let counters = Arc::new(Counters::default());
    let done = Arc::new(AtomicBool::new(false));
    let columns = [Ctr::TxPackets, Ctr::TxCompleted];
    let mon = Monitor {
        metrics,
        xsk_fds: sess.stats_fds.iter().collect(),
        ethtool_dev: Some(dev.clone()),
        watch_link: Some(link_watch),
        ..Monitor::for_run(format!("{}:gen", g.xsk.iface), &columns, vec![counters.clone()], &g.run)
    };
    let watch = mon.start();
    let worker = (g.run.duration > 0.0).then(|| {
        let (c, s, d) = (counters.clone(), stop.clone(), done.clone());
        let batch = g.xsk.batch_size as usize;
        fastpath_tools::threads::spawn_pinned("gen-replay".into(), g.xsk.cpu, move || {
            let _done = fastpath_tools::threads::SetOnDrop(d);
            let sched = Schedule { at_ns: &job.at_ns, timing: job.timing, total: job.total };
            replay::replay_port(&mut port, &job.frames, &sched, batch, &c, &s)
        })
    });
    let never = AtomicBool::new(false);
    mon.watch(&watch, &stop, if worker.is_some() { &done } else { &never });
    stop.store(true, Ordering::Relaxed);
    let mut lost = mon.link_lost();
    let result = match worker {
        Some(w) => Some(w.join().map_err(|_| runtime(anyhow!("the replay loop panicked")))?),
        None => None,
    };
    if matches!(result, Some(Err(_))) && lost.is_none() {
        lost = dev.link_event().map(|e| match e {
            fastpath::netdev::LinkEvent::Down => dev.down_or_deleted(),
            e => e,
        });
    }
    if let Some(ev) = lost {
        drop(sess);
        return Err(link_lost_error(&g.xsk.iface, ev));
    }
    let sent = match result {
        Some(r) => r?,
        None => 0,
    };
    let summary = mon.finish(watch);
    extra.insert("sent".into(), json!(sent));
    insert_delivery(&mut extra, &summary);
    print_summary("gen", &path, &summary, &columns, g.run.json, Value::Object(extra));
    drop(sess);
    Ok(())
}

/// `--engine xdp-live`: the frames in the replay program's map, sent by BPF_PROG_RUN live
/// frames on one CPU (--cpu, default 0).
fn run_live(
    g: &GenArgs,
    stop: Arc<AtomicBool>,
    iface: Iface,
    job: Job,
    metrics: Option<&crate::metrics::MetricsServer>,
    mut extra: serde_json::Map<String, Value>,
) -> CliResult<()> {
    let dev = iface.dev();
    let frames: Vec<(u64, &[u8])> = job.at_ns.iter().copied().zip(job.frames.iter()).collect();
    let rp = Arc::new(XdpReplay::load(dev.ifindex, &frames)?);
    let cpu = g.xsk.cpu.unwrap_or(0);
    let path = json!({"iface": g.xsk.iface, "queue": 0, "driver": dev.driver().unwrap_or_default(), "engine": "xdp-live", "threads": 1, "cpu": cpu});
    announce("gen", &path, &[], g.run.json);
    let counters = Arc::new(Counters::default());
    let mon = Monitor {
        metrics,
        ethtool_dev: Some(dev.clone()),
        watch_link: Some(LinkWatch::new(dev.clone())),
        ..Monitor::for_run(format!("{}:gen", g.xsk.iface), &[Ctr::TxPackets], vec![counters.clone()], &g.run)
    };
    // Down at the start is the user's choice (as on xsk); going down later is a loss.
    let up_at_start = dev.link_event().is_none();
    let watch = mon.start();
    let live = if g.run.duration > 0.0 {
        let batch = g.xsk.batch_size.min(256);
        let plan = LivePlan { timing: job.timing, total: job.total, at_ns: job.at_ns };
        Some(ReplayLive::start(rp, cpu, plan, batch, counters).map_err(runtime)?)
    } else {
        None
    };
    let never = AtomicBool::new(false);
    mon.watch(&watch, &stop, live.as_ref().map(|l| l.done_flag()).unwrap_or(&never));
    let result = live.map(ReplayLive::stop);
    // The program cannot see a redirect fail (the kernel frees the frame and counts nothing
    // the program reads): a link that went down or away ends the run as on xsk, exit 3,
    // rather than a summary counting frames that never left.
    let lost = mon.link_lost().or_else(|| {
        up_at_start.then(|| dev.link_event()).flatten().map(|e| match e {
            fastpath::netdev::LinkEvent::Down => dev.down_or_deleted(),
            e => e,
        })
    });
    if let Some(ev) = lost {
        return Err(link_lost_error(&g.xsk.iface, ev));
    }
    let sent = match result {
        Some(r) => r.map_err(kernel)?,
        None => 0,
    };
    let summary = mon.finish(watch);
    extra.insert("sent".into(), json!(sent));
    insert_delivery(&mut extra, &summary);
    print_summary("gen", &path, &summary, &[Ctr::TxPackets], g.run.json, Value::Object(extra));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn gen(args: &[&str]) -> Result<GenArgs, clap::Error> {
        let mut v = vec!["fastpath", "gen", "-i", "x"];
        v.extend_from_slice(args);
        crate::args::Cli::try_parse_from(v).map(|c| match c.cmd {
            crate::args::Cmd::Gen(g) => g,
            _ => unreachable!(),
        })
    }

    #[test]
    fn pcap_conflicts_with_frame_building_and_its_flags_require_it() {
        use clap::error::ErrorKind;
        for f in [
            &["--frame-len", "100"][..],
            &["--flows", "4"],
            &["--src-ip", "10.99.0.9"],
            &["--dst-mac", "02:00:00:00:00:01"],
            &["--src-port", "1"],
        ] {
            let mut a = vec!["--pcap", "f.pcap"];
            a.extend_from_slice(f);
            assert_eq!(gen(&a).unwrap_err().kind(), ErrorKind::ArgumentConflict, "{f:?}");
        }
        assert_eq!(gen(&["--loop", "2"]).unwrap_err().kind(), ErrorKind::MissingRequiredArgument);
        assert_eq!(gen(&["--topspeed"]).unwrap_err().kind(), ErrorKind::MissingRequiredArgument);
        assert_eq!(
            gen(&["--pcap", "f", "--topspeed", "--rate", "10"]).unwrap_err().kind(),
            ErrorKind::ArgumentConflict
        );
        // --rate, --count and --loop go with --pcap; without it gen is unchanged.
        assert!(gen(&["--pcap", "f", "--rate", "10", "--count", "5", "--loop", "0"]).is_ok());
        assert!(gen(&["--frame-len", "100"]).is_ok());
    }

    #[test]
    fn cpus_refused_with_pcap() {
        let g = gen(&["--pcap", "f", "--cpus", "0"]).unwrap();
        let e = format!("{:#}", check(&g).unwrap_err().err);
        assert!(e.contains("--cpus 0 is not accepted with --pcap") && e.contains("--cpu"), "{e}");
        assert!(check(&gen(&["--pcap", "f", "--cpu", "0"]).unwrap()).is_ok());
    }

    #[test]
    fn rates_whose_interval_truncates_refused() {
        assert!(check(&gen(&["--pcap", "f", "--rate", "10000000"]).unwrap()).is_ok());
        let g = gen(&["--pcap", "f", "--rate", "600000000"]).unwrap();
        let e = format!("{:#}", check(&g).unwrap_err().err);
        assert!(e.contains("--rate 600000000 is not accepted with --pcap: at most 10000000 frames/s"), "{e}");
    }

    #[test]
    fn plan_from_the_options() {
        let g = gen(&["--pcap", "f"]).unwrap();
        assert_eq!(plan(&g, 3), (ReplayTiming::File, Some(3), "file"));
        let g = gen(&["--pcap", "f", "--loop", "2", "--rate", "1000"]).unwrap();
        assert_eq!(plan(&g, 3), (ReplayTiming::IntervalNs(1_000_000), Some(6), "rate"));
        let g = gen(&["--pcap", "f", "--loop", "0", "--topspeed"]).unwrap();
        assert_eq!(plan(&g, 3), (ReplayTiming::TopSpeed, None, "topspeed"));
        let g = gen(&["--pcap", "f", "--loop", "0", "--count", "7"]).unwrap();
        assert_eq!(plan(&g, 3).1, Some(7));
        let g = gen(&["--pcap", "f", "--loop", "5", "--count", "7"]).unwrap();
        assert_eq!(plan(&g, 1).1, Some(5), "the passes end first");
    }
}
