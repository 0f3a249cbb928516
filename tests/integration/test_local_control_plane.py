"""The local control plane is a real API server: CRDs get Established, pprof and
/metrics are served, it listens on loopback only, and stopping it leaves nothing."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.cluster.instances import list_instances
from crdscale.cluster.local import LocalControlPlane
from crdscale.cluster.process import port_open
from crdscale.ownership import ownership_labels

REPO = Path(__file__).resolve().parents[2]


def _crd(group: str, kind: str) -> dict:
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": ownership_labels("test-local")},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": kind + "List"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
                        }
                    },
                }
            ],
        },
    }


def _wait_established(cluster, name: str, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        crd = cluster.get_json(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        conditions = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
        if conditions.get("Established") == "True":
            return crd
        time.sleep(0.2)
    raise AssertionError(f"{name} not Established after {timeout_s} s")


def _listening_sockets(pid: int) -> list[str]:
    """Local addresses that ``pid`` listens on, from ``ss -ltnp``."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in out.splitlines() if f"pid={pid}," in line]


@pytest.fixture(scope="module")
def own_plane():
    """A control plane this module may stop (the session one is shared)."""
    cp = LocalControlPlane(name=f"it-{os.getpid()}").start()
    yield cp
    cp.stop()


def test_crd_becomes_established(own_plane):
    cluster = own_plane.connect()
    resp = cluster.post(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", _crd("it.crdscale.io", "Widget"), timeout=30
    )
    assert resp.status_code == 201, resp.text
    crd = _wait_established(cluster, "widgets.it.crdscale.io")
    assert crd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "crdscale"


def test_heap_profile_is_a_gzip_pprof_that_go_tool_pprof_reads(own_plane, tmp_path):
    cluster = own_plane.connect()
    resp = cluster.get("/debug/pprof/heap?gc=1")
    assert resp.status_code == 200
    assert resp.content[:2] == b"\x1f\x8b"  # gzip
    gzip.decompress(resp.content)
    profile = tmp_path / "heap.pb.gz"
    profile.write_bytes(resp.content)
    if shutil.which("go"):
        out = subprocess.run(
            ["go", "tool", "pprof", "-top", "-nodecount=5", str(profile)], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
        assert "flat%" in out.stdout and "inuse_space" in out.stdout


def test_metrics_are_served(own_plane):
    text = own_plane.connect().get("/metrics").text
    assert re.search(r"^process_resident_memory_bytes \S+", text, re.M)
    assert "apiserver_request_total" in text


def test_server_reports_the_real_version(own_plane):
    assert own_plane.connect().server_version() == "v1.37.1"


def test_listens_on_loopback_only(own_plane):
    for name in ("kube-apiserver", "etcd", "kube-controller-manager"):
        addresses = _listening_sockets(own_plane.process(name).pid)
        assert addresses, f"{name} listens nowhere?"
        for addr in addresses:
            assert addr.startswith("127.0.0.1:"), f"{name} listens on {addr}"


def test_status_lists_the_instance(own_plane, capsys):
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert own_plane.name in out and "ready" in out


def test_stop_leaves_no_process_and_closes_ports(own_plane):
    records = own_plane.processes
    ports = list(own_plane.ports.values())
    own_plane.stop()
    for record in records:
        assert not record.alive(), f"{record.name} (pid {record.pid}) still running"
    for port in ports:
        assert not port_open(port), f"port {port} still open"
    assert not own_plane.state_dir.exists()


def test_down_after_kill_9_of_up_leaves_nothing():
    """SIGKILL `crdscale up` while kube-apiserver is still starting; `down` must stop both processes."""
    from crdscale.paths import instances_dir

    name = f"killed-{os.getpid()}"
    state_file = instances_dir() / name / "instance.json"
    up = subprocess.Popen(
        [sys.executable, "-m", "crdscale", "up", "--name", name],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            started = {p["name"] for p in json.loads(state_file.read_text())["processes"]}
        except (OSError, ValueError, KeyError):
            started = set()
        if "kube-apiserver" in started:
            break
        time.sleep(0.05)
    else:
        up.kill()
        pytest.fail("kube-apiserver was never recorded as started")
    up.send_signal(signal.SIGKILL)
    up.wait()
    records = LocalControlPlane.attach(name).processes
    assert {r.name for r in records} == {"etcd", "kube-apiserver"}
    assert all(r.alive() for r in records), "the servers must outlive the killed CLI"
    assert main(["down", name]) == 0
    assert not any(r.alive() for r in records)
    assert name not in [i.name for i in list_instances()]


def test_bad_apiserver_flag_fails_with_one_line_and_log_tail(capsys):
    code = main(["up", "--name", f"bad-{os.getpid()}", "--apiserver-flag=--no-such-flag=1", "--timeout", "60"])
    assert code == 4
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("crdscale: error: kube-apiserver exited during start-up")
    assert any("no-such-flag" in line for line in err[1:])
    assert f"bad-{os.getpid()}" not in [i.name for i in list_instances()]
