#!/usr/bin/env python3
"""The issue-2 measurement matrix on a test bed of its own: xdpdrop, rxdrop (native copy, skb),
l2fwd, txonly and the xdp-live generator, with application and softirq on one core ("same")
and on two ("split"), N runs; prints min/median/max Mpps and the ratio to xdpdrop measured in
the same run, with the command line of every figure.

Usage: scripts/bench.py [--runs 3] [--duration 5] [--json FILE]   (root; `make bench`)
"""
import argparse, json, statistics, subprocess, sys, time, os

from fplib import FP, fp, finish, last_json, ready






def measure(bed, name, rx_args, tx_args, rate_from):
    """Start the receiver (ns b), run the sender (ns a) for its duration, stop the receiver."""
    rx = None
    if rx_args:
        rx = fp(rx_args + ["--netns", bed["ns_b"], "-i", bed["iface_b"], "--duration", "600", "--json", "--interval", "100"], wait=False)
        ready(rx)
    tx = fp(tx_args + ["--netns", bed["ns_a"], "-i", bed["iface_a"], "--json"])
    time.sleep(0.3)
    rxs = finish(rx) if rx else None
    pkts, secs = rate_from(rxs, tx)
    cmd = " | ".join(" ".join(["fastpath"] + a) for a in ([rx_args] if rx_args else []) + [tx_args])
    return {"name": name, "mpps": pkts / secs / 1e6, "cmd": cmd, "rx": rxs, "tx": tx,
            "refused": tx["refused"]}


def recv_total(key):
    return lambda rxs, tx: (rxs["totals"][key], tx["duration_s"])


def sent_total(rxs, tx):
    """A sender's figure: frames its veth delivered to the peer (not descriptors submitted, not
    frames the peer refused: those are `refused`)."""
    return (tx["delivered"], tx["duration_s"])


def one_run(d):
    """Two set-ups, each against its own xdpdrop:
    split: the veth's receive NAPI runs in the sender's softirq on CPU 0 (veth's default), the
           application busy-spins on CPU 1;
    same:  threaded NAPI pinned to CPU 1 (`testbed up --napi-cpu 1`) and the application on
           CPU 1 too, waiting in poll() so the NAPI thread gets the CPU; the generator on CPU 0."""
    out = {}
    for pin, up_args, app in (("split", [], ["--cpu", "1"]), ("same", ["--napi-cpu", "1"], ["--cpu", "1", "--poll"])):
        bed = fp(["testbed", "up", "--json"] + up_args)
        try:
            mac_b = bed["mac_b"]
            gen1 = ["gen", "--engine", "xdp-live", "--cpu", "0", "--threads", "1", "--duration", str(d), "--dst-mac", mac_b]
            out[f"xdpdrop {pin}"] = measure(bed, "", ["bench", "xdpdrop"], gen1, recv_total("drop_packets"))
            out[f"rxdrop native-copy {pin}"] = measure(bed, "", ["bench", "rxdrop", "--xdp-mode", "native", "--copy-mode", "copy"] + app, gen1, recv_total("rx_packets"))
            out[f"rxdrop skb {pin}"] = measure(bed, "", ["bench", "rxdrop", "--xdp-mode", "skb"] + app, gen1, recv_total("rx_packets"))
            out[f"l2fwd native-copy {pin}"] = measure(bed, "", ["bench", "l2fwd", "--xdp-mode", "native"] + app, gen1, recv_total("tx_packets"))
            out[f"txonly copy {pin}"] = measure(bed, "", ["bench", "xdpdrop"],
                ["bench", "txonly", "--duration", str(d), "--dst-mac", mac_b] + app, sent_total)
            if pin == "split":
                out["gen xdp-live 2 threads"] = measure(bed, "", ["bench", "xdpdrop"],
                    ["gen", "--engine", "xdp-live", "--cpu", "0", "--threads", "2", "--duration", str(d), "--dst-mac", mac_b], sent_total)
        finally:
            subprocess.run([FP, "testbed", "down", bed["name"]], capture_output=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--json", help="write every measurement to this file")
    a = ap.parse_args()
    runs = []
    for r in range(a.runs):
        print(f"run {r + 1}/{a.runs} ...", file=sys.stderr, flush=True)
        runs.append(one_run(a.duration))
    print(f"{'path':<28} {'Mpps min':>9} {'median':>8} {'max':>8}   {'ratio to xdpdrop of its set-up (min/median/max, same run)':<44}")
    for key in runs[0]:
        v = [run[key]["mpps"] for run in runs]
        ref = "xdpdrop same" if key.endswith(" same") else "xdpdrop split"
        ratio = [run[key]["mpps"] / run[ref]["mpps"] for run in runs]
        print(f"{key:<28} {min(v):>9.2f} {statistics.median(v):>8.2f} {max(v):>8.2f}   "
              f"{min(ratio):.2f} / {statistics.median(ratio):.2f} / {max(ratio):.2f}")
    print("\ncommand lines (sender in ns a, receiver in ns b, 64-byte frames, one veth queue):")
    for key in runs[0]:
        print(f"  {key:<28} {runs[0][key]['cmd']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(runs, f)


if __name__ == "__main__":
    main()
