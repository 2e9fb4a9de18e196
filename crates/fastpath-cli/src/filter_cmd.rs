//! `fastpath filter check|load|reload|stats|show|unload`: the rule classifier at the driver.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath::bpf::classifier::{pin_dir, state::State, STAT_NAMES};
use fastpath::bpf::{AttachOpts, AttachedClassifier, BpfError, Classifier, PinRules, PinnedClassifier, SetIndex};
use fastpath::netdev::{Iface, NetDev};
use fastpath::rules::RuleSet;
use fastpath_tools::stats::{rate, thousands};
use serde_json::json;

use crate::args::{FilterCmd, FilterTarget, RulesArgs, RunArgs};
use crate::common::{check_run, compile_rules, enter_ns};
use crate::error::{env, require_privileges, runtime, usage, CliResult};

/// The file `filter reload` and `filter unload` lock (one reload at a time per interface):
/// `/run/fastpath/<netns inode>-<iface>.lock`, named after the pin directory.
fn lock_path(iface: &str) -> PathBuf {
    let d = pin_dir(iface);
    PathBuf::from("/run/fastpath")
        .join(format!("{}.lock", d.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()))
}

/// As every library error (error.rs): pins of another user or version, a stale link: exit 3.
fn pinned_err(e: BpfError) -> crate::error::CliError {
    e.into()
}

fn is_pinned(iface: &str) -> CliResult<bool> {
    Classifier::is_pinned(&pin_dir(iface)).map_err(pinned_err)
}

fn ensure_bpffs() -> CliResult<()> {
    fastpath::bpf::ensure_bpffs(Path::new("/sys/fs/bpf"))
        .map_err(|e| env(anyhow!("{e}: bpffs is needed to leave a classifier attached (mount -t bpf bpf /sys/fs/bpf)")))
}

/// "No classifier pinned": one line, naming where else an interface of that name exists when
/// there is none here.
fn not_pinned(iface: &str) -> crate::error::CliError {
    let elsewhere = match NetDev::by_name(iface) {
        Ok(_) => String::new(),
        Err(_) => {
            format!(", and no interface {iface} in this network namespace{}", crate::hints::iface_elsewhere(iface))
        }
    };
    env(anyhow!(
        "no classifier left on {iface} by `fastpath filter load --detach` (nothing pinned at {}){elsewhere}",
        pin_dir(iface).display()
    ))
}

fn open_pinned(t: &FilterTarget) -> CliResult<PinnedClassifier> {
    let dir = pin_dir(&t.iface);
    if !is_pinned(&t.iface)? {
        return Err(not_pinned(&t.iface));
    }
    PinnedClassifier::open_pinned(&dir).map_err(pinned_err)
}

/// What `vlan` rules cannot see, said by `filter check` and by `filter load` on an interface
/// with rx VLAN offload on.
const VLAN_NOTE: &str = "vlan rules match the tags in the frame; a tag the NIC strips before XDP (rx VLAN offload: `ethtool -K IF rxvlan off` keeps it; on a veth, tx VLAN offload of the sending peer: `ethtool -K PEER txvlan off`) is not seen, so such frames count as untagged";

fn uses_vlan(set: &RuleSet) -> bool {
    set.rules.iter().any(|r| r.m.vlan.is_some())
}

/// Runs one `fastpath filter` subcommand.
/// `hup` is set by SIGHUP (`filter load` re-reads its rules then).
pub fn run(cmd: &FilterCmd, stop: Arc<AtomicBool>, hup: Arc<AtomicBool>) -> CliResult<()> {
    match cmd {
        FilterCmd::Check { rules, json } => check(rules, *json),
        FilterCmd::Load {
            rules,
            target,
            xdp_mode,
            force,
            detach,
            pin,
            fresh_maps,
            xsk_handoff,
            xsk_handoff_allow,
            run,
        } => {
            let handoff = xsk_handoff.as_deref().map(|p| (p, xsk_handoff_allow.0.as_slice()));
            let keep = match (*detach, *pin) {
                (true, _) => Keep::Detach,
                (_, true) => Keep::Pin,
                _ => Keep::No,
            };
            let opts = AttachOpts::mode(xdp_mode.mode()).force(*force);
            load(rules, target, opts, keep, *fresh_maps, handoff, run, &stop, &hup)
        }
        FilterCmd::Reload { rules, target, json } => reload(rules, target, *json, &stop),
        FilterCmd::Stats { target, run } => stats(target, run, &stop),
        FilterCmd::Show { target, json } => show(target, *json),
        FilterCmd::Unload { target } => unload(target, &stop),
        FilterCmd::Export { metrics, netns, .. } => export(*metrics, netns, &stop),
    }
}

/// `filter check`: compiles the rules and says what they make.
fn check(rules: &RulesArgs, json: bool) -> CliResult<()> {
    let (set, c, source) = compile_rules(rules)?;
    if uses_vlan(&set) {
        eprintln!("note: {VLAN_NOTE}");
    }
    // A tuple left to the hash is slower, not wrong: said on stderr, the output unchanged.
    for (t, why) in &c.table_fallback {
        eprintln!("note: tuple {t} is looked up in the hash, not the rule table: {why}");
    }
    if json {
        println!(
            "{}",
            json!({"source": source, "rules": set.rules.len(), "tuples": c.tuples.len(), "entries": c.entries.len(), "default": set.default.name(), "malformed": set.malformed_action().name()})
        );
    } else {
        println!(
            "{source}: {} rules OK: {} tuples, {} classifier entries, default {}, malformed {}",
            set.rules.len(),
            c.tuples.len(),
            c.entries.len(),
            set.default.name(),
            set.malformed_action().name()
        );
    }
    Ok(())
}

/// Rule names by rule index.
fn rule_names(set: &RuleSet) -> Vec<String> {
    set.rules.iter().map(|r| r.name.clone()).collect()
}

/// What `filter load` leaves when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Nothing: the classifier is detached.
    No,
    /// --pin: it stays attached and pinned; the command runs until signalled.
    Pin,
    /// --detach: it stays attached and pinned; the command ends at once.
    Detach,
}

