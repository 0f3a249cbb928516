"""Request builders for the probes: which paths, parameters and Accept headers to send.

The resource to LIST (:class:`~crdscale.cluster.listing.ListTarget`) and the Accept
headers of a LIST's response shapes live in :mod:`crdscale.cluster.listing`, below
the object writer of :mod:`crdscale.crds.populate` that names them too.

Pure functions over discovery documents and resource descriptions; no I/O, so
they are unit-tested on recorded documents.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from crdscale.cluster.listing import JSON_ACCEPT, METADATA_ONLY_ACCEPT, TABLE_ACCEPT, ListTarget

# Aggregated discovery (KEP-3352): v2 first, v2beta1 for servers 1.26-1.29,
# plain JSON last so an old server still answers with the legacy APIGroupList.
AGGREGATED_DISCOVERY_ACCEPT = ",".join(
    [
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
        "application/json",
    ]
)
LEGACY_DISCOVERY_ACCEPT = "application/json"


def legacy_group_version_paths(core: Mapping[str, Any], groups: Mapping[str, Any]) -> list[str]:
    """Resource-list paths legacy discovery fetches in parallel: every version of every group.

    Parameters:
        core: the ``APIVersions`` document from ``GET /api``.
        groups: the ``APIGroupList`` document from ``GET /apis``.

    Returns paths such as ``/api/v1`` and ``/apis/apps/v1``, core first, in server order.
    """
    paths = [f"/api/{version}" for version in core.get("versions", [])]
    for group in groups.get("groups", []):
        for version in group.get("versions", []):
            paths.append(f"/apis/{version['groupVersion']}")
    return paths


def is_aggregated_discovery(content_type: str | None) -> str | None:
    """The aggregated discovery version (``v2``/``v2beta1``) a response's Content-Type names, else ``None``."""
    if not content_type or "as=APIGroupDiscoveryList" not in content_type:
        return None
    for part in content_type.split(";"):
        key, _, value = part.strip().partition("=")
        if key == "v":
            return value
    return "unknown"


def aggregated_group_versions(document: Mapping[str, Any]) -> list[str]:
    """Group-versions listed in an ``APIGroupDiscoveryList`` (``v1``, ``apps/v1``, ...)."""
    out = []
    for item in document.get("items", []):
        group = item.get("metadata", {}).get("name", "")
        for version in item.get("versions", []):
            out.append(f"{group}/{version['version']}" if group else version["version"])
    return out


@dataclass(frozen=True)
class ListRequest:
    """One kind of LIST to measure.

    Attributes:
        kind: short name used in tables (``rv0``, ``consistent``, ...).
        path: collection path.
        params: query parameters; ``continue`` is added by the pager.
        accept: Accept header.
        paged: follow ``metadata.continue`` until the list is complete.
        description: one line for the table.
    """

    kind: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    accept: str = JSON_ACCEPT
    paged: bool = False
    description: str = ""

    def params_json(self) -> str:
        return json.dumps(self.params, sort_keys=True)


LIST_KINDS = (
    "rv0",
    "consistent",
    "exact",
    "exact-old",
    "not-older-than",
    "paged",
    "paged-rv0",
    "label-selector",
    "field-selector-namespace",
    "field-selector-name",
    "field-selector",
    "namespaced",
    "namespaced-rv0",
    "metadata-only",
    "metadata-only-rv0",
    "table",
)


