//! `cargo run -p xtask -- public-api [--bless]`: the library's public API (crate `fastpath`),
//! one item per line as cargo-public-api prints it (blanket impls left out), compared with the committed listing
//! `crates/fastpath/public-api.txt`. A difference prints what was added and removed and exits
//! 1, so any change of the public API shows in review; `--bless` writes the listing instead.
//!
//! The listing is read from rustdoc's JSON output (`--output-format json`), which stable rustc
//! produces only with `RUSTC_BOOTSTRAP=1` set (the JSON format is unstable: a rustc whose format
//! the `public-api` crate cannot read is refused in one line naming both). It is built in
//! `target/public-api/` so that the switch does not rebuild the workspace's own target.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

/// The crate whose API is pinned.
const CRATE: &str = "fastpath";
/// The committed listing, relative to the workspace root.
const LISTING: &str = "crates/fastpath/public-api.txt";

fn main() {
    if let Err(e) = run() {
        eprintln!("xtask: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["public-api"] => public_api(false),
        ["public-api", "--bless"] => public_api(true),
        _ => bail!("unknown arguments {args:?}: accepted are `public-api` and `public-api --bless`"),
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask/ sits in the workspace root").to_path_buf()
}

/// The public items of [`CRATE`], sorted, one per line.
fn listing(root: &Path) -> anyhow::Result<Vec<String>> {
    let target = root.join("target/public-api");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .current_dir(root)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_TARGET_DIR", &target)
        .args([
            "rustdoc",
            "--locked",
            "-q",
            "-p",
            CRATE,
            "--lib",
            "--",
            "-Z",
            "unstable-options",
            "--output-format",
            "json",
        ])
        .status()
        .with_context(|| format!("running {cargo} rustdoc"))?;
    if !status.success() {
        bail!("`{cargo} rustdoc -p {CRATE} --lib -- -Z unstable-options --output-format json` failed ({status})");
    }
    let json = target.join("doc").join(format!("{CRATE}.json"));
    // Blanket impls (`impl<T> From<T> for T`, ...) are the standard library's, not ours; auto
    // traits (Send, Sync, Unpin, ...) stay: losing one breaks users.
    let api = public_api::Builder::from_rustdoc_json(&json).omit_blanket_impls(true).build().map_err(|e| {
        anyhow::anyhow!("{}: the public-api crate cannot read this rustc's rustdoc JSON ({e}); the listing was made with the rustc named in {LISTING}'s first line", json.display())
    })?;
    let mut items: Vec<String> = api.items().map(|i| i.to_string()).collect();
    items.sort();
    items.dedup();
    Ok(items)
}

fn rustc_version() -> String {
    Command::new("rustc")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "rustc (unknown version)".into(), |s| s.trim().to_string())
}

fn public_api(bless: bool) -> anyhow::Result<()> {
    let root = root();
    let items = listing(&root)?;
    let path = root.join(LISTING);
    if bless {
        let mut text = format!(
            "# The public API of crate `{CRATE}` ({} items), made by `cargo run -p xtask -- public-api --bless` with {}.\n",
            items.len(),
            rustc_version()
        );
        for i in &items {
            text.push_str(i);
            text.push('\n');
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("public-api: {} items written to {LISTING}", items.len());
        return Ok(());
    }
    let committed = std::fs::read_to_string(&path).with_context(|| {
        format!("reading {} (make it with `cargo run -p xtask -- public-api --bless`)", path.display())
    })?;
    let old: BTreeSet<&str> = committed.lines().filter(|l| !l.starts_with("# ") && !l.is_empty()).collect();
    let new: BTreeSet<&str> = items.iter().map(String::as_str).collect();
    let removed: Vec<&&str> = old.difference(&new).collect();
    let added: Vec<&&str> = new.difference(&old).collect();
    if removed.is_empty() && added.is_empty() {
        println!("public-api: {} items, as {LISTING} lists them", new.len());
        return Ok(());
    }
    for r in &removed {
        println!("- {r}");
    }
    for a in &added {
        println!("+ {a}");
    }
    bail!(
        "the public API of `{CRATE}` differs from {LISTING}: {} removed, {} added (above); if meant, run `cargo run -p xtask -- public-api --bless` and commit the listing",
        removed.len(),
        added.len()
    )
}
