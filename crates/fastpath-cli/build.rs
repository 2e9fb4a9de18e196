//! Sets `FASTPATH_BUILD_COMMIT`, the commit `fastpath --version` names: "abc1234 2026-11-29"
//! (short hash, then the commit's date), "abc1234-dirty 2026-11-29" when the binary's sources
//! ([`SOURCES`]: tracked files there) differ from the commit at build time. Only those: an edit
//! to the docs changes no byte of the binary, and would not rebuild it to say so either.
//!
//! Where it comes from, first that answers:
//! 1. `git`, when the workspace is the top of a git work tree (a tarball unpacked inside some
//!    other repository, as a distribution's packaging tree, is not asked);
//! 2. the environment variable `FASTPATH_COMMIT` (and optionally `FASTPATH_COMMIT_DATE`), set
//!    by a package build from a source tree without `.git`;
//! 3. "unknown".
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the binary is built from, relative to the workspace root.
const SOURCES: [&str; 4] = ["crates", "bpf", "Cargo.toml", "Cargo.lock"];

/// `git -C dir args...`'s stdout, trimmed; None when git is missing or fails.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let o = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// "hash[-dirty] date" from git, and the files whose change must rerun this script.
fn from_git(root: &Path) -> Option<(String, Vec<PathBuf>)> {
    let top = PathBuf::from(git(root, &["rev-parse", "--show-toplevel"])?);
    if top.canonicalize().ok()? != root.canonicalize().ok()? {
        return None;
    }
    let hash = git(root, &["rev-parse", "--short=7", "HEAD"])?;
    let date = git(root, &["log", "-1", "--format=%cd", "--date=short", "HEAD"])?;
    let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--"];
    status.extend(SOURCES);
    let dirty = !git(root, &status)?.is_empty();
    // HEAD, the branch it names, packed refs (a commit moves them) and the index (staging).
    let mut watch = Vec::new();
    for p in ["HEAD", "index", "packed-refs"] {
        watch.extend(git(root, &["rev-parse", "--git-path", p]).map(|p| root.join(p)));
    }
    if let Some(r) = git(root, &["symbolic-ref", "-q", "HEAD"]) {
        watch.extend(git(root, &["rev-parse", "--git-path", &r]).map(|p| root.join(p)));
    }
    // A path that does not exist would rerun the script at every build.
    watch.retain(|p| p.exists());
    let suffix = if dirty { "-dirty" } else { "" };
    Some((format!("{hash}{suffix} {date}"), watch))
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest.join("../..");
    println!("cargo:rerun-if-env-changed=FASTPATH_COMMIT");
    println!("cargo:rerun-if-env-changed=FASTPATH_COMMIT_DATE");
    let commit = match from_git(&root) {
        Some((commit, watch)) => {
            for p in watch {
                println!("cargo:rerun-if-changed={}", p.display());
            }
            // An edit to a source makes it dirty: cargo scans the directories for changes.
            for p in SOURCES {
                println!("cargo:rerun-if-changed={}", root.join(p).display());
            }
            commit
        }
        None => match (std::env::var("FASTPATH_COMMIT"), std::env::var("FASTPATH_COMMIT_DATE")) {
            (Ok(c), Ok(d)) if !c.is_empty() && !d.is_empty() => format!("{c} {d}"),
            (Ok(c), _) if !c.is_empty() => c,
            _ => "unknown".to_string(),
        },
    };
    println!("cargo:rustc-env=FASTPATH_BUILD_COMMIT={commit}");
}
