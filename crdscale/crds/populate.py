"""Write a scenario's objects to the server: custom resources of its CRDs and the control kinds.

The bodies come from :mod:`crdscale.crds.objects` (pure); this module sends them
concurrently (``create``: POST; ``server-side-apply``: PATCH as field manager
``crdscale``), each carrying crdscale's ownership labels, so ``crdscale clean``
removes them (custom resources go with their CRDs; ConfigMaps, Secrets and the
namespaces holding them are owned kinds of their own). It also reads one stored
object back per kind: its JSON size as the server keeps it (server fields and
``managedFields`` included), the cross-check of the sizes crdscale sent.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import requests

from crdscale.cluster.clients import Transport
from crdscale.cluster.listing import METADATA_ONLY_ACCEPT, ListTarget
from crdscale.cluster.retry import RetryPolicy, send_with_retry
from crdscale.crds import objects
from crdscale.errors import ClusterError
from crdscale.ownership import owned_selector, ownership_labels

log = logging.getLogger(__name__)

# The server is busy building storage and caches while thousands of objects arrive.
WRITE_RETRY = RetryPolicy(backoff_s=0.5)
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"  # JSON is YAML


def namespace_name(run_id: str, what: str) -> str:
    """The namespace of a run's objects: ``crdscale-objects-<run id>`` for custom resources,
    ``crdscale-<kind>-<run id>`` for a control kind (each kind apart, so a LIST of one is one kind)."""
    return f"crdscale-{what}-{run_id}"


@dataclass(frozen=True)
class Target:
    """Where objects of one kind go: the collection ``path`` (namespace included when namespaced)."""

    kind: str  # customresources, configmaps, secrets
    path: str
    namespace: str | None
    crd: Mapping[str, Any] | None = None  # for custom resources

    @property
    def label(self) -> str:
        return self.crd["metadata"]["name"] if self.crd is not None else self.kind

    def list_target(self) -> ListTarget:
        """The :class:`~crdscale.cluster.listing.ListTarget` whose cluster-wide LIST holds
        these objects (its resource, group and version; its namespace for namespaced LISTs)."""
        if self.crd is None:
            return ListTarget(self.kind, "", "v1", self.namespace)
        group, version = objects.api_version(self.crd).split("/", 1)
        return ListTarget(self.crd["spec"]["names"]["plural"], group, version, self.namespace)


def custom_resource_target(crd: Mapping[str, Any], namespace: str) -> Target:
    spec = crd["spec"]
    namespaced = spec.get("scope", "Cluster") == "Namespaced"
    prefix = f"/apis/{objects.api_version(crd)}"
    path = (
        f"{prefix}/namespaces/{namespace}/{spec['names']['plural']}"
        if namespaced
        else f"{prefix}/{spec['names']['plural']}"
    )
    return Target(objects.CUSTOM_RESOURCES, path, namespace if namespaced else None, crd)


def control_target(kind: str, namespace: str) -> Target:
    return Target(kind, f"/api/v1/namespaces/{namespace}/{kind}", namespace)


@dataclass
class ObjectCounts:
    """Objects written so far per kind, and their JSON bytes as sent."""

    objects: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, count: int, size: int) -> None:
        self.objects[kind] = self.objects.get(kind, 0) + count
        self.bytes[kind] = self.bytes.get(kind, 0) + count * size


class ObjectWriter:
    """Creates a run's objects (see the module doc).

    Parameters:
        cluster: the :class:`~crdscale.cluster.clients.Cluster`.
        run_id: whose ownership labels every object carries.
        size, shape, managed_fields, apply, concurrency: the scenario's ``[objects]``.
    """

    def __init__(
        self,
        cluster,
        *,
        run_id: str,
        size: int,
        shape: str = "flat",
        managed_fields: bool = True,
        apply: str = "create",
        concurrency: int = 16,
    ):
        self.cluster = cluster
        self.run_id = run_id
        self.size = size
        self.shape = shape
        self.managed_fields = managed_fields
        self.apply = apply
        self.concurrency = concurrency
        self.counts = ObjectCounts()
        self._next: dict[str, int] = {}  # next object index per target path
        self._namespaces: set[str] = set()
        self._lock = threading.Lock()

    @property
    def labels(self) -> dict[str, str]:
        return ownership_labels(self.run_id)

    def ensure_namespace(self, name: str) -> str:
        """Create namespace ``name`` (labelled as crdscale's) once; returns ``name``."""
        if name in self._namespaces:
            return name
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": self.labels}}
        resp = send_with_retry(lambda: self.cluster.post("/api/v1/namespaces", body, timeout=30), WRITE_RETRY)
        if resp.status_code not in (200, 201, 409):
            raise ClusterError(f"create namespace {name} -> HTTP {resp.status_code}: {resp.text.strip()[:300]}")
        self._namespaces.add(name)
        return name

    def written(self, target: Target) -> int:
        """How many objects of ``target`` were written so far."""
        return self._next.get(target.path, 0)

    def bodies(self, target: Target, count: int) -> list[dict[str, Any]]:
        """The next ``count`` objects of ``target`` (names continue where the last call stopped)."""
        start = self._next.get(target.path, 0)
        self._next[target.path] = start + count
        out = []
        for i in range(start, start + count):
            name = f"obj-{i:06d}"
            if target.crd is not None:
                body = objects.custom_resource(
                    target.crd,
                    name,
                    namespace=target.namespace,
                    labels=self.labels,
                    size=self.size,
                    shape=self.shape,
                    salt=i,
                )
            else:
                body = objects.control_object(
                    target.kind, name, namespace=target.namespace, labels=self.labels, size=self.size, salt=i
                )
            out.append(body if self.managed_fields else objects.without_managed_fields(body))
        return out

    def write(
        self, targets: Sequence[Target], per_target: int, *, progress: Callable[[int], None] | None = None
    ) -> int:
        """Write ``per_target`` new objects to every target, ``concurrency`` requests in flight;
        ``progress(n)`` after each. Returns how many were written (an existing one counts:
        a retried request that had succeeded)."""
        work = [(t, body) for t in targets for body in self.bodies(t, per_target)]
        # Its own connections, as many as requests in flight (the cluster's transport keeps its pool for others).
        transport = self.cluster.transport.fresh(pool_size=self.concurrency)
        try:
            with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="crdscale-objects") as pool:
                for target, _ in zip((t for t, _ in work), pool.map(lambda w: self._send(transport, *w), work)):
                    self.counts.add(target.kind, 1, self.size)
                    if progress:
                        progress(1)
        finally:
            transport.close()
        return len(work)

    def _send(self, transport: Transport, target: Target, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        if self.apply == "server-side-apply":
            url = self.cluster.url(f"{target.path}/{name}")
            params = {"fieldManager": objects.FIELD_MANAGER, "force": "true"}
            data = json.dumps(body, separators=(",", ":")).encode()

            def request():
                return transport.request(
                    "PATCH", url, params=params, data=data, headers={"Content-Type": APPLY_CONTENT_TYPE}, timeout=60
                )

            ok = (200, 201)
        else:
            url = self.cluster.url(target.path)
            # The bytes and Content-Type requests' json= sends.
            data = json.dumps(body, allow_nan=False).encode()

            def request():
                return transport.request(
                    "POST",
                    url,
                    params={"fieldManager": objects.FIELD_MANAGER},
                    data=data,
                    headers={"Content-Type": "application/json"},
                    timeout=60,
                )

            ok = (200, 201, 409)

        def send() -> requests.Response:
            try:
                return request()
            except requests.exceptions.RequestException as err:  # retried: no answer came
                raise ClusterError(f"write {target.path}/{name} failed: {err}") from err

        resp = send_with_retry(send, WRITE_RETRY)
        if resp.status_code not in ok:
            raise ClusterError(f"write {target.path}/{name} -> HTTP {resp.status_code}: {resp.text.strip()[:300]}")

    def wait_cached(self, targets: Sequence[Target], *, timeout_s: float = 600.0) -> float:
        """Wait until the server's watch cache serves every object written to ``targets``; returns
        the seconds waited.

        A profile taken before the cache has decoded a step's objects would charge them to the
        next step, another kind's (seen with 10 kB custom resources: their decode lagged the
        writes by more than the settle time). A metadata-only LIST with ``resourceVersion=0`` is
        answered by the cache with what it has seen (by etcd when the cache is off).
        """
        start = time.monotonic()
        for target in targets:
            want = self._next.get(target.path, 0)
            seen = -1
            while True:
                resp = self.cluster.get(
                    target.path,
                    params={"resourceVersion": "0", "labelSelector": owned_selector(self.run_id)},
                    headers={"Accept": METADATA_ONLY_ACCEPT},
                    timeout=120,
                )
                if resp.status_code == 200:
                    seen = len(resp.json().get("items") or [])
                    if seen >= want:
                        break
                if time.monotonic() - start > timeout_s:
                    raise ClusterError(
                        f"the watch cache served {seen} of {want} objects at {target.path} after {timeout_s:.0f} s"
                    )
                time.sleep(1.0)
        return time.monotonic() - start

    def stored_bytes(self, target: Target) -> int | None:
        """JSON bytes of the first object of ``target`` as the server returns it (None if there is none)."""
        resp = self.cluster.get(f"{target.path}/obj-000000", timeout=30)
        if resp.status_code != 200:
            return None
        return objects.json_bytes(resp.json())
