"""A small objects run on the real local control plane (steps.grow = "objects"): 2 CRDs x 500
custom resources and 500 ConfigMaps complete, and `crdscale analyze -o json` holds bytes per
object by cause, the amplification ratio for both kinds, and what a LIST of each kind's objects
cost (objects.list_repeats), with where the server served it from."""

from __future__ import annotations

import json

from crdscale.cli.main import main
from crdscale.footprint.terms import object_cell
from crdscale.rundir import read_run

SMALL_OBJECTS = """\
name = "objects-small"
[crds]
count = 2
groups = 1
property_count = 10
scope = "Namespaced"
[steps]
grow = "objects"
count = 2
serve = "list"
settle_seconds = 2
[objects]
count = 250
bytes = 1024
control = ["configmaps"]
concurrency = 16
list_repeats = 2
list_kinds = ["consistent", "rv0"]
[profiles]
installed_phase = false
[metrics]
apiserver_metrics_interval_seconds = 5
apiserver_cpu_budget_percent = 0
"""


def test_small_objects_run_has_per_object_bytes_by_cause_and_amplification(tmp_path, capsys):
    scenario = tmp_path / "objects.toml"
    scenario.write_text(SMALL_OBJECTS)
    assert main(["run", str(scenario), "--out", str(tmp_path / "runs")]) == 0
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    run = read_run(run_dir)
    steps = run.object_steps
    # One kind per step, interleaved: 2 x (custom resources, ConfigMaps), 500 objects each.
    assert list(steps["kind"]) == ["customresources", "configmaps"] * 2
    assert steps.groupby("kind")["objects_in_step"].sum().to_dict() == {"customresources": 500, "configmaps": 500}
    kinds = run.manifest["objects"]["kinds"]
    # The server adds uid, resourceVersion, timestamps and managedFields to what was sent.
    assert kinds["customresources"]["stored_bytes"] > kinds["customresources"]["sent_bytes"] == 1024

    capsys.readouterr()
    assert main(["analyze", str(run_dir), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (result,) = doc["runs"]
    per_object = result["per_object"]
    totals = {r["kind"]: r for r in per_object if r["cause"] == "total" and r["metric"] == "bytes"}
    assert set(totals) == {"customresources", "configmaps"}
    for r in totals.values():
        assert r["objects"] == 500 and r["increments"] == 2
        assert r["per_object_low"] is not None and r["per_object_high"] is not None
    causes = {r["cause"] for r in per_object if r["kind"] == "customresources"}
    assert {"watch-cache", "unstructured", "managed-fields"} <= causes
    amplification = {r["kind"]: r for r in result["amplification"]}
    assert set(amplification) == {"customresources", "configmaps"}
    for r in amplification.values():
        assert r["serialized_bytes"] > 1024 and r["amplification"] is not None
    # Timed after the last step: both kinds, both LISTs, every object in each; v1.37.1 serves a
    # consistent LIST from its watch cache too (ConsistentListFromCache), and etcd's CPU is read.
    lists = {(r["kind"], r["list"]): r for r in result["object_lists"]}
    assert set(lists) == {(k, q) for k in ("customresources", "configmaps") for q in ("consistent", "rv0")}
    assert lists[("customresources", "rv0")]["items"] == 250 and lists[("configmaps", "rv0")]["items"] >= 500
    for r in lists.values():
        assert r["served_from"] == "cache" and r["latency_p50_s"] > 0 and r["etcd_cpu_s"] is not None

    # What crdscale footprint fit objects takes from a run for the footprint's per-object term: heap per custom
    # resource as analyze fitted it, and the features of the objects the run wrote, rebuilt from its manifest.
    cell = object_cell(run_dir)
    assert cell["kube_version"] == "1.37.1" and cell["shape"] == "flat" and cell["objects"] == 500
    assert cell["heap"] == totals["customresources"]["per_object"]
    assert abs(cell["features"]["bytes"] - 1024) <= 10 and cell["features"]["nodes"] > 10