/// `filter load`: attaches the classifier with the rules (or adopts the one pinned on the
/// interface, with --pin / --detach), then runs with its counters until signalled, re-reading
/// the rules on SIGHUP, or ends at once with --detach.
#[allow(clippy::too_many_arguments)]
fn load(
    rules: &RulesArgs,
    target: &FilterTarget,
    opts: AttachOpts,
    keep: Keep,
    fresh_maps: bool,
    handoff: Option<(&Path, &[u32])>,
    run: &RunArgs,
    stop: &AtomicBool,
    hup: &AtomicBool,
) -> CliResult<()> {
    check_run(run)?;
    let detach = keep == Keep::Detach;
    if detach && handoff.is_some() {
        return Err(usage(anyhow!(
            "--xsk-handoff with --detach is not accepted: the XSKMAP is served by the running `filter load`, and with --detach it ends once the classifier is pinned; run without --detach"
        )));
    }
    if detach && run.metrics.is_some() {
        return Err(usage(anyhow!(
            "--metrics with --detach is not accepted: the command ends once the classifier is pinned; serve metrics from `fastpath filter stats --metrics ADDR:PORT`"
        )));
    }
    if fresh_maps && keep == Keep::No {
        return Err(usage(anyhow!(
            "--fresh-maps alone is not accepted: it applies when --pin or --detach adopts a pinned classifier"
        )));
    }
    require_privileges("filter load")?;
    let metrics = crate::metrics::start(run.metrics)?;
    enter_ns(&target.netns)?;
    let (set, c, source) = compile_rules(rules)?;
    let iface = Iface::resolve(&target.iface)?;
    let dev = iface.dev();
    let dir = pin_dir(&target.iface);
    let ns = netns_arg(target);
    if keep != Keep::No {
        ensure_bpffs()?;
    }
    // The socket is bound before anything is loaded: a path that cannot be served leaves
    // nothing attached.
    let server = match handoff {
        Some((path, _)) => Some(fastpath::uds::Server::bind(path).map_err(handoff_err)?),
        None => None,
    };
    let mut notes = Vec::new();
    let mut attached: Option<AttachedClassifier> = None;
    let mut adopted = None;
    let mode;
    if keep != Keep::No && is_pinned(&target.iface)? {
        // Pins whose link no longer runs anywhere (its interface was deleted and made again,
        // say) protect nothing: they go, and the classifier is attached anew.
        if Classifier::pinned_link_ifindex(&dir).map_err(pinned_err)? == Some(0) {
            log::warn!(
                "the classifier pinned at {} was detached from {} (its interface deleted?): removing those pins and attaching anew",
                dir.display(),
                target.iface
            );
            Classifier::unload_pinned(&dir).map_err(pinned_err)?;
        }
    }
    if keep != Keep::No && is_pinned(&target.iface)? {
        // Adopt: the pinned link stays, its program is replaced; no frame goes unfiltered.
        let _lock = fastpath::bpf::lock_file(&lock_path(&target.iface), stop).map_err(runtime)?;
        let up = Classifier::upgrade_pinned(&dir, &iface, &c, &PinRules::of(&source, &set), fresh_maps)
            .map_err(pinned_err)?;
        mode = up.mode;
        if let Some(want) = opts.mode.filter(|m| m.name() != up.mode) {
            notes.push(format!(
                "the pinned link keeps its mode ({}): --xdp-mode {} applies to a new attach only (`fastpath filter unload -i {}{ns}` first)",
                up.mode,
                want.name(),
                target.iface
            ));
        }
        log::info!(
            "adopted the classifier pinned on {}{ns} ({}): program {} replaced by {} under its link, {}; {} rules from {source} in force",
            target.iface,
            up.mode,
            up.old_prog_id,
            up.new_prog_id,
            if up.maps_kept { "maps and counters kept" } else { "new maps, counters from zero" },
            set.rules.len()
        );
        adopted = Some(up);
    } else {
        let cls = Classifier::load()?;
        cls.swap_in(&c)?;
        // Success only with a program attached: each mode's error is kept, and the kernel is
        // asked afterwards (XdpLink::attach checks that it reports our program).
        let att = cls.attach(&iface, opts)?;
        let mut cls = att.prog;
        mode = att.mode.name();
        notes = att.notes;
        if keep != Keep::No {
            if let Err(e) = cls.pin(&dir, &PinRules::of(&source, &set)) {
                let _ = Classifier::unpin(&dir);
                return Err(pinned_err(e)); // dropping `cls` detaches: nothing is left
            }
        }
        attached = Some(cls);
    }
    if uses_vlan(&set) && dev.rx_vlan_offload().unwrap_or(false) {
        notes.push(format!("{} has rx VLAN offload on: {VLAN_NOTE}", target.iface));
    }
    let sc_rules: Vec<_> =
        set.rules.iter().filter(|r| matches!(r.action, fastpath::rules::Action::Syncookie)).collect();
    if !sc_rules.is_empty() && dev.rx_vlan_offload().unwrap_or(false) {
        notes.push(format!(
            "{} has rx VLAN offload on: an action \"syncookie\" SYN-ACK sent with XDP_TX leaves untagged (ethtool -K {} rxvlan off)",
            target.iface, target.iface
        ));
    }
    if sc_rules.iter().any(|r| r.m.dst.is_none()) {
        notes.push(
            "an action \"syncookie\" rule without `dst` answers SYNs for sockets outside this network namespace too (containers behind macvlan/ipvlan, routed or bridged traffic, VRF, TPROXY), whose handshakes then fail".into(),
        );
    }
    for n in &notes {
        eprintln!("note: {n}");
    }
    if detach {
        println!(
            "classifier on {} ({mode}) with {} rules from {source}, pinned at {}; `fastpath filter unload -i {}{ns}` removes it",
            target.iface,
            set.rules.len(),
            dir.display(),
            target.iface
        );
        return Ok(());
    }
    // Judged before the line below: setting the interface down right after it is a loss.
    let link = fastpath::netdev::LinkWatch::new(dev.clone());
    let at = match &target.netns {
        Some(ns) => format!("{} (netns {ns})", target.iface),
        None => target.iface.clone(),
    };
    if adopted.is_none() {
        log::info!("attached the classifier to {at} ({mode}): {} rules from {source}", set.rules.len());
    }
    let mut events = Events::new(&at, mode, set.rules.len());
    // --metrics answers with the counters from the ready line on, not an empty page until the
    // watch loop's first publish (a scrape right after READY=1 raced it on a loaded machine).
    if let (Some(m), Some(cls)) = (metrics.as_ref(), attached.as_ref()) {
        publish_metrics(cls, &target.iface, &rule_names(&set), m, true);
    }
    crate::service::ready(&events.status_text(None));
    if run.json {
        // As every long-running command: set-up is done.
        println!(
            "{}",
            json!({"type": "ready", "command": "filter load", "iface": target.iface, "xdp_mode": mode, "rules": set.rules.len(), "pinned": keep == Keep::Pin, "adopted": adopted})
        );
    } else if keep == Keep::Pin {
        println!(
            "classifier on {} ({mode}) with {} rules from {source}, pinned at {}; SIGHUP reloads {source}; it stays when this command ends (`fastpath filter unload -i {}{ns}` removes it)",
            target.iface,
            set.rules.len(),
            dir.display(),
            target.iface
        );
    } else if !crate::logging::stdout_is_journal() {
        // (Under systemd the log line above says it.)
        println!(
            "classifier on {} ({mode}) with {} rules from {source}; SIGHUP reloads {source}; Ctrl-C to detach",
            target.iface,
            set.rules.len()
        );
    }
    let names = rule_names(&set);
    let iface_name = target.iface.as_str();
    // SIGHUP: the file again, compiled, then flipped in as `filter reload` does; a file that
    // does not compile (or a set the maps refuse) leaves the set in force, said in one line.
    let at = at.as_str();
    let recompile = || match compile_rules(rules) {
        Ok((set, c, source)) => Some((PinRules::of(&source, &set), c, source, set.rules.len())),
        Err(e) => {
            log_reload_failed(at, &source, &e.err);
            None
        }
    };
    let reloaded = |what: Result<SetIndex, String>, source: &str, n: usize| match what {
        Ok(s) => {
            log_reloaded(at, n, source, s);
            true
        }
        Err(e) => {
            log_reload_failed(at, source, &e);
            false
        }
    };
    let lost = if let Some(cls) = attached.filter(|_| keep == Keep::No) {
        let serving = match (server, handoff) {
            (Some(server), Some((_, allow))) => Some(serve_handoff(server, cls.xsk_map_fd()?, iface_name, allow)),
            _ => None,
        };
        let mut on_hup = |cls: &mut AttachedClassifier| {
            let (kept, c, source, n) = recompile()?;
            let r = cls.swap_in(&c).map_err(|e| e.to_string());
            reloaded(r, &source, n).then_some((kept.names, n))
        };
        let mut cls = cls;
        let ev = Some(&mut events);
        let hooks = Hooks { hup: Some((hup, &mut on_hup)), refresh: None };
        let lost = watch(&mut cls, Some(link), iface_name, &names, run, stop, metrics.as_ref(), ev, hooks);
        crate::service::stopping();
        stop_handoff(serving);
        drop(cls); // detaches, if the interface is still there
        if lost.is_none() {
            log::info!("detached the classifier from {at}");
        }
        lost
    } else {
        // Pinned (the attached classifier, if this run attached it, was dropped by the filter
        // above: its link stays, pinned): watched through its pins; SIGHUP reloads as `filter
        // reload` does, under its lock.
        let mut cls = PinnedClassifier::open_pinned(&dir).map_err(pinned_err)?;
        let serving = match (server, handoff) {
            (Some(server), Some((_, allow))) => Some(serve_handoff(server, cls.xsk_map_fd()?, iface_name, allow)),
            _ => None,
        };
        let lock = lock_path(iface_name);
        let mut on_hup = |cls: &mut PinnedClassifier| {
            let (kept, c, source, n) = recompile()?;
            let r = fastpath::bpf::lock_file(&lock, stop).map_err(|e| e.to_string()).and_then(|_l| {
                // Into the maps the program runs on now, if another process replaced the pins.
                reopen_replaced(cls, at).map_err(|e| e.to_string())?;
                cls.check_still_attached(iface_name).map_err(|e| e.to_string())?;
                cls.reload(&c, &kept).map_err(|e| e.to_string())
            });
            reloaded(r, &source, n).then_some((kept.names, n))
        };
        let mut refresh = |cls: &mut PinnedClassifier| follow_pins(cls, &lock, stop, at);
        let ev = Some(&mut events);
        let hooks = Hooks { hup: Some((hup, &mut on_hup)), refresh: Some(&mut refresh) };
        let lost = watch(&mut cls, Some(link), iface_name, &names, run, stop, metrics.as_ref(), ev, hooks);
        crate::service::stopping();
        stop_handoff(serving);
        if lost.is_none() {
            log::info!(
                "left the classifier attached to {at} and pinned at {}: `fastpath filter unload -i {iface_name}{ns}` removes it",
                dir.display()
            );
        }
        lost
    };
    if let Some(ev) = lost {
        return Err(crate::common::link_lost_error(iface_name, ev));
    }
    Ok(())
}

