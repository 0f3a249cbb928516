"""Footprint models: calibration's fit-and-write on synthetic runs, and which model a prediction uses
(calibrated on this machine beats shipped; the CLI says which, with its provenance)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from crdscale.cli.main import main
from crdscale.crds.generate import generate_crds, preset, write_crds
from crdscale.errors import UsageError
from crdscale.footprint import store
from crdscale.footprint.calibrate import RunInput, fit_runs, validation_lines
from crdscale.footprint.features import features_from_summary
from crdscale.footprint.model import predict
from crdscale.footprint.store import CALIBRATED, FILE, SHIPPED, choose_model, read_model, write_model

REFERENCE = Path(__file__).resolve().parents[2] / "data" / "reference-run"

MANIFEST = {
    "versions": {"kube-apiserver": "v1.37.1"},
    "machine": {"cpus": 2, "cpu_model": "Test CPU", "memory_bytes": 8 * 2**30},
    "binaries": {"kube-apiserver": {"sha256": "ab" * 32}},
}


def _run_input(props: int, versions: int, *, kube_version: str = "v1.37.1") -> RunInput:
    """A sweep cell as calibration reads it: 60 CRDs in 3 steps, heap and RSS growing with the set."""
    summary = {
        "count": 60,
        "versions": 60 * versions,
        "properties_total": 60 * versions * props,
        "schema_bytes_total": 60 * versions * props * 40,
        "sha256": f"set-{props}-{versions}",
    }
    per_crd = 40_000 + versions * (150_000 + 800 * props)
    rows = []
    for crds in (0, 20, 40, 60):
        rows += [
            (crds, "served", "openapi", 5e7 + 0.5 * per_crd * crds),
            (crds, "served", "watch-cache", 2e7 + 0.5 * per_crd * crds),
            (crds, "served", "total", 7e7 + per_crd * crds),
            (crds, "served", "rss", 3e8 + 2.5 * per_crd * crds),
        ]
    path = Path(f"/runs/exp/cell-p{props}-v{versions}")
    points = pd.DataFrame(rows, columns=["crds", "phase", "target", "value"]).assign(run=str(path))
    manifest = {**MANIFEST, "versions": {"kube-apiserver": kube_version}, "crds": summary}
    return RunInput(path, manifest, points, features_from_summary(summary))


SWEEP = [_run_input(p, v) for p in (10, 100, 300) for v in (1, 3)]


def test_calibration_fits_runs_and_writes_the_model_with_its_provenance(tmp_path):
    model = fit_runs(
        SWEEP,
        features=["crds", "served_versions", "properties"],
        experiment="sweep (exp)",
        method="crdscale footprint --calibrate --kube-version 1.37.1",
    )
    assert model.kube_version == "1.37.1"
    assert model.targets["total"].coef == pytest.approx([40_000, 150_000, 800])
    assert model.targets["total"].dof == 6 - 3
    prov = model.provenance
    assert prov["experiment"] == "sweep (exp)" and prov["method"].startswith("crdscale footprint --calibrate")
    assert prov["machine"] == "2 CPUs, Test CPU, 8 GiB" and prov["kube_apiserver_sha256"] == "ab" * 32
    assert prov["runs"] == [f"cell-p{p}-v{v}" for p in (10, 100, 300) for v in (1, 3)]
    assert prov["crd_sets"][0] == "set-10-1" and len(prov["date"]) == 10
    path = write_model(model, tmp_path / "models" / "v1.37.1.json")
    again = read_model(path)
    assert again.provenance == prov and again.targets["rss"].coef == pytest.approx([100_000, 375_000, 2_000])
    assert [p.name for p in path.parent.iterdir()] == ["v1.37.1.json"]  # written atomically, no temp file left


def test_calibration_fits_the_peak_excess_on_its_own_runs_and_records_their_uses():
    from dataclasses import replace

    ratios = (1.3, 1.4, 1.5, 1.35, 1.45, 1.4)
    runs = [
        replace(r, rss={"baseline": 3e8, "settled": 1e8, "peak": ratio * 1e8, "end": 1e8})
        for r, ratio in zip(SWEEP, ratios, strict=True)
    ]
    model = fit_runs(runs, features=["crds", "served_versions", "properties"], experiment="e", method="m")
    assert model.peak is not None and model.peak.runs == 6
    excesses = [(ratio - 1) * 1e8 for ratio in ratios]
    assert math.exp(model.peak.log_mean) == pytest.approx(math.prod(excesses) ** (1 / 6))
    uses = model.provenance["uses"]
    assert uses["fitting"] == uses["peak_excess"] == [r.path.name for r in runs]
    # Runs without RSS samples: no peak excess, and the model still fits.
    assert fit_runs(SWEEP, features=["crds", "served_versions", "properties"], experiment="e", method="m").peak is None


def test_calibration_refuses_what_it_cannot_fit():
    with pytest.raises(UsageError, match="several kube-apiserver versions"):
        fit_runs(SWEEP[:2] + [_run_input(10, 2, kube_version="v1.24.0")], features=["crds"], experiment="x", method="m")
    one_version = [r for r in SWEEP if r.features["served_versions"] == 60]
    with pytest.raises(UsageError, match="collinear.*--features"):
        fit_runs(one_version, features=["crds", "served_versions", "properties"], experiment="x", method="m")


@pytest.fixture
def calibrated_dir(tmp_path, monkeypatch):
    """Where this machine's calibrated models go, empty and private to the test."""
    folder = tmp_path / "calibrated"
    monkeypatch.setattr(store, "calibrated_models_dir", lambda: folder)
    return folder


