#!/usr/bin/env python3
"""Forwarding throughput a -> f -> b at 64 bytes (issue 10), every forwarder side by side in one
run on one forwarding test bed (`fastpath testbed up --fwd`), N runs, medians, and each as a ratio
to the kernel's own IP forwarding in the same run.

Forwarders: `fastpath fwd --mode l2` (XDP DEVMAP port pair), `fastpath fwd --mode l3` (XDP,
bpf_fib_lookup behind the per-CPU FIB cache; xdp-l3-nocache: with --no-fib-cache), `fastpath fwd --engine xsk --mode l2 --cpus 1` (AF_XDP, one shared UMEM, its
thread on CPU 1), the kernel's IP forwarding (no XDP in f), a Linux bridge of fa and fb in f.
Set-up: the generator (`fastpath gen`, xdp-live, 64-byte UDP) on CPU 0 in ns a; fa's receive
NAPI threaded and pinned to CPU 1, so the forwarding (and the hand-over to b) runs on CPU 1
alone; b counts what arrives with `fastpath bench xdpdrop` (native XDP_DROP).

--jumbo: every veth end at MTU 9000 and a TCP stream instead (iperf3 from a to b, both pinned
to CPU 0, 9,000-byte IP packets: the hosts' TX checksum offload and so TSO are off), in Gbit/s.
The AF_XDP forwarder's sockets are then multi-buffer (three 4,096-byte UMEM frames a packet).
With --jumbo there is one more row, rxdrop: `fastpath gen --engine xsk --frame-len 9014` (unpaced,
CPU 0, multi-buffer TX) from a to `fastpath bench rxdrop --cpu 1` on fa (multi-buffer RX, copy
mode), the bytes rxdrop received over the generator's time.

With --baseline BIN, each of fastpath's own forwarders runs again with an older build right after
the current one, in the same run on the same bed (rows "NAME (before)"), for before/after.

Usage: scripts/bench_fwd.py [--runs 3] [--duration 5] [--forwarders xdp-l2,xdp-l3,kernel,bridge] [--jumbo]
                            [--baseline BIN]
       (root; the fastpath binary from $FASTPATH or target/release/fastpath)
"""
import argparse, glob, json, os, statistics, subprocess, sys, time

import fplib
from fplib import FP, fp, last_json, ready

FORWARDERS = ["xdp-l2", "xdp-l3", "xdp-l3-nocache", "xsk-l2", "kernel", "bridge"]
JUMBO_ONLY = ["rxdrop"]


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


def measure(bed, d, dst_mac, jumbo=False, l2=False):
    """Delivered Mpps at b (its XDP_DROP count / the generator's time) and the offered Mpps; with
    `jumbo`, the Gbit/s of a TCP stream instead."""
    if jumbo:
        return measure_tcp(bed, d, l2)
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


def on_link(bed, on):
    """L2 forwarders keep the MACs: a and b then address each other directly (on-link routes and
    neighbours); off: back to routing through f."""
    for ns, i, peer_ip, peer_mac in ((bed["ns_a"], bed["iface_a"], bed["ip4_b"], bed["mac_b"]),
                                     (bed["ns_b"], bed["iface_b"], bed["ip4_a"], bed["mac_a"])):
        if on:
            sh("ip", "-n", ns, "route", "replace", f"{peer_ip}/32", "dev", i)
            sh("ip", "-n", ns, "neigh", "replace", peer_ip, "lladdr", peer_mac, "dev", i, "nud", "permanent")
        else:
            subprocess.run(["ip", "-n", ns, "route", "del", f"{peer_ip}/32"], capture_output=True)


