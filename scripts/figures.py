#!/usr/bin/env python3
"""Every published figure from one sitting at a named commit (`make figures`), and the check that
the README and docs/ show exactly what that sitting measured (`make figures-check`).

The sitting runs every section of SECTIONS (each a benchmark whose figure appears in README.md
or docs/) its planned number of runs, interleaved (run 1 of every section, then run 2, ...), on
the release build in target/release (or $FASTPATH), and writes OUT.json (default
docs/figures.json): the commit (`git rev-parse HEAD`, and whether the tree was dirty), the date,
kernel, CPU model and count, and per section its command, runs, duration and every run's raw
values. Then OUT.md and, with --readme, the README get every section's block, rendered from that
JSON alone, between `<!-- figures:NAME:begin -->` and `<!-- figures:NAME:end -->`.

Ratios. Every ratio divides a row by a reference measured by the same tool in the same run (never
a pool of other tools' measurements), and each table names its reference. The `meta` block
states once, per set-up (split, same, two queues, threaded NAPI), which measurement is the
reference of which table, with its median and per-run values.

Resumable: after each step the state goes to OUT.state.json; the same command again continues
where it stopped (refused if the commit or the plan changed; --fresh starts over). Progress and
the estimated time left go to stderr.

--check (no root, no benchmark): renders every block from the JSON and fails (exit 1, one line
per problem) if a block in the Markdown files differs from its rendering, names a section the
JSON lacks, a table's rows and header disagree on the column count, a "per run" cell holds
another number of values than the runs its block states, the JSON's runs and raw values
disagree, or the JSON lacks a commit.

Usage: scripts/figures.py [--quick] [--sections a,b] [--out docs/figures] [--readme README.md]
                          [--fresh] [--plan]                                     (root)
       scripts/figures.py --check [--json docs/figures.json] [--readme FILE ...]  (anyone)
       scripts/figures.py --render --json docs/figures.json --readme FILE ...     (anyone)
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


# ---------------------------------------------------------------------------------------------
# Formatting helpers (pure)

def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else float("nan")


def mmm(v, fmt=".2f"):
    """"median (min..max)" of a list of numbers."""
    v = [x for x in v if x is not None]
    if not v:
        return "-"
    return f"{format(statistics.median(v), fmt)} ({format(min(v), fmt)}..{format(max(v), fmt)})"


def per_run(v, fmt=".2f"):
    """The per-run values of a cell, separated by "; " (a comma is a thousands separator)."""
    return "; ".join("-" if x is None else format(x, fmt) for x in v)


def ratios(vals, refs):
    return [v / r if r else None for v, r in zip(vals, refs)]


def div(a, b):
    """a / b, or None where the reference b is 0 (a run whose reference measured nothing)."""
    return a / b if b else None


def head(sec, what):
    """The line above a section's tables: its command, runs and what the cells are."""
    return f"`{sec['command']}`, {sec['runs']} run{'s' if sec['runs'] != 1 else ''}; {what}"


# ---------------------------------------------------------------------------------------------
# Renderers: section dict from figures.json ({"command", "runs", "duration", "raw"}) -> lines.

ENGINE_REF = {"split": "xdpdrop 1q", "threaded NAPI": "xdpdrop 1q threaded-napi", "two queues": "xdpdrop 2q"}


def engine_ref(key):
    if key.endswith("threaded-napi"):
        return ENGINE_REF["threaded NAPI"]
    return ENGINE_REF["two queues"] if " 2q" in key else ENGINE_REF["split"]


def render_engine(sec):
    runs = sec["raw"]
    out = [head(sec, "Mpps median (min..max); ratio to the XDP_DROP row of its set-up measured by the same script "
                     "in the same run (xdpdrop 1q, xdpdrop 1q threaded-napi, xdpdrop 2q); CPU busy % / softirq % "
                     "per core, medians."), "",
           "| path | Mpps | ratio to XDP_DROP of its set-up | reference | CPU busy/softirq % | Mpps per run |",
           "|---|---|---|---|---|---|"]
    for key in runs[0]:
        v = [r[key]["mpps"] for r in runs]
        ref = engine_ref(key)
        q = ratios(v, [r[ref]["mpps"] for r in runs])
        cpus = sorted(runs[0][key]["cpu"])
        use = " ".join(f"{c} {med([r[key]['cpu'][c][0] for r in runs]):.0f}/{med([r[key]['cpu'][c][1] for r in runs]):.0f}"
                       for c in cpus)
        out.append(f"| {key} | {mmm(v)} | {mmm(q)} | {ref} | {use} | {per_run(v)} |")
    r1 = [div(r["rxdrop native copy 1q"]["mpps"], r["xdpdrop 1q"]["mpps"]) for r in runs]
    out += ["", "| two queues | efficiency: 2-queue ratio / 1-queue ratio (rxdrop), same run | per run |",
            "|---|---|---|"]
    for k in ("rxdrop 2q per-queue UMEM", "rxdrop 2q shared UMEM", "rxdrop 2q shared UMEM poll"):
        two = [div(r[k]["mpps"], r["xdpdrop 2q"]["mpps"]) for r in runs]
        eff = [div(t, x) if t is not None and x else None for t, x in zip(two, r1)]
        out.append(f"| {k[10:]} | {mmm(eff)} | {per_run(eff)} |")
    out += ["", "Command lines (receiver | sender; MACs are the test bed's):", "", "```"]
    out += [f"{k:<36} {runs[0][k]['cmd']}" for k in runs[0]]
    out.append("```")
    return out


MATRIX_REF = {"split": "xdpdrop split", "same": "xdpdrop same"}


def render_matrix(sec):
    runs = sec["raw"]
    out = [head(sec, "Mpps median (min..max); ratio to the XDP_DROP row of its set-up (split or same) measured by "
                     "the same script in the same run; txonly and gen count frames the receiving veth accepted, "
                     "the ones it refused are their own column."), "",
           "| path (64 B) | Mpps | ratio to XDP_DROP of its set-up | refused (median) | Mpps per run |",
           "|---|---|---|---|---|"]
    for k in runs[0]:
        pin = "same" if k.endswith(" same") else "split"
        v = [r[k]["mpps"] for r in runs]
        q = ratios(v, [r[MATRIX_REF[pin]]["mpps"] for r in runs])
        refused = f"{med([r[k]['refused'] for r in runs]):,.0f}" if k.startswith(("txonly", "gen")) else "-"
        out.append(f"| {k} | {mmm(v)} | {mmm(q)} | {refused} | {per_run(v)} |")
    out += ["", "```"] + [f"{k:<28} {runs[0][k]['cmd']}" for k in runs[0]] + ["```"]
    return out


def _compare_row(run, path):
    return next(x for x in run["rows"] if x["path"] == path)


def render_compare(sec):
    runs = sec["raw"]
    pins = [p for p in ("split", "same") if p in runs[0]]
    out = [head(sec, "Mpps median (min..max) of the per-run medians; ratio to the in-kernel XDP_DROP row measured by "
                     "`fastpath compare` in the same run and set-up."), "",
           "| path | " + " | ".join(f"{p} Mpps | {p} ratio to XDP_DROP | {p} Mpps per run" for p in pins) + " |",
           "|---|" + "---|---|---|" * len(pins)]
    for path in [x["path"] for x in runs[0][pins[0]]["rows"]]:
        cells = []
        for p in pins:
            v = [_compare_row(r[p], path)["mpps_median"] for r in runs]
            ref = [next(x for x in r[p]["rows"] if "XDP_DROP" in x["path"] and x.get("queues", 1) == 1)["mpps_median"]
                   for r in runs]
            cells.append(f"{mmm(v)} | {mmm(ratios(v, ref))} | {per_run(v)}")
        out.append(f"| {path} | " + " | ".join(cells) + " |")
    return out


def render_demo(sec):
    runs = sec["raw"]
    out = [head(sec, "Mpps median (min..max); ratio to the XDP_DROP row the demo measured in the same run."), "",
           "| path | Mpps | ratio to XDP_DROP | bound by (per run) | Mpps per run |", "|---|---|---|---|---|"]
    for path in [x["path"] for x in runs[0]["rows"]]:
        rows = [_compare_row(r, path) for r in runs]
        v = [x["received_mpps"] for x in rows]
        ref = [next(x for x in r["rows"] if x["path"].startswith("XDP_DROP"))["received_mpps"] for r in runs]
        out.append(f"| {path} | {mmm(v)} | {mmm(ratios(v, ref))} | {'; '.join(x['bound_by'] for x in rows)} | "
                   f"{per_run(v)} |")
    bound = [r for r in runs if r.get("ratio_note")]
    if bound:
        out += ["", f"In {len(bound)} of {len(runs)} runs XDP_DROP took every frame the generator made (no receiver "
                    "drops, the generator's CPU saturated): its capacity is higher than its figure, so the ratio is an "
                    "upper bound of AF_XDP rxdrop's share in those runs."]
    return out


