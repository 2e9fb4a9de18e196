//! `fastpath capture`: frames of an interface into a pcapng file (pcap-file crate).
//!
//! - `--mode copy` (default): `crates/fastpath/bpf/xdp_capture.bpf.c` copies each frame (up to the snap length)
//!   into a BPF ring buffer and passes it on untouched (as xdpdump); traffic is not disturbed.
//!   Timestamps are the program's (CLOCK_MONOTONIC, shifted to the wall clock).
//! - `--mode divert`: `xsk_redirect` sends every frame to an AF_XDP socket per queue and the
//!   frames are written from the UMEM; they leave the kernel (a capture appliance). Timestamps
//!   are taken when user space reads the frame.
//!
//! With rules (a TOML file and/or `--rule`, the language of `fastpath filter`; a `--rule`
//! without `action=` gets one), the classifier selects the frames instead: in copy mode each
//! rule's action becomes "copy to the capture ring, then pass" (`ActionEntry::copy`), in divert
//! mode "to the AF_XDP socket"; frames no rule matches pass to the kernel uncaptured. The
//! rules' own actions are not used.
//!
//! With a pcap-filter expression (`fastpath capture -i IFACE -w FILE udp port 53`, tcpdump's
//! language), libpcap decides every copied frame in user space (`fastpath::pcapfilter`:
//! `pcap_offline_filter`, the filter tcpdump runs), so the file holds exactly what tcpdump
//! keeps; the part of the expression the classifier can decide runs at the driver first, as
//! rules that select a superset (`pcap_expr.rs`). The ready line and the summary say which
//! part ran where, and the summary counts the frames libpcap rejected after the copy. Divert
//! mode takes an expression only when the classifier decides it exactly (else it would take
//! frames the expression does not select away from the kernel).
//!
//! The file has one interface description block per queue (if_tsresol 9: nanoseconds), an
//! enhanced packet block per frame, and at its end one interface statistics block per queue:
//! frames received (isb_ifrecv), frames the capture lost (isb_ifdrop: ring buffer full in copy
//! mode; AF_XDP rx_dropped + rx_ring_full in divert mode) and frames written (isb_usrdeliv).
//! tcpdump's -C, -W and -G (and `--rotate-bytes N`, -C counted in bytes) start new files as
//! tcpdump does (rotate.rs says how they are named); each is a whole pcapng section with its own
//! statistics. Every name the run may take is checked before anything is attached, as far as
//! it can be known then (see [`check_output`]). `-w -` writes to stdout.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use fastpath::bpf::capture::{CaptureMaps, XdpCapture};
use fastpath::bpf::{AttachOpts, Classifier, XskRedirect, XskRedirectOpts};
use fastpath::io::afxdp::{open_queues, QueueSetup};
use fastpath::io::Port;
use fastpath::netdev::Iface;
use fastpath::pcapfilter::PcapFilter;
use fastpath::rules::compile::{action, compile, ActionEntry, Compiled};
use fastpath::rules::{Action, Rule, RuleSet};
use fastpath::xsk::{RxQueues, XskConfig};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use pcap_file::pcapng::blocks::interface_statistics::{InterfaceStatisticsBlock, InterfaceStatisticsOption};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;
use serde_json::json;

use crate::args::{CaptureArgs, CaptureModeArg, RulesArgs};
use crate::common::enter_ns;
use crate::error::{env, kernel, require_privileges, runtime, usage, CliError, CliResult};
use crate::pcap_expr::{list_text, translate, List};
use crate::rotate::{FirstNames, Next, Plan, Rotor, SizeLimit};

/// Bytes of the copy-mode ring buffer: 64 MiB, about 50 ms of 64-byte frames at 10 Mpps.
const RING_BYTES: u32 = 64 << 20;

/// A writer that counts the bytes through it.
struct Counting {
    inner: Box<dyn Write>,
    bytes: u64,
}

