"""compare --fail-on: parsing conditions, the interval-bound rule, JUnit XML and the exit code on the
committed v1.24.0 / v1.37.1 pair (v1.24.0 holds ~460 KiB more zap counters per CRD: a regression that is there)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from xml.etree import ElementTree

import pandas as pd
import pytest

from crdscale.analysis.gate import evaluate, junit_xml, parse_condition, regressed, summary_markdown
from crdscale.cli.main import main
from crdscale.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
V137 = ROOT / "data" / "reference-run"
V124 = ROOT / "data" / "reference-run-v1.24.0"


@pytest.mark.parametrize(
    "text, kind, name, op, threshold, relative",
    [
        ("total.per_crd > +10%", "per_crd", "total", ">", 0.10, True),
        ("zap-counters.per_crd>50KiB", "per_crd", "zap-counters", ">", 50 * 1024, False),
        ("openapi.per_crd < -5%", "per_crd", "openapi", "<", -0.05, True),
        ("total.per_object >= 1KiB", "per_object", "total", ">=", 1024, False),
        ("rss.per_crd > +20%", "series", "rss", ">", 0.20, True),
        ("cpu.per_crd > 0.5", "series", "cpu", ">", 0.5, False),
        ("rss_peak > +200MiB", "peak", "rss", ">", 200 * 2**20, False),
        ("heap_inuse_end <= -1GiB", "end", "heap_inuse", "<=", -(2**30), False),
        ("cpu_end > 2s", "end", "cpu", ">", 2.0, False),
        ("kcm.per_crd > +10%", "component", "kube-controller-manager", ">", 0.10, True),
        ("kube-controller-manager.rss.per_crd > 1MiB", "component", "kube-controller-manager", ">", 2**20, False),
        ("etcd.per_crd > +50KiB", "component", "etcd", ">", 50 * 1024, False),
        ("etcd.rss.per_crd < -5%", "component", "etcd", "<", -0.05, True),
    ],
)
def test_parse_condition(text, kind, name, op, threshold, relative):
    c = parse_condition(text)
    assert (c.kind, c.name, c.op, c.relative) == (kind, name, op, relative)
    assert c.threshold == pytest.approx(threshold)
    if kind == "component":
        assert c.metric == ("rss_bytes" if ".rss." in text else "bytes")


@pytest.mark.parametrize(
    "text, says",
    [
        ("zapp.per_crd > 1", "unknown cause, series or component 'zapp'"),
        ("kcm.per_object > 1KiB", "kcm has kcm.per_crd"),
        ("etcd.heap.per_crd > 1KiB", "etcd has etcd.per_crd"),
        ("etcd.per_crd > 2s", "not a size or a percentage"),
        ("total.per_crd > banana", "not a size or a percentage"),
        ("total.per_crd > nan%", "not a size or a percentage"),
        ("total.per_crd > inf", "not a size or a percentage"),
        ("cpu.per_crd > nan", "not a number"),
        ("total.per_crd >> 1", "expected SUBJECT OP THRESHOLD"),
        ("rss_top > 1", "unknown figure 'rss_top'"),
        ("total.per_pod > 1", "'per_pod' is not a figure"),
        ("", "expected SUBJECT OP THRESHOLD"),
    ],
)
def test_parse_condition_refuses(text, says):
    with pytest.raises(UsageError, match=says):
        parse_condition(text)


def _comparison(low: float, value: float, high: float, reference: float = 100_000.0):
    joint = pd.DataFrame(
        [
            {
                "run": "new",
                "metric": "bytes",
                "cause": "total",
                "per_crd_reference": reference,
                "difference": value,
                "difference_low": low,
                "difference_high": high,
            }
        ]
    )
    empty = pd.DataFrame()
    return SimpleNamespace(
        joint=joint,
        per_object_joint=empty,
        series_joint=empty,
        end=empty,
        compared=["new"],
        labels=["base", "new"],
        reference="base",
        replicates={},
    )


@pytest.mark.parametrize(
    "condition, low, value, high, regression",
    [
        # The point estimate is over +10% (= 10 kB here) but the interval reaches below it: not a regression.
        ("total.per_crd > +10%", 5_000, 20_000, 35_000, False),
        # The whole interval is over the threshold: a regression.
        ("total.per_crd > +10%", 12_000, 20_000, 28_000, True),
        ("total.per_crd > 10KB", 10_000, 20_000, 30_000, False),  # equal to the bound is not over it
        ("total.per_crd >= 10KB", 10_000, 20_000, 30_000, True),
        # Downward: the interval's high end must be below the threshold.
        ("total.per_crd < -10%", -30_000, -20_000, -5_000, False),
        ("total.per_crd < -10%", -30_000, -20_000, -11_000, True),
    ],
)
def test_interval_bound_rule(condition, low, value, high, regression):
    results = evaluate(_comparison(low, value, high), [parse_condition(condition)])
    assert [r.regression for r in results] == [regression]
    assert ("regression" if regression else "ok") in results[0].message


def test_figure_missing_in_runs_passes_and_says_so():
    results = evaluate(_comparison(1, 2, 3), [parse_condition("total.per_object > 1KiB")])
    assert not regressed(results) and "not measured" in results[0].message


def test_junit_has_a_case_per_condition():
    conditions = [parse_condition("total.per_crd > +10%"), parse_condition("total.per_crd > 1MiB")]
    results = evaluate(_comparison(12_000, 20_000, 28_000), conditions)
    root = ElementTree.fromstring(junit_xml(results))
    cases = root.findall(".//testcase")
    assert len(cases) == 2
    assert [case.find("failure") is not None for case in cases] == [True, False]
    assert root.get("failures") == "1"
    assert "1 of 2 condition(s) regressed" in summary_markdown(results)


def test_cli_gate_on_the_committed_pair(tmp_path, capsys):
    junit, summary = tmp_path / "gate.xml", tmp_path / "gate.md"
    gate = ["--fail-on", "zap-counters.per_crd > +10%", "--fail-on", "total.per_crd > +10%"]
    # v1.24.0 against v1.37.1: the zap counters and the total grew, and their intervals say so surely.
    args = ["compare", str(V137), str(V124), *gate, "--junit", str(junit), "--summary", str(summary)]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "## Gate" in out and "2 of 2 condition(s) regressed" in out
    assert len(ElementTree.parse(junit).findall(".//failure")) == 2
    assert summary.read_text().startswith("## Gate")
    # The other way round, both shrank: the gate passes.
    assert main(["compare", str(V124), str(V137), *gate]) == 0
    assert "Gate: passed" in capsys.readouterr().out


def test_cli_gate_refuses_before_reading_runs(tmp_path, capsys):
    # Nothing is read when a condition or an output path is bad: the run directories need not exist.
    missing = str(tmp_path / "no-such-run")
    assert main(["compare", missing, missing, "--fail-on", "zapp.per_crd > 1"]) == 2
    assert main(["compare", missing, missing, "--fail-on", "total.per_crd > 1", "--junit", "/nonexistent/j.xml"]) == 2
    assert main(["compare", str(V137), str(V124), "--junit", str(tmp_path / "j.xml")]) == 2
    inside = str(V137 / "gate.xml")
    assert main(["compare", str(V137), str(V124), "--fail-on", "total.per_crd > 1", "--junit", inside]) == 2
    assert not (V137 / "gate.xml").exists()
    err = capsys.readouterr().err
    assert err.count("crdscale: error:") == 4


SMALL = ROOT / "tests" / "data" / "history-small"  # kube-controller-manager and etcd profiled on both releases


def _component_comparison(low: float, value: float, high: float, reference: float = 100_000.0):
    comparison = _comparison(0, 0, 0)
    comparison.results = {
        "components": {
            "components": pd.DataFrame(
                [
                    {"run": "new", "component": c, "metric": m, "per_crd_reference": reference,
                     "difference": value, "difference_low": low, "difference_high": high}
                    for c in ("kube-controller-manager", "etcd") for m in ("bytes", "rss_bytes")
                ]
            )
        }
    }  # fmt: skip
    return comparison


@pytest.mark.parametrize(
    "condition, low, value, high, regression",
    [
        ("kcm.per_crd > +10%", 5_000, 20_000, 35_000, False),  # the point is over 10 kB, the interval is not
        ("kcm.per_crd > +10%", 12_000, 20_000, 28_000, True),
        ("etcd.per_crd > +50KiB", 40_000, 60_000, 80_000, False),
        ("etcd.per_crd > +50KiB", 52_000, 60_000, 80_000, True),
        ("etcd.rss.per_crd < -10%", -30_000, -20_000, -11_000, True),
    ],
)
def test_component_conditions_follow_the_interval_bound_rule(condition, low, value, high, regression):
    results = evaluate(_component_comparison(low, value, high), [parse_condition(condition)])
    assert [r.regression for r in results] == [regression]


def test_cli_gate_on_the_components_of_a_recorded_pair(capsys):
    v124, v137 = str(SMALL / "v1.24.0"), str(SMALL / "v1.37.1")
    # etcd's heap per CRD, v1.24.0 as the new run: +57.8 KiB [-128.5, 244.1]. Not surely over +10% ...
    assert main(["compare", v137, v124, "--fail-on", "etcd.per_crd > +10%", "-o", "json"]) == 0
    gate = json.loads(capsys.readouterr().out)["gate"]["results"][0]
    assert gate["difference"] / 1024 == pytest.approx(57.8, abs=0.1) and not gate["regression"]
    # ... but surely over -1 MiB: the interval's low end crosses that threshold.
    assert main(["compare", v137, v124, "--fail-on", "etcd.per_crd > -1MiB", "--fail-on", "kcm.rss.per_crd > 0"]) == 1
    out = capsys.readouterr().out
    assert "1 of 2 condition(s) regressed" in out


def test_a_component_not_profiled_passes_and_says_so(capsys):
    # The committed reference runs predate kube-controller-manager's profiles.
    assert main(["compare", str(V137), str(V124), "--fail-on", "kcm.per_crd > +10%"]) == 0
    assert "kube-controller-manager not profiled in both runs: judged as passing" in capsys.readouterr().out
