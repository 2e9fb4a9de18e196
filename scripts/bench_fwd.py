#!/usr/bin/env python3
"""Forwarding throughput a -> f -> b at 64 bytes (issue 10), every forwarder side by side in one
run on one forwarding test bed (`fastpath testbed up --fwd`), N runs, medians, and each as a ratio
to the kernel's own IP forwarding in the same run.

Forwarders: `fastpath fwd --mode l2` (XDP DEVMAP port pair), `fastpath fwd --mode l3` (XDP,
bpf_fib_lookup), `fastpath fwd --engine xsk --mode l2 --cpus 1` (AF_XDP, one shared UMEM, its
thread on CPU 1), the kernel's IP forwarding (no XDP in f), a Linux bridge of fa and fb in f.
Set-up: the generator (`fastpath gen`, xdp-live, 64-byte UDP) on CPU 0 in ns a; fa's receive
NAPI threaded and pinned to CPU 1, so the forwarding (and the hand-over to b) runs on CPU 1
alone; b counts what arrives with `fastpath bench xdpdrop` (native XDP_DROP).

Usage: scripts/bench_fwd.py [--runs 3] [--duration 5] [--forwarders xdp-l2,xdp-l3,kernel,bridge]
       (root; the fastpath binary from $FASTPATH or target/release/fastpath)
"""
import argparse, glob, os, statistics, subprocess, sys, time

from fplib import FP, fp, last_json, ready

FORWARDERS = ["xdp-l2", "xdp-l3", "xsk-l2", "kernel", "bridge"]


def sh(*args):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench: {' '.join(args)} failed: {r.stderr.strip()}")
    return r.stdout


def pin_napi(bed, iface, cpu):
    """Threaded NAPI for `iface` (in ns f), its kernel threads pinned to `cpu`."""
    sh("ip", "netns", "exec", bed["ns_f"], "sh", "-c", f"echo 1 > /sys/class/net/{iface}/threaded")
    deadline = time.time() + 2
    pids = []
    while not pids and time.time() < deadline:
        for comm in glob.glob("/proc/[0-9]*/comm"):
            try:
                if open(comm).read().strip().startswith(f"napi/{iface}-"):
                    pids.append(comm.split("/")[2])
            except OSError:
                pass
        time.sleep(0.05)
    if not pids:
        sys.exit(f"bench: no napi/{iface}-* threads")
    for pid in pids:
        sh("taskset", "-p", "-c", str(cpu), pid)


def measure(bed, d, dst_mac):
    """Delivered Mpps at b (its XDP_DROP count / the generator's time) and the offered Mpps."""
    p = fp(["bench", "xdpdrop", "--netns", bed["ns_b"], "-i", bed["iface_b"], "--duration", "600", "--json",
            "--interval", "100"], wait=False)
    ready(p)
    g = fp(["gen", "--netns", bed["ns_a"], "-i", bed["iface_a"], "--cpu", "0", "--duration", str(d),
            "--dst-mac", dst_mac, "--src-ip", bed["ip4_a"], "--dst-ip", bed["ip4_b"], "--json"])
    time.sleep(0.3)
    p.send_signal(15)
    out, _ = p.communicate(timeout=30)
    secs = g["duration_s"]
    return last_json(out)["totals"]["drop_packets"] / secs / 1e6, g["totals"]["tx_packets"] / secs / 1e6


def run_forwarder(bed, name, d):
    f = bed["ns_f"]
    if name.startswith("xdp-"):
        mode = name[4:]
        p = fp(["fwd", "--netns", f, "-i", bed["iface_fa"], "-i", bed["iface_fb"], "--mode", mode,
                "--duration", "600", "--json", "--interval", "100"], wait=False)
        ready(p)
        try:
            return measure(bed, d, bed["mac_b"] if mode == "l2" else bed["mac_fa"])
        finally:
            p.send_signal(15)
            p.communicate(timeout=30)
    if name == "xsk-l2":
        p = fp(["fwd", "--engine", "xsk", "--mode", "l2", "--cpus", "1", "--netns", f, "-i", bed["iface_fa"], "-i",
                bed["iface_fb"], "--duration", "600", "--json", "--interval", "100"], wait=False)
        ready(p)
        try:
            return measure(bed, d, bed["mac_b"])
        finally:
            p.send_signal(15)
            p.communicate(timeout=30)
    if name == "kernel":
        return measure(bed, d, bed["mac_fa"])
    if name == "bridge":
        sh("ip", "-n", f, "link", "add", "fwbr0", "type", "bridge")
        try:
            for i in (bed["iface_fa"], bed["iface_fb"]):
                sh("ip", "-n", f, "link", "set", i, "master", "fwbr0")
            sh("ip", "-n", f, "link", "set", "fwbr0", "up")
            time.sleep(0.5)
            return measure(bed, d, bed["mac_b"])
        finally:
            subprocess.run(["ip", "-n", f, "link", "del", "fwbr0"], capture_output=True)
    sys.exit(f"bench: --forwarders {name!r} is not accepted: use {','.join(FORWARDERS)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--forwarders", default=",".join(FORWARDERS))
    a = ap.parse_args()
    names = a.forwarders.split(",")
    for n in names:
        if n not in FORWARDERS:
            sys.exit(f"bench: --forwarders {n!r} is not accepted: use a comma-separated subset of {','.join(FORWARDERS)}")
    if os.geteuid() != 0:
        sys.exit("bench: needs root (network namespaces, XDP)")
    results = []  # per run: {name: (delivered Mpps, offered Mpps)}
    for r in range(a.runs):
        print(f"run {r + 1}/{a.runs} ...", file=sys.stderr, flush=True)
        bed = fp(["testbed", "up", "--fwd", "--json"])
        try:
            pin_napi(bed, bed["iface_fa"], 1)
            results.append({n: run_forwarder(bed, n, a.duration) for n in names})
        finally:
            subprocess.run([FP, "testbed", "down", bed["name"]], capture_output=True)
    base = "kernel" if "kernel" in names else None
    head = f"{'forwarder':<10} {'delivered Mpps':>15} {'offered Mpps':>13}"
    if base:
        head += "   ratio to kernel forwarding, same run (min/median/max)"
    print(head)
    for n in names:
        got = [res[n][0] for res in results]
        off = [res[n][1] for res in results]
        line = f"{n:<10} {statistics.median(got):>15.2f} {statistics.median(off):>13.2f}"
        if base:
            q = [res[n][0] / res[base][0] for res in results]
            line += f"   {min(q):.2f} / {statistics.median(q):.2f} / {max(q):.2f}"
        print(line)
    print(f"\n{a.runs} runs of {a.duration} s; medians. 64-byte UDP from `fastpath gen --cpu 0` (xdp-live) in ns a; "
          f"fa's NAPI threaded on CPU 1; counted by `fastpath bench xdpdrop` on b. xdp-l2/xdp-l3: "
          f"`fastpath fwd --mode l2|l3 -i fa -i fb` (native); xsk-l2: `fastpath fwd --engine xsk --mode l2 --cpus 1` (copy mode); kernel: net.ipv4.ip_forward=1, no XDP in f; "
          f"bridge: fa and fb in a Linux bridge.")


if __name__ == "__main__":
    main()
