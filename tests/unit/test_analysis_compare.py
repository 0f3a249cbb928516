"""Differences between runs: known per-CRD differences come back, with Welch intervals built
from each run's own increments, repeats pooled by their spread, and profile-diff columns
that agree with the fits."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from crdscale.analysis.compare import (
    crd_set_warnings,
    establish_times,
    per_crd_differences,
    per_crd_profile_diff,
    replicate_spread,
    series_end_values,
    stack_runs,
)
from crdscale.analysis.intervals import growth_fit, t_quantile
from crdscale.analysis.percrd import profile_points
from crdscale.analysis.pprof.testing import synthetic_profile

CRDS = [0, 40, 80, 120, 160]
ZAP = ["go.uber.org/zap/zapcore.newCounters", "main.main"]
OPENAPI = ["k8s.io/kube-openapi/pkg/builder3.BuildOpenAPISpecFromRoutes", "main.main"]


def _points(
    slopes: dict[str, float], base: float = 1e6, noise: float = 0.0, seed: int = 0, cause_col: bool = True
) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for crds in CRDS:
        for cause, slope in slopes.items():
            value = base + slope * crds + (rng.normal(0, noise) if noise else 0.0)
            rows.append((crds, "served", cause, "bytes", value))
    return pd.DataFrame(rows, columns=["crds", "phase", "cause", "metric", "value"])


def test_exact_lines_give_the_exact_difference():
    a = _points({"zap": 0.0, "openapi": 300_000.0})
    b = _points({"zap": 448 * 1024.0, "openapi": 300_000.0}, base=2e6)
    out = per_crd_differences(stack_runs({"v1.37.1": a, "v1.24.0": b}))
    assert list(out["run"]) == ["v1.24.0", "v1.24.0"]
    zap = out.set_index("cause").loc["zap"]
    assert zap["reference"] == "v1.37.1"
    assert zap["difference"] == pytest.approx(448 * 1024)
    assert zap["difference_low"] == pytest.approx(448 * 1024) and zap["difference_high"] == pytest.approx(448 * 1024)
    assert math.isnan(zap["relative"])  # reference per-CRD cost 0: no relative change
    openapi = out.set_index("cause").loc["openapi"]
    assert openapi["difference"] == pytest.approx(0, abs=1e-6) and openapi["relative"] == pytest.approx(0, abs=1e-9)
    assert zap["n"] == 10


def test_noisy_difference_interval_is_welchs_on_each_runs_own_increments():
    a = _points({"total": 900_000.0}, noise=2e5, seed=1)
    b = _points({"total": 2_900_000.0}, noise=2e5, seed=2)
    row = per_crd_differences(stack_runs({"a": a, "b": b})).iloc[0]
    assert row["difference_low"] < 2_000_000 < row["difference_high"]
    fa, fb = growth_fit(a["crds"], a["value"]).estimate, growth_fit(b["crds"], b["value"]).estimate
    # Each run's per-CRD cost is its growth from the first point to the last.
    assert fa.value == pytest.approx((a["value"].iloc[-1] - a["value"].iloc[0]) / 160)
    va, vb = fa.se**2, fb.se**2
    dof = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 3)
    half = t_quantile(0.975, dof) * math.sqrt(va + vb)
    assert row["per_crd_reference"] == pytest.approx(fa.value)
    assert row["per_crd"] == pytest.approx(fb.value)
    assert row["dof"] == pytest.approx(dof)
    assert row["difference_high"] - row["difference"] == pytest.approx(half)
    assert row["relative"] == pytest.approx((fb.value - fa.value) / fa.value)


def test_a_noiseless_reference_lends_no_degrees_of_freedom():
    """Pooling would turn t(3) into t(6) when one side is exact (v1.37.1 holds no zap counters)."""
    exact = _points({"zap": 0.0})
    noisy = _points({"zap": 448 * 1024.0}, noise=3e6, seed=3)
    row = per_crd_differences(stack_runs({"new": exact, "old": noisy})).iloc[0]
    assert row["dof"] == pytest.approx(3)
    own = growth_fit(noisy["crds"], noisy["value"]).estimate
    assert (row["difference_low"], row["difference_high"]) == pytest.approx((own.low, own.high))


def test_three_runs_each_against_the_reference():
    runs = {"100": _points({"total": 1000.0}), "50": _points({"total": 800.0}), "25": _points({"total": 700.0})}
    out = per_crd_differences(stack_runs(runs), reference="50").set_index("run")
    assert set(out.index) == {"100", "25"}
    assert out.loc["100", "difference"] == pytest.approx(200)
    assert out.loc["25", "difference"] == pytest.approx(-100)
    assert out.loc["25", "relative"] == pytest.approx(-0.125)


def test_repeats_are_pooled_and_their_spread_is_the_interval():
    runs = {f"new,repeat={r}": _points({"total": 1000.0 + d}) for r, d in ((1, -30), (2, 0), (3, 30))}
    runs |= {f"old,repeat={r}": _points({"total": 2000.0 + d}) for r, d in ((1, -60), (2, 0), (3, 60))}
    replicates = {label: label.split(",")[0] for label in runs}
    out = per_crd_differences(stack_runs(runs), replicates=replicates).iloc[0]
    assert (out["run"], out["reference"]) == ("old", "new")
    assert out["difference"] == pytest.approx(1000)
    se_new, se_old = 30 / math.sqrt(3), 60 / math.sqrt(3)
    dof = (se_new**2 + se_old**2) ** 2 / (se_new**4 / 2 + se_old**4 / 2)
    assert out["difference_high"] - 1000 == pytest.approx(t_quantile(0.975, dof) * math.hypot(se_new, se_old))
    fits = stack_runs(
        {label: pd.DataFrame([{"phase": "served", "metric": "bytes", "cause": "total",
                               "per_crd": pts["value"].iloc[-1] / 160 - pts["value"].iloc[0] / 160,
                               "per_crd_low": 0.0, "per_crd_high": 20.0}])
         for label, pts in runs.items()}
    )  # fmt: skip
    spread = replicate_spread(fits, replicates).set_index("configuration")
    assert spread.loc["new", "repeats"] == 3 and spread.loc["new", "between_sd"] == pytest.approx(30)
    assert spread.loc["new", "within_half_width"] == pytest.approx(10)
    assert spread.loc["new", "repeats_for_10pct"] >= 2


def test_baseline_of_the_other_phase_is_shared_and_installed_points_ignored():
    a = _points({"total": 1000.0})
    a.loc[a["crds"] == 0, "phase"] = "installed"  # a baseline profile has no phase of its own
    extra = a[a["crds"] > 0].assign(phase="installed", value=lambda d: d["value"] * 5)
    b = _points({"total": 3000.0})
    out = per_crd_differences(stack_runs({"a": pd.concat([a, extra]), "b": b}))
    assert out.iloc[0]["difference"] == pytest.approx(2000)


def test_series_points_by_metric_only():
    pts = pd.DataFrame(
        [(c, "served", "rss_bytes", 1e8 + k * c) for k, run in ((1e6, "a"), (2e6, "b")) for c in CRDS],
        columns=["crds", "phase", "metric", "value"],
    )
    pts["run"] = ["a"] * 5 + ["b"] * 5
    out = per_crd_differences(pts, by=["metric"])
    assert out.iloc[0]["metric"] == "rss_bytes" and out.iloc[0]["cause"] == ""
    assert out.iloc[0]["difference"] == pytest.approx(1e6)


def test_a_run_with_one_crd_count_is_left_out():
    a = _points({"total": 1000.0})
    b = _points({"total": 2000.0}).query("crds == 0")
    assert per_crd_differences(stack_runs({"a": a, "b": b})).empty
    with pytest.raises(ValueError):
        per_crd_differences(stack_runs({"a": a}), reference="zzz")


def test_differences_on_profiles_by_cause():
    def profile(crds, zap_per_crd):
        return synthetic_profile([(ZAP, [1, 1000 + zap_per_crd * crds]), (OPENAPI, [1, 5000 + 300 * crds])])

    tables = {
        label: profile_points([(c, None, profile(c, zap)) for c in CRDS]) for label, zap in (("new", 0), ("old", 450))
    }
    out = per_crd_differences(stack_runs(tables)).query("metric == 'bytes'").set_index("cause")
    assert out.loc["total", "difference"] == pytest.approx(450)
    assert out.loc["zap-counters", "difference"] == pytest.approx(450)
    assert out.loc["openapi", "difference"] == pytest.approx(0, abs=1e-6)


def test_series_end_values_and_establish_times():
    ts = pd.date_range("2026-01-01", periods=4, freq="s", tz="UTC")
    series = pd.DataFrame(
        {
            "timestamp": list(ts) * 2,
            "job": "kube-apiserver",
            "metric": ["process_resident_memory_bytes"] * 4 + ["go_goroutines"] * 4,
            "labels": "",
            "value": [1, 5, 3, 4, 10, 11, 12, 13],
        }
    )
    end = series_end_values(series).set_index("metric")
    assert end.loc["rss_bytes", ["first", "last", "peak"]].tolist() == [1, 4, 5]
    assert end.loc["rss_bytes", "source"] == "kube-apiserver"  # the only record of it
    assert end.loc["goroutines", "last"] == 13
    events = pd.DataFrame(
        [{"kind": "established", "step": 1, "established": 40, "duration_s": 2.0}, {"kind": "step.end", "step": 1}]
    )
    est = establish_times(events)
    assert est.iloc[0].tolist() == [1, 40, 2.0, 0.05]


def test_crd_set_warnings():
    same = {"sha256": "a" * 64, "count": 160}
    assert crd_set_warnings({"x": same, "y": same}) == []
    warn = crd_set_warnings({"x": same, "y": {"sha256": "b" * 64, "count": 100}, "z": None})
    assert len(warn) == 2 and "different CRD set" in warn[0] and "unknown" in warn[1]


def test_per_crd_profile_diff_is_the_difference_of_growths():
    """Different baselines at 0 CRDs cancel: only what each run grew per CRD is compared."""
    table = pd.DataFrame({"name": ["f", "g"], "flat": [1600, 500], "cum": [3200, 500]})
    table.attrs["unit"] = "bytes"
    growth = pd.DataFrame({"name": ["f", "g"], "flat": [2400, 160], "cum": [4800, 160]})
    reference_growth = pd.DataFrame({"name": ["f"], "flat": [800], "cum": [1600]})
    out = per_crd_profile_diff(table, growth, reference_growth, 160, 80).set_index("name")
    assert out.loc["f", "flat_per_crd"] == pytest.approx(2400 / 160 - 800 / 80)
    assert out.loc["f", "cum_per_crd"] == pytest.approx(4800 / 160 - 1600 / 80)
    assert out.loc["g", "flat_per_crd"] == pytest.approx(1)  # absent from the reference's growth
    assert out.attrs["unit"] == "bytes" and out.attrs["crds"] == 160


def test_compare_runs_takes_runs_read_by_rundir_or_their_directories():
    """The compute of a comparison takes Run objects (what rundir read) and needs nothing of report/;
    given directories it reads them through rundir and gives the same numbers."""
    from pathlib import Path

    from crdscale.analysis.compare import compare_runs, differences_table
    from crdscale.errors import UsageError
    from crdscale.rundir import read_runs

    root = Path(__file__).resolve().parents[2] / "data"
    dirs = [root / "reference-run", root / "reference-run-v1.24.0"]
    from_runs = compare_runs(read_runs(dirs))
    from_dirs = compare_runs(dirs)
    assert from_runs.labels == from_dirs.labels and len(from_runs.labels) == 2
    pd.testing.assert_frame_equal(from_runs.joint, from_dirs.joint)
    pd.testing.assert_frame_equal(differences_table(from_runs), differences_table(from_dirs))
    assert set(from_runs.process_jobs) == set(from_runs.labels)
    with pytest.raises(UsageError, match="two or more"):
        compare_runs(read_runs(dirs[:1]))


def test_a_reference_without_points_of_a_kind_compares_nothing_of_that_kind():
    """A cell too short for a /proc sample of its served phase (a tiny cell of a matrix on a cluster):
    its comparison with longer cells has no series rows, rather than failing."""
    from crdscale.analysis.compare import JOINT_COLUMNS, _joint

    points = pd.DataFrame(
        {"run": ["b"] * 3, "crds": [0, 10, 20], "phase": ["baseline", "served", "served"], "value": [1.0, 2.0, 3.0]}
    ).assign(metric="rss_bytes")
    out = _joint(points, "a", ["metric"], 0.95, {})
    assert out.empty and list(out.columns) == JOINT_COLUMNS
    assert _joint(points.iloc[0:0], "a", ["metric"], 0.95, {}).empty
