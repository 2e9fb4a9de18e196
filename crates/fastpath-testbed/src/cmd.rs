//! Running `ip`, `ethtool`, `tc` and `sh` and turning failures into one-line errors.

use std::process::{Command, Stdio};

use crate::TestbedError;

/// Runs `program args...` to completion and returns its standard output.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<String, TestbedError> {
    let cmd_line = command_line(program, args);
    let output =
        Command::new(program).args(args).env("LC_ALL", "C").stdin(Stdio::null()).output().map_err(|cause| {
            TestbedError::Spawn {
                hint: match (cause.kind(), program) {
                    (std::io::ErrorKind::NotFound, "ip" | "tc") => " (install iproute2)",
                    (std::io::ErrorKind::NotFound, "ethtool") => " (install ethtool)",
                    _ => "",
                },
                cmd: cmd_line.clone(),
                cause,
            }
        })?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let status = match (output.status.code(), signal_of(&output.status)) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => "unknown status".to_owned(),
    };
    let mut stderr = one_line(&String::from_utf8_lossy(&output.stderr));
    if stderr.is_empty() {
        stderr = one_line(&String::from_utf8_lossy(&output.stdout));
    }
    if stderr.is_empty() {
        stderr = "(no output)".to_owned();
    }
    if is_permission_message(&stderr) {
        Err(TestbedError::NeedsRoot { cmd: cmd_line, status, stderr })
    } else {
        Err(TestbedError::Command { cmd: cmd_line, status, stderr })
    }
}

/// Runs `ip` with whitespace-separated arguments (test bed names, addresses and MACs contain
/// no whitespace, so no quoting is needed).
pub(crate) fn ip(args: &str) -> Result<String, TestbedError> {
    run("ip", &args.split_whitespace().collect::<Vec<_>>())
}

/// Runs `program args...` inside network namespace `ns` via `ip netns exec`, which also
/// remounts `/sys` for that namespace.
pub(crate) fn run_in(ns: &str, program: &str, args: &[&str]) -> Result<String, TestbedError> {
    let mut full = vec!["netns", "exec", ns, program];
    full.extend_from_slice(args);
    run("ip", &full)
}

/// Writes `value` to `path` from a shell started inside `ns` (so `/sys/class/net` and
/// `/proc/sys/net` are the namespace's own).
pub(crate) fn write_in(ns: &str, path: &str, value: &str) -> Result<(), TestbedError> {
    // Positional parameters, so nothing is interpreted by the shell.
    run_in(ns, "sh", &["-c", "printf '%s\\n' \"$1\" > \"$2\"", "sh", value, path]).map(drop)
}

fn command_line(program: &str, args: &[&str]) -> String {
    let mut s = program.to_owned();
    for a in args {
        s.push(' ');
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
            s.push('\'');
            s.push_str(&a.replace('\'', "'\\''"));
            s.push('\'');
        } else {
            s.push_str(a);
        }
    }
    s
}

/// Folds multi-line output into one line: trimmed non-empty lines joined by "; ".
pub(crate) fn one_line(s: &str) -> String {
    s.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ")
}

fn is_permission_message(s: &str) -> bool {
    s.contains("Operation not permitted") || s.contains("Permission denied")
}

#[cfg(unix)]
fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_folds_lines() {
        assert_eq!(one_line("  a \n\n b\n"), "a; b");
        assert_eq!(one_line(""), "");
    }

    #[test]
    fn command_line_quotes_only_when_needed() {
        assert_eq!(command_line("sh", &["-c", "echo 1 > x", ""]), "sh -c 'echo 1 > x' ''");
        assert_eq!(command_line("ip", &["netns", "add", "fp1-a"]), "ip netns add fp1-a");
    }

    #[test]
    fn failing_command_is_one_line_with_status() {
        let err = run("sh", &["-c", "echo first >&2; echo second >&2; exit 3"]).unwrap_err();
        let msg = err.to_string();
        assert_eq!(msg, "command `sh -c 'echo first >&2; echo second >&2; exit 3'` failed (exit 3): first; second");
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn permission_message_becomes_needs_root() {
        let err = run("sh", &["-c", "echo 'mount: Operation not permitted' >&2; exit 1"]).unwrap_err();
        assert!(err.needs_root(), "{err}");
        assert!(err.to_string().contains("root"), "{err}");
    }

    #[test]
    fn missing_program_is_spawn_error() {
        let err = run("fastpath-no-such-program", &[]).unwrap_err();
        assert!(matches!(err, TestbedError::Spawn { .. }), "{err}");
    }
}
