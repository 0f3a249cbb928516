"""Footprint features of small CRD sets, and a model that recovers known costs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from crdscale.crds.generate import generate_crds, preset
from crdscale.footprint.features import features_from_summary, footprint_features
from crdscale.footprint.fit import final_growth, fit_footprint, run_growth, training_rows
from crdscale.footprint.model import FootprintModel, extrapolations, predict
from crdscale.schema import schema_depth


def _crd(versions):
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": versions,
        },
    }


def _version(name, served, schema):
    return {"name": name, "served": served, "storage": name == "v1", "schema": {"openAPIV3Schema": schema}}


NESTED = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "a": {"type": "string"},
                "b": {"type": "array", "items": {"type": "object", "properties": {"c": {"type": "integer"}}}},
            },
        }
    },
}


def test_depth_counts_levels_of_properties():
    assert schema_depth({"type": "string"}) == 0
    assert schema_depth({"type": "object", "properties": {"a": {"type": "string"}}}) == 1
    assert schema_depth(NESTED) == 3


def test_features_count_served_versions_only():
    crd = _crd([_version("v1", True, NESTED), _version("v2", True, NESTED), _version("v0", False, NESTED)])
    f = footprint_features([crd, crd])
    assert f["crds"] == 2 and f["served_versions"] == 4
    assert f["properties"] == 4 * 4  # spec, a, b, c per served version
    assert f["schema_bytes"] == 4 * len(json.dumps(NESTED, separators=(",", ":"), sort_keys=True))
    assert f["max_depth"] == 3


def test_features_of_a_generated_set():
    params = preset("apigen", crd_count=6, group_count=2, property_count=50, versions=2)
    f = footprint_features(generate_crds(params))
    assert f["crds"] == 6 and f["served_versions"] == 12
    assert f["properties"] >= 12 * 50


def test_features_square_each_served_version_and_summaries_assume_equal_versions():
    small = _crd([_version("v1", True, NESTED)])  # 4 properties
    big = _crd(
        [
            _version("v1", True, NESTED),
            _version("v2", True, {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(10)}}),
        ]
    )
    f = footprint_features([small, big])
    assert f["properties_squared"] == 4**2 + 4**2 + 10**2
    summary = {"count": 3, "versions": 6, "properties_total": 6 * 50, "schema_bytes_total": 1000}
    assert features_from_summary(summary)["properties_squared"] == 6 * 50**2


# What the synthetic server charges: bytes per CRD, per served version, per served property.
COST = {"crds": 50_000.0, "served_versions": 200_000.0, "properties": 900.0}
SHAPES = [(props, versions) for props in (10, 100, 1000) for versions in (1, 2)]


def _sweep(run_misfit=0.0, step_noise=0.0, quadratic=0.0):
    """Points of six runs (properties x versions, 100 CRDs in 4 steps): heap causes ``openapi`` and
    ``watch-cache``, ``rss``. ``run_misfit`` is a relative error shared by every step of a run (what
    a schema the features describe badly does); ``step_noise`` bytes of independent noise per step."""
    rng = np.random.default_rng(3)
    points, feats = [], {}
    for props, versions in SHAPES:
        run = f"p{props}v{versions}"
        feats[run] = {
            "crds": 100.0,
            "served_versions": 100.0 * versions,
            "properties": 100.0 * versions * props,
            "properties_squared": 100.0 * versions * props**2,
            "schema_bytes": 100.0 * versions * props * 40,
        }
        misfit = 1 + rng.normal(0, run_misfit) if run_misfit else 1.0
        for crds in (0, 25, 50, 75, 100):
            added = (
                crds
                * (
                    COST["crds"]
                    + versions * (COST["served_versions"] + COST["properties"] * props + quadratic * props**2)
                )
                * misfit
            )
            total = 0.0
            for target, share in (("openapi", 0.6), ("watch-cache", 0.4)):
                value = 1e8 * share + share * added + (rng.normal(0, step_noise) if step_noise else 0)
                points.append((run, crds, "served", target, value))
                total += value
            points.append((run, crds, "served", "total", total))
            points.append((run, crds, "served", "rss", 3e8 + 1.5 * added))
    return pd.DataFrame(points, columns=["run", "crds", "phase", "target", "value"]), feats


FEATS = ["crds", "served_versions", "properties"]


def test_fit_recovers_costs_and_predicts_a_new_set():
    points, feats = _sweep()
    rows = training_rows(points, feats)
    assert len(rows) == 6 * 4 * 4 and rows["added"].min() > 0
    model = fit_footprint(
        rows,
        FEATS,
        kube_version="1.37.1",
        provenance={"experiment": "schema-size", "machine": "test", "date": "2026-11-23"},
    )
    assert model.targets["openapi"].coef == pytest.approx([0.6 * COST[f] for f in FEATS])
    new = {"crds": 300, "served_versions": 600, "properties": 600 * 500, "properties_squared": 0, "schema_bytes": 0}
    out = predict(model, new).set_index("target")
    assert out.loc["rss", "value"] == pytest.approx(1.5 * (300 * 50_000 + 600 * 200_000 + 600 * 500 * 900))
    assert list(out.index)[-1] == "rss"
    # Round trip through JSON keeps the numbers.
    again = FootprintModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert predict(again, new)["value"].tolist() == pytest.approx(out.reset_index()["value"].tolist())
    assert again.provenance["experiment"] == "schema-size"


def test_runs_not_steps_are_the_observations():
    points, feats = _sweep(run_misfit=0.05)
    model = fit_footprint(training_rows(points, feats), FEATS, kube_version="1.37.1")
    assert model.targets["openapi"].dof == len(SHAPES) - len(FEATS)  # not 6 runs x 4 steps - 3
    growth = run_growth(training_rows(points, feats))
    assert len(growth) == len(SHAPES) * 4 and set(growth["target"]) == {"openapi", "watch-cache", "total", "rss"}


def test_interval_of_runs_holds_a_new_runs_misfit():
    """Each run strays by its own ~5 %: the interval of a new set must hold the truth give or take that,
    which an interval built on steps (all four of a run share its misfit) would not."""
    points, feats = _sweep(run_misfit=0.05, step_noise=1e5)
    model = fit_footprint(training_rows(points, feats), FEATS, kube_version="1.37.1")
    new = {"crds": 200, "served_versions": 300, "properties": 300 * 300, "properties_squared": 0}
    row = predict(model, new).set_index("target").loc["openapi"]
    truth = 0.6 * (200 * 50_000 + 300 * 200_000 + 300 * 300 * 900)
    assert row["low"] < 0.95 * truth and 1.05 * truth < row["high"]
    assert (row["high"] - row["low"]) / row["value"] < 1.5


def test_squared_properties_catch_a_cost_that_grows_faster_than_the_schema():
    points, feats = _sweep(quadratic=3.0)
    rows = training_rows(points, feats)
    model = fit_footprint(rows, FEATS + ["properties_squared"], kube_version="1.24.0")
    assert model.targets["rss"].coef[-1] == pytest.approx(1.5 * 3.0)
    new = {"crds": 50, "served_versions": 50, "properties": 50 * 500, "properties_squared": 50 * 500**2}
    truth = 1.5 * 50 * (50_000 + 200_000 + 900 * 500 + 3.0 * 500**2)
    assert predict(model, new).set_index("target").loc["rss", "value"] == pytest.approx(truth)


def test_final_growth_is_the_last_step():
    points, feats = _sweep()
    last = final_growth(training_rows(points, feats)).set_index(["run", "target"])["added"]
    assert last[("p10v1", "rss")] == pytest.approx(1.5 * 100 * (50_000 + 200_000 + 9_000))
    assert set(final_growth(training_rows(points, feats))["installed"]) == {100}


def test_model_records_what_it_saw_and_flags_extrapolation():
    points, feats = _sweep()
    model = fit_footprint(training_rows(points, feats), FEATS, kube_version="1.37.1")
    assert model.ranges == {
        "crds": [25.0, 100.0],
        "versions_per_crd": [1.0, 2.0],
        "properties_per_version": [10.0, 1000.0],
    }
    assert FootprintModel.from_dict(json.loads(json.dumps(model.to_dict()))).ranges == model.ranges
    assert extrapolations(model, {"crds": 50, "served_versions": 50, "properties": 50 * 300}) == []
    lines = extrapolations(model, {"crds": 2000, "served_versions": 6000, "properties": 6000 * 5000})
    assert len(lines) == 3 and lines[0].startswith("CRDs 2,000 is outside the fitted range [25, 100]")
    assert lines[1].startswith("served versions per CRD 3.0 is outside the fitted range [1.0, 2.0]")
    assert extrapolations(FootprintModel("1.37.1", ["crds"], {}), {"crds": 2000}) == []  # no ranges recorded


def test_collinear_features_are_refused():
    points, feats = _sweep()
    one_version = points[points["run"].str.endswith("v1")]
    rows = training_rows(one_version, feats)
    with pytest.raises(ValueError, match="collinear"):
        fit_footprint(rows, FEATS, kube_version="1.37.1")  # crds == served_versions in every run
    model = fit_footprint(rows, ["crds", "properties"], kube_version="1.37.1")
    assert model.targets["openapi"].coef == pytest.approx([0.6 * (50_000 + 200_000), 0.6 * 900])


def test_models_of_another_format_are_refused():
    points, feats = _sweep()
    data = fit_footprint(training_rows(points, feats), FEATS, kube_version="1.37.1").to_dict()
    with pytest.raises(ValueError, match="format 1"):
        FootprintModel.from_dict({**data, "format": 1})
