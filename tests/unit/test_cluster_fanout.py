"""A matrix as one Indexed Job: the manifests (indexes <-> cells x repeats, Guaranteed QoS,
labels, per-index retries, a resume's subset), the results store's file:// scheme, and the
one-line errors of `crdscale run --cluster` before anything is created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.errors import UsageError
from crdscale.ownership import MANAGED_BY_LABEL, RUN_ID_LABEL
from crdscale.results.store import FileStore, cell_prefix, open_store, scheme_of
from crdscale.scenario import clusterjob, fanout
from crdscale.scenario.config import parse_scenario
from crdscale.scenario.experiment import new_manifest
from crdscale.scenario.matrix import expand

CRDS = Path(__file__).resolve().parents[1] / "data" / "crds" / "tree"
MATRIX = """\
name = "Schema Size"
[crds]
count = 4
groups = 2
property_count = 5
[steps]
count = 1
settle_seconds = 0
[matrix]
"crds.property_count" = [5, 10, 20]
repeat = 2
"""


def plan(**kw) -> fanout.JobPlan:
    scenario = parse_scenario(MATRIX, where="m.toml")
    cells = [c.name for c, _s in expand(scenario)]
    values = dict(
        experiment_id=fanout.experiment_id(scenario.name, "20261124t040000-abcd"),
        run_id="20261124t040000-abcd",
        namespace="crdscale",
        image="registry.example/crdscale@sha256:0123",
        cells=cells,
        experiment=new_manifest(scenario),
        results="s3://bucket/experiments",
        resources=fanout.pod_resources([1.9 * 2**30, 2.2 * 2**30], 2),
        parallelism=4,
    )
    return fanout.JobPlan(**{**values, **kw})


def test_one_index_per_cell_and_repeat():
    p = plan()
    job = fanout.job_manifest(p)
    assert p.cells[:2] == ["property_count=5,repeat=1", "property_count=5,repeat=2"]
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == 6 == len(p.cells)
    assert job["spec"]["parallelism"] == 4
    indexes = json.loads(fanout.configmap_manifest(p)["data"][fanout.INDEXES_KEY])
    assert indexes == p.cells  # index i runs cell i
    # The pods run exactly the experiment's scenario, shipped whole.
    shipped = json.loads(fanout.configmap_manifest(p)["data"][fanout.EXPERIMENT_KEY])
    assert shipped["scenario"]["matrix"] == {"crds.property_count": [5, 10, 20], "repeat": 2}


def test_parallelism_never_exceeds_the_cells():
    assert fanout.job_manifest(plan(parallelism=50))["spec"]["parallelism"] == 6


def test_guaranteed_qos_whole_cpus_and_margin():
    r = fanout.pod_resources([1.9 * 2**30, 2.2 * 2**30], 2)
    # the largest peak + 25 %, rounded up to 256 MiB: 2.2 GiB * 1.25 = 2.75 GiB -> 2816 MiB
    assert r.memory_bytes == 2816 * 2**20 and r.cpus == 2
    container = fanout.job_manifest(plan(resources=r))["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"] == container["resources"]["limits"] == {"cpu": "2", "memory": "2816Mi"}
    for bad in (0, 0.25, 1.55):
        with pytest.raises(UsageError, match="at least 0.5, in tenths"):
            fanout.pod_resources([2**30], bad)


@pytest.mark.parametrize(("cpus", "quantity"), [(1, "1"), (2.0, "2"), (0.5, "500m"), (1.5, "1500m")])
def test_fractional_cpus_are_millicores(cpus, quantity):
    r = fanout.pod_resources([2**30], cpus)
    assert r.quantities()["cpu"] == quantity


def test_every_object_carries_the_labels():
    p = plan(create_namespace=True)
    objects = fanout.manifests(p)
    assert [o["kind"] for o in objects] == ["Namespace", "ServiceAccount", "ConfigMap", "Job"]
    for obj in [*objects, fanout.job_manifest(p)["spec"]["template"]]:
        labels = obj["metadata"]["labels"]
        assert labels[MANAGED_BY_LABEL] == "crdscale"
        assert labels[RUN_ID_LABEL] == p.run_id
        assert labels[fanout.EXPERIMENT_LABEL] == "schema-size-20261124t040000-abcd"
    assert len(p.experiment_id) <= 63


def test_retries_per_index_and_failure_policy():
    spec = fanout.job_manifest(plan())["spec"]
    assert spec["backoffLimitPerIndex"] == fanout.DEFAULT_RETRIES
    assert "maxFailedIndexes" not in spec and "backoffLimit" not in spec
    rules = spec["podFailurePolicy"]["rules"]
    assert rules[0]["action"] == "FailIndex" and rules[0]["onExitCodes"]["values"] == [2, 3]
    assert rules[1] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    assert pod["containers"][0]["command"][:3] == ["crdscale", "cell", fanout.SPEC_MOUNT]
    assert "affinity" not in pod


def test_one_per_node_and_pvc_results():
    pod = fanout.job_manifest(plan(one_per_node=True, results="pvc://crdscale-results"))["spec"]["template"]["spec"]
    term = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == {fanout.EXPERIMENT_LABEL: "schema-size-20261124t040000-abcd"}
    assert {"name": "results", "persistentVolumeClaim": {"claimName": "crdscale-results"}} in pod["volumes"]
    command = pod["containers"][0]["command"]
    assert command[command.index("--results") + 1] == f"file://{fanout.PVC_MOUNT}"


def test_a_resume_is_a_new_job_over_the_missing_cells():
    first = plan()
    again = plan(attempt=1, cells=[first.cells[1], first.cells[4]])
    objects = fanout.manifests(again)
    assert [o["kind"] for o in objects] == ["ServiceAccount", "ConfigMap", "Job"]  # the account may exist already
    job = objects[-1]
    assert job["metadata"]["name"] == first.job_name + "-r1"
    assert job["spec"]["completions"] == 2
    assert json.loads(objects[1]["data"][fanout.INDEXES_KEY]) == [first.cells[1], first.cells[4]]
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == first.service_account_name


@pytest.mark.parametrize(
    "text, expected", [("", set()), (None, set()), ("0", {0}), ("0,2-4,7", {0, 2, 3, 4, 7}), ("1-2,5", {1, 2, 5})]
)
def test_parse_indexes(text, expected):
    assert fanout.parse_indexes(text) == expected


@pytest.mark.parametrize("name", ["Crdscale", "-x", "a_b", "x" * 64, ""])
def test_bad_namespace(name):
    with pytest.raises(UsageError, match="not a namespace name"):
        fanout.check_namespace(name)


def test_current_step_and_summary():
    lines = ["crdscale: run x", "step 1/3: 40 CRDs | RSS 300 MiB", "\rstep 2/3: 80 CRDs | RSS 310 MiB | ..."]
    assert clusterjob.current_step([line.rsplit("\r", 1)[-1] for line in lines]) == "step 2/3 done (80 CRDs)"
    assert clusterjob.current_step(["starting"]) == ""
    states = [
        clusterjob.IndexState("j", 0, "a", clusterjob.SUCCEEDED, seconds=600),
        clusterjob.IndexState("j", 1, "b", clusterjob.FAILED),
        clusterjob.IndexState("j", 2, "c", clusterjob.RUNNING),
        clusterjob.IndexState("j", 3, "d", clusterjob.PENDING),
        clusterjob.IndexState("j-r1", 0, "b", clusterjob.SUCCEEDED, seconds=600),  # a resume's success counts
    ]
    assert clusterjob.summary_line(states, 2) == "cells: 1 pending, 1 running, 2 succeeded, 0 failed; ETA 10m00s"


def test_file_store_round_trip(tmp_path):
    run = tmp_path / "run"
    (run / "profiles").mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    (run / "profiles" / "heap-step00-crds0000.pb.gz").write_bytes(b"\x1f\x8b")
    store = open_store(f"file://{tmp_path / 'store'}")
    assert isinstance(store, FileStore)
    assert store.list_prefixes("exp") == []
    store.put_tree(run, cell_prefix("exp", "count=2", "20261124T040000Z-count=2"))
    assert store.list_prefixes("exp") == ["count=2"]
    assert store.list_prefixes("exp/count=2") == ["20261124T040000Z-count=2"]
    back = tmp_path / "back"
    store.get_tree("exp/count=2/20261124T040000Z-count=2", back)
    assert (back / "profiles" / "heap-step00-crds0000.pb.gz").read_bytes() == b"\x1f\x8b"
    with pytest.raises(UsageError, match="without '..'"):
        store.put_tree(run, "../elsewhere")


def test_results_schemes():
    assert scheme_of("pvc://claim") == "pvc" and scheme_of("file:///x") == "file"
    with pytest.raises(UsageError, match="unknown scheme 'gs'"):
        scheme_of("gs://bucket")
    with pytest.raises(UsageError, match="file:///absolute"):
        open_store("file://relative/path")


@pytest.fixture
def scenario_file(tmp_path) -> Path:
    path = tmp_path / "m.toml"
    path.write_text(MATRIX)
    return path


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--image", "x"], "--image goes with --cluster"),
        (["--cluster", "--results", "s3://b"], "--cluster needs --image"),
        (["--cluster", "--image", "x"], "--cluster needs --results"),
        (["--cluster", "--image", "x", "--results", "gs://b"], "unknown scheme 'gs'"),
        (["--cluster", "--image", "x", "--results", "pvc://c", "--namespace", "No_Such"], "not a namespace name"),
        (["--cluster", "--image", "x", "--results", "pvc://c", "--parallelism", "0"], "--parallelism 0"),
        (["--cluster", "--image", "x", "--results", "pvc://c", "--memory", "lots"], "--memory:"),
        (["--cluster", "--image", "x", "--results", "pvc://c", "--cpus", "0.3"], "--cpus 0.3: at least 0.5"),
        (["--memory", "8GiB"], "--memory goes with --cluster"),
        (["--results-secret", "s3"], "--results-secret goes with --cluster"),
        (["--cluster", "--image", "x", "--results", "s3://b", "--results-secret", "Bad_Name"], "not a Secret name"),
        (["--cluster", "--image", "x", "--results", "pvc://c", "--set", f'crds.source="{CRDS}"'], "crds.source"),
    ],
)
def test_cli_errors_before_anything_is_created(scenario_file, tmp_path, capsys, extra, message):
    out = tmp_path / "runs"
    assert main(["run", str(scenario_file), *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_print_manifests_needs_no_cluster(scenario_file, capsys, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")
    code = main(["run", str(scenario_file), "--cluster", "--image", "x", "--results", "pvc://c", "--print-manifests"])
    assert code == 0
    import yaml

    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert [d["kind"] for d in docs] == ["Namespace", "ServiceAccount", "ConfigMap", "Job", "Role"]
    assert docs[3]["spec"]["completions"] == 6
    code = main(
        ["run", str(scenario_file), "--cluster", "--image", "x", "--results", "pvc://c", "--print-manifests"]
        + ["--memory", "6GiB", "--cpus", "4"]
    )
    assert code == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    limits = docs[3]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": "4", "memory": "6144Mi"}
    code = main(
        ["run", str(scenario_file), "--cluster", "--image", "x", "--results", "pvc://c", "--print-manifests"]
        + ["--memory", "6GiB", "--cpus", "0.5"]
    )
    assert code == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert docs[3]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "500m"


class _Response:
    def __init__(self, status_code: int, body=None, text: str = ""):
        self.status_code, self._body, self.text = status_code, body, text

    def json(self):
        return self._body


class _StubCluster:
    """The reads `crdscale status` makes: one Job's status, its pods, their logs."""

    def __init__(self, job_status: dict, pods: list[dict], logs: dict[str, str]):
        self.job_status, self.pods, self.logs = job_status, pods, logs

    def get(self, path, params=None, **_kw):
        if path.endswith("/log"):
            name = path.split("/")[-2]
            return _Response(200, text=self.logs[name]) if name in self.logs else _Response(400)
        if self.job_status is None:  # deleted
            return _Response(404, {"kind": "Status", "reason": "NotFound"})
        return _Response(200, {"status": self.job_status})

    def list(self, path, params=None, **_kw):
        return self.pods, "1"