/// ` --netns NS` when the command was given one (for the hints it prints), else "".
fn netns_arg(t: &FilterTarget) -> String {
    t.netns.as_deref().map(|n| format!(" --netns {n}")).unwrap_or_default()
}

/// Ends the --xsk-handoff server thread, if one runs.
fn stop_handoff(serving: Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>) {
    if let Some((quit, thread)) = serving {
        quit.store(true, Ordering::Relaxed);
        let _ = thread.join(); // its end said by the thread itself, when it came
    }
}

fn handoff_err(e: fastpath::uds::HandoffError) -> crate::error::CliError {
    use fastpath::uds::HandoffError;
    match e {
        HandoffError::Path { .. } => usage(anyhow::anyhow!("--xsk-handoff: {e}")),
        _ => env(e),
    }
}

/// The --xsk-handoff server on a thread of its own, until the returned flag is set; the
/// socket file goes when it ends. One line on stderr per connection; if the server fails
/// before the flag is set, a warning line then (the classifier stays attached, unserved).
fn serve_handoff(
    server: fastpath::uds::Server,
    map: std::os::fd::OwnedFd,
    iface: &str,
    allow: &[u32],
) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    use std::os::fd::AsFd;
    let quit = Arc::new(AtomicBool::new(false));
    let q = quit.clone();
    let (iface, allow) = (iface.to_string(), allow.to_vec());
    let users: Vec<String> = allow.iter().map(u32::to_string).collect();
    eprintln!(
        "note: serving the XSKMAP of {iface} at {} to uid {} (the AF_XDP device plugin's protocol)",
        server.path().display(),
        users.join(",")
    );
    let t = std::thread::spawn(move || {
        if let Err(e) = server.serve(map.as_fd(), &iface, &allow, &q, &|line| eprintln!("{line}")) {
            drop(server); // the socket file goes first: clients find no server, not a silent one
            eprintln!("warning: {e}: the XSKMAP is no longer served");
        }
    });
    (quit, t)
}

