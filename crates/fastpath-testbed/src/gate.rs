//! Whether a privileged test may run, and what happens when it cannot: the one policy of every
//! test in the workspace that needs root (network namespaces, veth pairs, XDP, AF_XDP) or
//! another thing a machine may lack.
//!
//! A test that cannot run is never reported as passed by default:
//!
//! - with `CI=true` it FAILS, always (CI runs as root: a test that cannot run there is a broken
//!   set-up);
//! - otherwise it FAILS too, its message naming what is missing and how to run without it,
//!   unless the user asked for the unprivileged subset with
//!   [`UNPRIVILEGED_ENV`]`=1` (`UNPRIVILEGED=1 make test` sets it);
//! - then it is SKIPPED: a `SKIPPED <test>: needs <what>` line on the process's real stderr
//!   (not the test harness's captured output), and its name appended to the file named by
//!   [`SKIPPED_LOG_ENV`] if set, where `make test` counts the skipped tests and prints how many.
//!
//! Why not `#[ignore]`: an ignored test is skipped for root too unless every runner (CI, `make
//! mutants`, a developer's `cargo test -- NAME`) adds `--include-ignored`, and renaming ~160
//! tests with a prefix would move every test name the mutation rows and scripts refer to. The
//! decision here is made at run time, where the test knows what it lacks.

use std::io::Write;

/// Set to `1` to run only the unprivileged tests: a test that cannot run is then SKIPPED
/// (reported on stderr and in [`SKIPPED_LOG_ENV`]) instead of failing. Ignored under `CI=true`.
pub const UNPRIVILEGED_ENV: &str = "FASTPATH_TEST_UNPRIVILEGED";

/// A file each skipped test's name is appended to (one line each; `O_APPEND`, so the test
/// processes that run at once do not interleave within a line).
pub const SKIPPED_LOG_ENV: &str = "FASTPATH_TEST_SKIPPED_LOG";

/// What root gives the privileged tests, for their messages.
pub const ROOT: &str = "root (network namespaces, veth pairs, XDP, AF_XDP)";

/// What a test that lacks something does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing is missing: run it.
    Run,
    /// The user asked for the unprivileged subset: skip it, visibly.
    Skip,
    /// Fail, with this message (one line).
    Fail(String),
}

/// The decision for `test`, which lacks `missing` (None: nothing), given `CI` and
/// [`UNPRIVILEGED_ENV`]'s values. Pure: [`can_run`] applies it.
pub fn verdict(test: &str, missing: Option<&str>, ci: Option<&str>, unprivileged: Option<&str>) -> Verdict {
    let Some(what) = missing else { return Verdict::Run };
    if ci == Some("true") {
        return Verdict::Fail(format!("{test}: needs {what}, and CI=true forbids skipping a test"));
    }
    if unprivileged == Some("1") {
        return Verdict::Skip;
    }
    Verdict::Fail(format!(
        "{test}: needs {what}; a test that cannot run does not pass: run it as root (sudo -E cargo test, or make test), or set {UNPRIVILEGED_ENV}=1 (UNPRIVILEGED=1 make test) to skip it and run only the unprivileged tests"
    ))
}

/// Whether the effective user is root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// True if `test`, which lacks `missing` (None: nothing), may run; false if it is to be skipped
/// (the SKIPPED line is printed and logged).
///
/// # Panics
///
/// When [`verdict`] says the test fails (something is missing and the unprivileged subset was
/// not asked for, or `CI=true`): the panic is the test's failure, its message the one line.
pub fn can_run(test: &str, missing: Option<&str>) -> bool {
    match skip_or_fail(test, missing) {
        Ok(run) => run,
        Err(m) => panic!("{m}"),
    }
}

/// [`can_run`] for a test that runs as root: `needs` names what root gives it.
pub fn privileged(test: &str) -> bool {
    can_run(test, (!is_root()).then_some(ROOT))
}

/// [`can_run`] without the panic, for a test with its own `main` (harness = false): Ok(true)
/// run, Ok(false) skipped (reported and logged).
///
/// # Errors
///
/// The one-line message of a test that must fail rather than skip (see [`verdict`]).
pub fn skip_or_fail(test: &str, missing: Option<&str>) -> Result<bool, String> {
    let ci = std::env::var("CI").ok();
    let unprivileged = std::env::var(UNPRIVILEGED_ENV).ok();
    match verdict(test, missing, ci.as_deref(), unprivileged.as_deref()) {
        Verdict::Run => Ok(true),
        Verdict::Fail(m) => Err(m),
        Verdict::Skip => {
            let what = missing.unwrap_or_default();
            // The real stderr, not the harness's captured output: a skip must be seen.
            let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: needs {what} ({UNPRIVILEGED_ENV}=1)");
            if let Some(log) = std::env::var_os(SKIPPED_LOG_ENV) {
                let line = format!("{test}\n");
                let _ = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)
                    .and_then(|mut f| f.write_all(line.as_bytes()));
            }
            Ok(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_that_cannot_run_fails_unless_the_subset_is_asked_for() {
        assert_eq!(verdict("t", None, Some("true"), None), Verdict::Run);
        assert_eq!(verdict("t", None, None, Some("1")), Verdict::Run);
        let Verdict::Fail(m) = verdict("t", Some("root"), None, None) else { panic!("a plain run must fail") };
        assert!(m.starts_with("t: needs root") && m.contains("FASTPATH_TEST_UNPRIVILEGED=1"), "{m}");
        assert!(!m.contains('\n'));
        assert_eq!(verdict("t", Some("root"), None, Some("1")), Verdict::Skip);
        assert_eq!(verdict("t", Some("root"), Some("false"), Some("1")), Verdict::Skip);
        assert!(matches!(verdict("t", Some("root"), None, Some("0")), Verdict::Fail(_)), "only 1 asks for it");
        let Verdict::Fail(m) = verdict("t", Some("root"), Some("true"), Some("1")) else {
            panic!("CI=true never skips")
        };
        assert!(m.contains("CI=true"), "{m}");
    }
}
