"""The blocks' renderers (pure: they read figures.json's dicts only): the formatting helpers, one
renderer per section (its dict in figures.json, {"command", "runs", "duration", "raw"} -> the
block's Markdown lines), the meta block (commit, machine, references) and the agreement block (one
figure, four tools)."""
import statistics


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
