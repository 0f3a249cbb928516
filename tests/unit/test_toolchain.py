"""Which Go a release was built with, read from its recorded sources, and the toolchain module's names."""

from __future__ import annotations

from pathlib import Path

import pytest

from crdscale.cluster.toolchain import (
    check_toolchain_version,
    newest_patch,
    normalize_go_version,
    release_go_version,
    release_toolchain_version,
    toolchain_module_version,
)
from crdscale.errors import UsageError

RECORDED = Path(__file__).resolve().parents[1] / "data" / "release-go"
SERVED = ("go1.18", "go1.18.1", "go1.18.10", "go1.22.8", "go1.22.12", "go1.26.8")


@pytest.mark.parametrize(
    "release, version, source",
    [
        ("v1.37.1", "go1.26.8", ".go-version"),
        ("v1.28.15", "go1.22.8", ".go-version"),
        ("v1.24.0", "go1.18.1", "build/build-image/cross/VERSION"),
    ],
)
def test_release_go_version_from_recorded_sources(release, version, source):
    found = release_go_version(RECORDED / release)
    assert (found.version, found.source, found.exact) == (version, source, True)


def test_go_mod_is_only_a_minimum(tmp_path):
    (tmp_path / "go.mod").write_text("module k8s.io/kubernetes\n\ngo 1.16\n")
    found = release_go_version(tmp_path)
    assert (found.version, found.exact) == ("go1.16", False)


@pytest.mark.parametrize("text, want", [("1.18.10", "go1.18.10"), ("go1.22", "go1.22"), (" go1.26.8 ", "go1.26.8")])
def test_normalize(text, want):
    assert normalize_go_version(text) == want


@pytest.mark.parametrize("text", ["banana", "1", "go1.18rc1", "1.18.10; rm -rf /", ""])
def test_normalize_refuses(text):
    with pytest.raises(UsageError, match="is not a Go version"):
        normalize_go_version(text)


def test_module_version_and_choice():
    assert toolchain_module_version("1.18.10").startswith("v0.0.1-go1.18.10.linux-")
    assert newest_patch("go1.18.1", SERVED) == "go1.18.10"
    assert newest_patch("1.22.8", SERVED) == "go1.22.12"
    assert check_toolchain_version("1.18.10", SERVED) == "go1.18.10"
    with pytest.raises(UsageError, match="no toolchain go1.18.99; served for go1.18: go1.18, go1.18.1, go1.18.10"):
        check_toolchain_version("1.18.99", SERVED)
    with pytest.raises(UsageError, match="serves no toolchain of go1.19"):
        newest_patch("1.19.3", SERVED)


def test_a_release_naming_a_go_patch_the_proxy_lacks_builds_with_the_newest_of_that_go():
    """v1.26.13 names go1.20.13, which the proxy does not serve as a toolchain (2026-11-28): go1.20.14 builds it."""
    assert release_toolchain_version("go1.18.1", SERVED) == "go1.18.1"  # served: the release's own
    assert release_toolchain_version("go1.18.5", SERVED) == "go1.18.10"
    with pytest.raises(UsageError, match="serves no toolchain of go1.19"):
        release_toolchain_version("go1.19.3", SERVED)
