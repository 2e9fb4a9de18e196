"""Unit tests of `scripts/figures.py --check` (make test; no root, no benchmark): a fixture
figures.json (scripts/testdata/figures.json) rendered into Markdown passes, and each kind of
drift the check exists for fails with a line naming it.

Run: python3 -m unittest discover -s scripts -p 'test_*.py'
"""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import figures  # noqa: E402

FIXTURE = os.path.join(HERE, "testdata", "figures.json")


class Check(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        with open(FIXTURE) as f:
            self.fig = json.load(f)
        self.json = self.write("figures.json", json.dumps(self.fig))
        blocks = figures.render_all(self.fig)
        # A README with prose around the blocks, as the real one.
        self.readme = self.write("README.md", "# t\n\nText 0.80 of a goal.\n\n" + figures.blocks_md(self.fig, blocks)
                                 + "\nAfter.\n")

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def edit(self, old, new, count=1):
        with open(self.readme) as f:
            text = f.read()
        self.assertIn(old, text)
        with open(self.readme, "w") as f:
            f.write(text.replace(old, new, count))

    def errors(self):
        return figures.check(self.json, [self.readme])

    def test_rendered_fixture_passes(self):
        self.assertEqual(self.errors(), [])

    def test_first_line_names_commit_and_date(self):
        meta = figures.render_all(self.fig)["meta"].split("\n")[0]
        self.assertTrue(meta.startswith("Measured at 0123456789ab on 2026-11-25"), meta)

    def test_one_edited_number_fails(self):
        self.edit("| xdp-l2 | 4.10 (4.00..4.20) |", "| xdp-l2 | 4.11 (4.00..4.20) |")
        errs = self.errors()
        self.assertEqual(len(errs), 1, errs)
        self.assertIn("block 'fwd' differs from its rendering", errs[0])

    def test_missing_commit_fails(self):
        del self.fig["commit"]
        self.json = self.write("figures.json", json.dumps(self.fig))
        errs = self.errors()
        self.assertEqual(len(errs), 1, errs)
        self.assertIn("no commit", errs[0])

    def test_runs_and_raw_values_disagreeing_fail(self):
        self.fig["sections"]["fwd"]["runs"] = 5
        self.json = self.write("figures.json", json.dumps(self.fig))
        self.assertIn("section fwd: runs 5 but 3 raw runs", self.errors()[0])

    def test_block_absent_from_json_fails(self):
        self.edit("<!-- figures:fwd:begin -->", "<!-- figures:fwd_jumbo:begin -->")
        self.edit("<!-- figures:fwd:end -->", "<!-- figures:fwd_jumbo:end -->")
        self.assertIn("block 'fwd_jumbo' is not in", "\n".join(self.errors()))

    def test_unpaired_marker_fails(self):
        self.edit("<!-- figures:fwd:end -->", "")
        self.assertRegex("\n".join(self.errors()), "without its pair|ends with the marker of")

    def test_header_says_3_runs_body_has_5_values(self):
        text = ("`cmd`, 3 runs; Mpps.\n\n| path | Mpps | Mpps per run |\n|---|---|---|\n"
                "| a | 1.00 (0.90..1.10) | 0.90; 1.00; 1.10; 1.20; 1.30 |\n")
        errs = figures.table_errors("t", text)
        self.assertEqual(len(errs), 1, errs)
        self.assertIn("holds 5 values, the block says 3 runs", errs[0])

    def test_column_count_mismatch(self):
        text = "| a | b | c |\n|---|---|---|\n| 1 | 2 |\n| 1 | 2 | 3 |\n"
        errs = figures.table_errors("t", text)
        self.assertEqual(len(errs), 1, errs)
        self.assertIn("has 2 cells, its header 3", errs[0])

    def test_separator_mismatch(self):
        errs = figures.table_errors("t", "| a | b |\n|---|\n| 1 | 2 |\n")
        self.assertIn("separator has 1 columns, header 2", errs[0])

    def test_tables_in_code_blocks_are_not_tables(self):
        self.assertEqual(figures.table_errors("t", "```\n| a | b |\n| 1 |\n```\n"), [])

    def with_commit(self, commit):
        self.fig["commit"] = commit
        self.json = self.write("figures.json", json.dumps(self.fig))
        self.readme = self.write("README.md", "# t\n\nText 0.80 of a goal.\n\n" +
                                 figures.blocks_md(self.fig, figures.render_all(self.fig)) + "\nAfter.\n")
        return [sys.executable, os.path.join(HERE, "figures.py"), "--check", "--json", self.json, "--readme", self.readme]

    def test_dirty_or_partial_sitting_fails(self):
        self.fig["dirty"] = True
        self.fig["made_by"] = "scripts/figures.py --quick"
        self.json = self.write("figures.json", json.dumps(self.fig))
        errs = self.errors()
        self.assertTrue(any("dirty tree" in e for e in errs), errs)
        self.assertTrue(any("smoke or partial" in e for e in errs), errs)

    def test_deleted_block_fails(self):
        self.edit("<!-- figures:reload:begin -->", "")
        self.edit("<!-- figures:reload:end -->", "")
        self.assertTrue(any("'reload'" in e and "is in none of" in e for e in self.errors()), self.errors())

    def test_misspelt_marker_fails(self):
        self.edit("<!-- figures:reload:end -->", "<!-- figures:reload-x:end -->")
        errs = self.errors()
        self.assertTrue(errs and any("reload" in e for e in errs), errs)

    def test_cli_check_exit_codes(self):
        head = subprocess.run(["git", "-C", HERE, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        cmd = self.with_commit(head)
        ok = subprocess.run(cmd, capture_output=True, text=True)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("0 commit(s) behind HEAD", ok.stdout)
        self.edit("| frames fallen through to the default | 0", "| frames fallen through to the default | 1")
        bad = subprocess.run(cmd, capture_output=True, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("figures-check: ", bad.stderr)
        self.assertIn("'reload' differs", bad.stderr)


    def peers_sitting(self, sections=None):
        """A partial sitting (`--sections peers`) of two runs, and the README with its block."""
        def run(fp, peer):
            rows = [("XDP_DROP", "fastpath", 4.0, None), ("XDP_DROP", "xdp-bench drop", None, "libbpf: no BTF"),
                    ("AF_XDP rxonly", "fastpath", fp, None), ("AF_XDP rxonly", "testpmd net_af_xdp", peer, None)]
            return {"peers": [{"group": g, "who": w, "command": f"{w} cmd", "runs": [v], "error": e,
                               "version": "this build" if w == "fastpath" else "dpdk-dev 22.11"}
                              for g, w, v, e in rows]}
        fig = dict(self.fig, made_by="scripts/figures.py --sections peers",
                   sections=sections or {"peers": {"command": "fastpath compare --peers", "runs": 2, "duration": 3,
                                                   "raw": [run(2.0, 1.0), run(3.0, 2.0)]}})
        path = self.write("figures-peers.json", json.dumps(fig))
        block = "\n".join(figures.BY_NAME["peers"].render(fig["sections"]["peers"]))
        with open(self.readme, "a") as f:
            f.write(f"<!-- figures:peers:begin -->\n{block}\n<!-- figures:peers:end -->\n")
        return path, block

    def test_partial_sitting_block_checks_against_its_own_json(self):
        extra, block = self.peers_sitting()
        self.assertEqual(figures.check(self.json, [self.readme], [extra]), [])
        # fastpath / peer: the median of the per-run ratios 2/1 and 3/2; a peer without a rate
        # says why.
        self.assertIn("| AF_XDP rxonly | testpmd net_af_xdp | 1.50 (1.00..2.00) | 0.38 (0.25..0.50) | "
                      "1.75 (1.50..2.00) |", block)
        self.assertIn("dpdk-dev 22.11", block)
        self.assertIn("| XDP_DROP | xdp-bench drop | - |", block)
        self.assertIn("libbpf: no BTF", block)
        self.edit("1.75 (1.50..2.00)", "1.80 (1.50..2.00)")
        self.assertTrue(any("'peers' differs" in e for e in figures.check(self.json, [self.readme], [extra])))
        # Without its JSON the block names a section the full sitting lacks.
        self.assertTrue(any("'peers' is not in" in e for e in figures.check(self.json, [self.readme])))

    def test_partial_sitting_overlapping_the_full_one_fails(self):
        extra, _ = self.peers_sitting()
        with open(extra) as f:
            fig = json.load(f)
        name = next(iter(self.fig["sections"]))
        fig["sections"][name] = self.fig["sections"][name]
        with open(extra, "w") as f:
            json.dump(fig, f)
        errs = figures.check(self.json, [self.readme], [extra])
        self.assertTrue(any(f"section {name} is in the full sitting too" in e for e in errs), errs)

    def test_later_partial_sitting_supersedes_a_section_and_its_goals(self):
        # Superseding needs a commit descending from the full sitting's, in HEAD's history.
        head = subprocess.run(["git", "-C", HERE, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        self.fig["commit"] = head
        extra, _ = self.peers_sitting()
        with open(extra) as f:
            fig = json.load(f)
        name = next(iter(self.fig["sections"]))
        fig["sections"][name] = self.fig["sections"][name]
        fig["finished"] = "9999-01-01 00:00 UTC"  # after the full sitting
        fig["commit"] = head
        # A commit outside the history cannot supersede.
        with open(extra, "w") as f:
            json.dump(dict(fig, commit="0" * 40), f)
        errs = figures.all_blocks(self.fig, [extra])[1]
        self.assertTrue(any("must descend from the full sitting's" in e for e in errs), errs)
        with open(extra, "w") as f:
            json.dump(fig, f)
        blocks, errs = figures.all_blocks(self.fig, [extra])
        self.assertEqual(errs, [])
        self.assertIn(f"{name} (at {fig['commit'][:12]})", blocks["goals"])
        # The same section in a second partial sitting: the one that finished last is shown;
        # two that finished the same minute are a problem.
        same = self.write("figures-again.json", json.dumps(fig))
        errs = figures.all_blocks(self.fig, [extra, same])[1]
        self.assertTrue(any(f"section {name} is in " in e and "same minute" in e for e in errs), errs)
        later = json.loads(json.dumps(fig))
        later["finished"] = "9999-01-02 00:00 UTC"
        later["sections"][name]["command"] = "the-later-sitting"
        later_path = self.write("figures-later.json", json.dumps(later))
        blocks, errs = figures.all_blocks(self.fig, [later_path, extra])
        self.assertEqual(errs, [])
        self.assertIn("the-later-sitting", blocks[name])

    def test_partial_sittings_own_md_is_checked_against_its_own_json(self):
        extra, block = self.peers_sitting()
        own_md = extra[:-len(".json")] + ".md"
        with open(own_md, "w") as f:
            f.write(f"<!-- figures:peers:begin -->\n{block}\n<!-- figures:peers:end -->\n")
        self.assertEqual(figures.check(self.json, [self.readme, own_md], [extra]), [])
        with open(own_md, "w") as f:
            f.write(f"<!-- figures:peers:begin -->\n{block.replace('1.75', '1.80')}\n<!-- figures:peers:end -->\n")
        errs = figures.check(self.json, [self.readme, own_md], [extra])
        self.assertTrue(any("differs from its own sitting's rendering" in e for e in errs), errs)

    def test_goals_judge_the_newer_runs(self):
        fwd = lambda x: {"command": "c", "runs": 1, "duration": 3,
                         "raw": [{"xdp-l3": [x, 5.0], "kernel": [1.0, 5.0], "xsk-l2": [0.3, 5.0]}]}
        full = {"sections": {"fwd": fwd(2.0)}}
        row = lambda lines: next(x for x in lines if x.startswith("| XDP L3"))
        self.assertIn("| **not met** |", row(figures.render_goals(full)))
        self.assertIn("| met |", row(figures.render_goals(full, {"fwd": (fwd(3.5), "a" * 40)})))

    def test_commit_outside_the_history_fails(self):
        bad = subprocess.run(self.with_commit("0123456789abcdef0123456789abcdef01234567"), capture_output=True, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("not in HEAD's history", bad.stderr)


class Sitting(unittest.TestCase):
    """The sitting's bookkeeping with fake sections (no root, no benchmark): interrupted, resumed,
    every run done once, the JSON naming the commit, the README's blocks rendered and checked."""

    def test_interrupted_sitting_resumes_and_renders(self):
        with open(FIXTURE) as f:
            raw = json.load(f)["sections"]
        calls = []

        def fake(name, fail_at=None):
            def run(d, ctx):
                calls.append(name)
                if fail_at is not None and len(calls) == fail_at:
                    raise KeyboardInterrupt
                return raw[name]["raw"][0]
            return run

        saved = {n: (figures.BY_NAME[n].run, figures.BY_NAME[n].runs) for n in ("reload", "many_flows")}
        geteuid = os.geteuid
        with tempfile.TemporaryDirectory() as d:
            out, readme = os.path.join(d, "figures"), os.path.join(d, "README.md")
            with open(readme, "w") as f:
                f.write("x\n<!-- figures:reload:begin -->\nold 0.80 s\n<!-- figures:reload:end -->\n"
                        "<!-- figures:many_flows:begin -->\nold\n<!-- figures:many_flows:end -->\n")
            args = [("--sections", "reload,many_flows"), ("--out", out), ("--readme", readme)]
            try:
                os.geteuid = lambda: 0
                figures.BY_NAME["reload"].runs = figures.BY_NAME["many_flows"].runs = 3
                figures.BY_NAME["reload"].run = fake("reload", fail_at=5)
                figures.BY_NAME["many_flows"].run = fake("many_flows")
                sys.argv = ["figures.py"] + [x for a in args for x in a]
                with self.assertRaises(KeyboardInterrupt), contextlib.redirect_stderr(io.StringIO()):
                    figures.main()
                with open(out + ".state.json") as f:
                    self.assertEqual({k: len(v) for k, v in json.load(f)["raw"].items()}, {"reload": 2, "many_flows": 2})
                figures.BY_NAME["reload"].run = fake("reload")
                with contextlib.redirect_stderr(io.StringIO()):
                    figures.main()
            finally:
                os.geteuid = geteuid
                for n, (run, runs) in saved.items():
                    figures.BY_NAME[n].run, figures.BY_NAME[n].runs = run, runs
            # Interleaved, the interrupted step done again, nothing else twice.
            self.assertEqual(calls, ["reload", "many_flows"] * 2 + ["reload", "reload", "many_flows"])
            self.assertFalse(os.path.exists(out + ".state.json"))
            with open(out + ".json") as f:
                fig = json.load(f)
            self.assertRegex(fig["commit"], "^[0-9a-f]{40}$")
            self.assertEqual([fig["sections"][n]["runs"] for n in ("reload", "many_flows")], [3, 3])
            self.assertEqual(len(fig["sections"]["reload"]["raw"]), 3)
            with open(readme) as f:
                self.assertNotIn("old", f.read())
            # Rendered and checked: the only complaints are that a --sections sitting is partial
            # and writes only its sections' blocks (the README's meta, goals, headline and agreement stay
            # the full sitting's), and, where this test runs in a tree with uncommitted changes,
            # that it is dirty.
            errs = [e for e in figures.check(out + ".json", [readme, out + ".md"]) if "dirty tree" not in e]
            self.assertIn("a smoke or partial sitting", errs[0])
            self.assertEqual(sorted(e.split("'")[1] for e in errs[1:]), ["agreement", "goals", "headline", "meta"], errs)
            self.assertTrue(all("is in none of" in e for e in errs[1:]), errs)
            with open(out + ".md") as f:
                self.assertEqual([b[0] for b in figures.find_blocks(f.read())], ["reload", "many_flows"])


class Goals(unittest.TestCase):
    """The goals block judges each goal by the median of the runs' ratios, never by one run."""

    def fig(self, l3):
        raw = [{"xdp-l3": [x, 5.0], "kernel": [1.0, 5.0], "xsk-l2": [0.3, 5.0]} for x in l3]
        return {"sections": {"fwd": {"command": "c", "runs": len(raw), "duration": 3, "raw": raw}}}

    def row(self, l3):
        return next(x for x in figures.render_goals(self.fig(l3)) if x.startswith("| XDP L3"))

    def test_median_reaching_the_goal_is_met(self):
        self.assertIn("| 3.10 (2.90..3.20) | met |", self.row([2.9, 3.1, 3.2]))

    def test_one_good_run_does_not_meet_it(self):
        self.assertIn("| **not met** |", self.row([2.0, 3.5, 2.9]))

    def test_headline_shows_the_goals_median_and_verdict(self):
        # The README's headline row is the goals block's median and verdict for the same runs.
        lines = figures.render_headline(self.fig([2.0, 3.5, 2.9]))
        row = next(x for x in lines if x.startswith("| XDP L3"))
        self.assertEqual(row, "| XDP L3 forwarding, 64 B | 2.90 | the kernel's IP forwarding | 3 (**not met**) |")
        row = next(x for x in lines if x.startswith("| AF_XDP forwarding"))
        self.assertIn("| 0.30 |", row)
        # A goal of a section this sitting lacks is shown without a number.
        row = next(x for x in lines if x.startswith("| capture divert"))
        self.assertIn("| - |", row)
        self.assertIn("not measured", row)

    def test_goals_of_absent_sections_say_not_measured(self):
        row = next(x for x in figures.render_goals(self.fig([3.0])) if x.startswith("| capture divert"))
        self.assertIn("not measured (no capture section)", row)

    def test_judged_at_the_precision_shown(self):
        self.assertIn("| 3.00 (3.00..3.00) | met |", self.row([2.996]))

    def test_reference_zero_is_not_measured_not_a_crash(self):
        fig = self.fig([3.0])
        fig["sections"]["fwd"]["raw"][0]["kernel"] = [0.0, 5.0]
        row = next(x for x in figures.render_goals(fig) if x.startswith("| XDP L3"))
        self.assertIn("not measured (reference 0)", row)

    def ddos_row(self, fp, nft):
        """The coalesced survivable-rate goal's row for one run where the classifier survives
        `fp` and nftables `nft` frames/s (None: no rate survived)."""
        surv = [{"model": "coalesced", "defence": d, "survivable_pps": v} for d, v in (("fastpath", fp), ("nft", nft))]
        run = {"models": [{"model": "coalesced"}], "survivable": surv,
               "phases": [{"model": "coalesced", "defence": "none", "offered": "", "transactions_per_s": 1.0}]}
        fig = {"sections": {"ddos_udp": {"command": "c", "runs": 1, "duration": 2, "raw": [run]}}}
        return next(x for x in figures.render_goals(fig) if x.startswith("| UDP flood, coalesced model: the classifier"))

    def syn_rows(self, sc_tps, probe=None):
        """The syncookie goals' rows of one ddos_syn run with no-flood 100 trans/s and
        fastpath-syncookie at max `sc_tps` (None: a run made before that defence)."""
        phases = [{"model": m, "defence": "none", "offered": "", "transactions_per_s": 100.0}
                  for m in ("per-frame", "coalesced")]
        if sc_tps is not None:
            phases += [{"model": m, "defence": "fastpath-syncookie", "offered": "max", "transactions_per_s": sc_tps}
                       for m in ("per-frame", "coalesced")]
        if probe is not None:
            for p in phases[2:]:
                p.update(connects_attempted=200, connects_succeeded=probe[0], connect_p99_ms=probe[1])
        run = {"models": [{"model": "per-frame"}, {"model": "coalesced"}], "survivable": [], "phases": phases}
        command = "c --defences none,fastpath-syncookie" if sc_tps is not None else "c"
        fig = {"sections": {"ddos_syn": {"command": command, "runs": 1, "duration": 2, "raw": [run]}}}
        return [x for x in figures.render_goals(fig) if x.startswith("| SYN flood") and "fastpath-syncookie" in x]

    def test_syncookie_goals_judge_new_runs_and_skip_old_ones(self):
        self.assertEqual(self.syn_rows(None), [])
        rows = self.syn_rows(50.0)
        self.assertEqual(len(rows), 6)
        trans = [r for r in rows if "trans/s" in r]
        self.assertTrue(len(trans) == 2 and all("| 0.50 (0.50..0.50) | met |" in r for r in trans), rows)
        # A run of the defence without the connect probe's fields: its goals say so, never vanish.
        self.assertTrue(all("not measured" in r for r in rows if "trans/s" not in r), rows)
        low = [r for r in self.syn_rows(49.0) if "trans/s" in r]
        self.assertTrue(len(low) == 2 and all("| **not met** |" in r for r in low), low)
        rows = self.syn_rows(50.0, (198, 2.5))
        self.assertEqual(len(rows), 6)
        self.assertTrue(all("| met |" in r for r in rows), rows)
        rows = self.syn_rows(50.0, (197, None))
        conn = [r for r in rows if "new connections" in r or "p99 connect" in r]
        self.assertEqual(len(conn), 4)
        self.assertTrue(all("| **not met** |" in r for r in conn), conn)

    def test_a_classifier_surviving_nothing_is_not_met_never_not_measured(self):
        self.assertIn("| 0.00 (0.00..0.00) | **not met** |", self.ddos_row(None, None))
        self.assertIn("| **not met** |", self.ddos_row(None, 250000))

    def test_survival_ratio_met_at_four_and_when_nft_survives_nothing(self):
        self.assertIn("| 4.00 (4.00..4.00) | met |", self.ddos_row(1000000, 250000))
        self.assertIn("| **not met** |", self.ddos_row(250000, 100000))
        self.assertIn("| inf (inf..inf) | met |", self.ddos_row(250000, None))

    def ack_rows(self, sc, nft):
        """The ACK flood goals' rows (per-frame, coalesced) of one ddos_ack run with
        fastpath-syncookie at `sc` and nftables at `nft` trans/s at 1M in both models (None:
        no such phase), and the stateless classifier keeping everything."""
        phases = [{"model": m, "defence": "none", "offered": "", "transactions_per_s": 100.0}
                  for m in ("per-frame", "coalesced")]
        for m in ("per-frame", "coalesced"):
            for d, v in (("fastpath-syncookie", sc), ("nft", nft), ("fastpath", 100.0)):
                if v is not None:
                    phases.append({"model": m, "defence": d, "offered": "1M", "transactions_per_s": v})
        run = {"models": [{"model": "per-frame"}, {"model": "coalesced"}], "survivable": [], "phases": phases}
        fig = {"sections": {"ddos_ack": {"command": "c --defences none,nft,fastpath,fastpath-syncookie", "runs": 1,
                                         "duration": 2, "raw": [run]}}}
        rows = [x for x in figures.render_goals(fig) if x.startswith("| ACK flood") and "trans/s" in x]
        self.assertEqual(len(rows), 2, rows)
        return rows

    def test_ack_goal_judges_the_syncookie_row_against_nftables_at_1m(self):
        self.assertTrue(all("| 4.00 (4.00..4.00) | met |" in r for r in self.ack_rows(40.0, 10.0)))
        # The stateless classifier row keeping everything does not stand in for the syncookie one.
        self.assertTrue(all("| **not met** |" in r for r in self.ack_rows(15.0, 10.0)))
        self.assertTrue(all("| inf (inf..inf) | met |" in r for r in self.ack_rows(5.0, 0.0)))
        # Both lost the service: not met (0), never "not measured".
        self.assertTrue(all("| 0.00 (0.00..0.00) | **not met** |" in r for r in self.ack_rows(0.0, 0.0)))
        self.assertTrue(all("not measured" in r for r in self.ack_rows(None, 10.0)))
        row = next(x for x in figures.render_goals(self.fig([3.0])) if x.startswith("| ACK flood, per-frame"))
        self.assertIn("not measured (no ddos_ack section)", row)
        rows = [x.split(" | ")[0] for x in figures.render_goals(self.fig([3.0])) if x.startswith(("| SYN", "| ACK"))]
        self.assertEqual([r[2:5] for r in rows], ["SYN"] * 6 + ["ACK"] * 4, "each flood's rows together")

    def test_ack_connects_goal_at_1m(self):
        phases = [{"model": m, "defence": "fastpath-syncookie", "offered": o, "transactions_per_s": 1.0,
                   "connects_attempted": 200, "connects_succeeded": ok}
                  for m in ("per-frame", "coalesced") for o, ok in (("1M", 198), ("max", 3))]
        run = {"models": [{"model": "per-frame"}, {"model": "coalesced"}], "survivable": [], "phases": phases}
        fig = {"sections": {"ddos_ack": {"command": "c --defences nft,fastpath-syncookie", "runs": 1, "duration": 2,
                                         "raw": [run]}}}
        rows = [x for x in figures.render_goals(fig) if x.startswith("| ACK flood") and "new connections" in x]
        self.assertEqual(len(rows), 2, rows)
        self.assertTrue(all("| 0.99 (0.99..0.99) | met |" in r for r in rows), rows)

    def test_survival_ratio_without_nftables_in_the_run_is_not_met_by_default(self):
        run = {"models": [{"model": "coalesced"}],
               "survivable": [{"model": "coalesced", "defence": "fastpath", "survivable_pps": 250000}],
               "phases": [{"model": "coalesced", "defence": "none", "offered": "", "transactions_per_s": 1.0}]}
        fig = {"sections": {"ddos_udp": {"command": "c", "runs": 1, "duration": 2, "raw": [run]}}}
        row = next(x for x in figures.render_goals(fig) if x.startswith("| UDP flood, coalesced model: the classifier"))
        self.assertIn("not measured", row)

class PhaseLines(unittest.TestCase):
    """A sitting's long steps show their progress: fastpath's lines per phase are passed on to
    stderr as they come; its other stderr lines are kept for the error message only."""

    def test_phase_lines_are_passed_on_and_the_rest_kept(self):
        import fplib
        script = ("import sys; print('bench ddos: phase 1/2 (none): 0 done in 0 s, about 8 s left', file=sys.stderr); "
                  "print('note: other', file=sys.stderr); print('bench ddos: 2 phases done in 9 s', file=sys.stderr); "
                  "print('{\"ok\": 1}')")
        echo = io.StringIO()
        code, out, err = fplib.run_forwarding_phases([sys.executable, "-c", script], echo=echo)
        self.assertEqual((code, out.strip()), (0, '{"ok": 1}'))
        self.assertEqual(echo.getvalue(), "  bench ddos: phase 1/2 (none): 0 done in 0 s, about 8 s left\n"
                                          "  bench ddos: 2 phases done in 9 s\n")
        self.assertIn("note: other", err)


if __name__ == "__main__":
    unittest.main()
