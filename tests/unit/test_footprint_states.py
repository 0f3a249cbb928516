"""`crdscale footprint --state`: installed, watched, served and openapi-v2 from the served prediction
and the version's measured state terms; each defined, ordered, never below zero, with provenance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from crdscale.analysis.targets import TOTAL
from crdscale.cli.main import main
from crdscale.footprint.model import RSS, LinearModel, predict
from crdscale.footprint.states import (
    OPENAPI_V2_CAUSE,
    STATE_DEFINITIONS,
    STATES,
    WATCH_CAUSE,
    StateTerms,
    fit_openapi_v2_term,
    predict_state,
)
from crdscale.footprint.store import choose_model

FEATURES = {"crds": 100.0, "served_versions": 200.0, "properties": 20_000.0, "properties_squared": 2e6,
            "schema_bytes": 4e6, "max_depth": 4.0}  # fmt: skip


def terms(version: str = "1.37.1", watch_kib=(300.0, 150.0, 450.0)) -> StateTerms:
    return StateTerms(
        version,
        {"openapi": 1.0, "jsonschemaprops": 1.0, "watch-cache": 0.8, "crd-schema": 0.02},
        tuple(v * 1024 for v in watch_kib),
        ["served_versions", "properties"],
        LinearModel([50_000.0, 4_000.0], [[1e8, 0.0], [0.0, 1e4]], 0.0, 3),
        {"uses": {"state_openapi_v2": ["runs/x: 1 MiB per CRD"]}},
    )


@pytest.fixture
def model():
    return choose_model("1.37.1", shipped_only=True).model


def _by(table):
    return table.set_index("target")


def test_states_are_ordered_and_never_below_zero(model):
    t = terms()
    totals = {s: _by(predict_state(model, t, FEATURES, s)).loc[TOTAL, "value"] for s in STATES}
    assert totals["installed"] < totals["watched"] <= totals["served"] < totals["openapi-v2"]
    for state in STATES:
        table = predict_state(model, t, FEATURES, state)
        assert (table["low"] >= 0).all() and (table["low"] <= table["value"]).all()
        assert (table["value"] <= table["high"]).all()
    assert predict_state(model, t, FEATURES, "served").equals(predict(model, FEATURES))


def test_installed_keeps_each_cause_share(model):
    served, installed = _by(predict(model, FEATURES)), _by(predict_state(model, terms(), FEATURES, "installed"))
    assert installed.loc["openapi", "value"] == pytest.approx(served.loc["openapi", "value"])
    assert installed.loc["crd-handler", "value"] == 0  # comes with serving
    ratio = installed.loc[TOTAL, "value"] / served.loc[TOTAL, "value"]
    assert installed.loc[RSS, "value"] == pytest.approx(served.loc[RSS, "value"] * ratio)


def test_watched_adds_the_controller_manager_term_at_most_served(model):
    installed = _by(predict_state(model, terms(), FEATURES, "installed")).loc[TOTAL, "value"]
    watched = _by(predict_state(model, terms(), FEATURES, "watched"))
    assert watched.loc[WATCH_CAUSE, "value"] == pytest.approx(300 * 1024 * 100)
    assert watched.loc[TOTAL, "value"] == pytest.approx(installed + 300 * 1024 * 100)
    huge = _by(predict_state(model, terms(watch_kib=(1e6, 1e6, 1e6)), FEATURES, "watched"))
    assert huge.loc[TOTAL, "value"] == pytest.approx(_by(predict(model, FEATURES)).loc[TOTAL, "value"])


def test_openapi_v2_adds_the_fetched_spec(model):
    served = _by(predict(model, FEATURES)).loc[TOTAL]
    v2 = _by(predict_state(model, terms(), FEATURES, "openapi-v2"))
    spec = 50_000 * 200 + 4_000 * 20_000
    assert v2.loc[OPENAPI_V2_CAUSE, "value"] == pytest.approx(spec)
    assert v2.loc[TOTAL, "value"] == pytest.approx(served["value"] + spec)
    assert v2.loc[TOTAL, "high"] > served["high"] + spec > v2.loc[OPENAPI_V2_CAUSE, "low"]


def test_fit_openapi_v2_term_solves_two_schema_sizes():
    fitted = fit_openapi_v2_term(
        [({"served_versions": 2, "properties": 100}, 2 * 50_000 + 100 * 4_000, 1_000.0),
         ({"served_versions": 2, "properties": 500}, 2 * 50_000 + 500 * 4_000, 2_000.0)],
        ["served_versions", "properties"],
        3,
    )  # fmt: skip
    assert fitted.coef == pytest.approx([50_000, 4_000])
    assert fitted.dof == 3 and fitted.cov[1][1] > 0
    with pytest.raises(ValueError, match="told apart"):
        fit_openapi_v2_term(
            [({"served_versions": 2, "properties": 100}, 1.0, 1.0)] * 2, ["served_versions", "properties"], 3
        )


def test_terms_round_trip():
    again = StateTerms.from_dict(json.loads(json.dumps(terms().to_dict())))
    assert again.openapi_v2.coef == terms().openapi_v2.coef and again.watch_per_crd == terms().watch_per_crd


def test_unknown_state_or_no_terms(model):
    with pytest.raises(ValueError, match="unknown state"):
        predict_state(model, terms(), FEATURES, "running")
    with pytest.raises(ValueError, match="only 'served'"):
        predict_state(model, None, FEATURES, "installed")


# -- the CLI


def _crds(tmp_path: Path) -> Path:
    folder = tmp_path / "crds"
    folder.mkdir()
    for i in range(3):
        crd = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"w{i}.example.org"},
            "spec": {
                "group": "example.org",
                "scope": "Cluster",
                "names": {"plural": f"w{i}", "kind": f"W{i}"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                    "type": "object", "properties": {f"p{j}": {"type": "string"} for j in range(50)}}}}],
            },
        }  # fmt: skip
        (folder / f"{i}.yaml").write_text(yaml.safe_dump(crd))
    return folder


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("state", STATES)
def test_cli_state_json_defines_it(tmp_path, capsys, monkeypatch, state):
    monkeypatch.setattr("crdscale.footprint.store.read_states", lambda version: terms(version))
    code, out, _ = run_cli(capsys, "footprint", str(_crds(tmp_path)), "--shipped", "--state", state, "-o", "json")
    assert code == 0
    data = json.loads(out)
    assert data["state"] == state and data["state_definition"] == STATE_DEFINITIONS[state]
    assert all(f"state {s}" in data["definitions"] for s in STATES)
    assert "state_openapi_v2" in data["model"]["provenance"]["uses"]
    assert all(p["low"] is None or p["low"] >= 0 for p in data["predictions"])


def test_cli_state_text_and_explain(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("crdscale.footprint.store.read_states", lambda version: terms(version))
    code, out, _ = run_cli(capsys, "footprint", str(_crds(tmp_path)), "--shipped", "--state", "openapi-v2")
    assert code == 0 and "openapi-v2: served, and a client" in out and OPENAPI_V2_CAUSE in out
    code, out, _ = run_cli(capsys, "footprint", "--explain", "--shipped")
    assert code == 0 and "watched: installed +" in out and "state_openapi_v2" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--state", "installed", "--budget", "8GiB"], "--state installed goes with one CRD set"),
    ],
)
def test_cli_state_refusals(tmp_path, capsys, argv, message):
    code, _, err = run_cli(capsys, "footprint", str(_crds(tmp_path)), "--shipped", *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_cli_unknown_state_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["footprint", str(_crds(tmp_path)), "--shipped", "--state", "running"])
    assert exit_.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_cli_state_without_terms_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("crdscale.footprint.store.read_states", lambda version: None)
    code, _, err = run_cli(capsys, "footprint", str(_crds(tmp_path)), "--shipped", "--state", "watched")
    assert code == 2 and "no state terms" in err and len(err.strip().splitlines()) == 1
