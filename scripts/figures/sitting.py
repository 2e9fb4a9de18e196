"""The sitting (root): every section's runs, interleaved and resumable, then the JSON, the
Markdown and the --readme files' blocks."""
import json
import os
import sys
import tempfile
import time

from .blocks import all_blocks, blocks_md, partials_beside, put_blocks, render_all, section_blocks
from .repo import HERE, git
from .run import BY_NAME, CLASSIFIER_SIZES, SECTIONS, estimate_s, plan


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
