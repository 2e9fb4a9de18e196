"""--check (no root, no benchmark): every block of the Markdown files against its rendering from
the JSON, the tables' shapes, the JSON's own consistency, and how far HEAD is past the sitting."""
import json
import os
import re
import subprocess
import sys

from .blocks import all_blocks, find_blocks, render_all
from .repo import HERE, git


def cells(line):
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", s)]


RUNS_SAID = re.compile(r"\b(\d+) runs?\b|medians of (\d+)\b")


def table_errors(where, text):
    """Problems of the Markdown tables in `text`: rows whose cell count differs from the header's,
    a missing separator row, and "per run" cells whose number of values (separated by "; ")
    differs from the last "N runs" / "medians of N" said above the table."""
    errs, lines, i, fence, said = [], text.split("\n"), 0, False, None
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            fence = not fence
        if fence or not line.startswith("|"):
            for m in RUNS_SAID.finditer(line if not fence else ""):
                said = int(m.group(1) or m.group(2))
            i += 1
            continue
        tab = []
        while i < len(lines) and lines[i].startswith("|"):
            tab.append(lines[i])
            i += 1
        hdr = cells(tab[0])
        if len(tab) < 2 or not all(re.fullmatch(r":?-+:?", c) for c in cells(tab[1])):
            errs.append(f"{where}: table {tab[0][:60]!r} has no separator row")
            continue
        if len(cells(tab[1])) != len(hdr):
            errs.append(f"{where}: table {tab[0][:60]!r}: separator has {len(cells(tab[1]))} columns, header {len(hdr)}")
        for row in tab[2:]:
            c = cells(row)
            if len(c) != len(hdr):
                errs.append(f"{where}: row {row[:60]!r} has {len(c)} cells, its header {len(hdr)}")
                continue
            for h, v in zip(hdr, c):
                if "per run" in h and v != "-" and said is not None and len(v.split("; ")) != said:
                    errs.append(f"{where}: row {row[:60]!r}: {h!r} holds {len(v.split('; '))} values, "
                                f"the block says {said} runs")
    return errs


def check(json_path, md_paths, extra_paths=()):
    """Every problem found (empty: all good). Pure: reads json_path, extra_paths (see
    extra_blocks) and md_paths only."""
    try:
        with open(json_path) as f:
            fig = json.load(f)
    except (OSError, ValueError) as e:
        return [f"{json_path}: cannot read: {e}"]
    errs = []
    if not re.fullmatch(r"[0-9a-f]{40}", str(fig.get("commit", ""))):
        errs.append(f"{json_path}: no commit (a 40-hex `git rev-parse HEAD`): {fig.get('commit')!r}")
        return errs
    for key in ("date", "kernel", "cpu_model", "cpus", "dirty", "sections"):
        if key not in fig:
            errs.append(f"{json_path}: no {key!r}")
    if errs:
        return errs
    for name, sec in fig["sections"].items():
        if sec.get("runs") != len(sec.get("raw", [])):
            errs.append(f"{json_path}: section {name}: runs {sec.get('runs')} but {len(sec.get('raw', []))} raw runs")
    if errs:
        return errs
    if fig.get("dirty"):
        errs.append(f"{json_path}: measured on a dirty tree (uncommitted changes): not a named commit")
    if "--quick" in str(fig.get("made_by", "")) or "--sections" in str(fig.get("made_by", "")):
        errs.append(f"{json_path}: made by {fig.get('made_by')!r}: a smoke or partial sitting, not every figure")
    try:
        blocks, more_errs = all_blocks(fig, extra_paths)
    except Exception as e:  # any renderer failure is a check failure, one line
        return errs + [f"{json_path}: cannot render: {type(e).__name__} {e}"]
    errs += more_errs
    for name, text in blocks.items():
        errs += table_errors(f"rendered {name}", text)
    # A partial sitting's own OUT.md keeps that sitting's blocks, even once a later one
    # supersedes a section of it: it is checked against its own JSON.
    own = {}
    for x in extra_paths:
        try:
            with open(x) as f:
                own[os.path.abspath(x[:-len(".json")] + ".md")] = render_all(json.load(f))
        except (OSError, ValueError, KeyError):
            pass  # extra_blocks reported it
    seen = set()
    for path in md_paths:
        try:
            with open(path) as f:
                text = f.read()
            found = find_blocks(text)
        except (OSError, ValueError) as e:
            errs.append(f"{path}: {e}")
            continue
        for name, body, start, _ in found:
            line = text.count("\n", 0, start) + 1
            mine = own.get(os.path.abspath(path), {})
            if name in mine and name not in ("meta", "goals", "headline", "agreement"):
                want = mine[name].strip().split("\n")
                if body.strip().split("\n") != want:
                    errs.append(f"{path}:{line + 1}: block {name!r} differs from its own sitting's rendering")
                continue
            if name not in blocks:
                errs.append(f"{path}:{line}: block {name!r} is not in {json_path}")
                continue
            want = blocks[name].strip().split("\n")
            got = body.strip().split("\n")
            if got != want:
                k = next((j for j, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                errs.append(f"{path}:{line + 1 + k}: block {name!r} differs from its rendering: "
                            f"{(got[k] if k < len(got) else '<end>')[:80]!r} != {(want[k] if k < len(want) else '<end>')[:80]!r}")
            errs += table_errors(f"{path}:{line} {name}", body)
        seen.update(name for name, _, _, _ in found)
    # Every block the JSON makes is shown somewhere: a deleted block (and a table pasted by hand
    # in its place) fails.
    for name in blocks:
        if md_paths and name not in seen:
            errs.append(f"block {name!r} of {json_path} is in none of {', '.join(md_paths)}")
    return errs


def behind(json_path):
    """One line: how far HEAD is past the sitting's commit, and how many of those commits touch
    what moves a figure (crates/, bpf/, scripts/); the commit must be in HEAD's history."""
    with open(json_path) as f:
        commit = json.load(f)["commit"]
    ancestor = ["git", "-C", os.path.dirname(HERE), "merge-base", "--is-ancestor", commit, "HEAD"]
    if subprocess.run(ancestor, capture_output=True).returncode != 0:
        sys.exit(f"figures-check: {json_path} names commit {commit[:12]}, which is not in HEAD's history")
    n = len(git("rev-list", f"{commit}..HEAD").split())
    code = len(git("rev-list", f"{commit}..HEAD", "--", "crates", "bpf", "scripts").split())
    return (f"figures measured at {commit[:12]}, {n} commit(s) behind HEAD, {code} of them touching crates/, bpf/ or "
            "scripts/ (what can move a figure: `make figures` measures them again)")
