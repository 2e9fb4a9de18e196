#!/usr/bin/env python3
"""The issue-8 engine measurements on test beds of their own, side by side in each run:
single queue (xdpdrop, rxdrop native copy, l2fwd, txonly; each as a fraction of xdpdrop in the
same run), two queues (xdpdrop and rxdrop with per-queue UMEMs and with --shared-umem, same
generator; efficiency = 2-queue ratio / 1-queue ratio), redirect-cpu vs xdpdrop, diagnostic
txonly and rxdrop rows with the receiver's veth NAPI threaded (against xdpdrop in that same
configuration), and CPU use per core during each row (/proc/stat). With --baseline BIN, the same single-queue rows with an
older build, interleaved, for before/after.

Usage: scripts/bench_engine.py [--runs 3] [--duration 5] [--baseline BIN] [--json FILE]   (root)
"""
import argparse, json, os, statistics, subprocess, sys, time

import fplib
from fplib import fp, finish, ready


def cpu_times():
    """Per CPU: (busy, softirq, total) jiffies from /proc/stat."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            p = line.split()
            if p[0].startswith("cpu") and p[0] != "cpu":
                v = list(map(int, p[1:9]))  # user nice system idle iowait irq softirq steal
                total = sum(v)
                out[p[0]] = (total - v[3] - v[4], v[6], total)
    return out


def cpu_use(a, b):
    """Per CPU: busy % and softirq % between two cpu_times()."""
    res = {}
    for c in a:
        dt = max(b[c][2] - a[c][2], 1)
        res[c] = (100.0 * (b[c][0] - a[c][0]) / dt, 100.0 * (b[c][1] - a[c][1]) / dt)
    return res


def measure(bed, rx_args, tx_args, key, binary, sink=False):
    """Receiver in ns b (its --json summary), sender in ns a; rate = receiver's `key` per
    sender second (for txonly: frames the veth delivered, per second). With `sink`, XDP_DROP on
    the sender's veth drops what comes back (l2fwd): without it the bounced frames go up ns a's
    IP stack (a route lookup each, ip_route_input_slow), on the forwarder's CPU, since a veth
    delivers in the sender's context."""
    fplib.FP = binary
    rx = None
    snk = None
    if sink:
        fplib.FP = FP_NEW
        snk = fp(["bench", "xdpdrop", "--netns", bed["ns_a"], "-i", bed["iface_a"], "--duration", "600", "--json",
                  "--interval", "100"], wait=False)
        ready(snk)
        fplib.FP = binary
    if rx_args:
        rx = fp(rx_args + ["--netns", bed["ns_b"], "-i", bed["iface_b"], "--duration", "600", "--json",
                           "--interval", "100"], wait=False)
        ready(rx)
    t0 = cpu_times()
    tx = fp(tx_args + ["--netns", bed["ns_a"], "-i", bed["iface_a"], "--json"])
    t1 = cpu_times()
    time.sleep(0.3)
    rxs = finish(rx) if rx else None
    if snk:
        finish(snk)
    if key == "delivered":
        pkts = tx["delivered"]  # the sender's veth: frames the peer took
    elif key == "rx delivered":
        pkts = rxs["delivered"]  # redirect-cpu: frames its CPUMAP program ran on
    else:
        pkts = rxs["totals"][key]
    cmd = " | ".join(" ".join(["fastpath"] + a) for a in ([rx_args] if rx_args else []) + [tx_args])
    if sink:
        cmd += " | sink: fastpath bench xdpdrop (ns a)"
    return {"mpps": pkts / tx["duration_s"] / 1e6, "cmd": cmd, "cpu": cpu_use(t0, t1)}


def up(args):
    fplib.FP = FP_NEW
    return fp(["testbed", "up", "--json"] + args)


def threaded(bed, on):
    """Threaded NAPI on the receiver's veth (ns b): /sys/class/net/IFACE/threaded."""
    subprocess.run(["ip", "netns", "exec", bed["ns_b"], "sh", "-c",
                    f"echo {on} > /sys/class/net/{bed['iface_b']}/threaded"], check=True)


def down(bed):
    subprocess.run([FP_NEW, "testbed", "down", bed["name"]], capture_output=True)


