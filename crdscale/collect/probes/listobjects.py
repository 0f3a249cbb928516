"""The objects the LIST probes create, and how one LIST of them is sent and timed.

:func:`populate` creates custom resources, Secrets, ConfigMaps and Pods of a
chosen size and count (ownership-labelled) and returns what to LIST;
:func:`execute` sends one :class:`~.requests.ListRequest`, following ``continue``
when paged, through a probe's transport. Shared by the LIST probe
(:mod:`.listcost`), its concurrent load (:mod:`.listload`), the APF probe and the
client-memory probe.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from crdscale.cluster.apiservers import ApiServer
from crdscale.cluster.listing import ListTarget
from crdscale.errors import ClusterError

from ._http import timed_get
from .configs import ListObjects
from .fixtures import (
    CR_SELECTABLE_FIELD,
    CRD_PATH,
    ProbeFixtures,
    bucket,
    config_map,
    custom_resource,
    has_selectable_field,
    list_probe_crd,
    list_probe_group,
    node_name,
    pod,
    secret,
)
from .requests import ListRequest

log = logging.getLogger(__name__)


@dataclass
class Populated:
    """What :func:`populate` created: one :class:`ListTarget` per resource, and object counts."""

    targets: list[ListTarget] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    data_bytes: dict[str, int] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # resource -> one object's name
    namespaces: list[str] = field(default_factory=list)
    resource_version_before: str = ""  # a list RV from before anything was created


def populate(fixtures: ProbeFixtures, config: ListObjects) -> Populated:
    """Create the objects ``config`` asks for; returns what to LIST."""
    labels, instance = fixtures.labels, fixtures.instance
    out = Populated()
    out.resource_version_before = (
        fixtures.cluster.get_json("/api/v1/namespaces?limit=1").get("metadata", {}).get("resourceVersion", "")
    )
    out.namespaces = [fixtures.namespace(chr(ord("a") + i)) for i in range(config.namespaces)]
    primary = out.namespaces[0]

    def spread(count: int) -> list[tuple[int, str]]:
        return [(i, out.namespaces[i % len(out.namespaces)]) for i in range(count)]

    if config.custom_resources:
        group = list_probe_group(instance)
        crd = list_probe_crd(labels, instance)
        fixtures.install_crds([crd])
        fixtures.wait_resource_served(group, "listprobes")
        stored = fixtures.cluster.get_json(f"{CRD_PATH}/{crd['metadata']['name']}")
        selector = f"{CR_SELECTABLE_FIELD}={bucket(0)}" if has_selectable_field(stored) else None
        target = ListTarget("listprobes", group, "v1", primary, field_selector=selector)
        log.info(f"creating {config.custom_resources} custom resources of {config.cr_bytes} B")
        bodies = [
            custom_resource(group, f"cr-{i:06d}", ns, labels, i, config.cr_bytes)
            for i, ns in spread(config.custom_resources)
        ]
        fixtures.create_objects(target.collection_path, bodies, workers=config.workers)
        out.targets.append(target)
        out.counts[target.group_resource] = config.custom_resources
        out.data_bytes[target.group_resource] = config.cr_bytes
        out.names[target.group_resource] = "cr-000000"
    # Core objects of a chosen data size: (resource, count, bytes, builder, name prefix, what to say,
    # a field selector on neither namespace nor name).
    core_objects = (
        ("secrets", config.secrets, config.secret_bytes, secret, "s", "Secrets", None),
        ("configmaps", config.configmaps, config.configmap_bytes, config_map, "cm", "ConfigMaps", None),
        ("pods", config.pods, config.pod_bytes, pod, "p", "Pods", f"spec.nodeName={node_name(0)}"),
    )
    for resource, count, size, build, prefix, noun, field_selector in core_objects:
        if not count:
            continue
        target = ListTarget(resource, "", "v1", primary, field_selector=field_selector)
        log.info(f"creating {count} {noun} of {size} B")
        bodies = [build(f"{prefix}-{i:06d}", ns, labels, i, size) for i, ns in spread(count)]
        fixtures.create_objects(target.collection_path, bodies, workers=min(config.workers, 8))
        out.targets.append(target)
        out.counts[resource] = count
        out.data_bytes[resource] = size
        out.names[resource] = f"{prefix}-000000"
    return out


@dataclass
class ListResult:
    """One execution of a :class:`ListRequest` (all pages when paged)."""

    status: int
    latency_s: float
    bytes: int
    items: int
    pages: int
    resource_version: str
    first_page_latency_s: float


def execute(
    transport, cluster, request: ListRequest, *, timeout_s: float = 300.0, max_pages: int = 10_000, decode: bool = True
) -> ListResult:
    """Send ``request`` (following ``continue`` when paged) and count items; latency and bytes cover all pages.

    ``decode=False`` skips JSON decoding of unpaged responses (items reported as -1), so a load
    generator on a small machine spends its CPU on requests rather than on parsing.
    """
    params = dict(request.params)
    total_latency, total_bytes, items, pages = 0.0, 0, 0, 0
    first_latency = 0.0
    status, rv = 0, ""
    while True:
        result = timed_get(
            transport, cluster.url(request.path), params=params, headers={"Accept": request.accept}, timeout=timeout_s
        )
        pages += 1
        total_latency += result.latency_s
        total_bytes += result.bytes
        if pages == 1:
            first_latency = result.latency_s
        status = result.status
        if status != 200:
            break
        if not decode and not request.paged:
            items = -1
            break
        body = result.json()
        # Table responses carry rows, lists carry items.
        items += len(body.get("items") or body.get("rows") or [])
        meta = body.get("metadata", {})
        rv = meta.get("resourceVersion", rv)
        token = meta.get("continue")
        if not request.paged or not token or pages >= max_pages:
            break
        params = {k: v for k, v in request.params.items() if k != "resourceVersion"}
        params["continue"] = token
    return ListResult(status, total_latency, total_bytes, items, pages, rv, first_latency)


def current_resource_version(transport, cluster, target: ListTarget) -> str:
    """A list resourceVersion from a consistent ``limit=1`` LIST (for the Exact / NotOlderThan kinds)."""
    result = timed_get(transport, cluster.url(target.collection_path()), params={"limit": "1"})
    if result.status != 200:
        raise ClusterError(f"LIST {target.collection_path()} -> HTTP {result.status}: {result.body[:200]!r}")
    return result.json().get("metadata", {}).get("resourceVersion", "")


def wait_served(server: ApiServer, populated: Populated, *, timeout_s: float = 120.0) -> None:
    """Wait until ``server`` serves every populated resource (a second server learns about a
    new CRD from etcd a moment after the first one)."""
    deadline = time.monotonic() + timeout_s
    for target in populated.targets:
        while server.cluster.get(target.collection_path(), params={"limit": "1"}).status_code != 200:
            if time.monotonic() > deadline:
                raise ClusterError(f"{server.label} does not serve {target.group_resource} after {timeout_s:.0f} s")
            time.sleep(0.3)
