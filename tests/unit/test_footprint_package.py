"""crdscale.footprint as a library: the prediction a notebook gets is the one `crdscale footprint` prints,
and the fitting is a command (`crdscale footprint fit`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.crds.generate import generate_crds, preset, write_crds
from crdscale.footprint import explain_model, predict_footprint, predict_upgrade

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    root = tmp_path_factory.mktemp("sets")
    for name, count in (("old", 6), ("new", 8)):
        write_crds(
            generate_crds(preset("apigen", crd_count=count, group_count=2, property_count=30).validate()), root / name
        )
    return root


def _cli(capsys, *argv) -> tuple[str, str]:
    code = main(["footprint", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


@pytest.mark.parametrize("output", ["text", "json"])
def test_the_prediction_object_is_what_the_command_prints(sets, capsys, output):
    argv = ["--shipped", "--objects", "3", "--budget", "2GiB", "--top", "4"]
    out, err = _cli(capsys, str(sets / "new"), *argv, "-o", output)
    prediction = predict_footprint(sets / "new", shipped=True, objects=3, budget="2GiB", top=4)
    assert out == (prediction.to_json() if output == "json" else prediction.to_text()) + "\n"
    assert prediction.warnings and all(w in err for w in prediction.warnings)  # --budget without --baseline
    assert prediction.rows["total"]["low"] < prediction.rows["total"]["value"] < prediction.rows["total"]["high"]
    assert prediction.objects.total == 3 * 8 and len(prediction.top["costliest"]) == 4


@pytest.mark.parametrize("output", ["text", "json"])
def test_an_upgrade_and_the_explanation_are_what_the_command_prints(sets, capsys, output):
    out, _ = _cli(capsys, str(sets / "old"), str(sets / "new"), "--shipped", "-o", output)
    difference = predict_upgrade(sets / "old", sets / "new", shipped=True)
    assert out == (difference.to_json() if output == "json" else difference.to_text()) + "\n"
    out, _ = _cli(capsys, "--explain", "--shipped", "--kube-version", "1.24.0", "-o", output)
    explanation = explain_model("1.24.0", shipped=True)
    assert out == (explanation.to_json() if output == "json" else explanation.to_text()) + "\n"


def test_the_library_checks_what_the_command_checks(sets):
    from crdscale.errors import UsageError

    with pytest.raises(UsageError, match="--object-shape go with --objects"):
        predict_footprint(sets / "new", object_shape="flat")
    with pytest.raises(UsageError, match="--budget must be larger than --baseline"):
        predict_footprint(sets / "new", budget="1GiB", baseline="2GiB")


def test_fit_validate_predicts_a_run_it_was_not_fitted_on(capsys):
    assert main(["footprint", "fit", "validate", str(ROOT / "data" / "reference-run")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[1] for line in lines] == ["total", "rss", "rss_peak"]  # the model has a peak excess
    assert all("predicted" in line and "measured" in line and line.endswith("%)") for line in lines)


def test_fit_needs_what_to_fit_and_record_a_model(capsys):
    with pytest.raises(SystemExit) as usage:
        main(["footprint", "fit"])
    assert usage.value.code == 2 and "WHAT" in capsys.readouterr().err
    assert main(["footprint", "fit", "record", "validation=x"]) == 2
    assert "record needs --kube-version or --model" in capsys.readouterr().err
