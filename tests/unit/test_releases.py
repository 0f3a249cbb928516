"""Choosing each minor's newest buildable patch from a fake module proxy."""

from __future__ import annotations

import pytest

from crdscale.cluster.releases import _lookup as proxy_lookup  # the real one: conftest fakes releases._lookup
from crdscale.cluster.releases import choose_releases, minors_between, newest_buildable
from crdscale.errors import UsageError


@pytest.fixture
def proxy(tmp_path):
    gomod = tmp_path / "kubernetes.mod"
    gomod.write_text(
        "module k8s.io/kubernetes\n\nreplace (\n"
        "\tk8s.io/api => ./staging/src/k8s.io/api\n"
        "\tk8s.io/apiserver => ./staging/src/k8s.io/apiserver\n"
        "\tk8s.io/sample-cli-plugin => ./staging/src/k8s.io/sample-cli-plugin\n)\n"
    )
    served = {
        # 1.27: .16 lacks only a sample module (harmless), .15 is not a release here.
        "k8s.io/kubernetes@v1.27.16": {"GoMod": str(gomod)},
        "k8s.io/api@v0.27.16": {},
        "k8s.io/apiserver@v0.27.16": {},
        # 1.26: .15 lacks k8s.io/apiserver, so .14 is the newest buildable.
        "k8s.io/kubernetes@v1.26.15": {"GoMod": str(gomod)},
        "k8s.io/api@v0.26.15": {},
        "k8s.io/kubernetes@v1.26.14": {"GoMod": str(gomod)},
        "k8s.io/api@v0.26.14": {},
        "k8s.io/apiserver@v0.26.14": {},
    }

    def lookup(module, version):
        return served.get(f"{module}@{version}", {"Error": "not found"})

    return lookup


def test_newest_buildable(proxy):
    assert newest_buildable("1.27", proxy).version == "v1.27.16"
    choice = newest_buildable("1.26", proxy)
    assert choice.version == "v1.26.14"
    assert choice.passed_over == ["v1.26.15 lacks k8s.io/apiserver v0.26.15"]
    assert "none buildable" in newest_buildable("1.25", proxy).describe()


def test_choose_and_refuse(proxy):
    assert [c.version for c in choose_releases("1.25", "1.27", proxy)] == [None, "v1.26.14", "v1.27.16"]
    with pytest.raises(UsageError, match="no release from 1.20 to 1.21 can be built"):
        choose_releases("1.20", "1.21", proxy)
    with pytest.raises(UsageError, match="from an older"):
        minors_between("1.30", "1.24")
    assert minors_between("1.24", "1.26") == ["1.24", "1.25", "1.26"]


def test_checksum_known_asks_the_proxys_checksum_database():
    from crdscale.cluster.releases import checksum_known

    asked = []

    def status(url):
        asked.append(url)
        return {"legacy-cloud-providers@v0.27.16": 404, "api@v0.27.16": 200}.get(url.rsplit("/", 1)[-1])

    env = {"GOPROXY": "https://proxy.golang.org,direct", "GOSUMDB": "sum.golang.org"}
    assert checksum_known("k8s.io/legacy-cloud-providers", "v0.27.16", env=env, status=status) is False
    assert asked == ["https://proxy.golang.org/sumdb/sum.golang.org/lookup/k8s.io/legacy-cloud-providers@v0.27.16"]
    assert checksum_known("k8s.io/api", "v0.27.16", env=env, status=status) is True
    # No answer (a timeout, a 500): unknown, the build finds out.
    assert checksum_known("k8s.io/kubelet", "v0.27.16", env=env, status=status) is None
    # go does not check these: no request at all.
    asked.clear()
    assert checksum_known("k8s.io/x", "v1", env={**env, "GOSUMDB": "off"}, status=status) is True
    assert checksum_known("k8s.io/x", "v1", env={**env, "GONOSUMDB": "k8s.io"}, status=status) is True
    assert checksum_known("k8s.io/x", "v1", env={**env, "GOPRIVATE": "*.corp,k8s.io/x"}, status=status) is True
    assert checksum_known("k8s.io/x", "v1", env={"GOPROXY": "direct"}, status=status) is None
    assert asked == []
    # A database named with its own URL is asked there; upper case is escaped as the protocol says.
    checksum_known("github.com/Azure/x", "v1", env={"GOSUMDB": "sum.example+key https://sum.example/"}, status=status)
    assert asked == ["https://sum.example/lookup/github.com/!azure/x@v1"]


def test_a_module_without_its_checksum_is_not_served(monkeypatch):
    from crdscale.cluster import gobuild, releases

    monkeypatch.setattr(gobuild, "module_info", lambda path, version, timeout_s: {"Version": version})
    monkeypatch.setattr(releases, "checksum_known", lambda path, version: path != "k8s.io/legacy-cloud-providers")
    monkeypatch.setattr(releases, "zip_served", lambda path, version: path != "k8s.io/endpointslice")
    assert "checksum database has no entry" in proxy_lookup("k8s.io/legacy-cloud-providers", "v0.27.16")["Error"]
    assert "refuses its .zip" in proxy_lookup("k8s.io/endpointslice", "v0.32.13")["Error"]
    assert proxy_lookup("k8s.io/api", "v0.27.16") == {"Version": "v0.27.16"}


def test_zip_served_asks_with_head():
    from crdscale.cluster.releases import zip_served

    asked = []

    def status(url, method):
        asked.append((method, url))
        return {"endpointslice": 403, "api": 200}.get(url.split("/")[4])

    env = {"GOPROXY": "https://proxy.golang.org,direct"}
    assert zip_served("k8s.io/endpointslice", "v0.32.13", env=env, status=status) is False
    assert zip_served("k8s.io/api", "v0.32.13", env=env, status=status) is True
    assert zip_served("k8s.io/kubelet", "v0.32.13", env=env, status=status) is None
    assert asked[0] == ("HEAD", "https://proxy.golang.org/k8s.io/endpointslice/@v/v0.32.13.zip")
    assert zip_served("k8s.io/api", "v0.32.13", env={"GOPROXY": "off"}, status=status) is None
