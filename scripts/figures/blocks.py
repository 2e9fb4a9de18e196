"""The generated blocks of the Markdown files: every block a sitting's JSON makes (render_all), the
partial sittings' blocks over a full one's (all_blocks), finding the blocks of a Markdown text and
replacing their bodies, and a sitting's own OUT.md."""
import json
import os
import re

from .goals import GOALS, render_goals, render_headline
from .render import render_agreement, render_meta
from .repo import descends
from .run import BY_NAME


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
