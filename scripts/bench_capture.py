#!/usr/bin/env python3
"""Capture (issue 11), side by side on one test bed per run: the lossless capture rate of
`fastpath capture --mode copy`, `fastpath capture --mode divert` and tcpdump (AF_PACKET,
TPACKET_V3, `-w`), all with a snap length of 128 bytes writing to /dev/shm; and the cost of copy
capture on the traffic it watches.

Lossless rate: at each offered rate (64-byte UDP from `fastpath gen --engine xdp-live --cpu 0`,
paced, 2 s), a capture runs on the receiving veth and the frames in its file are counted; the
lossless rate is the highest rate of frames reaching the interface (the generator's
`delivered`: what the receiving veth accepted; a threaded veth refuses bursts its ring cannot
hold, before any capture sees them) at which the file holds every one of them (rates tried:
25k, 50k, 100k, 200k, 400k, 800k, 1.6M, 3.2M frames/s offered, stopping at the first loss). The receiving veth's NAPI is threaded and pinned to CPU 1
(`testbed up --napi-cpu 1`), where the capture process runs too (taskset): without that, a
veth receives in the sender's softirq and the generator slows to whatever the receive path
takes, so no capture ever loses a frame.

Cost of copy capture: frames/s b's UDP stack takes in (Udp InDatagrams + NoPorts) under an
unpaced flood, with the classifier passing everything (XDP_PASS through a rule that matches
nothing: `fastpath capture --rule proto=udp,dst_port=1`) against `fastpath capture` copying every
frame; the ratio is the copy's share of the XDP_PASS rate.

Usage: scripts/bench_capture.py [--runs 3] [--duration 2]   (root; tcpdump installed)
"""
import argparse, os, statistics, subprocess, sys, time

import fplib
from fplib import FP, fp, last_json

RATES = [25_000, 50_000, 100_000, 200_000, 400_000, 800_000, 1_600_000, 3_200_000]
SNAP = "128"
TOOLS = ["tcpdump", "copy", "divert"]


def ns_cmd(ns, *args):
    return ["ip", "netns", "exec", ns] + list(args)


def udp_in(ns):
    out = subprocess.run(ns_cmd(ns, "cat", "/proc/net/snmp"), capture_output=True, text=True).stdout
    rows = [l.split() for l in out.splitlines() if l.startswith("Udp:")]
    h, v = rows[0], rows[1]
    return sum(int(b) for a, b in zip(h, v) if a in ("InDatagrams", "NoPorts", "InErrors"))