impl Write for Counting {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(b)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Per queue counts for the statistics blocks.
#[derive(Debug, Clone, Copy, Default)]
struct QueueCounts {
    received: u64,
    dropped: u64,
}

/// The pcapng output: the current file, rotation, per-queue counts.
struct Sink {
    /// `-w -`: stdout, never rotated.
    stdout: bool,
    rotor: Rotor,
    overwrite: bool,
    /// The names this run created, in order, each once (the -W ring and -G without a time
    /// format come back to a name: the run replaces its own file, as tcpdump does).
    files: Vec<String>,
    created: HashSet<String>,
    /// -G with -W: the last file is complete; nothing more is written.
    ended: bool,
    w: Option<PcapNgWriter<Counting>>,
    iface: String,
    queues: u32,
    snaplen: u32,
    start_ns: u64,
    written: Vec<u64>,
}

fn realtime_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// Seconds since the epoch, whole (as time(2)): -G's clock.
fn realtime_s() -> i64 {
    (realtime_ns() / 1_000_000_000) as i64
}

impl Sink {
    /// Starts file `name` (ignored with `-w -`).
    fn open(&mut self, name: String) -> anyhow::Result<()> {
        let out: Box<dyn Write> = if self.stdout {
            Box::new(std::io::BufWriter::with_capacity(1 << 16, std::io::stdout()))
        } else {
            // New files only, mode 0600, never through a symlink (outfile.rs); a name this run
            // made already is replaced (tcpdump's ring and -G), any other only with --overwrite.
            let own = self.created.contains(&name);
            let f = crate::outfile::create(std::path::Path::new(&name), self.overwrite || own, "-w")?;
            Box::new(std::io::BufWriter::with_capacity(1 << 16, f))
        };
        let mut w = PcapNgWriter::new(Counting { inner: out, bytes: 0 })?;
        for q in 0..self.queues {
            w.write_pcapng_block(InterfaceDescriptionBlock {
                linktype: DataLink::ETHERNET,
                snaplen: self.snaplen,
                options: vec![
                    InterfaceDescriptionOption::IfName(Cow::Owned(self.iface.clone())),
                    InterfaceDescriptionOption::IfDescription(Cow::Owned(format!("{} queue {q}", self.iface))),
                    InterfaceDescriptionOption::IfTsResol(9),
                ],
            })?;
        }
        if self.created.insert(name.clone()) {
            self.files.push(name);
        }
        self.w = Some(w);
        Ok(())
    }

    /// Does what the rotation says: another file, or the end. Returns whether frames are still
    /// written.
    fn apply(&mut self, next: Next) -> anyhow::Result<bool> {
        match next {
            Next::Stay => Ok(true),
            Next::Open(name) => {
                self.close(&vec![QueueCounts::default(); self.queues as usize])?;
                self.open(name)?;
                Ok(true)
            }
            Next::End => {
                self.ended = true;
                Ok(false)
            }
        }
    }

    /// Between frames: -G's next file when its period is over, even if no frame comes.
    fn tick(&mut self) -> anyhow::Result<()> {
        if !self.stdout && !self.ended {
            let next = self.rotor.tick(realtime_s())?;
            self.apply(next)?;
        }
        Ok(())
    }

    /// Writes one frame, after the rotation (a new file first if this one's period is over or
    /// it is full). Returns whether it was written (not once -G with -W has ended the capture).
    fn write(&mut self, queue: u32, tstamp_ns: u64, len: u32, data: &[u8]) -> anyhow::Result<bool> {
        if self.ended {
            return Ok(false);
        }
        if !self.stdout {
            let bytes = self.w.as_ref().map_or(0, |w| w.get_ref().bytes);
            let next = self.rotor.before_frame(bytes, realtime_s())?;
            if !self.apply(next)? {
                return Ok(false);
            }
        }
        let q = queue.min(self.queues - 1);
        let w = self.w.as_mut().expect("open");
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: q,
            timestamp: Duration::from_nanos(tstamp_ns),
            original_len: len,
            data: Cow::Borrowed(data),
            options: vec![],
        })?;
        self.written[q as usize] += 1;
        Ok(true)
    }

    /// Ends the current file with a statistics block per queue (`counts`: received and dropped
    /// so far; written is the sink's own count) and flushes it.
    fn close(&mut self, counts: &[QueueCounts]) -> anyhow::Result<()> {
        let Some(mut w) = self.w.take() else { return Ok(()) };
        let now = realtime_ns();
        for q in 0..self.queues as usize {
            let c = counts.get(q).copied().unwrap_or_default();
            let mut options = vec![
                InterfaceStatisticsOption::IsbStartTime(self.start_ns),
                InterfaceStatisticsOption::IsbEndTime(now),
                InterfaceStatisticsOption::IsbUsrDeliv(self.written[q]),
            ];
            if c.received > 0 || c.dropped > 0 {
                options.push(InterfaceStatisticsOption::IsbIfRecv(c.received));
                options.push(InterfaceStatisticsOption::IsbIfDrop(c.dropped));
            }
            w.write_pcapng_block(InterfaceStatisticsBlock { interface_id: q as u32, timestamp: now, options })?;
        }
        w.get_mut().flush()?;
        Ok(())
    }
}

/// What selects the frames: the classifier's rules at the driver (`None`: every frame), their
/// text, and libpcap after the copy (with an expression).
struct Selection {
    compiled: Option<Compiled>,
    driver: String,
    after: Option<PcapFilter>,
}

impl Selection {
    /// `at the driver: ...; after the copy: ...`, as the ready line and the summary say it.
    fn text(&self) -> String {
        let after = match &self.after {
            Some(f) => format!("libpcap \"{}\"", f.expr()),
            None => "nothing".into(),
        };
        format!("at the driver: {}; after the copy: {after}", self.driver)
    }
}

