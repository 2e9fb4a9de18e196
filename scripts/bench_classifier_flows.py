#!/usr/bin/env python3
"""Classifier drop rate against the number of flows (issue 9), on a test bed of its own, N runs,
medians: the in-kernel drop rate of the classifier with 10,000 mixed rules (source-prefix + UDP
port drops and destination-prefix passes alternating; the flood matches the LAST rule) while
`fastpath gen --flows F` sends F distinct 5-tuples, as a ratio to the minimal xdp_drop program
fed by the same generator command in the same run. F = 1, 1,000, 1,000,000 by default: one flow
lives in the classifier's per-CPU flow cache, a million cannot.

Usage: scripts/bench_classifier_flows.py [--runs 3] [--duration 5] [--flows 1,1000,1000000]
       [--rules 10000]   (root; the fastpath binary from $FASTPATH or target/release/fastpath)
"""
import argparse, statistics, subprocess, sys, tempfile, time

from fplib import FP, fp, last_json, ready


def rules_file(n, path, salt=0):
    """n mixed rules (the last matches the flood: src 10.99.0.0/24, UDP port 9, drop) into `path`;
    `salt` shifts the other rules' addresses and ports, for a second, different set."""
    with open(path, "w") as f:
        f.write('default = "pass"\n')
        for k in range(n - 1):
            i = k + salt
            if k % 2 == 0:
                f.write(f'[[rule]]\nsrc = "172.{16 + (i >> 16) % 16}.{(i >> 8) & 255}.{i & 255}/32"\nproto = "udp"\ndst_port = {1000 + i % 50000}\naction = "drop"\n')
            else:
                f.write(f'[[rule]]\ndst = "192.{168 + (i >> 16) % 8}.{(i >> 8) & 255}.0/24"\naction = "pass"\n')
        # gen --flows varies the last byte of the source address: the whole /24 matches.
        f.write('[[rule]]\nname = "flood"\nsrc = "10.99.0.0/24"\nproto = "udp"\ndst_port = 9\naction = "drop"\n')


def gen_args(bed, d, flows):
    return ["gen", "--netns", bed["ns_a"], "-i", bed["iface_a"], "--cpu", "0", "--duration", str(d),
            "--dst-mac", bed["mac_b"], "--flows", str(flows), "--seed", "1", "--json"]


def xdpdrop_rate(bed, d, flows):
    p = fp(["bench", "xdpdrop", "--netns", bed["ns_b"], "-i", bed["iface_b"], "--duration", "600", "--json", "--interval", "100"], wait=False)
    ready(p)
    secs = fp(gen_args(bed, d, flows))["duration_s"]
    time.sleep(0.3)
    p.send_signal(15)
    out, _ = p.communicate(timeout=30)
    return last_json(out)["totals"]["drop_packets"] / secs / 1e6


def classifier_rate(bed, d, flows, path):
    stats = ["filter", "stats", "--netns", bed["ns_b"], "-i", bed["iface_b"], "--duration", "0", "--json"]
    before = fp(stats)["totals"]["drop"]["packets"]
    secs = fp(gen_args(bed, d, flows))["duration_s"]
    time.sleep(0.3)
    after = fp(stats)
    if after["totals"]["no_match"]["packets"]:
        sys.exit("bench: flood frames fell through to the default: the last rule did not match")
    return (after["totals"]["drop"]["packets"] - before) / secs / 1e6


def one_run(d, flows, rules):
    """One run on a test bed of its own: {flows: [xdp_drop Mpps, classifier Mpps]} for each
    count in `flows`, the classifier loaded from the file `rules` (rules_file())."""
    bed = fp(["testbed", "up", "--json"])
    try:
        res = {f: [xdpdrop_rate(bed, d, f)] for f in flows}
        fp(["filter", "load", rules, "--netns", bed["ns_b"], "-i", bed["iface_b"], "--detach"])
        try:
            for f in flows:
                res[f].append(classifier_rate(bed, d, f, rules))
        finally:
            subprocess.run([FP, "filter", "unload", "--netns", bed["ns_b"], "-i", bed["iface_b"]], capture_output=True)
        return res
    finally:
        subprocess.run([FP, "testbed", "down", bed["name"]], capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--flows", default="1,1000,1000000")
    ap.add_argument("--rules", type=int, default=10000)
    a = ap.parse_args()
    flows = [int(f) for f in a.flows.split(",")]
    tmp = tempfile.mkdtemp(prefix="fastpath-bench-flows-")
    rules = f"{tmp}/rules.toml"
    rules_file(a.rules, rules)
    results = []  # per run: {flows: (xdpdrop Mpps, classifier Mpps)}
    for r in range(a.runs):
        print(f"run {r + 1}/{a.runs} ...", file=sys.stderr, flush=True)
        results.append(one_run(a.duration, flows, rules))
    print(f"{'flows':>9} {'xdp_drop Mpps':>14} {'classifier Mpps':>16}   ratio to xdp_drop, same run (min/median/max)")
    for f in flows:
        x = [res[f][0] for res in results]
        c = [res[f][1] for res in results]
        q = [res[f][1] / res[f][0] for res in results]
        print(f"{f:>9,} {statistics.median(x):>14.2f} {statistics.median(c):>16.2f}   {min(q):.2f} / {statistics.median(q):.2f} / {max(q):.2f}")
    print(f"\n{a.runs} runs of {a.duration} s; medians. Commands (sender in ns a, receiver in ns b): "
          f"fastpath gen --cpu 0 --duration {a.duration} --flows F --seed 1 into fastpath bench xdpdrop, then into "
          f"fastpath filter load RULES --detach ({a.rules} rules: src/32+udp+dst_port drop and dst/24 pass alternating, "
          f"the last, src 10.99.0.0/24 udp dport 9 drop, matches every frame)")


if __name__ == "__main__":
    main()