def _pod(name: str, index: int, phase: str, created: str, **status) -> dict:
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "labels": {clusterjob.JOB_NAME_LABEL: "crdscale-x", clusterjob.INDEX_LABEL: str(index)},
        },
        "spec": {},
        "status": {"phase": phase, **status},
    }


def test_status_per_index(tmp_path):
    from crdscale.scenario.experiment import Experiment

    experiment = Experiment.create(tmp_path, parse_scenario(MATRIX, where="m.toml"), check=False)
    cells = [c.cell.name for c in experiment.cells][:4]
    experiment.manifest["cluster"] = {
        "experiment_id": "x",
        "namespace": "ns",
        "parallelism": 2,
        "jobs": [{"name": "crdscale-x", "indexes": cells}],
    }
    pods = [
        _pod(
            "p0",
            0,
            "Succeeded",
            "2026-11-24T04:00:00Z",
            startTime="2026-11-24T04:00:00Z",
            containerStatuses=[{"state": {"terminated": {"finishedAt": "2026-11-24T04:05:00Z"}}}],
        ),
        _pod("p1-old", 1, "Failed", "2026-11-24T04:00:00Z"),
        _pod("p1", 1, "Failed", "2026-11-24T04:01:00Z"),
        _pod("p2", 2, "Running", "2026-11-24T04:00:00Z"),
        _pod(
            "p3",
            3,
            "Pending",
            "2026-11-24T04:00:00Z",
            conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}],
        ),
    ]
    logs = {"p1": "step 1/1: 4 CRDs\ncrdscale: error: kube-apiserver died", "p2": "step 1/3: 40 CRDs | RSS 1 MiB"}
    stub = _StubCluster({"completedIndexes": "0", "failedIndexes": "1"}, pods, logs)
    states = clusterjob.index_states(stub, experiment, logs=True)
    assert [(s.index, s.state) for s in states] == [(0, "succeeded"), (1, "failed"), (2, "running"), (3, "pending")]
    assert states[0].seconds == 300
    assert states[1].pod == "p1" and states[1].log_tail[-1] == "crdscale: error: kube-apiserver died"
    assert states[2].detail == "step 1/3 done (40 CRDs)"
    assert states[3].detail == "not scheduled: Unschedulable 0/1 nodes"
    assert clusterjob.missing_cells(experiment, states) == [c.cell.name for c in experiment.cells][1:]
    # The success is remembered: once the Job is deleted, index 0 still succeeded and a resume skips it.
    assert experiment.manifest["cluster"]["jobs"][0]["completed_indexes"] == [0]
    gone = clusterjob.index_states(_StubCluster(None, [], {}), Experiment.open(experiment.path))
    assert [s.state for s in gone] == ["succeeded", "failed", "failed", "failed"]
    assert gone[1].detail == "job deleted before this index succeeded"


