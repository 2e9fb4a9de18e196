//! Standard output and error that may be closed: `fastpath probe | head -1`, `... | true`.
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe returns EPIPE, and `println!` panics on
//! it. Every `println!`/`print!`/`eprintln!` of this crate is the macro of the crate root,
//! which calls [`line`], [`text`] or [`err_line`] here instead. Restoring SIGPIPE's default
//! (death at the first write) was not chosen: a command that runs a test bed or attaches XDP
//! programs would then die without removing them.
//!
//! On EPIPE on stdout: nothing more is printed, the command's stop flag is raised (as Ctrl-C
//! does), so a long-running command ends on its normal path and removes what it set up, and
//! the process exits with status 141 ([`EXIT_CLOSED`], what a shell reports for a tool killed by
//! SIGPIPE), silently. Output that is the command's product is not printed through here: a
//! capture to `-w -` whose reader goes away fails with one line on stderr (capture_cmd).
//! A closed stderr is ignored.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// Exit status after stdout was closed: 128 + SIGPIPE, as a shell shows a tool SIGPIPE killed.
pub const EXIT_CLOSED: i32 = 141;

static CLOSED: AtomicBool = AtomicBool::new(false);
static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// The flag raised when stdout closes (the one SIGINT raises).
pub fn init(stop: Arc<AtomicBool>) {
    let _ = STOP.set(stop);
}

/// True once a write to stdout failed with EPIPE.
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

fn failed(e: &std::io::Error) {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        CLOSED.store(true, Ordering::Relaxed);
        if let Some(s) = STOP.get() {
            s.store(true, Ordering::Relaxed);
        }
    }
}

/// `println!`: one line on stdout.
pub fn line(args: std::fmt::Arguments) {
    if closed() {
        return;
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|_| o.write_all(b"\n")).and_then(|_| o.flush()) {
        failed(&e);
    }
}

/// `print!`: text on stdout.
pub fn text(args: std::fmt::Arguments) {
    if closed() {
        return;
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|_| o.flush()) {
        failed(&e);
    }
}

/// `eprintln!`: one line on stderr; errors ignored.
pub fn err_line(args: std::fmt::Arguments) {
    let mut o = std::io::stderr().lock();
    let _ = o.write_fmt(args).and_then(|_| o.write_all(b"\n"));
}

/// Flushes stdout (before a blocking phase), noting a closed pipe.
pub fn flush() {
    if let Err(e) = std::io::stdout().flush() {
        failed(&e);
    }
}
