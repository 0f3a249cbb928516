"""Results rows rendered from a committed history summary (docs/results/history.toml): what
scripts/make_history_summary.py keeps of a recorded history, and the cells the docs generator renders from it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crdscale import docs_reference

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def summary_dir(tmp_path_factory) -> Path:
    """scripts/make_history_summary.py on tests/data/history-small (v1.24.0 and v1.37.1, one run each)."""
    out = tmp_path_factory.mktemp("history") / "history-small"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_history_summary.py"), str(ROOT / "tests/data/history-small"),
         str(out)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return out


def test_the_summary_keeps_the_numbers_and_what_ran(summary_dir):
    assert {p.name for p in summary_dir.iterdir()} == {
        "findings.json", "findings.md", "experiment.json", "workload.toml", "summary.json",
    }  # fmt: skip
    findings = json.loads((summary_dir / "findings.json").read_text())
    assert findings["versions"] == ["v1.24.0", "v1.37.1"]
    assert findings["history_dir"] == "history-small"  # not the recording machine's path
    summary = json.loads((summary_dir / "summary.json").read_text())
    assert summary["releases"]["v1.24.0"]["go"] == "go1.26.8"
    assert len(summary["releases"]["v1.37.1"]["run_seconds"]) == 1


def test_a_release_row_and_the_changepoints_row(summary_dir):
    findings = json.loads((summary_dir / "findings.json").read_text())
    heap = next(
        r for r in findings["releases"]
        if r["version"] == "v1.24.0" and r["component"] == "kube-apiserver" and r["quantity"] == "heap per CRD"
        and r["cause"] == "total"
    )  # fmt: skip
    cell = docs_reference.history_value(summary_dir, release="v1.24.0")
    assert cell.startswith("heap per CRD " + docs_reference._history_number(heap["value"], heap["low"], heap["high"],
                                                                            "bytes"))  # fmt: skip
    assert "(go1.26.8; 1 run," in cell and "CPU per CRD" in cell
    points = docs_reference.history_value(summary_dir)
    assert points.startswith(
        f"{len(findings['changepoints'])} changepoint(s), largest first: v1.24.0 → v1.37.1: kube-apiserver heap"
    )
