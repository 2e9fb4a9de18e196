//! The CLI's surface, pinned: the `--help` text of every command and subcommand equals its
//! committed snapshot (tests/snapshots/help/*.txt). A restructuring that must not change
//! behaviour proves here that no option, default or help line moved. After a deliberate change,
//! `UPDATE_SNAPSHOTS=1 cargo test --release -p fastpath-cli --test help_snapshot` rewrites the
//! snapshots; review them in the diff. No root needed.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

/// Subcommand names listed under "Commands:" in a help text (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// `--help` of `path` and, depth-first, of every subcommand below it: {"fastpath testbed up": text}.
fn walk(path: &[String], out: &mut BTreeMap<String, String>) {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    // clap wraps help at the terminal's width (COLUMNS, else 100 when not a terminal).
    let o = common::fastpath().env_remove("COLUMNS").args(&args).output().expect("run fastpath");
    assert!(o.status.success(), "fastpath {}: exit {}", args.join(" "), o.status);
    let text = String::from_utf8(o.stdout).expect("help is UTF-8");
    for sub in subcommands(&text) {
        let mut p = path.to_vec();
        p.push(sub);
        walk(&p, out);
    }
    out.insert(std::iter::once("fastpath").chain(path.iter().map(String::as_str)).collect::<Vec<_>>().join(" "), text);
}

#[test]
fn help_of_every_command_equals_its_snapshot() {
    let mut all = BTreeMap::new();
    walk(&[], &mut all);
    assert!(all.len() >= 12, "the walk found only {:?}", all.keys().collect::<Vec<_>>());
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/help");
    let update = std::env::var("UPDATE_SNAPSHOTS").as_deref() == Ok("1");
    assert!(!(update && std::env::var("CI").as_deref() == Ok("true")), "UPDATE_SNAPSHOTS=1 is refused under CI=true");
    if update {
        // Snapshots of commands that no longer exist go too.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("snapshot dir");
    }
    let mut problems = Vec::new();
    for (cmd, text) in &all {
        let file = dir.join(format!("{}.txt", cmd.replace(' ', "_")));
        if update {
            std::fs::write(&file, text).expect("write snapshot");
            continue;
        }
        match std::fs::read_to_string(&file) {
            Ok(want) if want == *text => {}
            Ok(want) => {
                let k = want.lines().zip(text.lines()).position(|(a, b)| a != b).unwrap_or(want.lines().count());
                problems.push(format!(
                    "{cmd}: --help differs from {} at line {}: {:?} (snapshot) != {:?} (now)",
                    file.display(),
                    k + 1,
                    want.lines().nth(k).unwrap_or("<end>"),
                    text.lines().nth(k).unwrap_or("<end>")
                ));
            }
            Err(_) => problems.push(format!("{cmd}: no snapshot {}", file.display())),
        }
    }
    // A snapshot whose command is gone fails too.
    if !update {
        for e in std::fs::read_dir(&dir).expect("snapshot dir").flatten() {
            let name = e.file_name().to_string_lossy().trim_end_matches(".txt").replace('_', " ");
            if !all.contains_key(&name) {
                problems.push(format!("{}: a snapshot of a command that no longer exists", e.path().display()));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
