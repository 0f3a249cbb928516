"""`crdscale image build --push`'s client against a real OCI registry (CNCF distribution v3,
built from Go modules: `crdscale binaries --registry`), with htpasswd (basic) authentication.

bootstrap does not build the registry (15 min on the loaded 2-core machine); without it this
test is skipped and tests/unit/test_image_push.py checks the request sequence on a fake transport.
"""

from __future__ import annotations

import json
import subprocess
import time

import bcrypt
import pytest
import requests

from crdscale.cluster import binaries
from crdscale.cluster.process import free_ports, port_open
from crdscale.errors import ClusterError
from crdscale.image import oci
from crdscale.image.push import push_archive

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(binaries.cached_registry() is None, reason="no registry built (crdscale binaries --registry)"),
]


@pytest.fixture
def registry(tmp_path):
    (port,) = free_ports(1)
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=5)).decode()
    (tmp_path / "htpasswd").write_text(f"me:{hashed}\n")
    config = {
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(tmp_path / "data")}},
        "http": {"addr": f"127.0.0.1:{port}"},
        "auth": {"htpasswd": {"realm": "test", "path": str(tmp_path / "htpasswd")}},
    }
    (tmp_path / "config.yml").write_text(json.dumps(config))  # YAML is a superset of JSON
    log = open(tmp_path / "registry.log", "wb")
    proc = subprocess.Popen(
        [str(binaries.cached_registry()), "serve", str(tmp_path / "config.yml")], stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 30
        while not port_open(port):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "registry.log").read_text()
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def test_push_to_a_real_registry(registry, tmp_path):
    archive = tmp_path / "img.tar"
    layers = [oci.tar_layer({"etc/os-release": b"ID=t\n"}), oci.tar_layer({"opt/x": b"x" * 100_000})]
    digest = oci.write_oci_archive(archive, layers, config=oci.ImageConfig(entrypoint=["/opt/x"]), ref="t:1")
    ref = f"{registry}/team/crdscale:v1"
    with pytest.raises(ClusterError, match="refused anonymous access"):
        push_archive(archive, ref, env={})
    env = {"CRDSCALE_REGISTRY_USERNAME": "me", "CRDSCALE_REGISTRY_PASSWORD": "pw"}
    assert push_archive(archive, ref, env=env) == digest
    assert push_archive(archive, f"{registry}/team/crdscale:v2", env=env) == digest  # blobs already there
    got = requests.get(
        f"http://{registry}/v2/team/crdscale/manifests/v1",
        auth=("me", "pw"),
        headers={"Accept": oci.MEDIA_MANIFEST},
        timeout=30,
    )
    assert got.status_code == 200 and got.headers["Docker-Content-Digest"] == digest
    assert got.content == oci.read_oci_archive(archive).blob(digest)
