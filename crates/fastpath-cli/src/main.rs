//! The `fastpath` command. No unsafe code here: everything privileged lives in the library.
#![forbid(unsafe_code)]

// Every print of this crate goes through `out`: a closed stdout ends the command quietly
// instead of panicking (see out.rs). Defined before the modules so they see these, not std's.
macro_rules! println {
    () => { $crate::out::line(format_args!("")) };
    ($($arg:tt)*) => { $crate::out::line(format_args!($($arg)*)) };
}
macro_rules! print {
    ($($arg:tt)*) => { $crate::out::text(format_args!($($arg)*)) };
}
macro_rules! eprintln {
    () => { $crate::out::err_line(format_args!("")) };
    ($($arg:tt)*) => { $crate::out::err_line(format_args!($($arg)*)) };
}

mod args;
mod assets_cmd;
mod bench_cmd;
mod capture_cmd;
mod common;
mod compare;
mod ddos;
mod demo;
mod doctor_cmd;
mod error;
mod filter_cmd;
mod fwd_cmd;
mod fwd_xsk;
mod hints;
mod inject;
mod logging;
mod metrics;
mod out;
mod outfile;
mod pcap_expr;
mod pcap_in;
mod pingpong;
mod probe_cmd;
mod redirect_cpu;
mod replay_cmd;
mod report;
mod rotate;
mod service;
mod session;
mod ss_cmd;
mod testbed_cmd;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::{CommandFactory, FromArgMatches};

use args::{Cli, Cmd};

fn main() {
    logging::init();
    let cli = match Cli::command().try_get_matches().and_then(|m| parsed(&m)) {
        Ok(c) => c,
        // --help, --version, and the help shown when a subcommand is missing.
        Err(e) if !e.use_stderr() || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            e.exit()
        }
        Err(e) => {
            // One line (docs/ARCHITECTURE.md §5): clap's message without its usage and "--help" lines.
            let text = e.render().to_string();
            let line: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .collect();
            eprintln!("{}fastpath: {}", logging::error_prefix(), line.join(" "));
            std::process::exit(error::EXIT_USAGE);
        }
    };
    if let Err(e) = check_metrics(&cli.cmd) {
        eprintln!("{}fastpath: error: {:#}", logging::error_prefix(), e.err);
        std::process::exit(e.code);
    }
    let stop = Arc::new(AtomicBool::new(false));
    out::init(stop.clone());
    // SIGINT/SIGTERM/SIGQUIT ask every loop to stop; the process then removes what it made
    // (test beds, XDP programs) on its normal path. Every wait loop checks the flag.
    // (SIGKILL still detaches our programs: the kernel closes the bpf_link fds.) SIGHUP asks
    // `filter load` to re-read its rules, as a daemon does; it ends every other command (the
    // hangup of its terminal).
    let hup = Arc::new(AtomicBool::new(false));
    let reloads = matches!(&cli.cmd, Cmd::Filter(args::FilterCmd::Load { .. }));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGQUIT] {
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    let _ = signal_hook::flag::register(signal_hook::consts::SIGHUP, if reloads { hup.clone() } else { stop.clone() });
    let _ = fastpath::bpf::raise_memlock_limit(); // not fatal: CAP_IPC_LOCK or memcg accounting suffice
                                                  // -e on bench and filter stats: the XDP tracepoint monitor, attached for the whole run
                                                  // (after every command-line value has been checked; redirect-cpu checks its own first).
    let extended = match &cli.cmd {
        Cmd::Bench(b) => b.run.extended && b.mode != args::BenchMode::RedirectCpu,
        Cmd::Filter(args::FilterCmd::Stats { run, .. }) => run.extended,
        _ => false,
    };
    if extended {
        if let Err(e) = report::attach_tracepoints() {
            eprintln!("{}fastpath: error: {:#}", logging::error_prefix(), e.err);
            std::process::exit(e.code);
        }
    }
    let r = match &cli.cmd {
        Cmd::Testbed(t) => testbed_cmd::run(t),
        // Commands never call each other: the modes and engines with a module of their own are
        // dispatched here, after the checks they share with the rest of their command.
        Cmd::Bench(b) if b.mode == args::BenchMode::Ddos => bench_cmd::check_ddos(b).and_then(|_| ddos::run(b, stop)),
        Cmd::Bench(b) if b.mode == args::BenchMode::Pingpong => {
            bench_cmd::check_common(b).and_then(|_| pingpong::run(b, stop))
        }
        Cmd::Bench(b) if b.mode == args::BenchMode::RedirectCpu => {
            bench_cmd::check_common(b).and_then(|_| redirect_cpu::run(b, stop))
        }
        Cmd::Bench(b) => bench_cmd::bench(b, stop),
        Cmd::Gen(g) if g.pcap.is_some() => replay_cmd::run(g, stop),
        Cmd::Gen(g) => bench_cmd::gen(g, stop),
        Cmd::Demo(d) => demo::run(d, stop),
        Cmd::Filter(f) => filter_cmd::run(f, stop, hup),
        Cmd::Compare(c) if c.inject => compare::check(c).and_then(|_| inject::run(c, stop)),
        Cmd::Compare(c) => compare::check(c).and_then(|_| compare::run(c, stop)),
        Cmd::Fwd(f) if f.engine == args::FwdEngineArg::Xsk => fwd_xsk::run(f, stop),
        Cmd::Fwd(f) => fwd_cmd::run(f, stop),
        Cmd::Probe(p) => probe_cmd::run(p),
        Cmd::Ss(s) => ss_cmd::run(s),
        Cmd::Capture(c) => capture_cmd::run(c, stop),
        Cmd::Doctor(d) => doctor_cmd::run(d),
        Cmd::Assets(a) => assets_cmd::run(a),
    };
    if let Err(e) = r {
        let msg = format!("{:#}", e.err).replace('\n', " ");
        eprintln!("{}fastpath: error: {msg}", logging::error_prefix());
        std::process::exit(e.code);
    }
    out::flush();
    if out::closed() {
        std::process::exit(out::EXIT_CLOSED);
    }
}

