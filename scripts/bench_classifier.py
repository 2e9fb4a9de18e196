#!/usr/bin/env python3
"""Issue-3 measurements on a test bed of its own, N runs, medians:
1. in-kernel drop rate of the classifier with 1, 100, 10,000 and 100,000 rules (prefix and port
   rules mixed; the generator's packets match the LAST rule) as a ratio to the minimal xdp_drop
   program measured in the same run;
2. AF_XDP rxdrop behind the classifier (100 rules, the last steering to xsk) vs behind the
   minimal redirect program, same run.

With --baseline BIN, the classifier and rxdrop rows again with an older build, interleaved in the
same run on the same test bed (rows marked "(before)"), for before/after.

Usage: scripts/bench_classifier.py [--runs 3] [--duration 5] [--baseline BIN]   (root)
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time

import fplib
from fplib import fp, finish, last_json, ready


def rules_file(n, last_action, path):
    with open(path, "w") as f:
        f.write('default = "pass"\n')
        for i in range(n - 1):
            if i % 2 == 0:
                f.write(f'[[rule]]\nsrc = "172.{16 + (i >> 16) % 16}.{(i >> 8) & 255}.{i & 255}/32"\nproto = "udp"\ndst_port = {1000 + i % 50000}\naction = "drop"\n')
            else:
                f.write(f'[[rule]]\ndst = "192.{168 + (i >> 16) % 8}.{(i >> 8) & 255}.0/24"\naction = "pass"\n')
        f.write(f'[[rule]]\nname = "last"\nsrc = "10.99.0.1/32"\nproto = "udp"\ndst_port = 9\naction = "{last_action}"\n')


def gen(bed, d):
    g = fp(["gen", "--netns", bed["ns_a"], "-i", bed["iface_a"], "--cpu", "0", "--duration", str(d), "--dst-mac", bed["mac_b"], "--json"])
    return g["duration_s"]


def drop_rate_xdpdrop(bed, d):
    p = fp(["bench", "xdpdrop", "--netns", bed["ns_b"], "-i", bed["iface_b"], "--duration", "600", "--json", "--interval", "100"], wait=False)
    ready(p)
    secs = gen(bed, d)
    time.sleep(0.3)
    p.send_signal(15)
    out, _ = p.communicate(timeout=30)
    return last_json(out)["totals"]["drop_packets"] / secs / 1e6


def drop_rate_classifier(bed, d, path):
    fp(["filter", "load", path, "--netns", bed["ns_b"], "-i", bed["iface_b"], "--detach"])
    try:
        before = fp(["filter", "stats", "--netns", bed["ns_b"], "-i", bed["iface_b"], "--duration", "0", "--json"])
        secs = gen(bed, d)
        time.sleep(0.3)
        after = fp(["filter", "stats", "--netns", bed["ns_b"], "-i", bed["iface_b"], "--duration", "0", "--json"])
        return (after["totals"]["drop"]["packets"] - before["totals"]["drop"]["packets"]) / secs / 1e6
    finally:
        subprocess.run([fplib.FP, "filter", "unload", "--netns", bed["ns_b"], "-i", bed["iface_b"]], capture_output=True)


def rxdrop_rate(bed, d, extra):
    p = fp(["bench", "rxdrop", "--netns", bed["ns_b"], "-i", bed["iface_b"], "--cpu", "1", "--duration", "600", "--json", "--interval", "100"] + extra, wait=False)
    ready(p)
    secs = gen(bed, d)
    time.sleep(0.3)
    p.send_signal(15)
    out, _ = p.communicate(timeout=30)
    return last_json(out)["totals"]["rx_packets"] / secs / 1e6


def rule_files(sizes, tmp):
    """The rule files one_run() reads: drop{N}.toml per size and xsk100.toml, in `tmp`."""
    for n in sizes:
        rules_file(n, "drop", f"{tmp}/drop{n}.toml")
    rules_file(100, "xsk", f"{tmp}/xsk100.toml")


def one_run(d, sizes, tmp, baseline=None):
    """One run on a test bed of its own: {"xdp_drop": Mpps, "classifier N rules": Mpps, ...,
    "rxdrop minimal redirect": Mpps, "rxdrop behind classifier (100 rules)": Mpps}; the rule
    files come from rule_files(sizes, tmp). With `baseline` (a binary), each classifier and
    rxdrop row is measured with it too, right after the current build's, as "ROW (before)"."""
    new = fplib.FP
    bed = fp(["testbed", "up", "--json"])
    try:
        res = {"xdp_drop": drop_rate_xdpdrop(bed, d)}
        bins = [("", new)] + ([(" (before)", baseline)] if baseline else [])
        rows = [(f"classifier {n} rules", lambda n=n: drop_rate_classifier(bed, d, f"{tmp}/drop{n}.toml")) for n in sizes]
        rows += [("rxdrop minimal redirect", lambda: rxdrop_rate(bed, d, [])),
                 ("rxdrop behind classifier (100 rules)", lambda: rxdrop_rate(bed, d, ["--rules", f"{tmp}/xsk100.toml"]))]
        for name, measure in rows:
            for suffix, binary in bins:
                fplib.FP = binary
                try:
                    res[name + suffix] = measure()
                finally:
                    fplib.FP = new
        return res
    finally:
        subprocess.run([fplib.FP, "testbed", "down", bed["name"]], capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--sizes", default="1,100,10000,100000")
    ap.add_argument("--baseline", help="an older fastpath binary for before/after rows")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    tmp = tempfile.mkdtemp(prefix="fastpath-bench-")
    rule_files(sizes, tmp)
    results = []
    for r in range(a.runs):
        print(f"run {r + 1}/{a.runs} ...", file=sys.stderr, flush=True)
        results.append(one_run(a.duration, sizes, tmp, a.baseline))
    print(f"{'path':<40} {'Mpps min':>9} {'median':>8} {'max':>8}   ratio (median, same run)")
    for k in results[0]:
        v = [x[k] for x in results]
        before = k.endswith(" (before)")
        if k.startswith("rxdrop behind"):
            ref = "rxdrop minimal redirect" + (" (before)" if before else "")
        else:
            ref = "xdp_drop"
        ratio = [x[k] / x[ref] for x in results]
        line = f"{k:<40} {min(v):>9.2f} {statistics.median(v):>8.2f} {max(v):>8.2f}   {statistics.median(ratio):.2f} of {ref}"
        if a.baseline and not before and k + " (before)" in results[0]:
            after_before = [x[k] / x[k + " (before)"] for x in results]
            line += f"; after/before {statistics.median(after_before):.3f} (runs: {', '.join(f'{r:.3f}' for r in after_before)})"
        print(line)
    print("\ncommand lines: fastpath gen --cpu 0 --duration D | fastpath bench xdpdrop | fastpath filter load RULES --detach (rules: "
          "prefix/32+udp+dst_port drop and dst/24 pass alternating, last rule src 10.99.0.1/32 udp dport 9 matches every frame) | "
          "fastpath bench rxdrop --cpu 1 [--rules xsk100.toml]")


if __name__ == "__main__":
    main()
