#!/usr/bin/env python3
"""fastpath side by side with the tools users run today (issue 22): on one test bed, one
generator (`fastpath gen --engine xdp-live --cpu 0`, 64-byte UDP), every receiver pinned to
CPU 1, N runs, medians; each row with the peer's exact command line and version, its rate, its
ratio to fastpath's in-kernel XDP_DROP in the same run, and fastpath / peer.

Rows: xdpdrop (the reference) and xdp-bench drop; rxdrop (AF_XDP, native, copy) and testpmd
rxonly over net_af_xdp (busy_budget default, and busy_budget=0); rxdrop --path tpacket and
testpmd rxonly over net_af_packet; fastpath gen and xdp-trafficgen (each counted by XDP_DROP at
the receiver). A peer that is missing or fails is a row that says why (its first error line),
never a gap; with CI=true a missing peer fails the script.

Usage: scripts/bench_peers.py [--runs 3] [--duration 3]   (root; dpdk-dev and xdp-tools: make deps)
"""
import argparse, os, re, shutil, signal, statistics, subprocess, sys, time

import fplib
from fplib import fp, last_json, ready

CPU_GEN, CPU_RX = 0, 1


def version(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True)
    return r.stdout.strip() or "not installed"


def ns_exec(ns, args):
    return ["ip", "netns", "exec", ns] + args


def gen(bed, d):
    """The one generator of every row: (frames sent, seconds)."""
    g = fp(["gen", "--engine", "xdp-live", "--netns", bed["ns_a"], "-i", bed["iface_a"], "--cpu", str(CPU_GEN),
            "--dst-mac", bed["mac_b"], "--duration", str(d), "--json"])
    return g["totals"]["tx_packets"], g["duration_s"]


def fastpath_rx(bed, d, args, key):
    """A fastpath receiver on CPU 1 in ns b; its `key` counter per generator second (Mpps)."""
    p = fp(args + ["--netns", bed["ns_b"], "-i", bed["iface_b"], "--duration", "600", "--json", "--interval", "100"],
           wait=False)
    ready(p)
    try:
        _, secs = gen(bed, d)
        time.sleep(0.3)
    finally:
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
    return last_json(out)["totals"][key] / secs / 1e6


def testpmd_cmd(bed, vdev, run, mode="rxonly", extra=()):
    return ["dpdk-testpmd", "-l", f"{CPU_GEN},{CPU_RX}", "--main-lcore", str(CPU_GEN), "--no-huge", "--no-pci",
            "-m", "1024", "--file-prefix", f"fpbench{os.getpid()}{run}", "--vdev", vdev, "--",
            f"--forward-mode={mode}", "--nb-cores", "1", "--total-num-mbufs", "16384", "--stats-period", "1"] + list(extra)


RX_PACKETS = re.compile(r"RX-packets:\s+(\d+)")


def rx_packets_in(path):
    with open(path, errors="replace") as f:
        found = RX_PACKETS.findall(f.read())
    return int(found[-1]) if found else None


def testpmd_rx(bed, d, vdev, run):
    """testpmd rxonly on CPU 1 (its main lcore on CPU 0) in ns b: RX-packets (port statistics,
    printed each second) gained while the generator ran, per generator second (Mpps)."""
    p, log, _ = testpmd_run(bed["ns_b"], testpmd_cmd(bed, vdev, run), 0)
    try:
        before = rx_packets_in(log)
        _, secs = gen(bed, d)
        time.sleep(1.5)  # one more statistics period
        return (rx_packets_in(log) - before) / secs / 1e6
    finally:
        stop_testpmd(p, log)


def first_error(path_or_text, is_path=True):
    """The line that says why a peer failed: a missing kernel BTF type (a program of the peer
    the kernel cannot load: xdp-tools 1.3.1 on Linux >= 6.x, whose objects carry a tp_btf
    program for the removed xdp_redirect_map_err tracepoint) before any other error line."""
    text = open(path_or_text, errors="replace").read() if is_path else path_or_text
    lines = [l.strip() for l in text.splitlines() if re.search(r"error|fail|cannot|refus", l, re.I)]
    return next((l for l in lines if "kernel BTF" in l), lines[0] if lines else None)


