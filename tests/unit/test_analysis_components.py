"""The per-CRD cost of kube-apiserver, kube-controller-manager and etcd (crdscale.analysis.components) in
`analyze` and `compare`.

tests/data/run-components is a v1.37.1 run of 300 CRDs in 6 steps, shrunk to the baseline and 100, 200
and 300 CRDs (served phase) with all three components' heap profiles and the RSS series
(scripts/make_run_fixture.py ... --components --served-only --series-metric process_resident_memory_bytes).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from crdscale.analysis import components
from crdscale.analysis.run import analyze_run
from crdscale.analysis.rundata import heap_points
from crdscale.cli.main import main
from crdscale.rundir import layout, read_run
from crdscale.testing.damage import copy_run

DATA = Path(__file__).resolve().parents[1] / "data"
RUN = DATA / "run-components"
OLD_RUN = DATA / "run-kube-apiserver"
KCM, ETCD = layout.CONTROLLER_MANAGER, layout.ETCD


def test_an_old_run_has_no_component_profiles_and_says_why():
    run = read_run(OLD_RUN)
    assert len(run.component_profiles(KCM)) == 0 and len(run.component_profiles(ETCD)) == 0
    why = components.skipped(run.manifest)
    assert set(why) == {KCM, ETCD} and "recorded before" in why[ETCD]


def test_each_component_gets_its_heap_and_rss_per_crd():
    run = read_run(RUN)
    table = components.compute(run)
    assert list(dict.fromkeys(table["component"])) == list(layout.COMPONENTS)
    served = table[(table["phase"] == "served")].set_index(["component", "metric"])
    # Recorded on v1.37.1 (300 CRDs of 100 properties, 6 steps; the fixture keeps 3 increments).
    assert served.loc[(KCM, "bytes"), "per_crd"] == pytest.approx(KCM_PER_CRD, rel=1e-9)
    assert served.loc[(ETCD, "bytes"), "per_crd"] == pytest.approx(ETCD_PER_CRD, rel=1e-9)
    for component in layout.COMPONENTS:
        row = served.loc[(component, "bytes")]
        assert row["per_crd_low"] < row["per_crd"] < row["per_crd_high"] and row["source"] == "heap profiles"
        # RSS from the most complete record: /proc, else the component's /metrics.
        assert served.loc[(component, "rss_bytes"), "source"] in (layout.PROC_JOBS[component], component)
    # kube-apiserver's total is the one `analyze` fits by cause, whether its points are given or decoded again.
    fits = analyze_run(run).fits
    total = fits[(fits["cause"] == "total") & (fits["phase"] == "served") & (fits["metric"] == "bytes")].iloc[0]
    assert served.loc[("kube-apiserver", "bytes"), "per_crd"] == pytest.approx(total["per_crd"], rel=1e-12)
    given = components.compute(run, apiserver_points=heap_points(run))
    pd.testing.assert_frame_equal(given, table)


# Heap bytes per served CRD of the fixture (kube-apiserver: 842,192.5), as `crdscale analyze -o json` gives them.
KCM_PER_CRD = 29_892.993333333332
ETCD_PER_CRD = 66_886.83333333333


def test_component_costs_is_one_row_per_component():
    costs = components.component_costs(read_run(RUN))
    assert list(costs["component"]) == list(layout.COMPONENTS)
    assert costs[["heap_per_crd", "rss_per_crd"]].notna().all().all()
    old = components.component_costs(read_run(OLD_RUN))
    assert list(old["component"]) == ["kube-apiserver"]


def test_compare_gives_a_row_per_component_and_metric(tmp_path):
    a, b = (read_run(shutil.copytree(RUN, tmp_path / name)) for name in ("a", "b"))
    table = components.compare({"A": a, "B": b})
    assert list(table.columns) == components.COMPARE_COLUMNS
    assert set(zip(table["component"], table["metric"])) == {
        (c, m) for c in layout.COMPONENTS for m in ("bytes", "rss_bytes")
    }
    assert (table["run"] == "B").all() and (table["reference"] == "A").all()
    assert table["difference"].abs().max() == pytest.approx(0, abs=1e-6)


def test_compare_command_has_a_row_per_component(tmp_path, capsys):
    # Two runs as far as compare can tell (a plain copy is refused as a run compared with itself).
    a, b = (copy_run(RUN, tmp_path / name, new_run_id=True) for name in ("a", "b"))
    assert main(["compare", str(a), str(b), "--label", "A", "--label", "B", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["components"]
    assert {(r["component"], r["metric"]) for r in rows} == {
        (c, m) for c in layout.COMPONENTS for m in ("bytes", "rss_bytes")
    }
    assert main(["compare", str(a), str(OLD_RUN), "--label", "A", "--label", "old"]) == 0
    out = capsys.readouterr().out
    assert "## Per component" in out and "- old: no etcd heap profiles: the run took no heap profiles of it" in out


def test_analyze_json_has_each_components_cost(capsys):
    assert main(["analyze", str(RUN), "--no-write", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    found = out["runs"][0]
    assert found["components_skipped"] is None  # none left out
    served = {(r["component"], r["metric"]): r for r in found["components"] if r["phase"] == "served"}
    assert served[(KCM, "bytes")]["per_crd"] == pytest.approx(KCM_PER_CRD, rel=1e-9)
    assert served[(ETCD, "bytes")]["per_crd"] == pytest.approx(ETCD_PER_CRD, rel=1e-9)


def test_analyze_text_has_a_line_per_component(capsys):
    assert main(["analyze", str(RUN), "--no-write"]) == 0
    out = capsys.readouterr().out
    block = out[out.index("Per component, phase served") :].splitlines()
    assert [line.split()[0] for line in block[2:5]] == list(layout.COMPONENTS)
    assert main(["analyze", str(OLD_RUN), "--no-write"]) == 0
    assert "no kube-controller-manager heap profiles: the run took no heap profiles of it" in capsys.readouterr().out