def test_ctrl_c_leaves_the_job_running(tmp_path, capsys, caplog, monkeypatch):
    import argparse
    import logging

    from crdscale.cli import cluster

    def interrupted(*_a, **_kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(clusterjob, "follow", interrupted)
    experiment = argparse.Namespace(path=tmp_path / "exp")
    # The lines are logged (the CLI's handler prints them on stderr, once main() attached it: read the records,
    # not stderr, or this test passes only after another test ran main()).
    with caplog.at_level(logging.INFO, logger="crdscale"):
        assert cluster._follow_or_detach(None, experiment, argparse.Namespace(detach=False)) == 0
    assert "the Job goes on" in caplog.text
    assert f"crdscale status {tmp_path / 'exp'}" in caplog.text and f"crdscale down {tmp_path / 'exp'}" in caplog.text
    assert capsys.readouterr().out.strip() == str(tmp_path / "exp")


def test_follow_logs_progress_until_the_job_finishes(tmp_path, caplog):
    import logging

    from crdscale.scenario.experiment import Experiment

    experiment = Experiment.create(tmp_path, parse_scenario(MATRIX, where="m.toml"), check=False)
    cells = [c.cell.name for c in experiment.cells][:2]
    experiment.manifest["cluster"] = {
        "experiment_id": "x",
        "namespace": "ns",
        "parallelism": 2,
        "jobs": [{"name": "crdscale-x", "indexes": cells}],
    }
    status = {"completedIndexes": "0-1", "conditions": [{"type": "Complete", "status": "True"}]}
    with caplog.at_level(logging.INFO, logger="crdscale"):
        states = clusterjob.follow(_StubCluster(status, [], {}), experiment, interval_s=0)
    assert [s.state for s in states] == ["succeeded", "succeeded"]
    assert "cells: 0 pending, 0 running, 2 succeeded, 0 failed" in caplog.text


@pytest.mark.parametrize(
    "ref, host, policy",
    [
        ("crdscale:0.4", None, "IfNotPresent"),
        ("crdscale", None, "IfNotPresent"),
        ("me/crdscale:latest", None, "IfNotPresent"),
        ("registry.example/crdscale@sha256:0123", "registry.example", None),
        ("localhost:5000/crdscale:1", "localhost:5000", None),
        ("localhost/crdscale:1", "localhost", None),
    ],
)
def test_a_loaded_image_is_used_where_it_is(ref, host, policy):
    """A reference without a registry can only be an image loaded into the node: never pulled from Docker Hub."""
    assert fanout.registry_host(ref) == host
    assert fanout.image_pull_policy(ref) == policy
    container = fanout.job_manifest(plan(image=ref))["spec"]["template"]["spec"]["containers"][0]
    assert container.get("imagePullPolicy") == policy


def test_the_image_reaches_the_run_manifest_by_digest():
    from crdscale.rundir.writer import IMAGE_ENVS, image_facts

    container = fanout.job_manifest(plan())["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert image_facts(env) == {"ref": "registry.example/crdscale@sha256:0123", "digest": "sha256:0123"}
    tagged = fanout.job_manifest(plan(image="crdscale:1"))["spec"]["template"]["spec"]["containers"][0]
    assert {e["name"] for e in tagged["env"]} == {IMAGE_ENVS["ref"]}


def test_results_credentials_come_from_a_secret_by_name():
    container = fanout.job_manifest(plan(results_secret="s3-creds"))["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "s3-creds"}}]
    assert "envFrom" not in fanout.job_manifest(plan())["spec"]["template"]["spec"]["containers"][0]
    rules = fanout.submitter_role(plan(results_secret="s3-creds"))["rules"]
    assert {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["s3-creds"], "verbs": ["get"]} in rules
    assert not any("secrets" in r["resources"] for r in fanout.submitter_role(plan())["rules"])


@pytest.mark.parametrize(
    "status, raises",
    [(200, None), (403, None), (404, "no such Secret in namespace ns; create it")],
)
def test_a_missing_results_secret_fails_before_submitting(status, raises):
    class Cluster:
        def get(self, path, **_kw):
            assert path == "/api/v1/namespaces/ns/secrets/creds"
            return _Response(status, {})

    if raises:
        with pytest.raises(UsageError, match=raises):
            clusterjob.check_secret(Cluster(), "ns", "creds")
    else:
        clusterjob.check_secret(Cluster(), "ns", "creds")


def test_print_manifests_reference_the_secret(scenario_file, capsys, monkeypatch):
    import yaml

    monkeypatch.setenv("KUBECONFIG", "/nonexistent")
    args = ["run", str(scenario_file), "--cluster", "--image", "crdscale:1", "--results", "s3://b/p"]
    assert main([*args, "--results-secret", "s3-creds", "--print-manifests"]) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    container = docs[3]["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "s3-creds"}}]
    assert container["imagePullPolicy"] == "IfNotPresent"


@pytest.mark.parametrize(("count", "groups", "measured_gib"), [(2000, 40, 8.17), (5000, 100, 20.0)])
def test_default_requests_hold_the_measured_pod_peaks(count, groups, measured_gib):
    """scripts/pod_limits.py measured these cgroup peaks (docs/results/cluster.toml) for
    benchmarks/scale-5000.toml's CRDs; the request run --cluster derives must hold them."""
    from crdscale.scenario.clusterjob import predict_peak_bytes
    from crdscale.scenario.config import load_scenario

    scenario = load_scenario(
        Path(__file__).resolve().parents[2] / "benchmarks" / "scale-5000.toml",
        overrides={"crds.count": count, "crds.groups": groups},
    )
    request = fanout.pod_resources([predict_peak_bytes(scenario).value], 2).memory_bytes
    assert request >= measured_gib * 2**30