def render_classifier(sec):
    runs = sec["raw"]
    out = [head(sec, "in-kernel drop rate with the frames matching the LAST rule, Mpps median (min..max), as a ratio to "
                     "the minimal xdp_drop program measured by the same script in the same run; rxdrop behind 100 "
                     "rules as a ratio to rxdrop behind the minimal redirect program, same run."), "",
           "| rules | Mpps | ratio | of | Mpps per run |", "|---|---|---|---|---|"]
    for k in runs[0]:
        base = "rxdrop minimal redirect" if k.startswith("rxdrop behind") else "xdp_drop"
        v = [r[k] for r in runs]
        out.append(f"| {k} | {mmm(v)} | {mmm(ratios(v, [r[base] for r in runs]))} | {base} | {per_run(v)} |")
    return out


def render_classifier_flows(sec):
    runs = sec["raw"]
    out = [head(sec, "10,000 mixed rules, the flood matching the last; Mpps medians, the classifier as a ratio to the "
                     "minimal xdp_drop program fed by the same generator command in the same run."), "",
           "| flows | xdp_drop Mpps | classifier Mpps | ratio to xdp_drop | ratio per run |", "|---|---|---|---|---|"]
    for f in runs[0]:
        x = [r[f][0] for r in runs]
        c = [r[f][1] for r in runs]
        q = ratios(c, x)
        out.append(f"| {int(f):,} | {mmm(x)} | {mmm(c)} | {mmm(q)} | {per_run(q)} |")
    return out


def render_reload(sec):
    runs = sec["raw"]
    allv = lambda k: [x for r in runs for x in r[k]]  # noqa: E731
    out = [head(sec, f"`filter reload --json` of {runs[0]['rules']:,} rules under a paced 1,000-flow flood, "
                     f"{len(runs[0]['reload_s'])} reloads per run; seconds, median (min..max) over every reload."), "",
           "| reload | seconds | per run (median of its reloads) |", "|---|---|---|"]
    for k, label in (("reload_s", "whole reload (`reload_ns`)"), ("install_s", "maps written and flipped (`install_ns`)"),
                     ("compile_s", "TOML read and compiled (`compile_ns`)")):
        out.append(f"| {label} | {mmm(allv(k))} | {per_run([med(r[k]) for r in runs])} |")
    out.append(f"| frames fallen through to the default | {max(r['fell_through'] for r in runs):,} (most in a run) | "
               f"{per_run([r['fell_through'] for r in runs], ',')} |")
    return out


def render_ddos(sec):
    import bench_ddos
    runs = sec["raw"]
    what = next((w for f, w in (("syn", "SYN flood"), ("ack", "ACK flood")) if f"--flood {f}" in sec["command"]),
                "UDP flood")
    return [f"{what}; {runs[0]['model']}", ""] + bench_ddos.tables(runs, sec["command"])


def render_fwd(sec):
    runs = sec["raw"]
    jumbo = "--jumbo" in sec["command"]
    unit = "Gbit/s" if jumbo else "Mpps"
    out = [head(sec, f"delivered {unit} median (min..max), and as a ratio to the kernel's IP forwarding measured on "
                     "the same test bed in the same run."), "",
           f"| forwarder | delivered {unit} | offered {unit} | ratio to kernel forwarding | ratio per run |",
           "|---|---|---|---|---|"]
    for n in runs[0]:
        v = [r[n][0] for r in runs]
        off = [r[n][1] for r in runs]
        if n == "rxdrop" or "kernel" not in runs[0]:
            q, cell = [], "- (UDP into rxdrop, not forwarded)" if n == "rxdrop" else "-"
        else:
            q = ratios(v, [r["kernel"][0] for r in runs])
            cell = mmm(q)
        offered = mmm(off) if (not jumbo or n == "rxdrop") else "-"
        out.append(f"| {n} | {mmm(v)} | {offered} | {cell} | {per_run(q) if q else '-'} |")
    return out


def render_fwd_cost(sec):
    runs = sec["raw"]
    out = [head(sec, "run_time_ns / run_cnt of the forwarder's XDP program from kernel.bpf_stats_enabled (which adds "
                     "its own cost to every program run), 64-byte UDP a -> b; ns per frame, median (min..max)."), "",
           "| forwarder program | ns per frame | ns per run |", "|---|---|---|"]
    for k in runs[0]:
        v = [r[k] for r in runs]
        out.append(f"| {k} | {mmm(v, '.0f')} | {per_run(v, '.0f')} |")
    return out


def render_fwd_latency(sec):
    runs = sec["raw"]
    out = [head(sec, "sockperf TCP ping-pong a -> b through f (half round trip, us), alone and beside one iperf3 "
                     "stream; medians (min..max)."), "",
           "| forwarder | idle p50 us | idle p99 us | loaded p50 us | loaded p99 us | iperf3 Gbit/s | loaded p99 per run |",
           "|---|---|---|---|---|---|---|"]
    for cfg in runs[0]:
        col = lambda i: [r[cfg][i] for r in runs]  # noqa: E731
        out.append(f"| {cfg} | {mmm(col(0), '.1f')} | {mmm(col(1), '.1f')} | {mmm(col(2), '.1f')} | "
                   f"{mmm(col(3), '.1f')} | {mmm(col(4))} | {per_run(col(3), '.1f')} |")
    return out


def render_capture(sec):
    runs = sec["raw"]
    tools = list(runs[0]["lossless"])
    out = [head(sec, "lossless delivered rate (frames/s), median (min..max), and as a ratio to tcpdump's in the same "
                     "run."), "",
           "| capture | lossless frames/s | ratio to tcpdump | frames/s per run |", "|---|---|---|---|"]
    for t in tools:
        v = [r["lossless"][t] for r in runs]
        q = ratios(v, [r["lossless"]["tcpdump"] for r in runs])
        out.append(f"| {t} | {mmm(v, ',.0f')} | {mmm(q)} | {per_run(v, ',.0f')} |")
    p = [r["cost"][0] for r in runs]
    c = [r["cost"][1] for r in runs]
    q = ratios(c, p)
    out += ["", "| b's UDP stack under an unpaced flood | frames/s | ratio to XDP_PASS | ratio per run |",
            "|---|---|---|---|",
            f"| XDP_PASS (classifier, no rule matches) | {mmm(p, ',.0f')} | 1.00 | - |",
            f"| copy capture of every frame | {mmm(c, ',.0f')} | {mmm(q)} | {per_run(q)} |"]
    return out


def render_inject(sec):
    runs = sec["raw"]
    out = [head(sec, "medians (min..max): TAP readv/writev and TAP io_uring (`fastpath compare --inject`)."), "",
           "| path | UDP sink accepted pps | rcvbuf errors | TCP through the bridge Gbit/s | p50 us | p99 us | "
           "accepted pps per run |", "|---|---|---|---|---|---|---|"]
    for i, row in enumerate(runs[0]["rows"]):
        g = lambda k, s=1: [r["rows"][i][k] / s for r in runs]  # noqa: E731
        out.append(f"| {row['path']} | {mmm(g('udp_sink_accepted_pps'), ',.0f')} | "
                   f"{mmm(g('udp_rcvbuf_errors'), ',.0f')} | {mmm(g('tcp_bps', 1e9))} | {mmm(g('latency_p50_us'), '.1f')} | "
                   f"{mmm(g('latency_p99_us'), '.0f')} | {per_run(g('udp_sink_accepted_pps'), ',.0f')} |")
    return out


def render_many_flows(sec):
    runs = sec["raw"]
    flows = list(next(iter(runs[0].values())))
    out = [head(sec, "Mpps delivered into XDP_DROP, median (min..max); one flow and a million alternate in each run."),
           "", "| xdp-live, 1 thread | " + " | ".join(f"--flows {int(f):,}" for f in flows) +
           " | ratio many / one flow | ratio per run |", "|---|" + "---|" * (len(flows) + 2)]
    for case in runs[0]:
        cells = [mmm([r[case][f] for r in runs]) for f in flows]
        q = ratios([r[case][flows[-1]] for r in runs], [r[case][flows[0]] for r in runs])
        out.append(f"| {case} | " + " | ".join(cells) + f" | {mmm(q)} | {per_run(q)} |")
    return out


