"""The command line of scripts/figures.py: --check, --render, --plan and the sitting."""
import argparse
import json
import os
import sys

from . import __doc__ as PACKAGE_DOC
from .blocks import all_blocks, partials_beside, put_blocks, render_all, section_blocks
from .check import behind, check
from .repo import HERE
from .run import BY_NAME
from .sitting import sitting


def main():
    ap = argparse.ArgumentParser(description=PACKAGE_DOC.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="check the Markdown blocks against the JSON (no root)")
    ap.add_argument("--json", default="docs/figures.json", help="--check: the figures.json to render from")
    ap.add_argument("--extra-json", action="append", default=None,
                    help="--check: a partial sitting's JSON (default: every figures-*.json beside --json)")
    ap.add_argument("--render", action="store_true",
                    help="fill the blocks of the --readme files from --json again (no root, no benchmark)")
    ap.add_argument("--quick", action="store_true", help="smoke run: every section once, tiny durations")
    ap.add_argument("--plan", action="store_true", help="print the plan and its estimated time, run nothing")
    ap.add_argument("--sections", default=None, help="a comma-separated subset of " + ",".join(BY_NAME))
    ap.add_argument("--out", default="docs/figures", help="the sitting writes OUT.json and OUT.md")
    ap.add_argument("--fresh", action="store_true", help="ignore a saved state and start over")
    ap.add_argument("--readme", action="append", default=None,
                    help="Markdown file(s) whose blocks to fill (sitting) or check (--check; default README.md "
                         "and docs/*.md)")
    a = ap.parse_args()
    names = list(BY_NAME) if not a.sections else [s for s in a.sections.split(",") if s]
    for s in names:
        if s not in BY_NAME:
            sys.exit(f"figures: --sections {s!r} is not a section: use a comma-separated subset of {','.join(BY_NAME)}")
    if a.check:
        root = os.path.dirname(HERE)
        paths = a.readme or [os.path.join(root, "README.md")] + sorted(
            os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
        extra = a.extra_json
        if extra is None:  # the partial sittings beside --json: DIR/figures-*.json
            extra = partials_beside(a.json)
        errs = check(a.json, paths, extra)
        for e in errs:
            print(f"figures-check: {e}", file=sys.stderr)
        if errs:
            sys.exit(1)
        print(f"figures-check: {len(paths)} file(s) match {a.json}")
        print(f"figures-check: {behind(a.json)}")
        return
    if a.render:
        if not a.readme:
            sys.exit("figures: --render needs --readme FILE (the Markdown files whose blocks to fill)")
        with open(a.json) as f:
            fig = json.load(f)
        # A full sitting's JSON: its blocks with the partial sittings beside it over them.
        blocks = render_all(fig) if "--sections" in str(fig.get("made_by", "")) else all_blocks(fig, partials_beside(a.json))[0]
        for path in a.readme:
            put_blocks(path, section_blocks(fig, blocks))
        print(f"figures: rendered {a.json} into {', '.join(a.readme)}")
        return
    sitting(a, names)
