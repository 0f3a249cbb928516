"""Measures of one OpenAPI v3 schema (a CRD version's ``openAPIV3Schema``): properties, depth, bytes.

Pure functions on plain data, below both :mod:`crdscale.crds` (summaries of CRD
sets) and :mod:`crdscale.analysis` (the footprint model's features), so the two
count a schema the same way. :func:`measure_schema` gives all three in one pass
over the schema; the single-measure functions are there for readability in tests
and summaries.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Keywords whose value is a schema (or a list of schemas) nested at the level they sit on.
_NESTED = ("items", "additionalProperties", "allOf", "anyOf", "oneOf", "not")


def compact_json(obj: Any) -> str:
    """Canonical JSON: sorted keys, no spaces (what sizes and hashes are computed on).

    Values JSON has no type for (a YAML timestamp) are written as their string, as
    sigs.k8s.io/yaml turns them into strings before the API server sees them."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def json_bytes(obj: Any) -> int:
    """Bytes of ``obj`` as compact UTF-8 JSON (same as ``len(compact_json(obj).encode())``; key order
    does not change a size, so no sort)."""
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8"))


@dataclass(frozen=True)
class SchemaMeasures:
    """``properties``: named properties, counted recursively; ``depth``: levels of named properties
    (0 without properties, 1 for a flat object); ``bytes``: compact JSON size."""

    properties: int
    depth: int
    bytes: int


def _count_and_depth(schema: Any) -> tuple[int, int]:
    if isinstance(schema, list):
        count = depth = 0
        for s in schema:
            c, d = _count_and_depth(s)
            count += c
            depth = max(depth, d)
        return count, depth
    if not isinstance(schema, Mapping):
        return 0, 0
    count = depth = 0
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and properties:
        count = len(properties)
        inner = 0
        for p in properties.values():
            c, d = _count_and_depth(p)
            count += c
            inner = max(inner, d)
        depth = 1 + inner
    for key in _NESTED:
        if key in schema:
            c, d = _count_and_depth(schema[key])
            count += c
            depth = max(depth, d)
    return count, depth


def measure_schema(schema: Any) -> SchemaMeasures:
    """Properties, depth and bytes of ``schema`` (``None``: all zero)."""
    if schema is None:
        return SchemaMeasures(0, 0, 0)
    properties, depth = _count_and_depth(schema)
    return SchemaMeasures(properties, depth, json_bytes(schema))


def count_properties(schema: Any) -> int:
    """Number of named properties in a JSON schema, counted recursively (items, additionalProperties, ...)."""
    return _count_and_depth(schema)[0]


def schema_depth(schema: Any) -> int:
    """Levels of named properties in a JSON schema: 0 without properties, 1 for a flat object;
    arrays' ``items`` and ``additionalProperties`` count as the level they sit on."""
    return _count_and_depth(schema)[1]


_VALIDATIONS = "x-kubernetes-validations"


def cel_rules(schema: Any) -> int:
    """CEL validation rules (``x-kubernetes-validations`` entries) anywhere in an OpenAPI v3 schema: what
    kube-apiserver compiles for each served version (Crossplane's upjet providers of 2026 carry ~2 per CRD)."""
    if isinstance(schema, list):
        return sum(cel_rules(s) for s in schema)
    if not isinstance(schema, Mapping):
        return 0
    rules = schema.get(_VALIDATIONS)
    own = len(rules) if isinstance(rules, list) else 0
    return own + sum(cel_rules(v) for k, v in schema.items() if k != _VALIDATIONS and isinstance(v, (Mapping, list)))


def description_bytes(schema: Any) -> int:
    """Characters of ``description`` text anywhere in an OpenAPI v3 schema (UTF-8 bytes): what a schema holds
    beyond its structure, in every copy kube-apiserver keeps of it (Crossplane's upjet providers of 2026 carry
    ~19 KB per CRD, the sweep's generated schemas none)."""
    if isinstance(schema, list):
        return sum(description_bytes(s) for s in schema)
    if not isinstance(schema, Mapping):
        return 0
    text = schema.get("description")
    own = len(text.encode()) if isinstance(text, str) else 0
    return own + sum(description_bytes(v) for v in schema.values() if isinstance(v, (Mapping, list)))
