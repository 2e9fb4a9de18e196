#!/usr/bin/env python3
"""`make mutants`: proves that tests can fail.

Each row of scripts/mutants/*.toml names a mutation of the product code (a file, a text that
must occur in it exactly once, its replacement) and the one test that must catch it. For each
row this script copies the repository's tracked files to a scratch tree (target/mutants/src),
applies that one mutation there, runs that one test with cargo in the scratch tree, and expects
the test to run and fail. It prints one line per row:

    killed    NAME  (TEST)
    SURVIVED  NAME  (TEST)        the test passed with the product code broken: a defect
    UNVIABLE  NAME  (why)         the mutation did not apply or did not build: fix the row

and exits non-zero unless every row was killed. The scratch tree's build directory
(target/mutants/target) is seeded from the workspace's own release build when it is absent, so
only the crates a mutation touches are rebuilt.

A row:

    [[mutant]]
    name = "sc_check checks 16 of the cookie's 29 bits"
    file = "crates/fastpath/bpf/include/fastpath_syncookie.h"
    from = "& ~7u"
    to = "& 0xffff0000u"
    # cargo test arguments: package, test target, then the test's exact name.
    test = "-p fastpath-cli --test syncookie crafted_segments_exact_counters"

`from` may occur several times when `occurrence = K` (1-based) says which one is replaced.
Needs root for the privileged tests (as `make test` does). --only NAME,... runs some rows;
--files NAME,... the rows of some files; --list prints them.

--budget-s S bounds a run (CI's, whose whole job must end within 90 minutes): the rows of the
files named by --always FILE,... run first, every one; then the others, in an order that
changes with the commit (rows sorted by a hash of HEAD's id and the row's name), while the run
has lasted less than S seconds. A row not reached is printed `DEFERRED` (not run, never counted
as killed) and named in the last line; successive commits reach every row.

--check (no root, no mutation; `make lint` runs it) checks every row without running it: its
file exists, its `from` occurs as the row says, and its test exists (`cargo test ARGS -- --list`
of each test target). It cannot see a mutation that no longer builds (a changed signature in
`to`): only a run does.
"""

import argparse
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROWS = ROOT / "scripts" / "mutants"


def load_rows():
    rows = []
    for f in sorted(ROWS.glob("*.toml")):
        data = tomllib.loads(f.read_text())
        for r in data.get("mutant", []):
            missing = [k for k in ("name", "file", "from", "to", "test") if k not in r]
            if missing:
                sys.exit(f"mutants: {f.name}: row {r.get('name', '?')!r} lacks {', '.join(missing)}")
            r["source"] = f.name
            rows.append(r)
    names = [r["name"] for r in rows]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        sys.exit(f"mutants: duplicate row names: {', '.join(sorted(dup))}")
    return rows


def split_test(spec):
    """cargo args and the exact test name from a row's `test`."""
    words = shlex.split(spec)
    if len(words) < 2:
        raise ValueError(f"test {spec!r}: expected cargo arguments then the test's name")
    return words[:-1], words[-1]