/// The command line as [`Cli`], with the defaults that depend on the others: `gen --pcap` runs
/// until the replay ends, so its --duration (10 s elsewhere) is a year unless given; `filter
/// load` runs until signalled unless given (duration infinite); and whether interval lines are
/// printed (logging::interval_lines: --interval given, --json, stdout a terminal or the journal).
fn parsed(m: &clap::ArgMatches) -> Result<Cli, clap::Error> {
    let mut cli = Cli::from_arg_matches(m)?;
    // The matches of the innermost subcommand (`filter load`'s, `bench`'s): where RunArgs is.
    let mut leaf = m;
    while let Some((_, sub)) = leaf.subcommand() {
        leaf = sub;
    }
    let given = |id: &str| leaf.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
    if let Cmd::Gen(g) = &mut cli.cmd {
        if g.pcap.is_some() && !given("duration") {
            g.run.duration = args::MAX_DURATION_S;
        }
    }
    // `filter load` runs until SIGINT/SIGTERM unless --duration is given: a service.
    if let Cmd::Filter(args::FilterCmd::Load { run, .. }) = &mut cli.cmd {
        if !given("duration") {
            run.duration = f64::INFINITY;
        }
    }
    let run = match &mut cli.cmd {
        Cmd::Bench(b) => Some(&mut b.run),
        Cmd::Gen(g) => Some(&mut g.run),
        Cmd::Fwd(f) => Some(&mut f.run),
        Cmd::Filter(args::FilterCmd::Load { run, .. } | args::FilterCmd::Stats { run, .. }) => Some(run),
        _ => None,
    };
    if let Some(run) = run {
        run.interval_lines = logging::interval_lines(given("interval"), run.json);
    }
    Ok(cli)
}

/// `--metrics` on a non-loopback address needs `--metrics-listen-any` (metrics::check_listen).
fn check_metrics(cmd: &Cmd) -> error::CliResult<()> {
    let run = match cmd {
        Cmd::Bench(b) => &b.run,
        Cmd::Gen(g) => &g.run,
        Cmd::Fwd(f) => &f.run,
        Cmd::Filter(args::FilterCmd::Load { run, .. } | args::FilterCmd::Stats { run, .. }) => run,
        Cmd::Capture(c) => return metrics::check_listen(c.metrics, c.metrics_listen_any),
        Cmd::Filter(args::FilterCmd::Export { metrics, metrics_listen_any, .. }) => {
            return metrics::check_listen(Some(*metrics), *metrics_listen_any)
        }
        _ => return Ok(()),
    };
    metrics::check_listen(run.metrics, run.metrics_listen_any)
}
