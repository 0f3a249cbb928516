"""A small run with profiles.openapi_v2 on the real local control plane: every profile mark has its
openapiv2 twin after a GET of /openapi/v2, the fetches are events, and `crdscale analyze -o json`
holds the v2 spec's cost per CRD and the openapiv2 phase's fits."""

from __future__ import annotations

import json

from crdscale.cli.main import main
from crdscale.rundir import read_run

SMALL_V2 = """\
name = "openapi-v2-small"
[crds]
preset = "provider"
count = 6
groups = 2
property_count = 20
[steps]
count = 3
serve = "list"
settle_seconds = 2
[profiles]
installed_phase = false
openapi_v2 = "protobuf"
[metrics]
apiserver_metrics_interval_seconds = 5
apiserver_cpu_budget_percent = 0
"""


def test_openapi_v2_phase_pairs_every_profile_and_analyze_reports_it(tmp_path, capsys):
    scenario = tmp_path / "v2.toml"
    scenario.write_text(SMALL_V2)
    assert main(["run", str(scenario), "--out", str(tmp_path / "runs")]) == 0
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    run = read_run(run_dir)
    heap = run.profiles[run.profiles["kind"] == "heap"]
    phases = heap["phase"].map(lambda p: p if isinstance(p, str) and p else "served")  # no phase: a step's end
    marks = phases.groupby(heap["crds"]).apply(sorted).to_dict()
    assert marks == {n: ["openapiv2", "served"] for n in (0, 2, 4, 6)}
    fetches = run.events[run.events["kind"] == "openapi_v2.fetch"]
    assert list(fetches["crds"]) == [0, 2, 4, 6] and (fetches["bytes"] > 100_000).all()
    # The spec grows with the CRDs it publishes.
    assert fetches["bytes"].iloc[-1] > fetches["bytes"].iloc[0]

    capsys.readouterr()
    assert main(["analyze", str(run_dir), "-o", "json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["runs"]
    assert "openapiv2" in result["phases"]
    total = [r for r in result["openapi_v2"] if r["cause"] == "total" and r["metric"] == "bytes"]
    assert len(total) == 1 and total[0]["steps"] == 3 and total[0]["at_baseline"] is not None
