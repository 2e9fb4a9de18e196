//! `fastpath bench MODE` and `fastpath gen`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::anyhow;
use fastpath::bench::{self, LoopOpts, SendLimits, Wait};
use fastpath::bpf::XdpGen;
use fastpath::netdev::NetDev;
use fastpath::packet::{build_udp_frame, SeqTracker, UdpFrameSpec};
use fastpath::stats::{Counters, Ctr};
use fastpath::xsk::XskError;
use serde_json::{json, Value};

use crate::args::{BenchArgs, BenchMode, Engine, FrameArgs, GenArgs, RunArgs, XskArgs};
use crate::error::{kernel, require_privileges, runtime, usage, CliResult};
use crate::report::{print_summary, Monitor};
use crate::session::{Role, Session};

/// Sets the flag when dropped: a worker's "I am done", on every exit path including panics.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

pub fn check_run(r: &RunArgs) -> CliResult<()> {
    if !(r.duration >= 0.0 && r.duration.is_finite()) {
        return Err(usage(anyhow!(
            "--duration {} is not accepted: use seconds >= 0 (0 = set up, attach, detach, exit)",
            r.duration
        )));
    }
    if !(r.interval > 0.0 && r.interval.is_finite()) {
        return Err(usage(anyhow!("--interval {} is not accepted: use seconds > 0", r.interval)));
    }
    Ok(())
}

pub fn enter_ns(netns: &Option<String>) -> CliResult<()> {
    if let Some(ns) = netns {
        fastpath_testbed::enter_netns(ns).map_err(crate::error::env)?;
    }
    Ok(())
}

pub fn frame_spec(f: &FrameArgs, iface: &str) -> CliResult<UdpFrameSpec> {
    let src_mac = match f.src_mac {
        Some(m) => m,
        None => NetDev::by_name(iface)
            .and_then(|d| d.mac())
            .map_err(|_| XskError::NoSuchInterface { iface: iface.to_string() })?,
    };
    Ok(UdpFrameSpec {
        src_mac,
        dst_mac: f.dst_mac,
        src_ip: f.src_ip,
        dst_ip: f.dst_ip,
        src_port: f.src_port,
        dst_port: f.dst_port,
        frame_len: f.frame_len as usize,
    })
}

/// The test-bed generator frame: 64-byte UDP from `dev` (ns a, 10.99.0.1:9000) to the receiving
/// veth (`dst_mac`, 10.99.0.2:9), checksums correct. Shared by demo, ddos and compare.
pub fn testbed_frame(dev: &NetDev, dst_mac: [u8; 6]) -> Result<Vec<u8>, fastpath::sys::SysError> {
    let spec = UdpFrameSpec {
        src_mac: dev.mac()?,
        dst_mac,
        src_ip: fastpath_testbed::IP4_A,
        dst_ip: fastpath_testbed::IP4_B,
        src_port: 9000,
        dst_port: 9,
        frame_len: 64,
    };
    let mut frame = vec![0u8; 64];
    build_udp_frame(&spec, &mut frame);
    Ok(frame)
}

fn loop_opts(x: &XskArgs) -> LoopOpts {
    LoopOpts { batch_size: x.batch_size, wait: if x.poll { Wait::Poll(100) } else { Wait::Spin } }
}

fn columns(mode: BenchMode) -> &'static [Ctr] {
    match mode {
        BenchMode::Rxdrop => &[Ctr::RxPackets],
        BenchMode::Txonly => &[Ctr::TxPackets, Ctr::TxCompleted],
        BenchMode::L2fwd => &[Ctr::RxPackets, Ctr::TxPackets],
        BenchMode::Xdpdrop | BenchMode::Ddos | BenchMode::RedirectCpu => &[Ctr::DropPackets],
    }
}

fn mode_name(m: BenchMode) -> &'static str {
    match m {
        BenchMode::Rxdrop => "rxdrop",
        BenchMode::Txonly => "txonly",
        BenchMode::L2fwd => "l2fwd",
        BenchMode::Xdpdrop => "xdpdrop",
        BenchMode::Ddos => "ddos",
        BenchMode::RedirectCpu => "redirect-cpu",
    }
}

fn tracker_json(t: &SeqTracker) -> Value {
    json!({
        "frames": t.frames, "unique": t.unique(), "duplicates": t.duplicates, "corrupt": t.corrupt,
        "foreign": t.foreign, "out_of_window": t.out_of_window,
        "streams": t.per_stream().iter().map(|(s, n, max)| json!({"stream": s, "unique": n, "max_seq": max, "missing": t.missing(*s, *max)})).collect::<Vec<_>>(),
    })
}