def xdp_tool(bed, ns, args, secs):
    """An xdp-tools program in `ns` for `secs` seconds (bpffs mounted there first: `ip netns
    exec` remounts /sys); raises with its first error line if it exits early."""
    sh = f"mount -t bpf bpf /sys/fs/bpf 2>/dev/null; exec {' '.join(args)}"
    p = subprocess.Popen(ns_exec(ns, ["sh", "-c", sh]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(1.5)
    if p.poll() is not None:
        out = p.stdout.read()
        raise RuntimeError(first_error(out, False) or out.strip().splitlines()[-1])
    return p


def xdp_bench_drop(bed, d):
    p = xdp_tool(bed, bed["ns_b"], ["xdp-bench", "drop", bed["iface_b"], "-i", "1"], d)
    try:
        _, secs = gen(bed, d)
    finally:
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=20)
    m = re.findall(r"rx_XDP_DROP\s+([\d,]+)\s+pkt", out) or re.findall(r"([\d,]+) pkt/s", out)
    if not m:
        raise RuntimeError("xdp-bench printed no rate: " + out.strip().splitlines()[-1])
    return max(int(x.replace(",", "")) for x in m) / 1e6


def trafficgen(bed, d):
    """xdp-trafficgen udp, 1 thread, in ns a for d seconds; counted by fastpath xdpdrop in b."""
    rx = fp(["bench", "xdpdrop", "--netns", bed["ns_b"], "-i", bed["iface_b"], "--duration", "600", "--json",
             "--interval", "100"], wait=False)
    ready(rx)
    try:
        p = xdp_tool(bed, bed["ns_a"], ["xdp-trafficgen", "udp", bed["iface_a"], "-m", bed["mac_b"], "-t", "1"], d)
        t0 = time.time()
        time.sleep(d)
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=20)
        secs = time.time() - t0
        time.sleep(0.3)
    finally:
        rx.send_signal(signal.SIGTERM)
        out, _ = rx.communicate(timeout=30)
    return last_json(out)["totals"]["drop_packets"] / secs / 1e6


class Sink:
    """fastpath xdpdrop on (ns, iface): counts what arrives there (the independent counter of
    the TX and forwarding rows)."""

    def __init__(self, ns, iface):
        self.p = fp(["bench", "xdpdrop", "--netns", ns, "-i", iface, "--duration", "600", "--json", "--interval",
                     "100"], wait=False)
        ready(self.p)

    def stop(self):
        time.sleep(0.3)
        self.p.send_signal(signal.SIGTERM)
        out, _ = self.p.communicate(timeout=30)
        return last_json(out)["totals"]["drop_packets"]


