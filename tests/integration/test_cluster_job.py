"""A matrix as an Indexed Job on the real local control plane (etcd + kube-apiserver +
kube-controller-manager, whose Job controller creates the pods; no node, so they stay
Pending): the manifests pass server-side dry-run, `run --cluster --detach` submits a
2-cell experiment, `status` shows both indexes pending, and `down` deletes the Job, its
pods, ConfigMap and ServiceAccount and nothing else."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.ownership import new_run_id
from crdscale.rundir import layout
from crdscale.scenario import clusterjob, fanout
from crdscale.scenario.config import parse_scenario
from crdscale.scenario.experiment import new_manifest

TINY = """\
name = "tiny"
[crds]
count = 4
groups = 2
property_count = 5
[steps]
count = 1
settle_seconds = 0
serve = "none"
[matrix]
"crds.count" = [2, 4]
"""


@pytest.fixture
def namespace(cluster):
    """A fresh namespace (crdscale's labels, so the test can delete it), with one foreign ConfigMap in it."""
    name = f"crdscale-test-{new_run_id()[-4:]}"
    resp = cluster.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert resp.status_code == 201, resp.text
    foreign = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "not-crdscales"}, "data": {"a": "b"}}
    assert cluster.post(f"/api/v1/namespaces/{name}/configmaps", foreign).status_code == 201
    yield name
    cluster.delete(f"/api/v1/namespaces/{name}")


def _plan(namespace: str, **kw) -> fanout.JobPlan:
    scenario = parse_scenario(TINY, where="tiny.toml")
    run_id = new_run_id()
    return fanout.JobPlan(
        experiment_id=fanout.experiment_id("tiny", run_id),
        run_id=run_id,
        namespace=namespace,
        image="registry.invalid/crdscale:test",
        cells=["count=2", "count=4"],
        experiment={**new_manifest(scenario), "cluster": {"experiment_id": "x"}},
        results="pvc://results",
        resources=fanout.pod_resources([1.5 * 2**30], 2),
        parallelism=2,
        **kw,
    )


