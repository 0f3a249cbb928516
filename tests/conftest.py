"""Shared fixtures.

``local_cluster`` is one real local control plane (etcd + kube-apiserver on
127.0.0.1) shared by the integration tests of a session; tests that stop or
kill a control plane start their own instead.
"""

from __future__ import annotations

import logging
import re

import pytest

from crdscale.cluster.local import LocalControlPlane


@pytest.fixture(scope="session")
def local_cluster():
    """A running :class:`LocalControlPlane` at the pinned default version (``.kubeconfig``, ``.connect()``)."""
    # Its start-up lines (binaries found or built, ready) are logged at INFO; pytest shows them on failure.
    logging.getLogger("crdscale").setLevel(logging.INFO)
    with LocalControlPlane(name=None) as cp:
        yield cp


@pytest.fixture(scope="session")
def cluster(local_cluster):
    """The shared control plane's :class:`crdscale.cluster.clients.Cluster`."""
    return local_cluster.connect()


def pytest_collection_modifyitems(config, items):
    # Everything under tests/integration needs the real control plane.
    for item in items:
        if "tests/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
    # A recheck test repeats, with the external tool, what a recorded expectation already checks:
    # run it when re-recording or on a new tool version (-m recheck), not on every test run.
    # A long test (a release built with its own Go: 12-16 minutes of both cores cold) would break CI's
    # 40-minute budget: run it on demand (-m long), as its docstring says.
    # A word of -m, not a substring: "not alongside" names no long test.
    asked = set(re.findall(r"\w+", config.getoption("markexpr") or ""))
    for marker in ("recheck", "long"):
        if marker in asked:
            continue
        left_out = [item for item in items if item.get_closest_marker(marker)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not item.get_closest_marker(marker)]
