"""An old kube-apiserver (v1.24.0), built from Go modules the same way, comes up."""

import os

from crdscale.cluster.local import LocalControlPlane


def test_kube_apiserver_1_24_comes_up_and_serves_crds():
    with LocalControlPlane("1.24.0", name=f"old-{os.getpid()}") as cp:
        cluster = cp.connect()
        assert cluster.server_version() == "v1.24.0"
        groups = cluster.get_json("/apis")
        assert any(g["name"] == "apiextensions.k8s.io" for g in groups["groups"])
        assert cluster.get("/debug/pprof/heap?gc=1").status_code == 200
