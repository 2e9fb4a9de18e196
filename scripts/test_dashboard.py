"""The Grafana dashboard (dist/grafana/) asks only for series fastpath exports: every metric
name in its queries is one the CLI's source registers (a renamed metric fails here)."""
import json
import re
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class DashboardMetrics(unittest.TestCase):
    def test_every_queried_metric_is_exported(self):
        src = "".join(p.read_text() for p in (ROOT / "crates" / "fastpath-cli" / "src").glob("*.rs"))
        exported = set(re.findall(r'"(fastpath_[a-z_]+)"', src))
        for path in (ROOT / "dist" / "grafana").glob("*.json"):
            d = json.loads(path.read_text())
            exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
            exprs += [v.get("query", "") for v in d["templating"]["list"] if isinstance(v.get("query"), str)]
            names = {n for e in exprs for n in re.findall(r"fastpath_[a-z_]+", e)}
            self.assertTrue(names, f"{path}: no fastpath metric queried")
            self.assertEqual(names - exported, set(), f"{path}: queries metrics fastpath does not export")


if __name__ == "__main__":
    unittest.main()