def sync_tree(src_tree):
    """Copies the tracked files (as in the working tree) to src_tree, removing stale ones."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    want = {Path(p.decode()) for p in files.split(b"\0") if p}
    if src_tree.exists():
        for p in sorted(src_tree.rglob("*"), reverse=True):
            rel = p.relative_to(src_tree)
            if p.is_file() and rel not in want:
                p.unlink()
    for rel in want:
        s, d = ROOT / rel, src_tree / rel
        if not s.is_file():
            continue
        d.parent.mkdir(parents=True, exist_ok=True)
        # Only rewrite what differs, so cargo's fingerprints of untouched files hold.
        if not d.exists() or d.read_bytes() != s.read_bytes():
            shutil.copy2(s, d)


def apply(src_tree, row):
    path = src_tree / row["file"]
    if not path.is_file():
        return None, f"{row['file']}: no such file"
    text = path.read_text()
    count = text.count(row["from"])
    k = row.get("occurrence")
    if k is None and count != 1:
        return None, f"{row['file']}: {row['from']!r} occurs {count} times (want exactly 1, or set occurrence)"
    if k is not None and not 1 <= k <= count:
        return None, f"{row['file']}: occurrence {k} of {row['from']!r}, which occurs {count} times"
    idx = -1
    for _ in range(k or 1):
        idx = text.index(row["from"], idx + 1)
    mutated = text[:idx] + row["to"] + text[idx + len(row["from"]):]
    path.write_text(mutated)
    return (path, text), None


PIN_ROOT = Path("/sys/fs/bpf/fastpath")


def pin_dirs():
    """The pin directories fastpath has now (a mutant may leak one: see remove_new_pins)."""
    try:
        return {p.name for p in PIN_ROOT.iterdir()}
    except OSError:
        return set()


def remove_new_pins(before):
    """Removes the pin directories a mutated run left (a row may pin on purpose, to be caught):
    unlinking a link's last pin detaches its program. Those there before the row stay."""
    for name in pin_dirs() - before:
        d = PIN_ROOT / name
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
        print(f"          removed the pins a mutated run left at {d}", flush=True)