/// `filter reload`: swaps new rules into the classifier pinned on the interface.
fn reload(rules: &RulesArgs, target: &FilterTarget, json: bool, stop: &AtomicBool) -> CliResult<()> {
    require_privileges("filter reload")?;
    enter_ns(&target.netns)?;
    let t0 = std::time::Instant::now();
    // Everything that can be wrong with the rules fails here; the set in force stays.
    let (set, c, source) = compile_rules(rules)?;
    let compile_ns = t0.elapsed().as_nanos() as u64;
    let mut cls = open_pinned(target)?;
    // One reload at a time per interface: two would install into the same inactive set.
    let _lock = fastpath::bpf::lock_file(&lock_path(&target.iface), stop).map_err(runtime)?;
    // Nothing is written into the maps of a classifier that no longer runs here.
    cls.check_still_attached(&target.iface).map_err(pinned_err)?;
    let t1 = std::time::Instant::now();
    let new = cls.reload(&c, &PinRules::of(&source, &set))?;
    let install_ns = t1.elapsed().as_nanos() as u64;
    let reload_ns = t0.elapsed().as_nanos() as u64;
    if json {
        println!(
            "{}",
            json!({"type": "reload", "iface": target.iface, "source": source, "rules": set.rules.len(),
                   "entries": c.entries.len(), "rule_set": new, "compile_ns": compile_ns,
                   "install_ns": install_ns, "reload_ns": reload_ns})
        );
    } else {
        println!(
            "reloaded {}: {} rules from {source} in force (rule set {new}) in {:.3} s (compile {:.3} s, maps {:.3} s)",
            target.iface,
            set.rules.len(),
            reload_ns as f64 / 1e9,
            compile_ns as f64 / 1e9,
            install_ns as f64 / 1e9
        );
    }
    Ok(())
}

/// `filter stats`: the counters of the classifier pinned on the interface.
fn stats(target: &FilterTarget, run: &RunArgs, stop: &AtomicBool) -> CliResult<()> {
    check_run(run)?;
    require_privileges("filter stats")?;
    let metrics = crate::metrics::start(run.metrics)?;
    enter_ns(&target.netns)?;
    let mut cls = open_pinned(target)?;
    let names = cls.meta().names.clone();
    if let Err(e) = cls.check_still_attached(&target.iface) {
        // The counters it kept are still worth seeing: print them once, then fail.
        let once = RunArgs { duration: 0.0, ..run.clone() };
        watch(&mut cls, None, &target.iface, &names, &once, stop, None, None, Hooks::default());
        return Err(pinned_err(e));
    }
    let lock = lock_path(&target.iface);
    let mut refresh = |cls: &mut PinnedClassifier| follow_pins(cls, &lock, stop, &target.iface);
    let hooks = Hooks { hup: None, refresh: Some(&mut refresh) };
    watch(&mut cls, None, &target.iface, &names, run, stop, metrics.as_ref(), None, hooks);
    Ok(())
}

/// `filter show`: the rule set in force of the classifier pinned on the interface, with
/// per-rule counters (printed even when that classifier no longer runs there; then the
/// command fails saying so, as `filter stats` does).
fn show(target: &FilterTarget, json: bool) -> CliResult<()> {
    require_privileges("filter show")?;
    enter_ns(&target.netns)?;
    let cls = open_pinned(target)?;
    let still = cls.check_still_attached(&target.iface);
    let dir = pin_dir(&target.iface);
    let set = cls.active()?;
    let (dflt, malformed) = cls.set_actions(set)?;
    let n = cls.rule_count(set)?;
    let counters = cls.rule_counters(set, n)?;
    let meta = cls.meta();
    let prog = cls.pinned_link_info().and_then(|r| r.ok()).filter(|l| l.ifindex != 0);
    let mode = prog.and_then(|l| fastpath::bpf::query_xdp(l.ifindex).ok().flatten()).map(|p| p.mode.name());
    let name = |i: usize| meta.names.get(i).cloned().unwrap_or_else(|| format!("rule {}", i + 1));
    if json {
        let rules: Vec<serde_json::Value> = counters
            .iter()
            .enumerate()
            .map(|(i, (p, b))| json!({"rule": i, "name": name(i), "text": meta.texts.get(i), "packets": p, "bytes": b}))
            .collect();
        println!(
            "{}",
            json!({"type": "ruleset", "iface": target.iface, "netns": target.netns, "pin_dir": dir.display().to_string(),
                   "prog_id": prog.map(|l| l.prog_id), "xdp_mode": mode, "source": meta.source, "rule_set": set,
                   "default": dflt, "malformed": malformed, "rules": rules})
        );
    } else {
        let on = match (prog, mode) {
            (Some(l), Some(m)) => format!(" (XDP program id {}, {m})", l.prog_id),
            _ => String::new(),
        };
        println!("# fastpath classifier on {}{on}, pinned at {}", target.iface, dir.display());
        let source = meta.source.as_deref().unwrap_or("a source the fastpath that pinned it did not keep");
        println!("# {n} rules from {source}; rule set {set} in force; rules in match order");
        println!("default {dflt}");
        println!("malformed {malformed}");
        for (i, (p, b)) in counters.iter().enumerate() {
            let text =
                meta.texts.get(i).map(String::as_str).unwrap_or("(rule text not kept by the fastpath that pinned it)");
            println!("rule {i} {:?} {text} counter packets {p} bytes {b}", name(i));
        }
    }
    still.map_err(pinned_err)
}

/// `filter unload`: detaches the pinned classifier and removes its pins.
fn unload(target: &FilterTarget, stop: &AtomicBool) -> CliResult<()> {
    require_privileges("filter unload")?;
    enter_ns(&target.netns)?;
    let dir = pin_dir(&target.iface);
    if !is_pinned(&target.iface)? {
        // What an upgrade that died left, alone: removed (under the lock an upgrade holds).
        let _lock = fastpath::bpf::lock_file(&lock_path(&target.iface), stop).map_err(runtime)?;
        if Classifier::remove_staging_of(&dir).map_err(pinned_err)? {
            println!(
                "removed {} (left by an upgrade that did not finish); no classifier was pinned on {}",
                fastpath::bpf::classifier::staging_dir(&dir).display(),
                target.iface
            );
            return Ok(());
        }
        return Err(not_pinned(&target.iface));
    }
    // The reload lock: taken (a reload running now finishes first), and kept, never
    // deleted: a reload waiting on the deleted file's lock and one creating a new file
    // would both hold "the" lock.
    let _lock = fastpath::bpf::lock_file(&lock_path(&target.iface), stop).map_err(runtime)?;
    Classifier::unload_pinned(&dir).map_err(pinned_err)?;
    println!("classifier removed from {}", target.iface);
    Ok(())
}

/// --metrics: per action and per rule, packets and bytes, of the active rule set (when due,
/// or now with `force`).
fn publish_metrics<S: State>(
    cls: &Classifier<S>,
    iface: &str,
    names: &[String],
    m: &crate::metrics::MetricsServer,
    force: bool,
) {
    if !force && !m.due() {
        return;
    }
    let fams = metric_families(cls, iface, names);
    if !fams.is_empty() {
        m.publish(&fams);
    }
}