def start_capture(tool, bed, path):
    ns, i = bed["ns_b"], bed["iface_b"]
    if tool == "tcpdump":
        p = subprocess.Popen(ns_cmd(ns, "taskset", "-c", "1", "tcpdump", "-i", i, "-s", SNAP, "-B", "65536", "-w", path,
                                    "-U", "--immediate-mode", "-n"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
        # tcpdump says "listening on ..." once its socket is bound.
        while True:
            line = p.stderr.readline()
            if not line or "listening on" in line:
                break
        return p
    p = subprocess.Popen(["taskset", "-c", "1", FP, "capture", "--netns", ns, "-i", i, "-w", path, "--snaplen", SNAP,
                          "--mode", tool, "--json", "--duration", "600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    fplib.ready(p)
    return p


def stop(p):
    p.send_signal(15)
    try:
        p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()


def frames_in(path):
    out = subprocess.run(["capinfos", "-c", "-M", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "Number of packets" in line:
            return int(line.split(":")[1].strip().replace(",", ""))
    return 0


def lossless(tool, bed, d):
    """Highest delivered rate (frames/s) at which the capture file held every delivered frame."""
    best = 0
    for rate in RATES:
        path = f"/dev/shm/fpcap-bench-{os.getpid()}.pcap"
        p = start_capture(tool, bed, path)
        try:
            g = fp(["gen", "--netns", bed["ns_a"], "-i", bed["iface_a"], "--dst-mac", bed["mac_b"], "--cpu", "0",
                    "--rate", str(rate), "--count", str(int(rate * d)), "--duration", str(d * 3), "--json"])
            time.sleep(0.5)
        finally:
            stop(p)
        delivered = g["delivered"]
        got = frames_in(path)
        os.unlink(path)
        if got < delivered:
            break
        best = max(best, int(delivered / g["duration_s"]))
    return best


def delivered_pps(bed, d, args):
    """Frames/s b's UDP stack takes in under an unpaced flood, with `fastpath capture args`."""
    path = f"/dev/shm/fpcap-cost-{os.getpid()}.pcap"
    p = subprocess.Popen(["taskset", "-c", "1", FP, "capture", "--netns", bed["ns_b"], "-i", bed["iface_b"], "-w", path,
                          "--snaplen", SNAP, "--json", "--duration", "600"] + args, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    fplib.ready(p)
    try:
        u0 = udp_in(bed["ns_b"])
        g = fp(["gen", "--netns", bed["ns_a"], "-i", bed["iface_a"], "--dst-mac", bed["mac_b"], "--cpu", "0",
                "--duration", str(d), "--json"])
        time.sleep(0.3)
        u1 = udp_in(bed["ns_b"])
    finally:
        stop(p)
        if os.path.exists(path):
            os.unlink(path)
    return (u1 - u0) / g["duration_s"]


def one_run(d):
    """One run on a test bed of its own (b's NAPI threaded on CPU 1): {"lossless": {tool: frames/s}
    for TOOLS, "cost": (frames/s b's UDP stack took under XDP_PASS, under copy capture)}."""
    bed = fp(["testbed", "up", "--json", "--napi-cpu", "1"])
    try:
        res = {t: lossless(t, bed, d) for t in TOOLS}
        passed = delivered_pps(bed, d, ["--rule", "proto=udp,dst_port=1"])
        copied = delivered_pps(bed, d, [])
        return {"lossless": res, "cost": [passed, copied]}
    finally:
        subprocess.run([FP, "testbed", "down", bed["name"]], capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=2.0)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: needs root (network namespaces, XDP)")
    if subprocess.run(["which", "tcpdump"], capture_output=True).returncode != 0:
        sys.exit("bench: tcpdump is not installed (apt-get install tcpdump)")
    res = {t: [] for t in TOOLS}
    cost = []
    for r in range(a.runs):
        print(f"run {r + 1}/{a.runs} ...", file=sys.stderr, flush=True)
        one = one_run(a.duration)
        for t in TOOLS:
            res[t].append(one["lossless"][t])
        cost.append(tuple(one["cost"]))
    print(f"{'capture':<10} {'lossless delivered rate (frames/s), per run':<44} {'median':>10}  ratio to tcpdump (median of runs)")
    for t in TOOLS:
        ratios = [x / y if y else float('inf') for x, y in zip(res[t], res["tcpdump"])]
        print(f"{t:<10} {', '.join(f'{x:,}' for x in res[t]):<44} {statistics.median(res[t]):>10,.0f}  "
              f"{statistics.median(ratios):.1f}")
    p = [c[0] for c in cost]
    c = [c[1] for c in cost]
    q = [y / x for x, y in cost]
    print(f"\nb's UDP stack under an unpaced flood: XDP_PASS (classifier, no rule matches) {statistics.median(p) / 1e3:,.0f} k/s, "
          f"copy capture of every frame {statistics.median(c) / 1e3:,.0f} k/s: {statistics.median(q):.2f} of XDP_PASS "
          f"(min {min(q):.2f}, max {max(q):.2f})")
    print(f"\n{a.runs} runs; offered rates {', '.join(f'{r:,}' for r in RATES)} frames/s for {a.duration} s each, 64-byte UDP "
          f"(`fastpath gen --engine xdp-live --cpu 0 --rate R`), stopping at the first loss; snap length {SNAP}; files on "
          f"/dev/shm; b's NAPI threaded on CPU 1 with the capture process (taskset); tcpdump -i b -s {SNAP} -B 65536 -U --immediate-mode -w; "
          f"fastpath capture --mode copy|divert --snaplen {SNAP}.")


if __name__ == "__main__":
    main()