/// The selection of `a`: the expression (compiled by libpcap, translated for the classifier)
/// or the rules, checked and compiled before anything touches the interface.
fn selection(a: &CaptureArgs) -> CliResult<Selection> {
    let copy = a.mode == CaptureModeArg::Copy;
    let expr = a.rules.expression.join(" ");
    if expr.trim().is_empty() {
        let rules = RulesArgs { file: a.rules.file.clone(), rules: a.rules.rules.clone() };
        return Ok(match capture_rules(&rules, copy)? {
            Some((c, text)) => Selection { compiled: Some(c), driver: text, after: None },
            None => Selection { compiled: None, driver: "every frame".into(), after: None },
        });
    }
    if a.rules.file.is_some() || !a.rules.rules.is_empty() {
        return Err(usage(anyhow!(
            "the filter expression \"{expr}\" with --rule/--rules is not accepted: select frames with one or the other"
        )));
    }
    let filter = PcapFilter::compile(&expr, a.snaplen).map_err(|e| {
        let hint = if a.rules.expression.iter().any(|w| w.starts_with("--")) {
            " (options go before the expression: every word after its first is part of it)"
        } else {
            " (the language of tcpdump, pcap-filter(7))"
        };
        usage(anyhow!("the filter expression \"{expr}\" is not accepted: {e}{hint}"))
    })?;
    let t = translate(&expr);
    if !copy {
        if let Some(why) = &t.inexact {
            return Err(usage(anyhow!(
                "--mode divert with \"{expr}\" is not accepted: divert takes the frames it selects away from the kernel, so the classifier must decide the whole expression, and {why}; use --mode copy (libpcap decides after the copy) or an expression of ip, ip6, arp, rarp, ip/ip6 host|net with and/or/not"
            )));
        }
    }
    let (compiled, driver) = match expression_rules(&t.over, copy) {
        Ok(Some(c)) => (Some(c), list_text(&t.over)),
        Ok(None) => (None, "every frame".to_string()),
        Err(e) if copy => (None, format!("every frame ({e})")),
        Err(e) => {
            return Err(usage(anyhow!(
                "--mode divert with \"{expr}\" is not accepted: the classifier cannot hold its rules ({e})"
            )))
        }
    };
    Ok(Selection { compiled, driver, after: Some(filter) })
}

/// The classifier rules of a translated expression: each rule of `l` copies (copy mode) or
/// diverts the frames it matches, or passes them uncaptured; frames the classifier cannot
/// parse (malformed, tiny fragments) are copied in copy mode and left to the kernel in divert
/// mode (libpcap decides the copied ones). `None`: `l` selects every frame.
///
/// # Errors
///
/// The compiler's message when the rules do not fit the classifier (tuples, entries).
fn expression_rules(l: &List, copy: bool) -> Result<Option<Compiled>, String> {
    if l.is_all() {
        return Ok(None);
    }
    let rules =
        l.0.iter()
            .enumerate()
            .map(|(i, (m, _))| Rule {
                name: format!("expression rule {}", i + 1),
                priority: 0,
                m: m.clone(),
                action: Action::Pass,
                rate_pps: None,
                rate_total_pps: None,
            })
            .collect();
    let set = RuleSet { rules, default: Action::Pass, malformed: Some(Action::Pass) };
    let mut c = compile("the filter expression", &set).map_err(|e| e.msg)?;
    let take = ActionEntry { code: if copy { action::PASS } else { action::XSK }, copy, ..Default::default() };
    let leave = ActionEntry { code: action::PASS, ..Default::default() };
    for (a, (_, y)) in c.actions.iter_mut().zip(&l.0) {
        *a = if *y { take } else { leave };
    }
    // Copy mode: what the rules cannot judge is copied (the default), libpcap decides it.
    c.default = if copy { ActionEntry { code: action::PASS, copy: true, ..Default::default() } } else { leave };
    c.malformed = if copy { action::MALFORMED_DEFAULT } else { action::PASS };
    c.pass_bad_fragments = true;
    Ok(Some(c))
}

/// The capture's rules, compiled, with every rule's action replaced by the capture's (copy
/// then pass, or to the AF_XDP socket) and everything else passed, and their text; `None`
/// without rules.
fn capture_rules(r: &RulesArgs, copy: bool) -> CliResult<Option<(Compiled, String)>> {
    if r.file.is_none() && r.rules.is_empty() {
        return Ok(None);
    }
    let rules = r
        .rules
        .iter()
        .map(|x| {
            if x.split(',').any(|kv| kv.trim_start().starts_with("action=")) {
                x.clone()
            } else {
                format!("{x},action=pass")
            }
        })
        .collect();
    let (set, mut c, _) = crate::common::compile_rules(&RulesArgs { file: r.file.clone(), rules })?;
    let text = set
        .rules
        .iter()
        .map(|r| {
            let t = r.text();
            let t = t.split(",action=").next().unwrap_or(&t);
            format!("{t} -> copy")
        })
        .chain(std::iter::once("* -> skip".to_string()))
        .collect::<Vec<_>>()
        .join("; ");
    let act = ActionEntry { code: if copy { action::PASS } else { action::XSK }, copy, ..Default::default() };
    c.actions.iter_mut().for_each(|a| *a = act);
    c.default = ActionEntry { code: action::PASS, ..Default::default() };
    c.malformed = action::PASS;
    // Capture changes no frame's fate: a tiny or overlapping fragment goes on to the kernel
    // (whose reassembly discards overlapping fragments) instead of being dropped here. It is
    // not classified, so not captured.
    c.pass_bad_fragments = true;
    c.cpu_sets.clear();
    c.redirect_ifaces.clear();
    Ok(Some((c, text)))
}

