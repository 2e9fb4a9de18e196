#!/usr/bin/env python3
"""Per-frame cost of the xdp_fwd program, L3 with the FIB cache, 64-byte UDP a -> b for 3 s on a
forwarding test bed (fa's NAPI on CPU 1): kernel.bpf_stats_enabled's run_time_ns / run_cnt of
the forwarder's XDP program (read from its fdinfo; the statistics add ~50 ns of their own).
Precise where Mpps are noisy: run it for two builds in turn to compare them.

Usage: FASTPATH=path/to/fastpath scripts/fwd_cost.py   (root)"""
import os, sys, time, glob, json, subprocess
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fplib import FP, fp, ready
import bench_fwd
bed = fp(["testbed", "up", "--fwd", "--json"])
try:
    bench_fwd.pin_napi(bed, bed["iface_fa"], 1)
    f = bed["ns_f"]
    p = fp(["fwd", "--netns", f, "-i", bed["iface_fa"], "-i", bed["iface_fb"], "--mode", "l3", "--duration", "600", "--json", "--interval", "100"], wait=False)
    ready(p)
    open("/proc/sys/kernel/bpf_stats_enabled", "w").write("1")
    def stats():
        t = c = 0
        for fd in glob.glob(f"/proc/{p.pid}/fdinfo/*"):
            try:
                txt = open(fd).read()
            except OSError:
                continue
            if "prog_type:\t6" in txt:
                d = dict(l.split(":\t", 1) for l in txt.splitlines() if ":\t" in l)
                t += int(d.get("run_time_ns", 0)); c += int(d.get("run_cnt", 0))
        return t, c
    t0, c0 = stats()
    fp(["gen", "--netns", bed["ns_a"], "-i", bed["iface_a"], "--cpu", "0", "--duration", "3", "--dst-mac", bed["mac_fa"],
        "--src-ip", bed["ip4_a"], "--dst-ip", bed["ip4_b"], "--json"])
    t1, c1 = stats()
    open("/proc/sys/kernel/bpf_stats_enabled", "w").write("0")
    p.send_signal(15); p.communicate(timeout=30)
    print(f"{os.environ.get('FASTPATH')}: {(t1-t0)/max(1,c1-c0):.1f} ns/frame over {c1-c0} frames")
finally:
    subprocess.run([FP, "testbed", "down", bed["name"]], capture_output=True)
