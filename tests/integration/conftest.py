"""Helpers the integration tests share, as fixtures (a test module never imports another)."""

from __future__ import annotations

import time

import pytest

from crdscale.collect.promtext import parse_exposition
from crdscale.ownership import ownership_labels

CRD_COLLECTION = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class CrdWatches:
    """Install plain CRDs and wait for the watches kube-controller-manager opens on them."""

    @staticmethod
    def crd(group: str, kind: str) -> dict:
        """A one-version, schemaless, namespaced CRD ``<kind>s.<group>`` labelled as a test's."""
        plural = kind.lower() + "s"
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}", "labels": ownership_labels("test-kcm")},
            "spec": {
                "group": group,
                "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": kind + "List"},
                "scope": "Namespaced",
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    }
                ],
            },
        }

    def install(self, cluster, group: str, count: int) -> list[str]:
        """``count`` one-version CRDs in ``group``, Established; returns their plurals."""
        plurals = []
        for i in range(count):
            body = self.crd(group, f"Thing{i:02d}")
            resp = cluster.post(CRD_COLLECTION, body, timeout=30)
            assert resp.status_code == 201, resp.text
            plurals.append(body["spec"]["names"]["plural"])
        deadline = time.monotonic() + 120
        pending = set(plurals)
        while pending and time.monotonic() < deadline:
            for plural in list(pending):
                got = cluster.get_json(f"{CRD_COLLECTION}/{plural}.{group}")
                conditions = (got.get("status") or {}).get("conditions") or []
                if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                    pending.discard(plural)
            time.sleep(0.2)
        assert not pending, f"not Established: {sorted(pending)}"
        return plurals

    @staticmethod
    def watches(cluster, group: str) -> dict[str, float]:
        """In-flight WATCH requests kube-apiserver serves per resource of ``group`` (its own gauge)."""
        text = cluster.get("/metrics", timeout=60).text
        found: dict[str, float] = {}
        for _, labels, value in parse_exposition(text, {"apiserver_longrunning_requests"}):
            if labels.get("verb") == "WATCH" and labels.get("group") == group and not labels.get("subresource"):
                found[labels["resource"]] = found.get(labels["resource"], 0.0) + value
        return found

    def wait(self, cluster, group: str, plurals: list[str], timeout_s: float = 150) -> dict[str, float]:
        """The watches per plural once each has one, or as they are after ``timeout_s``."""
        # The garbage collector and the quota controller rediscover resources every 30 s.
        deadline = time.monotonic() + timeout_s
        while True:
            watches = self.watches(cluster, group)
            if all(watches.get(p, 0) >= 1 for p in plurals) or time.monotonic() > deadline:
                return watches
            time.sleep(2)


@pytest.fixture
def crd_watches() -> CrdWatches:
    """:class:`CrdWatches`: install CRDs, wait for kube-controller-manager's watches on them."""
    return CrdWatches()
