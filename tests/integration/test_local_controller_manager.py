"""kube-controller-manager in the local control plane: `crdscale up` starts it (loopback only,
its own credentials, /metrics open, minting service-account tokens), `down` stops it even
after `kill -9` of `up`, and with CRDs installed and no client it holds a watch on each of them,
as the garbage collector of every real cluster does."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from crdscale.cli.main import main
from crdscale.cluster.local import CONTROLLER_MANAGER, LocalControlPlane, list_instances
from crdscale.paths import instances_dir

REPO = Path(__file__).resolve().parents[2]


def listening(pid: int) -> list[str]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in out.splitlines() if f"pid={pid}," in line]


def test_up_runs_the_controller_manager_and_down_stops_it(capsys):
    name = f"kcm-{os.getpid()}"
    assert main(["up", "--name", name]) == 0
    capsys.readouterr()
    try:
        cp = LocalControlPlane.attach(name)
        record = cp.process(CONTROLLER_MANAGER)
        assert record is not None and record.alive()
        assert cp.versions[CONTROLLER_MANAGER] == cp.versions["kube-apiserver"] == "v1.37.1"
        assert cp.state["controller_manager"]["controllers"] == ["*", "-podgc"]
        addresses = listening(record.pid)
        assert addresses and all(a.startswith("127.0.0.1:") for a in addresses), addresses
        # /metrics without credentials, over TLS verified with the instance's CA.
        ca = str(cp.credentials.ca_cert)
        metrics = requests.get(cp.controller_manager_metrics_url, verify=ca, timeout=10)
        assert metrics.status_code == 200 and "rest_client_requests_total" in metrics.text
        # Anything else of its HTTPS still needs authorization.
        assert requests.get(
            cp.controller_manager_metrics_url.replace("/metrics", "/configz"), verify=ca
        ).status_code in (
            401,
            403,
        )
        cluster = cp.connect()
        # It mints tokens with the instance's service-account key: a legacy token Secret gets one.
        deadline = time.monotonic() + 90
        while cluster.get("/api/v1/namespaces/default/serviceaccounts/default").status_code != 200:
            assert time.monotonic() < deadline, "the service-account controller never made 'default'"
            time.sleep(0.5)
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "minted", "annotations": {"kubernetes.io/service-account.name": "default"}},
        }
        assert cluster.post("/api/v1/namespaces/default/secrets", secret).status_code == 201
        while not (cluster.get_json("/api/v1/namespaces/default/secrets/minted").get("data") or {}).get("token"):
            assert time.monotonic() < deadline, "the token controller never filled the Secret"
            time.sleep(0.5)
        token = base64.b64decode(cluster.get_json("/api/v1/namespaces/default/secrets/minted")["data"]["token"])
        header = json.loads(base64.urlsafe_b64decode(token.split(b".")[0] + b"=="))
        assert header["alg"] == "RS256"
    finally:
        records = LocalControlPlane.attach(name).processes
        assert main(["down", name]) == 0
    assert not any(r.alive() for r in records)
    assert name not in [i.name for i in list_instances()]


def test_no_controller_manager_is_the_old_control_plane(capsys):
    name = f"nokcm-{os.getpid()}"
    assert main(["up", "--name", name, "--no-controller-manager"]) == 0
    try:
        cp = LocalControlPlane.attach(name)
        assert {p.name for p in cp.processes} == {"etcd", "kube-apiserver"}
        assert CONTROLLER_MANAGER not in cp.versions and cp.controller_manager_metrics_url is None
        argv = Path(f"/proc/{cp.apiserver_pid}/cmdline").read_bytes().split(b"\0")
        assert b"--disable-admission-plugins=ServiceAccount" in argv
    finally:
        assert main(["down", name]) == 0


def test_down_after_kill_9_of_up_stops_the_controller_manager():
    name = f"killed-kcm-{os.getpid()}"
    state_file = instances_dir() / name / "instance.json"
    up = subprocess.Popen(
        [sys.executable, "-m", "crdscale", "up", "--name", name],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            started = {p["name"] for p in json.loads(state_file.read_text())["processes"]}
        except (OSError, ValueError, KeyError):
            started = set()
        if CONTROLLER_MANAGER in started:
            break
        time.sleep(0.05)
    else:
        up.kill()
        pytest.fail("kube-controller-manager was never recorded as started")
    up.send_signal(signal.SIGKILL)
    up.wait()
    records = LocalControlPlane.attach(name).processes
    assert {r.name for r in records} == {"etcd", "kube-apiserver", CONTROLLER_MANAGER}
    assert all(r.alive() for r in records), "the servers must outlive the killed CLI"
    assert main(["down", name]) == 0
    assert not any(r.alive() for r in records)


def test_each_installed_crd_gets_a_watch_from_the_controller_manager(local_cluster, crd_watches):
    """20 CRDs, no client of ours: every one is watched anyway (the garbage collector's and the
    quota controller's shared metadata informer), so each gets its storage and watch cache.
    One watch per CRD: of its preferred version (discovery's), not of every served version
    (checked by hand with two served versions: one WATCH, on the preferred one)."""
    cluster = local_cluster.connect()
    group = f"kcm{os.getpid()}.crdscale.io"
    plurals = crd_watches.install(cluster, group, 20)
    try:
        watches = crd_watches.wait(cluster, group, plurals)
        assert sorted(p for p in plurals if watches.get(p, 0) < 1) == []
    finally:
        for plural in plurals:
            cluster.delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.{group}")
