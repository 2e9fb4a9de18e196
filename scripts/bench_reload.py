#!/usr/bin/env python3
"""The reload figure of the README's "Rules" section: `fastpath filter reload --json` of 100,000
rules while a paced 1,000-flow flood runs (the set-up of the test
crates/fastpath-cli/tests/flows.rs reload_100k_rules_under_traffic_accounts_for_every_frame), on a
test bed of its own per run: per reload the whole time (`reload_ns`), the time to write the maps
and flip (`install_ns`) and to read and compile the TOML file (`compile_ns`), in seconds, and
the frames that fell through to the default (none should: the flood matches the last rule of
both sets).

Usage: scripts/bench_reload.py [--runs 3] [--reloads 3] [--rules 100000]   (root; the fastpath
binary from $FASTPATH or target/release/fastpath)
"""
import argparse, os, statistics, subprocess, sys, tempfile, time

import fplib
from fplib import fp, last_json
from bench_classifier_flows import rules_file

RATE = 100_000  # flood frames/s, paced


def rule_files(n, tmp):
    """Two different sets of n rules (the flood's rule last in both), for reloads to alternate."""
    paths = [f"{tmp}/reload{n}-{k}.toml" for k in range(2)]
    for k, p in enumerate(paths):
        rules_file(n, p, salt=k * 7919)
    return paths


def one_run(files, reloads=3):
    """One run: load files[0], start the flood, reload files[1], files[0], ... `reloads` times;
    returns {"reload_s": [...], "install_s": [...], "compile_s": [...], "rules": n,
    "fell_through": frames counted no_match or malformed by the last set}."""
    bed = fp(["testbed", "up", "--json"])
    ns, i = bed["ns_b"], bed["iface_b"]
    g = None
    try:
        fp(["filter", "load", files[0], "--netns", ns, "-i", i, "--detach"])
        g = fp(["gen", "--netns", bed["ns_a"], "-i", bed["iface_a"], "--dst-mac", bed["mac_b"], "--flows", "1000",
                "--rate", str(RATE), "--duration", "600", "--cpu", "0", "--json"], wait=False)
        time.sleep(0.5)
        out = {"reload_s": [], "install_s": [], "compile_s": []}
        for k in range(1, reloads + 1):
            r = fp(["filter", "reload", files[k % 2], "--netns", ns, "-i", i, "--json"])
            out["rules"] = r["rules"]
            for key in ("reload", "install", "compile"):
                out[f"{key}_s"].append(r[f"{key}_ns"] / 1e9)
        s = fp(["filter", "stats", "--netns", ns, "-i", i, "--duration", "0", "--json"])
        out["fell_through"] = s["totals"]["no_match"]["packets"] + s["totals"]["malformed"]["packets"]
        return out
    finally:
        if g is not None:
            g.send_signal(15)
            g.communicate(timeout=30)
        subprocess.run([fplib.FP, "filter", "unload", "--netns", ns, "-i", i], capture_output=True)
        subprocess.run([fplib.FP, "testbed", "down", bed["name"]], capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reloads", type=int, default=3)
    ap.add_argument("--rules", type=int, default=100_000)
    a = ap.parse_args()
    if a.runs < 1 or a.reloads < 1 or a.rules < 2:
        sys.exit(f"bench: --runs {a.runs} --reloads {a.reloads} --rules {a.rules}: need runs >= 1, reloads >= 1, rules >= 2")
    if os.geteuid() != 0:
        sys.exit("bench: needs root (network namespaces, XDP)")
    files = rule_files(a.rules, tempfile.mkdtemp(prefix="fastpath-bench-reload-"))
    runs = []
    for r in range(a.runs):
        print(f"run {r + 1}/{a.runs} ...", file=sys.stderr, flush=True)
        runs.append(one_run(files, a.reloads))
    for key in ("reload_s", "install_s", "compile_s"):
        v = [x for run in runs for x in run[key]]
        print(f"{key:<10} median {statistics.median(v):.2f} s (min {min(v):.2f}, max {max(v):.2f}) over {len(v)} reloads")
    print(f"fell through to the default: {', '.join(str(run['fell_through']) for run in runs)} (per run)")


if __name__ == "__main__":
    main()
