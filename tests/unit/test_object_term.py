"""The footprint model's per-object term: object features, the form rule, intervals that hold their coverage,
and `crdscale footprint --objects`."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from crdscale.crds.generate import generate_crds, preset
from crdscale.footprint.objects import (
    CAUSE,
    ObjectTerm,
    choose_form,
    fit_object_term,
    generated_object_features,
    object_features,
    with_objects,
)

KIB = 1024.0


def _crd():
    return generate_crds(preset("apigen", crd_count=1, group_count=1, property_count=20).validate())[0]


# -- what an object is, as the term sees it


def test_object_features_count_every_json_value_and_ignore_what_the_server_sets():
    sent = {"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {"a": "b", "l": [1, 2]}}
    read_back = json.loads(json.dumps(sent))
    read_back["metadata"].update(
        uid="u",
        resourceVersion="7",
        generation=1,
        creationTimestamp="2026-01-01T00:00:00Z",
        managedFields=[{"manager": "m", "fieldsV1": {"f:spec": {}}}],
    )
    # root, apiVersion, kind, metadata, name, spec, a, l, 1, 2
    assert object_features(sent) == {"bytes": float(len(json.dumps(sent, separators=(",", ":")))), "nodes": 10.0}
    assert object_features(read_back) == object_features(sent)


def test_shapes_of_one_size_differ_in_values_not_bytes():
    crd = _crd()
    features = {shape: generated_object_features(crd, shape, 8192) for shape in ("flat", "nested", "list", "schema")}
    assert {f["bytes"] for f in features.values()} == {8192.0}
    # A list of small maps has the most values per byte; the schema's 20 properties the fewest.
    assert features["list"]["nodes"] > features["nested"]["nodes"] > features["flat"]["nodes"]
    assert features["schema"]["nodes"] < features["flat"]["nodes"]


# -- the form rule and the interval's coverage, simulated as the cells are made

DESIGN = [(s, b) for s in ("flat", "nested", "list", "schema") for b in (1024, 8192)]
# Features of the design's objects (generated_object_features of a 20-property apigen CRD).
NODES = {
    ("flat", 1024): 22,
    ("flat", 8192): 116,
    ("nested", 1024): 40,
    ("nested", 8192): 200,
    ("list", 1024): 49,
    ("list", 8192): 331,
    ("schema", 1024): 28,
    ("schema", 8192): 28,
}


def _cells(rng, truth, shape_sd, steps=3, per_step=2000, step_noise=4 * 2**20):
    """Measured heap per object of each cell: the truth, times a misfit of the cell's shape the form does not
    capture, estimated from ``steps`` increments of ``per_step`` objects, each with the heap profile's noise
    (Go samples one allocation per 512 KiB on average; a step's profile of the whole heap varies by MiBs)."""
    features, heap = [], []
    for shape, size in DESIGN:
        f = {"bytes": float(size), "nodes": float(NODES[shape, size])}
        true = truth(f) * math.exp(rng.normal(0, shape_sd))
        increments = true * per_step + rng.normal(0, step_noise, steps)
        features.append(f)
        heap.append(float(increments.mean() / per_step))
    return features, heap


def _truth(f):
    return 4 * KIB + 300 * f["nodes"] + 0.5 * f["bytes"]


def test_the_rule_finds_the_form_the_data_follow():
    rng = np.random.default_rng(7)
    wins = [choose_form(*_cells(rng, lambda f: 4 * KIB + 300 * f["nodes"], 0.03))[0] for _ in range(40)]
    # Values alone generate the data: the rule picks them (fewer columns within a point of the richer form).
    assert wins.count("nodes") >= 30


def test_a_new_cells_interval_holds_its_coverage():
    rng = np.random.default_rng(11)
    inside = trials = 0
    for _ in range(300):
        features, heap = _cells(rng, _truth, 0.12)
        form, _ = choose_form(features, heap)
        term = fit_object_term("1.37.1", features, heap, form)
        # A new cell: a shape and size between the design's, with its own misfit and measurement noise.
        new = {"bytes": float(rng.uniform(1024, 8192)), "nodes": float(rng.uniform(22, 331))}
        measured = _truth(new) * math.exp(rng.normal(0, 0.12)) + rng.normal(0, 4 * 2**20, 3).mean() / 2000
        value, low, high = term.per_object(new)
        assert 0 < low <= value <= high
        inside += low <= measured <= high
        trials += 1
    # 95 % stated; leave-one-cell-out residuals on 8 cells, the form chosen on the same cells.
    assert 0.90 <= inside / trials <= 0.995, inside / trials


def test_a_total_over_many_objects_keeps_the_per_object_share():
    term = ObjectTerm("1.37.1", "nodes", [4 * KIB, 300.0], 0.2, 6, (3.0, 2.0, 5.0))
    f = {"bytes": 1024.0, "nodes": 40.0}
    one = term.per_object(f)
    total = term.predict([(1000, f), (500, f)])
    assert total == pytest.approx(tuple(1500 * v for v in one))
    assert total[1] / total[0] == pytest.approx(one[1] / one[0])


def test_with_objects_adds_a_cause_to_the_total_and_both_rss():
    rows = [
        ("watch-cache", 10.0, 5.0, 20.0),
        ("total", 100.0, 50.0, 200.0),
        ("rss", 300.0, 200.0, 400.0),
        ("rss_peak", 500.0, 300.0, 700.0),
    ]
    out = {t: (v, lo, hi) for t, v, lo, hi in with_objects(rows, (40.0, 20.0, 80.0), (3.0, 2.0, 5.0))}
    assert out[CAUSE] == (40.0, 20.0, 80.0)
    assert out["total"] == (140.0, 70.0, 280.0)
    assert out["rss"] == (420.0, 240.0, 800.0) and out["rss_peak"] == (620.0, 340.0, 1100.0)
    assert out["watch-cache"] == (10.0, 5.0, 20.0)


def test_term_files_round_trip_and_refuse_other_formats():
    term = ObjectTerm("1.37.1", "nodes+bytes", [1.0, 2.0, 3.0], 0.1, 5, (2.0, 1.5, 3.0), {"bytes": [1.0, 2.0]})
    assert ObjectTerm.from_dict(term.to_dict()) == term
    with pytest.raises(ValueError, match="format"):
        ObjectTerm.from_dict({**term.to_dict(), "format": 99})