/// A failed write to the output: with `-w -` and EPIPE, one line saying the reader went away
/// (the capture is incomplete: a failure, not an end).
fn write_err(e: anyhow::Error, frames: u64) -> CliError {
    if is_broken_pipe(&e) {
        runtime(anyhow!(
            "-w -: the reader of the pipe closed it (EPIPE) after {frames} frames were captured; the capture is incomplete"
        ))
    } else {
        runtime(e)
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.to_string().contains("Broken pipe")
    })
}

/// `fastpath capture`.
///
/// # Errors
///
/// Usage (exit 2) for rejected options or an output file that exists; environment for an
/// output that cannot be created; kernel errors from loading, attaching or the sockets; runtime
/// errors from writing the output.
pub fn run(a: &CaptureArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    check_options(a)?;
    // The rotation's clock starts now: the first file's name (-G) is the one checked.
    let rotor = Rotor::new(plan(a), realtime_s()).map_err(usage)?;
    // The expression or the rules are read and compiled before anything touches the interface.
    let sel = selection(a)?;
    require_privileges("capture")?;
    let metrics = crate::metrics::start(a.metrics)?;
    check_output(a, &rotor)?;
    enter_ns(&a.netns)?;
    let iface = Iface::resolve(&a.iface)?;
    let queues = iface.dev().rx_queue_count().map_err(kernel)?.unwrap_or(1).clamp(1, 64);
    let mono0 = fastpath::clock::monotonic_ns();
    let real0 = realtime_ns();
    let first = rotor.current();
    let mut sink = Sink {
        stdout: a.write == "-",
        rotor,
        overwrite: a.overwrite,
        files: Vec::new(),
        created: HashSet::new(),
        ended: false,
        w: None,
        iface: a.iface.clone(),
        queues,
        snaplen: a.snaplen,
        start_ns: real0,
        written: vec![0; queues as usize],
    };
    sink.open(first).map_err(env)?;
    let cx = Cx {
        a,
        iface: &iface,
        opts: AttachOpts::mode(a.xdp_mode.mode()).force(a.force),
        queues,
        deadline: a.duration.map(|d| Instant::now() + Duration::from_secs_f64(d)),
        count: a.count.unwrap_or(u64::MAX),
        stop: &stop,
        metrics: metrics.as_ref(),
        mode_name: match a.mode {
            CaptureModeArg::Copy => "copy",
            CaptureModeArg::Divert => "divert",
        },
        sel: &sel,
        rejected: std::cell::Cell::new(0),
    };
    let (counts, xdp_mode) = match a.mode {
        CaptureModeArg::Copy => capture_copy(&cx, sel.compiled.as_ref(), &mut sink, (mono0, real0))?,
        CaptureModeArg::Divert => capture_divert(&cx, sel.compiled.as_ref(), &mut sink)?,
    };
    if let Some(m) = &metrics {
        m.publish(&capture_families(&a.iface, &counts, &sink.written));
    }
    if let Err(e) = sink.close(&counts) {
        return Err(write_err(e, sink.written.iter().sum()));
    }
    summary(&cx, &sink, &counts, xdp_mode);
    Ok(())
}

/// The rotation options (-C or --rotate-bytes, -W, -G) as a [`Plan`].
fn plan(a: &CaptureArgs) -> Plan {
    Plan {
        path: a.write.clone(),
        size: a.rotate_mb.map(|m| SizeLimit::Exceeds(m * 1_000_000)).or(a.rotate_bytes.map(SizeLimit::Holds)),
        files: a.rotate_files,
        seconds: a.rotate_seconds,
    }
}

/// The option checks made before anything is set up (exit 2, usage). (Value ranges are the
/// parsers' in args.rs.)
fn check_options(a: &CaptureArgs) -> CliResult<()> {
    if let (Some(c), Some(b)) = (a.rotate_mb, a.rotate_bytes) {
        return Err(usage(anyhow!(
            "-C {c} with --rotate-bytes {b} is not accepted: both set the file size (-C in millions of bytes, --rotate-bytes in bytes); give one"
        )));
    }
    if a.write == "-" {
        let given = [
            a.rotate_mb.map(|v| format!("-C {v}")),
            a.rotate_bytes.map(|v| format!("--rotate-bytes {v}")),
            a.rotate_files.map(|v| format!("-W {v}")),
            a.rotate_seconds.map(|v| format!("-G {v}")),
        ];
        if let Some(flag) = given.into_iter().flatten().next() {
            return Err(usage(anyhow!("{flag} with -w - is not accepted: rotation needs a file name")));
        }
    }
    if let (Some(w), None, None, None) = (a.rotate_files, a.rotate_mb, a.rotate_bytes, a.rotate_seconds) {
        eprintln!(
            "fastpath capture: -W {w} has no effect without -C, --rotate-bytes or -G (tcpdump ignores it too); one file is written"
        );
    }
    Ok(())
}

