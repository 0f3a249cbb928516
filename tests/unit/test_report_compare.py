"""crdscale compare on recorded runs: the joint-fit table, the headline, JSON, and
the rendered comparison (notebook, HTML, findings.md with both runs' provenance)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crdscale.analysis.compare import compare_runs, differences_table, run_labels, series_table
from crdscale.cli.main import main
from crdscale.errors import UsageError
from crdscale.report.compare import comparison_markdown, headline

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "data" / "reference-run"
OTHER = ROOT / "tests" / "data" / "run-kube-apiserver"


@pytest.fixture(scope="module")
def comparison():
    return compare_runs([REFERENCE, OTHER])


def test_comparison_tables(comparison):
    assert comparison.labels == ["reference-run", "run-kube-apiserver"]  # same version: directory names
    assert any("CRD set unknown" in w for w in comparison.warnings)
    table = differences_table(comparison)
    assert table["cause"].iloc[-1] == "total" and set(table["run"]) == {"run-kube-apiserver"}
    total = comparison.joint.query("metric == 'bytes' and cause == 'total'").iloc[0]
    assert total["difference_low"] < total["difference"] < total["difference_high"]
    assert total["per_crd"] - total["per_crd_reference"] == pytest.approx(total["difference"])
    series = series_table(comparison).set_index(["run", "metric"])
    assert series.loc[("reference-run", "rss_bytes"), "peak"] > series.loc[("reference-run", "rss_bytes"), "per_crd"]
    assert series.loc[("reference-run", "establish_seconds"), "end"] > 0
    diff = comparison.profile_diff
    # Per CRD, the profile diff is the difference of the runs' growths: its functions add up to the fitted total.
    assert diff["flat_per_crd"].sum() == pytest.approx(total["difference"])
    assert set(diff["run"]) == {"run-kube-apiserver"}


def test_headline_and_markdown(comparison):
    line = headline(comparison)
    assert line.startswith("run-kube-apiserver holds") and "per served CRD than reference-run" in line
    md = comparison_markdown(comparison)
    assert md.splitlines()[2] == f"**{line}**"
    assert "| CRD set sha256 | 1831615158" in md and "binary kube-apiserver" in md


def test_labels_say_what_differs():
    a = {"versions": {"kube-apiserver": "v1.37.1"}, "scenario": {"target": {"env": {"GOGC": "100"}}}}
    b = {"versions": {"kube-apiserver": "v1.24.0"}, "scenario": {"target": {"env": {"GOGC": "100"}}}}
    c = {"versions": {"kube-apiserver": "v1.37.1"}, "scenario": {"target": {"env": {"GOGC": "50"}}}}
    assert run_labels([a, b], ["x", "y"]) == ["v1.37.1", "v1.24.0"]
    assert run_labels([a, c], ["x", "y"]) == ["v1.37.1 GOGC=100", "v1.37.1 GOGC=50"]
    cell = {"scenario": {"experiment": {"cell": "GOGC=50"}}}
    assert run_labels([cell, {"scenario": {"experiment": {"cell": "GOGC=100"}}}], ["x", "y"]) == ["GOGC=50", "GOGC=100"]


def test_cli_json_and_errors(capsys):
    assert main(["compare", str(REFERENCE), str(OTHER), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["reference"] == "reference-run" and data["joint"] and data["headline"].startswith("run-kube")
    assert main(["compare", str(REFERENCE)]) == 2
    with pytest.raises(UsageError):
        compare_runs([REFERENCE, OTHER], labels=["same", "same"])


@pytest.mark.timeout(400)
def test_rendered_comparison(tmp_path, capsys):
    out = tmp_path / "cmp"
    assert (
        main(["compare", str(REFERENCE), str(OTHER), "--out", str(out), "--label", "v1.37.1", "--label", "older"]) == 0
    )
    assert capsys.readouterr().out.splitlines()[-1] == str(out / "report-nocode.html")
    findings = (out / "findings.md").read_text()
    assert findings.startswith("# crdscale comparison: v1.37.1 vs older\n\n**older holds")
    assert (out / "memory-vs-crds.png").is_file() and (out / "per-crd-difference.svg").is_file()
    html = (out / "report-nocode.html").read_text()
    assert "Where the heap differs" in html and "Traceback" not in html


V124 = ROOT / "data" / "reference-run-v1.24.0"
RECORDED_DIFF = ROOT / "tests" / "data" / "compare" / "v1.24.0-diff-v1.37.1.top.txt"


def test_v124_reference_shows_the_zap_delta():
    """The two committed reference runs: v1.24.0 holds ~448 KiB of zap counters more per served CRD."""
    comparison = compare_runs([REFERENCE, V124])
    assert comparison.labels == ["v1.37.1", "v1.24.0"] and comparison.warnings == []
    zap = comparison.joint.query("metric == 'bytes' and cause == 'zap-counters'").iloc[0]
    assert 0 < zap["difference_low"] < zap["difference"] < zap["difference_high"]
    assert 350 * 1024 < zap["difference"] < 550 * 1024


def test_profile_diff_is_exact_against_pprof():
    """`go tool pprof -top -nodecount=40 -unit=B -diff_base=<v1.37.1 last served> <v1.24.0 last served>`, recorded:
    the same table from crdscale's diff, and the comparison's per-CRD diff holds the same values."""
    from crdscale.analysis import pprof
    from crdscale.analysis.pprof.text import parse_pprof_top
    from crdscale.collect.pprof import read_profile

    recorded = RECORDED_DIFF.read_text()
    args = recorded.splitlines()[0].removeprefix("# args:").split()
    base = read_profile(ROOT / next(a for a in args if a.startswith("-diff_base=")).removeprefix("-diff_base="))
    profile = read_profile(ROOT / args[-1])
    table = pprof.diff(profile, base, nodecount=40, nodefraction=0.005)
    ours = pprof.format_top(table, profile, "B")
    keep = [ln for ln in recorded.splitlines()[1:] if not ln.startswith("Time:")]
    assert [ln for ln in ours.splitlines() if not ln.startswith("Time:")] == keep
    full = compare_runs([REFERENCE, V124]).profile_diff.set_index("name")
    want_header, want = parse_pprof_top(recorded)
    for row in want.itertuples(index=False):
        flat, cum = int(row.flat.removesuffix("B")), int(row.cum.removesuffix("B"))
        assert full.loc[row.name, "flat"] == flat and full.loc[row.name, "cum"] == cum
    # Per CRD, each run's growth from its first served profile: baselines cancel, and the columns
    # agree with the fitted differences (v1.24.0's zap counters are one function).
    comparison = compare_runs([REFERENCE, V124])
    joint = comparison.joint.query("metric == 'bytes'").set_index("cause")
    assert full["flat_per_crd"].sum() == pytest.approx(joint.loc["total", "difference"])
    zap = full.loc["go.uber.org/zap/zapcore.newCounters", "flat_per_crd"]
    assert zap == pytest.approx(joint.loc["zap-counters", "difference"])


def test_repeated_cells_are_compared_as_configurations(tmp_path):
    """Cells `...,repeat=N` of one configuration are pooled: the mean of their per-CRD costs, the
    interval from their spread, and a table of that spread against one run's interval."""
    import shutil

    runs = []
    for name, source in (("new-1", REFERENCE), ("new-2", REFERENCE), ("old-1", V124), ("old-2", V124)):
        shutil.copytree(source, tmp_path / name)
        manifest = json.loads((tmp_path / name / "manifest.json").read_text())  # repeats are runs of their own
        (tmp_path / name / "manifest.json").write_text(
            json.dumps({**manifest, "run_id": f"{manifest['run_id']}-{name}"})
        )
        runs.append(tmp_path / name)
    labels = ["v=new,repeat=1", "v=new,repeat=2", "v=old,repeat=1", "v=old,repeat=2"]
    comparison = compare_runs(runs, labels)
    assert comparison.reference == "v=new" and comparison.compared == ["v=old"]
    total = comparison.joint.query("metric == 'bytes' and cause == 'total'").iloc[0]
    single = compare_runs([REFERENCE, V124]).joint.query("metric == 'bytes' and cause == 'total'").iloc[0]
    assert total["run"] == "v=old" and total["difference"] == pytest.approx(single["difference"])
    # Identical copies: no spread between repeats, so the mean is exact.
    assert total["difference_low"] == pytest.approx(total["difference_high"])
    spread = comparison.repeat_spread.query("metric == 'bytes' and phase == 'served' and cause == 'total'")
    assert set(spread["configuration"]) == {"v=new", "v=old"} and (spread["repeats"] == 2).all()
    md = comparison_markdown(comparison)
    assert "## Repeats" in md and "v=old holds" in md


