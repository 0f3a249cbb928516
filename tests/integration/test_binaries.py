"""Binaries come from the Go module proxy; refused versions get a clear suggestion."""

import os

import pytest

from crdscale.cli.main import main
from crdscale.cluster import binaries


@pytest.mark.skipif(not binaries.gobuild.shutil.which("go"), reason="needs Go")
def test_refused_version_names_the_nearest_served_one(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path))  # never reuse a cached build here
    assert main(["binaries", "--kube-version", "1.36.6"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "does not serve k8s.io/kubernetes v1.36.6" in err[0] and "try --kube-version 1.36.0" in err[0]


def test_explicit_binary_is_used_instead_of_building(tmp_path, monkeypatch):
    fake = tmp_path / "kube-apiserver"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv(binaries.KUBE_APISERVER_ENV, str(fake))
    assert binaries.kube_apiserver("1.30.0").path == fake.resolve()
    monkeypatch.delenv(binaries.KUBE_APISERVER_ENV)
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path))
    found = binaries.kube_apiserver(None)
    assert found.path == fake.resolve() and found.source == "kubebuilder-assets"


def test_cached_binaries_are_reported(capsys):
    assert main(["binaries"]) == 0
    out = capsys.readouterr().out
    assert "kube-apiserver" in out and "v1.37.1" in out and "etcd" in out
    assert os.environ.get("CRDSCALE_CACHE") is None or "cache" in out
