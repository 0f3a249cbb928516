"""What a CRD set is, in a few numbers and one hash.

The generator, the loader and the installer print the same summary; the
scenario runner stores :meth:`CrdSetSummary.to_dict` (hash included) in run
manifests so two runs can be compared only when their CRD sets match.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from crdscale.ownership import MANAGED_BY_LABEL, RUN_ID_LABEL
from crdscale.schema import cel_rules, compact_json, count_properties, description_bytes, json_bytes
from crdscale.units import fmt_number

# Fields the server or a tool fills in; they differ between two copies of the
# same CRD set, so the hash ignores them.
_VOLATILE_METADATA = (
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
)
_VOLATILE_LABELS = (MANAGED_BY_LABEL, RUN_ID_LABEL)
_VOLATILE_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def schema_bytes(crd: Mapping[str, Any]) -> int:
    """Bytes of the compact JSON of every version's ``openAPIV3Schema`` of one CRD, summed."""
    total = 0
    for version in crd.get("spec", {}).get("versions") or []:
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if schema is not None:
            total += json_bytes(schema)
    return total


def crd_properties(crd: Mapping[str, Any]) -> int:
    """Properties of one CRD, summed over its versions (each version carries its own schema)."""
    return sum(
        count_properties((v.get("schema") or {}).get("openAPIV3Schema"))
        for v in crd.get("spec", {}).get("versions") or []
    )


def canonical_crd(crd: Mapping[str, Any]) -> dict[str, Any]:
    """``crd`` without status, server-filled metadata and crdscale's ownership labels."""
    metadata = dict(crd.get("metadata") or {})
    for key in _VOLATILE_METADATA:
        metadata.pop(key, None)
    labels = {k: v for k, v in (metadata.get("labels") or {}).items() if k not in _VOLATILE_LABELS}
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k not in _VOLATILE_ANNOTATIONS}
    metadata.pop("labels", None)
    metadata.pop("annotations", None)
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    out = {k: v for k, v in crd.items() if k not in ("status", "metadata")}
    out["metadata"] = metadata
    return out


def crd_set_sha256(crds: Iterable[Mapping[str, Any]]) -> str:
    """Hex sha256 of the set: order-independent, blind to server fields and ownership labels."""
    canonical = sorted((canonical_crd(c) for c in crds), key=lambda c: c["metadata"].get("name", ""))
    digest = hashlib.sha256()
    for crd in canonical:
        digest.update(compact_json(crd).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def _min_median_max(values: Sequence[int]) -> tuple[int, float, int]:
    if not values:
        return 0, 0, 0
    return min(values), statistics.median(values), max(values)


@dataclass(frozen=True)
class CrdSetSummary:
    """A CRD set in numbers.

    Attributes:
        count: CRDs.
        groups: distinct API groups.
        group_versions: distinct served group/version pairs (what discovery lists).
        versions: CRD versions in total (sum over CRDs).
        schema_bytes_min/median/max/total: per-CRD schema size, bytes of compact
            JSON summed over the CRD's versions.
        properties_min/median/max/total: per-CRD property count, summed over versions.
        scopes: CRDs per scope, e.g. ``{"Cluster": 500}``.
        sha256: :func:`crd_set_sha256` of the set.
        cel_rules: CEL validation rules (``x-kubernetes-validations``) in the served versions' schemas; None in
            summaries recorded before it was counted (2026-11-28).
        description_bytes: ``description`` text in the served versions' schemas, bytes; None likewise.
    """

    count: int
    groups: int
    group_versions: int
    versions: int
    schema_bytes_min: int
    schema_bytes_median: float
    schema_bytes_max: int
    schema_bytes_total: int
    properties_min: int
    properties_median: float
    properties_max: int
    properties_total: int
    scopes: dict[str, int]
    sha256: str
    cel_rules: int | None = None
    description_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def render(self) -> str:
        """A few human lines (no trailing newline)."""
        scopes = ", ".join(f"{n} {scope}" for scope, n in sorted(self.scopes.items())) or "-"
        return "\n".join(
            [
                f"CRDs:            {self.count} ({scopes})",
                f"groups:          {self.groups}",
                f"group-versions:  {self.group_versions} (CRD versions: {self.versions})",
                f"schema bytes:    min {fmt_number(self.schema_bytes_min)}, median {fmt_number(self.schema_bytes_median)}, "
                f"max {fmt_number(self.schema_bytes_max)}, total {fmt_number(self.schema_bytes_total)}",
                f"properties:      min {fmt_number(self.properties_min)}, median {fmt_number(self.properties_median)}, "
                f"max {fmt_number(self.properties_max)}, total {fmt_number(self.properties_total)}",
                f"sha256:          {self.sha256}",
            ]
        )


def summarize(crds: Sequence[Mapping[str, Any]]) -> CrdSetSummary:
    """Compute the :class:`CrdSetSummary` of a list of CRD dicts."""
    groups = set()
    group_versions = set()
    scopes: dict[str, int] = {}
    sizes, properties = [], []
    versions = rules = described = 0
    for crd in crds:
        spec = crd.get("spec") or {}
        group = spec.get("group", "")
        groups.add(group)
        for version in spec.get("versions") or []:
            versions += 1
            if version.get("served", True):
                group_versions.add((group, version.get("name")))
                schema = (version.get("schema") or {}).get("openAPIV3Schema")
                rules += cel_rules(schema)
                described += description_bytes(schema)
        scope = spec.get("scope", "?")
        scopes[scope] = scopes.get(scope, 0) + 1
        sizes.append(schema_bytes(crd))
        properties.append(crd_properties(crd))
    smin, smed, smax = _min_median_max(sizes)
    pmin, pmed, pmax = _min_median_max(properties)
    return CrdSetSummary(
        count=len(crds),
        groups=len(groups),
        group_versions=len(group_versions),
        versions=versions,
        schema_bytes_min=smin,
        schema_bytes_median=smed,
        schema_bytes_max=smax,
        schema_bytes_total=sum(sizes),
        properties_min=pmin,
        properties_median=pmed,
        properties_max=pmax,
        properties_total=sum(properties),
        scopes=scopes,
        sha256=crd_set_sha256(crds),
        cel_rules=rules,
        description_bytes=described,
    )