def test_manifests_pass_server_side_dry_run(cluster, namespace):
    plan = _plan(namespace, one_per_node=True)
    clusterjob.create(cluster, plan, dry_run=True)
    resume = _plan(namespace, attempt=1)
    resume.cells = ["count=4"]
    clusterjob.create(cluster, resume, dry_run=True)
    # Nothing was kept.
    jobs = cluster.get_json(f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"]
    assert jobs == []
    # The Role printed for the submitting user is valid too.
    role = fanout.submitter_role(plan)
    resp = cluster.post(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles", role, params={"dryRun": "All"}
    )
    assert resp.status_code == 201, resp.text


def _wait_pods(cluster, namespace: str, count: int, timeout_s: float = 60) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pods = cluster.get_json(f"/api/v1/namespaces/{namespace}/pods")["items"]
        if len(pods) >= count:
            return pods
        time.sleep(0.5)
    raise AssertionError(f"the Job controller created {len(pods)} pods, not {count}")


def test_submit_status_down(cluster, local_cluster, namespace, tmp_path, capsys):
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY)
    kubeconfig = str(local_cluster.kubeconfig)
    code = main(
        [
            "run", str(scenario), "--cluster", "--kubeconfig", kubeconfig, "--namespace", namespace,
            "--image", "registry.invalid/crdscale:test", "--results", "file:///tmp/results",
            "--parallelism", "2", "--detach", "--out", str(tmp_path / "runs"),
        ]
    )  # fmt: skip
    assert code == 0
    experiment = Path(capsys.readouterr().out.strip().splitlines()[-1])
    manifest = json.loads((experiment / layout.EXPERIMENT_MANIFEST).read_text())
    table = manifest["cluster"]
    assert table["namespace"] == namespace and table["image"] == "registry.invalid/crdscale:test"
    assert table["jobs"][0]["indexes"] == ["count=2", "count=4"]

    pods = _wait_pods(cluster, namespace, 2)
    assert sorted(p["metadata"]["labels"][clusterjob.INDEX_LABEL] for p in pods) == ["0", "1"]
    assert all(p["status"]["phase"] == "Pending" for p in pods)
    assert all(p["status"].get("qosClass") == "Guaranteed" for p in pods)

    assert main(["status", str(experiment), "-o", "json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert [(i["index"], i["cell"], i["state"]) for i in status["indexes"]] == [
        (0, "count=2", "pending"),
        (1, "count=4", "pending"),
    ]
    assert main(["status", str(experiment)]) == 0
    assert "2 pending, 0 running, 0 succeeded, 0 failed" in capsys.readouterr().out

    # A resume while the Job runs would run cells twice.
    assert main(["run", "--resume", str(experiment), "--detach"]) == 2
    assert "still running" in capsys.readouterr().err

    assert main(["down", str(experiment)]) == 0
    # Once it is deleted, no cell succeeded: a resume is a new Job over both.
    assert main(["run", "--resume", str(experiment), "--detach"]) == 0
    jobs = json.loads((experiment / layout.EXPERIMENT_MANIFEST).read_text())["cluster"]["jobs"]
    assert [j["name"][-3:] for j in jobs][1:] == ["-r1"] and jobs[1]["indexes"] == ["count=2", "count=4"]
    _wait_pods(cluster, namespace, 2)  # the new Job's (the first Job's may still be going away)
    assert main(["down", str(experiment)]) == 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        left = [
            item["metadata"]["name"]
            for path in ("/apis/batch/v1/namespaces/{ns}/jobs", "/api/v1/namespaces/{ns}/pods")
            for item in cluster.get_json(path.format(ns=namespace))["items"]
        ]
        if not left:
            break
        time.sleep(0.5)
    assert left == []
    configmaps = [
        c["metadata"]["name"] for c in cluster.get_json(f"/api/v1/namespaces/{namespace}/configmaps")["items"]
    ]
    assert "not-crdscales" in configmaps  # a foreign object stays
    assert not any(name.startswith("crdscale-") for name in configmaps)
    accounts = cluster.get_json(f"/api/v1/namespaces/{namespace}/serviceaccounts")["items"]
    assert not any(a["metadata"]["name"].startswith("crdscale-") for a in accounts)


def test_cell_runs_one_index_and_report_gathers_it(tmp_path):
    """What a pod does, on this machine: `crdscale cell` runs index 1 of the Job on its own control
    plane and stores its run directory; gathering puts it back into the experiment directory."""
    from crdscale.fsutil import write_json_atomic
    from crdscale.scenario.experiment import Experiment

    scenario = parse_scenario(TINY, where="tiny.toml")
    experiment = Experiment.create(tmp_path / "here", scenario, check=False)
    store = f"file://{tmp_path / 'store'}"
    experiment.manifest["cluster"] = {"experiment_id": "tiny-test", "results": store, "namespace": "x", "jobs": []}
    experiment.save()
    spec = tmp_path / "spec"
    write_json_atomic(spec / fanout.EXPERIMENT_KEY, experiment.manifest)
    (spec / fanout.INDEXES_KEY).write_text(json.dumps(["count=4", "count=2"]))

    assert main(["cell", str(spec), "--index", "1", "--results", store, "--out", str(tmp_path / "pod")]) == 0
    stored = Path(store[len("file://") :]) / "tiny-test"
    assert sorted(p.name for p in stored.iterdir()) == ["count=2"]

    assert clusterjob.gather(experiment) == ["count=2"]
    again = Experiment.open(experiment.path)
    states = {c.cell.name: c for c in again.cells}
    assert states["count=2"].status == "completed" and states["count=4"].status == "pending"
    run = experiment.path / states["count=2"].run_dir
    assert json.loads((run / layout.MANIFEST).read_text())["status"] == "completed"