/// The size rotation's flag, for messages.
fn size_flag(a: &CaptureArgs) -> &'static str {
    if a.rotate_mb.is_some() {
        "-C"
    } else {
        "--rotate-bytes"
    }
}

/// The output is checked before anything is attached: a path that cannot be written is refused
/// with nothing done. That covers every name the first file period may take ([`Rotor::
/// first_names`]): -w itself; with -C or --rotate-bytes, FILE then FILE1, FILE2, ... (FILE
/// followed by a number from 1, as tcpdump -C names them); with -W too, the ring's names; with
/// -G, the name strftime(3) makes now (and its numbered ones with -C). An existing one is
/// refused as FILE itself is (exit 2, unless `--overwrite`, and never a symbolic link,
/// directory, FIFO or device), so that a capture cannot stop partway at a file left by an
/// earlier run. Refusing rather than taking the next free names keeps FILE, FILE1, ... one run's
/// files in order, as an operator reading them with tcpdump -r or mergecap expects. With
/// `--overwrite`, a note on stderr names the existing ones: each is replaced when the capture
/// reaches it, and any it does not reach is left as it is. The names of later -G periods
/// cannot be known in advance: each is checked when the capture reaches it (an existing file
/// this run did not make stops the capture, exit 5, unless --overwrite; a symbolic link always).
fn check_output(a: &CaptureArgs, rotor: &Rotor) -> CliResult<()> {
    let first = rotor.current();
    let dir_ok =
        a.write == "-" || std::path::Path::new(&first).parent().is_none_or(|p| p.as_os_str().is_empty() || p.is_dir());
    if !dir_ok {
        let shown = if first == a.write { a.write.clone() } else { format!("{} ({first})", a.write) };
        return Err(env(anyhow!("-w {shown}: its directory does not exist")));
    }
    if a.write == "-" {
        return Ok(());
    }
    match rotor.first_names() {
        FirstNames::Numbered(base) => {
            crate::outfile::check(std::path::Path::new(&base), a.overwrite, "-w").map_err(usage)?;
            check_rotation_names(a, &base)
        }
        FirstNames::Listed(names) if names.len() == 1 => {
            crate::outfile::check(std::path::Path::new(&names[0]), a.overwrite, "-w").map_err(usage)
        }
        FirstNames::Listed(names) => check_ring_names(a, &names),
    }
}

/// The ring of -W N (with -C or --rotate-bytes): each of its names refused as `-w FILE` itself
/// is, the first existing one named; with `--overwrite`, the replaceable ones named in a note.
fn check_ring_names(a: &CaptureArgs, names: &[String]) -> CliResult<()> {
    let (first, last) = (&names[0], &names[names.len() - 1]);
    let mut existing = 0;
    for (k, n) in names.iter().enumerate() {
        let p = std::path::Path::new(n);
        crate::outfile::check(p, a.overwrite, "-w").map_err(|e| {
            usage(anyhow!(
                "{e} (it would be file {} of the ring of {} -W {}: {first} .. {last}; remove the earlier run's files or name another -w)",
                k + 1,
                size_flag(a),
                names.len()
            ))
        })?;
        existing += usize::from(std::fs::symlink_metadata(p).is_ok());
    }
    if existing > 0 {
        eprintln!(
            "fastpath capture: --overwrite: {existing} of the {} ring files ({first} .. {last}) exist; each is replaced when the capture reaches it, the rest are left as they are",
            names.len()
        );
    }
    Ok(())
}

