"""Description text as a footprint term: counted in every served schema, fitted on generated provider-scale cells
(the sweep's schemas have none), kept at 0 or above, left out by a refit."""

from __future__ import annotations

import pandas as pd
import pytest

from crdscale.errors import UsageError
from crdscale.footprint import calibrate
from crdscale.footprint.calibrate import RunInput, add_description_term, default_features
from crdscale.footprint.features import crd_features, footprint_features
from crdscale.footprint.model import predict
from crdscale.footprint.store import read_model, shipped_path
from crdscale.schema import description_bytes


def test_text_is_counted_wherever_a_schema_nests_it_and_only_in_served_versions():
    schema = {
        "description": "top",
        "properties": {"a": {"description": "é"}, "b": {"items": {"description": "xy"}}, "c": {"type": "string"}},
    }
    assert description_bytes(schema) == 3 + 2 + 2  # bytes: é is two
    version = lambda name, served: {"name": name, "served": served, "schema": {"openAPIV3Schema": schema}}  # noqa: E731
    crd = {"spec": {"versions": [version("v1", True), version("v0", False)]}}
    assert crd_features(crd)["description_bytes"] == 7
    assert footprint_features([crd, crd])["description_bytes"] == 14


def _cell(tmp_path, name, crds, text, total, rss, rules=0.0):
    features = {"crds": crds, "served_versions": crds, "properties": 100.0 * crds, "properties_squared": 0.0}
    features |= {"schema_bytes": 0.0, "cel_rules": rules, "description_bytes": text, "max_depth": 5.0}
    points = pd.DataFrame(
        [
            {"crds": c, "phase": "served", "target": t, "value": v}
            for c, scale in ((0, 0.0), (crds, 1.0))
            for t, v in (("total", total * scale), ("rss", rss * scale), ("crd-schema", total * scale / 4))
        ]
    ).assign(run=str(tmp_path / name))
    return RunInput(tmp_path / name, {}, points, features)


def test_the_term_is_what_cells_hold_beyond_the_model_per_byte_of_text(tmp_path, monkeypatch):
    model_file = tmp_path / "m.json"
    model_file.write_text(shipped_path("1.37.1").read_text())
    model = read_model(model_file)
    base = {"crds": 1000.0, "served_versions": 1000.0, "properties": 1e5, "cel_rules": 0.0}
    predicted = predict(model, base).set_index("target")["value"]
    # Two cells of 1,000 CRDs: 200 and 400 MiB more heap than predicted, for 50 and 100 MiB of text: 4 per byte.
    mib = 2**20
    cells = [
        _cell(tmp_path, "a", 1000.0, 50 * mib, predicted["total"] + 200 * mib, predicted["rss"] + 500 * mib),
        _cell(tmp_path, "b", 1000.0, 100 * mib, predicted["total"] + 400 * mib, predicted["rss"] + 1000 * mib),
    ]
    monkeypatch.setattr(calibrate, "run_dirs_of", lambda paths: list(paths))
    monkeypatch.setattr(calibrate, "read_run_input", lambda path: path)
    monkeypatch.setattr(RunInput, "kube_version", property(lambda self: "1.37.1"))
    path, lines = add_description_term(cells, model_file)
    fitted = read_model(path)
    i = fitted.features.index("description_bytes")
    assert fitted.targets["total"].coef[i] == pytest.approx(4.0)
    assert fitted.targets["rss"].coef[i] == pytest.approx(10.0)
    assert fitted.targets["total"].cov[i][i] == pytest.approx(0.0, abs=1e-9)  # the two cells agree
    assert any(line.startswith("total: 4.00 bytes per byte") for line in lines)
    assert fitted.provenance["uses"]["description_term"][0].startswith("cells a (50.0 MiB of text), b")
    # a cause the cells hold less of than predicted gets none: text frees no memory
    assert fitted.targets["crd-schema"].coef[i] >= 0.0
    assert "description_bytes" not in default_features("1.37.1")
    with pytest.raises(UsageError, match="at least two cells"):
        add_description_term(cells[:1], model_file)
    with pytest.raises(UsageError, match="CEL rules"):
        add_description_term([cells[0], _cell(tmp_path, "c", 10.0, 1.0, 1.0, 1.0, rules=2.0)], model_file)


def test_a_recorded_generated_set_gets_its_counts_from_the_set_regenerated(tmp_path):
    from crdscale.crds.generate import generate_crds, preset
    from crdscale.crds.summary import summarize

    params = {"source": "generate", "preset": "provider", "count": 4, "groups": 2, "property_count": 5, "seed": 3}
    crds = generate_crds(preset("provider", crd_count=4, group_count=2, property_count=5, seed=3))
    recorded = {k: v for k, v in summarize(crds).to_dict().items() if k not in ("cel_rules", "description_bytes")}
    again = calibrate._with_term_counts(recorded, {"crds": params})
    assert again["description_bytes"] == footprint_features(crds)["description_bytes"] > 0
    other = {**recorded, "sha256": "0" * 64}  # not the set its parameters give: left as recorded
    assert calibrate._with_term_counts(other, {"crds": params}) is other