def check_rows(rows):
    """--check: one line per defective row; exit 1 if any."""
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    bad, targets = [], {}
    for r in rows:
        path = ROOT / r["file"]
        if not path.is_file():
            bad.append(f"{r['name']}: {r['file']}: no such file")
            continue
        count, k = path.read_text().count(r["from"]), r.get("occurrence")
        if (k is None and count != 1) or (k is not None and not 1 <= k <= count):
            bad.append(f"{r['name']}: {r['file']}: {r['from']!r} occurs {count} times"
                       + (f" (occurrence {k} asked)" if k is not None else " (want exactly 1)"))
        try:
            args, test = split_test(r["test"])
        except ValueError as e:
            bad.append(f"{r['name']}: {e}")
            continue
        targets.setdefault(tuple(args), []).append((test, r["name"]))
    for args, tests in targets.items():
        run = subprocess.run([cargo, "test", "--release", "--locked", *args, "--", "--list"],
                             cwd=ROOT, capture_output=True, text=True)
        if run.returncode != 0:
            bad.append(f"cargo test {' '.join(args)} -- --list failed: {run.stderr.strip()[-200:]}")
            continue
        have = {l[: -len(": test")] for l in run.stdout.splitlines() if l.endswith(": test")}
        bad += [f"{name}: no test {test!r} in {' '.join(args)}" for test, name in tests if test not in have]
    for line in bad:
        print(f"mutants --check: {line}", flush=True)
    print(f"mutants --check: {len(rows)} rows, {len(bad)} defective", flush=True)
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="comma-separated row names")
    ap.add_argument("--files", help="comma-separated row files of scripts/mutants/ (e.g. lifecycle,say)")
    ap.add_argument("--list", action="store_true", help="print the rows and exit")
    ap.add_argument("--check", action="store_true", help="check every row applies and names an existing test, run nothing")
    ap.add_argument("--always", help="with --budget-s: comma-separated row files run in full, first")
    ap.add_argument("--budget-s", type=float, help="start no other row after this many seconds")
    ap.add_argument("--scratch", default=str(ROOT / "target" / "mutants"), help="scratch directory")
    a = ap.parse_args()
    rows = load_rows()
    if a.files:
        files = {f.strip() + ".toml" for f in a.files.split(",") if f.strip()}
        rows = [r for r in rows if r["source"] in files]
    if a.only:
        want = [w.strip() for w in a.only.split(",") if w.strip()]
        unknown = [w for w in want if w not in {r["name"] for r in rows}]
        if unknown:
            sys.exit(f"mutants: --only {','.join(unknown)}: no such row (see --list)")
        rows = [r for r in rows if r["name"] in want]
    if a.budget_s is not None:
        always = {f.strip() + ".toml" for f in (a.always or "").split(",") if f.strip()}
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        key = lambda r: hashlib.sha256(f"{head} {r['name']}".encode()).hexdigest()
        rows = [r for r in rows if r["source"] in always] + sorted(
            (r for r in rows if r["source"] not in always), key=key)
        for r in rows:
            r["deferrable"] = r["source"] not in always
    if a.check:
        return check_rows(rows)
    if a.list:
        for r in rows:
            print(f"{r['name']}\t{r['file']}\t{r['test']}")
        return 0
    if not rows:
        sys.exit("mutants: no rows in scripts/mutants/*.toml")
    scratch = Path(a.scratch)
    src_tree, target = scratch / "src", scratch / "target"
    seed = ROOT / "target" / "release"
    if not (target / "release").exists() and seed.is_dir():
        print(f"mutants: seeding {target} from {seed}", file=sys.stderr, flush=True)
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(seed), str(target / "release")], check=True)
    sync_tree(src_tree)
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    # Incremental release builds of the workspace's crates: a mutation recompiles only what it
    # touched (the dependencies are not incremental and stay as seeded).
    env = dict(os.environ, CARGO_TARGET_DIR=str(target), CARGO_PROFILE_RELEASE_INCREMENTAL="true")
    env.pop("FASTPATH_BIN", None)
    results = {"killed": 0, "SURVIVED": 0, "UNVIABLE": 0}
    deferred = []
    t_all = time.monotonic()
    for i, row in enumerate(rows, 1):
        t0 = time.monotonic()
        if row.get("deferrable") and t0 - t_all >= a.budget_s:
            deferred.append(row["name"])
            print(f"DEFERRED  {row['name']}  (--budget-s {a.budget_s:.0f} spent; not run)", flush=True)
            continue
        pins_before = pin_dirs()
        print(f"mutants: [{i}/{len(rows)}] {row['name']} ...", file=sys.stderr, flush=True)
        try:
            cargo_args, test_name = split_test(row["test"])
        except ValueError as e:
            verdict, why = "UNVIABLE", str(e)
        else:
            applied, why = apply(src_tree, row)
            verdict = "UNVIABLE"
            if applied:
                path, original = applied
                try:
                    build = subprocess.run(
                        [cargo, "test", "--release", "--locked", "--no-run", *cargo_args],
                        cwd=src_tree, env=env, capture_output=True, text=True)
                    if build.returncode != 0:
                        last = [l for l in build.stderr.splitlines() if l.startswith("error")][:1]
                        why = "does not build: " + (last[0] if last else build.stderr.strip()[-200:])
                    else:
                        run = subprocess.run(
                            [cargo, "test", "--release", "--locked", *cargo_args, "--",
                             "--exact", test_name, "--test-threads=1"],
                            cwd=src_tree, env=env, capture_output=True, text=True)
                        out = run.stdout + run.stderr
                        ran = "running 1 test" in out
                        if not ran:
                            why = f"the test {test_name!r} did not run (no such test?)"
                        elif run.returncode == 0:
                            verdict, why = "SURVIVED", "the test passed"
                        else:
                            verdict = "killed"
                            panics = [l.strip() for l in out.splitlines() if "panicked at" in l or "assertion" in l]
                            why = panics[0][:160] if panics else "the test failed"
                finally:
                    path.write_text(original)
                    remove_new_pins(pins_before)
        results[verdict] += 1
        print(f"{verdict:<9} {row['name']}  ({row['test']}; {time.monotonic() - t0:.0f} s)", flush=True)
        print(f"          {why}", flush=True)
    total = time.monotonic() - t_all
    print(f"mutants: {results['killed']} killed, {results['SURVIVED']} survived, {results['UNVIABLE']} unviable, {len(deferred)} deferred of {len(rows)} in {total:.0f} s", flush=True)
    if deferred:
        print(f"mutants: deferred (not run this time): {'; '.join(deferred)}", flush=True)
    return 0 if results["killed"] == len(rows) - len(deferred) else 1


if __name__ == "__main__":
    sys.exit(main())