/// Says that set-up is done and what was obtained: `{"type":"ready",...}` with --json (scripts
/// and tests wait for it), a header line and the notes otherwise.
fn announce(kind: &str, path: &Value, notes: &[String], json_out: bool) {
    use std::io::Write;
    if json_out {
        println!("{}", json!({"type": "ready", "bench": kind, "path": path}));
    } else {
        let g = |k: &str| path.get(k).and_then(|v| v.as_str()).unwrap_or("-").to_string();
        println!(
            "fastpath {kind}: {} queue {} driver {} xdp {} {}",
            g("iface"),
            path.get("queue").and_then(|v| v.as_u64()).unwrap_or(0),
            g("driver"),
            g("xdp_mode"),
            g("copy_mode")
        );
        for n in notes {
            println!("note: {n}");
        }
    }
    let _ = std::io::stdout().flush();
}

/// `fastpath bench MODE`.
pub fn bench(a: &BenchArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    check_run(&a.run)?;
    if a.mode == BenchMode::Ddos {
        return crate::ddos::run(a, stop);
    }
    if a.mode == BenchMode::RedirectCpu {
        return crate::redirect_cpu::run(a, stop);
    }
    if a.xsk.iface.is_empty() {
        return Err(usage(anyhow!("bench {} needs -i/--iface", mode_name(a.mode))));
    }
    if a.path != crate::args::PathArg::Afxdp {
        return port_bench(a, stop);
    }
    let role = match a.mode {
        BenchMode::Rxdrop | BenchMode::L2fwd => Role::Rx,
        BenchMode::Txonly => Role::Tx,
        BenchMode::Xdpdrop | BenchMode::Ddos | BenchMode::RedirectCpu => Role::Drop,
    };
    crate::session::validate(&a.xsk, role)?;
    if a.rules.is_some() && role != Role::Rx {
        return Err(usage(anyhow!("--rules is for rxdrop and l2fwd (the AF_XDP receive paths)")));
    }
    require_privileges("bench")?;
    enter_ns(&a.xsk.netns)?;
    // Rules are read, validated and compiled before anything touches the interface.
    let compiled = match &a.rules {
        Some(p) => {
            Some(crate::filter_cmd::compile_rules(&crate::args::RulesArgs { file: Some(p.clone()), rules: vec![] })?.1)
        }
        None => None,
    };
    let spec = if a.mode == BenchMode::Txonly { Some(frame_spec(&a.frame, &a.xsk.iface)?) } else { None };
    let mut sess = Session::open_with(&a.xsk, role, compiled.as_ref())?;
    // Whether the interface is up is judged now, before "ready": a caller may set it down as
    // soon as it reads that line, and that must count as a loss.
    let dev = NetDev::by_name(&a.xsk.iface).ok();
    let link_watch = dev.clone().map(fastpath::netdev::LinkWatch::new);
    announce(mode_name(a.mode), &serde_json::to_value(&sess.info).unwrap_or(Value::Null), &sess.info.notes, a.run.json);
    let counters = Arc::new(Counters::default());
    let done = Arc::new(AtomicBool::new(false));
    let tracker = Arc::new(Mutex::new(None::<SeqTracker>));
    let sock = sess.sock.take();
    let mon = Monitor {
        xsk_fd: sess.stats_fd.as_ref(),
        drop: sess.drop_prog(),
        ethtool_dev: dev.clone(),
        watch_link: link_watch,
        ..Monitor::for_run(format!("{}:q{}", a.xsk.iface, a.xsk.queue), columns(a.mode), vec![counters.clone()], &a.run)
    };
    // Baselines first, then the worker: nothing it moves may fall before them.
    let watch = mon.start();
    let worker = match sock {
        Some(mut sock) if a.run.duration > 0.0 => {
            let (c, s, d, t) = (counters.clone(), stop.clone(), done.clone(), tracker.clone());
            let (mode, opts, cpu, verify, limits) = (
                a.mode,
                loop_opts(&a.xsk),
                a.xsk.cpu,
                a.verify,
                SendLimits { count: a.frame.count, rate_pps: a.frame.rate },
            );
            Some(std::thread::spawn(move || -> Result<(), fastpath::sys::SysError> {
                // Tell the monitor when this thread ends, however it ends (error, panic).
                let _done = SetOnDrop(d.clone());
                if let Some(cpu) = cpu {
                    fastpath::sys::pin_current_thread(cpu)?;
                }
                let r = match mode {
                    BenchMode::Rxdrop if verify => {
                        let mut tr = SeqTracker::default();
                        let r = bench::rxdrop(&mut sock, opts, &c, &s, |p| tr.record(p));
                        *t.lock().expect("tracker lock") = Some(tr);
                        r
                    }
                    BenchMode::Rxdrop => bench::rxdrop(&mut sock, opts, &c, &s, |_| {}),
                    BenchMode::L2fwd => bench::l2fwd(&mut sock, opts, &c, &s),
                    BenchMode::Txonly => {
                        bench::txonly(&mut sock, &spec.expect("txonly has a spec"), 0, limits, opts, &c, &s).map(|_| ())
                    }
                    BenchMode::Xdpdrop | BenchMode::Ddos | BenchMode::RedirectCpu => Ok(()),
                };
                r
            }))
        }
        _ => None,
    };
    mon.watch(&watch, &stop, &done);
    stop.store(true, Ordering::Relaxed);
    let mut lost = mon.link_lost();
    if let Some(w) = worker {
        let r = w.join().map_err(|_| runtime(anyhow!("the run loop panicked")))?;
        if r.is_err() && lost.is_none() {
            // The kernel's error (ENXIO, ENETDOWN) may come before the monitor's check.
            lost = dev.as_ref().and_then(|d| match d.link_event() {
                Some(fastpath::netdev::LinkEvent::Down) => Some(d.down_or_deleted()),
                e => e,
            });
        }
        if lost.is_none() {
            r.map_err(runtime)?;
        }
    }
    if let Some(ev) = lost {
        drop(sess); // detaches the XDP program (if the interface still exists)
        return Err(link_lost_error(&a.xsk.iface, ev));
    }
    // After the join: the worker's last completions are in the totals.
    let summary = mon.finish(watch);
    let mut extra = serde_json::Map::new();
    if let Some(t) = tracker.lock().expect("tracker lock").as_ref() {
        extra.insert("verify".into(), tracker_json(t));
    }
    if a.mode == BenchMode::Txonly {
        crate::report::insert_delivery(&mut extra, &summary);
    }
    let path = serde_json::to_value(&sess.info).unwrap_or(Value::Null);
    print_summary(mode_name(a.mode), &path, &summary, columns(a.mode), a.run.json, Value::Object(extra));
    drop(sess); // detaches the XDP program
    Ok(())
}

