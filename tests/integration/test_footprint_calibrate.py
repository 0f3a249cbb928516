"""`crdscale footprint --calibrate` end to end on the real local control plane, kept tiny: a 2-cell
sweep (5 and 40 properties) of 10 CRDs in 2 steps, fitted on CRDs and properties, the model written
to a file that `crdscale footprint --model` then predicts with."""

from __future__ import annotations

import json
import math

from crdscale.cli.main import main
from crdscale.crds.generate import generate_crds, preset, write_crds
from crdscale.rundir import read_run
from crdscale.scenario.experiment import Experiment

TINY_SWEEP = """\
name = "tiny-sweep"
[target]
kind = "local"
[crds]
count = 10
groups = 2
seed = 5
[steps]
count = 2
serve = "watch"
settle_seconds = 0
[profiles]
kinds = ["heap"]
installed_phase = false
[metrics]
scrape_interval_seconds = 1
[matrix]
"crds.property_count" = [5, 40]
"""


def test_calibrate_runs_the_sweep_fits_and_the_model_is_used(tmp_path, capsys):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(TINY_SWEEP)
    model_file = tmp_path / "model.json"
    assert (
        main(
            [
                "footprint",
                "--calibrate",
                "--sweep",
                str(sweep),
                "--out",
                str(tmp_path / "runs"),
                "--features",
                "crds,properties",
                "--model",
                str(model_file),
                "-o",
                "json",
            ]
        )
        == 0
    )
    out = capsys.readouterr()
    result = json.loads(out.out)
    assert result["model_path"] == str(model_file) and model_file.is_file()
    assert "cell 1/2 property_count=5: completed" in out.err and "ETA" in out.err
    experiment = Experiment.open(result["experiment"])
    runs = [path for _name, path in experiment.completed_runs()]
    assert len(runs) == 2 and all(read_run(r).status == "completed" for r in runs)
    prov = result["model"]["provenance"]
    assert prov["runs"] == [r.name for r in runs] and str(experiment.path.resolve()) in prov["experiment"]
    assert prov["method"] == "crdscale footprint --calibrate --kube-version 1.37.1"
    assert prov["kube_apiserver_sha256"] == read_run(runs[0]).manifest["binaries"]["kube-apiserver"]["sha256"]
    # Which runs did what ships with the model; the sweep's own RSS samples give its peak ratio (runs this
    # short may lack the samples: then no ratio, and no record of one).
    assert prov["uses"]["fitting"] == prov["runs"]
    peak = result["model"].get("peak_excess")
    assert (peak is not None) == ("peak_excess" in prov["uses"])
    assert peak is None or (peak["runs"] == 2 and prov["uses"]["peak_excess"] == prov["runs"])
    total = result["model"]["targets"]["total"]
    assert total["dof"] == 0 and all(math.isfinite(c) for c in total["coef"])  # 2 runs, 2 features: no interval

    crds = tmp_path / "crds"
    write_crds(generate_crds(preset("apigen", crd_count=10, group_count=2, property_count=20, seed=9)), crds)
    assert main(["footprint", str(crds), "--model", str(model_file), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"]["origin"] == "file"
    # The model's own provenance, its `uses` joined by the version's shipped state terms' (footprint --state).
    shown = data["model"]["provenance"]
    assert {k: v for k, v in shown.items() if k != "uses"} == {k: v for k, v in prov.items() if k != "uses"}
    assert all(shown["uses"][k] == v for k, v in prov["uses"].items())
    assert set(shown["uses"]) - set(prov["uses"]) <= {"state_installed", "state_watched", "state_openapi_v2"}
    assert math.isfinite(data["served_heap_bytes"]["value"]) and data["served_heap_bytes"]["low"] is None
    # Peak RSS is predicted when the model has a peak excess: a run this short may lack a sample before 0 CRDs,
    # or settle below its baseline RSS (no positive growth to take the excess over), and then it has none.
    assert (peak is not None) == (data["rss_peak_bytes"] is not None)
    assert peak is None or "rss" in result["model"]["targets"]
    assert "rss_peak" in data["definitions"]