def test_list_headline_and_table_say_where_the_lists_went():
    from types import SimpleNamespace

    import pandas as pd

    from crdscale.analysis.perobject import CELL_COLUMNS
    from crdscale.report.compare import list_headline
    from crdscale.report.findings import object_lists_table

    def row(run, kind, heap, request, place, p50, etcd):
        return (run, kind, heap, heap - 500, heap + 500, request, place, p50, p50 * 1.2, p50 * 1.5, 0.01, etcd)

    moved = pd.DataFrame(
        [
            row("none", "customresources", 9000.0, "consistent", "cache", 0.020, 0.0005),
            row("none", "configmaps", 3000.0, "consistent", "cache", 0.020, 0.0004),
            row("watch-cache=0", "customresources", 400.0, "consistent", "etcd", 0.150, 0.030),
            row("watch-cache=0", "configmaps", 3100.0, "consistent", "cache", 0.021, 0.0004),
        ],
        columns=CELL_COLUMNS,
    )
    comparison = SimpleNamespace(cost_moved=moved, object_lists=moved, reference="none", first_run=lambda name: name)
    (sentence,) = list_headline(comparison)  # the ConfigMaps, untouched, are not news
    assert sentence.startswith("watch-cache=0, LISTs of the custom resources against none")
    assert "150.0 ms from etcd vs 20.0 ms from cache" in sentence and "etcd CPU 30.0 ms vs 0.5 ms" in sentence
    table = object_lists_table(moved)
    assert list(table.columns[:5]) == ["run", "kind", "heap per object", "95% CI", "LIST"]
    assert table["etcd CPU ms"].tolist() == ["0.5", "0.4", "30.0", "0.4"]
