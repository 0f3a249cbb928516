"""A real single-node cluster on this machine (`crdscale up --node`): containerd + runc from
Debian, a CNI bridge, a kubelet and kube-scheduler built like kube-apiserver. A Pod and an
Indexed Job really run; a killed container's index is retried; `crdscale down` leaves the
host as it was (no processes, mounts, bridge, cgroups, kernel settings changed).

Needs root, Debian's containerd, runc and containernetworking-plugins (scripts/bootstrap.sh
installs them); skipped otherwise."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.cluster import node
from crdscale.cluster.local import LocalControlPlane
from crdscale.image.oci import ImageConfig, read_oci_archive, tar_layer, write_oci_archive
from crdscale.paths import instances_dir

REPO = Path(__file__).resolve().parents[2]

IMAGE = "crdscale.local/hello:v1"
# Prints its first argument and the Job's completion index, then sleeps its second (seconds).
HELLO_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    const char *index = getenv("JOB_COMPLETION_INDEX");
    printf("%s index=%s\n", argc > 1 ? argv[1] : "hello", index ? index : "-");
    fflush(stdout);
    if (argc > 2) sleep(atoi(argv[2]));
    return 0;
}
"""


def _skip_reason() -> str | None:
    try:
        node.check_host()
    except Exception as err:  # noqa: BLE001 -- any reason the host cannot run a node skips
        return str(err)
    return None


# The kubelet and kube-scheduler: make test builds them while the other tests run (scripts/test.sh).
pytestmark = [
    pytest.mark.skipif(_skip_reason() is not None, reason=f"no test node here: {_skip_reason()}"),
    pytest.mark.extra_binaries,
]


def host_snapshot() -> dict:
    """What a node could leave behind on the host, as comparable values."""
    iptables = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {
        "sysctls": node.read_sysctls(),
        "iptables": [line for line in iptables.splitlines() if not line.startswith("#")],
        "links": sorted(line.split(":")[1].strip().split("@")[0] for line in links.splitlines()),
        "host_paths": {p: os.path.lexists(p) for p in node.HOST_PATHS},
        "crdscale_cgroups": sorted(str(p) for p in Path(node.CGROUP_ROOT).glob("*/crdscale-*")),
    }