/// The metric families of a classifier (label `iface`): per action and per rule, packets and
/// bytes of the active rule set. None if the active set cannot be read.
fn metric_families<S: State>(cls: &Classifier<S>, iface: &str, names: &[String]) -> Vec<crate::metrics::Family> {
    use crate::metrics::Family;
    let Ok(set) = cls.active() else { return Vec::new() };
    let mut fams = Vec::new();
    let mut ap =
        Family::counter("fastpath_filter_action_packets_total", "Packets by action taken.", &["iface", "action"]);
    let mut ab = Family::counter("fastpath_filter_action_bytes_total", "Bytes by action taken.", &["iface", "action"]);
    for (n, p, b) in cls.totals(set).map(|t| t.counters).unwrap_or_default() {
        ap.add(&[iface, n], p as f64);
        ab.add(&[iface, n], b as f64);
    }
    let labels = ["iface", "rule", "name"];
    let mut rp = Family::counter("fastpath_filter_rule_packets_total", "Packets matched by each rule.", &labels);
    let mut rb = Family::counter("fastpath_filter_rule_bytes_total", "Bytes matched by each rule.", &labels);
    // Per-rule series for the first MAX_RULE_SERIES rules only: reading and sending 100,000
    // rules' counters every 100 ms would hold up the interval lines.
    let n = cls.rule_count(set).unwrap_or(0);
    let shown = n.min(crate::metrics::MAX_RULE_SERIES);
    for (i, c) in cls.rule_counters(set, shown).unwrap_or_default().iter().enumerate() {
        let name = names.get(i).map(String::as_str).unwrap_or("");
        let name = if name.is_empty() { format!("rule {}", i + 1) } else { name.to_string() };
        let k = i.to_string();
        rp.add(&[iface, &k, &name], c.0 as f64);
        rb.add(&[iface, &k, &name], c.1 as f64);
    }
    let mut left = Family::gauge(
        "fastpath_filter_rules_not_exported",
        format!(
            "Rules without fastpath_filter_rule_* series: only the first {} rules (in match order) have them; the action totals count every rule.",
            crate::metrics::MAX_RULE_SERIES
        ),
        &["iface"],
    );
    left.add(&[iface], (n - shown) as f64);
    fams.extend([ap, ab, rp, rb, left]);
    fams
}

/// How often `filter export` looks for pins coming and going, and re-reads the counters.
const EXPORT_SCAN: Duration = Duration::from_secs(1);

/// `filter export`: serves the metrics of every classifier pinned under
/// [`fastpath::bpf::classifier::PIN_ROOT`] in this network namespace until SIGINT/SIGTERM.
/// Quiet: a log line when a classifier appears, goes, or cannot be opened.
fn export(addr: std::net::SocketAddr, netns: &Option<String>, stop: &AtomicBool) -> CliResult<()> {
    require_privileges("filter export")?;
    // Listening before entering --netns: the endpoint is where the scraper is.
    let m = crate::metrics::MetricsServer::start(addr)?;
    enter_ns(netns)?;
    let root = Path::new(fastpath::bpf::classifier::PIN_ROOT);
    log::info!(
        "serving the metrics of every classifier pinned under {} in this network namespace at http://{addr}/metrics",
        root.display()
    );
    let mut open: std::collections::BTreeMap<String, (PinnedClassifier, bool)> = Default::default();
    let mut failed: std::collections::BTreeMap<String, u32> = Default::default();
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        let found = pinned_here(root);
        for iface in open.keys().filter(|i| !found.contains(*i)).cloned().collect::<Vec<_>>() {
            open.remove(&iface);
            log::info!("{iface}: classifier unpinned, no longer exported");
        }
        failed.retain(|i, _| found.contains(i));
        for iface in &found {
            // Opened again at every scan: a reload's rule names, or a new classifier under the
            // same pins (unload, then load), are seen within a scan.
            match PinnedClassifier::open_pinned(&pin_dir(iface)) {
                Ok(cls) => {
                    let attached = cls.check_still_attached(iface).is_ok();
                    if open.insert(iface.clone(), (cls, attached)).is_none() {
                        log::info!(
                            "{iface}: exporting the pinned classifier{}",
                            if attached { "" } else { " (no longer attached)" }
                        );
                    }
                    failed.remove(iface);
                }
                Err(e) => {
                    // A pin directory being written or removed fails once; twice is worth a line.
                    let n = failed.entry(iface.clone()).or_default();
                    *n += 1;
                    if *n == 2 {
                        log::warn!("{iface}: cannot open the pinned classifier, not exported: {e}");
                    }
                }
            }
        }
        let mut fams: Vec<crate::metrics::Family> = Vec::new();
        let mut up = crate::metrics::Family::gauge(
            "fastpath_filter_attached",
            "1 if the pinned classifier is attached to its interface, 0 if it is no longer (deleted or replaced).",
            &["iface"],
        );
        for (iface, (cls, attached)) in &open {
            merge_families(&mut fams, metric_families(cls, iface, &cls.meta().names));
            up.add(&[iface], if *attached { 1.0 } else { 0.0 });
        }
        fams.push(up);
        m.publish(&fams);
        while t0.elapsed() < EXPORT_SCAN && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    log::info!("stopped serving metrics at http://{addr}/metrics");
    Ok(())
}

/// Interfaces with a classifier pinned in this network namespace: the directories under `root`
/// named `<netns inode>-<iface>` that are [`pin_dir`] of their interface here.
fn pinned_here(root: &Path) -> std::collections::BTreeSet<String> {
    let Ok(rd) = std::fs::read_dir(root) else { return Default::default() };
    rd.flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            // An upgrade's staging directory (`<netns>-<iface>:new`) is no interface's.
            if fastpath::bpf::classifier::is_staging_name(&name) {
                return None;
            }
            let (_, iface) = name.split_once('-')?;
            (pin_dir(iface) == e.path()).then(|| iface.to_string())
        })
        .collect()
}

/// Appends `more` to `into`, the samples of a family already there to that family.
fn merge_families(into: &mut Vec<crate::metrics::Family>, more: Vec<crate::metrics::Family>) {
    for f in more {
        match into.iter_mut().find(|g| g.name == f.name) {
            Some(g) => g.samples.extend(f.samples),
            None => into.push(f),
        }
    }
}

/// The active set and its packet totals in [`STAT_NAMES`] order.
fn snap<S: State>(cls: &Classifier<S>) -> Option<(SetIndex, Vec<u64>)> {
    let set = cls.active().ok()?;
    Some((set, cls.totals(set).ok()?.counters.iter().map(|c| c.1).collect()))
}