def render_peers(sec):
    """fastpath vs the tools users run today: one row per (group, who) of `compare --peers`."""
    runs = sec["raw"]

    def at(run, group, who):
        return next((p for p in run["peers"] if p["group"] == group and p["who"] == who), None)

    def rate(p):
        return p["runs"][0] if p else None

    out = [head(sec, "Mpps median (min..max); the share of fastpath's in-kernel XDP_DROP and fastpath / peer are "
                     "medians of per-run ratios (the same test bed, generator and pinning, in the same run). "
                     "A row without a rate says why."), "",
           "| group | who | Mpps | of XDP_DROP | fastpath / peer | Mpps per run | version, or why no rate |",
           "|---|---|---|---|---|---|---|"]
    for row in runs[0]["peers"]:
        g, w = row["group"], row["who"]
        v = [rate(at(r, g, w)) for r in runs]
        xdp = [rate(at(r, "XDP_DROP", "fastpath")) for r in runs]
        own = [rate(at(r, g, "fastpath")) for r in runs]
        of_xdp = [div(a, b) if a is not None and b is not None else None for a, b in zip(v, xdp)]
        vs = "-" if w == "fastpath" else mmm([div(a, b) if a is not None and b is not None else None
                                                for a, b in zip(own, v)])
        why = next((at(r, g, w)["error"] for r in runs if at(r, g, w) and at(r, g, w)["error"]), None)
        note = row["version"] + (f": {why}" if why and all(x is None for x in v) else "")
        out.append(f"| {g} | {w} | {mmm(v)} | {mmm(of_xdp)} | {vs} | {per_run(v)} | {note.replace('|', '/')} |")
    out += ["", "Command lines (run 1):", ""]
    out += [f"- {p['group']} / {p['who']}: `{p['command']}`" for p in runs[0]["peers"]]
    return out


def render_latency(sec):
    """`bench pingpong`: one row per mode, round trips in us, medians over the sitting's runs; then
    each AF_XDP mode over the kernel UDP socket (the same program), medians of per-run ratios."""
    runs = sec["raw"]

    def row(run, mode):
        return next((r for r in run["report"]["rows"] if r["mode"] == mode), None)

    def col(mode, key):
        return [row(r, mode)[key] / 1000 if row(r, mode) else None for r in runs]

    rep = runs[0]["report"]
    out = [head(sec, f"one {rep['frame_len']}-byte frame in flight, client on CPU {rep['client_cpu']} in namespace a, "
                     f"echo server on CPU {rep['server_cpu']} in namespace b (the devices as the notes below read them); "
                     "whole round trips (CLOCK_MONOTONIC), us, median (min..max) over the runs, each run "
                     f"{rep['count']:,} round trips after 1,000 not measured or --duration seconds; modes interleaved "
                     "within each run."), "",
           "| path | p50 us | p99 us | p99.9 us | max us | p50 per run | round trips, lost | busy-poll rx packets |",
           "|---|---|---|---|---|---|---|---|"]
    for r0 in rep["rows"]:
        m = r0["mode"]
        rt = [row(r, m)["round_trips"] for r in runs]
        lost = sum(row(r, m)["lost"] for r in runs)
        bp = [row(r, m).get("busy_poll_rx_packets") for r in runs]
        bps = "-" if any(x is None for x in bp) else f"{sum(bp):,}"
        out.append(f"| {r0['label']} (`{m}`) | {mmm(col(m, 'p50_ns'), '.1f')} | {mmm(col(m, 'p99_ns'), '.1f')} | "
                   f"{mmm(col(m, 'p999_ns'), '.1f')} | {mmm(col(m, 'max_ns'), '.0f')} | "
                   f"{per_run(col(m, 'p50_ns'), '.1f')} | {sum(rt):,}, {lost} | {bps} |")
    base = "udp"
    if any(r["mode"] == base for r in rep["rows"]):
        out += ["", f"AF_XDP over the kernel UDP socket (`{base}`, the same program), per-run ratios of the medians "
                    "(below 1: AF_XDP faster), median (min..max):", "",
                "| mode / udp | p50 ratio | p99 ratio | p50 ratio per run |", "|---|---|---|---|"]
        for r0 in rep["rows"]:
            m = r0["mode"]
            if not m.startswith("xsk"):
                continue
            q50 = ratios(col(m, "p50_ns"), col(base, "p50_ns"))
            q99 = ratios(col(m, "p99_ns"), col(base, "p99_ns"))
            out.append(f"| {m} / {base} | {mmm(q50)} | {mmm(q99)} | {per_run(q50)} |")
    notes = [n for n in rep["notes"]]
    out += [""] + [f"- {n}" for n in notes]
    return out


# ---------------------------------------------------------------------------------------------
# The sections: what one run does (root), how long it takes, and how it renders.

class Section:
    def __init__(self, name, runs, duration, quick, estimate, run, command, render, title):
        self.name, self.runs, self.duration, self.quick = name, runs, duration, quick
        self.estimate = estimate  # duration -> seconds one run takes (set-ups measured on this VM)
        self.run = run  # (duration, ctx) -> raw JSON-able values of one run
        self.command = command  # duration -> the command line one run is equivalent to
        self.render = render  # section dict of figures.json -> Markdown lines
        self.title = title


def _ctx_rules(ctx, key, make):
    if key not in ctx:
        ctx[key] = make()
    return ctx[key]


def run_engine(d, ctx):
    import bench_engine
    import fplib
    bench_engine.FP_NEW = os.path.abspath(fplib.FP)
    return bench_engine.one_run(d, None)


def run_matrix(d, ctx):
    import bench
    return {k: {"mpps": v["mpps"], "cmd": v["cmd"], "refused": v["refused"]} for k, v in bench.one_run(d).items()}


def run_compare(d, ctx):
    from fplib import fp
    return {p: fp(["compare", "--runs", "1", "--duration", str(d), "--pin", p, "--json"]) for p in ("split", "same")}


def run_peers(d, ctx):
    from fplib import fp
    return fp(["compare", "--peers", "--runs", "1", "--duration", str(d), "--json"])


def run_demo(d, ctx):
    from fplib import fp
    return fp(["demo", "--duration", str(d), "--json"])


CLASSIFIER_SIZES = [1, 100, 10000, 100000]


def run_classifier(d, ctx):
    import bench_classifier
    sizes = ctx["classifier_sizes"]
    _ctx_rules(ctx, "classifier_files", lambda: bench_classifier.rule_files(sizes, ctx["tmp"]))
    return bench_classifier.one_run(d, sizes, ctx["tmp"])


def run_classifier_flows(d, ctx):
    import bench_classifier_flows as m
    path = f"{ctx['tmp']}/flows10000.toml"
    _ctx_rules(ctx, "flows_file", lambda: m.rules_file(10000, path))
    return {str(f): v for f, v in m.one_run(d, [1, 1000, 1000000], path).items()}


def run_reload(d, ctx):
    import bench_reload
    files = _ctx_rules(ctx, "reload_files", lambda: bench_reload.rule_files(100_000, ctx["tmp"]))
    return bench_reload.one_run(files, 3)


DDOS = {"udp": ("25k,100k,250k,1M,max", "none,nft,iptables,fastpath,fastpath-10k"),
        "syn": ("25k,250k,1M,max", "none,nft,iptables,fastpath,fastpath-syncookie"),
        "ack": ("25k,250k,1M,max", "none,nft,fastpath,fastpath-syncookie")}


def run_ddos(flood):
    def run(d, ctx):
        import bench_ddos
        # The UDP flood's chart (README: docs/ddos.svg) from the sitting's last run, beside OUT.json.
        svg = os.path.join(ctx["outdir"], "ddos.svg") if flood == "udp" and ctx.get("last") else None
        return bench_ddos.one_run(d, flood, *DDOS[flood], svg=svg)
    return run


def ddos_command(flood):
    def cmd(d):
        import bench_ddos
        return "fastpath " + " ".join(bench_ddos.ddos_args(d, flood, *DDOS[flood]))
    return cmd


def run_fwd(jumbo):
    def run(d, ctx):
        import bench_fwd
        names = bench_fwd.FORWARDERS + (bench_fwd.JUMBO_ONLY if jumbo else [])
        return bench_fwd.one_run(d, names, jumbo)
    return run


def run_fwd_cost(d, ctx):
    import fwd_cost
    return fwd_cost.one_run(d)


def run_fwd_latency(d, ctx):
    import bench_fwd_latency as m
    configs = _ctx_rules(ctx, "latency_configs", m.available_configs)
    ctx["port"] = ctx.get("port", 21111) + 20
    return m.one_run(d, configs, "1gbit", ctx["port"])


def run_capture(d, ctx):
    import bench_capture
    return bench_capture.one_run(d)


def run_inject(d, ctx):
    from fplib import fp
    return fp(["compare", "--inject", "--runs", "1", "--duration", str(d), "--json"])


def run_many_flows(d, ctx):
    import bench_gen_flows
    return bench_gen_flows.one_run(d)


