"""One cached `go env` reader (gobuild.go_env) serves the module cache and the proxy settings: one `go env -json`
per process, asked again when the environment that decides the answer changes; the environment wins."""

from __future__ import annotations

import pytest

from crdscale.cluster import gobuild, patches, releases
from crdscale.errors import BinaryError

# A go that answers `go env -json NAME...` as go does: the environment's value, else its own default; and
# counts its calls.
FAKE_GO = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["FAKE_GO_CALLS"], "a") as calls:
    calls.write(" ".join(sys.argv[1:]) + "\\n")
defaults = {"GOMODCACHE": "/default/mod", "GOPROXY": "https://proxy.example,direct", "GOSUMDB": "sum.golang.org"}
print(json.dumps({n: os.environ.get(n, defaults.get(n, "")) for n in sys.argv[3:]}))
"""


@pytest.fixture
def go(tmp_path, monkeypatch):
    """The fake go on PATH; returns the list of its calls so far."""
    binary = tmp_path / "go"
    binary.write_text(FAKE_GO)
    binary.chmod(0o755)
    calls = tmp_path / "calls"
    calls.touch()
    monkeypatch.setenv("FAKE_GO_CALLS", str(calls))
    for name in gobuild.GO_ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(gobuild, "go_binary", lambda: str(binary))
    monkeypatch.setattr(gobuild, "_GO_ENV", {})
    return lambda: calls.read_text().splitlines()


def test_one_go_env_call_serves_every_reader(go):
    assert patches.go_module_cache() == gobuild.Path("/default/mod")
    assert releases._go_env()["GOPROXY"] == "https://proxy.example,direct"
    assert gobuild.downloaded_module_dir("k8s.io/kubernetes", "v1.24.0") is None  # no /default/mod here
    assert go() == ["env -json " + " ".join(sorted(gobuild.GO_ENV_NAMES))]


def test_the_environment_wins_and_a_change_of_it_is_asked_again(go, tmp_path, monkeypatch):
    assert gobuild.go_env("GOMODCACHE") == {"GOMODCACHE": "/default/mod"}
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "mod"))
    (tmp_path / "mod" / "github.com" / "!azure" / "x@v1.0.0").mkdir(parents=True)
    assert patches.go_module_cache() == tmp_path / "mod"
    assert gobuild.downloaded_module_dir("github.com/Azure/x", "v1.0.0") == tmp_path / "mod/github.com/!azure/x@v1.0.0"
    monkeypatch.delenv("GOMODCACHE")
    assert patches.go_module_cache() == gobuild.Path("/default/mod")  # the first answer, kept
    assert len(go()) == 2
    # A name beyond the usual ones is asked (once) on its own.
    assert gobuild.go_env("GOVERSION", "GOPROXY") == {"GOVERSION": "", "GOPROXY": "https://proxy.example,direct"}
    assert go()[-1] == "env -json GOVERSION"


def test_a_go_that_cannot_answer_leaves_the_environments_values(go, tmp_path, monkeypatch):
    broken = tmp_path / "broken-go"
    broken.write_text("#!/bin/sh\necho 'go: cannot find GOROOT' >&2\nexit 2\n")
    broken.chmod(0o755)
    monkeypatch.setattr(gobuild, "go_binary", lambda: str(broken))
    monkeypatch.setenv("GOPROXY", "https://mirror.example")
    assert releases._go_env() == {**dict.fromkeys(releases._GO_ENV_NAMES, ""), "GOPROXY": "https://mirror.example"}
    assert patches.go_module_cache() == gobuild.Path.home() / "go" / "pkg" / "mod"
    assert gobuild.downloaded_module_dir("k8s.io/kubernetes", "v1.24.0") is None


def test_no_go(monkeypatch):
    def no_go():
        raise BinaryError("Go is not installed")

    monkeypatch.setattr(gobuild, "go_binary", no_go)
    with pytest.raises(BinaryError):
        gobuild.go_env("GOMODCACHE")
    assert gobuild.downloaded_module_dir("k8s.io/kubernetes", "v1.24.0") is None


def test_escape_module_path():
    assert gobuild.escape_module_path("github.com/Azure/AKS") == "github.com/!azure/!a!k!s"
    assert gobuild.escape_module_path("k8s.io/api") == "k8s.io/api"