/// -e: the XDP tracepoint counters of this interface and the classifier's CPUMAP.
fn tracepoints<S: State>(
    cls: &Classifier<S>,
    iface: &str,
    run: &RunArgs,
) -> Option<&'static fastpath::bpf::XdpMonitor> {
    let tp = if run.extended { crate::report::tracepoints() } else { None };
    if let Some(t) = tp {
        let ifindex = NetDev::by_name(iface).map(|d| d.ifindex).unwrap_or(0);
        let mut f = fastpath::bpf::MonitorFilter::default();
        f.ifindex = ifindex;
        f.cpumap_id = cls.cpu_map_id().unwrap_or(0);
        f.netns_ino = fastpath::bpf::monitor::current_netns_ino();
        let _ = t.set_filter(f);
    }
    tp
}

/// One interval line: per-action rates between two snapshots `dt` ns apart (and the
/// tracepoint counts of the interval, with -e).
fn interval_line(
    iface: &str,
    run: &RunArgs,
    (ps, p): &(SetIndex, Vec<u64>),
    (cs, c): &(SetIndex, Vec<u64>),
    dt: u64,
    tp_delta: Option<&fastpath::bpf::XdpMonitorStats>,
) {
    if !run.interval_lines {
        return;
    }
    // After a reload the new set's counters start at zero.
    let base: Vec<u64> = if ps == cs { p.clone() } else { vec![0; c.len()] };
    let rates: Vec<(&str, f64)> =
        STAT_NAMES.iter().zip(c.iter().zip(base)).map(|(n, (c, b))| (*n, rate(c.saturating_sub(b), dt))).collect();
    if run.json {
        let o: serde_json::Map<String, serde_json::Value> =
            rates.iter().map(|(n, r)| (format!("{n}_pps"), json!(r.round()))).collect();
        let mut line = json!({"type": "interval", "prefix": iface, "rule_set": cs, "rates": o});
        if let Some(d) = tp_delta {
            line["period_ns"] = json!(dt);
            line["tracepoints"] = json!(d);
        }
        println!("{line}");
        return;
    }
    let mut s = format!("{iface:<14}");
    for (n, r) in &rates {
        if *r > 0.0 || run.extended || *n == "drop" || *n == "pass" {
            s += &format!(" {:>12} {n}/s", thousands(r.round() as u64));
        }
    }
    println!("{s}");
    for l in tp_delta.map(|d| crate::report::tracepoint_lines(d, dt)).unwrap_or_default() {
        println!("{l}");
    }
}

/// What a hook of [`watch`] returns: the rule names and rule count now in force if they
/// changed (`None`: the set in force stays).
type Hook<'a, S> = &'a mut dyn FnMut(&mut Classifier<S>) -> Option<(Vec<String>, usize)>;

/// What [`watch`] does besides counting.
struct Hooks<'a, S: State> {
    /// A SIGHUP flag and what to do when it is set: reload.
    hup: Option<(&'a AtomicBool, Hook<'a, S>)>,
    /// Called every [`REFRESH_EVERY`]: follow pins another process replaced (a pinned
    /// classifier), so that the counters read are the running program's.
    refresh: Option<Hook<'a, S>>,
}

impl<S: State> Default for Hooks<'_, S> {
    fn default() -> Self {
        Self { hup: None, refresh: None }
    }
}

/// How often a watched pinned classifier checks that its pins still name the maps it holds.
const REFRESH_EVERY: Duration = Duration::from_secs(1);

/// If another process replaced the pins of `cls` (an adoption with maps of its own, or an
/// unload and a new load), opens them again, with a warning line; the caller holds the reload
/// lock. Returns whether it did.
fn reopen_replaced(cls: &mut PinnedClassifier, at: &str) -> Result<bool, BpfError> {
    if !cls.pins_replaced() {
        return Ok(false);
    }
    let now = PinnedClassifier::open_pinned(cls.dir())?;
    *cls = now;
    let source = cls.meta().source.clone().unwrap_or_else(|| "a source not kept".into());
    log::warn!(
        "{at}: the classifier pinned at {} was replaced by another process (maps of its own): following its pins, {} rules from {source} in force",
        cls.dir().display(),
        cls.meta().names.len()
    );
    Ok(true)
}

/// [`reopen_replaced`] under the reload lock `lock` (an adoption under way finishes first), for
/// [`Hooks::refresh`]: the names and rule count in force if the pins were followed.
fn follow_pins(cls: &mut PinnedClassifier, lock: &Path, stop: &AtomicBool, at: &str) -> Option<(Vec<String>, usize)> {
    if !cls.pins_replaced() {
        return None;
    }
    let _l = fastpath::bpf::lock_file(lock, stop).ok()?;
    match reopen_replaced(cls, at) {
        Ok(true) => {
            let n = cls.active().and_then(|s| cls.rule_count(s)).unwrap_or(cls.meta().names.len());
            Some((cls.meta().names.clone(), n))
        }
        Ok(false) => None,
        Err(e) => {
            log::debug!("{at}: the pins changed and cannot be opened yet: {e}");
            None
        }
    }
}

