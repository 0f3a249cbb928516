"""A user's Prometheus that requires basic auth over TLS (``--web.config.file``), scraping the real
local kube-apiserver: crdscale queries it with the CA and a password file, refuses a wrong
password or an unknown CA in one line, and a run against it records no secret."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import datetime, timedelta, timezone

import bcrypt
import pytest
import requests
import yaml

from crdscale.cli.main import main
from crdscale.cluster import binaries, pki
from crdscale.cluster.local import free_ports
from crdscale.collect.prometheus import PrometheusAccess
from crdscale.collect.sources import LocalPrometheus, RemotePrometheus
from crdscale.errors import ClusterError

pytestmark = pytest.mark.integration

USER = "crdscale"
PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def secured_prometheus(tmp_path_factory, local_cluster):
    """Prometheus on https://127.0.0.1:PORT (its own CA, basic auth) scraping the shared kube-apiserver."""
    workdir = tmp_path_factory.mktemp("secured-prometheus")
    tls = pki.create_credentials(workdir / "pki")  # a CA and a serving certificate for 127.0.0.1
    (workdir / "password").write_text(PASSWORD + "\n")
    (workdir / "wrong-password").write_text("battery horse\n")
    (workdir / "web.yml").write_text(
        yaml.safe_dump(
            {
                "tls_server_config": {"cert_file": str(tls.serving_cert), "key_file": str(tls.serving_key)},
                # Cost 4, bcrypt's minimum: the hash is checked on every request, and the test makes many.
                "basic_auth_users": {USER: bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()},
            }
        )
    )
    creds = local_cluster.credentials
    scrape = LocalPrometheus(
        f"127.0.0.1:{local_cluster.ports['apiserver']}", creds.ca_cert, creds.admin_token_file, interval_s=1.0
    ).config()  # crdscale's own scrape job for kube-apiserver
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(scrape))
    (port,) = free_ports(1)
    log = open(workdir / "prometheus.log", "wb")
    proc = subprocess.Popen(
        [
            str(binaries.prometheus().path),
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--web.config.file={workdir / 'web.yml'}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (workdir / "prometheus.log").read_text()[-2000:]
            try:
                if requests.get(f"{url}/-/ready", verify=str(tls.ca_cert), auth=(USER, PASSWORD), timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, "Prometheus with --web.config.file not ready in 60 s"
            time.sleep(0.3)
        yield {
            "url": url,
            "ca": str(tls.ca_cert),
            "password": str(workdir / "password"),
            "wrong_password": str(workdir / "wrong-password"),
        }
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


def test_series_through_basic_auth_over_tls(secured_prometheus):
    p = secured_prometheus
    access = PrometheusAccess(p["url"], username=USER, password_file=p["password"], ca_file=p["ca"])
    start = datetime.now(timezone.utc) - timedelta(seconds=30)
    source = RemotePrometheus(access, interval_s=1.0).start()
    assert source.version == binaries.prometheus().version
    deadline = time.monotonic() + 20
    while True:
        series = source.series(start, datetime.now(timezone.utc))
        rss = series[(series.metric == "process_resident_memory_bytes") & (series.job == "kube-apiserver")]
        if len(rss) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(1)
    source.stop()
    assert len(rss) >= 2 and (rss.value > 0).all()
    assert source.describe()["prometheus_auth"] == "basic"


def test_a_wrong_password_or_an_unknown_ca_is_a_one_line_error(secured_prometheus):
    p = secured_prometheus
    wrong = PrometheusAccess(p["url"], username=USER, password_file=p["wrong_password"], ca_file=p["ca"])
    with pytest.raises(ClusterError, match=r"refused the credentials: HTTP 401") as err:
        RemotePrometheus(wrong).start()
    assert "\n" not in str(err.value) and "battery" not in str(err.value)
    unknown_ca = PrometheusAccess(p["url"], username=USER, password_file=p["password"])
    with pytest.raises(ClusterError, match="TLS verification failed for Prometheus"):
        RemotePrometheus(unknown_ca).start()
    insecure = PrometheusAccess(p["url"], username=USER, password_file=p["password"], insecure_skip_tls_verify=True)
    assert RemotePrometheus(insecure).start().version != "unknown"


RUN = [
    "--set",
    "crds.count=2",
    "--set",
    "crds.groups=1",
    "--set",
    "crds.property_count=5",
    "--set",
    "steps.count=1",
    "--set",
    'steps.serve="list"',
    "--set",
    "steps.settle_seconds=0",
]


def test_a_run_against_it_from_the_cli(secured_prometheus, local_cluster, tmp_path, capsys):
    p = secured_prometheus
    common = [
        "run",
        "--kubeconfig",
        str(local_cluster.kubeconfig),
        "--prometheus-url",
        p["url"],
        "--prometheus-ca-file",
        p["ca"],
        "--prometheus-username",
        USER,
        *RUN,
    ]
    code = main([*common, "--prometheus-password-file", p["wrong_password"], "--out", str(tmp_path / "refused")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 4 and "refused the credentials: HTTP 401" in err[-1]

    code = main([*common, "--prometheus-password-file", p["password"], "--out", str(tmp_path / "runs")])
    assert code == 0
    (run,) = (tmp_path / "runs").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["metrics"]["source"] == "remote-prometheus"
    assert manifest["metrics"]["prometheus_password_from"] == p["password"]
    for f in run.rglob("*"):
        if f.is_file():
            assert PASSWORD.encode() not in f.read_bytes(), f
