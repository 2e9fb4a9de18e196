#!/usr/bin/env python3
"""The generator's cost of many flows (README "Many flows"): `fastpath gen` (xdp-live, one
thread on CPU 0) with one flow and with `--flows 1000000`, IPv4 (64-byte frames) and IPv6
(84-byte frames), into `fastpath bench xdpdrop` on a test bed of its own per run; Mpps delivered
(the receiver's XDP_DROP count over the generator's time), the four measurements alternating
in each run.

Usage: scripts/bench_gen_flows.py [--runs 3] [--duration 3]   (root; the fastpath binary from
$FASTPATH or target/release/fastpath)
"""
import argparse, os, statistics, subprocess, sys, time

import fplib
from fplib import fp, last_json, ready

CASES = [("IPv4, 64 bytes", []), ("IPv6, 84 bytes", ["--src-ip", "fd99::1", "--dst-ip", "fd99::2"])]
FLOWS = [1, 1_000_000]


def rate(bed, d, flows, extra):
    """Mpps XDP_DROP counted at b while `gen --flows flows` runs for d seconds."""
    p = fp(["bench", "xdpdrop", "--netns", bed["ns_b"], "-i", bed["iface_b"], "--duration", "600", "--json",
            "--interval", "100"], wait=False)
    ready(p)
    g = fp(["gen", "--netns", bed["ns_a"], "-i", bed["iface_a"], "--dst-mac", bed["mac_b"], "--cpu", "0",
            "--duration", str(d), "--flows", str(flows), "--json"] + extra)
    time.sleep(0.3)
    p.send_signal(15)
    out, _ = p.communicate(timeout=30)
    return last_json(out)["totals"]["drop_packets"] / g["duration_s"] / 1e6


def one_run(d):
    """One run: {case: {flows: Mpps}} for CASES x FLOWS (flows keys as strings, as JSON has them)."""
    bed = fp(["testbed", "up", "--json"])
    try:
        return {case: {str(f): rate(bed, d, f, extra) for f in FLOWS} for case, extra in CASES}
    finally:
        subprocess.run([fplib.FP, "testbed", "down", bed["name"]], capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0)
    a = ap.parse_args()
    if a.runs < 1 or a.duration <= 0:
        sys.exit(f"bench: --runs {a.runs} --duration {a.duration}: need runs >= 1 and a duration > 0")
    if os.geteuid() != 0:
        sys.exit("bench: needs root (network namespaces, XDP)")
    runs = []
    for r in range(a.runs):
        print(f"run {r + 1}/{a.runs} ...", file=sys.stderr, flush=True)
        runs.append(one_run(a.duration))
    print(f"{'xdp-live, 1 thread':<16} " + " ".join(f"{'--flows ' + str(f):>22}" for f in FLOWS))
    for case, _ in CASES:
        cells = []
        for f in FLOWS:
            v = [r[case][str(f)] for r in runs]
            cells.append(f"{statistics.median(v):.2f} ({min(v):.2f}..{max(v):.2f})")
        print(f"{case:<16} " + " ".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()
