"""`run --check` (so `ab --check`, `history --check`) refuses a release the Go module proxy cannot serve whole, as a
history's choice of releases does: one line naming the staging module it lacks and the minor's newest patch served
whole, exit 2, nothing built, no run directory. A build of it cached here always passes; the answers are cached.
The proxy is a fake lookup (no network)."""

from __future__ import annotations

import pytest

from crdscale.cli.main import main
from crdscale.cluster import binaries, gobuild, releases
from crdscale.errors import BinaryError

GOMOD = (
    "module k8s.io/kubernetes\n\nreplace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n"
    "\tk8s.io/kube-controller-manager => ./staging/src/k8s.io/kube-controller-manager\n)\n"
)


@pytest.fixture
def proxy(tmp_path, monkeypatch):
    """A module proxy with every 1.27 patch up to .16, whose k8s.io/kube-controller-manager zips from .5 on are
    refused (as proxy.golang.org's here: 403); an empty crdscale cache; builds fail the test."""
    gomod = tmp_path / "kubernetes.mod"
    gomod.write_text(GOMOD)
    asked = []

    def lookup(module, version):
        asked.append(f"{module}@{version}")
        patch = int(version.split(".")[-1])
        if module == "k8s.io/kubernetes":
            return {"GoMod": str(gomod)} if version.startswith("v1.27.") and patch <= 16 else {"Error": "404"}
        if module == "k8s.io/kube-controller-manager" and patch >= 5:
            return {"Error": f"{module}@{version}: the proxy serves its .info but refuses its .zip"}
        return {}

    def forbidden(*_a, **_k):
        raise AssertionError("nothing is built or created by a check")

    lookup.asked = asked
    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(releases, "_lookup", lookup)
    monkeypatch.setattr(gobuild, "go_binary", lambda: "go")
    monkeypatch.setattr(gobuild, "build", forbidden)
    monkeypatch.setattr("crdscale.rundir.RunWriter.create", forbidden)
    return lookup


def test_a_release_lacking_a_staging_module_names_it_and_the_newest_whole_patch(proxy, tmp_path):
    cache = tmp_path / "answers.json"
    found = releases.unbuildable("v1.27.16", cache_path=cache)
    assert found == releases.Unbuildable("v1.27.16", ["k8s.io/kube-controller-manager"], "v1.27.4")
    assert (
        found.reason() == "the Go module proxy (or its checksum database) lacks k8s.io/kube-controller-manager v0.27.16"
    )
    assert found.fix("kube_version") == 'the newest 1.27 patch it serves whole: kube_version = "1.27.4"'
    assert releases.unbuildable("v1.27.4", cache_path=cache) is None
    # Asked again: answered from the cache, the proxy is not asked.
    before = len(proxy.asked)
    assert releases.unbuildable("v1.27.16", cache_path=cache) == found
    assert releases.unbuildable("v1.27.4", cache_path=cache) is None
    assert len(proxy.asked) == before


def test_no_answer_is_not_kept_and_a_cached_build_passes(proxy, tmp_path, monkeypatch):
    cache = tmp_path / "answers.json"
    monkeypatch.setattr(releases, "_lookup", lambda module, version: {"Error": "timeout", "Unreachable": True})
    assert releases.unbuildable("v1.27.16", cache_path=cache) is None  # the build will tell
    assert "v1.27.16" not in releases.read_answers(cache)
    monkeypatch.setattr(releases, "_lookup", proxy)
    built = tmp_path / "cache" / "kube-apiserver" / "v1.27.16-go1.20.14" / "kube-apiserver"
    built.parent.mkdir(parents=True)
    built.write_text("#!/bin/sh\n")
    built.chmod(0o755)
    assert releases.unbuildable("v1.27.16", cache_path=cache) is None
    assert proxy.asked == []


def test_run_check_refuses_it_in_one_line(proxy, tmp_path, capsys):
    runs = tmp_path / "runs"
    args = [
        "run",
        "--check",
        "--set",
        "target.kube_version=1.27.16",
        "--set",
        "target.etcd=/bin/true",
        "--out",
        str(runs),
    ]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [
        "crdscale: error: default scenario: 'target.kube_version': kube-apiserver v1.27.16 cannot be built here: the "
        "Go module proxy (or its checksum database) lacks k8s.io/kube-controller-manager v0.27.16; the newest 1.27 "
        'patch it serves whole: kube_version = "1.27.4"'
    ]
    assert not runs.exists()
    assert main([*args[:3], "target.kube_version=1.27.4", *args[4:]]) == 0
    # A build of the release cached here passes, whatever the proxy says.
    built = binaries.binaries_dir("kube-apiserver", "v1.27.16") / "kube-apiserver"
    built.parent.mkdir(parents=True)
    built.write_text("#!/bin/sh\n")
    built.chmod(0o755)
    assert main(args) == 0
    assert f"cached: {built}" in capsys.readouterr().out


def test_answers_are_kept_per_module_source(monkeypatch):
    """What one proxy (or checksum database) lacks, another may serve: each module source has its own file."""
    source = {"GOPROXY": "https://proxy.golang.org,direct", "GOSUMDB": "sum.golang.org"}
    monkeypatch.setattr(gobuild, "go_env", lambda *names: {n: source.get(n, "") for n in names})
    first = gobuild.per_module_source("history-releases.json")
    assert first.startswith("history-releases-") and first.endswith(".json")
    assert gobuild.per_module_source("history-releases.json") == first
    source["GOPROXY"] = "https://mirror.example/go"
    assert gobuild.per_module_source("history-releases.json") != first

    def no_go(*_names):
        raise BinaryError("go is not installed")

    monkeypatch.setattr(gobuild, "go_env", no_go)
    monkeypatch.setenv("GOPROXY", "https://mirror.example/go")
    without_go = gobuild.per_module_source("go-module-versions.json")
    monkeypatch.setenv("GOPROXY", "https://proxy.golang.org")
    assert gobuild.per_module_source("go-module-versions.json") != without_go
