"""A history of releases on recorded runs: the committed v1.24.0 and v1.37.1 runs as two releases, and the
changepoint rule on a recorded table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from crdscale.analysis.compare import compare_runs
from crdscale.analysis.history import (
    CHANGE_COLUMNS,
    changepoints,
    consecutive_differences,
    history_table,
    release_order,
)

ROOT = Path(__file__).resolve().parents[2]
V137 = ROOT / "data" / "reference-run"
V124 = ROOT / "data" / "reference-run-v1.24.0"


def test_release_order():
    assert release_order(["v1.37.1", "v1.9.0", "v1.24.0", "v1.24.0"]) == ["v1.9.0", "v1.24.0", "v1.37.1"]


def test_history_table_and_changepoints_on_recorded_releases():
    comparison = compare_runs([V124, V137])
    table = history_table(comparison.per_crd, {"v1.24.0": "v1.24.0", "v1.37.1": "v1.37.1"})
    zap = table[table["cause"] == "zap-counters"]
    assert zap["version"].tolist() == ["v1.24.0", "v1.37.1"]
    assert zap["per_crd"].iloc[0] > 400 * 1024 and zap["per_crd"].iloc[1] == 0
    assert (table["low"] <= table["per_crd"]).all() and (table["per_crd"] <= table["high"]).all()
    diffs = consecutive_differences({"v1.37.1": [V137], "v1.24.0": [V124]})
    assert list(diffs.columns) == CHANGE_COLUMNS
    assert set(diffs["older"]) == {"v1.24.0"} and set(diffs["newer"]) == {"v1.37.1"}
    found = changepoints(diffs, min_relative=0.10)
    # The zap counters went and the etcd clients shrank: both sure and large.
    assert "zap-counters" in found["cause"].tolist() and "etcd-client" in found["cause"].tolist()
    key = ["component", "quantity", "cause"]
    unsure = set(map(tuple, diffs[(diffs["low"] < 0) & (diffs["high"] > 0)][key].to_numpy()))
    assert unsure and not unsure & set(map(tuple, found[key].to_numpy()))  # an interval spanning 0 is never one
    assert "zapcore.newCounters" in found.loc[found["cause"] == "zap-counters", "frames"].iloc[0]


def test_repeats_pool_with_a_floor():
    per_crd = pd.DataFrame(
        {
            "phase": "served", "metric": "bytes", "cause": "total",
            "run": ["a1", "a2", "b1"], "per_crd": [100.0, 100.0, 200.0],
            "per_crd_low": [80.0, 80.0, 150.0], "per_crd_high": [120.0, 120.0, 250.0], "per_crd_se": [10.0, 10.0, 25.0],
        }
    )  # fmt: skip
    table = history_table(per_crd, {"a1": "v1.30.0", "a2": "v1.30.0", "b1": "v1.31.0"}).set_index("version")
    # Identical repeats: the spread is 0, so the runs' own se (10 / sqrt 2) keeps the interval open.
    assert table.loc["v1.30.0", "runs"] == 2 and table.loc["v1.30.0", "high"] - 100 == pytest.approx(13.86, abs=0.01)
    assert table.loc["v1.31.0", "low"] == 150.0


def test_changepoint_rule():
    rows = [
        (
            "kube-apiserver",
            "heap per CRD",
            "v1",
            "v2",
            "a",
            1000.0,
            1500.0,
            500.0,
            100.0,
            900.0,
            0.5,
            "",
        ),  # sure, large
        ("kube-apiserver", "heap per CRD", "v1", "v2", "b", 1000.0, 1050.0, 50.0, 10.0, 90.0, 0.05, ""),  # sure, small
        ("kube-apiserver", "heap per CRD", "v1", "v2", "c", 1000.0, 2000.0, 1000.0, -100.0, 2100.0, 1.0, ""),  # unsure
    ]
    found = changepoints(pd.DataFrame(rows, columns=CHANGE_COLUMNS), min_relative=0.10)
    assert found["cause"].tolist() == ["a"]
    assert changepoints(pd.DataFrame(rows, columns=CHANGE_COLUMNS), min_relative=0.0)["cause"].tolist() == ["a", "b"]