/// Interval lines of per-action rates (when asked for, `RunArgs::interval_lines`) and a
/// summary with per-rule counters (every rule in JSON; in text the rules with hits, or all with
/// `-e`). With `link`, stops early if that interface is deleted or set down, and returns what
/// happened. With `events` (`filter load`), the drop-rate log lines and STATUS= as they fall
/// due. With `hooks.hup` (`filter load`), a reload when its flag is set: RELOADING=1, then
/// READY=1 whether or not the new rules took; with `hooks.refresh`, pins another process
/// replaced are followed.
#[allow(clippy::too_many_arguments)]
fn watch<S: State>(
    cls: &mut Classifier<S>,
    link: Option<fastpath::netdev::LinkWatch>,
    iface: &str,
    names: &[String],
    run: &RunArgs,
    stop: &AtomicBool,
    metrics: Option<&crate::metrics::MetricsServer>,
    mut events: Option<&mut Events>,
    hooks: Hooks<'_, S>,
) -> Option<fastpath::netdev::LinkEvent> {
    let Hooks { hup: mut on_hup, mut refresh } = hooks;
    let mut refreshed = Instant::now();
    let mut names = names.to_vec();
    let publish = |cls: &Classifier<S>, names: &[String], force: bool| {
        if let Some(m) = metrics {
            publish_metrics(cls, iface, names, m, force);
        }
    };
    let tp = tracepoints(cls, iface, run);
    let tp0 = tp.and_then(|t| t.snapshot().ok());
    let mut prev_tp = tp0.clone();
    let start = Instant::now();
    // Infinite: `filter load` without --duration, until signalled.
    let deadline = run.duration.is_finite().then(|| start + Duration::from_secs_f64(run.duration));
    let interval = Duration::from_secs_f64(run.interval);
    let mut prev = snap(cls);
    let mut prev_t = Instant::now();
    let mut next = start + interval;
    let mut lost = None;
    let mut link = link;
    while deadline.is_none_or(|d| Instant::now() < d) && !stop.load(Ordering::Relaxed) {
        if let Some(ev) = link.as_mut().and_then(|w| w.poll()) {
            lost = Some(ev);
            break;
        }
        if let Some(f) = refresh.as_mut().filter(|_| refreshed.elapsed() >= REFRESH_EVERY) {
            refreshed = Instant::now();
            if let Some((n, rules)) = f(cls) {
                names = n;
                if let Some(e) = events.as_deref_mut() {
                    e.rules = rules;
                }
                publish(cls, &names, true);
            }
        }
        if let Some((flag, reload)) = on_hup.as_mut() {
            if flag.swap(false, Ordering::Relaxed) {
                crate::service::reloading();
                if let Some((n, rules)) = reload(cls) {
                    names = n;
                    if let Some(e) = events.as_deref_mut() {
                        e.rules = rules;
                    }
                    publish(cls, &names, true);
                }
                if let Some(e) = events.as_deref() {
                    crate::service::ready(&e.status_text(None));
                }
            }
        }
        publish(cls, &names, false);
        if let Some(e) = events.as_deref_mut() {
            e.poll(cls);
        }
        if Instant::now() < next {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        next += interval;
        let cur = snap(cls);
        let dt = prev_t.elapsed().as_nanos() as u64;
        prev_t = Instant::now();
        let cur_tp = tp.and_then(|t| t.snapshot().ok());
        let tp_delta = match (&cur_tp, &prev_tp) {
            (Some(a), Some(b)) => Some(a.delta(b)),
            _ => None,
        };
        prev_tp = cur_tp;
        if let (Some(p), Some(c)) = (&prev, &cur) {
            interval_line(iface, run, p, c, dt, tp_delta.as_ref());
        }
        prev = cur;
    }
    publish(cls, &names, true);
    let tp_total = match (tp.and_then(|t| t.snapshot().ok()), &tp0) {
        (Some(a), Some(b)) => Some(a.delta(b)),
        _ => None,
    };
    summary(cls, iface, &names, run, tp_total.as_ref());
    lost
}

/// A set's totals as JSON: `{name: {"packets", "bytes"}}`.
fn totals_json(t: &fastpath::bpf::classifier::ClsTotals) -> serde_json::Map<String, serde_json::Value> {
    t.counters.iter().map(|(n, p, b)| (n.to_string(), json!({"packets": p, "bytes": b}))).collect()
}

/// The summary: totals and per-rule counters of the active set (and, in JSON, the totals of
/// the set the last reload replaced), and the tracepoint counts of the run with -e.
fn summary<S: State>(
    cls: &Classifier<S>,
    iface: &str,
    names: &[String],
    run: &RunArgs,
    tp_total: Option<&fastpath::bpf::XdpMonitorStats>,
) {
    let Ok(set) = cls.active() else { return };
    let totals = cls.totals(set).unwrap_or_default();
    let n = cls.rule_count(set).unwrap_or(0);
    let per_rule = cls.rule_counters(set, n).unwrap_or_default();
    let rules: Vec<serde_json::Value> = per_rule
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"rule": i, "name": names.get(i).cloned().unwrap_or_else(|| format!("rule {}", i + 1)), "packets": c.0, "bytes": c.1}))
        .collect();
    if run.json {
        let mut o = json!({"type": "summary", "prefix": iface, "rule_set": set, "totals": totals_json(&totals), "rules": rules});
        // The set the last reload replaced keeps its counters until the next reload: with them,
        // every frame since load is counted by one of the two sets.
        let prev = set.other();
        if cls.rule_count(prev).unwrap_or(0) > 0 {
            if let Ok(pt) = cls.totals(prev) {
                o["previous"] = json!({"rule_set": prev, "totals": totals_json(&pt)});
            }
        }
        if let Some(d) = tp_total {
            o["tracepoints"] = json!(d);
        }
        println!("{o}");
        return;
    }
    println!("Summary  {iface}  rule set {set}, {n} rules");
    for (name, p, b) in &totals.counters {
        if *p > 0 || run.extended {
            println!("  {name:<14} {:>16} pkts {:>18} bytes", thousands(*p), thousands(*b));
        }
    }
    for r in rules.iter().filter(|r| r["packets"].as_u64().unwrap_or(0) > 0 || run.extended) {
        println!(
            "  rule {:<24} {:>16} pkts",
            r["name"].as_str().unwrap_or(""),
            thousands(r["packets"].as_u64().unwrap_or(0))
        );
    }
    if let Some(d) = tp_total {
        let lines = crate::report::tracepoint_lines(d, 0);
        println!("  tracepoints{}", if lines.is_empty() { "      no XDP drops or errors reported" } else { "" });
        for l in lines {
            println!("  {l}");
        }
    }
}

/// The drop rate above which `filter load` logs that it is dropping a flood, packets/s.
pub const DROP_ALARM_PPS: f64 = 1000.0;
/// Seconds in a row the drop rate must stay at or below [`DROP_ALARM_PPS`] before the flood is
/// logged as over: one pair of lines per flood, not one per second of a rate hovering near it.
pub const DROP_CALM_S: u32 = 10;
/// Seconds between two STATUS= notifications.
pub const STATUS_EVERY_S: u32 = 5;

/// What a drop-rate sample changed, if anything.
#[derive(Debug, Clone, PartialEq)]
enum Alarm {
    /// The first second above [`DROP_ALARM_PPS`].
    Rose { drop_pps: f64 },
    /// [`DROP_CALM_S`] seconds at or below it again: the flood's peak rate, the packets dropped
    /// from its first second to now, and its length in seconds (the calm ones included).
    Fell { peak_pps: f64, dropped: u64, secs: u32 },
}

/// The flood alarm of `filter load`: fed the drops of each second, says when the drop rate
/// first rises above [`DROP_ALARM_PPS`] and when it has stayed at or below it for
/// [`DROP_CALM_S`] seconds.
#[derive(Debug, Default)]
struct DropAlarm {
    /// (peak packets/s, dropped packets, seconds) of the flood under way.
    flood: Option<(f64, u64, u32)>,
    calm_s: u32,
}

