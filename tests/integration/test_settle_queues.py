"""The settle waits until kube-apiserver's CRD work queues are idle before a step's profile, and records
how long: a run of a few CRDs on v1.24.0, whose aggregator re-merges the whole OpenAPI spec after CRD
changes (open_api_aggregation_controller), the queue the wait exists for, and on v1.37.1."""

from __future__ import annotations

from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.rundir import layout, read_run

SCENARIO = """\
name = "settle-queues"
[target]
kube_version = "{version}"
[crds]
count = 30
groups = 3
property_count = 20
[steps]
count = 1
serve = "list"
settle_seconds = 0
settle_queues_timeout_seconds = 300
[profiles]
installed_phase = false
[metrics]
source = "direct"
"""


# v1.37.1 encodes only the two queue families asked for (name[]); v1.24.0 sends all of /metrics.
# v1.24.0 is built while the other tests run (make test: scripts/test.sh).
@pytest.mark.parametrize("version", [pytest.param("1.24.0", marks=pytest.mark.extra_versions), "1.37.1"])
def test_settle_waits_for_the_crd_queues_and_records_it(tmp_path: Path, version: str):
    scenario = tmp_path / "settle.toml"
    scenario.write_text(SCENARIO.format(version=version))
    assert main(["run", str(scenario), "--out", str(tmp_path / "runs")]) == 0
    (run,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    events = read_run(run).read_jsonl(layout.EVENTS)
    drained = [e for e in events if e["kind"] == "settle.drained"]
    assert [e["label"] for e in drained] == ["baseline", "step 1"]
    for e in drained:
        assert e["drained"] is True and 0 <= e["seconds"] < 300 and e["scrapes"] >= 2, e
        assert "open_api_aggregation_controller" in e["queues"] and "crd_openapi_controller" in e["queues"]
    # settle_seconds = 0 still records each settle's start mark, before its wait.
    settles = [(e["kind"], e["label"]) for e in events if e["kind"] in ("settle.start", "settle.drained")]
    assert settles == [(k, label) for label in ("baseline", "step 1") for k in ("settle.start", "settle.drained")]
    assert all(e["seconds"] == 0 for e in events if e["kind"] == "settle.start")
    # The profile is taken after the wait ended.
    kinds = [e["kind"] for e in events]
    step_drained = kinds.index("settle.drained", kinds.index("step.start"))
    assert step_drained < kinds.index("step.end")
