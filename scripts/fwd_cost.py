#!/usr/bin/env python3
"""Per-frame cost of the in-kernel forwarder's XDP program: 64-byte UDP a -> b for D s on a
forwarding test bed (fa's NAPI on CPU 1), for L3 with the FIB cache, L3 without it
(`--no-fib-cache`) and L2: kernel.bpf_stats_enabled's run_time_ns / run_cnt of the forwarder's
XDP programs (read from its fdinfo; the statistics add ~50 ns of their own to every program).
Precise where Mpps are noisy: run it for two builds in turn to compare them.

Usage: [FASTPATH=path/to/fastpath] scripts/fwd_cost.py [--runs N] [--duration D]   (root)"""
import argparse
import glob
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fplib import FP, fp, ready  # noqa: E402
import bench_fwd  # noqa: E402

# (row name, fwd arguments, destination MAC key of the bed: L2 carries frames unchanged)
FORWARDERS = [("xdp-l3", ["--mode", "l3"], "mac_fa"), ("xdp-l3 --no-fib-cache", ["--mode", "l3", "--no-fib-cache"], "mac_fa"),
              ("xdp-l2", ["--mode", "l2"], "mac_b")]


def prog_stats(pid):
    """(run_time_ns, run_cnt) summed over the XDP programs (prog_type 6) process `pid` holds."""
    t = c = 0
    for fd in glob.glob(f"/proc/{pid}/fdinfo/*"):
        try:
            txt = open(fd).read()
        except OSError:
            continue
        if "prog_type:\t6" in txt:
            d = dict(line.split(":\t", 1) for line in txt.splitlines() if ":\t" in line)
            t += int(d.get("run_time_ns", 0))
            c += int(d.get("run_cnt", 0))
    return t, c


def one_run(d):
    """{row name: ns per frame} of one run: one test bed, each forwarder in turn for `d` s."""
    bed = fp(["testbed", "up", "--fwd", "--json"])
    out = {}
    try:
        bench_fwd.pin_napi(bed, bed["iface_fa"], 1)
        for name, args, mac in FORWARDERS:
            p = fp(["fwd", "--netns", bed["ns_f"], "-i", bed["iface_fa"], "-i", bed["iface_fb"], *args,
                    "--duration", "600", "--json", "--interval", "100"], wait=False)
            try:
                ready(p)
                open("/proc/sys/kernel/bpf_stats_enabled", "w").write("1")
                t0, c0 = prog_stats(p.pid)
                fp(["gen", "--netns", bed["ns_a"], "-i", bed["iface_a"], "--cpu", "0", "--duration", f"{d:g}",
                    "--dst-mac", bed[mac], "--src-ip", bed["ip4_a"], "--dst-ip", bed["ip4_b"], "--json"])
                t1, c1 = prog_stats(p.pid)
            finally:
                open("/proc/sys/kernel/bpf_stats_enabled", "w").write("0")
                p.send_signal(15)
                p.communicate(timeout=30)
            if c1 - c0 < 1000:
                raise RuntimeError(f"{name}: the forwarder's program ran {c1 - c0} times; expected the generator's frames")
            out[name] = round((t1 - t0) / (c1 - c0), 1)
    finally:
        subprocess.run([FP, "testbed", "down", bed["name"]], capture_output=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0)
    a = ap.parse_args()
    runs = [one_run(a.duration) for _ in range(a.runs)]
    for name, _, _ in FORWARDERS:
        v = [r[name] for r in runs]
        print(f"{name:<24} {statistics.median(v):6.1f} ns/frame (median of {len(v)}: {', '.join(f'{x:.1f}' for x in v)})")


if __name__ == "__main__":
    main()
