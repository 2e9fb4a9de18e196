//! `fastpath demo`: the checks of the flags, the flags into the lab's options
//! (fastpath_lab::demo holds the experiment: a test bed, xdp-live traffic into AF_XDP rxdrop,
//! then into in-kernel XDP_DROP, one table), the `--output` file and the output. Both receive
//! paths are the command's own sessions ([`crate::session::open_for_lab`]). Everything it
//! creates is removed on every exit path (the test bed guard deletes the namespaces; closing the
//! bpf_link fds detaches the programs).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::anyhow;
use fastpath_lab::demo::{self, DemoOptions};

use crate::args::DemoArgs;
use crate::error::{require_privileges, runtime, usage, CliResult};

pub fn run(d: &DemoArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    if !(d.duration >= 0.0 && d.duration.is_finite()) {
        return Err(usage(anyhow!("--duration {} is not accepted: use seconds >= 0", d.duration)));
    }
    if let Some(p) = &d.output {
        crate::outfile::check(p, d.overwrite, "--output").map_err(usage)?;
    }
    let ncpu = fastpath::workers::online_cpus();
    for (flag, cpu) in [("--app-cpu", d.app_cpu), ("--gen-cpu", d.gen_cpu)] {
        if cpu >= ncpu {
            return Err(usage(anyhow!("{flag} {cpu} is not accepted: this machine has CPUs 0..={}", ncpu - 1)));
        }
    }
    if d.threads as usize > ncpu {
        return Err(usage(anyhow!(
            "--threads {} is not accepted: at most one generator thread per CPU (1..={ncpu})",
            d.threads
        )));
    }
    require_privileges("demo")?;
    let o = DemoOptions { duration_s: d.duration, threads: d.threads, app_cpu: d.app_cpu, gen_cpu: d.gen_cpu };
    let open_rx: fastpath_lab::path::OpenRx = Arc::new(crate::session::open_for_lab);
    let r = demo::run(&o, &stop, &open_rx, &mut |l| eprintln!("{l}"))?;
    let out = r.json(&o);
    if let Some(p) = &d.output {
        crate::outfile::write(p, d.overwrite, "--output", format!("{out}\n").as_bytes()).map_err(runtime)?;
    }
    if d.json {
        println!("{out}");
    } else {
        print!("{}", r.table());
    }
    let interrupted = r.interrupted;
    r.down()?;
    if interrupted {
        return Err(runtime(anyhow!("interrupted; test bed removed")));
    }
    Ok(())
}
