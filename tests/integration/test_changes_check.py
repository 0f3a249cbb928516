"""Changes checked before any build, on v1.37.1's real module sources and binaries (both there
once v1.37.1 is built): the fixture diffs apply, a bad diff and an unknown gate are refused in
under 5 s, the gates read from the sources are the ones the binary lists, and its flags are read.
Nothing is built here (the patched build is the A/B's)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from crdscale.cluster import binaries, flags, gates, patches
from crdscale.errors import UsageError

KUBE_VERSION = "v1.37.1"
PATCHES = Path(__file__).parent.parent / "data" / "patches"


@pytest.fixture(scope="module")
def apiserver() -> binaries.Binary:
    return binaries.kube_apiserver(KUBE_VERSION)


@pytest.mark.parametrize("name", ["known-cost-v1.37.1.diff", "noop-v1.37.1.diff"])
def test_fixture_diffs_apply(apiserver, name):
    started = time.monotonic()
    touched = patches.check([patches.read_diff(PATCHES / name)], KUBE_VERSION)
    assert time.monotonic() - started < 5
    assert "k8s.io/apiextensions-apiserver" in touched


def test_bad_diff_refused_before_a_build(apiserver, tmp_path):
    # Hunk 1's context names a field v1.37.1 does not have.
    text = (PATCHES / "known-cost-v1.37.1.diff").read_text()
    text = text.replace(" \tstorageVersion string\n", " \tstorageVersionX string\n", 1)
    bad = tmp_path / "bad.diff"
    bad.write_text(text)
    started = time.monotonic()
    with pytest.raises(UsageError, match=r"bad\.diff: hunk 1 of .*customresource_handler\.go .* does not apply"):
        patches.check([patches.read_diff(bad)], KUBE_VERSION)
    assert time.monotonic() - started < 5


def test_unknown_gate_refused_quickly(apiserver):
    gates.gates_for(KUBE_VERSION)  # parsed once (well under a second from the module cache)
    started = time.monotonic()
    with pytest.raises(UsageError, match="nearest: CBORServingAndStorage"):
        gates.check_feature_gates({"CBORServingAndStorag": True}, KUBE_VERSION)
    assert time.monotonic() - started < 5


def test_gates_from_sources_are_the_binarys(apiserver):
    listed = gates.gates_from_help(_help(apiserver.path))
    parsed = gates.gates_for(KUBE_VERSION)
    assert listed, "kube-apiserver --help lists no feature gates"
    assert set(listed) <= set(parsed), sorted(set(listed) - set(parsed))
    # Every stage the binary prints is the one parsed (GA gates print none, like locked ones).
    differ = {n: (s, parsed[n].stage) for n, s in listed.items() if s != "GA" and s != parsed[n].stage}
    assert not differ, differ


def test_flag_set_of_the_binary(apiserver):
    known = flags.flag_set(apiserver.path)
    assert set(flags.APISERVER_RESERVED) <= set(known.flags)
    with pytest.raises(UsageError, match="nearest: --watch-cache-sizes"):
        flags.check_flags(["--watch-cache-size=x#0"], known)


def _help(path: Path) -> str:
    import subprocess

    proc = subprocess.run([str(path), "--help"], capture_output=True, text=True, timeout=60)
    return proc.stdout + proc.stderr
