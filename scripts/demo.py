"""`make demo` until the scenario runner lands: start a local control plane,
install a few generated CRDs, fetch one heap profile and print its path."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from crdscale.cluster.gobuild import stderr_echo
from crdscale.cluster.local import LocalControlPlane
from crdscale.fsutil import write_atomic
from crdscale.ownership import new_run_id, ownership_labels
from crdscale.paths import runs_dir


def demo_crd(i: int, run_id: str) -> dict:
    group = f"g{i % 3}.demo.crdscale.io"
    kind = f"Thing{i}"
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"thing{i}s.{group}", "labels": ownership_labels(run_id)},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"kind": kind, "plural": f"thing{i}s", "singular": f"thing{i}", "listKind": f"{kind}List"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": {
                         f"field{j}": {"type": "string"} for j in range(20)}}}}}}]},
    }


def main() -> int:
    run_id = new_run_id()
    out_dir = runs_dir() / f"{run_id}-demo"
    with LocalControlPlane(echo=stderr_echo) as cp:
        cluster = cp.connect()
        for i in range(10):
            resp = cluster.session.post(cluster.url("/apis/apiextensions.k8s.io/v1/customresourcedefinitions"),
                                        json=demo_crd(i, run_id), timeout=30)
            resp.raise_for_status()
        time.sleep(3)
        profile = write_atomic(out_dir / "heap-step01-crds0010.pb.gz", cluster.get("/debug/pprof/heap?gc=1").content)
    print(Path(profile).resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