def test_a_calibrated_model_beats_the_shipped_one_for_its_version(calibrated_dir):
    assert choose_model("1.37.1").origin == SHIPPED
    model = fit_runs(SWEEP, features=["crds", "served_versions", "properties"], experiment="my sweep", method="m")
    write_model(model, calibrated_dir / "v1.37.1.json")
    chosen = choose_model("v1.37.1")
    assert chosen.origin == CALIBRATED and chosen.model.provenance["experiment"] == "my sweep"
    assert "calibrated on this machine" in chosen.describe() and "my sweep" in chosen.describe()
    assert choose_model("1.37.1", shipped_only=True).origin == SHIPPED
    assert choose_model("1.24.0").origin == SHIPPED  # no calibration for that version
    assert choose_model("1.37.1", path=calibrated_dir / "v1.37.1.json").origin == FILE
    with pytest.raises(UsageError, match="not v1.24.0"):
        choose_model("1.24.0", path=calibrated_dir / "v1.37.1.json")
    with pytest.raises(UsageError, match="footprint --calibrate --kube-version 0.1.0"):
        choose_model("0.1.0")


def test_a_stale_calibrated_model_says_to_recalibrate(calibrated_dir):
    calibrated_dir.mkdir()
    (calibrated_dir / "v1.37.1.json").write_text(json.dumps({"format": 1, "kube_version": "1.37.1"}))
    with pytest.raises(UsageError, match="recalibrate"):
        choose_model("1.37.1")


@pytest.fixture
def crds(tmp_path):
    write_crds(generate_crds(preset("apigen", crd_count=50, group_count=5, property_count=100)), tmp_path / "crds")
    return tmp_path / "crds"


