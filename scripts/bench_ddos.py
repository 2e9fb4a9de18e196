#!/usr/bin/env python3
"""The flood scenario's README tables: `fastpath bench ddos --json` run N times (each run builds
its own test bed and measures every defence at every offered rate), then per (defence, rate)
the medians of TCP trans/s, latency, flood sent / reaching the victim / refused, pacing, CPU
shares and the defence's drops; and per defence the survivable flood rate (the highest offered
rate at which the median trans/s is at least half the median no-flood trans/s), with the
per-run survivable rates beside it. One such pair of tables per flood model (per-frame, and
coalesced: adaptive interrupt coalescing on the victim's NAPI with --rx-usecs), each labelled
with its model, then both side by side.

Usage: scripts/bench_ddos.py [--runs 3] [--duration 3] [--flood udp|syn|ack] [--flood-rates LIST]
                             [--defences LIST] [--model per-frame|coalesced|both] [--rx-usecs US]
                             [--flood-sources N] [--svg FILE] [--json FILE]   (root)
"""
import argparse
import json
import statistics
import sys

from fplib import fp


def ddos_args(d, flood, rates, defences, model="both", rx_usecs=None, sources=None):
    """The `fastpath bench ddos` arguments of one run (`sources`: --flood-sources, else its default)."""
    return (["bench", "ddos", "--flood", flood, "--duration", str(d), "--flood-rates", rates, "--defences", defences,
             "--model", model] + (["--rx-usecs", str(rx_usecs)] if rx_usecs is not None else [])
            + (["--flood-sources", str(sources)] if sources is not None else []) + ["--json"])


def one_run(d, flood, rates, defences, svg=None, model="both", rx_usecs=None, sources=None):
    """One `fastpath bench ddos --json` run (its own test bed, every defence at every rate, in
    each model): its JSON summary. `svg`: also write the chart there (replacing the file)."""
    return fp(ddos_args(d, flood, rates, defences, model, rx_usecs, sources)
              + (["--svg", svg, "--overwrite"] if svg else []))


def model_of(x):
    """A phase's or survivable entry's model; runs made before the coalesced model had only the
    per-frame one."""
    return x.get("model", "per-frame")


def models(run):
    """[(model name, its description or None, its no-flood trans/s)] of one run, in order."""
    if "models" in run:
        return [(m["model"], m["description"], m["no_flood_transactions_per_s"]) for m in run["models"]]
    return [("per-frame", None, run["no_flood_transactions_per_s"])]


def of_model(run, model):
    """The run with only `model`'s phases and survivable rates, and that model's no-flood trans/s."""
    base = next(b for m, _, b in models(run) if m == model)
    return dict(run, no_flood_transactions_per_s=base,
                phases=[p for p in run["phases"] if model_of(p) == model],
                survivable=[s for s in run["survivable"] if model_of(s) == model])


def med(values):
    """Median of the values that are not None (an unreachable service has no latency)."""
    v = [x for x in values if x is not None]
    return statistics.median(v) if v else None


def num(v, fmt):
    return "-" if v is None else format(v, fmt)


def table(runs, cmd):
    """The Markdown lines of the README's tables for `runs` (one_run() summaries) made by `cmd`:
    per (defence, rate) medians, then the survivable rate per defence with the per-run rates.
    Runs with the connect probe (`connects_attempted`) get its two columns: the share of its
    new connections that succeeded and their p99 connect time, medians."""
    out = []
    probe = all("connects_attempted" in p for r in runs for p in r["phases"])
    base = med(r["no_flood_transactions_per_s"] for r in runs)
    per_run = "; ".join(f"{r['no_flood_transactions_per_s']:,.0f}" for r in runs)
    out.append(f"`{cmd}`, medians of {len(runs)} runs; no flood: {base:,.0f} TCP trans/s (per run: {per_run})\n")
    out.append("| defence | offered | TCP trans/s | p50 us | p99 us | p99.9 us | sent/s | reached the victim/s "
               "| refused by the veth /s | paced (1 ms windows within 20%) | service CPU softirq % | NAPI thread % "
               "| dropped by the defence /s |" + (" new connections | connect p99 ms (connected) |" if probe else ""))
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if probe else ""))
    keys = [(p["defence"], p["offered"]) for p in runs[0]["phases"] if p["offered"]]
    tab = {}
    for d, o in keys:
        ph = [next(p for p in r["phases"] if p["defence"] == d and p["offered"] == o) for r in runs]
        g = lambda k: med(p[k] for p in ph)  # noqa: E731
        secs = [p["flood_sent"] / p["flood_sent_pps"] if p["flood_sent_pps"] else 1 for p in ph]
        refused = med(p["flood_refused"] / s for p, s in zip(ph, secs))
        dropped = med(p["dropped_by_defence"] / s for p, s in zip(ph, secs))
        paced = [p["paced_windows_within_20pct"] for p in ph if p["paced_windows_within_20pct"] is not None]
        tab[(d, o)] = (g("offered_pps"), g("transactions_per_s"))
        unreachable = sum(1 for p in ph if p["transactions_per_s"] == 0)
        tps = num(g("transactions_per_s"), ",.0f") + (f" ({unreachable} of {len(ph)} unreachable)" if unreachable else "")
        out.append(f"| {d} | {o} | {tps} | {num(g('latency_p50_us'), '.1f')} | "
                   f"{num(g('latency_p99_us'), '.1f')} | {num(g('latency_p999_us'), '.1f')} | {g('flood_sent_pps'):,.0f} | "
                   f"{g('reaching_victim_pps'):,.0f} | {refused:,.0f} | "
                   f"{f'{100 * med(paced):.0f}%' if paced else '-'} | {g('service_cpu_softirq_pct'):.0f} | "
                   f"{g('napi_thread_cpu_pct'):.0f} | {dropped:,.0f} |"
                   + (f" {med(p['connects_succeeded'] for p in ph):.0f}/{max(p['connects_attempted'] for p in ph)} | "
                      f"{num(g('connect_p99_ms'), ',.1f')} |" if probe else ""))
    out.append(f"\n{len(runs)} runs:\n")
    out.append("| defence | survivable flood rate (medians) | per run |")
    out.append("|---|---|---|")
    for d in dict.fromkeys(d for d, _ in keys):
        # As `bench ddos` defines it: the highest offered rate keeping half the no-flood trans/s.
        ok = [(pps, o) for (dd, o), (pps, tps) in tab.items() if dd == d and tps >= 0.5 * base]
        best = max(ok)[1] if ok else f"below {keys[0][1]}"
        per = [next((s["survivable"] for s in r["survivable"] if s["defence"] == d), None) or "-" for r in runs]
        out.append(f"| {d} | {best} | {'; '.join(per)} |")
    return out


