"""The registry of named analyses: one entry is all an analysis needs to reach every output."""

from __future__ import annotations

import pandas as pd
import pytest

from crdscale.analysis import registry
from crdscale.analysis.registry import CompareContext, NamedAnalysis, RunData, Section, Table

POINTS = pd.DataFrame({"crds": [0, 10], "phase": ["served", "served"], "value": [1.0, 3.0]})


def _widgets(data: RunData) -> registry.Result:
    return {"widgets": pd.DataFrame({"crds": [int(data.points["crds"].max())], "widgets": [7.0]})}


FAKE = NamedAnalysis(
    name="widgets",
    applies=lambda data: len(data.points) > 0,
    compute=_widgets,
    tables=(Table("widgets", file="widgets.csv"),),
    text=lambda result, metric, confidence: ["", f"Widgets ({metric}): {result['widgets']['widgets'].iloc[0]:g}"],
    findings=lambda result, top: [("widgets", "Widgets", 7.0, float("nan"), float("nan"), "widgets", "the fake")],
    report=lambda result: [Section("Widgets", "What the fake counts.", pd.DataFrame({"widgets": ["7"]}))],
    compare=lambda stacked, context: {"runs": stacked["widgets"][["run"]].assign(reference=context.reference)},
)
NEVER = NamedAnalysis("never", applies=lambda data: False, compute=_widgets, tables=(Table("nothing"),))


def test_each_output_holds_the_analyses_that_apply_in_order():
    results = registry.compute_all(RunData(POINTS), [FAKE, NEVER])
    assert list(results) == ["widgets"] and results["widgets"]["widgets"]["crds"].tolist() == [10]
    assert registry.text_lines(results, "bytes", 0.95, [FAKE, NEVER]) == ["", "Widgets (bytes): 7"]
    assert [r[0] for r in registry.findings_rows(results, 5, [FAKE, NEVER])] == ["widgets"]
    assert [s.title for s in registry.report_sections(results, [FAKE, NEVER])] == ["Widgets"]
    # JSON holds every table of every registered analysis: null where a run has none.
    tables = registry.json_tables(results, [FAKE, NEVER])
    assert list(tables) == ["widgets", "nothing"] and tables["nothing"] is None
    assert [f for f, _ in registry.csv_files(results, [FAKE, NEVER])] == ["widgets.csv"]
    assert registry.table(results, "widgets") is results["widgets"]["widgets"]
    assert registry.table(results, "missing").empty


def test_compare_takes_the_runs_it_applied_to():
    context = CompareContext(labels=["a", "b", "c"], reference="a", replicates={})
    one = _widgets(RunData(POINTS))
    per_run = {"a": {"widgets": one}, "b": {}, "c": {"widgets": one}}
    out = registry.compare_all(per_run, context, [FAKE, NEVER])
    assert list(out) == ["widgets"] and out["widgets"]["runs"]["run"].tolist() == ["a", "c"]


def test_the_registry_is_read_when_called(monkeypatch):
    monkeypatch.setattr(registry, "ANALYSES", (*registry.ANALYSES, FAKE))
    assert registry.named("widgets") is FAKE
    assert "widgets" in registry.compute_all(RunData(POINTS))
    with pytest.raises(KeyError, match="no analysis 'nope'"):
        registry.named("nope")


def test_names_are_distinct():
    names = [a.name for a in registry.ANALYSES]
    assert len(names) == len(set(names))


def _max_heap(data: RunData) -> registry.Result:
    """The fake entry a test registers: the largest heap total the run's points hold."""
    total = data.points[(data.points["cause"] == "total") & (data.points["metric"] == "bytes")]
    return {"max_heap": pd.DataFrame({"crds": [int(total["crds"].max())], "bytes": [float(total["value"].max())]})}


MAX_HEAP = NamedAnalysis(
    name="max_heap",
    applies=lambda data: data.run is not None,
    compute=_max_heap,
    tables=(Table("max_heap", file="max_heap.csv"),),
    text=lambda result, metric, confidence: ["", f"Largest heap: {result['max_heap']['bytes'].iloc[0]:.0f} bytes"],
    findings=lambda result, top: [
        ("max_heap", "Largest heap in use", float(result["max_heap"]["bytes"].iloc[0]), NAN, NAN, "bytes", "fake")
    ],
    report=lambda result: [Section("Largest heap", "The fake's note.", pd.DataFrame({"CRDs": ["160"]}))],
)
NAN = float("nan")


def test_one_entry_reaches_analyze_text_json_and_findings(monkeypatch, tmp_path, capsys):
    """Registering an analysis is all it takes: analyze prints it, -o json and the CSVs hold it, the
    key numbers and findings.md say it; no other module is edited."""
    import json
    import shutil
    from pathlib import Path

    from crdscale.analysis.run import analyze_run
    from crdscale.cli.main import main
    from crdscale.report.findings import compute_findings, findings_markdown
    from crdscale.rundir import read_run

    run_dir = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "reference-run", run_dir)
    monkeypatch.setattr(registry, "ANALYSES", (*registry.ANALYSES, MAX_HEAP))

    assert main(["analyze", str(run_dir)]) == 0
    text = capsys.readouterr().out
    assert "\nLargest heap: " in text and str(run_dir / "analysis" / "max_heap.csv") in text
    assert pd.read_csv(run_dir / "analysis" / "max_heap.csv")["crds"].tolist() == [160]

    assert main(["analyze", str(run_dir), "-o", "json", "--no-write"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)["runs"]
    assert doc["max_heap"] == [{"crds": 160, "bytes": pytest.approx(doc["max_heap"][0]["bytes"])}]
    assert doc["per_object"] is None  # the registered ones still there, null for a run that grew CRDs
    assert list(doc)[list(doc).index("series_fits") + 1 :][:7] == [
        "per_object", "amplification", "object_lists", "openapi_v2", "components", "components_skipped", "max_heap",
    ]  # fmt: skip

    data = read_run(run_dir)
    findings = compute_findings(data.manifest, analyze_run(data))
    assert findings.numbers["key"].iloc[0] == "max_heap"
    markdown = findings_markdown(findings)
    assert "| Largest heap in use |" in markdown
    assert "## Largest heap\n\nThe fake's note.\n\n| CRDs |" in markdown
