"""The checkout the script runs in: HERE (scripts/), git in it."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def descends(older, newer):
    """Whether commit `older` is `newer` or one of its ancestors in this checkout (False when git
    does not know either)."""
    r = subprocess.run(["git", "-C", os.path.dirname(HERE), "merge-base", "--is-ancestor", older, newer],
                       capture_output=True)
    return r.returncode == 0


def git(*args):
    r = subprocess.run(["git", "-C", os.path.dirname(HERE)] + list(args), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"figures: `git {' '.join(args)}` failed ({r.stderr.strip()}): the sitting records the commit "
                 "it measured, so it runs in a git checkout")
    return r.stdout.strip()
