"""Footprint features of small CRD sets, and a model that recovers known costs."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from crdscale.analysis.footprint import (
    FootprintModel, extrapolations, fit_footprint, footprint_features, predict, training_rows,
)
from crdscale.crds.generate import generate_crds, preset
from crdscale.crds.summary import schema_depth


def _crd(versions):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Cluster",
                     "names": {"plural": "widgets", "kind": "Widget"}, "versions": versions}}


def _version(name, served, schema):
    return {"name": name, "served": served, "storage": name == "v1", "schema": {"openAPIV3Schema": schema}}


NESTED = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "a": {"type": "string"}, "b": {"type": "array", "items": {"type": "object", "properties": {"c": {"type": "integer"}}}}}}}}


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


COST = {"crds": 50_000.0, "properties": 900.0}  # bytes per CRD and per served property


def _sweep(noise=0.0):
    rng = np.random.default_rng(3)
    points, feats = [], {}
    for props in (10, 100, 1000):
        run = f"p{props}"
        feats[run] = {"crds": 100.0, "served_versions": 100.0, "properties": 100.0 * props,
                      "schema_bytes": 100.0 * props * 40}
        for crds in (0, 25, 50, 75, 100):
            added = COST["crds"] * crds + COST["properties"] * props * crds
            for target, share in (("openapi", 0.6), ("watch-cache", 0.4)):
                value = 1e8 * share + share * added + (rng.normal(0, noise) if noise else 0)
                points.append((run, crds, "served", target, value))
            points.append((run, crds, "served", "rss", 3e8 + 1.5 * added))
    return pd.DataFrame(points, columns=["run", "crds", "phase", "target", "value"]), feats


def test_fit_recovers_costs_and_predicts_a_new_set():
    points, feats = _sweep()
    rows = training_rows(points, feats)
    assert len(rows) == 3 * 4 * 3 and rows["added"].min() > 0
    model = fit_footprint(rows, ["crds", "properties"], kube_version="1.37.1",
                          provenance={"experiment": "schema-size", "machine": "test", "date": "2026-11-23"})
    assert model.targets["openapi"].coef == pytest.approx([0.6 * 50_000, 0.6 * 900])
    new = {"crds": 300, "properties": 300 * 500, "served_versions": 300, "schema_bytes": 0}
    out = predict(model, new).set_index("target")
    assert out.loc["rss", "value"] == pytest.approx(1.5 * (300 * 50_000 + 300 * 500 * 900))
    assert list(out.index)[-1] == "rss"
    # Round trip through JSON keeps the numbers.
    again = FootprintModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert predict(again, new)["value"].tolist() == pytest.approx(out.reset_index()["value"].tolist())
    assert again.provenance["experiment"] == "schema-size"


def test_noisy_prediction_interval_holds_the_truth():
    points, feats = _sweep(noise=2e5)
    model = fit_footprint(training_rows(points, feats), ["crds", "properties"], kube_version="1.37.1")
    new = {"crds": 200, "properties": 200 * 300}
    row = predict(model, new).set_index("target").loc["openapi"]
    truth = 0.6 * (200 * 50_000 + 200 * 300 * 900)
    assert row["low"] < truth < row["high"] and not math.isnan(row["low"])


def test_model_records_what_it_saw_and_flags_extrapolation():
    points, feats = _sweep()
    model = fit_footprint(training_rows(points, feats), ["crds", "properties"], kube_version="1.37.1")
    assert model.ranges == {"crds": [25.0, 100.0], "properties_per_crd": [10.0, 1000.0]}
    assert FootprintModel.from_dict(json.loads(json.dumps(model.to_dict()))).ranges == model.ranges
    assert extrapolations(model, {"crds": 50, "properties": 50 * 300}) == []
    lines = extrapolations(model, {"crds": 2000, "properties": 2000 * 5000})
    assert len(lines) == 2 and lines[0].startswith("crds 2,000 is outside the fitted range [25, 100]")
    assert extrapolations(FootprintModel("1.37.1", ["crds"], {}), {"crds": 2000}) == []  # no ranges recorded


def test_collinear_features_are_refused():
    points, feats = _sweep()
    rows = training_rows(points[points["run"] == "p100"], feats)
    with pytest.raises(ValueError, match="collinear"):
        fit_footprint(rows, ["crds", "properties"], kube_version="1.37.1")
    model = fit_footprint(rows, ["crds"], kube_version="1.37.1")
    assert model.targets["openapi"].coef[0] == pytest.approx(0.6 * (50_000 + 900 * 100))


def test_footprint_cli_with_the_shipped_model(tmp_path, capsys):
    from crdscale.cli.main import main
    from crdscale.crds.generate import write_crds
    from crdscale.footprint_models import shipped_versions

    assert "1.37.1" in shipped_versions()
    write_crds(generate_crds(preset("apigen", crd_count=50, group_count=5, property_count=100)), tmp_path)
    assert main(["footprint", str(tmp_path), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["features"]["crds"] == 50 and data["model"]["provenance"]["experiment"]
    assert data["warnings"] == []  # 50 CRDs of 100 properties: inside the sweep
    heap = data["served_heap_bytes"]
    assert 0 < heap["low"] < heap["value"] < heap["high"]
    assert 100 * 2**10 * 50 < heap["value"] < 5 * 2**20 * 50  # between 100 KiB and 5 MiB per CRD
    assert main(["footprint", str(tmp_path), "--kube-version", "1.24.0"]) == 0
    assert "heap, total" in capsys.readouterr().out
    few = tmp_path / "few"
    write_crds(generate_crds(preset("apigen", crd_count=4, group_count=1, property_count=2000)), few)
    assert main(["footprint", str(few)]) == 0
    assert "properties per crd 2,000 is outside the fitted range" in capsys.readouterr().err
    assert main(["footprint", str(tmp_path), "--kube-version", "0.1.0"]) == 2