/// The existing rotation names of `file` (FILE1, FILE2, ...: FILE then a decimal number from
/// 1 without leading zeros), lowest number first. Errors: environment, if FILE's directory
/// cannot be listed.
fn rotation_names(file: &str) -> CliResult<Vec<(u64, std::path::PathBuf)>> {
    let path = std::path::Path::new(file);
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    let Some(base) = path.file_name().and_then(|b| b.to_str()) else {
        return Ok(Vec::new());
    };
    let listing = std::fs::read_dir(dir).map_err(|e| env(anyhow!("-w {file}: its directory cannot be listed: {e}")))?;
    let mut found = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|e| env(anyhow!("-w {file}: its directory cannot be listed: {e}")))?;
        let name = entry.file_name();
        let Some(k) = name.to_str().and_then(|n| n.strip_prefix(base)) else { continue };
        if k.starts_with(|c: char| c.is_ascii_digit() && c != '0') && k.bytes().all(|c| c.is_ascii_digit()) {
            // A number past u64 is a name no run reaches.
            if let Ok(k) = k.parse::<u64>() {
                found.push((k, dir.join(name)));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// -C or `--rotate-bytes` without -W: every existing name the run may take after `base`
/// (BASE1, BASE2, ...) refused as `-w FILE` itself is, the first (lowest number) named; with
/// `--overwrite`, the replaceable ones named in a note.
fn check_rotation_names(a: &CaptureArgs, base: &str) -> CliResult<()> {
    let existing = rotation_names(base)?;
    for (k, p) in &existing {
        crate::outfile::check(p, a.overwrite, "-w").map_err(|e| {
            usage(anyhow!(
                "{e} (it would be file {} of {}: {w}, {w}1, {w}2, ...; remove the earlier run's files or name another -w)",
                k + 1,
                size_flag(a),
                w = base
            ))
        })?;
    }
    if let (Some((_, first)), Some((_, last))) = (existing.first(), existing.last()) {
        eprintln!(
            "fastpath capture: --overwrite: {} rotation files of -w {} exist ({} .. {}); each is replaced when the capture reaches it, the rest are left as they are",
            existing.len(),
            base,
            first.display(),
            last.display()
        );
    }
    Ok(())
}

/// What both capture modes use: the options, the interface, when to end, the metrics endpoint.
struct Cx<'a> {
    a: &'a CaptureArgs,
    iface: &'a Iface,
    opts: AttachOpts,
    queues: u32,
    deadline: Option<Instant>,
    count: u64,
    stop: &'a AtomicBool,
    metrics: Option<&'a crate::metrics::MetricsServer>,
    mode_name: &'static str,
    /// What selects the frames, at the driver and after the copy.
    sel: &'a Selection,
    /// Frames libpcap rejected after the copy (not written).
    rejected: std::cell::Cell<u64>,
}

impl Cx<'_> {
    /// Whether the capture ends, `n` frames written: stopped, --count reached, or --duration over.
    fn ended(&self, n: u64) -> bool {
        self.stop.load(Ordering::Relaxed) || n >= self.count || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Whether libpcap (the expression, if any) keeps a copied frame of `wire_len` bytes whose
    /// captured part is `data`; a rejected frame is counted.
    fn keep(&self, data: &[u8], wire_len: u32) -> bool {
        match &self.sel.after {
            Some(f) if !f.matches(data, wire_len) => {
                self.rejected.set(self.rejected.get() + 1);
                false
            }
            _ => true,
        }
    }

    /// A line for the user: on stderr when the capture goes to stdout (`-w -`), else stdout.
    fn say(&self, line: String) {
        if self.a.write == "-" {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }
}

/// `--mode copy`: every frame (xdp_capture) or the frames the rules match (the classifier)
/// through the ring buffer into `sink`; `clock` is (monotonic, realtime) at the start, to shift
/// the program's timestamps. Returns the per-queue counts and the XDP mode.
fn capture_copy(
    cx: &Cx,
    rules: Option<&Compiled>,
    sink: &mut Sink,
    (mono0, real0): (u64, u64),
) -> CliResult<(Vec<QueueCounts>, &'static str)> {
    let (a, queues, count) = (cx.a, cx.queues, cx.count);
    // With an expression libpcap judges the whole frame, as tcpdump -s's filter does, and only
    // what is written is cut to the snap length: the program copies up to its longest
    // (MAX_SNAPLEN), so a frame the expression keeps for bytes past -s is not lost.
    let copy_bytes = if cx.sel.after.is_some() { fastpath::bpf::capture::MAX_SNAPLEN } else { a.snaplen };
    let snap = a.snaplen as usize;
    let (_all, _cls, maps_own, at_mode, notes);
    let cap: &CaptureMaps = match rules {
        None => {
            let at = XdpCapture::load(copy_bytes, RING_BYTES)?.attach(cx.iface, cx.opts)?;
            (at_mode, notes) = (at.mode, at.notes);
            _all = at.prog;
            _all.maps()
        }
        Some(c) => {
            let (cls, maps) = Classifier::load_with_capture(copy_bytes, RING_BYTES)?;
            cls.swap_in(c)?;
            let at = cls.attach(cx.iface, cx.opts)?;
            (at_mode, notes) = (at.mode, at.notes);
            _cls = at.prog;
            maps_own = maps;
            &maps_own
        }
    };
    for n in &notes {
        eprintln!("fastpath capture: {n}");
    }
    ready(cx, at_mode.name());
    let sink_cell = RefCell::new(sink);
    let total = std::cell::Cell::new(0u64);
    let failed: RefCell<Option<anyhow::Error>> = RefCell::new(None);
    let rb = cap
        .ring(|r| {
            if total.get() >= count || failed.borrow().is_some() {
                return;
            }
            if !cx.keep(r.data, r.len) {
                return;
            }
            let ts = r.tstamp_ns.saturating_sub(mono0).saturating_add(real0);
            match sink_cell.borrow_mut().write(r.queue, ts, r.len, &r.data[..r.data.len().min(snap)]) {
                Ok(true) => total.set(total.get() + 1),
                Ok(false) => {}
                Err(e) => *failed.borrow_mut() = Some(e),
            }
        })
        .map_err(kernel)?;
    let stats = |cap: &CaptureMaps| -> Vec<QueueCounts> {
        (0..queues)
            .map(|q| {
                let s = cap.stats(q).unwrap_or_default();
                QueueCounts { received: s.seen, dropped: s.ringbuf_full }
            })
            .collect()
    };
    while !cx.ended(total.get()) && failed.borrow().is_none() && !sink_cell.borrow().ended {
        let _ = rb.poll(Duration::from_millis(50));
        if let Err(e) = sink_cell.borrow_mut().tick() {
            *failed.borrow_mut() = Some(e);
        }
        if let Some(m) = cx.metrics.filter(|m| m.due()) {
            m.publish(&capture_families(&a.iface, &stats(cap), &sink_cell.borrow().written));
        }
    }
    // What is already in the ring buffer is written too (up to --count).
    let _ = rb.consume();
    drop(rb);
    if let Some(e) = failed.into_inner() {
        return Err(write_err(e, total.get()));
    }
    Ok((stats(cap), at_mode.name()))
}

/// `--mode divert`'s sockets: a socket per queue with every frame (xsk_redirect) or the frames
/// the rules match (the classifier, whose rules all send to the queue's socket) sent to it.
/// Returns them with the XDP mode.
fn divert_queues(cx: &Cx, rules: Option<&Compiled>) -> CliResult<(Divert, &'static str)> {
    // 64 MiB of UMEM and 16,384-descriptor rings: the process may be off its CPU for a
    // few milliseconds while the receive path keeps filling (the copy mode's ring
    // buffer and tcpdump -B 65536 hold as much).
    let mut cfg = XskConfig::default();
    cfg.umem.frame_size = 2048;
    cfg.umem.frame_count = 32768;
    cfg.umem.fill_size = 16384;
    cfg.umem.comp_size = 64;
    cfg.socket.ring_size = 16384;
    let mtu = cx.iface.dev().mtu().map_err(kernel)?;
    if let Some(n) = crate::session::decide_multi_buffer(&cx.a.iface, mtu, &mut cfg)? {
        eprintln!("fastpath capture: {n}");
    }
    let mb = cfg.socket.multi_buffer;
    let mut setup = QueueSetup::new(cx.iface.clone(), RxQueues::check(cx.iface, (0..cx.queues).collect())?);
    setup.config = cfg;
    setup.attach = cx.opts;
    let (q, xdp_mode, notes) = match rules {
        None => {
            let prog = XskRedirect::load(XskRedirectOpts::default().with_frags(mb))?;
            let q = open_queues(&setup, Some(prog))?;
            let at = q.attached.as_ref().expect("attached");
            let (mode, notes) = (at.mode.name(), at.notes.clone());
            (Divert::All(q), mode, notes)
        }
        Some(c) => {
            let cls = Classifier::load()?;
            cls.swap_in(c)?;
            let q = open_queues(&setup, Some(cls))?;
            let at = q.attached.as_ref().expect("attached");
            let (mode, notes) = (at.mode.name(), at.notes.clone());
            (Divert::Rules(Box::new(q)), mode, notes)
        }
    };
    for n in notes {
        eprintln!("fastpath capture: {n}");
    }
    Ok((q, xdp_mode))
}

/// `--mode divert`: the frames from the sockets into `sink` until the end. Returns the
/// per-queue counts and the XDP mode.
fn capture_divert(cx: &Cx, rules: Option<&Compiled>, sink: &mut Sink) -> CliResult<(Vec<QueueCounts>, &'static str)> {
    let (a, count) = (cx.a, cx.count);
    let (mut q, xdp_mode) = divert_queues(cx, rules)?;
    let q = q.ports();
    ready(cx, xdp_mode);
    let mut total = 0u64;
    let stats = |ports: &[fastpath::io::afxdp::AfXdpPort], written: &[u64]| -> Vec<QueueCounts> {
        ports
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let s = p.socket().stats().unwrap_or_default();
                let dropped = s.rx_dropped + s.rx_ring_full;
                QueueCounts { received: written[k] + dropped, dropped }
            })
            .collect()
    };
    let snap = a.snaplen as usize;
    'outer: while !cx.ended(total) {
        let mut got = 0;
        for (k, port) in q.iter_mut().enumerate() {
            let mut err = None;
            let left = count.saturating_sub(total).min(256) as usize;
            if left == 0 {
                break 'outer;
            }
            got += port
                .rx_burst(left, 0, |f| {
                    // libpcap judges the whole frame, as tcpdump -s's filter does (the snap
                    // length only cuts what is written): this frame is taken from the kernel,
                    // so one rejected for bytes past the snap length would be lost.
                    if err.is_none() && cx.keep(f, f.len() as u32) {
                        let ts = realtime_ns();
                        if let Err(e) = sink.write(k as u32, ts, f.len() as u32, &f[..f.len().min(snap)]) {
                            err = Some(e);
                        }
                    }
                })
                .map_err(|e| runtime(anyhow!("{e}")))?;
            if let Some(e) = err {
                return Err(write_err(e, sink.written.iter().sum()));
            }
            total = sink.written.iter().sum();
        }
        if got == 0 {
            let _ = q[0].rx_burst(0, 20, |_| {});
        }
        if let Err(e) = sink.tick() {
            return Err(write_err(e, sink.written.iter().sum()));
        }
        if sink.ended {
            break;
        }
        if let Some(m) = cx.metrics.filter(|m| m.due()) {
            m.publish(&capture_families(&a.iface, &stats(q, &sink.written), &sink.written));
        }
    }
    Ok((stats(q, &sink.written), xdp_mode))
}

