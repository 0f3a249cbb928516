"""`run --check` says where kube-apiserver comes from when a target changes the release (diffs, build tags,
a Go): "cached: PATH" when that build is in the cache, "to build" otherwise; nothing downloaded or built."""

from __future__ import annotations

import pytest

from crdscale.cluster import binaries, gobuild
from crdscale.paths import CACHE_ENV
from crdscale.scenario.check import check_cell
from crdscale.scenario.config import parse_scenario

LOCAL_GO = "go1.26.8"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty crdscale cache, this machine's Go LOCAL_GO, and k8s.io/kubernetes v1.24.0 (naming go1.18.1)
    in the module cache; v1.30.0 never downloaded."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(gobuild, "go_version", lambda go=None: LOCAL_GO)
    source = tmp_path / "mod" / "k8s.io" / "kubernetes@v1.24.0"
    source.mkdir(parents=True)
    (source / "build" / "build-image" / "cross").mkdir(parents=True)
    (source / "build" / "build-image" / "cross" / "VERSION").write_text("v1.24.0-go1.18.1-bullseye.0\n")
    monkeypatch.setattr(
        gobuild, "downloaded_module_dir", lambda path, version: source if version == "v1.24.0" else None
    )
    return tmp_path / "cache"


def _binary(cache, name: str):
    path = cache / "kube-apiserver" / name / "kube-apiserver"
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_release_go_build_is_found_in_its_own_directory(cache):
    assert binaries.cached_build("v1.24.0", go="release") is None
    built = _binary(cache, "v1.24.0-go1.18.1")
    assert binaries.cached_build("v1.24.0", go="release") == built
    assert binaries.cached_build("v1.24.0", go="1.18.1") == built
    assert binaries.cached_build("v1.24.0", go="local") is None  # the local Go's build is another one
    # A release whose module was never downloaded: which Go it names is not known without asking the proxy.
    assert binaries.cached_build("v1.30.0", go="release") is None


def test_a_release_naming_this_machines_go_is_its_ordinary_build(cache):
    ordinary = _binary(cache, "v1.24.0")
    assert binaries.cached_build("v1.24.0", go=LOCAL_GO) == ordinary
    assert binaries.cached_build("v1.24.0", go="local") == ordinary


def test_run_check_says_cached_for_a_release_go_build(cache, monkeypatch):
    _binary(cache, "v1.24.0")  # the release itself, so the plan asks the proxy nothing
    scenario = parse_scenario('[target]\nkube_version = "1.24.0"\ngo = "release"\netcd = "/bin/true"\n')
    monkeypatch.setattr("crdscale.cluster.toolchain.check_toolchain_version", lambda v, served=None: v)
    checks = dict(check_cell(scenario, "test").checks)
    # No diff and no build tag: nothing is said of changes, only which Go.
    assert checks["kube-apiserver v1.24.0"] == "to build from Go modules with the Go it shipped with"
    built = _binary(cache, "v1.24.0-go1.18.1")
    checks = dict(check_cell(scenario, "test").checks)
    assert checks["kube-apiserver v1.24.0"] == f"cached: {built} (built with the Go it shipped with)"
    scenario = parse_scenario('[target]\nkube_version = "1.24.0"\ngo = "1.18.1"\netcd = "/bin/true"\n')
    checks = dict(check_cell(scenario, "test").checks)
    assert checks["kube-apiserver v1.24.0"] == f"cached: {built} (built with Go 1.18.1)"


def test_run_check_speaks_of_changes_only_with_changes(cache):
    _binary(cache, "v1.24.0")
    plain = parse_scenario('[target]\nkube_version = "1.24.0"\netcd = "/bin/true"\n')
    assert "changes" not in dict(check_cell(plain, "test").checks)["kube-apiserver v1.24.0"]
    tagged = parse_scenario('[target]\nkube_version = "1.24.0"\nbuild_tags = ["x"]\netcd = "/bin/true"\n')
    checks = dict(check_cell(tagged, "test").checks)
    assert checks["kube-apiserver v1.24.0"].startswith("to build with the changes below")
    assert checks["build tags"] == "x"


def test_run_check_names_the_go_a_cached_release_build_was_built_with(cache):
    """Its build.json's Go; and, when the proxy lacked the patch the release names, that it is not that one
    (v1.26.13 names go1.20.13, built with go1.20.14)."""
    scenario = parse_scenario('[target]\nkube_version = "1.24.0"\ngo = "release"\netcd = "/bin/true"\n')
    later = _binary(cache, "v1.24.0-go1.18.10")  # the newest served go1.18, the release's go1.18.1 not served
    (later.parent / "build.json").write_text('{"go": "go1.18.10"}')
    assert binaries.cached_build("v1.24.0", go="release") == later
    assert dict(check_cell(scenario, "test").checks)["kube-apiserver v1.24.0"] == (
        f"cached: {later} (built with go1.18.10, not the go1.18.1 it shipped with, which the Go module proxy does "
        "not serve)"
    )
    own = _binary(cache, "v1.24.0-go1.18.1")
    (own.parent / "build.json").write_text('{"go": "go1.18.1"}')
    assert dict(check_cell(scenario, "test").checks)["kube-apiserver v1.24.0"] == (
        f"cached: {own} (built with go1.18.1, the Go it shipped with)"
    )