/// The error of a run whose interface went away: one line, exit 3 (environment).
pub fn link_lost_error(iface: &str, ev: fastpath::netdev::LinkEvent) -> crate::error::CliError {
    crate::error::env(anyhow!("interface {iface} {ev} while running; stopped, nothing of ours is left on it"))
}

/// `fastpath gen`.
pub fn gen(g: &GenArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    if g.engine == Engine::Xsk {
        let b = BenchArgs {
            mode: BenchMode::Txonly,
            xsk: g.xsk.clone(),
            run: g.run.clone(),
            frame: g.frame.clone(),
            verify: false,
            rules: None,
            cpumap: Default::default(),
            flood_threads: 1,
            path: crate::args::PathArg::Afxdp,
        };
        return bench(&b, stop);
    }
    check_run(&g.run)?;
    if g.xsk.iface.is_empty() {
        return Err(usage(anyhow!("gen needs -i/--iface")));
    }
    let ncpu = fastpath::sys::online_cpus();
    let first = g.xsk.cpu.unwrap_or(0);
    if first >= ncpu {
        return Err(usage(anyhow!("--cpu {first} is not accepted: this machine has CPUs 0..={}", ncpu - 1)));
    }
    if g.threads as usize > ncpu {
        return Err(usage(anyhow!("--threads {} is not accepted: at most one thread per CPU (1..={ncpu})", g.threads)));
    }
    require_privileges("gen")?;
    enter_ns(&g.xsk.netns)?;
    let spec = frame_spec(&g.frame, &g.xsk.iface)?;
    let dev = NetDev::by_name(&g.xsk.iface).map_err(|_| XskError::NoSuchInterface { iface: g.xsk.iface.clone() })?;
    let mut frame = vec![0u8; spec.frame_len];
    build_udp_frame(&spec, &mut frame);
    let gen = Arc::new(XdpGen::load(dev.ifindex)?);
    let seq0 = gen.per_cpu_seq().map_err(kernel)?;
    let path = json!({"iface": g.xsk.iface, "queue": 0, "driver": dev.driver().unwrap_or_default(), "engine": "xdp-live", "threads": g.threads});
    announce("gen", &path, &[], g.run.json);
    let counters: Vec<Arc<Counters>> = (0..g.threads).map(|_| Arc::new(Counters::default())).collect();
    let cpus: Vec<usize> = (0..g.threads as usize).map(|i| (first + i) % ncpu).collect();
    let limits = SendLimits { count: g.frame.count, rate_pps: g.frame.rate };
    let mon = Monitor {
        gen: Some(&gen),
        ethtool_dev: Some(dev.clone()),
        ..Monitor::for_run(format!("{}:gen", g.xsk.iface), &[Ctr::TxPackets], counters.clone(), &g.run)
    };
    // Baselines before the first frame, the summary after the threads are joined.
    let watch = mon.start();
    let live = if g.run.duration > 0.0 {
        Some(
            bench::LiveGen::start(gen.clone(), &frame, &cpus, limits, g.xsk.batch_size.min(256), &counters)
                .map_err(runtime)?,
        )
    } else {
        None
    };
    let never = AtomicBool::new(false);
    let done = live.as_ref().map(|l| l.done_flag()).unwrap_or(&never);
    mon.watch(&watch, &stop, done);
    if let Some(l) = live {
        l.stop().map_err(kernel)?;
    }
    let summary = mon.finish(watch);
    let seq1 = gen.per_cpu_seq().map_err(kernel)?;
    let per_cpu: Vec<Value> = seq1
        .iter()
        .zip(seq0.iter().chain(std::iter::repeat(&0)))
        .enumerate()
        .filter(|(_, (a, b))| *a != *b)
        .map(|(cpu, (a, b))| json!({"stream": cpu, "first_seq": b + 1, "last_seq": a, "frames": a - b}))
        .collect();
    let mut extra = serde_json::Map::new();
    extra.insert("streams".into(), Value::Array(per_cpu));
    crate::report::insert_delivery(&mut extra, &summary);
    print_summary("gen", &path, &summary, &[Ctr::TxPackets], g.run.json, Value::Object(extra));
    Ok(())
}