def node_processes(state_dir: Path) -> list[str]:
    """containerd, kubelet, shims and scheduler processes of this instance (by their command lines)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(state_dir) in cmdline or (
            "containerd-shim" in cmdline and str(state_dir / "node" / "containerd") in cmdline
        ):
            found.append(f"{proc.name} {cmdline[:120]}")
    return found


@pytest.fixture(scope="module")
def hello_image(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("image")
    binary = node.build_static_program(HELLO_C, out / "hello")
    layer = tar_layer({"hello": binary}, modes={"hello": 0o755})
    write_oci_archive(out / "hello.tar", [layer], config=ImageConfig(entrypoint=["/hello"]), ref=IMAGE)
    return out / "hello.tar"


@pytest.fixture(scope="module")
def node_cluster():
    """A control plane with a node, started by `crdscale up --node`; the last test stops it."""
    before = host_snapshot()
    started = time.monotonic()
    name = f"nodetest-{os.getpid()}"
    assert main(["up", "--node", "--name", name]) == 0
    print(f"crdscale up --node: {time.monotonic() - started:.1f} s")
    cp = LocalControlPlane.attach(name)
    yield cp, before
    if cp.state_dir.exists():  # the down test failed before stopping it
        main(["down", name])


def wait_for(predicate, timeout_s: float, what: str, every_s: float = 0.5):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def pod_spec(args: list[str]) -> dict:
    return {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "hello", "image": IMAGE, "imagePullPolicy": "Never", "args": args}],
    }


def test_node_is_ready_and_images_load(node_cluster, hello_image):
    cp, _ = node_cluster
    cluster = cp.connect()
    nodes = cluster.get_json("/api/v1/nodes")["items"]
    assert [n["metadata"]["name"] for n in nodes] == [cp.state["node"]["name"]]
    assert node.node_ready(nodes[0])
    info = nodes[0]["status"]["nodeInfo"]
    assert info["containerRuntimeVersion"].startswith("containerd://1.")
    assert info["kubeletVersion"] == cp.state["node"]["versions"]["kubelet"]
    assert main(["image", "load", str(hello_image), "--instance", cp.name]) == 0


def test_pod_runs_and_its_log_comes_through_the_api_server(node_cluster):
    cp, _ = node_cluster
    cluster = cp.connect()
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hello"}, "spec": pod_spec(["hi-from-pod"])}
    assert cluster.post("/api/v1/namespaces/default/pods", body).status_code == 201
    phase = wait_for(
        lambda: (
            cluster.get_json("/api/v1/namespaces/default/pods/hello")["status"].get("phase") in ("Succeeded", "Failed")
            and cluster.get_json("/api/v1/namespaces/default/pods/hello")["status"]["phase"]
        ),
        90,
        "the pod to finish",
    )
    assert phase == "Succeeded"
    pod = cluster.get_json("/api/v1/namespaces/default/pods/hello")
    assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(cp.state["node"]["subnet"])
    log = cluster.get("/api/v1/namespaces/default/pods/hello/log")
    assert log.status_code == 200, log.text
    assert log.text == "hi-from-pod index=-\n"


def test_pod_runs_the_loaded_image_by_digest(node_cluster, hello_image):
    """`run --cluster --image REF@DIGEST` on a node without a registry: the kubelet finds the loaded
    image by its manifest digest (no imagePullPolicy: the default for a digest, IfNotPresent)."""
    cp, _ = node_cluster
    cluster = cp.connect()
    digest = read_oci_archive(hello_image).manifest_digest
    spec = pod_spec(["by-digest"])
    container = spec["containers"][0]
    container["image"] = f"{IMAGE}@{digest}"
    del container["imagePullPolicy"]
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hello-digest"}, "spec": spec}
    assert cluster.post("/api/v1/namespaces/default/pods", body).status_code == 201
    path = "/api/v1/namespaces/default/pods/hello-digest"
    phase = wait_for(
        lambda: (
            cluster.get_json(path)["status"].get("phase") in ("Succeeded", "Failed")
            and cluster.get_json(path)["status"]["phase"]
        ),
        90,
        "the pod started by digest to finish",
    )
    assert phase == "Succeeded", cluster.get_json(path)["status"]
    assert cluster.get(f"{path}/log").text == "by-digest index=-\n"
    assert cluster.get_json(path)["status"]["containerStatuses"][0]["imageID"].endswith(digest)


def test_indexed_job_retries_the_index_whose_container_was_killed(node_cluster):
    cp, _ = node_cluster
    cluster = cp.connect()
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "cells"},
        "spec": {
            "completionMode": "Indexed",
            "completions": 2,
            "parallelism": 2,
            "backoffLimitPerIndex": 1,
            "template": {"spec": pod_spec(["cell", "8"])},
        },
    }
    assert cluster.post("/apis/batch/v1/namespaces/default/jobs", job).status_code == 201

    def pods() -> list[dict]:
        return cluster.get_json("/api/v1/namespaces/default/pods", params={"labelSelector": "job-name=cells"})["items"]

    def index(pod: dict) -> str:
        return pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]

    def running_index0() -> str | None:
        for pod in pods():
            statuses = pod["status"].get("containerStatuses") or []
            if index(pod) == "0" and statuses and "running" in statuses[0].get("state", {}):
                return statuses[0]["containerID"].removeprefix("containerd://")
        return None

    # Both indexes at once (parallelism 2), then index 0's container killed as a crash would.
    wait_for(lambda: len([p for p in pods() if p["status"].get("phase") == "Running"]) == 2, 90, "2 running pods")
    container = wait_for(running_index0, 30, "index 0's running container")
    ctr = node.host_tools().ctr
    socket = cp.state["node"]["containerd_socket"]
    subprocess.run(
        [str(ctr), "--address", socket, "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", container], check=True
    )

    def finished():
        status = cluster.get_json("/apis/batch/v1/namespaces/default/jobs/cells")["status"]
        done = {c["type"] for c in status.get("conditions", []) if c["status"] == "True"}
        return status if done & {"Complete", "Failed"} else None

    status = wait_for(finished, 120, "the Job to finish")
    assert status["succeeded"] == 2
    assert status["failed"] == 1  # the killed attempt, retried within backoffLimitPerIndex
    assert not status.get("failedIndexes")
    by_index: dict[str, list[str]] = {}
    for pod in pods():
        by_index.setdefault(index(pod), []).append(pod["status"]["phase"])
    assert sorted(by_index["0"]) == ["Failed", "Succeeded"]
    assert by_index["1"] == ["Succeeded"]
    for pod in pods():
        if pod["status"]["phase"] == "Succeeded":
            log = cluster.get(f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}/log")
            assert log.text == f"cell index={index(pod)}\n"


def test_down_leaves_the_host_as_it_was(node_cluster):
    cp, before = node_cluster
    state_dir = cp.state_dir
    node_dir = str(state_dir / "node")
    # A container still running: down must stop it (and its shim, sandbox, mounts) too.
    cluster = cp.connect()
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sleeper"}, "spec": pod_spec(["zzz", "600"])}
    assert cluster.post("/api/v1/namespaces/default/pods", body).status_code == 201
    wait_for(
        lambda: cluster.get_json("/api/v1/namespaces/default/pods/sleeper")["status"].get("phase") == "Running",
        60,
        "the sleeper pod to run",
    )
    assert node_processes(state_dir), "the node's processes were not found while it runs"
    # The kubelet changed its own copies of the kernel settings, never the host's.
    assert node.read_sysctls() == before["sysctls"]
    shield = state_dir / "node" / "sysctl" / "kernel" / "panic"
    assert shield.read_text().strip() == "10"  # what the kubelet wants, written where it sees /proc/sys
    assert node.cgroup_pids(cp.state["node"]["cgroup"])
    assert main(["down", cp.name]) == 0
    assert node_processes(state_dir) == []
    assert not any(node_dir in line for line in Path("/proc/self/mountinfo").read_text().splitlines())
    assert not state_dir.exists()
    assert host_snapshot() == before


def test_down_after_kill_9_of_up_during_the_node_start_undoes_it():
    """`crdscale up --node` killed right after starting the kubelet (bridge, cgroups, containerd,
    kernel settings possibly changed, Node not yet Ready): `down` still undoes all of it."""
    before = host_snapshot()
    name = f"nodekill-{os.getpid()}"
    state_file = instances_dir() / name / "instance.json"
    up = subprocess.Popen(
        [sys.executable, "-m", "crdscale", "up", "--node", "--name", name],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    try:
        wait_for(
            lambda: (
                "kubelet" in {p["name"] for p in json.loads(state_file.read_text()).get("processes", [])}
                if state_file.is_file()
                else False
            ),
            180,
            "the kubelet to be recorded",
            every_s=0.05,
        )
    finally:
        up.send_signal(signal.SIGKILL)
        up.wait()
    cp = LocalControlPlane.attach(name)
    assert cp.process("kubelet").alive() and cp.process("containerd").alive()
    assert main(["down", name]) == 0
    assert node_processes(cp.state_dir) == []
    assert host_snapshot() == before
