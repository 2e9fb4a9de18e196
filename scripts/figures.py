#!/usr/bin/env python3
"""Every published figure from one sitting at a named commit (`make figures`), and the check that
the README and docs/ show exactly what that sitting measured (`make figures-check`).

The entry point of the package figures/ beside this file, whose docstring says how (`--help`
lists the options): render.py (the blocks' renderers), run.py (the sections and the plan),
goals.py (the goals and the headline), blocks.py (the generated blocks of the Markdown files),
check.py (--check), sitting.py (the sitting, root), cli.py (this command line), repo.py (git).

Usage: scripts/figures.py [--quick] [--sections a,b] [--out docs/figures] [--readme README.md]
                          [--fresh] [--plan]                                     (root)
       scripts/figures.py --check [--json docs/figures.json] [--readme FILE ...]  (anyone)
       scripts/figures.py --render --json docs/figures.json --readme FILE ...     (anyone)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from figures.cli import main  # noqa: E402  (the package, not this file: a package comes first)

if __name__ == "__main__":
    main()
