#!/usr/bin/env python3
"""Every figure of the README, in one sitting: the receive/transmit matrix (scripts/bench.py),
the classifier (scripts/bench_classifier.py), `fastpath compare` (split and same),
`fastpath compare --inject` and the demo's AF_XDP rxdrop vs XDP_DROP (the flood scenario has
its own script, scripts/bench_ddos.py).
Writes Markdown tables (each with the command that made it) and a JSON file of every
measurement.

One XDP_DROP reference. Several sections measure in-kernel XDP_DROP on the same set-up
(xdp-live generator, one thread on CPU 0, 64-byte UDP, one veth queue, XDP_DROP native on the
receiving veth). Every one of those measurements is pooled, and the XDP_DROP row of every table
shows the same figure: the median of the pool for that set-up ("split" or "same"). Every other
path's ratio is the median over runs of (path / XDP_DROP measured side by side in the same run),
so the ratios do not depend on how busy the machine was between sections.

Resumable: after each step the state goes to --state (default docs/figures.state.json); run the
same command again to continue where it stopped (--fresh starts over). Progress and the
estimated time left go to stderr.

Usage: scripts/figures.py [--runs 5] [--duration 5] [--quick] [--out docs/figures]   (root;
`make figures`)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import bench_classifier  # noqa: E402
from fplib import FP, fp  # noqa: E402

SECTIONS = ["matrix", "classifier", "compare_split", "compare_same", "demo", "inject"]


def estimate(section, d, sizes):
    """Rough seconds one run of a section takes (set-up costs measured on a 2-vCPU VM)."""
    return {
        "matrix": 11 * (d + 2.5),
        "classifier": (3 + len(sizes)) * (d + 3) + 3 * max(0, len(str(max(sizes))) - 4),
        "compare_split": 7 * (d + 1.5) + 2,
        "compare_same": 7 * (d + 1.5) + 2,
        "demo": 2 * (d + 1) + 1,
        "inject": 2 * (2 * d + 5),
    }[section]


def run_section(section, d, sizes, tmp):
    """One run of one section; returns its measurements (JSON-able)."""
    if section == "matrix":
        return {k: {"mpps": v["mpps"], "cmd": v["cmd"], "refused": v["refused"]} for k, v in bench.one_run(d).items()}
    if section == "classifier":
        bed = fp(["testbed", "up", "--json"])
        try:
            res = {"xdp_drop": bench_classifier.drop_rate_xdpdrop(bed, d)}
            for n in sizes:
                res[f"classifier {n} rules"] = bench_classifier.drop_rate_classifier(bed, d, f"{tmp}/drop{n}.toml")
            res["rxdrop minimal redirect"] = bench_classifier.rxdrop_rate(bed, d, [])
            res["rxdrop behind classifier (100 rules)"] = bench_classifier.rxdrop_rate(
                bed, d, ["--rules", f"{tmp}/xsk100.toml"])
            return res
        finally:
            subprocess.run([FP, "testbed", "down", bed["name"]], capture_output=True)
    if section.startswith("compare_"):
        pin = section.split("_")[1]
        return fp(["compare", "--runs", "1", "--duration", str(d), "--pin", pin, "--json"])
    if section == "demo":
        return fp(["demo", "--duration", str(d), "--json"])
    if section == "inject":
        return fp(["compare", "--inject", "--runs", "1", "--duration", str(d), "--json"])
    raise ValueError(section)


def med(v):
    return statistics.median(v) if v else float("nan")


def mmm(v):
    return f"{min(v):.2f} / {statistics.median(v):.2f} / {max(v):.2f}" if v else "-"


def xdp_drop_pool(state):
    """Every XDP_DROP measurement of the sitting, per set-up, with where it came from."""
    pool = {"split": [], "same": []}
    for r in state["runs"]:
        if "matrix" in r:
            pool["split"].append(("bench.py xdpdrop split", r["matrix"]["xdpdrop split"]["mpps"]))
            pool["same"].append(("bench.py xdpdrop same", r["matrix"]["xdpdrop same"]["mpps"]))
        if "classifier" in r:
            pool["split"].append(("bench_classifier.py xdp_drop", r["classifier"]["xdp_drop"]))
        for pin in ("split", "same"):
            c = r.get(f"compare_{pin}")
            if c:
                row = next(x for x in c["rows"] if "XDP_DROP" in x["path"])
                pool[pin].append((f"compare --pin {pin}", row["mpps_median"]))
        if "demo" in r:
            row = next(x for x in r["demo"]["rows"] if x["path"].startswith("XDP_DROP"))
            pool["split"].append(("demo XDP_DROP", row["received_mpps"]))
    return pool


def tables(state):
    """The Markdown text of every table, and a summary dict for the JSON."""
    a = state["args"]
    runs = state["runs"]
    d, n = a["duration"], len(runs)
    pool = xdp_drop_pool(state)
    ref = {k: med([x[1] for x in v]) for k, v in pool.items()}
    out = [f"# fastpath figures\n",
           f"Made by `scripts/figures.py --runs {a['runs']} --duration {d}{' --quick' if a['quick'] else ''}` "
           f"in one sitting ({state['started']} to {state.get('finished', 'unfinished')}), "
           f"{n} run(s) of every section, on: {state['machine']}.\n",
           "Set-up: two network namespaces joined by a veth pair, one queue, 64-byte UDP frames from the "
           "xdp-live generator (one thread on CPU 0) unless a table says otherwise; every AF_XDP figure is "
           "copy mode (veth has no zero-copy). **split**: the receiving veth's NAPI runs in the generator's "
           "softirq on CPU 0, the application on CPU 1. **same**: threaded NAPI pinned to CPU 1 with the "
           "application (which waits in poll()).\n",
           "**The XDP_DROP reference.** Every table below that measures XDP_DROP measures it on the same "
           "set-up; all those measurements are pooled and the XDP_DROP row of every table shows the pool's "
           f"median: **split {ref['split']:.2f} Mpps** (median of {len(pool['split'])}), "
           f"**same {ref['same']:.2f} Mpps** (median of {len(pool['same'])}). Every ratio is the median "
           "over runs of the path divided by XDP_DROP measured side by side in the same run.\n",
           "| XDP_DROP measurement (Mpps, per run) | set-up | values |", "|---|---|---|"]
    for pin in ("split", "same"):
        by = {}
        for src, v in pool[pin]:
            by.setdefault(src, []).append(v)
        for src, v in by.items():
            out.append(f"| {src} | {pin} | {', '.join(f'{x:.2f}' for x in v)} |")
    out.append("")
    summary = {"xdp_drop_reference_mpps": ref, "xdp_drop_pool": pool}

    def ratio_row(label, vals, refs, refused=None):
        r = [v / x for v, x in zip(vals, refs) if x > 0]
        extra = f" | {refused}" if refused is not None else ""
        return f"| {label} | {mmm(vals)} | {med(r):.2f}{extra} |", med(r)

    if all("matrix" in r for r in runs):
        out += [f"## AF_XDP paths (`scripts/bench.py --runs 1 --duration {d}`, {n} runs)\n",
                "Mpps min / median / max; txonly and the generator count frames the receiving veth "
                "accepted (`delivered`), the frames it refused are in their own column.\n",
                "| path (64 B) | Mpps min / median / max | ratio to XDP_DROP (median, same run) | refused (median) |",
                "|---|---|---|---|"]
        keys = list(runs[0]["matrix"])
        for k in keys:
            pin = "same" if k.endswith(" same") else "split"
            refs = [r["matrix"][f"xdpdrop {pin}"]["mpps"] for r in runs]
            vals = [r["matrix"][k]["mpps"] for r in runs]
            if k.startswith("xdpdrop"):
                out.append(f"| XDP_DROP, {pin} (reference) | {ref[pin]:.2f} (pooled median) | 1.00 | - |")
                continue
            ref_ = [r["matrix"][k]["refused"] for r in runs]
            refused = f"{med(ref_):,.0f}" if k.startswith(("txonly", "gen")) else "-"
            line, rm = ratio_row(k, vals, refs, refused)
            out.append(line)
            summary.setdefault("matrix", {})[k] = {"mpps": vals, "ratio_median": rm}
        out.append("\nCommand lines (`|` separates receiver and sender):\n\n```")
        out += [f"{k:<28} {runs[0]['matrix'][k]['cmd']}" for k in keys]
        out.append("```\n")

    if all("classifier" in r for r in runs):
        out += [f"## Classifier (`scripts/bench_classifier.py` measurements, --duration {d}, {n} runs)\n",
                "In-kernel drop rate with the generator's frames matching the LAST rule, as a ratio to the "
                "minimal xdp_drop program in the same run; rxdrop behind 100 rules as a ratio to rxdrop behind "
                "the minimal redirect program in the same run.\n",
                "| rules | Mpps min / median / max | ratio (median, same run) |", "|---|---|---|",
                f"| xdp_drop (reference) | {ref['split']:.2f} (pooled median) | 1.00 |"]
        for k in runs[0]["classifier"]:
            if k == "xdp_drop":
                continue
            base = "rxdrop minimal redirect" if k.startswith("rxdrop behind") else "xdp_drop"
            vals = [r["classifier"][k] for r in runs]
            refs = [r["classifier"][base] for r in runs]
            line, rm = ratio_row(k if base == "xdp_drop" else f"{k} (of {base})", vals, refs)
            out.append(line)
            summary.setdefault("classifier", {})[k] = {"mpps": vals, "ratio_median": rm, "of": base}
        out.append("\nCommands: `fastpath gen --cpu 0 --duration D | fastpath bench xdpdrop | fastpath filter load "
                   "RULES --detach | fastpath bench rxdrop --cpu 1 [--rules xsk100.toml]`\n")

    cmp_ok = [p for p in ("split", "same") if all(f"compare_{p}" in r for r in runs)]
    if cmp_ok:
        out += [f"## Every receive path side by side (`fastpath compare --runs 1 --duration {d} --pin P`, {n} runs)\n",
                "| path | " + " | ".join(f"{p} Mpps min / median / max | {p} ratio" for p in cmp_ok) + " |",
                "|---|" + "---|---|" * len(cmp_ok)]
        paths = [x["path"] for x in runs[0][f"compare_{cmp_ok[0]}"]["rows"]]
        for path in paths:
            cells = []
            for p in cmp_ok:
                rows = [next(x for x in r[f"compare_{p}"]["rows"] if x["path"] == path) for r in runs]
                if "XDP_DROP" in path:
                    cells.append(f"{ref[p]:.2f} (pooled median) | 1.00")
                    continue
                vals = [x["mpps_median"] for x in rows]
                refs = [next(x for x in r[f"compare_{p}"]["rows"] if "XDP_DROP" in x["path"])["mpps_median"] for r in runs]
                rm = med([v / x for v, x in zip(vals, refs) if x > 0])
                cells.append(f"{mmm(vals)} | {rm:.2f}")
                summary.setdefault(f"compare_{p}", {})[path] = {"mpps": vals, "ratio_median": rm}
            out.append(f"| {path} | " + " | ".join(cells) + " |")
        out.append("")

    if all("demo" in r for r in runs):
        out += [f"## `fastpath demo --duration {d}` ({n} runs)\n",
                "| path | Mpps min / median / max | ratio to XDP_DROP (median, same run) | bound by (per run) |",
                "|---|---|---|---|"]
        for path in [x["path"] for x in runs[0]["demo"]["rows"]]:
            rows = [next(x for x in r["demo"]["rows"] if x["path"] == path) for r in runs]
            bound = ", ".join(x["bound_by"] for x in rows)
            if path.startswith("XDP_DROP"):
                out.append(f"| {path} (reference) | {ref['split']:.2f} (pooled median) | 1.00 | {bound} |")
                continue
            vals = [x["received_mpps"] for x in rows]
            refs = [next(x for x in r["demo"]["rows"] if x["path"].startswith("XDP_DROP"))["received_mpps"] for r in runs]
            line, rm = ratio_row(path, vals, refs, bound)
            out.append(line)
            summary["demo"] = {"mpps": vals, "ratio_median": rm}
        notes = sorted({r["demo"].get("ratio_note") or "" for r in runs} - {""})
        out += [f"\nWhat bounded the figures: {'; '.join(notes)}\n"] if notes else [""]

    if all("inject" in r for r in runs):
        out += [f"## Injection (`fastpath compare --inject --runs 1 --duration {d}`, medians of {n})\n",
                "| path | UDP sink accepted pps | rcvbuf errors | TCP through the bridge | p50 us | p99 us |",
                "|---|---|---|---|---|---|"]
        for i, row in enumerate(runs[0]["inject"]["rows"]):
            g = lambda k: med([r["inject"]["rows"][i][k] for r in runs])  # noqa: E731
            out.append(f"| {row['path']} | {g('udp_sink_accepted_pps'):,.0f} | {g('udp_rcvbuf_errors'):,.0f} | "
                       f"{g('tcp_bps') / 1e9:.2f} Gbit/s | {g('latency_p50_us'):.1f} | {g('latency_p99_us'):.0f} |")
        out.append("")
    return "\n".join(out) + "\n", summary


def machine():
    cpus = os.cpu_count()
    model = ""
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpus} CPUs ({model}), Linux {os.uname().release}"


def save(path, state):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, path)


BEGIN, END = "<!-- figures:begin (scripts/figures.py writes this part) -->", "<!-- figures:end -->"


def put_in_readme(path, md):
    """Replaces what lies between the BEGIN and END markers of `path` with `md`, so the README
    shows the tables of this sitting and nothing else."""
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit(f"figures: {path} has no {BEGIN} ... {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = md.replace("\n# ", "\n### ").replace("\n## ", "\n### ")
    if body.startswith("# ") or body.startswith("## "):
        body = "### " + body.split(" ", 1)[1]
    with open(path, "w") as f:
        f.write(head + BEGIN + "\n" + body.strip() + "\n" + END + tail)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 run of 1 s, classifier sizes 1,100")
    ap.add_argument("--sizes", default="1,100,10000,100000", help="classifier rule counts")
    ap.add_argument("--sections", default=",".join(SECTIONS), help="subset of " + ",".join(SECTIONS))
    ap.add_argument("--out", default="docs/figures", help="writes OUT.md and OUT.json")
    ap.add_argument("--state", default=None, help="resume file (default OUT.state.json)")
    ap.add_argument("--fresh", action="store_true", help="ignore a saved state and start over")
    ap.add_argument("--readme", default=None, help="also put the tables between the figures markers of this file")
    a = ap.parse_args()
    if a.quick:
        a.runs, a.duration, a.sizes = 1, 1.0, "1,100"
    sizes = [int(s) for s in a.sizes.split(",")]
    sections = [s for s in a.sections.split(",") if s]
    for s in sections:
        if s not in SECTIONS:
            sys.exit(f"figures: unknown section {s!r}; use {','.join(SECTIONS)}")
    if os.geteuid() != 0:
        sys.exit("figures: needs root (test beds, XDP, AF_XDP)")
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    state_path = a.state or a.out + ".state.json"
    args = {"runs": a.runs, "duration": a.duration, "quick": a.quick, "sizes": sizes, "sections": sections}
    state = None
    if os.path.exists(state_path) and not a.fresh:
        with open(state_path) as f:
            state = json.load(f)
        if state.get("args") != args:
            sys.exit(f"figures: {state_path} is from other settings ({state.get('args')}); "
                     "use the same settings to resume, or --fresh")
        print(f"figures: resuming from {state_path}", file=sys.stderr)
    if state is None:
        state = {"args": args, "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                 "machine": machine(), "runs": [{} for _ in range(a.runs)]}
    tmp = tempfile.mkdtemp(prefix="fastpath-figures-")
    for n in sizes:
        bench_classifier.rules_file(n, "drop", f"{tmp}/drop{n}.toml")
    bench_classifier.rules_file(100, "xsk", f"{tmp}/xsk100.toml")

    todo = [(r, s) for r in range(a.runs) for s in sections if s not in state["runs"][r]]
    total_est = sum(estimate(s, a.duration, sizes) for _, s in todo)
    print(f"figures: {len(todo)} steps to do ({a.runs} runs x {len(sections)} sections), "
          f"estimated {total_est / 60:.1f} min", file=sys.stderr, flush=True)
    t0, spent_est = time.time(), 0.0
    for i, (r, s) in enumerate(todo):
        el = time.time() - t0
        left_est = total_est - spent_est
        # Scale the estimate by how fast the steps so far went.
        left = left_est * (el / spent_est) if spent_est > 0 else left_est
        print(f"figures: [{i + 1}/{len(todo)}] run {r + 1}/{a.runs} {s} "
              f"(elapsed {el / 60:.1f} min, about {left / 60:.1f} min left)", file=sys.stderr, flush=True)
        state["runs"][r][s] = run_section(s, a.duration, sizes, tmp)
        spent_est += estimate(s, a.duration, sizes)
        save(state_path, state)
    state["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    md, summary = tables(state)
    with open(a.out + ".md", "w") as f:
        f.write(md)
    with open(a.out + ".json", "w") as f:
        json.dump({"summary": summary, **state}, f, indent=1)
    save(state_path, state)
    os.remove(state_path)  # complete: nothing to resume
    if a.readme:
        put_in_readme(a.readme, md)
    print(md)
    print(f"figures: wrote {a.out}.md and {a.out}.json in {(time.time() - t0) / 60:.1f} min", file=sys.stderr)


if __name__ == "__main__":
    main()
