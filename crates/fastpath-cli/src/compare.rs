//! `fastpath compare`: the checks of the flags, the flags into the lab's options
//! (fastpath_lab::compare holds the experiment: every receive path side by side on a test bed
//! of its own, against in-kernel XDP_DROP), the `--svg` file and the output. The classifier
//! row's AF_XDP path is the command's own session ([`crate::session::open_for_lab`]).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::anyhow;
use fastpath_lab::compare::{self, CompareOptions};
use serde_json::json;

use crate::args::{CompareArgs, Pin};
use crate::error::{require_privileges, runtime, usage, CliResult};

/// What `compare` and `compare --inject` check before anything is set up: the duration, the
/// SVG path, two CPUs, root. Errors: exit 2 (usage) or 4 (privileges).
pub fn check(a: &CompareArgs) -> CliResult<()> {
    if !(a.duration >= 0.0 && a.duration.is_finite()) {
        return Err(usage(anyhow!("--duration {} is not accepted: use seconds >= 0", a.duration)));
    }
    if let Some(p) = &a.svg {
        crate::outfile::check(p, a.overwrite, "--svg").map_err(usage)?;
    }
    if fastpath::workers::online_cpus() < 2 {
        return Err(usage(anyhow!("compare needs 2 CPUs (generator on CPU 0, application on CPU 1)")));
    }
    require_privileges("compare")
}

/// `fastpath compare` (after [`check`]).
pub fn run(a: &CompareArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    let ncpu = fastpath::workers::online_cpus() as u32;
    if let Some(q) = a.queues {
        if !(2..=ncpu.min(64)).contains(&q) {
            return Err(usage(anyhow!(
                "--queues {q} is not accepted: use 2..={} (one generator thread per queue, at most one per CPU)",
                ncpu.min(64)
            )));
        }
    }
    let o = CompareOptions {
        runs: a.runs,
        duration_s: a.duration,
        pin: match a.pin {
            Pin::Same => compare::Pin::Same,
            Pin::Split => compare::Pin::Split,
        },
        queues: a.queues,
        peers: a.peers,
    };
    if a.peers {
        if a.duration <= 0.0 {
            return Err(usage(anyhow!("--peers needs --duration > 0 (the peers' rates are counted over it)")));
        }
        fastpath_lab::peers::check_installed(std::env::var("CI").as_deref() == Ok("true"))
            .map_err(|e| crate::error::env(anyhow!(e)))?;
    }
    let open_rx: fastpath_lab::path::OpenRx = Arc::new(crate::session::open_for_lab);
    let res = compare::run(&o, stop, &open_rx, &mut |l| eprintln!("{l}"))?;
    let cmd = compare::command(&o);
    if let Some(p) = &a.svg {
        crate::outfile::write(p, a.overwrite, "--svg", compare::svg(&res.rows, &cmd).as_bytes()).map_err(runtime)?;
    }
    if a.json {
        let mut v = json!({"type": "compare", "command": cmd, "frame_len": 64, "rows": res.rows});
        if a.peers {
            v["peers"] = res.peers.into();
        }
        println!("{v}");
        return Ok(());
    }
    print!("{}", compare::table(&o, &res.rows, &cmd));
    if a.peers {
        print!("\n{}", fastpath_lab::peers::table(&res.peers));
    }
    Ok(())
}
