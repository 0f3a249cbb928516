"""verdict.md's wording on recorded runs: the committed v1.24.0 / v1.37.1 pair stands in for a base and a change."""

from __future__ import annotations

from pathlib import Path

import pytest

from crdscale.analysis.compare import compare_runs
from crdscale.report.verdict import MAX_LINES, build_verdict

ROOT = Path(__file__).resolve().parents[2]
V137 = ROOT / "data" / "reference-run"
V124 = ROOT / "data" / "reference-run-v1.24.0"


@pytest.fixture(scope="module")
def verdict():
    comparison = compare_runs([V124, V137])
    changes = {"patch": "known-cost.diff (sha256 0123abcd, 2 files)", "feature gates": "none"}
    return build_verdict(comparison, change="v1.37.1", changes=changes, pairs=1)


def test_opens_with_one_sentence_with_intervals(verdict):
    text = verdict.markdown()
    lines = text.splitlines()
    assert lines[0] == "### crdscale verdict: v1.37.1"
    sentence = lines[2]
    assert sentence.startswith("**v1.37.1 changes kube-apiserver's heap by -797.8 KiB per served CRD (95% CI [")
    assert "mostly zap-counters (-461.0 KiB" in sentence
    assert sentence.endswith("the difference can be told from zero.**")


def test_table_process_frames_provenance(verdict):
    text = verdict.markdown()
    assert len(text.splitlines()) <= MAX_LINES
    assert "| zap-counters | 461.0 KiB | 0 B | -461.0 KiB |" in text
    assert "| total |" in text and text.index("| total |") > text.index("| zap-counters |")
    assert "| peak RSS | 1.1 GiB | 725.0 MiB |" in text and "| CPU per CRD |" in text
    assert "shrank -461.0 KiB: `go.uber.org/zap/zapcore.newCounters`" in text
    assert "kube-apiserver v1.24.0" in text and "Go go1.26.8" in text and "known-cost.diff" in text


def test_cannot_be_told_from_zero():
    comparison = compare_runs([V137, V137.parent / "reference-run-v1.24.0"])
    verdict = build_verdict(comparison, change="x")
    spanning = [c for c in verdict.causes if c["low"] < 0 < c["high"]]
    assert spanning, "some cause's difference spans zero in this pair"
    assert f"| {spanning[0]['cause']} |" in verdict.markdown() and "| no |" in verdict.markdown()


def test_json_matches_markdown(verdict):
    data = verdict.to_json()
    assert data["sentence"] in verdict.markdown()
    assert data["per_crd"]["difference"] == pytest.approx(-797.8 * 1024, rel=1e-3)
    assert data["pairs"] == 1 and data["per_object"] is None


def test_a_control_kind_beside_the_custom_resources_is_not_called_custom_resource(monkeypatch):
    """fieldsv1string's A/B runs ConfigMaps beside the custom resources; its verdict once took the ConfigMaps'
    total (the first kind) and called it the change per custom resource."""
    import pandas as pd

    from crdscale.analysis.compare import Comparison
    from crdscale.scenario.ab import precision

    comparison = compare_runs([V124, V137])
    run = comparison.compared[0]
    rows = [  # kind, cause, base, changed, difference, low, high (bytes per object)
        ("configmaps", "total", 7000.0, 5200.0, -1800.0, -2000.0, -1600.0),
        ("configmaps", "managed-fields", 880.0, 0.0, -883.0, -976.0, -790.0),
        ("customresources", "total", 6600.0, 6722.0, 122.0, -162.0, 406.0),
        ("customresources", "unstructured", 3000.0, 3050.0, 50.0, -100.0, 200.0),
    ]
    joint = pd.DataFrame(
        [(run, k, c, b, ch, d, lo, hi) for k, c, b, ch, d, lo, hi in rows],
        columns=[
            "run",
            "kind",
            "cause",
            "per_object_reference",
            "per_object",
            "difference",
            "difference_low",
            "difference_high",
        ],
    )
    monkeypatch.setattr(Comparison, "per_object_joint", property(lambda self: joint))
    verdict = build_verdict(comparison, change="fieldsv1string")
    assert verdict.per_object["kind"] == "customresources" and verdict.per_object["difference"] == 122.0
    assert [c["cause"] for c in verdict.object_causes] == ["unstructured"]
    assert "by +122 B per custom resource" in verdict.sentence
    assert precision(comparison).difference == 122.0

    only_configmaps = joint[joint["kind"] == "configmaps"]
    monkeypatch.setattr(Comparison, "per_object_joint", property(lambda self: only_configmaps))
    verdict = build_verdict(comparison, change="x")
    assert "per ConfigMap" in verdict.sentence and "per custom resource" not in verdict.sentence
