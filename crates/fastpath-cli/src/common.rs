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

/// Reads, validates and compiles the rules: everything that can fail on bad input fails here,
/// before any interface is touched.
pub fn compile_rules(r: &RulesArgs) -> CliResult<(RuleSet, Compiled, String)> {
    let (mut set, source) = match &r.file {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).map_err(|e| usage(anyhow!("cannot read rule file {}: {e}", p.display())))?;
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