/// `bench rxdrop|txonly --path tpacket|tap|tap-uring`: the same run loops over the port API.
fn port_bench(a: &BenchArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    use crate::args::PathArg;
    use fastpath::io::{self, PortSpec};
    if !matches!(a.mode, BenchMode::Rxdrop | BenchMode::Txonly) {
        return Err(usage(anyhow!("--path is for rxdrop and txonly; {} runs on AF_XDP", mode_name(a.mode))));
    }
    require_privileges("bench")?;
    enter_ns(&a.xsk.netns)?;
    let tap = fastpath::io::tap::TapOptions::default();
    let spec = match a.path {
        PathArg::Afxdp => unreachable!("handled by bench()"),
        PathArg::Tpacket => PortSpec::Tpacket(Default::default()),
        PathArg::Tap => PortSpec::Tap(tap),
        PathArg::TapUring => PortSpec::TapUring(tap),
    };
    let frame = if a.mode == BenchMode::Txonly {
        let spec = frame_spec(&a.frame, &a.xsk.iface).or_else(|_| {
            // A TAP device does not exist before it is opened: use a local MAC then.
            Ok::<_, crate::error::CliError>(UdpFrameSpec {
                src_mac: a.frame.src_mac.unwrap_or([2, 0, 0, 0, 0, 1]),
                dst_mac: a.frame.dst_mac,
                src_ip: a.frame.src_ip,
                dst_ip: a.frame.dst_ip,
                src_port: a.frame.src_port,
                dst_port: a.frame.dst_port,
                frame_len: a.frame.frame_len as usize,
            })
        })?;
        let mut f = vec![0u8; spec.frame_len];
        build_udp_frame(&spec, &mut f);
        Some(f)
    } else {
        None
    };
    let mut port = io::open(&a.xsk.iface, &spec).map_err(|e| match e {
        io::PortError::Config { .. } | io::PortError::UnknownPath(_) => usage(e),
        io::PortError::Xsk(x) => crate::error::CliError::from(x),
        other => crate::error::kernel(other),
    })?;
    if matches!(a.path, PathArg::Tap | PathArg::TapUring) {
        // A TAP device is born down; writes to it fail with EIO until it is up.
        fastpath::sys::set_link_up(&a.xsk.iface).map_err(crate::error::kernel)?;
    }
    let path = json!({"iface": a.xsk.iface, "queue": 0, "driver": port.path(), "path": port.path()});
    announce(mode_name(a.mode), &path, &[], a.run.json);
    let counters = Arc::new(Counters::default());
    let done = Arc::new(AtomicBool::new(false));
    let tracker = Arc::new(Mutex::new(None::<SeqTracker>));
    let worker = (a.run.duration > 0.0).then(|| {
        let (c, s, d, t, verify, cpu, limits) = (
            counters.clone(),
            stop.clone(),
            done.clone(),
            tracker.clone(),
            a.verify,
            a.xsk.cpu,
            SendLimits { count: a.frame.count, rate_pps: a.frame.rate },
        );
        let batch = a.xsk.batch_size as usize;
        std::thread::spawn(move || -> Result<fastpath::io::PortStats, String> {
            let _done = SetOnDrop(d);
            if let Some(cpu) = cpu {
                fastpath::sys::pin_current_thread(cpu).map_err(|e| e.to_string())?;
            }
            let mut tr = SeqTracker::default();
            match frame {
                None => {
                    while !s.load(Ordering::Relaxed) {
                        let n = port
                            .rx_burst(batch, 100, &mut |p| {
                                c.add(Ctr::RxBytes, p.len() as u64);
                                if verify {
                                    tr.record(p);
                                }
                            })
                            .map_err(|e| e.to_string())?;
                        c.add(Ctr::RxPackets, n as u64);
                    }
                }
                Some(f) => {
                    // Bursts of up to 64 frames (one system call each on tpacket and tap-uring),
                    // stamped in place: no allocation in the loop.
                    let mut frames: Vec<Vec<u8>> = (0..batch.clamp(1, 64)).map(|_| f.clone()).collect();
                    let start = std::time::Instant::now();
                    let mut seq = 0u64;
                    while !s.load(Ordering::Relaxed) && limits.count.is_none_or(|n| seq < n) {
                        let mut want = frames.len() as u64;
                        if let Some(n) = limits.count {
                            want = want.min(n - seq);
                        }
                        if let Some(r) = limits.rate_pps {
                            let due = ((start.elapsed().as_secs_f64() * r as f64) as u64).saturating_sub(seq);
                            if due == 0 {
                                std::thread::sleep(Duration::from_micros(100));
                                continue;
                            }
                            want = want.min(due);
                        }
                        let now = fastpath::sys::monotonic_ns();
                        for (i, fr) in frames.iter_mut().take(want as usize).enumerate() {
                            fastpath::packet::stamp(
                                fr,
                                &fastpath::packet::Payload { stream: 0, seq: seq + 1 + i as u64, tstamp_ns: now },
                            );
                        }
                        let refs: [&[u8]; 64] =
                            std::array::from_fn(|i| frames.get(i).map_or(&[][..], |b| b.as_slice()));
                        let mut off = 0;
                        while off < want as usize && !s.load(Ordering::Relaxed) {
                            off += port.tx_burst(&refs[off..want as usize]).map_err(|e| e.to_string())?;
                        }
                        seq += off as u64;
                        c.add(Ctr::TxPackets, off as u64);
                        c.add(Ctr::TxBytes, off as u64 * f.len() as u64);
                    }
                }
            }
            if verify {
                *t.lock().expect("tracker lock") = Some(tr);
            }
            port.stats().map_err(|e| e.to_string())
        })
    });
    let mon = Monitor::for_run(
        format!("{}:{}", a.xsk.iface, path["path"].as_str().unwrap_or("")),
        columns(a.mode),
        vec![counters.clone()],
        &a.run,
    );
    let summary = mon.run(&stop, &done);
    stop.store(true, Ordering::Relaxed);
    let mut extra = serde_json::Map::new();
    if let Some(w) = worker {
        let st =
            w.join().map_err(|_| runtime(anyhow!("the run loop panicked")))?.map_err(|e| runtime(anyhow!("{e}")))?;
        extra.insert(
            "kernel_drops".into(),
            json!(st.drops.iter().map(|(k, v)| (k.clone(), *v)).collect::<std::collections::BTreeMap<_, _>>()),
        );
    }
    if let Some(t) = tracker.lock().expect("tracker lock").as_ref() {
        extra.insert("verify".into(), tracker_json(t));
    }
    print_summary(mode_name(a.mode), &path, &summary, columns(a.mode), a.run.json, Value::Object(extra));
    Ok(())
}