def run_latency(d, ctx):
    from fplib import fp
    return fp(["bench", "pingpong", "--runs", "1", "--count", "100000", "--duration", str(d), "--json"])


def _s(d):
    return f"{d:g}"


# name, runs, duration (s), quick duration, estimate(d): seconds one run takes, from the smoke run
# of 2026-11-25 on this 2-CPU VM (per measurement: d plus its set-up; per run: test beds, rule files).
# The plan: medians of 5 runs where a run is short, 3 where it is long (the floods: 26 and 17
# phases of d + ~3-4 s each; latency: 4 forwarders x 2 phases); about 55 min in all (--plan).
SECTIONS = [
    Section("engine", 5, 5, 1, lambda d: 12 * (d + 0.4) + 2, run_engine,
            lambda d: f"scripts/bench_engine.py --runs 1 --duration {_s(d)}", render_engine,
            "The AF_XDP engine: one queue, two queues, CPUMAP, threaded NAPI"),
    Section("matrix", 5, 5, 1, lambda d: 11 * (d + 0.5) + 1.5, run_matrix,
            lambda d: f"scripts/bench.py --runs 1 --duration {_s(d)}", render_matrix,
            "AF_XDP paths, split and same"),
    Section("compare", 5, 5, 1, lambda d: 14 * (d + 0.35) + 1, run_compare,
            lambda d: f"fastpath compare --runs 1 --duration {_s(d)} --pin split|same --json", render_compare,
            "Every receive path side by side"),
    Section("peers", 3, 3, 1, lambda d: 14 * (d + 0.35) + 18 * (d + 2.5) + 15, run_peers,
            lambda d: f"fastpath compare --peers --runs 1 --duration {_s(d)} --json", render_peers,
            "fastpath vs the tools you know"),
    Section("demo", 5, 5, 1, lambda d: 2 * d + 1, run_demo,
            lambda d: f"fastpath demo --duration {_s(d)} --json", render_demo, "The demo"),
    Section("classifier", 5, 5, 1, lambda d: 7 * (d + 0.6) + 5, run_classifier,
            lambda d: f"scripts/bench_classifier.py --runs 1 --duration {_s(d)} --sizes 1,100,10000,100000",
            render_classifier, "Classifier against rules"),
    Section("classifier_flows", 5, 5, 1, lambda d: 6 * (d + 0.4) + 1, run_classifier_flows,
            lambda d: f"scripts/bench_classifier_flows.py --runs 1 --duration {_s(d)} --flows 1,1000,1000000 --rules 10000",
            render_classifier_flows, "Classifier against flows"),
    Section("reload", 5, 0, 0, lambda d: 6, run_reload,
            lambda d: "scripts/bench_reload.py --runs 1 --reloads 3 --rules 100000", render_reload,
            "Reloading 100,000 rules"),
    Section("ddos_udp", 3, 2, 1, lambda d: 52 * (d + 3.1) + 20, run_ddos("udp"), ddos_command("udp"), render_ddos,
            "The UDP flood"),
    Section("ddos_syn", 3, 2, 1, lambda d: 42 * (d + 4.2) + 20, run_ddos("syn"), ddos_command("syn"), render_ddos,
            "The SYN flood"),
    Section("ddos_ack", 3, 2, 1, lambda d: 34 * (d + 4.2) + 20, run_ddos("ack"), ddos_command("ack"), render_ddos,
            "The ACK flood"),
    Section("fwd", 5, 3, 1, lambda d: 6 * (d + 0.5) + 1, run_fwd(False),
            lambda d: f"scripts/bench_fwd.py --runs 1 --duration {_s(d)}", render_fwd, "Forwarding, 64 bytes"),
    Section("fwd_jumbo", 5, 3, 1, lambda d: 7 * (d + 0.5) + 1.5, run_fwd(True),
            lambda d: f"scripts/bench_fwd.py --runs 1 --duration {_s(d)} --jumbo", render_fwd, "Forwarding, jumbo"),
    Section("fwd_cost", 3, 3, 1, lambda d: 3 * (d + 1.5) + 3, run_fwd_cost,
            lambda d: f"scripts/fwd_cost.py --runs 1 --duration {_s(d)}", render_fwd_cost,
            "What a frame costs each forwarder program"),
    Section("fwd_latency", 3, 5, 1, lambda d: 4 * (2 * d + 7), run_fwd_latency,
            lambda d: f"scripts/bench_fwd_latency.py --runs 1 --duration {_s(d)}", render_fwd_latency,
            "Latency under load through each forwarder"),
    Section("capture", 5, 2, 0.5, lambda d: 15 * (d + 1.3) + 2 * (d + 1) + 1, run_capture,
            lambda d: f"scripts/bench_capture.py --runs 1 --duration {_s(d)}", render_capture, "Capture"),
    Section("inject", 5, 5, 1, lambda d: 2 * (2 * d + 4), run_inject,
            lambda d: f"fastpath compare --inject --runs 1 --duration {_s(d)} --json", render_inject,
            "Injection through a TAP (readv/writev, io_uring)"),
    Section("latency", 3, 5, 1, lambda d: 3 * d + 10, run_latency,
            lambda d: f"fastpath bench pingpong --runs 1 --count 100000 --duration {_s(d)} --json", render_latency,
            "Round-trip latency: AF_XDP busy poll against the kernel UDP socket"),
    Section("many_flows", 5, 3, 1, lambda d: 4 * (d + 0.4) + 0.5, run_many_flows,
            lambda d: f"scripts/bench_gen_flows.py --runs 1 --duration {_s(d)}", render_many_flows,
            "The generator with many flows"),
]
BY_NAME = {s.name: s for s in SECTIONS}


def plan(quick, names):
    """{section: [runs, duration]} of a sitting."""
    return {s.name: [1, s.quick] if quick else [s.runs, s.duration] for s in SECTIONS if s.name in names}


def estimate_s(p, done=None):
    """Seconds the runs of plan `p` not yet in `done` ({section: [raw...]}) should take."""
    done = done or {}
    return sum(BY_NAME[n].estimate(d) * max(0, r - len(done.get(n, []))) for n, (r, d) in p.items())


# ---------------------------------------------------------------------------------------------
# Rendering the blocks and checking them (pure: reads the JSON only)

def render_meta(fig):
    dirty = "a dirty tree: uncommitted changes" if fig.get("dirty") else "a clean tree"
    secs = fig["sections"]
    out = [f"Measured at {fig['commit'][:12]} on {fig['date']} (`git rev-parse HEAD` {fig['commit']}, {dirty}), "
           f"in one sitting of `{fig['made_by']}` ({fig['started']} to {fig['finished']}) on a release build; "
           f"Linux {fig['kernel']}, {fig['cpus']} CPUs ({fig['cpu_model']}). Every number in the tables below "
           "and in the README's other generated blocks comes from docs/figures.json of that sitting.", "",
           "The XDP_DROP references: every ratio divides by an XDP_DROP measured by the same tool in the same run "
           "as the row (nothing is pooled across tools). Per set-up:", "",
           "| set-up | reference (tool: row) | its tables | Mpps | Mpps per run |", "|---|---|---|---|---|"]
    refs = [("split", "engine", "bench_engine.py: xdpdrop 1q", lambda r: r["xdpdrop 1q"]["mpps"]),
            ("split", "matrix", "bench.py: xdpdrop split", lambda r: r["xdpdrop split"]["mpps"]),
            ("split", "compare", "fastpath compare --pin split: in-kernel XDP_DROP",
             lambda r: next(x for x in r["split"]["rows"] if "XDP_DROP" in x["path"])["mpps_median"]),
            ("split", "demo", "fastpath demo: XDP_DROP",
             lambda r: next(x for x in r["rows"] if x["path"].startswith("XDP_DROP"))["received_mpps"]),
            ("split", "classifier", "bench_classifier.py: xdp_drop", lambda r: r["xdp_drop"]),
            ("same", "matrix", "bench.py: xdpdrop same", lambda r: r["xdpdrop same"]["mpps"]),
            ("same", "compare", "fastpath compare --pin same: in-kernel XDP_DROP",
             lambda r: next(x for x in r["same"]["rows"] if "XDP_DROP" in x["path"])["mpps_median"]),
            ("two queues", "engine", "bench_engine.py: xdpdrop 2q", lambda r: r["xdpdrop 2q"]["mpps"]),
            ("threaded NAPI", "engine", "bench_engine.py: xdpdrop 1q threaded-napi",
             lambda r: r["xdpdrop 1q threaded-napi"]["mpps"])]
    for setup, name, label, get in refs:
        if name in secs:
            v = [get(r) for r in secs[name]["raw"]]
            out.append(f"| {setup} | {label} | {name} | {mmm(v)} | {per_run(v)} |")
    out += ["", "| section | command (one run) | runs | duration s |", "|---|---|---|---|"]
    for name, s in secs.items():
        cmd = s["command"].replace("|", "\\|")  # a pipe inside a cell is escaped
        out.append(f"| {name} | `{cmd}` | {s['runs']} | {s['duration']:g} |")
    return out


