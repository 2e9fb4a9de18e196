//! Operator logs: events (attached, detached, reloaded, drops crossing a threshold) as one line
//! each on stderr through the `log` facade and `env_logger`, level `info` unless `RUST_LOG`
//! says otherwise (`RUST_LOG=warn`, `RUST_LOG=debug`, or env_logger's per-module syntax).
//!
//! Two shapes, chosen once at start:
//! - stderr is the journal (systemd sets `JOURNAL_STREAM=DEV:INO` to the device and inode of
//!   the stream it gave the service, see systemd.exec(5)): `<N>message`, the sd-daemon(3)
//!   priority prefix the journal turns into the entry's priority (`<3>` error, `<4>` warning,
//!   `<6>` info, `<7>` debug and trace), and no timestamp (the journal keeps its own);
//! - anything else: `fastpath: LEVEL: message` (`fastpath: warning: ...`), the shape of the
//!   final `fastpath: error: ...` line every command ends with on failure.
//!
//! The same test tells whether stdout is the journal: a command run by systemd prints no
//! interval lines there unless `--interval` is given ([`interval_lines`]).

use std::io::{IsTerminal, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;

/// Whether stderr is the journal, decided once by [`init`].
static JOURNAL_STDERR: OnceLock<bool> = OnceLock::new();

/// Parses `JOURNAL_STREAM`'s value, `DEV:INO` in decimal (systemd.exec(5)).
fn parse_journal_stream(v: &str) -> Option<(u64, u64)> {
    let (dev, ino) = v.split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

/// True if `fd` is the stream `JOURNAL_STREAM` names (same device and inode, by fstat).
/// False without the variable, with a malformed one, or if `fd` cannot be examined.
fn is_journal(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    is_stream(fd, std::env::var("JOURNAL_STREAM").ok().as_deref())
}

/// True if `fd` is the stream `journal_stream` (`DEV:INO`) names.
fn is_stream(fd: std::os::fd::BorrowedFd<'_>, journal_stream: Option<&str>) -> bool {
    let Some((dev, ino)) = journal_stream.and_then(parse_journal_stream) else {
        return false;
    };
    // fstat through a duplicate of the descriptor: std has no fstat on a borrowed fd.
    let Ok(own) = fd.try_clone_to_owned() else { return false };
    match std::fs::File::from(own).metadata() {
        Ok(m) => m.dev() == dev && m.ino() == ino,
        Err(_) => false,
    }
}

/// True if stdout is the journal (a command run by systemd with the default StandardOutput).
pub fn stdout_is_journal() -> bool {
    is_journal(std::io::stdout().as_fd())
}

/// True if stderr is the journal (see the module docs).
pub fn stderr_is_journal() -> bool {
    *JOURNAL_STDERR.get_or_init(|| is_journal(std::io::stderr().as_fd()))
}

/// The sd-daemon(3) priority prefix of a level: `<3>` error, `<4>` warning, `<6>` info,
/// `<7>` debug and trace.
fn priority(l: log::Level) -> &'static str {
    match l {
        log::Level::Error => "<3>",
        log::Level::Warn => "<4>",
        log::Level::Info => "<6>",
        log::Level::Debug | log::Level::Trace => "<7>",
    }
}

/// The word of a level in a plain line.
fn word(l: log::Level) -> &'static str {
    match l {
        log::Level::Error => "error",
        log::Level::Warn => "warning",
        log::Level::Info => "info",
        log::Level::Debug => "debug",
        log::Level::Trace => "trace",
    }
}

/// One log line as written (without its newline).
fn format_line(journal: bool, l: log::Level, msg: &std::fmt::Arguments) -> String {
    if journal {
        format!("{}{msg}", priority(l))
    } else {
        format!("fastpath: {}: {msg}", word(l))
    }
}

/// Sets up the logger: stderr, level info unless `RUST_LOG` is set, no colour, the shape of
/// the module docs. Call once, first thing in `main`.
pub fn init() {
    let journal = stderr_is_journal();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .write_style(env_logger::WriteStyle::Never)
        .target(env_logger::Target::Stderr)
        .format(move |buf, r| writeln!(buf, "{}", format_line(journal, r.level(), r.args())))
        .init();
}

/// The prefix of the final `fastpath: error: ...` line: the journal's error priority `<3>` when
/// stderr is the journal, else nothing (the line itself is unchanged).
pub fn error_prefix() -> &'static str {
    if stderr_is_journal() {
        priority(log::Level::Error)
    } else {
        ""
    }
}

/// Whether a long-running command prints its interval lines: always with `--interval` given;
/// never when stdout is the journal (86,400 lines a day per interface) unless it is; otherwise
/// with `--json` given or stdout a terminal. The summary at the end is printed in every case.
pub fn interval_lines(interval_given: bool, json: bool) -> bool {
    decide_interval_lines(interval_given, json, stdout_is_journal(), std::io::stdout().is_terminal())
}

fn decide_interval_lines(interval_given: bool, json: bool, journal: bool, terminal: bool) -> bool {
    interval_given || (!journal && (json || terminal))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_stream_is_dev_colon_ino() {
        assert_eq!(parse_journal_stream("8:12345"), Some((8, 12345)));
        assert_eq!(parse_journal_stream("8"), None);
        assert_eq!(parse_journal_stream("x:1"), None);
        assert_eq!(parse_journal_stream(""), None);
    }

    #[test]
    fn log_lines_carry_the_journal_priority_or_the_plain_prefix() {
        let l = |j, lv| format_line(j, lv, &format_args!("attached"));
        assert_eq!(l(true, log::Level::Error), "<3>attached");
        assert_eq!(l(true, log::Level::Warn), "<4>attached");
        assert_eq!(l(true, log::Level::Info), "<6>attached");
        assert_eq!(l(true, log::Level::Debug), "<7>attached");
        assert_eq!(l(false, log::Level::Warn), "fastpath: warning: attached");
        assert_eq!(l(false, log::Level::Info), "fastpath: info: attached");
    }

    #[test]
    fn interval_lines_only_on_a_terminal_or_when_asked() {
        // (interval given, json, stdout the journal, stdout a terminal) -> printed
        for (given, json, journal, tty, want) in [
            (false, false, false, false, false), // a pipe or file: the summary only
            (false, false, false, true, true),   // a terminal
            (false, true, false, false, true),   // --json asked for them
            (true, false, false, false, true),   // --interval asked for them
            (false, true, true, false, false),   // under systemd: none by default
            (false, false, true, true, false),
            (true, false, true, false, true), // unless --interval is given
        ] {
            assert_eq!(decide_interval_lines(given, json, journal, tty), want, "{given} {json} {journal} {tty}");
        }
    }

    #[test]
    fn a_stream_is_the_journal_only_if_dev_and_ino_match() {
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        let m = f.metadata().unwrap();
        assert!(is_stream(f.as_fd(), Some(&format!("{}:{}", m.dev(), m.ino()))));
        assert!(!is_stream(f.as_fd(), Some(&format!("{}:{}", m.dev(), m.ino() + 1))));
        assert!(!is_stream(f.as_fd(), Some(&format!("{}:{}", m.dev() + 1, m.ino()))));
        assert!(!is_stream(f.as_fd(), None));
    }
}