def test_footprint_cli_says_which_model_it_used(crds, calibrated_dir, capsys):
    assert main(["footprint", str(crds), "-o", "json"]) == 0
    shipped = json.loads(capsys.readouterr().out)
    assert shipped["model"]["origin"] == SHIPPED and shipped["model"]["provenance"]["experiment"]
    model = fit_runs(SWEEP, features=["crds", "served_versions", "properties"], experiment="my sweep", method="m")
    write_model(model, calibrated_dir / "v1.37.1.json")
    assert main(["footprint", str(crds), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"]["origin"] == CALIBRATED and data["model"]["path"] == str(calibrated_dir / "v1.37.1.json")
    assert data["model"]["provenance"]["machine"] == "2 CPUs, Test CPU, 8 GiB"
    expected = predict(model, data["features"]).set_index("target").loc["total", "value"]
    assert data["served_heap_bytes"]["value"] == pytest.approx(expected)
    assert main(["footprint", str(crds)]) == 0
    text = capsys.readouterr().out
    assert f"model: calibrated on this machine ({calibrated_dir / 'v1.37.1.json'})" in text and "my sweep" in text
    assert main(["footprint", str(crds), "--shipped"]) == 0
    assert "model: shipped with crdscale" in capsys.readouterr().out


def test_footprint_cli_with_the_shipped_models(crds, calibrated_dir, tmp_path, capsys):
    assert {"1.24.0", "1.37.1"} <= set(store.shipped_versions())
    assert main(["footprint", str(crds), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["features"]["crds"] == 50 and data["warnings"] == []  # 50 CRDs of 100 properties: inside the sweep
    heap = data["served_heap_bytes"]
    assert 0 < heap["low"] < heap["value"] < heap["high"]
    assert 100 * 2**10 * 50 < heap["value"] < 5 * 2**20 * 50  # between 100 KiB and 5 MiB per CRD
    assert main(["footprint", str(crds), "--kube-version", "1.24.0"]) == 0
    assert "heap, total" in capsys.readouterr().out
    few = tmp_path / "few"
    write_crds(generate_crds(preset("apigen", crd_count=4, group_count=1, property_count=6000)), few)
    assert main(["footprint", str(few)]) == 0
    assert "properties per served version 6,000 is outside the fitted range" in capsys.readouterr().err
    assert main(["footprint", str(crds), "--kube-version", "0.1.0"]) == 2
    assert main(["footprint"]) == 2 and main(["footprint", str(crds), "--calibrate"]) == 2
    assert main(["footprint", str(crds), "--out", "x"]) == 2


def test_a_patch_release_without_a_model_borrows_its_minors_nearest_one(calibrated_dir, monkeypatch):
    monkeypatch.setattr(store, "shipped_versions", lambda: ["1.24.0", "1.24.17", "1.37.1"])
    assert store.same_minor_shipped("1.24.3") == "1.24.0"
    assert store.same_minor_shipped("v1.24.15") == "1.24.17"
    assert store.same_minor_shipped("1.37.4") == "1.37.1"
    assert store.same_minor_shipped("1.30.0") is None  # another minor never stands in
    chosen = choose_model("1.37.4", same_minor=True)
    assert chosen.stands_in_for == "1.37.4" and chosen.model.kube_version == "1.37.1"
    assert "standing in for v1.37.4" in chosen.describe()
    assert choose_model("1.37.1", same_minor=True).stands_in_for is None
    with pytest.raises(UsageError, match="no footprint coefficients for kube-apiserver v1.37.4"):
        choose_model("1.37.4")  # only when asked: the scripts that refit a version want that version
    with pytest.raises(UsageError, match="no footprint coefficients"):
        choose_model("1.30.0", same_minor=True)


def test_the_footprint_cli_says_when_another_patch_releases_model_stands_in(crds, capsys, caplog):
    assert main(["footprint", str(crds), "--kube-version", "1.37.9", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"]["stands_in_for"] == "1.37.9" and out["kube_version"] == "1.37.1"
    assert "no model shipped for kube-apiserver v1.37.9; using v1.37.1's" in caplog.text


def test_validate_names_a_run_stopped_before_its_whole_set_instead_of_comparing_it(tmp_path):
    """A prediction is for the whole set: a run stopped early (its last step's profiles gone) is named, not
    compared, where the whole run is compared."""
    stopped = tmp_path / "stopped"
    shutil.copytree(REFERENCE, stopped)
    for profile in (stopped / "profiles").glob("heap-step04-*"):
        profile.unlink()
    whole, cut = validation_lines([REFERENCE, stopped])[0], validation_lines([stopped])
    assert "predicted" in whole
    assert cut == [
        f"{stopped}: stopped at 120 of its 160 CRDs: not compared (a prediction is for the whole set; "
        "benchmarks/footprint.py --validation compares the CRDs a run installed)"
    ]


def test_validate_says_when_a_real_sets_manifest_did_not_count_the_terms(tmp_path):
    """A real set's run recorded before CEL rules and description text were counted is predicted without them,
    and each line says so; a generated set's counts are regenerated, so its lines say nothing."""
    real = tmp_path / "real"
    shutil.copytree(REFERENCE, real)
    manifest = json.loads((real / "manifest.json").read_text())
    manifest["scenario"]["crds"] = {"source": "/somewhere/provider-crds.tar.gz"}
    for key in ("cel_rules", "description_bytes"):
        manifest["crds"].pop(key, None)
    (real / "manifest.json").write_text(json.dumps(manifest))
    note = "(CEL rules and description text not counted in this run's manifest: predicted without them)"
    assert all(line.endswith(note) for line in validation_lines([real]))
    assert not any(note in line for line in validation_lines([REFERENCE]))
