//! What `make install` and `make deb` ship, checked without root: `--version` names the commit
//! the binary was built from, one man page per command (clap_mangen) with that command's
//! options, completions that offer every command and not the hidden generator, example rules
//! that compile, `scripts/deps.sh` refusing a rustc older than the workspace's rust-version in
//! one line, and `scripts/interop-afxdp-plugin.sh` (`make interop-afxdp-plugin`, by hand, not
//! in CI) refusing in one line without the AF_XDP device plugin's source. (scripts/deb-check.sh
//! installs the package itself, as root, in CI.)

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);
impl Scratch {
    fn new(tag: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("fastpath-install-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
}
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn git(args: &[&str]) -> Option<String> {
    let o = Command::new("git").arg("-C").arg(workspace()).args(args).output().ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// `fastpath --version` is "fastpath 0.1.0 (abc1234 2026-11-29)": HEAD's short hash, "-dirty"
/// when the binary's sources (crates/, bpf/, Cargo.toml, Cargo.lock) differ from it, the
/// commit's date. In a source tree that is not a git
/// work tree of its own (a release tarball, the mutation harness's copy) it is the
/// FASTPATH_COMMIT the build was given, else "unknown": never the bare version.
#[test]
fn version_names_the_commit_it_was_built_from() {
    let o = common::run(&["--version"]);
    assert!(o.status.success(), "fastpath --version: {}", common::stderr(&o));
    let got = String::from_utf8_lossy(&o.stdout).trim_end().to_string();
    let top = git(&["rev-parse", "--show-toplevel"]).and_then(|t| Path::new(&t).canonicalize().ok());
    let want = if top.as_deref() == Some(workspace().as_path()) {
        let hash = git(&["rev-parse", "--short=7", "HEAD"]).expect("git rev-parse HEAD");
        let date = git(&["log", "-1", "--format=%cd", "--date=short", "HEAD"]).expect("git log");
        let sources =
            ["status", "--porcelain", "--untracked-files=no", "--", "crates", "bpf", "Cargo.toml", "Cargo.lock"];
        let dirty = !git(&sources).expect("git status").is_empty();
        format!("{hash}{} {date}", if dirty { "-dirty" } else { "" })
    } else {
        match option_env!("FASTPATH_COMMIT") {
            Some(c) if !c.is_empty() => c.to_string(),
            _ => "unknown".to_string(),
        }
    };
    assert_eq!(got, format!("fastpath {} ({want})", env!("CARGO_PKG_VERSION")));
}

/// Command paths under "Commands:" of each --help, depth first: ["filter", "load"], ...
fn commands(path: &[String], out: &mut Vec<Vec<String>>) {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let o = common::fastpath().env_remove("COLUMNS").args(&args).output().expect("run fastpath");
    let text = String::from_utf8(o.stdout).expect("help is UTF-8");
    out.push(path.to_vec());
    let subs: Vec<String> = text
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect();
    for s in subs {
        let mut p = path.to_vec();
        p.push(s);
        commands(&p, out);
    }
}

/// `fastpath assets --man DIR` writes exactly one page per command of --help, named by its path
/// (fastpath-filter-load.1), each with its own options and the version; the hidden generator
/// has none.
#[test]
fn man_pages_one_per_command_with_its_options() {
    let dir = Scratch::new("man");
    let o = common::run(&["assets", "--man", dir.0.to_str().unwrap()]);
    assert!(o.status.success(), "fastpath assets --man: {}", common::stderr(&o));
    let mut cmds = Vec::new();
    commands(&[], &mut cmds);
    let want: BTreeSet<String> = cmds
        .iter()
        .map(|p| std::iter::once("fastpath".to_string()).chain(p.iter().cloned()).collect::<Vec<_>>().join("-") + ".1")
        .collect();
    let got: BTreeSet<String> =
        std::fs::read_dir(&dir.0).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(want.len() >= 15, "the --help walk found only {want:?}");
    assert_eq!(got, want, "man pages written vs commands of --help");
    let load = std::fs::read_to_string(dir.0.join("fastpath-filter-load.1")).unwrap();
    for opt in [r"\-\-pin", r"\-\-iface", r"\-\-xsk\-handoff"] {
        assert!(load.contains(opt), "fastpath-filter-load.1 lacks {opt}");
    }
    let th = load.lines().find(|l| l.starts_with(".TH ")).expect(".TH line");
    assert!(th.contains(concat!("fastpath ", env!("CARGO_PKG_VERSION"))), "{th}");
    let top = std::fs::read_to_string(dir.0.join("fastpath.1")).unwrap();
    assert!(top.contains(r"fastpath\-filter(1)"), "fastpath.1 does not refer to fastpath-filter(1)");
    assert!(!top.contains("assets"), "fastpath.1 lists the hidden assets command");
}

/// The bash, zsh and fish completions name every top-level command, never the hidden `assets`,
/// and the bash one completes `fastpath fil` to `filter`.
#[test]
fn completions_offer_every_command_but_not_the_hidden_one() {
    let dir = Scratch::new("comp");
    let o = common::run(&["assets", "--completions", dir.0.to_str().unwrap()]);
    assert!(o.status.success(), "fastpath assets --completions: {}", common::stderr(&o));
    let mut cmds = Vec::new();
    commands(&[], &mut cmds);
    let top: Vec<&String> = cmds.iter().filter(|p| p.len() == 1).map(|p| &p[0]).collect();
    assert!(top.len() >= 10, "{top:?}");
    for file in ["fastpath.bash", "_fastpath", "fastpath.fish"] {
        let text = std::fs::read_to_string(dir.0.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        for c in &top {
            assert!(text.contains(c.as_str()), "{file} does not offer {c}");
        }
        assert!(!text.contains("assets"), "{file} offers the hidden assets command");
    }
    let script = format!(
        "source {}; COMP_WORDS=(fastpath fil); COMP_CWORD=1; COMP_LINE='fastpath fil'; COMP_POINT=12; \
         _fastpath fastpath fil fastpath; echo \"${{COMPREPLY[*]}}\"",
        dir.0.join("fastpath.bash").display()
    );
    let o = Command::new("bash").arg("-c").arg(&script).output().expect("bash");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "filter", "bash: {}", String::from_utf8_lossy(&o.stderr));
}

/// The example rules `make install` and the package ship compile (`filter check`).
#[test]
fn the_example_rules_compile() {
    let file = workspace().join("dist/examples/filter-rules.toml");
    let o = common::run(&["filter", "check", "--json", file.to_str().unwrap()]);
    assert!(o.status.success(), "filter check {}: {}", file.display(), common::stderr(&o));
    let v = common::last_json(&o);
    assert_eq!(v["rules"], 6, "{v}");
}

/// `scripts/deps.sh build` with a rustc older than Cargo.toml's rust-version stops at once:
/// exit 1, one line naming both versions and rustup, before any package is looked at.
#[test]
fn deps_refuses_an_old_rustc_in_one_line() {
    let home = Scratch::new("oldrust");
    let bin = home.0.join(".cargo/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let rustc = bin.join("rustc");
    std::fs::write(&rustc, "#!/bin/sh\necho 'rustc 1.63.0 (debian 2024)'\n").unwrap();
    std::fs::set_permissions(&rustc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    let want = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("rust-version in Cargo.toml");
    let o = Command::new("bash")
        .arg(workspace().join("scripts/deps.sh"))
        .arg("build")
        .env("HOME", &home.0)
        .env_remove("RUSTC")
        .output()
        .expect("run deps.sh");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(1),
        "deps.sh build with rustc 1.63.0: stdout {:?} stderr {err:?}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    for w in ["1.63.0", want, "rustup"] {
        assert!(err.contains(w), "{err:?} lacks {w}");
    }
    assert!(o.stdout.is_empty(), "deps.sh did something first: {}", String::from_utf8_lossy(&o.stdout));
}

/// `scripts/interop-afxdp-plugin.sh` (and `make interop-afxdp-plugin`) without the AF_XDP
/// device plugin's source (none given, a missing directory, the source of another module):
/// exit 2, one line naming what was given and `git clone` of the plugin, before anything is
/// built or created.
#[test]
fn interop_check_refuses_without_the_plugins_source_in_one_line() {
    let clone = "git clone https://github.com/intel/afxdp-plugins-for-kubernetes";
    let other = Scratch::new("notplugin");
    std::fs::create_dir_all(other.0.join("pkg/goclient")).unwrap();
    std::fs::write(other.0.join("pkg/goclient/goclient.go"), "package goclient\n").unwrap();
    std::fs::write(other.0.join("go.mod"), "module example.com/not-the-plugin\n").unwrap();
    let missing = other.0.join("absent");
    let o_dir = other.0.display().to_string();
    let m_dir = missing.display().to_string();
    let script = workspace().join("scripts/interop-afxdp-plugin.sh");
    for (args, named) in [(vec![], "AFXDP_PLUGIN_SRC"), (vec![m_dir.as_str()], &m_dir), (vec![o_dir.as_str()], &o_dir)]
    {
        let o = Command::new("bash").arg(&script).args(&args).output().expect("run the script");
        let err = String::from_utf8_lossy(&o.stderr);
        let what =
            format!("interop-afxdp-plugin.sh {args:?}: stdout {:?} stderr {err:?}", String::from_utf8_lossy(&o.stdout));
        assert_eq!(o.status.code(), Some(2), "{what}");
        assert_eq!(err.lines().count(), 1, "{what}");
        assert!(err.contains(clone) && err.contains(named), "{what}");
        assert!(o.stdout.is_empty(), "{what}");
    }
    assert_eq!(std::fs::read_dir(&other.0).unwrap().count(), 2, "nothing made in the directory given");
    let o = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(workspace())
        .arg("interop-afxdp-plugin")
        .arg(format!("AFXDP_PLUGIN_SRC={m_dir}"))
        .output()
        .expect("run make");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "make interop-afxdp-plugin with {m_dir}: {err}");
    assert!(err.lines().next().is_some_and(|l| l.contains(clone) && l.contains(&m_dir)), "{err}");
    assert!(o.stdout.is_empty(), "make built something first: {}", String::from_utf8_lossy(&o.stdout));
}

/// The library for one AF_XDP socket (`default-features = false`, crates/fastpath/Cargo.toml
/// `[features]`): its dependency graph holds none of the optional dependencies (io-uring, the
/// netlink crates, toml), and it compiles without an error or a warning, so no gated module
/// is used ungated and no optional dependency outside its feature. (`make features-check`
/// also tries each feature alone.)
#[test]
fn the_library_builds_without_its_optional_features() {
    let cargo = |args: &[&str]| {
        let o = Command::new(env!("CARGO"))
            .current_dir(workspace())
            .args(args)
            .args(["--locked", "--offline", "-p", "fastpath", "--no-default-features"])
            .output()
            .expect("run cargo");
        let what = format!("cargo {args:?} --no-default-features: {}", String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "{what}");
        (String::from_utf8_lossy(&o.stdout).to_string(), what)
    };
    let (tree, what) = cargo(&["tree", "-e", "normal", "--prefix", "none"]);
    let crates: BTreeSet<&str> = tree.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(crates.contains("libbpf-rs") && crates.contains("libc"), "{crates:?} {what}");
    let optional =
        ["io-uring", "netlink-sys", "netlink-packet-core", "netlink-packet-route", "netlink-packet-generic", "toml"];
    let present: Vec<&str> = optional.into_iter().filter(|c| crates.contains(c)).collect();
    assert!(present.is_empty(), "optional dependencies in the default-features = false graph: {present:?}");
    let (_, what) = cargo(&["check", "--release", "--lib"]);
    let noise: Vec<&str> = what.lines().filter(|l| l.starts_with("warning") || l.starts_with("error")).collect();
    assert!(noise.is_empty(), "{what}");
}