/// The summary line: frames written, received and dropped (per queue too with --json).
fn summary(cx: &Cx, sink: &Sink, counts: &[QueueCounts], xdp_mode: &str) {
    let (a, mode_name) = (cx.a, cx.mode_name);
    let written: u64 = sink.written.iter().sum();
    let received: u64 = counts.iter().map(|c| c.received).sum();
    let dropped: u64 = counts.iter().map(|c| c.dropped).sum();
    if a.json {
        cx.say(json!({"type": "summary", "command": "capture", "iface": a.iface, "mode": mode_name, "xdp_mode": xdp_mode,
                   "written": written, "received": received, "dropped": dropped, "files": sink.files,
                   "filter": cx.sel.text(), "filter_rejected_frames": cx.rejected.get(),
                   "per_queue": counts.iter().enumerate().map(|(q, c)| json!({"queue": q, "received": c.received, "dropped": c.dropped, "written": sink.written[q]})).collect::<Vec<_>>()})
        .to_string());
    } else {
        let files = match &sink.files[..] {
            [first, _, _, _, .., last] => format!("{first}, ... {last} ({} files)", sink.files.len()),
            all => all.join(", "),
        };
        let filter = match &cx.sel.after {
            Some(_) => format!("; filter: {}; {} frames rejected after the copy", cx.sel.text(), cx.rejected.get()),
            None => String::new(),
        };
        cx.say(format!(
            "capture {} ({mode_name}, {xdp_mode}): {written} frames written to {files}; {received} received, {dropped} dropped by the capture{filter}",
            a.iface
        ));
    }
}