def _eng(num, den):
    return lambda r: div(r[num]["mpps"], r[den]["mpps"])


def _two_queue(r):
    one = div(r["rxdrop native copy 1q"]["mpps"], r["xdpdrop 1q"]["mpps"])
    two = div(r["rxdrop 2q shared UMEM poll"]["mpps"], r["xdpdrop 2q"]["mpps"])
    return div(two, one) if two is not None and one is not None else None


def _survivable(r, model, defence):
    """One ddos run's survivable rate (frames/s) of `defence` in `model` (None: none, or a run
    without that model)."""
    return next((s["survivable_pps"] for s in r.get("survivable", [])
                 if s.get("model", "per-frame") == model and s["defence"] == defence), None)


def _tps(r, model, defence, offered):
    """One ddos run's trans/s of (`model`, `defence`, `offered`; "" with "none": no flood)."""
    return next((p["transactions_per_s"] for p in r.get("phases", [])
                 if p.get("model", "per-frame") == model and p["defence"] == defence and p["offered"] == offered), None)


def _ratio(a, b):
    """div() where either side may be missing (None)."""
    return None if a is None or b is None else div(a, b)


def _survival_ratio(r, model):
    """The classifier's survivable rate over nftables' in one ddos run's `model`. A defence that
    survives no offered rate counts 0: the classifier surviving none is 0 (not met, never "not
    measured"); nftables surviving none while the classifier survives some is infinite (met)."""
    if not any(p.get("model", "per-frame") == model for p in r.get("phases", [])):
        return None  # the run has no such model
    if not any(s.get("model", "per-frame") == model and s["defence"] == "nft" for s in r.get("survivable", [])):
        return None  # nftables not measured in this run: nothing to compare with
    fp, nft = _survivable(r, model, "fastpath") or 0, _survivable(r, model, "nft") or 0
    if fp == 0:
        return 0.0
    return fp / nft if nft else float("inf")


def _kept_over_nft(r, model, defence, offered):
    """`defence`'s trans/s over nftables' at `offered` in one ddos run's `model`: 0 when `defence`
    kept nothing (not met, never "not measured"), inf when only nftables lost the service (met);
    None when the run lacks either phase."""
    a, b = _tps(r, model, defence, offered), _tps(r, model, "nft", offered)
    if a is None or b is None:
        return None
    if a == 0:
        return 0.0
    return a / b if b else float("inf")


def _sc_max(r, model, offered="max"):
    """One ddos run's fastpath-syncookie phase at `offered` (full rate) in `model`, if it has the
    connect probe's fields (None: a run made before them)."""
    return next((p for p in r.get("phases", []) if p.get("model", "per-frame") == model
                 and p["defence"] == "fastpath-syncookie" and p["offered"] == offered and "connects_attempted" in p),
                None)


def _connects(r, model, offered="max"):
    p = _sc_max(r, model, offered)
    return None if p is None else div(p["connects_succeeded"], p["connects_attempted"])


def _connect_p99(r, model):
    p = _sc_max(r, model)
    return None if p is None else (5.0 / p["connect_p99_ms"] if p.get("connect_p99_ms") else 0.0)


# The issues' goals: (what, section, ratio of one run, goal, reference). A goal is met when the
# median over the sitting's runs reaches it.
GOALS = [
    ("AF_XDP rxdrop, one queue (split)", "engine", _eng("rxdrop native copy 1q", "xdpdrop 1q"), 0.75, "XDP_DROP"),
    ("AF_XDP l2fwd, one queue (split)", "engine", _eng("l2fwd native copy 1q", "xdpdrop 1q"), 0.16, "XDP_DROP"),
    ("AF_XDP txonly, one queue (split)", "engine", _eng("txonly copy 1q", "xdpdrop 1q"), 0.24, "XDP_DROP"),
    ("AF_XDP rxdrop, two queues, shared UMEM, poll", "engine", _two_queue, 0.9,
     "its one-queue ratio (each to its XDP_DROP)"),
    ("classifier, 10,000 rules, 1,000,000 flows", "classifier_flows", lambda r: div(r["1000000"][1], r["1000000"][0]),
     0.8, "xdp_drop"),
    ("classifier, 10,000 rules, 1 flow", "classifier_flows", lambda r: div(r["1"][1], r["1"][0]), 0.85, "xdp_drop"),
    ("XDP L3 forwarding, 64 B", "fwd", lambda r: div(r["xdp-l3"][0], r["kernel"][0]), 3.0, "the kernel's IP forwarding"),
    ("AF_XDP forwarding (xsk-l2), 64 B", "fwd", lambda r: div(r["xsk-l2"][0], r["kernel"][0]), 1.0,
     "the kernel's IP forwarding"),
    ("capture copy, lossless rate", "capture", lambda r: div(r["lossless"]["copy"], r["lossless"]["tcpdump"]), 1.0,
     "tcpdump"),
    ("capture divert, lossless rate", "capture", lambda r: div(r["lossless"]["divert"], r["lossless"]["tcpdump"]),
     3.0, "tcpdump"),
    ("UDP flood, coalesced model: the classifier's survivable rate", "ddos_udp",
     lambda r: _survival_ratio(r, "coalesced"), 4.0,
     "nftables' survivable rate (a defence surviving no rate counts 0; inf: nftables survives none)"),
    ("UDP flood, coalesced model: trans/s behind the classifier at 1 Mpps", "ddos_udp",
     lambda r: _ratio(_tps(r, "coalesced", "fastpath", "1M"), _tps(r, "coalesced", "none", "")), 0.8,
     "the coalesced model's no-flood trans/s"),
] + [g for m in ("per-frame", "coalesced") for g in (
    (f"SYN flood, {m} model: trans/s behind fastpath-syncookie at full rate", "ddos_syn",
     lambda r, m=m: _ratio(_tps(r, m, "fastpath-syncookie", "max"), _tps(r, m, "none", "")), 0.5,
     f"the {m} model's no-flood trans/s"),
    (f"SYN flood, {m} model: new connections succeeding behind fastpath-syncookie at full rate", "ddos_syn",
     lambda r, m=m: _connects(r, m), 0.99, "the connect probe's attempts"),
    (f"SYN flood, {m} model: p99 connect time behind fastpath-syncookie at full rate", "ddos_syn",
     lambda r, m=m: _connect_p99(r, m), 1.0, "5 ms over the p99 (0: none connected)"),
)] + [
    # Issue 24: under an ACK flood the classifier's row keeps the service where nftables without
    # conntrack (a stateless per-source ACK limit) does not; judged at the 1 Mpps step, where
    # that limit lets 256k ACKs/s through.
    g for m in ("per-frame", "coalesced") for g in (
        (f"ACK flood, {m} model: trans/s behind fastpath-syncookie at 1 Mpps", "ddos_ack",
         lambda r, m=m: _kept_over_nft(r, m, "fastpath-syncookie", "1M"), 2.0,
         "nftables' trans/s at 1 Mpps (0: fastpath-syncookie kept none; inf: only nftables lost the service)"),
        # ... and keeps it reachable: a ratio to nftables' zero is met by any trans/s at all.
        (f"ACK flood, {m} model: new connections succeeding behind fastpath-syncookie at 1 Mpps", "ddos_ack",
         lambda r, m=m: _connects(r, m, "1M"), 0.99, "the connect probe's attempts"),
    )]


def _sections(fig, newer=None):
    secs = dict(fig["sections"])
    if newer:
        secs.update({n: sec for n, (sec, _) in newer.items()})
    return secs


def goal_rows(fig, newer=None):
    """(what, section, reference, goal, ratios per run or None, verdict) per goal of GOALS that
    the sitting `fig` (and `newer`, see render_goals) can judge."""
    secs, rows = _sections(fig, newer), []
    for what, name, get, goal, ref in GOALS:
        if name not in secs:
            rows.append((what, name, ref, goal, None, f"not measured (no {name} section)"))
            continue
        if name.startswith("ddos") and not any("models" in r for r in secs[name]["raw"]):
            continue  # ddos runs made before the coalesced model: its goals have nothing to judge
        if "fastpath-syncookie" in what and "fastpath-syncookie" not in secs[name].get("command", ""):
            continue  # ddos_syn runs made before fastpath-syncookie: nothing to judge
        q = [get(r) for r in secs[name]["raw"]]
        m = med(q)
        # Judged at the precision shown: a median shown as 0.75 meets a 0.75 goal.
        met = "not measured (reference 0)" if m != m else "met" if round(m, 2) >= goal else "**not met**"
        rows.append((what, name, ref, goal, q, met))
    return rows


