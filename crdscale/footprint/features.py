"""The shape of a CRD set in the numbers kube-apiserver's memory grows with.

:func:`footprint_features` describes a set (CRDs, served versions, schema properties and bytes, depth);
:func:`crd_features` one CRD, so a set's features are its CRDs' added (:func:`add_features`) and each
CRD's share of a prediction is its own features times the coefficients. Pure: dicts in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from crdscale.schema import cel_rules, description_bytes, measure_schema

# Features a model may use, in the order they are reported; max_depth describes, it does not add up.
# properties_squared (the sum over served versions of their property count squared) is there for
# costs that grow faster than the schema; tried on v1.24.0's RSS, the sweep did not support it
# (README, "Footprint"), so no shipped model uses it.
FEATURES = (
    "crds",
    "served_versions",
    "properties",
    "properties_squared",
    "schema_bytes",
    "cel_rules",
    "description_bytes",
)
DESCRIPTIVE = ("max_depth",)
# Features no sweep varies (its generated CRDs have no CEL rules): a model gets them as terms measured on real
# sets (crdscale.footprint.calibrate.add_cel_term), and a refit leaves them out.
TERM_FEATURES = ("cel_rules", "description_bytes")


def crd_features(crd: Mapping[str, Any]) -> dict[str, float]:
    """:func:`footprint_features` of one CRD (``crds`` is 1): its served versions and their schemas,
    each measured in one pass."""
    out = dict.fromkeys(FEATURES + DESCRIPTIVE, 0.0)
    out["crds"] = 1.0
    for version in (crd.get("spec") or {}).get("versions") or []:
        if not version.get("served", True):
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        measures = measure_schema(schema)
        out["cel_rules"] += cel_rules(schema)
        out["description_bytes"] += description_bytes(schema)
        out["served_versions"] += 1
        out["properties"] += measures.properties
        out["properties_squared"] += measures.properties**2
        out["schema_bytes"] += measures.bytes
        out["max_depth"] = max(out["max_depth"], measures.depth)
    return out


def add_features(per_crd: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The features of a set from its CRDs' (:func:`crd_features`): sums, and the deepest depth."""
    out = dict.fromkeys(FEATURES + DESCRIPTIVE, 0.0)
    for features in per_crd:
        for f in FEATURES:
            out[f] += features.get(f, 0.0)
        out["max_depth"] = max(out["max_depth"], features["max_depth"])
    return out


def footprint_features(crds: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The shape of a CRD set: ``crds``; ``served_versions`` (summed over CRDs);
    ``properties`` and ``schema_bytes`` (compact JSON) of the served versions' schemas,
    summed; ``properties_squared`` (each served version's properties squared, summed);
    ``max_depth`` (deepest property nesting); ``cel_rules`` (CEL validation rules of the served versions).
    Counts, bytes and levels."""
    return add_features([crd_features(c) for c in crds])


def summary_counts_cel(summary: Mapping[str, Any]) -> bool:
    """Whether a run's CRD set summary counted CEL rules (summaries recorded before 2026-11-28 did not)."""
    return summary.get("cel_rules") is not None


def features_from_summary(summary: Mapping[str, Any]) -> dict[str, float]:
    """:func:`footprint_features` from a run's CRD set summary (``manifest["crds"]``, see
    :class:`crdscale.crds.summary.CrdSetSummary`), taking every version as served and
    ``max_depth`` as unknown (NaN): what a recorded run tells without its CRDs. The summary
    has no per-version property counts, so ``properties_squared`` takes the versions as equal
    in size: exact for generated sets, a lower bound for others. CEL rules are counted in summaries recorded
    since 2026-11-28 (``cel_rules``); an older summary's count as 0, exact for generated sets (a real set's
    are then counted from its CRDs, benchmarks/footprint.py --validation; :func:`summary_counts_cel` tells)."""
    versions, properties = float(summary["versions"]), float(summary["properties_total"])
    return {
        "crds": float(summary["count"]),
        "served_versions": versions,
        "properties": properties,
        "properties_squared": properties**2 / versions if versions else 0.0,
        "schema_bytes": float(summary["schema_bytes_total"]),
        "cel_rules": float(summary.get("cel_rules") or 0),
        "description_bytes": float(summary.get("description_bytes") or 0),
        "max_depth": math.nan,
    }
