#!/usr/bin/env python3
"""The flood scenario's README tables: `fastpath bench ddos --json` run N times (each run builds
its own test bed and measures every defence at every offered rate), then per (defence, rate)
the medians of TCP trans/s, latency, flood sent / reaching the victim / refused, pacing, CPU
shares and the defence's drops; and per defence the survivable flood rate (the highest offered
rate at which the median trans/s is at least half the median no-flood trans/s), with the
per-run survivable rates beside it.

Usage: scripts/bench_ddos.py [--runs 3] [--duration 3] [--flood udp|syn] [--flood-rates LIST]
                             [--defences LIST] [--svg FILE] [--json FILE]   (root)
"""
import argparse
import json
import statistics
import sys

import fplib
from fplib import fp


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--flood", default="udp", choices=["udp", "syn"])
    ap.add_argument("--flood-rates", default="25k,50k,100k,250k,1M,2M,max")
    ap.add_argument("--defences", default="none,nft,iptables,fastpath,fastpath-10k")
    ap.add_argument("--svg", help="the last run's chart (trans/s against offered rate)")
    ap.add_argument("--json", help="write every run's summary to this file")
    a = ap.parse_args()
    args = ["bench", "ddos", "--flood", a.flood, "--duration", str(a.duration), "--flood-rates", a.flood_rates,
            "--defences", a.defences, "--json"]
    runs = []
    for r in range(a.runs):
        print(f"run {r + 1}/{a.runs} ...", file=sys.stderr, flush=True)
        extra = ["--svg", a.svg, "--overwrite"] if a.svg and r == a.runs - 1 else []
        runs.append(fp(args + extra))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(runs, f)

    def med(values):
        """Median of the values that are not None (an unreachable service has no latency)."""
        v = [x for x in values if x is not None]
        return statistics.median(v) if v else None

    def num(v, fmt):
        return "-" if v is None else format(v, fmt)

    base = med(r["no_flood_transactions_per_s"] for r in runs)
    cmd = "fastpath " + " ".join(args)
    print(f"{runs[0]['model']}\n")
    per_run = ", ".join(f"{r['no_flood_transactions_per_s']:,.0f}" for r in runs)
    print(f"`{cmd}`, medians of {len(runs)} runs; no flood: {base:,.0f} TCP trans/s (runs: {per_run})\n")
    print("| defence | offered | TCP trans/s | p50 us | p99 us | p99.9 us | sent/s | reached the victim/s "
          "| refused by the veth /s | paced (1 ms windows within 20%) | service CPU softirq % | NAPI thread % "
          "| dropped by the defence /s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    keys = [(p["defence"], p["offered"]) for p in runs[0]["phases"] if p["offered"]]
    table = {}
    for d, o in keys:
        ph = [next(p for p in r["phases"] if p["defence"] == d and p["offered"] == o) for r in runs]
        g = lambda k: med(p[k] for p in ph)  # noqa: E731
        secs = [p["flood_sent"] / p["flood_sent_pps"] if p["flood_sent_pps"] else 1 for p in ph]
        refused = med(p["flood_refused"] / s for p, s in zip(ph, secs))
        dropped = med(p["dropped_by_defence"] / s for p, s in zip(ph, secs))
        paced = [p["paced_windows_within_20pct"] for p in ph if p["paced_windows_within_20pct"] is not None]
        table[(d, o)] = (g("offered_pps"), g("transactions_per_s"))
        unreachable = sum(1 for p in ph if p["transactions_per_s"] == 0)
        tps = num(g("transactions_per_s"), ",.0f") + (f" ({unreachable} of {len(ph)} unreachable)" if unreachable else "")
        print(f"| {d} | {o} | {tps} | {num(g('latency_p50_us'), '.1f')} | "
              f"{num(g('latency_p99_us'), '.1f')} | {num(g('latency_p999_us'), '.1f')} | {g('flood_sent_pps'):,.0f} | "
              f"{g('reaching_victim_pps'):,.0f} | {refused:,.0f} | "
              f"{f'{100 * med(paced):.0f}%' if paced else '-'} | {g('service_cpu_softirq_pct'):.0f} | "
              f"{g('napi_thread_cpu_pct'):.0f} | {dropped:,.0f} |")
    print("\n| defence | survivable flood rate (medians) | per run |")
    print("|---|---|---|")
    for d in dict.fromkeys(d for d, _ in keys):
        ok = [(pps, o) for (dd, o), (pps, tps) in table.items() if dd == d and tps >= 0.5 * base]
        best = max(ok)[1] if ok else f"below {keys[0][1]}"
        per_run = [next((s["survivable"] for s in r["survivable"] if s["defence"] == d), None) or "-" for r in runs]
        print(f"| {d} | {best} | {', '.join(per_run)} |")


if __name__ == "__main__":
    main()