def measure_tcp(bed, d, l2):
    """Gbit/s of one iperf3 TCP stream a -> b (client and server on CPU 0)."""
    on_link(bed, l2)
    try:
        srv = subprocess.Popen(["ip", "netns", "exec", bed["ns_b"], "taskset", "-c", "0", "iperf3", "-s", "-1", "-B",
                                bed["ip4_b"]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        out = sh("ip", "netns", "exec", bed["ns_a"], "taskset", "-c", "0", "iperf3", "-c", bed["ip4_b"], "-t", str(d),
                 "-J")
        srv.wait(timeout=30)
        return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e9, 0.0
    finally:
        on_link(bed, False)


def spawn(binary, args):
    """The forwarder under test: `binary` (None: the current build) with `args`, not waited for."""
    return subprocess.Popen([binary or fplib.FP] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_forwarder(bed, name, d, jumbo=False, binary=None):
    """`name`'s (delivered, offered) on `bed`; `binary` runs fastpath's own forwarder (the
    generator and the counter are always the current build)."""
    f = bed["ns_f"]
    if name.startswith("xdp-"):
        mode = name[4:6]
        extra = ["--no-fib-cache"] if name.endswith("-nocache") else []
        p = spawn(binary, ["fwd", "--netns", f, "-i", bed["iface_fa"], "-i", bed["iface_fb"], "--mode", mode,
                           "--duration", "600", "--json", "--interval", "100"] + extra)
        ready(p)
        try:
            return measure(bed, d, bed["mac_b"] if mode == "l2" else bed["mac_fa"], jumbo, mode == "l2")
        finally:
            p.send_signal(15)
            p.communicate(timeout=30)
    if name == "xsk-l2":
        p = spawn(binary, ["fwd", "--engine", "xsk", "--mode", "l2", "--cpus", "1", "--netns", f, "-i", bed["iface_fa"],
                           "-i", bed["iface_fb"], "--duration", "600", "--json", "--interval", "100"])
        ready(p)
        try:
            return measure(bed, d, bed["mac_b"], jumbo, True)
        finally:
            p.send_signal(15)
            p.communicate(timeout=30)
    if name == "kernel":
        return measure(bed, d, bed["mac_fa"], jumbo)
    if name == "rxdrop":
        p = fp(["bench", "rxdrop", "--netns", f, "-i", bed["iface_fa"], "--cpu", "1", "--duration", "600", "--json"],
               wait=False)
        ready(p)
        try:
            g = fp(["gen", "--engine", "xsk", "--netns", bed["ns_a"], "-i", bed["iface_a"], "--dst-mac", bed["mac_fa"],
                    "--src-ip", bed["ip4_a"], "--dst-ip", bed["ip4_b"], "--frame-len", "9014", "--cpu", "0",
                    "--duration", str(d), "--json"])
        finally:
            p.send_signal(15)
            out, _ = p.communicate(timeout=30)
        s = last_json(out)
        return s["totals"]["rx_bytes"] * 8 / g["duration_s"] / 1e9, g["totals"]["tx_bytes"] * 8 / g["duration_s"] / 1e9
    if name == "bridge":
        sh("ip", "-n", f, "link", "add", "fwbr0", "type", "bridge")
        try:
            for i in (bed["iface_fa"], bed["iface_fb"]):
                sh("ip", "-n", f, "link", "set", i, "master", "fwbr0")
            sh("ip", "-n", f, "link", "set", "fwbr0", "up")
            time.sleep(0.5)
            return measure(bed, d, bed["mac_b"], jumbo, True)
        finally:
            subprocess.run(["ip", "-n", f, "link", "del", "fwbr0"], capture_output=True)
    sys.exit(f"bench: --forwarders {name!r} is not accepted: use {','.join(FORWARDERS)}")


def one_run(d, names, jumbo=False, baseline=None):
    """One run on a forwarding test bed of its own: {forwarder: (delivered, offered)} for each
    name in `names` (FORWARDERS, and with `jumbo` JUMBO_ONLY): Mpps of 64-byte UDP, or with
    `jumbo` (MTU 9000) Gbit/s of one TCP stream (rxdrop: of UDP)."""
    bed = fp(["testbed", "up", "--fwd", "--json"])
    try:
        pin_napi(bed, bed["iface_fa"], 1)
        if jumbo:
            for ns, i in ((bed["ns_a"], bed["iface_a"]), (bed["ns_f"], bed["iface_fa"]), (bed["ns_f"], bed["iface_fb"]),
                          (bed["ns_b"], bed["iface_b"])):
                sh("ip", "-n", ns, "link", "set", "dev", i, "mtu", "9000")
        out = {}
        for n in names:
            out[n] = run_forwarder(bed, n, d, jumbo)
            if baseline and (n.startswith("xdp-") or n.startswith("xsk-")):
                out[n + " (before)"] = run_forwarder(bed, n, d, jumbo, baseline)
        return out
    finally:
        subprocess.run([FP, "testbed", "down", bed["name"]], capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--forwarders", default=None)
    ap.add_argument("--jumbo", action="store_true")
    ap.add_argument("--baseline", help="an older fastpath binary for before/after rows of fastpath's forwarders")
    a = ap.parse_args()
    known = FORWARDERS + (JUMBO_ONLY if a.jumbo else [])
    names = a.forwarders.split(",") if a.forwarders else known
    for n in names:
        if n not in known:
            sys.exit(f"bench: --forwarders {n!r} is not accepted: use a comma-separated subset of {','.join(known)}")
    if os.geteuid() != 0:
        sys.exit("bench: needs root (network namespaces, XDP)")
    results = []  # per run: {name: (delivered Mpps, offered Mpps)}
    for r in range(a.runs):
        print(f"run {r + 1}/{a.runs} ...", file=sys.stderr, flush=True)
        results.append(one_run(a.duration, names, a.jumbo, a.baseline))
    base = "kernel" if "kernel" in names else None
    unit = "Gbit/s" if a.jumbo else "Mpps"
    head = f"{'forwarder':<14} {'delivered ' + unit:>15}" + ("" if a.jumbo else f" {'offered ' + unit:>13}")
    if base:
        head += "   ratio to kernel forwarding, same run (min/median/max)"
    print(head)
    for n in list(results[0]):
        got = [res[n][0] for res in results]
        off = [res[n][1] for res in results]
        line = f"{n:<14} {statistics.median(got):>15.2f}" + ("" if a.jumbo else f" {statistics.median(off):>13.2f}")
        if n in JUMBO_ONLY:
            # Not TCP through a forwarder: no ratio to the kernel's forwarding.
            line += f"   (UDP; offered {statistics.median(off):.2f} Gbit/s)"
        elif base:
            q = [res[n][0] / res[base][0] for res in results]
            line += f"   {min(q):.2f} / {statistics.median(q):.2f} / {max(q):.2f}"
        if n + " (before)" in results[0]:
            ab = [res[n][0] / res[n + " (before)"][0] for res in results]
            line += f"   after/before {statistics.median(ab):.3f} (runs: {', '.join(f'{x:.3f}' for x in ab)})"
        print(line)
    if a.jumbo:
        print(f"\n{a.runs} runs of {a.duration} s; medians. MTU 9000 on every veth end; one iperf3 TCP stream a -> b "
              f"(client and server on CPU 0); fa's NAPI threaded on CPU 1; xdp-l2/xdp-l3: "
              f"`fastpath fwd --mode l2|l3 -i fa -i fb` (native); xsk-l2: `fastpath fwd --engine xsk --mode l2 --cpus 1` "
              f"(copy mode, multi-buffer); kernel: IP forwarding in f; bridge: fa and fb in a Linux bridge; rxdrop: "
              f"`fastpath gen --engine xsk --frame-len 9014` (UDP, unpaced, CPU 0) into `fastpath bench rxdrop --cpu 1` on fa "
              f"(no TCP; what rxdrop received over the generator's time).")
        return
    print(f"\n{a.runs} runs of {a.duration} s; medians. 64-byte UDP from `fastpath gen --cpu 0` (xdp-live) in ns a; "
          f"fa's NAPI threaded on CPU 1; counted by `fastpath bench xdpdrop` on b. xdp-l2/xdp-l3: "
          f"`fastpath fwd --mode l2|l3 -i fa -i fb` (native); xsk-l2: `fastpath fwd --engine xsk --mode l2 --cpus 1` (copy mode); kernel: net.ipv4.ip_forward=1, no XDP in f; "
          f"bridge: fa and fb in a Linux bridge.")


if __name__ == "__main__":
    main()
