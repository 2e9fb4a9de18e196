//! `fastpath bench pingpong`: the flags into the lab's options (fastpath_lab::pingpong holds
//! the experiment: its test bed, both ends of each mode, the busy-poll NAPI profile, sockperf,
//! the table) and the output.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use fastpath_lab::pingpong::{self, Mode, PingpongOpts};
use serde_json::json;

use crate::args::BenchArgs;
use crate::error::{require_privileges, usage, CliResult};

/// The options of `bench pingpong`, checked (exit 2 for a bad value, before anything is made;
/// main ran `bench_cmd::check_common` first).
fn options(a: &BenchArgs) -> CliResult<PingpongOpts> {
    if a.run.metrics.is_some() {
        return Err(usage(anyhow!("--metrics is not accepted with bench pingpong (its runs are seconds long)")));
    }
    if !a.xsk.iface.is_empty() {
        return Err(usage(anyhow!(
            "-i {} is not accepted with bench pingpong: it runs on a test bed (its own, or --testbed NAME)",
            a.xsk.iface
        )));
    }
    if let Some(flag) = unused_flag(std::env::args_os()) {
        return Err(usage(anyhow!("{flag} is not accepted with bench pingpong: it does not use it")));
    }
    if a.run.duration <= 0.0 {
        return Err(usage(anyhow!(
            "--duration {} is not accepted with bench pingpong: use more than 0 seconds (the longest a run may take)",
            a.run.duration
        )));
    }
    let p = &a.pingpong;
    let mut modes = Vec::new();
    for m in &p.modes {
        let mode = Mode::parse(m.trim())
            .ok_or_else(|| usage(anyhow!("--modes {m} is not accepted: use {}", pingpong::mode_keys())))?;
        if modes.contains(&mode) {
            return Err(usage(anyhow!("--modes {} is not accepted: {m} is listed twice", p.modes.join(","))));
        }
        modes.push(mode);
    }
    let o = PingpongOpts {
        modes,
        count: a.frame.count.unwrap_or(pingpong::DEFAULT_COUNT),
        max_run: Duration::from_secs_f64(a.run.duration),
        runs: p.runs,
        client_cpu: p.client_cpu,
        server_cpu: p.server_cpu,
        testbed: p.testbed.clone(),
    };
    o.validate()?;
    Ok(o)
}

/// The flags `bench pingpong` reads (clap ids); -i and --metrics have refusals of their own.
const USED: &[&str] =
    &["mode", "modes", "runs", "client_cpu", "server_cpu", "testbed", "count", "duration", "json", "iface", "metrics"];

/// The first flag given on the command line `argv` that `bench pingpong` does not use, as
/// written in the help (`--frame-len`), or None.
fn unused_flag(argv: impl IntoIterator<Item = std::ffi::OsString>) -> Option<String> {
    use clap::parser::ValueSource;
    use clap::CommandFactory;
    let cmd = crate::args::Cli::command();
    let m = cmd.clone().try_get_matches_from(argv).ok()?;
    let (name, sub) = m.subcommand()?;
    let bench = cmd.find_subcommand(name)?;
    let found = bench.get_arguments().find_map(|arg| {
        let id = arg.get_id().as_str();
        if USED.contains(&id) || sub.value_source(id) != Some(ValueSource::CommandLine) {
            return None;
        }
        Some(arg.get_long().map_or_else(|| format!("-{}", arg.get_short().unwrap_or('?')), |l| format!("--{l}")))
    });
    found
}

pub fn run(a: &BenchArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    let o = options(a)?;
    require_privileges("bench pingpong")?;
    let r = pingpong::run(&o, &stop)?;
    if a.run.json {
        println!("{}", json!({"type": "summary", "bench": "pingpong", "report": r}));
        return Ok(());
    }
    println!(
        "bench pingpong: {} round trips x {} runs per mode, {}-byte frames, client CPU {} / server CPU {}, kernel {}",
        r.count, r.runs, r.frame_len, r.client_cpu, r.server_cpu, r.kernel
    );
    for n in &r.notes {
        println!("note: {n}");
    }
    print!("{}", pingpong::table(&r));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<std::ffi::OsString> {
        ["fastpath", "bench", "pingpong"].iter().chain(a).map(Into::into).collect()
    }

    #[test]
    fn flags_pingpong_does_not_use_are_named() {
        assert_eq!(unused_flag(argv(&["--runs", "2", "--count", "9", "--json"])), None);
        assert_eq!(unused_flag(argv(&["--frame-len", "1500"])).as_deref(), Some("--frame-len"));
        assert_eq!(unused_flag(argv(&["--runs", "1", "--busy-poll"])).as_deref(), Some("--busy-poll"));
        assert_eq!(unused_flag(argv(&["--rate", "10"])).as_deref(), Some("--rate"));
        assert_eq!(unused_flag(argv(&["-q", "1"])).as_deref(), Some("--queue"));
    }
}
