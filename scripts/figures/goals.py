"""The goals the issues set (GOALS), judged on a sitting's runs: the goals block and the README's
headline block (pure)."""
from .render import div, med, mmm, per_run


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