def render_goals(fig, newer=None):
    """The goals block of the sitting `fig`; `newer` ({section: (section, commit)}, see
    extra_blocks) replaces sections measured again by partial sittings after it."""
    out = ["The goals the issues set, against this sitting: the ratio's median (min..max) over the section's runs, "
           "each run's ratio from figures measured side by side in that run; met when the median reaches the goal."]
    if newer:
        out += ["", "Sections measured after it, at later commits, by partial sittings (`scripts/figures.py --sections`): "
                + ", ".join(f"{n} (at {c[:12]})" for n, (_, c) in sorted(newer.items()))
                + "; the goals of those sections are judged on those runs."]
    out += ["", "| goal | section | ratio to | goal | ratio | met | ratio per run |", "|---|---|---|---|---|---|---|"]
    for what, name, ref, goal, q, met in goal_rows(fig, newer):
        if q is None:
            out.append(f"| {what} | {name} | {ref} | {goal:g} | - | {met} | - |")
        else:
            out.append(f"| {what} | {name} | {ref} | {goal:g} | {mmm(q)} | {met} | {per_run(q)} |")
    return out


# The README's headline table: these goals' rows (the whole table: docs/benchmarks.md).
HEADLINE = [
    "AF_XDP rxdrop, one queue (split)",
    "classifier, 10,000 rules, 1,000,000 flows",
    "UDP flood, coalesced model: the classifier's survivable rate",
    "SYN flood, coalesced model: trans/s behind fastpath-syncookie at full rate",
    "XDP L3 forwarding, 64 B",
    "AF_XDP forwarding (xsk-l2), 64 B",
    "capture divert, lossless rate",
]


def render_headline(fig, newer=None):
    """The README's headline block: the HEADLINE goals' median ratios, from the same rows as the
    goals block."""
    rows = {r[0]: r for r in goal_rows(fig, newer)}
    out = ["Ratios measured side by side in one run, median over the sitting's runs "
           "([benchmarks.md](docs/benchmarks.md): every table, the commit, the runs).", "",
           "| what | ratio | to | goal |", "|---|---|---|---|"]
    for what in HEADLINE:
        if what not in rows:
            continue
        _, _, ref, goal, q, met = rows[what]
        shown = f"{med(q):.2f}" if q is not None and med(q) == med(q) else "-"
        out.append(f"| {what} | {shown} | {ref} | {goal:g} ({met}) |")
    return out


def _xdp_row(run, pin):
    return next(x for x in run[pin]["rows"] if "XDP_DROP" in x["path"] and x.get("queues", 1) == 1)


# One figure, four tools: AF_XDP rxdrop (native, copy mode, one queue) and its XDP_DROP, per
# set-up, as each tool measures it; (section, label, set-up, rxdrop Mpps of a run, XDP_DROP Mpps).
SAME_THING = [
    ("engine", "scripts/bench_engine.py", "split", lambda r: r["rxdrop native copy 1q"]["mpps"],
     lambda r: r["xdpdrop 1q"]["mpps"]),
    ("matrix", "scripts/bench.py", "split", lambda r: r["rxdrop native-copy split"]["mpps"],
     lambda r: r["xdpdrop split"]["mpps"]),
    ("compare", "fastpath compare --pin split", "split",
     lambda r: _compare_row(r["split"], "AF_XDP native copy")["mpps_median"], lambda r: _xdp_row(r, "split")["mpps_median"]),
    ("demo", "fastpath demo", "split", lambda r: _compare_row(r, "AF_XDP rxdrop")["received_mpps"],
     lambda r: next(x for x in r["rows"] if x["path"].startswith("XDP_DROP"))["received_mpps"]),
    ("matrix", "scripts/bench.py", "same", lambda r: r["rxdrop native-copy same"]["mpps"],
     lambda r: r["xdpdrop same"]["mpps"]),
    ("compare", "fastpath compare --pin same", "same",
     lambda r: _compare_row(r["same"], "AF_XDP native copy")["mpps_median"], lambda r: _xdp_row(r, "same")["mpps_median"]),
]


def render_agreement(fig):
    secs = fig["sections"]
    out = ["AF_XDP rxdrop (native, copy mode, one queue) as each tool measures it, with the XDP_DROP that tool "
           "measured in the same run; Mpps and ratio median (min..max) over the sitting's runs.", "",
           "| tool | set-up | rxdrop Mpps | XDP_DROP Mpps | ratio | ratio per run |", "|---|---|---|---|---|---|"]
    for name, label, setup, rx, ref in SAME_THING:
        if name not in secs:
            continue
        runs = secs[name]["raw"]
        v, x = [rx(r) for r in runs], [ref(r) for r in runs]
        q = ratios(v, x)
        out.append(f"| {label} | {setup} | {mmm(v)} | {mmm(x)} | {mmm(q)} | {per_run(q)} |")
    return out


def render_all(fig):
    """{block name: Markdown text} of every block figures.json `fig` makes."""
    blocks = {"meta": "\n".join(render_meta(fig)), "goals": "\n".join(render_goals(fig)),
              "headline": "\n".join(render_headline(fig)),
              "agreement": "\n".join(render_agreement(fig))}
    for name, sec in fig["sections"].items():
        if name not in BY_NAME:
            raise ValueError(f"figures.json has a section {name!r} this script does not know")
        blocks[name] = "\n".join(BY_NAME[name].render(sec))
    return blocks


BLOCK = re.compile(r"<!-- figures:([a-z_]+):begin -->\n(.*?)<!-- figures:([a-z_]+):end -->", re.S)


def find_blocks(text):
    """[(name, body, start, end)] of the generated blocks of a Markdown text; raises ValueError on
    a block whose begin and end names differ or a marker outside a pair."""
    found = []
    for m in BLOCK.finditer(text):
        if m.group(1) != m.group(3):
            raise ValueError(f"block {m.group(1)!r} ends with the marker of {m.group(3)!r}")
        found.append((m.group(1), m.group(2), m.start(2), m.end(2)))
    stripped = BLOCK.sub("", text)
    stray = re.search(r"(?<!`)<!--\s*figures\b[^>]*-->", stripped)  # `quoted` in prose is not a marker
    if stray:
        raise ValueError(f"marker {stray.group(0)} without its pair, or not of the form <!-- figures:NAME:begin|end -->")
    return found


def cells(line):
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", s)]


RUNS_SAID = re.compile(r"\b(\d+) runs?\b|medians of (\d+)\b")


def table_errors(where, text):
    """Problems of the Markdown tables in `text`: rows whose cell count differs from the header's,
    a missing separator row, and "per run" cells whose number of values (separated by "; ")
    differs from the last "N runs" / "medians of N" said above the table."""
    errs, lines, i, fence, said = [], text.split("\n"), 0, False, None
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            fence = not fence
        if fence or not line.startswith("|"):
            for m in RUNS_SAID.finditer(line if not fence else ""):
                said = int(m.group(1) or m.group(2))
            i += 1
            continue
        tab = []
        while i < len(lines) and lines[i].startswith("|"):
            tab.append(lines[i])
            i += 1
        hdr = cells(tab[0])
        if len(tab) < 2 or not all(re.fullmatch(r":?-+:?", c) for c in cells(tab[1])):
            errs.append(f"{where}: table {tab[0][:60]!r} has no separator row")
            continue
        if len(cells(tab[1])) != len(hdr):
            errs.append(f"{where}: table {tab[0][:60]!r}: separator has {len(cells(tab[1]))} columns, header {len(hdr)}")
        for row in tab[2:]:
            c = cells(row)
            if len(c) != len(hdr):
                errs.append(f"{where}: row {row[:60]!r} has {len(c)} cells, its header {len(hdr)}")
                continue
            for h, v in zip(hdr, c):
                if "per run" in h and v != "-" and said is not None and len(v.split("; ")) != said:
                    errs.append(f"{where}: row {row[:60]!r}: {h!r} holds {len(v.split('; '))} values, "
                                f"the block says {said} runs")
    return errs


def descends(older, newer):
    """Whether commit `older` is `newer` or one of its ancestors in this checkout (False when git
    does not know either)."""
    r = subprocess.run(["git", "-C", os.path.dirname(HERE), "merge-base", "--is-ancestor", older, newer],
                       capture_output=True)
    return r.returncode == 0


def finished(fig):
    """When a sitting finished ("YYYY-MM-DD HH:MM UTC"; its day when the stamp is missing)."""
    return str(fig.get("finished") or fig.get("date") or "")


