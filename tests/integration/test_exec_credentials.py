"""An exec-plugin kubeconfig split over two $KUBECONFIG files, against the real local kube-apiserver.

The plugin prints an ExecCredential with the instance's admin token and a short
expiry, and counts its runs: crdscale must run it again when the token expires
(not once per request), once after a 401, and Go clients (crdscale-client,
kubectl) started with the same files must run it themselves.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from crdscale.cluster import binaries, goclient
from crdscale.cluster.clients import connect
from crdscale.cluster.kubeconfig import KubeconfigFiles

pytestmark = pytest.mark.integration

PLUGIN = """#!{python}
# A stand-in for aws eks get-token: the admin token, valid LIFETIME_S seconds; the first answer is
# a revoked token when FIRST_TOKEN_STALE is set. Every run appends a line to COUNT_FILE.
import datetime, json, os
count_file = os.environ["COUNT_FILE"]
with open(count_file, "a") as f:
    f.write("run\\n")
runs = len(open(count_file).read().splitlines())
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
token = open(os.environ["TOKEN_FILE"]).read().strip()
if os.environ.get("FIRST_TOKEN_STALE") and runs == 1:
    token = "revoked"
expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=float(os.environ["LIFETIME_S"]))
print(json.dumps({{"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                  "status": {{"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}}}))
"""


def _kubeconfigs(
    tmp_path: Path, local_cluster, *, lifetime_s: float, first_stale: bool = False
) -> tuple[KubeconfigFiles, Path]:
    """Cluster in one file (CA path relative to it), exec user and context in another (command relative to it)."""
    clusters_dir, users_dir = tmp_path / "clusters", tmp_path / "users"
    clusters_dir.mkdir()
    (users_dir / "bin").mkdir(parents=True)
    shutil.copy(local_cluster.credentials.ca_cert, clusters_dir / "ca.crt")
    plugin = users_dir / "bin" / "get-token"
    plugin.write_text(PLUGIN.format(python=sys.executable))
    plugin.chmod(0o755)
    count_file = tmp_path / "runs.txt"
    env = [
        {"name": "TOKEN_FILE", "value": str(local_cluster.credentials.admin_token_file)},
        {"name": "COUNT_FILE", "value": str(count_file)},
        {"name": "LIFETIME_S", "value": str(lifetime_s)},
    ]
    if first_stale:
        env.append({"name": "FIRST_TOKEN_STALE", "value": "1"})
    (clusters_dir / "config").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "local", "cluster": {"server": local_cluster.server, "certificate-authority": "ca.crt"}}
                ],
            }
        )
    )
    (users_dir / "config").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "exec",
                "users": [
                    {
                        "name": "exec",
                        "user": {
                            "exec": {
                                "apiVersion": "client.authentication.k8s.io/v1",
                                "command": "./bin/get-token",
                                "env": env,
                                "interactiveMode": "Never",
                            }
                        },
                    }
                ],
                "contexts": [{"name": "exec", "context": {"cluster": "local", "user": "exec"}}],
            }
        )
    )
    return KubeconfigFiles.parse(f"{clusters_dir / 'config'}{os.pathsep}{users_dir / 'config'}"), count_file


def _runs(count_file: Path) -> int:
    return len(count_file.read_text().splitlines()) if count_file.exists() else 0


def test_the_token_is_renewed_when_it_expires_not_per_request(tmp_path, local_cluster):
    files, count_file = _kubeconfigs(tmp_path, local_cluster, lifetime_s=2)
    cluster = connect(files)
    started, requests_sent = time.monotonic(), 0
    while time.monotonic() - started < 5:
        assert cluster.server_version() == "v1.37.1"
        requests_sent += 1
        time.sleep(0.25)
    cluster.close()
    # A 2 s token over 5 s: a first run, then one per expiry; never one per request.
    assert 2 <= _runs(count_file) <= 4, f"{_runs(count_file)} plugin runs for {requests_sent} requests"
    assert requests_sent >= 10


def test_a_401_runs_the_plugin_once_more_and_the_request_succeeds(tmp_path, local_cluster):
    files, count_file = _kubeconfigs(tmp_path, local_cluster, lifetime_s=600, first_stale=True)
    cluster = connect(files)
    assert cluster.server_version() == "v1.37.1"  # first token revoked: 401, re-exec, resend
    assert cluster.get_json("/api")["kind"] == "APIVersions"
    cluster.close()
    assert _runs(count_file) == 2


@pytest.mark.extra_versions  # kubectl v1.24.0: make test builds it while the other tests run (scripts/test.sh)
def test_go_clients_get_the_same_files_and_run_the_plugin_themselves(tmp_path, local_cluster):
    files, count_file = _kubeconfigs(tmp_path, local_cluster, lifetime_s=600)
    args, env = goclient.connection(files)
    events = goclient.run_once(
        "discovery", [*args, "--burst=300", "--qps=300", "--legacy=false", "--cache=memory"], env=env, timeout_s=120
    )
    assert any(e["event"] == "summary" for e in events)
    assert _runs(count_file) == 1  # client-go ran it (nothing else did)
    kubectl = binaries.kubectl("1.24.0")  # built by `make test`'s bootstrap (EXTRA_KUBECTL_VERSIONS)
    proc = subprocess.run(
        [str(kubectl.path), *args, "get", "--raw", "/version"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"gitVersion": "v1.37.1"' in proc.stdout
    assert _runs(count_file) == 2
