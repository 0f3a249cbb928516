"""The whole of `crdscale run --cluster` on a real cluster on this machine (issue 20's end-to-end test).

`crdscale up --node` (containerd + kubelet on a CNI bridge), the crdscale image built (from its
cache) and loaded into the node, versitygw (a real S3 server) listening where the pods reach the
host, a Secret with its credentials; then a 3-cell matrix of tiny cells with ``--parallelism 2``,
one pod's container killed mid-cell (its index is retried: backoffLimitPerIndex), every index
succeeding, `crdscale report EXPERIMENT` rendering from the bucket, and `crdscale down` of the
experiment and of the node leaving nothing behind.

Needs what test_node_cluster.py needs (root, containerd, runc, CNI plugins) and the image's
inputs (test_image.py); skipped otherwise. Takes a few minutes (the time is printed)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.cluster import node
from crdscale.cluster.local import LocalControlPlane
from crdscale.results.versitygw import LocalS3
from crdscale.rundir import layout
from crdscale.scenario import clusterjob

SCENARIO = """\
name = "e2e"
[crds]
count = 10
groups = 2
property_count = 5
[steps]
count = 1
settle_seconds = 0
serve = "none"
[matrix]
"crds.count" = [10, 15, 20]
"""
IMAGE = "crdscale:e2e"  # no registry: the kubelet uses the image loaded into its node
NAMESPACE = "crdscale-e2e"
SECRET = "crdscale-results"


def _skip_reason() -> str | None:
    try:
        node.check_host()
    except Exception as err:  # noqa: BLE001 -- any reason the host cannot run a node skips
        return str(err)
    return None


# versitygw, the kubelet and kube-scheduler: make test builds them while the other tests run (scripts/test.sh).
pytestmark = [
    pytest.mark.skipif(_skip_reason() is not None, reason=f"no test node here: {_skip_reason()}"),
    pytest.mark.extra_binaries,
]


def wait_for(predicate, timeout_s: float, what: str, every_s: float = 1.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def instance_processes(state_dir: Path) -> list[str]:
    """Processes whose command line names the instance's directory (etcd, kube-apiserver, containerd, kubelet...)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(state_dir) in cmdline:
            found.append(f"{proc.name} {cmdline[:120]}")
    return found


@pytest.fixture
def node_cluster():
    name = f"e2e-{os.getpid()}"
    started = time.monotonic()
    assert main(["up", "--node", "--name", name]) == 0
    print(f"crdscale up --node: {time.monotonic() - started:.1f} s")
    cp = LocalControlPlane.attach(name)
    yield cp
    if cp.state_dir.exists():  # the test failed before its own `down`
        main(["down", name])


