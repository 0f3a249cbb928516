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
    assert cell.startswith("heap per CRD " + docs_reference.fmt_value(heap["value"], heap["low"], heap["high"],
                                                                            "bytes"))  # fmt: skip
    assert "(go1.26.8; 1 run," in cell and "CPU per CRD" in cell
    points = docs_reference.history_value(summary_dir)
    assert points.startswith(
        f"{len(findings['changepoints'])} changepoint(s), largest first: v1.24.0 → v1.37.1: kube-apiserver heap"
    )


# ------------------------------------------------------------------------------------------------------------------
# The committed history (data/history/v1.24-v1.37) and the numbers docs/results/history.toml's text quotes from it
# ------------------------------------------------------------------------------------------------------------------

COMMITTED = ROOT / "data" / "history" / "v1.24-v1.37"


def _total(findings: dict, version: str, quantity: str, component: str = "kube-apiserver") -> dict:
    return next(
        r for r in findings["releases"]
        if (r["version"], r["component"], r["quantity"], r["cause"]) == (version, component, quantity, "total")
    )  # fmt: skip


def test_the_history_page_text_quotes_the_committed_numbers():
    """Every number the page's prose quotes (its rows are rendered) is what the committed summary holds."""
    from crdscale.units import fmt_bytes

    findings = json.loads((COMMITTED / "findings.json").read_text())
    summary = json.loads((COMMITTED / "summary.json").read_text())
    text = " ".join((ROOT / "docs" / "results" / "history.toml").read_text().split())
    assert len(findings["versions"]) == 10
    expected = [
        f"{summary['span_seconds'] / 60:.1f} minutes",
        f"({summary['releases']['v1.26.13']['run_seconds'][0] / 60:.1f} minutes",
    ]
    runs = [s for v, r in summary["releases"].items() if v != "v1.26.13" for s in r["run_seconds"]]
    expected.append(f"{min(runs) / 60:.1f}-{max(runs) / 60:.1f} minutes a run")
    heap = {v: fmt_bytes(_total(findings, v, "heap per CRD")["value"]) for v in ("v1.24.0", "v1.28.15")}
    rss = {v: fmt_bytes(_total(findings, v, "RSS per CRD")["value"]) for v in ("v1.24.0", "v1.28.15")}
    cpu = {v: f"{1e3 * _total(findings, v, 'CPU per CRD')['value']:.0f}" for v in ("v1.24.0", "v1.28.15")}
    peak = {v: fmt_bytes(_total(findings, v, "peak RSS")["value"]) for v in ("v1.24.0", "v1.28.15")}
    expected += [
        f"heap per CRD fell from {heap['v1.24.0'].split()[0]} to {heap['v1.28.15']}",
        f"RSS per CRD from {rss['v1.24.0'].split()[0]} to {rss['v1.28.15']}",
        f"CPU per CRD from {cpu['v1.24.0']} to {cpu['v1.28.15']} ms",
        f"peak RSS from {peak['v1.24.0'].split()[0]} to {peak['v1.28.15']}",
    ]
    changes = {(r["older"], r["newer"], r["component"], r["quantity"], r["cause"]): r for r in findings["changes"]}
    zap = changes[("v1.24.0", "v1.26.13", "kube-apiserver", "heap per CRD", "zap-counters")]
    decoding = changes[("v1.24.0", "v1.26.13", "kube-apiserver", "heap per CRD", "decoding")]
    openapi = changes[("v1.26.13", "v1.28.15", "kube-apiserver", "heap per CRD", "openapi")]
    expected += [
        f"−{fmt_bytes(-zap['difference'])} per CRD, {100 * zap['relative']:.0f} %".replace("-", "−"),
        f"(−{fmt_bytes(-decoding['difference'])})",
        f"OpenAPI fell by {fmt_bytes(-openapi['difference'])} per CRD [−{fmt_bytes(-openapi['low'])}, "
        f"−{fmt_bytes(-openapi['high'])}] ({100 * openapi['relative']:.0f} %)".replace("(-", "(−"),
    ]
    later = [v for v in findings["versions"] if v >= "v1.28"]
    for quantity, name in (("heap per CRD", "heap per CRD"), ("RSS per CRD", "RSS per CRD")):
        values = [_total(findings, v, quantity)["value"] for v in later]
        expected.append(f"{name} stays between {fmt_bytes(min(values)).split()[0]} and {fmt_bytes(max(values))}"
                        if name == "heap per CRD" else
                        f"{name} between {fmt_bytes(min(values)).split()[0]} and {fmt_bytes(max(values))}")  # fmt: skip
    cpus = [1e3 * _total(findings, v, "CPU per CRD")["value"] for v in later]
    expected.append(f"CPU per CRD between {min(cpus):.0f} and {max(cpus):.0f} ms")
    with_interval = [
        r for r in findings["changes"] if r["low"] is not None and r["high"] is not None and r["high"] > r["low"]
    ]
    excluding = [r for r in with_interval if r["low"] > 0 or r["high"] < 0]
    expected += [
        f"{len(with_interval)} consecutive differences here have an interval, and {len(excluding)} exclude 0",
        f"about {round(0.05 * len(with_interval))} would by chance",
    ]
    missing = [e for e in expected if e not in text]
    assert not missing, missing