/// The divert mode's program and sockets.
enum Divert {
    All(fastpath::io::afxdp::Queues<XskRedirect>),
    Rules(Box<fastpath::io::afxdp::Queues<Classifier>>),
}

impl Divert {
    fn ports(&mut self) -> &mut Vec<fastpath::io::afxdp::AfXdpPort> {
        match self {
            Divert::All(q) => &mut q.ports,
            Divert::Rules(q) => &mut q.ports,
        }
    }
}

/// The ready line: JSON with --json; as text, only with an expression or rules (which part of
/// the selection runs where).
fn ready(cx: &Cx, xdp_mode: &str) {
    let a = cx.a;
    if a.json {
        cx.say(
            json!({"type": "ready", "command": "capture", "iface": a.iface, "mode": cx.mode_name, "xdp_mode": xdp_mode,
                   "queues": cx.queues, "snaplen": a.snaplen, "write": a.write, "filter": cx.sel.text()})
            .to_string(),
        );
    } else if cx.sel.compiled.is_some() || cx.sel.after.is_some() {
        cx.say(format!("capture {} ({}, {xdp_mode}): filter: {}", a.iface, cx.mode_name, cx.sel.text()));
    }
}

/// `--metrics`: per queue, frames received, written and dropped by the capture.
fn capture_families(iface: &str, counts: &[QueueCounts], written: &[u64]) -> Vec<crate::metrics::Family> {
    use crate::metrics::Family;
    let l = ["iface", "queue"];
    let mut r = Family::counter("fastpath_capture_received_frames_total", "Frames the capture saw.", &l);
    let mut w = Family::counter("fastpath_capture_written_frames_total", "Frames written to the file.", &l);
    let mut d = Family::counter(
        "fastpath_capture_dropped_frames_total",
        "Frames the capture lost (ring buffer or AF_XDP ring full).",
        &l,
    );
    for (q, c) in counts.iter().enumerate() {
        let qs = q.to_string();
        r.add(&[iface, &qs], c.received as f64);
        w.add(&[iface, &qs], written.get(q).copied().unwrap_or(0) as f64);
        d.add(&[iface, &qs], c.dropped as f64);
    }
    vec![r, w, d]
}
