"""The sections: what one run of each does (root), how long it takes, the command it is equivalent
to and its renderer (SECTIONS, BY_NAME); the plan of a sitting (runs and duration per section) and
its estimated time."""
import os

from .render import (render_capture, render_classifier, render_classifier_flows, render_compare, render_ddos,
                     render_demo, render_engine, render_fwd, render_fwd_cost, render_fwd_latency, render_inject,
                     render_latency, render_many_flows, render_matrix, render_peers, render_reload)


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
