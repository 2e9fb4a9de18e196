"""Every published figure from one sitting at a named commit (`make figures`), and the check that
the README and docs/ show exactly what that sitting measured (`make figures-check`).

The sitting runs every section of SECTIONS (each a benchmark whose figure appears in README.md
or docs/) its planned number of runs, interleaved (run 1 of every section, then run 2, ...), on
the release build in target/release (or $FASTPATH), and writes OUT.json (default
docs/figures.json): the commit (`git rev-parse HEAD`, and whether the tree was dirty), the date,
kernel, CPU model and count, and per section its command, runs, duration and every run's raw
values. Then OUT.md and, with --readme, the README get every section's block, rendered from that
JSON alone, between `<!-- figures:NAME:begin -->` and `<!-- figures:NAME:end -->`.

Ratios. Every ratio divides a row by a reference measured by the same tool in the same run (never
a pool of other tools' measurements), and each table names its reference. The `meta` block
states once, per set-up (split, same, two queues, threaded NAPI), which measurement is the
reference of which table, with its median and per-run values.

Resumable: after each step the state goes to OUT.state.json; the same command again continues
where it stopped (refused if the commit or the plan changed; --fresh starts over). Progress and
the estimated time left go to stderr.

--check (no root, no benchmark): renders every block from the JSON and fails (exit 1, one line
per problem) if a block in the Markdown files differs from its rendering, names a section the
JSON lacks, a table's rows and header disagree on the column count, a "per run" cell holds
another number of values than the runs its block states, the JSON's runs and raw values
disagree, or the JSON lacks a commit.

Usage: scripts/figures.py [--quick] [--sections a,b] [--out docs/figures] [--readme README.md]
                          [--fresh] [--plan]                                     (root)
       scripts/figures.py --check [--json docs/figures.json] [--readme FILE ...]  (anyone)
       scripts/figures.py --render --json docs/figures.json --readme FILE ...     (anyone)

The package, bottom up: render.py (the blocks' renderers, pure), run.py (the sections: what a run
does, its estimate, its command; the plan), goals.py (the goals and headline blocks), repo.py
(git in the checkout), blocks.py (the generated blocks of the Markdown files, partial sittings over
the full one), check.py (--check), sitting.py (the sitting, root), cli.py (the command line;
scripts/figures.py and `python3 -m figures` call its main). The names below are its API for the
unit tests (scripts/test_figures.py).
"""
import sys

from .repo import HERE

# The sections' runs and some renderers import the benchmark scripts beside this package.
sys.path.insert(0, HERE)

from .blocks import all_blocks, blocks_md, find_blocks, put_blocks, render_all, section_blocks  # noqa: E402
from .check import behind, check, table_errors  # noqa: E402
from .cli import main  # noqa: E402
from .goals import GOALS, HEADLINE, goal_rows, render_goals, render_headline  # noqa: E402
from .run import BY_NAME, SECTIONS, estimate_s, plan  # noqa: E402

__all__ = ["BY_NAME", "GOALS", "HEADLINE", "SECTIONS", "all_blocks", "behind", "blocks_md", "check", "estimate_s",
           "find_blocks", "goal_rows", "main", "plan", "put_blocks", "render_all", "render_goals", "render_headline",
           "section_blocks", "table_errors"]
