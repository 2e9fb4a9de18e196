#!/usr/bin/env python3
"""Latency under load through each forwarder (issue 10): a sockperf TCP ping-pong from a to b
across f, first alone, then while one iperf3 TCP stream fills the same path, on one forwarding
test bed (`fastpath testbed up --fwd`), N runs, medians of the p50/p99 (half round trip, us).

Forwarders: `fastpath fwd --mode l3` (XDP), the kernel's IP forwarding with fb's default qdisc
(noqueue on a veth), and the kernel's forwarding with fb shaped to a slower port (`tc qdisc
... tbf rate RATE`, with a 10 MB FIFO, the bufferbloat case, a 256 KB FIFO, or fq_codel behind it,
left out where the kernel has no fq_codel). XDP_REDIRECT bypasses the egress qdisc entirely (the frame goes to the driver's
ndo_xdp_xmit), so tc cannot make a slow port for the XDP forwarder on a veth; its row shows
the unshaped path. fa's receive NAPI is threaded on CPU 1 (the forwarder's CPU); the hosts'
programs (sockperf, iperf3) run on CPU 0.

Usage: scripts/bench_fwd_latency.py [--runs 3] [--duration 5] [--rate 1gbit]
       (root; the fastpath binary from $FASTPATH or target/release/fastpath)
"""
import argparse, json, os, statistics, subprocess, sys, time

from fplib import FP, fp, ready
from bench_fwd import pin_napi, sh

CONFIGS = ["xdp-l3", "kernel", "kernel+tbf-fifo", "kernel+tbf-short", "kernel+tbf-fq_codel"]


