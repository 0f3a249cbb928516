"""Delete what crdscale created - and nothing else.

Candidates come from a LIST with crdscale's ownership label selector (one run
or all runs); each one's labels are checked again client-side before its
DELETE, and the DELETE carries ``preconditions`` (uid and resourceVersion) so
an object replaced or relabelled since the LIST is never deleted. Works the
same on the local control plane and on a user's cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from crdscale.cluster.clients import ApiError, Cluster, status_message
from crdscale.cluster.retry import send_with_retry
from crdscale.errors import ClusterError, UsageError
from crdscale.ownership import is_owned, owned_selector

# Kinds crdscale may create, as (name for reports, collection path). CRDs go
# last: deleting one also deletes its custom resources.
OWNED_KINDS: tuple[tuple[str, str], ...] = (
    ("configmaps", "/api/v1/configmaps"),
    ("secrets", "/api/v1/secrets"),
    ("namespaces", "/api/v1/namespaces"),
    ("customresourcedefinitions", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"),
)


@dataclass
class CleanResult:
    """Counts per kind: ``found`` (owned, matched), ``deleted`` (request accepted),
    ``gone`` (no longer listed at the end), ``errors`` (messages)."""

    dry_run: bool
    selector: str
    found: dict[str, int] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)
    gone: dict[str, int] = field(default_factory=dict)
    remaining: dict[str, list[str]] = field(default_factory=dict)
    names: dict[str, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def total_found(self) -> int:
        return sum(self.found.values())

    @property
    def ok(self) -> bool:
        return not self.errors and not any(self.remaining.values())


def _item_path(collection: str, item: dict[str, Any]) -> str:
    metadata = item["metadata"]
    namespace = metadata.get("namespace")
    if namespace and collection.startswith("/api/v1/"):
        kind = collection.rsplit("/", 1)[1]
        return f"/api/v1/namespaces/{namespace}/{kind}/{metadata['name']}"
    return f"{collection}/{metadata['name']}"


def _display(item: dict[str, Any]) -> str:
    metadata = item["metadata"]
    return f"{metadata['namespace']}/{metadata['name']}" if metadata.get("namespace") else metadata["name"]


def list_owned(cluster: Cluster, collection: str, selector: str, run_id: str | None) -> list[dict[str, Any]]:
    """Objects of ``collection`` matching ``selector`` whose labels really are crdscale's (client-side check)."""
    try:
        items, _ = cluster.list(collection, params={"labelSelector": selector})
    except ApiError as err:
        if err.status == 404:  # e.g. an API that this server does not have
            return []
        raise
    return [i for i in items if is_owned(i.get("metadata", {}).get("labels"), run_id)]


def _delete(cluster: Cluster, collection: str, item: dict[str, Any], run_id: str | None) -> str | None:
    """DELETE one owned object with preconditions; returns an error line or None."""
    # Checked again here, right before the request: deletion is the one thing
    # that must never touch a foreign object.
    if not is_owned(item.get("metadata", {}).get("labels"), run_id):
        return f"{_display(item)}: not crdscale's, left alone"
    metadata = item["metadata"]
    body = {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": "Background",
        "preconditions": {"uid": metadata["uid"], "resourceVersion": metadata["resourceVersion"]},
    }
    path = _item_path(collection, item)
    try:
        response = send_with_retry(lambda: cluster.delete(path, body, timeout=60))
    except ClusterError as err:
        return f"{_display(item)}: {err}"
    if response.status_code in (200, 202, 404):
        return None
    if response.status_code == 409:
        # Changed since the LIST: fetch it again and decide on what it is now.
        try:
            fresh = cluster.get(path)
        except ClusterError as err:
            return f"{_display(item)}: {err}"
        if fresh.status_code == 404:
            return None
        if fresh.status_code == 200:
            return (
                _delete(cluster, collection, fresh.json(), run_id)
                if fresh.json()["metadata"]["uid"] == metadata["uid"]
                else f"{_display(item)}: replaced by another object since listed, left alone"
            )
    return f"{_display(item)}: HTTP {response.status_code}: {status_message(response)}"


def clean(
    cluster: Cluster,
    *,
    run_id: str | None = None,
    all_owned: bool = False,
    dry_run: bool = False,
    wait_timeout_s: float = 300.0,
    concurrency: int = 16,
    kinds: tuple[tuple[str, str], ...] = OWNED_KINDS,
    progress: Callable[[str, int, int], None] | None = None,
) -> CleanResult:
    """Delete objects carrying crdscale's ownership labels: of run ``run_id``, or of every run with ``all_owned``.

    Waits up to ``wait_timeout_s`` for them to be gone. Returns a :class:`CleanResult`.
    Raises :class:`UsageError` unless exactly one of ``run_id``/``all_owned`` is given.
    """
    if bool(run_id) == bool(all_owned):
        raise UsageError("give exactly one of a run id or all-owned")
    selector = owned_selector(run_id)
    result = CleanResult(dry_run=dry_run, selector=selector)
    found: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    for name, collection in kinds:
        items = list_owned(cluster, collection, selector, run_id)
        found[name] = (collection, items)
        result.found[name] = len(items)
        result.names[name] = sorted(_display(i) for i in items)
    if dry_run:
        return result

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="crdscale-clean") as pool:
        for name, (collection, items) in found.items():
            errors = list(
                pool.map(lambda item, collection=collection: _delete(cluster, collection, item, run_id), items)
            )
            result.errors += [e for e in errors if e]
            result.deleted[name] = sum(1 for e in errors if e is None)
            if progress:
                progress(name, result.deleted[name], len(items))

    deadline = time.monotonic() + wait_timeout_s
    for name, (collection, items) in found.items():
        if not items:
            result.gone[name] = 0
            continue
        uids = {i["metadata"]["uid"] for i in items}
        while True:
            still = [i for i in list_owned(cluster, collection, selector, run_id) if i["metadata"]["uid"] in uids]
            if not still or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        result.gone[name] = len(items) - len(still)
        result.remaining[name] = sorted(_display(i) for i in still)
    return result
