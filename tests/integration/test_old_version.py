"""An old kube-apiserver (v1.24.0), built from Go modules the same way, comes up, with the
kube-controller-manager of the same version (every flag crdscale gives it exists in v1.24)."""

import os

import pytest

from crdscale.cluster.local import CONTROLLER_MANAGER, LocalControlPlane

# v1.24.0: make test builds it while the other tests run (scripts/test.sh).
pytestmark = pytest.mark.extra_versions


def test_kube_apiserver_1_24_comes_up_and_serves_crds(crd_watches):
    with LocalControlPlane("1.24.0", name=f"old-{os.getpid()}") as cp:
        cluster = cp.connect()
        assert cluster.server_version() == "v1.24.0"
        groups = cluster.get_json("/apis")
        assert any(g["name"] == "apiextensions.k8s.io" for g in groups["groups"])
        assert cluster.get("/debug/pprof/heap?gc=1").status_code == 200
        assert cp.versions[CONTROLLER_MANAGER] == "v1.24.0" and cp.process(CONTROLLER_MANAGER).alive()
        group = "old.crdscale.io"
        plurals = crd_watches.install(cluster, group, 3)
        watches = crd_watches.wait(cluster, group, plurals)
        assert all(watches.get(p, 0) >= 1 for p in plurals), watches