def test_matrix_on_the_node_with_a_killed_pod_and_results_in_s3(node_cluster, tmp_path, capsys, monkeypatch):
    started = time.monotonic()
    cp = node_cluster
    cluster = cp.connect()
    sysctls = node.read_sysctls()

    # The image, from the build cache, into the node's containerd.
    archive = tmp_path / "crdscale-image.tar"
    assert main(["image", "build", "--out", str(archive), "--tag", IMAGE]) == 0
    built = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines() if line.strip())
    assert main(["image", "load", str(archive), "--instance", cp.name]) == 0
    print(f"image build (cached) + load: {time.monotonic() - started:.1f} s")

    s3 = LocalS3(host=node.host_address(cp.state)).start()
    try:
        bucket = s3.make_bucket("results")
        # The submitting side (report's gather) reads the store as any AWS tool would: from the environment.
        for key, value in s3.client_env().items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-such-credentials"))
        # The pods' side: a Secret the user created, referenced by --results-secret.
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        assert cluster.post("/api/v1/namespaces", ns).status_code == 201
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET},
            "stringData": s3.client_env(),
        }
        assert cluster.post(f"/api/v1/namespaces/{NAMESPACE}/secrets", secret).status_code == 201

        scenario = tmp_path / "e2e.toml"
        scenario.write_text(SCENARIO)
        results = f"{bucket}/e2e"
        code = main(
            [
                "run", str(scenario), "--cluster", "--kubeconfig", str(cp.kubeconfig), "--namespace", NAMESPACE,
                "--image", IMAGE, "--parallelism", "2", "--results", results, "--results-secret", SECRET,
                "--cpus", "1", "--memory", "2GiB", "--detach", "--out", str(tmp_path / "runs"),
            ]
        )  # fmt: skip
        assert code == 0
        experiment = Path(capsys.readouterr().out.strip().splitlines()[-1])
        table = json.loads((experiment / layout.EXPERIMENT_MANIFEST).read_text())["cluster"]
        job = table["jobs"][0]["name"]
        manifest = cluster.get_json(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{job}")
        container = manifest["spec"]["template"]["spec"]["containers"][0]
        assert container["imagePullPolicy"] == "IfNotPresent"
        assert container["envFrom"] == [{"secretRef": {"name": SECRET}}]
        assert s3.secret_key not in json.dumps(manifest)  # credentials only in the Secret

        def pods() -> list[dict]:
            return cluster.get_json(
                f"/api/v1/namespaces/{NAMESPACE}/pods", params={"labelSelector": f"job-name={job}"}
            )["items"]

        def index0_mid_cell() -> str | None:
            """Index 0's container ID once its cell is under way (its log says which cell it runs)."""
            for pod in pods():
                statuses = pod["status"].get("containerStatuses") or []
                if (
                    pod["metadata"]["labels"].get(clusterjob.INDEX_LABEL) == "0"
                    and statuses
                    and "running" in statuses[0].get("state", {})
                ):
                    tail = clusterjob.pod_log_tail(cluster, NAMESPACE, pod["metadata"]["name"], 50)
                    if any("index 0 is cell" in line for line in tail):
                        return statuses[0]["containerID"].removeprefix("containerd://")
            return None

        container_id = wait_for(index0_mid_cell, 180, "index 0's cell to start")
        subprocess.run(
            [
                str(node.host_tools().ctr), "--address", cp.state["node"]["containerd_socket"], "-n", "k8s.io",
                "tasks", "kill", "--signal", "SIGKILL", container_id,
            ],
            check=True,
        )  # fmt: skip
        killed_at = time.monotonic() - started
        print(f"killed index 0's container at {killed_at:.1f} s")

        def finished():
            status = cluster.get_json(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{job}")["status"]
            done = {c["type"] for c in status.get("conditions", []) if c["status"] == "True"}
            return status if done & {"Complete", "Failed"} else None

        status = wait_for(finished, 480, "the Job to finish", every_s=3)
        print(f"job finished at {time.monotonic() - started:.1f} s: {status}")
        assert status.get("succeeded") == 3, status
        assert status.get("failed") == 1  # the killed attempt, retried within backoffLimitPerIndex
        assert not status.get("failedIndexes")
        phases = sorted((p["metadata"]["labels"][clusterjob.INDEX_LABEL], p["status"]["phase"]) for p in pods())
        assert phases == [("0", "Failed"), ("0", "Succeeded"), ("1", "Succeeded"), ("2", "Succeeded")]

        capsys.readouterr()  # what the test printed so far
        assert main(["status", str(experiment), "-o", "json"]) == 0
        states = json.loads(capsys.readouterr().out)["indexes"]
        assert [(s["cell"], s["state"]) for s in states] == [
            ("count=10", "succeeded"),
            ("count=15", "succeeded"),
            ("count=20", "succeeded"),
        ]

        # Every cell's run directory is in the bucket (the server's directory holds them as files) ...
        stored = s3.data / "results" / "e2e" / table["experiment_id"]
        assert sorted(p.name for p in stored.iterdir()) == ["count=10", "count=15", "count=20"]
        # ... and the report gathers them from there.
        report_started = time.monotonic()
        assert main(["report", str(experiment)]) == 0
        print(f"report: {time.monotonic() - report_started:.1f} s")
        assert (experiment / "report").is_dir()
        gathered = json.loads((experiment / layout.EXPERIMENT_MANIFEST).read_text())
        assert gathered["status"] == "completed"
        for cell in gathered["cells"] if isinstance(gathered.get("cells"), list) else []:
            assert cell.get("status") in (None, "completed")
        runs = [p for p in experiment.iterdir() if (p / layout.MANIFEST).is_file()]
        assert len(runs) >= 3
        run_manifest = json.loads((runs[0] / layout.MANIFEST).read_text())
        image = json.dumps(run_manifest)
        assert IMAGE in image and built["content"] in image  # the run says what image it ran in

        # Down: the experiment's objects, then the node; nothing of either is left.
        assert main(["down", str(experiment)]) == 0
        wait_for(lambda: not pods(), 90, "the experiment's pods to go")
        assert cluster.get_json(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs")["items"] == []
        secrets = [s["metadata"]["name"] for s in cluster.get_json(f"/api/v1/namespaces/{NAMESPACE}/secrets")["items"]]
        assert SECRET in secrets  # the user's Secret is not crdscale's to delete
    finally:
        s3.stop()
        cluster.close()
    state_dir = cp.state_dir
    assert main(["down", cp.name]) == 0
    assert instance_processes(state_dir) == []
    assert not state_dir.exists()
    assert node.read_sysctls() == sysctls
    print(f"end to end: {time.monotonic() - started:.1f} s")
