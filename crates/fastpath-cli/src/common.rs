//! The CLI's shared plumbing, at the bottom: what several commands need (run options, the
//! namespace to enter, the rule compiler's front, the link-lost error, the
//! link-event line). No command module imports another; they all may import this one.

use anyhow::anyhow;
use fastpath::rules::compile::{compile, Compiled};
use fastpath::rules::{parse_rule_texts, parse_toml, Action, RuleSet};
use serde_json::json;

use crate::args::{RulesArgs, RunArgs};
use crate::error::{usage, CliResult};

/// Checks `--duration` and `--interval` (before anything is set up).
pub fn check_run(r: &RunArgs) -> CliResult<()> {
    // Infinite only as `filter load`'s default (main.rs `parsed`): the parser caps a given value.
    if !(r.duration >= 0.0 && (r.duration.is_finite() || r.duration == f64::INFINITY)) {
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

/// Enters `--netns` (a named network namespace) on the calling thread, if given, and keeps its
/// name for the hints this run prints ([`crate::hints::netns_flag`]). Errors: exit 3 (environment) when it
/// cannot be entered.
pub fn enter_ns(netns: &Option<String>) -> CliResult<()> {
    if let Some(ns) = netns {
        fastpath_testbed::enter_netns(ns).map_err(crate::error::env)?;
        crate::hints::set_entered_ns(ns);
    }
    Ok(())
}

/// The largest rule file read, in bytes (64 MiB): a full rule set (131,072 rules) at 512 bytes
/// a rule; 100,000 rules as `scripts/bench_reload.py` writes them take 6.5 MB.
pub const MAX_RULE_FILE_BYTES: u64 = 64 << 20;

/// Reads the rule file `p`: a regular file (a symlink to one is followed) of at most
/// [`MAX_RULE_FILE_BYTES`], as UTF-8. Opened with O_NONBLOCK and checked with fstat before a
/// byte is read: a FIFO or a device (/dev/zero) is refused, never waited on or read without
/// bound. Errors: exit 2, one line naming the file and what is accepted.
pub fn read_rule_file(p: &std::path::Path) -> CliResult<String> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let bad = |why: String| usage(anyhow!("rule file {}: {why}", p.display()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(p)
        .map_err(|e| bad(format!("cannot read it: {e}")))?;
    let m = f.metadata().map_err(|e| bad(format!("cannot stat it: {e}")))?;
    let ft = m.file_type();
    if !ft.is_file() {
        let kind = if ft.is_fifo() {
            "a FIFO"
        } else if ft.is_char_device() {
            "a character device"
        } else if ft.is_block_device() {
            "a block device"
        } else if ft.is_socket() {
            "a socket"
        } else if ft.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        };
        return Err(bad(format!("{kind} is not accepted: give a regular file (TOML rules)")));
    }
    if m.len() > MAX_RULE_FILE_BYTES {
        return Err(bad(format!("{} bytes is not accepted: at most {MAX_RULE_FILE_BYTES} bytes", m.len())));
    }
    // The size again while reading: a file that grows meanwhile is cut at the cap, and refused.
    let mut bytes = Vec::with_capacity(m.len() as usize);
    f.take(MAX_RULE_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| bad(format!("cannot read it: {e}")))?;
    if bytes.len() as u64 > MAX_RULE_FILE_BYTES {
        return Err(bad(format!("more than {MAX_RULE_FILE_BYTES} bytes is not accepted")));
    }
    String::from_utf8(bytes)
        .map_err(|e| bad(format!("not UTF-8 text (byte {}): TOML rules are UTF-8", e.utf8_error().valid_up_to())))
}

/// Reads, validates and compiles the rules: everything that can fail on bad input fails here,
/// before any interface is touched.
pub fn compile_rules(r: &RulesArgs) -> CliResult<(RuleSet, Compiled, String)> {
    let (mut set, source) = match &r.file {
        Some(p) => {
            let text = read_rule_file(p)?;
            (parse_toml(&p.display().to_string(), &text)?, p.display().to_string())
        }
        None if r.rules.is_empty() => {
            return Err(usage(anyhow!(
                "no rules: give a rule file, or --rule 'k=v,...' (e.g. --rule 'proto=udp,dst_port=9,action=drop')"
            )))
        }
        None => (RuleSet { rules: vec![], default: Action::Pass, malformed: None }, "--rule".to_string()),
    };
    if !r.rules.is_empty() {
        let extra = parse_rule_texts("--rule", &r.rules, set.default.clone())?;
        let mut rules = std::mem::take(&mut set.rules);
        rules.extend(extra.rules);
        // Every limit again on the union (priority order kept, file rules first on ties).
        let malformed = set.malformed.take();
        set = fastpath::rules::finish(&source, rules, set.default.clone())?;
        set.malformed = malformed;
    }
    let c = compile(&source, &set)?;
    Ok((set, c, source))
}

/// The error of a run whose interface went away: one line, exit 3 (environment).
pub fn link_lost_error(iface: &str, ev: fastpath::netdev::LinkEvent) -> crate::error::CliError {
    crate::error::env(anyhow!("interface {iface} {ev} while running; stopped, nothing of ours is left on it"))
}

/// One link event: a JSON `event` line, or a line on stderr. Shared by both engines.
pub fn event_line(json_out: bool, t: f64, iface: &str, event: &str, detail: String) {
    if json_out {
        println!("{}", json!({"type": "event", "t_s": t, "iface": iface, "event": event, "detail": detail}));
    } else {
        eprintln!("fastpath fwd: {t:.3} s: {iface} {event}: {detail}");
    }
}