def extra_blocks(extra_paths, main_fig):
    """(blocks, problems, newer) of the partial sittings `extra_paths` (each `scripts/figures.py
    --sections S --out docs/figures-S`: sections measured at a later commit than the full
    sitting, until the next full sitting measures them too): each names a 40-hex commit, a clean
    tree, no --quick, and sections the full sitting lacks or, finished after it, ones it
    supersedes. A section in several partial sittings is the one of the sitting that finished
    last (two finished in the same minute: a problem). `newer` maps each such section the full
    sitting has or a goal judges to (its section, its sitting's commit), for the goals block."""
    blocks, errs, newer, owner = {}, [], {}, {}
    main_sections = main_fig.get("sections", {})
    figs = []
    for path in extra_paths:
        try:
            with open(path) as f:
                fig = json.load(f)
        except (OSError, ValueError) as e:
            errs.append(f"{path}: cannot read: {e}")
            continue
        if not re.fullmatch(r"[0-9a-f]{40}", str(fig.get("commit", ""))):
            errs.append(f"{path}: no commit (a 40-hex `git rev-parse HEAD`): {fig.get('commit')!r}")
            continue
        if fig.get("dirty") or "--quick" in str(fig.get("made_by", "")):
            errs.append(f"{path}: a dirty tree or a smoke sitting: not a named commit's figures")
        if not re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", str(fig.get("finished", ""))):
            errs.append(f"{path}: no 'finished' stamp (YYYY-MM-DD HH:MM UTC): {fig.get('finished')!r}")
            continue
        figs.append((path, fig))
    for path, fig in sorted(figs, key=lambda pf: finished(pf[1])):
        for name, sec in fig.get("sections", {}).items():
            if name in main_sections and finished(fig) <= finished(main_fig):
                errs.append(f"{path}: section {name} is in the full sitting too, which finished after it: delete {path}")
            elif name in main_sections and not (descends(main_fig["commit"], fig["commit"])
                                                and descends(fig["commit"], "HEAD")):
                errs.append(f"{path}: section {name} supersedes the full sitting's, so its commit "
                            f"{fig['commit'][:12]} must descend from the full sitting's and be in HEAD's history")
            elif name not in BY_NAME:
                errs.append(f"{path}: section {name!r} is not one this script knows")
            elif sec.get("runs") != len(sec.get("raw", [])):
                errs.append(f"{path}: section {name}: runs {sec.get('runs')} but {len(sec.get('raw', []))} raw runs")
            elif name in owner and finished(owner[name][1]) == finished(fig):
                errs.append(f"{path}: section {name} is in {owner[name][0]} too, finished the same minute: keep one")
            else:
                owner[name] = (path, fig)
                blocks[name] = "\n".join(BY_NAME[name].render(sec))
                if name in main_sections or any(g[1] == name for g in GOALS):
                    newer[name] = (sec, fig["commit"])
    return blocks, errs, newer


def partials_beside(json_path):
    """The partial sittings beside `json_path`: DIR/figures-*.json."""
    d = os.path.dirname(os.path.abspath(json_path))
    return sorted(os.path.join(d, f) for f in os.listdir(d)
                  if f.startswith("figures-") and f.endswith(".json") and ".state" not in f)


def all_blocks(fig, extra_paths):
    """(blocks, problems): every block of the full sitting `fig`, the partial sittings' blocks
    over them, and the goals judged on the newest runs of each section."""
    blocks = render_all(fig)
    more, errs, newer = extra_blocks(extra_paths, fig)
    blocks.update(more)
    if newer:
        blocks["goals"] = "\n".join(render_goals(fig, newer))
        blocks["headline"] = "\n".join(render_headline(fig, newer))
    return blocks, errs


def check(json_path, md_paths, extra_paths=()):
    """Every problem found (empty: all good). Pure: reads json_path, extra_paths (see
    extra_blocks) and md_paths only."""
    try:
        with open(json_path) as f:
            fig = json.load(f)
    except (OSError, ValueError) as e:
        return [f"{json_path}: cannot read: {e}"]
    errs = []
    if not re.fullmatch(r"[0-9a-f]{40}", str(fig.get("commit", ""))):
        errs.append(f"{json_path}: no commit (a 40-hex `git rev-parse HEAD`): {fig.get('commit')!r}")
        return errs
    for key in ("date", "kernel", "cpu_model", "cpus", "dirty", "sections"):
        if key not in fig:
            errs.append(f"{json_path}: no {key!r}")
    if errs:
        return errs
    for name, sec in fig["sections"].items():
        if sec.get("runs") != len(sec.get("raw", [])):
            errs.append(f"{json_path}: section {name}: runs {sec.get('runs')} but {len(sec.get('raw', []))} raw runs")
    if errs:
        return errs
    if fig.get("dirty"):
        errs.append(f"{json_path}: measured on a dirty tree (uncommitted changes): not a named commit")
    if "--quick" in str(fig.get("made_by", "")) or "--sections" in str(fig.get("made_by", "")):
        errs.append(f"{json_path}: made by {fig.get('made_by')!r}: a smoke or partial sitting, not every figure")
    try:
        blocks, more_errs = all_blocks(fig, extra_paths)
    except Exception as e:  # any renderer failure is a check failure, one line
        return errs + [f"{json_path}: cannot render: {type(e).__name__} {e}"]
    errs += more_errs
    for name, text in blocks.items():
        errs += table_errors(f"rendered {name}", text)
    # A partial sitting's own OUT.md keeps that sitting's blocks, even once a later one
    # supersedes a section of it: it is checked against its own JSON.
    own = {}
    for x in extra_paths:
        try:
            with open(x) as f:
                own[os.path.abspath(x[:-len(".json")] + ".md")] = render_all(json.load(f))
        except (OSError, ValueError, KeyError):
            pass  # extra_blocks reported it
    seen = set()
    for path in md_paths:
        try:
            with open(path) as f:
                text = f.read()
            found = find_blocks(text)
        except (OSError, ValueError) as e:
            errs.append(f"{path}: {e}")
            continue
        for name, body, start, _ in found:
            line = text.count("\n", 0, start) + 1
            mine = own.get(os.path.abspath(path), {})
            if name in mine and name not in ("meta", "goals", "headline", "agreement"):
                want = mine[name].strip().split("\n")
                if body.strip().split("\n") != want:
                    errs.append(f"{path}:{line + 1}: block {name!r} differs from its own sitting's rendering")
                continue
            if name not in blocks:
                errs.append(f"{path}:{line}: block {name!r} is not in {json_path}")
                continue
            want = blocks[name].strip().split("\n")
            got = body.strip().split("\n")
            if got != want:
                k = next((j for j, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                errs.append(f"{path}:{line + 1 + k}: block {name!r} differs from its rendering: "
                            f"{(got[k] if k < len(got) else '<end>')[:80]!r} != {(want[k] if k < len(want) else '<end>')[:80]!r}")
            errs += table_errors(f"{path}:{line} {name}", body)
        seen.update(name for name, _, _, _ in found)
    # Every block the JSON makes is shown somewhere: a deleted block (and a table pasted by hand
    # in its place) fails.
    for name in blocks:
        if md_paths and name not in seen:
            errs.append(f"block {name!r} of {json_path} is in none of {', '.join(md_paths)}")
    return errs


def behind(json_path):
    """One line: how far HEAD is past the sitting's commit, and how many of those commits touch
    what moves a figure (crates/, bpf/, scripts/); the commit must be in HEAD's history."""
    with open(json_path) as f:
        commit = json.load(f)["commit"]
    ancestor = ["git", "-C", os.path.dirname(HERE), "merge-base", "--is-ancestor", commit, "HEAD"]
    if subprocess.run(ancestor, capture_output=True).returncode != 0:
        sys.exit(f"figures-check: {json_path} names commit {commit[:12]}, which is not in HEAD's history")
    n = len(git("rev-list", f"{commit}..HEAD").split())
    code = len(git("rev-list", f"{commit}..HEAD", "--", "crates", "bpf", "scripts").split())
    return (f"figures measured at {commit[:12]}, {n} commit(s) behind HEAD, {code} of them touching crates/, bpf/ or "
            "scripts/ (what can move a figure: `make figures` measures them again)")


def section_blocks(fig, blocks):
    """The blocks a sitting may write: all of a full sitting's; only its sections' of a partial
    one (`--sections`: the README's meta, goals, headline and agreement blocks stay the full sitting's)."""
    if "--sections" in str(fig.get("made_by", "")):
        return {n: b for n, b in blocks.items() if n in fig["sections"]}
    return blocks


def put_blocks(path, blocks):
    """Replaces the body of every generated block of `path` that `blocks` has."""
    with open(path) as f:
        text = f.read()
    out, pos = [], 0
    for name, _, start, end in find_blocks(text):
        if name in blocks:
            out += [text[pos:start], blocks[name].strip() + "\n"]
            pos = end
    out.append(text[pos:])
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join(out))
    os.replace(tmp, path)


def blocks_md(fig, blocks):
    out = ["# fastpath figures", ""]
    for name, text in blocks.items():
        title = {"meta": "Commit, machine and references", "goals": "The goals",
                 "agreement": "One figure, four tools", "headline": "Headline figures"}.get(name) or BY_NAME[name].title
        out += [f"## {title}", "", f"<!-- figures:{name}:begin -->", text.strip(), f"<!-- figures:{name}:end -->", ""]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# The sitting (root)

def git(*args):
    r = subprocess.run(["git", "-C", os.path.dirname(HERE)] + list(args), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"figures: `git {' '.join(args)}` failed ({r.stderr.strip()}): the sitting records the commit "
                 "it measured, so it runs in a git checkout")
    return r.stdout.strip()


def machine():
    model = ""
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"kernel": os.uname().release, "cpu_model": model, "cpus": os.cpu_count()}