def have_qdisc(kind):
    """Whether this kernel has the qdisc `kind` (tried on the loopback of a namespace of our own)."""
    ns = f"fpqdisc{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], capture_output=True)
    try:
        return subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", kind], capture_output=True).returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def sockperf(bed, d, port):
    """(p50, p99) of a sockperf TCP ping-pong a -> b, microseconds."""
    srv = subprocess.Popen(["ip", "netns", "exec", bed["ns_b"], "taskset", "-c", "0", "sockperf", "server", "--tcp", "-i",
                            bed["ip4_b"], "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = sh("ip", "netns", "exec", bed["ns_a"], "taskset", "-c", "0", "sockperf", "ping-pong", "--tcp", "-i",
                 bed["ip4_b"], "-p", str(port), "-t", str(int(d)))
    finally:
        srv.kill()
        srv.wait()
    p = {}
    for line in out.splitlines():
        for key, name in (("percentile 50.000", "p50"), ("percentile 99.000", "p99")):
            if key in line:
                p[name] = float(line.split("=")[1].strip())
    if len(p) != 2:
        sys.exit(f"bench: sockperf printed no percentiles: {out[-400:]}")
    return p["p50"], p["p99"]


def loaded(bed, d, port):
    """sockperf while one iperf3 TCP stream a -> b runs; returns (p50, p99, iperf3 Gbit/s)."""
    srv = subprocess.Popen(["ip", "netns", "exec", bed["ns_b"], "taskset", "-c", "0", "iperf3", "-s", "-1", "-B",
                            bed["ip4_b"]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    cli = subprocess.Popen(["ip", "netns", "exec", bed["ns_a"], "taskset", "-c", "0", "iperf3", "-c", bed["ip4_b"], "-t",
                            str(int(d) + 3), "-J"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    try:
        p50, p99 = sockperf(bed, d, port)
    finally:
        out, _ = cli.communicate(timeout=d + 30)
        srv.wait(timeout=30)
    gbps = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e9
    return p50, p99, gbps


def setup(bed, cfg, rate):
    """Installs `cfg` in f; returns the fastpath process to stop, if any."""
    f, fb = bed["ns_f"], bed["iface_fb"]
    if cfg == "xdp-l3":
        p = fp(["fwd", "--netns", f, "-i", bed["iface_fa"], "-i", fb, "--mode", "l3", "--duration", "600", "--json",
                "--interval", "100"], wait=False)
        ready(p)
        return p
    if cfg.startswith("kernel+tbf"):
        # A bloated FIFO (10 MB, 80 ms at 1 Gbit/s), a short one (256 KB, 2 ms; it must hold a 64 KB
        # GRO packet), or fq_codel behind the shaper.
        limit = "256kb" if cfg.endswith("short") else "10mb"
        sh("tc", "-n", f, "qdisc", "replace", "dev", fb, "root", "handle", "1:", "tbf", "rate", rate, "burst", "64kb",
           "limit", limit)
        if cfg.endswith("fq_codel"):
            sh("tc", "-n", f, "qdisc", "add", "dev", fb, "parent", "1:1", "handle", "10:", "fq_codel")
    return None


def teardown(bed, cfg, p):
    if p is not None:
        p.send_signal(15)
        p.communicate(timeout=30)
    if cfg.startswith("kernel+tbf"):
        subprocess.run(["tc", "-n", bed["ns_f"], "qdisc", "del", "dev", bed["iface_fb"], "root"], capture_output=True)


def one_run(d, configs, rate, port=11111):
    """One run on a forwarding test bed of its own: {config: (idle p50, idle p99, loaded p50,
    loaded p99 us, iperf3 Gbit/s)} for each of `configs` (CONFIGS); sockperf uses ports from
    `port` + 1 on (two per config)."""
    bed = fp(["testbed", "up", "--fwd", "--json"])
    try:
        pin_napi(bed, bed["iface_fa"], 1)
        res = {}
        for cfg in configs:
            p = setup(bed, cfg, rate)
            try:
                port += 1
                idle = sockperf(bed, d, port)
                port += 1
                res[cfg] = idle + loaded(bed, d, port)
            finally:
                teardown(bed, cfg, p)
        return res
    finally:
        subprocess.run([FP, "testbed", "down", bed["name"]], capture_output=True)


def available_configs():
    """CONFIGS without the rows this kernel cannot make (fq_codel missing)."""
    configs = list(CONFIGS)
    if not have_qdisc("fq_codel"):
        configs.remove("kernel+tbf-fq_codel")
    return configs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--rate", default="1gbit", help="the slow port's rate (tc tbf syntax)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: needs root (network namespaces, XDP)")
    configs = list(CONFIGS)
    if not have_qdisc("fq_codel"):
        configs.remove("kernel+tbf-fq_codel")
        print("bench: this kernel has no fq_codel qdisc (sch_fq_codel not built or not loadable): its row is left out",
              file=sys.stderr)
    results = []  # per run: {cfg: (idle p50, idle p99, loaded p50, loaded p99, Gbit/s)}
    port = 11111
    for r in range(a.runs):
        print(f"run {r + 1}/{a.runs} ...", file=sys.stderr, flush=True)
        results.append(one_run(a.duration, configs, a.rate, port))
        port += 2 * len(configs)
    print(f"{'forwarder':<22} {'idle p50 us':>11} {'idle p99 us':>11} {'loaded p50 us':>13} {'loaded p99 us':>13} "
          f"{'iperf3 Gbit/s':>13}")
    for cfg in configs:
        col = lambda i: statistics.median(res[cfg][i] for res in results)
        print(f"{cfg:<22} {col(0):>11.1f} {col(1):>11.1f} {col(2):>13.1f} {col(3):>13.1f} {col(4):>13.2f}")
    print(f"\n{a.runs} runs of {a.duration} s per phase; medians. sockperf ping-pong --tcp a -> b (half round trip) "
          f"alone, then beside one iperf3 TCP stream a -> b; tbf rate {a.rate} burst 64kb on fb with a 10 MB FIFO (tbf-fifo), "
          f"a 256 KB FIFO (tbf-short) or fq_codel as its child; XDP_REDIRECT bypasses fb's qdisc, so the xdp-l3 row is "
          f"unshaped.")


if __name__ == "__main__":
    main()