impl DropAlarm {
    /// One sample: `dropped` packets over `secs` seconds (about 1).
    fn feed(&mut self, dropped: u64, secs: f64) -> Option<Alarm> {
        let pps = if secs > 0.0 { dropped as f64 / secs } else { 0.0 };
        let high = pps > DROP_ALARM_PPS;
        match &mut self.flood {
            None if high => {
                self.flood = Some((pps, dropped, 1));
                self.calm_s = 0;
                Some(Alarm::Rose { drop_pps: pps })
            }
            None => None,
            Some((peak, total, n)) => {
                *peak = peak.max(pps);
                *total += dropped;
                *n += 1;
                self.calm_s = if high { 0 } else { self.calm_s + 1 };
                if self.calm_s < DROP_CALM_S {
                    return None;
                }
                let (peak_pps, dropped, secs) = (*peak, *total, *n);
                self.flood = None;
                Some(Alarm::Fell { peak_pps, dropped, secs })
            }
        }
    }
}

/// The events `filter load` reports while it runs: the drop-rate alarm (a log line each way)
/// and, every [`STATUS_EVERY_S`] seconds, STATUS= to the service manager (no-op without
/// NOTIFY_SOCKET). Sampled once a second, whatever `--interval` is.
pub(crate) struct Events {
    /// The interface as said in the lines (`eth0`, or `eth0 (netns NAME)`).
    at: String,
    mode: &'static str,
    /// Rules in force (set again after a reload).
    pub rules: usize,
    alarm: DropAlarm,
    /// The last sample: when, the rule set, its drop and pass totals.
    prev: Option<(Instant, SetIndex, u64, u64)>,
    /// (drop, pass) packets since the last STATUS=, and its seconds.
    window: (u64, u64, f64),
    samples: u32,
    next: Instant,
}

const DROP: usize = 1;
const PASS: usize = 0;
const _: () = assert!(matches!(STAT_NAMES[DROP].as_bytes(), b"drop") && matches!(STAT_NAMES[PASS].as_bytes(), b"pass"));

impl Events {
    pub(crate) fn new(at: &str, mode: &'static str, rules: usize) -> Self {
        Events {
            at: at.to_string(),
            mode,
            rules,
            alarm: DropAlarm::default(),
            prev: None,
            window: (0, 0, 0.0),
            samples: 0,
            next: Instant::now(),
        }
    }

    /// The STATUS= text: `eth0 (native): 3 rules, dropping 1,234 pps, passing 56 pps` (rates
    /// over the last few seconds; without them, `attached`).
    pub(crate) fn status_text(&self, rates: Option<(f64, f64)>) -> String {
        match rates {
            Some((d, p)) => format!(
                "{} ({}): {} rules, dropping {} pps, passing {} pps",
                self.at,
                self.mode,
                self.rules,
                thousands(d.round() as u64),
                thousands(p.round() as u64)
            ),
            None => format!("{} ({}): {} rules, attached", self.at, self.mode, self.rules),
        }
    }

    /// Takes a sample if one is due (once a second) and says what it changed.
    fn poll<S: State>(&mut self, cls: &Classifier<S>) {
        let now = Instant::now();
        if now < self.next {
            return;
        }
        self.next = now + Duration::from_secs(1);
        let Some((set, c)) = snap(cls) else { return };
        let (d, p) = (c[DROP], c[PASS]);
        let prev = self.prev.replace((now, set, d, p));
        let Some((t0, s0, d0, p0)) = prev else { return };
        // After a reload the new set's counters start at zero.
        let (d0, p0) = if s0 == set { (d0, p0) } else { (0, 0) };
        let (dd, dp, secs) = (d.saturating_sub(d0), p.saturating_sub(p0), (now - t0).as_secs_f64());
        match self.alarm.feed(dd, secs) {
            Some(Alarm::Rose { drop_pps }) => log::warn!(
                "{}: dropping {} packets/s, above {}/s",
                self.at,
                thousands(drop_pps.round() as u64),
                thousands(DROP_ALARM_PPS as u64)
            ),
            Some(Alarm::Fell { peak_pps, dropped, secs }) => log::info!(
                "{}: drops at or below {}/s for {DROP_CALM_S} s: {} packets dropped in {secs} s, peak {} packets/s",
                self.at,
                thousands(DROP_ALARM_PPS as u64),
                thousands(dropped),
                thousands(peak_pps.round() as u64)
            ),
            None => {}
        }
        self.window = (self.window.0 + dd, self.window.1 + dp, self.window.2 + secs);
        self.samples += 1;
        if self.samples % STATUS_EVERY_S == 0 {
            let (wd, wp, ws) = std::mem::take(&mut self.window);
            let text = self.status_text(Some((wd as f64 / ws, wp as f64 / ws)));
            crate::service::status(&text);
        }
    }
}

/// The log line of a reload that took (SIGHUP): `eth0: reloaded: 3 rules from FILE in force
/// (rule set 1)`.
pub(crate) fn log_reloaded(at: &str, rules: usize, source: &str, set: SetIndex) {
    log::info!("{at}: reloaded: {rules} rules from {source} in force (rule set {set})");
}

/// The log line of a reload that did not take: the rules in force stay.
pub(crate) fn log_reload_failed(at: &str, source: &str, err: &dyn std::fmt::Display) {
    let msg = format!("{err:#}").replace('\n', " ");
    log::error!("{at}: reload from {source} refused, the rules in force stay: {msg}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pair of lines per flood: up at the first second above 1,000/s, down after 10 calm
    /// seconds in a row (a second above in between starts the count again).
    #[test]
    fn the_drop_alarm_rises_once_and_falls_after_ten_calm_seconds() {
        let mut a = DropAlarm::default();
        assert_eq!(a.feed(1000, 1.0), None, "1,000/s is not above 1,000/s");
        assert_eq!(a.feed(5000, 1.0), Some(Alarm::Rose { drop_pps: 5000.0 }));
        assert_eq!(a.feed(9000, 1.0), None, "still flooding: no second line");
        for _ in 0..5 {
            assert_eq!(a.feed(10, 1.0), None);
        }
        assert_eq!(a.feed(2000, 1.0), None, "above again: the calm count restarts");
        for _ in 0..9 {
            assert_eq!(a.feed(0, 1.0), None);
        }
        // 2 high seconds + 5 calm + 1 high + 10 calm = 18 s; 5,000 + 9,000 + 50 + 2,000 dropped.
        assert_eq!(a.feed(0, 1.0), Some(Alarm::Fell { peak_pps: 9000.0, dropped: 16050, secs: 18 }));
        assert_eq!(a.feed(0, 1.0), None);
        assert_eq!(a.feed(3000, 2.0), Some(Alarm::Rose { drop_pps: 1500.0 }), "a rate, not a count");
    }
}