def one_run(d, baseline):
    out = {}
    dur = ["--duration", str(d)]
    bed = up([])
    try:
        mac = bed["mac_b"]
        gen1 = ["gen", "--engine", "xdp-live", "--cpu", "0", "--threads", "1", "--dst-mac", mac] + dur
        app = ["--cpu", "1"]
        bins = [("", FP_NEW)] + ([(" (before)", baseline)] if baseline else [])
        out["xdpdrop 1q"] = measure(bed, ["bench", "xdpdrop"], gen1, "drop_packets", FP_NEW)
        for tag, b in bins:
            out["rxdrop native copy 1q" + tag] = measure(
                bed, ["bench", "rxdrop", "--xdp-mode", "native", "--copy-mode", "copy"] + app, gen1, "rx_packets", b)
            out["l2fwd native copy 1q" + tag] = measure(
                bed, ["bench", "l2fwd", "--xdp-mode", "native"] + app, gen1, "tx_packets", b, sink=True)
            out["txonly copy 1q" + tag] = measure(
                bed, ["bench", "xdpdrop"], ["bench", "txonly", "--dst-mac", mac] + app + dur, "delivered", b)
        out["redirect-cpu 1q"] = measure(bed, ["bench", "redirect-cpu", "--xdp-mode", "native"], gen1,
                                         "rx delivered", FP_NEW)
        # Diagnostic rows: the receiving veth's NAPI in a kernel thread of its own (threaded NAPI),
        # so its work (the COW of each skb, the XDP program) leaves the sender's CPU, as it does
        # on a real NIC where the receiver is another machine. Their reference is the XDP_DROP of
        # this same configuration.
        threaded(bed, 1)
        out["xdpdrop 1q threaded-napi"] = measure(bed, ["bench", "xdpdrop"], gen1, "drop_packets", FP_NEW)
        out["txonly copy 1q threaded-napi"] = measure(
            bed, ["bench", "xdpdrop"], ["bench", "txonly", "--dst-mac", mac] + app + dur, "delivered", FP_NEW)
        out["rxdrop native copy 1q threaded-napi"] = measure(
            bed, ["bench", "rxdrop", "--xdp-mode", "native", "--copy-mode", "copy"] + app, gen1, "rx_packets", FP_NEW)
        threaded(bed, 0)
    finally:
        down(bed)
    bed = up(["--queues", "2"])
    try:
        mac = bed["mac_b"]
        # Two generator threads, CPU 0 and 1: veth_xdp_xmit picks the receive queue by sending CPU.
        gen2 = ["gen", "--engine", "xdp-live", "--cpu", "0", "--threads", "2", "--dst-mac", mac] + dur
        out["xdpdrop 2q"] = measure(bed, ["bench", "xdpdrop"], gen2, "drop_packets", FP_NEW)
        q2 = ["bench", "rxdrop", "--xdp-mode", "native", "--copy-mode", "copy", "--queues", "2", "--cpus", "0,1"]
        # The spinning rows spin by request: workers on every CPU wait in poll() by default.
        out["rxdrop 2q per-queue UMEM"] = measure(bed, q2 + ["--spin"], gen2, "rx_packets", FP_NEW)
        out["rxdrop 2q shared UMEM"] = measure(bed, q2 + ["--shared-umem", "--spin"], gen2, "rx_packets", FP_NEW)
        out["rxdrop 2q shared UMEM poll"] = measure(bed, q2 + ["--shared-umem", "--poll"], gen2, "rx_packets", FP_NEW)
    finally:
        down(bed)
    return out


def main():
    global FP_NEW
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--baseline", help="an older fastpath binary for before/after rows")
    ap.add_argument("--json", help="write every measurement to this file")
    a = ap.parse_args()
    FP_NEW = os.path.abspath(fplib.FP)
    runs = []
    for r in range(a.runs):
        print(f"run {r + 1}/{a.runs} ...", file=sys.stderr, flush=True)
        runs.append(one_run(a.duration, a.baseline))

    def ref(key):
        if key.endswith("threaded-napi"):
            return "xdpdrop 1q threaded-napi"
        return "xdpdrop 2q" if " 2q" in key else "xdpdrop 1q"

    print(f"{'path':<36} {'Mpps min':>8} {'median':>7} {'max':>7}   ratio to xdpdrop, same run (min/median/max)   CPU busy %/softirq % (median)")
    for key in runs[0]:
        v = [run[key]["mpps"] for run in runs]
        ratio = [run[key]["mpps"] / run[ref(key)]["mpps"] for run in runs]
        cpus = sorted(runs[0][key]["cpu"])
        use = " ".join(f"{c} {statistics.median(r[key]['cpu'][c][0] for r in runs):.0f}/"
                       f"{statistics.median(r[key]['cpu'][c][1] for r in runs):.0f}" for c in cpus)
        print(f"{key:<36} {min(v):>8.2f} {statistics.median(v):>7.2f} {max(v):>7.2f}   "
              f"{min(ratio):.2f} / {statistics.median(ratio):.2f} / {max(ratio):.2f}{'':<22}{use}")
    r1 = [run["rxdrop native copy 1q"]["mpps"] / run["xdpdrop 1q"]["mpps"] for run in runs]
    for k in ("rxdrop 2q per-queue UMEM", "rxdrop 2q shared UMEM", "rxdrop 2q shared UMEM poll"):
        eff = [(run[k]["mpps"] / run["xdpdrop 2q"]["mpps"]) / x for run, x in zip(runs, r1)]
        print(f"2-queue efficiency {k[10:]:<22} {statistics.median(eff):.2f}x the 1-queue ratio "
              f"(min {min(eff):.2f}, max {max(eff):.2f})")
    print("\ncommand lines (sender in ns a, receiver in ns b, 64-byte frames):")
    for key in runs[0]:
        print(f"  {key:<36} {runs[0][key]['cmd']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(runs, f)


FP_NEW = ""

if __name__ == "__main__":
    main()