def testpmd_run(ns, cmd, secs):
    """testpmd in `ns` for `secs` seconds once its port is up (its first statistics); the
    seconds it ran after that."""
    log = f"/tmp/fastpath-peers-{os.getpid()}.log"
    with open(log, "w") as out:
        p = subprocess.Popen(ns_exec(ns, cmd), stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 20
        while rx_packets_in(log) is None:
            if p.poll() is not None or time.time() > deadline:
                raise RuntimeError(first_error(log) or "testpmd printed no port statistics")
            time.sleep(0.2)
        t0 = time.time()
        time.sleep(secs)
        return p, log, t0
    except BaseException:
        stop_testpmd(p, log)
        raise


def stop_testpmd(p, log):
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    try:
        os.unlink(log)
    except OSError:
        pass


def txonly_fastpath(bed, d):
    sink = Sink(bed["ns_b"], bed["iface_b"])
    try:
        t = fp(["bench", "txonly", "--netns", bed["ns_a"], "-i", bed["iface_a"], "--dst-mac", bed["mac_b"], "--cpu",
                str(CPU_RX), "--duration", str(d), "--json"])
    finally:
        n = sink.stop()
    return n / t["duration_s"] / 1e6


def txonly_testpmd(bed, d, run):
    sink = Sink(bed["ns_b"], bed["iface_b"])
    try:
        cmd = testpmd_cmd(bed, f"net_af_xdp0,iface={bed['iface_a']},start_queue=0,queue_count=1", run, "txonly",
                          [f"--eth-peer=0,{bed['mac_b']}"])
        p, log, t0 = testpmd_run(bed["ns_a"], cmd, d)
        stop_testpmd(p, log)
        secs = time.time() - t0
    finally:
        n = sink.stop()
    return n / secs / 1e6


def l2fwd(bed, d, run, peer):
    """Frames from the generator in a, swapped and sent back by the forwarder in b, counted
    by a sink in a, per generator second."""
    sink = Sink(bed["ns_a"], bed["iface_a"])
    try:
        if peer:
            cmd = testpmd_cmd(bed, f"net_af_xdp0,iface={bed['iface_b']},start_queue=0,queue_count=1", run, "macswap")
            p, log, _ = testpmd_run(bed["ns_b"], cmd, 0)
            try:
                _, secs = gen(bed, d)
            finally:
                stop_testpmd(p, log)
        else:
            f = fp(["bench", "l2fwd", "--xdp-mode", "native", "--cpu", str(CPU_RX), "--netns", bed["ns_b"], "-i",
                    bed["iface_b"], "--duration", "600", "--json", "--interval", "100"], wait=False)
            ready(f)
            try:
                _, secs = gen(bed, d)
            finally:
                f.send_signal(signal.SIGTERM)
                f.communicate(timeout=30)
    finally:
        n = sink.stop()
    return n / secs / 1e6


def rows(bed, d, run):
    b = bed["iface_b"]
    xdp = f"net_af_xdp0,iface={b},start_queue=0,queue_count=1"
    return [
        ("xdpdrop", "fastpath", "fastpath bench xdpdrop",
         lambda: fastpath_rx(bed, d, ["bench", "xdpdrop"], "drop_packets")),
        ("xdpdrop", "xdp-bench", "xdp-bench drop IFACE -i 1", lambda: xdp_bench_drop(bed, d)),
        ("rxdrop af_xdp", "fastpath", f"fastpath bench rxdrop --xdp-mode native --copy-mode copy --cpu {CPU_RX}",
         lambda: fastpath_rx(bed, d, ["bench", "rxdrop", "--xdp-mode", "native", "--copy-mode", "copy", "--cpu",
                                      str(CPU_RX)], "rx_packets")),
        ("rxdrop af_xdp", "testpmd", " ".join(testpmd_cmd(bed, xdp, "R")), lambda: testpmd_rx(bed, d, xdp, run)),
        ("rxdrop af_xdp", "testpmd busy_budget=0", " ".join(testpmd_cmd(bed, xdp + ",busy_budget=0", "R")),
         lambda: testpmd_rx(bed, d, xdp + ",busy_budget=0", run)),
        ("rxdrop af_packet", "fastpath", f"fastpath bench rxdrop --path tpacket --cpu {CPU_RX}",
         lambda: fastpath_rx(bed, d, ["bench", "rxdrop", "--path", "tpacket", "--cpu", str(CPU_RX)], "rx_packets")),
        ("rxdrop af_packet", "testpmd", " ".join(testpmd_cmd(bed, f"net_af_packet0,iface={b}", "R")),
         lambda: testpmd_rx(bed, d, f"net_af_packet0,iface={b}", run)),
        ("txonly af_xdp", "fastpath", f"fastpath bench txonly --dst-mac MAC_B --cpu {CPU_RX} (ns a; counted by "
         "fastpath xdpdrop in b)", lambda: txonly_fastpath(bed, d)),
        ("txonly af_xdp", "testpmd", " ".join(testpmd_cmd(bed, f"net_af_xdp0,iface={bed['iface_a']},start_queue=0,"
                                                          "queue_count=1", "R", "txonly", ["--eth-peer=0,MAC_B"])),
         lambda: txonly_testpmd(bed, d, run)),
        ("l2fwd af_xdp", "fastpath", f"fastpath bench l2fwd --xdp-mode native --cpu {CPU_RX} (counted back in a)",
         lambda: l2fwd(bed, d, run, False)),
        ("l2fwd af_xdp", "testpmd macswap", " ".join(testpmd_cmd(bed, xdp, "R", "macswap")),
         lambda: l2fwd(bed, d, run, True)),
        ("generator", "xdp-trafficgen", "xdp-trafficgen udp IFACE -m MAC -t 1 (counted by fastpath xdpdrop)",
         lambda: trafficgen(bed, d)),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_peers: needs root (network namespaces, XDP, AF_XDP)")
    missing = [t for t in ("dpdk-testpmd", "xdp-bench", "xdp-trafficgen") if not shutil.which(t)]
    if missing and os.environ.get("CI") == "true":
        sys.exit(f"bench_peers: {', '.join(missing)} missing (make deps installs dpdk-dev and xdp-tools)")
    versions = {"testpmd": f"dpdk-dev {version('dpdk-dev')}", "xdp-bench": f"xdp-tools {version('xdp-tools')}",
                "xdp-trafficgen": f"xdp-tools {version('xdp-tools')}", "fastpath": "this build"}
    results = []  # per run: {(row, who): Mpps or error string}
    for r in range(a.runs):
        print(f"run {r + 1}/{a.runs} ...", file=sys.stderr, flush=True)
        bed = fp(["testbed", "up", "--json"])
        res, cmds = {}, {}
        try:
            for row, who, cmd, measure in rows(bed, a.duration, r):
                cmds[(row, who)] = cmd
                tool = who.split()[0]
                if tool != "fastpath" and not shutil.which("dpdk-testpmd" if tool == "testpmd" else tool):
                    res[(row, who)] = f"not installed ({versions.get(tool, tool)})"
                    continue
                try:
                    res[(row, who)] = measure()
                except (RuntimeError, KeyError, subprocess.SubprocessError, SystemExit) as e:
                    res[(row, who)] = f"failed: {e}"
        finally:
            subprocess.run([fplib.FP, "testbed", "down", bed["name"]], capture_output=True)
        results.append(res)
    # Gen: fastpath's own generator rate is what xdpdrop received in the xdpdrop row.
    print(f"{'row':<18} {'who':<24} {'Mpps median':>11} {'of XDP_DROP':>11} {'fastpath/peer':>13}  version")
    for key in results[0]:
        row, who = key
        vals = [res[key] for res in results]
        nums = [v for v in vals if isinstance(v, float)]
        tool = who.split()[0]
        if not nums:
            print(f"{row:<18} {who:<24} {'-':>11} {'-':>11} {'-':>13}  {versions.get(tool, '')}: {vals[0]}")
            continue
        ref = [res[("xdpdrop", "fastpath")] for res in results if isinstance(res[key], float)]
        ratio = statistics.median(n / x for n, x in zip(nums, ref))
        fp_key = (row, "fastpath") if (row, "fastpath") in results[0] else ("xdpdrop", "fastpath")
        vs = "-"
        if who != "fastpath":
            q = [res[fp_key] / res[key] for res in results if isinstance(res[key], float) and res[key] > 0]
            vs = f"{statistics.median(q):.2f}x" if q else "-"
        print(f"{row:<18} {who:<24} {statistics.median(nums):>11.2f} {ratio:>11.2f} {vs:>13}  {versions.get(tool, '')}")
    print(f"\n{a.runs} runs of {a.duration} s on a test bed each; 64-byte UDP from `fastpath gen --engine xdp-live "
          f"--cpu {CPU_GEN}` in ns a (xdp-trafficgen's row: its own generator instead); receivers on CPU {CPU_RX} in ns b.")
    print("command lines:")
    for key, cmd in cmds.items():
        print(f"  {key[0]:<18} {key[1]:<24} {cmd}")


if __name__ == "__main__":
    main()
