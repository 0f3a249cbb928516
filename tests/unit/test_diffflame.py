"""The differential flame graph: nodes from two growths by stack (pure), and the plotly icicle as one
self-contained HTML file that renders in headless Chromium (skipped only where chromium is missing)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from crdscale.report.diffflame import diff_icicle_figure, diff_icicle_nodes, run_growth_stacks, write_diff_flame_html
from crdscale.rundir import read_run

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _nodes():
    base = pd.Series({"main;a;zap": 400.0, "main;b": 100.0, "main;a;tiny": 0.1})
    changed = pd.Series({"main;a;cacher.Watch": 300.0, "main;b": 150.0, "main;a;tiny": 0.1})
    return diff_icicle_nodes(base, changed)


def test_nodes_add_up_and_fold_narrow_paths():
    nodes = _nodes().set_index("name")
    assert nodes.loc["all", "size"] == pytest.approx(400 + 100 + 300 + 150 + 0.2)
    assert nodes.loc["all", "difference"] == pytest.approx((300 + 150) - (400 + 100))
    assert nodes.loc["a", "difference"] == pytest.approx(300 - 400)
    assert nodes.loc["zap", "changed"] == 0 and nodes.loc["zap", "difference"] == -400
    assert "tiny" not in nodes.index  # under 0.2 % of the root: folded into its parent
    table = _nodes()
    parents = set(table["parent"]) - {""}
    assert parents <= set(table["id"]) and (table["parent"] == "").sum() == 1


def test_figure_is_one_icicle_with_both_colourings():
    figure = diff_icicle_figure(_nodes())
    assert [t.type for t in figure.data] == ["icicle"]
    labels = [b.label for b in figure.layout.updatemenus[0].buttons]
    assert labels == ["colour by growth", "colour by cause"]


def test_html_is_self_contained_and_renders_in_chromium(tmp_path):
    nodes = diff_icicle_nodes(
        run_growth_stacks(read_run(ROOT / "data" / "reference-run-v1.24.0")),
        run_growth_stacks(read_run(ROOT / "data" / "reference-run")),
    )
    assert nodes.loc[nodes["name"] == "go.uber.org/zap/zapcore.newCounters", "difference"].sum() < -400_000
    html = write_diff_flame_html(diff_icicle_figure(nodes), tmp_path / "diff.html")
    text = html.read_text()
    assert '<script src="http' not in text and "plotly" in text  # plotly.js inside: opens offline
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000", "--dump-dom", html.as_uri()],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    assert 'class="trace icicle"' in dom
