//! `fastpath assets` (hidden): the man pages (clap_mangen) and the bash, zsh and fish
//! completions (clap_complete) of this very binary, generated from its clap definition, so
//! they cannot drift from `--help`. `make man completions`, `make install` and `make deb` run it.

use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;

use crate::args::{self, AssetsArgs, Cli};
use crate::error::{self, CliResult};

/// The shells completions are written for, and the file each gets in the directory.
pub const SHELLS: [(Shell, &str); 3] =
    [(Shell::Bash, "fastpath.bash"), (Shell::Zsh, "_fastpath"), (Shell::Fish, "fastpath.fish")];

pub fn run(a: &AssetsArgs) -> CliResult<()> {
    let cmd = public_command();
    if let Some(dir) = &a.man {
        let pages = man_pages(cmd.clone(), dir).map_err(error::env)?;
        println!("{} man pages in {}", pages, dir.display());
    }
    if let Some(dir) = &a.completions {
        create_dir(dir).map_err(error::env)?;
        for (shell, file) in SHELLS {
            let path = dir.join(file);
            let mut f = std::fs::File::create(&path)
                .with_context(|| format!("creating {}", path.display()))
                .map_err(error::env)?;
            clap_complete::generate(shell, &mut cmd.clone(), "fastpath", &mut f);
        }
        println!("{} completion files in {}", SHELLS.len(), dir.display());
    }
    Ok(())
}

/// The command line a user sees: [`Cli`] without its hidden subcommands (this one), which
/// clap_complete would otherwise offer. clap cannot remove a subcommand, so the root is built
/// anew with the same name, version, about and settings, and the visible subcommands.
fn public_command() -> clap::Command {
    let full = Cli::command();
    let mut cmd = clap::Command::new("fastpath")
        .version(args::VERSION)
        .about(full.get_about().cloned().unwrap_or_default())
        .subcommand_required(full.is_subcommand_required_set())
        .arg_required_else_help(full.is_arg_required_else_help_set());
    for sc in full.get_subcommands().filter(|s| !s.is_hide_set()) {
        cmd = cmd.subcommand(sc.clone());
    }
    cmd
}

fn create_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating directory {}", dir.display()))
}

/// One page per command, named by its path: fastpath.1, fastpath-filter.1,
/// fastpath-filter-load.1, ...; dated by the commit's date when the build knew it. Returns how
/// many were written.
fn man_pages(cmd: clap::Command, dir: &Path) -> anyhow::Result<usize> {
    create_dir(dir)?;
    // VERSION ends "(abc1234 2026-11-29)" when the build knew the commit's date.
    let date = args::VERSION.trim_end_matches(')').rsplit(' ').next().filter(|w| is_date(w)).unwrap_or("");
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build(); // gives each subcommand its display name, "fastpath-filter-load"
    fn write(cmd: &clap::Command, dir: &Path, date: &str) -> anyhow::Result<usize> {
        let mut n = 0;
        for sc in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            n += write(sc, dir, date)?;
        }
        let man = clap_mangen::Man::new(cmd.clone())
            .date(date)
            .source(concat!("fastpath ", env!("CARGO_PKG_VERSION")))
            .manual("fastpath manual");
        let path = dir.join(man.get_filename());
        let mut f = std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        man.render(&mut f).with_context(|| format!("writing {}", path.display()))?;
        Ok(n + 1)
    }
    write(&cmd, dir, date)
}

/// "YYYY-MM-DD".
fn is_date(w: &str) -> bool {
    let b = w.as_bytes();
    b.len() == 10 && b.iter().enumerate().all(|(i, c)| if i == 4 || i == 7 { *c == b'-' } else { c.is_ascii_digit() })
}