def build_list_requests(
    target: ListTarget,
    *,
    resource_version: str,
    label_selector: str,
    single_name: str | None = None,
    old_resource_version: str | None = None,
    page_size: int = 500,
    kinds: tuple[str, ...] = LIST_KINDS,
) -> list[ListRequest]:
    """The LIST request kinds the probe measures for one resource.

    Parameters:
        target: the resource; ``target.namespace`` is used by namespaced kinds.
        resource_version: a recent list resourceVersion (for ``exact``/``not-older-than``).
        label_selector: a selector matching a fraction of the objects.
        single_name: an object name for ``field-selector-name`` (skipped if ``None``).
        old_resource_version: an RV from before the objects (and a new CRD's watch
            cache) existed, for ``exact-old``; such a LIST cannot come from the
            cache's snapshots and goes to etcd (skipped if ``None``).
        page_size: ``limit`` for the paged kinds.
        kinds: which kinds to build, in order.
    """
    cluster_path = target.collection_path()
    ns = target.namespace
    catalogue: dict[str, ListRequest] = {
        "rv0": ListRequest(
            "rv0", cluster_path, {"resourceVersion": "0"}, description="resourceVersion=0 (any cached state)"
        ),
        "consistent": ListRequest(
            "consistent", cluster_path, {}, description="resourceVersion unset (consistent read)"
        ),
        "exact": ListRequest(
            "exact",
            cluster_path,
            {"resourceVersion": resource_version, "resourceVersionMatch": "Exact"},
            description="resourceVersionMatch=Exact at a recent RV",
        ),
        "not-older-than": ListRequest(
            "not-older-than",
            cluster_path,
            {"resourceVersion": resource_version, "resourceVersionMatch": "NotOlderThan"},
            description="resourceVersionMatch=NotOlderThan a recent RV",
        ),
        "paged": ListRequest(
            "paged", cluster_path, {"limit": str(page_size)}, paged=True, description=f"limit={page_size} + continue"
        ),
        "paged-rv0": ListRequest(
            "paged-rv0",
            cluster_path,
            {"limit": str(page_size), "resourceVersion": "0"},
            paged=True,
            description=f"limit={page_size}&resourceVersion=0",
        ),
        "label-selector": ListRequest(
            "label-selector",
            cluster_path,
            {"labelSelector": label_selector},
            description=f"labelSelector={label_selector}",
        ),
        "metadata-only": ListRequest(
            "metadata-only", cluster_path, {}, accept=METADATA_ONLY_ACCEPT, description="as=PartialObjectMetadataList"
        ),
        "metadata-only-rv0": ListRequest(
            "metadata-only-rv0",
            cluster_path,
            {"resourceVersion": "0"},
            accept=METADATA_ONLY_ACCEPT,
            description="as=PartialObjectMetadataList, resourceVersion=0",
        ),
        "table": ListRequest("table", cluster_path, {}, accept=TABLE_ACCEPT, description="as=Table (kubectl get)"),
    }
    if ns:
        catalogue["field-selector-namespace"] = ListRequest(
            "field-selector-namespace",
            cluster_path,
            {"fieldSelector": f"metadata.namespace={ns}"},
            description=f"cluster-wide, fieldSelector=metadata.namespace={ns}",
        )
        catalogue["namespaced"] = ListRequest(
            "namespaced", target.collection_path(ns), {}, description=f"namespace {ns}, consistent read"
        )
        catalogue["namespaced-rv0"] = ListRequest(
            "namespaced-rv0",
            target.collection_path(ns),
            {"resourceVersion": "0"},
            description=f"namespace {ns}, resourceVersion=0",
        )
    if old_resource_version:
        catalogue["exact-old"] = ListRequest(
            "exact-old",
            cluster_path,
            {"resourceVersion": old_resource_version, "resourceVersionMatch": "Exact"},
            description="resourceVersionMatch=Exact at an RV from before the objects existed",
        )
    if target.field_selector:
        # The server narrows the etcd key for a namespace or a name in a field selector;
        # any other field means reading every object of the resource and filtering after.
        catalogue["field-selector"] = ListRequest(
            "field-selector",
            cluster_path,
            {"fieldSelector": target.field_selector},
            description=f"fieldSelector={target.field_selector} (neither namespace nor name)",
        )
    if single_name:
        catalogue["field-selector-name"] = ListRequest(
            "field-selector-name",
            target.collection_path(ns) if ns else cluster_path,
            {"fieldSelector": f"metadata.name={single_name}"},
            description="fieldSelector=metadata.name (one object)",
        )
    return [catalogue[kind] for kind in kinds if kind in catalogue]