def tables(runs, cmd):
    """Every model's tables (table()), each under a line naming its model, then (with both) the
    models side by side: per defence and rate the median trans/s as % of the model's median
    no-flood trans/s and the median NAPI thread CPU %, and the survivable rates."""
    if "models" not in runs[0]:
        return table(runs, cmd)  # runs made before the coalesced model: the per-frame one alone
    out = []
    names = [m for m, _, _ in models(runs[0])]
    for m in names:
        desc = next(d for mm, d, _ in models(runs[0]) if mm == m)
        # The description begins "<model> model: ...".
        desc = (desc or "").removeprefix(f"{m} model: ")
        out.append(f"**{m} model**" + (f": {desc}" if desc else "") + "\n")
        out += table([of_model(r, m) for r in runs], cmd)
        out.append("")
    if len(names) < 2:
        return out
    per = {m: [of_model(r, m) for r in runs] for m in names}
    base = {m: med(r["no_flood_transactions_per_s"] for r in per[m]) for m in names}
    out.append(f"Both models side by side, medians of {len(runs)} runs: TCP trans/s as % of the model's no-flood "
               "trans/s (" + ", ".join(f"{m}: {base[m]:,.0f}" for m in names) + "), the NAPI thread's CPU %, "
               "and the survivable flood rate.\n")
    out.append("| defence | offered | " + " | ".join(f"trans/s % ({m})" for m in names) + " | "
               + " | ".join(f"NAPI thread % ({m})" for m in names) + " |")
    out.append("|---|---|" + "---|" * (2 * len(names)))
    keys = [(p["defence"], p["offered"]) for p in per[names[0]][0]["phases"] if p["offered"]]

    def cell(m, d, o, k):
        ph = [p for r in per[m] for p in r["phases"] if p["defence"] == d and p["offered"] == o]
        return med(p[k] for p in ph) if ph else None
    for d, o in keys:
        tps = [num(None if cell(m, d, o, "transactions_per_s") is None
                   else 100 * cell(m, d, o, "transactions_per_s") / base[m], ".0f") for m in names]
        napi = [num(cell(m, d, o, "napi_thread_cpu_pct"), ".0f") for m in names]
        out.append(f"| {d} | {o} | " + " | ".join(tps) + " | " + " | ".join(napi) + " |")
    out.append("")
    out.append("| defence | " + " | ".join(f"survivable ({m}, per run)" for m in names) + " |")
    out.append("|---|" + "---|" * len(names))
    for d in dict.fromkeys(d for d, _ in keys):
        per_m = ["; ".join(next((s["survivable"] for s in r["survivable"] if s["defence"] == d), None) or "-"
                           for r in per[m]) for m in names]
        out.append(f"| {d} | " + " | ".join(per_m) + " |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--flood", default="udp", choices=["udp", "syn", "ack"])
    ap.add_argument("--flood-rates", default="25k,50k,100k,250k,1M,2M,max")
    ap.add_argument("--defences", default="none,nft,iptables,fastpath,fastpath-10k")
    ap.add_argument("--model", default="both", choices=["per-frame", "coalesced", "both"])
    ap.add_argument("--rx-usecs", type=int, help="the coalesced model's rx-usecs (default: fastpath's)")
    ap.add_argument("--flood-sources", type=int, help="spoofed sources of the flood (default: fastpath's, 65536)")
    ap.add_argument("--svg", help="the last run's chart (trans/s against offered rate)")
    ap.add_argument("--json", help="write every run's summary to this file")
    a = ap.parse_args()
    runs = []
    for r in range(a.runs):
        print(f"run {r + 1}/{a.runs} ...", file=sys.stderr, flush=True)
        svg = a.svg if a.svg and r == a.runs - 1 else None
        runs.append(one_run(a.duration, a.flood, a.flood_rates, a.defences, svg, a.model, a.rx_usecs, a.flood_sources))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(runs, f)
    print(f"{runs[0]['model']}\n")
    cmd = "fastpath " + " ".join(ddos_args(a.duration, a.flood, a.flood_rates, a.defences, a.model, a.rx_usecs,
                                           a.flood_sources))
    print("\n".join(tables(runs, cmd)))


if __name__ == "__main__":
    main()