def save(path, state):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, path)


def now():
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def sitting(a, names):
    p = plan(a.quick, names)
    if a.plan:
        for n, (r, d) in p.items():
            print(f"{n:<18} {r} runs x {d:g} s   ~{BY_NAME[n].estimate(d) * r / 60:5.1f} min   "
                  f"{BY_NAME[n].command(d)}")
        print(f"{'total':<18} ~{estimate_s(p) / 60:.1f} min")
        return
    if os.geteuid() != 0:
        sys.exit("figures: the sitting needs root (test beds, XDP, AF_XDP); --check does not")
    commit = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    state_path = a.out + ".state.json"
    made_by = "scripts/figures.py" + (" --quick" if a.quick else "") + (
        f" --sections {','.join(names)}" if len(names) != len(SECTIONS) else "")
    state = None
    if os.path.exists(state_path) and not a.fresh:
        with open(state_path) as f:
            state = json.load(f)
        if state.get("plan") != p or state.get("commit") != commit:
            sys.exit(f"figures: {state_path} is of commit {state.get('commit', '?')[:12]} with plan {state.get('plan')}; "
                     f"this is {commit[:12]} with {p}: run the same commit and settings to resume, or --fresh")
        print(f"figures: resuming from {state_path}", file=sys.stderr)
    if state is None:
        state = {"plan": p, "commit": commit, "dirty": dirty, "started": now(), "made_by": made_by,
                 "raw": {n: [] for n in p}}
    state["dirty"] = state["dirty"] or dirty
    ctx = {"tmp": tempfile.mkdtemp(prefix="fastpath-figures-"), "outdir": os.path.dirname(os.path.abspath(a.out)),
           "classifier_sizes": CLASSIFIER_SIZES}
    todo = [(r, n) for r in range(max(x[0] for x in p.values())) for n in p
            if r < p[n][0] and r >= len(state["raw"][n])]
    total = estimate_s(p, state["raw"])
    print(f"figures: {len(todo)} steps to do, estimated {total / 60:.1f} min", file=sys.stderr, flush=True)
    t0, spent_est = time.time(), 0.0
    timing = state.setdefault("seconds", {})
    for i, (r, n) in enumerate(todo):
        el = time.time() - t0
        left = (total - spent_est) * (el / spent_est if spent_est > 0 else 1.0)
        print(f"figures: [{i + 1}/{len(todo)}] {n} run {r + 1}/{p[n][0]} (elapsed {el / 60:.1f} min, "
              f"about {left / 60:.1f} min left)", file=sys.stderr, flush=True)
        ts = time.time()
        ctx["last"] = r == p[n][0] - 1
        state["raw"][n].append(BY_NAME[n].run(p[n][1], ctx))
        timing.setdefault(n, []).append(round(time.time() - ts, 1))
        spent_est += BY_NAME[n].estimate(p[n][1])
        save(state_path, state)
    fig = {"commit": state["commit"], "dirty": state["dirty"], "date": time.strftime("%Y-%m-%d", time.gmtime()),
           "started": state["started"], "finished": now(), "made_by": state["made_by"], **machine(),
           "seconds_per_run": timing,
           "sections": {n: {"command": BY_NAME[n].command(d), "runs": r, "duration": d, "raw": state["raw"][n]}
                        for n, (r, d) in p.items()}}
    # The measurements first: a renderer that fails must not lose an hour of runs (fix it and
    # `--render` from the JSON).
    save(a.out + ".json", fig)
    blocks = section_blocks(fig, render_all(fig))
    with open(a.out + ".md", "w") as f:
        f.write(blocks_md(fig, blocks))
    os.remove(state_path)  # complete: nothing to resume
    if a.readme:
        for path in a.readme:
            put_blocks(path, section_blocks(fig, blocks))
        full = os.path.join(os.path.dirname(HERE), "docs", "figures.json")
        # A partial sitting written beside the full one (docs/figures-S): the goals block (and the
        # full sitting's own Markdown) show the merged view. One written elsewhere touches neither.
        beside = os.path.dirname(os.path.abspath(a.out + ".json")) == os.path.dirname(full)
        if "--sections" in made_by and beside and os.path.exists(full) and os.path.abspath(a.out + ".json") != full:
            # A partial sitting: the goals block judged again with its sections over the full one's.
            with open(full) as f:
                goals = all_blocks(json.load(f), partials_beside(full))[0]["goals"]
            for path in a.readme:
                put_blocks(path, {"goals": goals})
            # The full sitting's own Markdown shows the merged view too (what --check compares).
            full_md = full[:-len(".json")] + ".md"
            if os.path.exists(full_md) and full_md not in [os.path.abspath(x) for x in a.readme]:
                put_blocks(full_md, {**section_blocks(fig, blocks), "goals": goals})
    for n, t in timing.items():
        print(f"figures: {n:<18} {', '.join(f'{x:.0f}' for x in t)} s per run", file=sys.stderr)
    print(f"figures: wrote {a.out}.json and {a.out}.md in {(time.time() - t0) / 60:.1f} min", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="check the Markdown blocks against the JSON (no root)")
    ap.add_argument("--json", default="docs/figures.json", help="--check: the figures.json to render from")
    ap.add_argument("--extra-json", action="append", default=None,
                    help="--check: a partial sitting's JSON (default: every figures-*.json beside --json)")
    ap.add_argument("--render", action="store_true",
                    help="fill the blocks of the --readme files from --json again (no root, no benchmark)")
    ap.add_argument("--quick", action="store_true", help="smoke run: every section once, tiny durations")
    ap.add_argument("--plan", action="store_true", help="print the plan and its estimated time, run nothing")
    ap.add_argument("--sections", default=None, help="a comma-separated subset of " + ",".join(BY_NAME))
    ap.add_argument("--out", default="docs/figures", help="the sitting writes OUT.json and OUT.md")
    ap.add_argument("--fresh", action="store_true", help="ignore a saved state and start over")
    ap.add_argument("--readme", action="append", default=None,
                    help="Markdown file(s) whose blocks to fill (sitting) or check (--check; default README.md "
                         "and docs/*.md)")
    a = ap.parse_args()
    names = list(BY_NAME) if not a.sections else [s for s in a.sections.split(",") if s]
    for s in names:
        if s not in BY_NAME:
            sys.exit(f"figures: --sections {s!r} is not a section: use a comma-separated subset of {','.join(BY_NAME)}")
    if a.check:
        root = os.path.dirname(HERE)
        paths = a.readme or [os.path.join(root, "README.md")] + sorted(
            os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
        extra = a.extra_json
        if extra is None:  # the partial sittings beside --json: DIR/figures-*.json
            extra = partials_beside(a.json)
        errs = check(a.json, paths, extra)
        for e in errs:
            print(f"figures-check: {e}", file=sys.stderr)
        if errs:
            sys.exit(1)
        print(f"figures-check: {len(paths)} file(s) match {a.json}")
        print(f"figures-check: {behind(a.json)}")
        return
    if a.render:
        if not a.readme:
            sys.exit("figures: --render needs --readme FILE (the Markdown files whose blocks to fill)")
        with open(a.json) as f:
            fig = json.load(f)
        # A full sitting's JSON: its blocks with the partial sittings beside it over them.
        blocks = render_all(fig) if "--sections" in str(fig.get("made_by", "")) else all_blocks(fig, partials_beside(a.json))[0]
        for path in a.readme:
            put_blocks(path, section_blocks(fig, blocks))
        print(f"figures: rendered {a.json} into {', '.join(a.readme)}")
        return
    sitting(a, names)


if __name__ == "__main__":
    main()
