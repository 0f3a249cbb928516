"""`crdscale footprint` fed what users have, built here: a Crossplane package (an .xpkg image tarball
as `crossplane xpkg build` writes it, and its package.yaml stream), a Helm chart (directory and
packaged .tgz, a subchart, a template that makes a CRD), and a live cluster's installed CRDs.
Packages and charts need no server; the cluster case uses the shared local control plane."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def crd(name: str, group: str = "pkg.example.org", properties: int = 4) -> dict:
    props = {f"p{i}": {"type": "string"} for i in range(properties)}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{name}.{group}"},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"plural": name, "kind": name.capitalize(), "listKind": f"{name.capitalize()}List"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": {"type": "object", "properties": props}},
                        }
                    },
                }
            ],
        },
    }


def footprint(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "crdscale", "footprint", *argv, "--shipped", "-o", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def package_yaml(names: list[str]) -> bytes:
    provider = {
        "apiVersion": "meta.pkg.crossplane.io/v1",
        "kind": "Provider",
        "metadata": {"name": "provider-example"},
        "spec": {"controller": {"image": "example/provider:v0.1.0"}},
    }
    return yaml.safe_dump_all([provider, *(crd(n) for n in names)]).encode()


def add_file(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def write_xpkg(path: Path, names: list[str]) -> Path:
    """An image tarball as go-containerregistry's tarball.Write makes it (what `crossplane xpkg build`
    writes): manifest.json, the config blob, one gzipped layer holding package.yaml."""
    layer_tar = io.BytesIO()
    with tarfile.open(fileobj=layer_tar, mode="w") as layer:
        add_file(layer, "package.yaml", package_yaml(names))
    layer_gz = gzip.compress(layer_tar.getvalue())
    layer_digest = hashlib.sha256(layer_gz).hexdigest()
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Labels": {f"io.crossplane.xpkg:sha256:{layer_digest}": "base"}},
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer_tar.getvalue()).hexdigest()}"]},
        }
    ).encode()
    config_name = f"sha256:{hashlib.sha256(config).hexdigest()}"
    manifest = json.dumps(
        [{"Config": config_name, "RepoTags": ["example/provider:v0.1.0"], "Layers": [f"{layer_digest}.tar.gz"]}]
    ).encode()
    with tarfile.open(path, "w") as archive:
        add_file(archive, config_name, config)
        add_file(archive, f"{layer_digest}.tar.gz", layer_gz)
        add_file(archive, "manifest.json", manifest)
    return path


TEMPLATE_CRD = """\
{{- if .Values.installCRDs }}
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: templated.{{ .Values.group }}
{{- end }}
"""


def write_chart(root: Path) -> Path:
    """A chart with two CRDs in crds/, a subchart with one, a templated CRD and a Deployment template."""
    chart = root / "my-operator"
    (chart / "crds").mkdir(parents=True)
    (chart / "templates").mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: my-operator\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("installCRDs: true\ngroup: chart.example.org\n")
    (chart / "crds" / "widgets.yaml").write_text(yaml.safe_dump(crd("widgets", "chart.example.org")))
    (chart / "crds" / "gadgets.yaml").write_text(yaml.safe_dump(crd("gadgets", "chart.example.org", 40)))
    (chart / "templates" / "crd.yaml").write_text(TEMPLATE_CRD)
    (chart / "templates" / "deployment.yaml").write_text("kind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n")
    sub = chart / "charts" / "sub"
    (sub / "crds").mkdir(parents=True)
    (sub / "Chart.yaml").write_text("apiVersion: v2\nname: sub\nversion: 0.1.0\n")
    (sub / "crds" / "sprockets.yaml").write_text(yaml.safe_dump(crd("sprockets", "sub.example.org")))
    return chart


def test_crossplane_package_tarball_and_its_stream(tmp_path):
    names = ["buckets", "queues", "topics"]
    xpkg = write_xpkg(tmp_path / "provider-example-v0.1.0.xpkg", names)
    done = footprint(str(xpkg))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["features"]["crds"] == 3
    assert data["skipped"] == {"Provider": 1}
    assert sorted(r["name"] for r in data["top"]["costliest"]) == sorted(f"{n}.pkg.example.org" for n in names)

    (tmp_path / "package.yaml").write_bytes(package_yaml(names))
    stream = json.loads(footprint(str(tmp_path / "package.yaml")).stdout)
    assert stream["features"] == data["features"]
    assert stream["predictions"] == data["predictions"]

    # The upgrade: a release with one CRD more.
    newer = write_xpkg(tmp_path / "provider-example-v0.2.0.xpkg", [*names, "streams"])
    diff = footprint(str(xpkg), str(newer))
    assert diff.returncode == 0, diff.stderr
    assert json.loads(diff.stdout)["changes"]["added"] == ["streams.pkg.example.org"]


def test_an_image_tarball_without_a_package_is_refused(tmp_path):
    with tarfile.open(tmp_path / "image.tar", "w") as archive:
        add_file(archive, "manifest.json", b"[]")
        add_file(archive, "layer.tar", b"not a tar at all" * 64)
    done = footprint(str(tmp_path / "image.tar"))
    assert done.returncode == 5
    assert "no package.yaml in its layers" in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.skipif(shutil.which("helm") is not None, reason="helm renders the template; this checks the warning")
def test_helm_chart_directory_and_package_without_helm(tmp_path):
    chart = write_chart(tmp_path)
    done = footprint(str(chart))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["features"]["crds"] == 3  # crds/ of the chart and of its subchart
    assert data["skipped"] == {}  # Chart.yaml, values.yaml and templates are not CRD documents
    warning = [w for w in data["warnings"] if "helm is not on PATH" in w]
    assert warning and "1 template(s) mention CustomResourceDefinition" in warning[0]
    assert "helm template" in warning[0]  # the way out
    assert done.stderr.count("helm is not on PATH") == 1  # said once, on stderr

    packaged = tmp_path / "my-operator-0.1.0.tgz"
    with tarfile.open(packaged, "w:gz") as archive:
        archive.add(chart, arcname="my-operator")
    from_tgz = json.loads(footprint(str(packaged)).stdout)
    assert from_tgz["features"] == data["features"]
    assert any("helm is not on PATH" in w for w in from_tgz["warnings"])


@pytest.mark.skipif(shutil.which("helm") is None, reason="needs helm on PATH")
def test_helm_chart_templates_rendered_with_helm(tmp_path):
    chart = write_chart(tmp_path)
    data = json.loads(footprint(str(chart)).stdout)
    # The template makes a CRD without a spec: helm renders it and the loader names it.
    assert data["features"]["crds"] >= 3


def test_installed_crds_of_a_live_cluster(local_cluster, cluster, tmp_path):
    for name in ("footprinta", "footprintb"):
        body = crd(name, "footprint.crdscale.test")
        response = cluster.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body)
        assert response.status_code in (201, 409), response.text
    try:
        done = footprint("--kubeconfig", str(local_cluster.kubeconfig))
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        assert data["source"].startswith("cluster https://127.0.0.1:")
        assert data["features"]["crds"] >= 2
    finally:
        for name in ("footprinta", "footprintb"):
            cluster.delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}.footprint.crdscale.test")
