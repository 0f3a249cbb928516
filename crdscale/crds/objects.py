"""Objects of a requested size and shape: custom resources of a CRD, and ConfigMaps/Secrets of the same bytes.

Pure builders (dicts in, dicts out): a custom resource's compact JSON is within
a few bytes of the size asked for, whatever its shape:

- ``flat``: string fields side by side (a map of strings);
- ``nested``: maps of maps, four levels deep, strings at the leaves;
- ``list``: a list of small maps (``name``/``value`` pairs), as conditions or ports are;
- ``schema``: values that follow the CRD's own ``openAPIV3Schema`` (strings sized to fit).

The first three sit under :data:`PAYLOAD_FIELD`, which :func:`with_payload_field` declares
in a CRD's schema with ``x-kubernetes-preserve-unknown-fields`` (the server would prune
undeclared fields otherwise). The control kinds (:data:`CONTROL_KINDS`) carry the same
bytes in ``data``: the built-ins #124680 compares custom resources with.

The size is what the client sends; the server adds ``uid``, ``resourceVersion``,
``creationTimestamp`` and ``managedFields`` (the stored size is recorded beside it).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from crdscale.crds.generate import ETCD_REQUEST_LIMIT_BYTES
from crdscale.errors import UsageError

SHAPES = ("flat", "nested", "list", "schema")
APPLY_MODES = ("create", "server-side-apply")
CONTROL_KINDS = ("configmaps", "secrets")
# The kind name events and analysis use for the custom resources of every CRD of a run.
CUSTOM_RESOURCES = "customresources"
OBJECT_KINDS = (CUSTOM_RESOURCES, *CONTROL_KINDS)
# The field the flat, nested and list shapes fill; declared by with_payload_field.
PAYLOAD_FIELD = "payload"
# Strings of the flat/nested/list shapes are about this long, so the field count grows with the size.
FIELD_CHARS = 64
# The field manager of server-side apply and of creates (it names crdscale in managedFields).
FIELD_MANAGER = "crdscale"
# managedFields = [{}] on a create tells the server to record none (see the module doc).
NO_MANAGED_FIELDS: list[dict] = [{}]
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def json_bytes(obj: Any) -> int:
    """Bytes of the compact JSON of ``obj`` (what a create request carries)."""
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def filler(length: int, salt: int = 0) -> str:
    """``length`` characters, varied by ``salt`` so objects do not repeat each other byte for byte."""
    if length <= 0:
        return ""
    start = salt % len(_ALPHABET)
    unit = _ALPHABET[start:] + _ALPHABET[:start]
    return (unit * (length // len(unit) + 1))[:length]


def check_size(size: int, what: str = "objects.bytes") -> int:
    """``size`` when an object of that many JSON bytes can be stored; :class:`UsageError` (one line) otherwise."""
    if size <= 0:
        raise UsageError(f"'{what}' must be > 0, got {size}")
    if size > ETCD_REQUEST_LIMIT_BYTES:
        raise UsageError(
            f"'{what}' = {size} is over etcd's {ETCD_REQUEST_LIMIT_BYTES} byte request limit "
            "(--max-request-bytes, 1.5 MiB): the API server could not store such an object"
        )
    return size


def with_payload_field(crd: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``crd`` whose every version's schema declares :data:`PAYLOAD_FIELD` as an object
    that keeps unknown fields, so the flat, nested and list shapes are stored, not pruned."""
    out = copy.deepcopy(dict(crd))
    for version in out["spec"]["versions"]:
        schema = version.setdefault("schema", {}).setdefault("openAPIV3Schema", {"type": "object"})
        schema.setdefault("properties", {})[PAYLOAD_FIELD] = {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
        }
    return out


def storage_schema(crd: Mapping[str, Any]) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of ``crd``'s storage version (the one its objects are written in)."""
    versions = crd["spec"]["versions"]
    version = next((v for v in versions if v.get("storage")), versions[-1])
    return (version.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"}


def api_version(crd: Mapping[str, Any]) -> str:
    versions = crd["spec"]["versions"]
    version = next((v for v in versions if v.get("storage")), versions[-1])
    return f"{crd['spec']['group']}/{version['name']}"


# --------------------------------------------------------------------------
# Shapes: each builds a payload whose strings are ``chars`` long; the sizer solves for ``chars``.
# --------------------------------------------------------------------------


def _flat(fields: int, chars: int, salt: int) -> dict:
    return {f"f{i:05d}": filler(chars, salt + i) for i in range(fields)}


def _nested(fields: int, chars: int, salt: int) -> dict:
    # Four levels of maps, fanning out by up to 4, with the strings at the leaves.
    root: dict = {}
    for i in range(fields):
        node = root
        for level, width in enumerate((4, 4, 4)):
            node = node.setdefault(f"l{level}n{(i // (4 ** (2 - level))) % width}", {})
        node[f"f{i:05d}"] = filler(chars, salt + i)
    return root


def _list(fields: int, chars: int, salt: int) -> dict:
    return {"items": [{"name": f"item-{i:05d}", "value": filler(chars, salt + i)} for i in range(fields)]}


_PAYLOADS = {"flat": _flat, "nested": _nested, "list": _list}


def _schema_value(schema: Mapping[str, Any], chars: int, salt: int, room: list[int], depth: int = 0) -> Any:
    """A value valid for ``schema`` with every string ``chars`` long (formats and enums respected),
    holding at most ``room[0]`` properties (the count is used up as they are placed)."""
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        out = {}
        required = set(schema.get("required") or ())
        # Required properties first, so a small object still validates.
        ordered = sorted((schema.get("properties") or {}).items(), key=lambda kv: (kv[0] not in required, kv[0]))
        for i, (name, sub) in enumerate(ordered):
            if depth == 0 and name in ("apiVersion", "kind", "metadata", "status"):
                continue
            if room[0] <= 0:
                break
            room[0] -= 1
            out[name] = _schema_value(sub, chars, salt + i, room, depth + 1)
        return out
    if kind == "array":
        return [_schema_value(schema.get("items") or {"type": "string"}, chars, salt, room, depth + 1)]
    if kind == "integer":
        return salt % 1000
    if kind == "number":
        return 0.5
    if kind == "boolean":
        return salt % 2 == 0
    if schema.get("format") == "date-time":
        return "2026-01-01T00:00:00Z"
    return filler(chars, salt)


def _required_value(schema: Mapping[str, Any]) -> Any:
    """The least value ``schema`` accepts: its required properties only, each at its least."""
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {name: _required_value(props.get(name) or {}) for name in schema.get("required") or () if name in props}
    return _schema_value(schema, 1, 0, [0]) if kind != "array" else []


def _schema_properties(schema: Mapping[str, Any]) -> int:
    return sum(1 + _schema_properties(sub) for sub in (schema.get("properties") or {}).values())


def _count_strings(value: Any) -> int:
    if isinstance(value, str):
        return 1
    if isinstance(value, dict):
        return sum(_count_strings(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count_strings(v) for v in value)
    return 0


def _last_string(value: Any) -> tuple[Any, Any] | None:
    """``(container, key)`` of the last free-length string in ``value`` (depth first), or None."""
    found = None
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        if isinstance(item, str) and not item.startswith("2026-"):
            found = (value, key)
        else:
            found = _last_string(item) or found
    return found


def _fit(build, size: int, what: str) -> dict:
    """The object ``build(chars)`` gives, its strings sized so the whole is ``size`` JSON bytes (±2).

    Sizes are linear in ``chars`` (each string grows by one byte per character), so two
    builds solve for it; the last string absorbs the rounding.
    """
    small = build(1)
    base = json_bytes(small)
    per_char = json_bytes(build(2)) - base
    if per_char <= 0:
        raise UsageError(f"{what}: the shape has no string field to size")
    chars = max(1, 1 + (size - base) // per_char)
    obj = build(chars)
    slot = _last_string(obj)
    if slot is None:
        raise UsageError(f"{what}: the shape has no string field to size")
    container, key = slot
    missing = size - json_bytes(obj)
    container[key] = filler(max(1, len(container[key]) + missing), len(container[key]))
    got = json_bytes(obj)
    if abs(got - size) > max(2, size // 100):
        raise UsageError(f"{what}: cannot build an object of {size} bytes (smallest: {base} bytes)")
    return obj


def _fields_for(size: int) -> int:
    # About one string of FIELD_CHARS per FIELD_CHARS+12 bytes (key and quotes), at least one.
    return max(1, size // (FIELD_CHARS + 12))


def custom_resource(
    crd: Mapping[str, Any],
    name: str,
    *,
    namespace: str | None,
    labels: Mapping[str, str],
    size: int,
    shape: str = "flat",
    salt: int = 0,
) -> dict[str, Any]:
    """A custom resource of ``crd`` named ``name`` whose compact JSON is ``size`` bytes (±1 %).

    ``shape`` is one of :data:`SHAPES`; flat, nested and list fill :data:`PAYLOAD_FIELD` (see
    :func:`with_payload_field`), schema fills the CRD's own properties. ``namespace`` only for
    namespaced CRDs. Raises :class:`UsageError` for an unknown shape or an impossible size.
    """
    if shape not in SHAPES:
        raise UsageError(f"'objects.shape' must be one of {', '.join(SHAPES)}, got {shape!r}")
    metadata: dict[str, Any] = {"name": name, "labels": dict(labels)}
    if namespace:
        metadata["namespace"] = namespace
    head = {"apiVersion": api_version(crd), "kind": crd["spec"]["names"]["kind"], "metadata": metadata}
    if shape == "schema":
        schema = storage_schema(crd)
        # As many of the schema's properties as fit (a small object cannot hold every one of a
        # big schema's fields): the most whose 1-character strings stay under the size.
        low, high = 1, max(1, _schema_properties(schema))
        while low < high:
            mid = (low + high + 1) // 2
            if json_bytes({**head, **_schema_value(schema, 1, salt, [mid])}) + 8 <= size:
                low = mid
            else:
                high = mid - 1

        def build(chars: int) -> dict:
            return {**copy.deepcopy(head), **_schema_value(schema, chars, salt, [low])}

    else:
        payload = _PAYLOADS[shape]
        fields = _fields_for(size)
        # What the CRD's schema requires (a provider CRD's spec.forProvider), at its least.
        required = {
            k: v for k, v in _required_value(storage_schema(crd)).items() if k not in ("apiVersion", "kind", "metadata")
        }
        required.pop(PAYLOAD_FIELD, None)

        def build(chars: int) -> dict:
            return {**copy.deepcopy(head), **copy.deepcopy(required), PAYLOAD_FIELD: payload(fields, chars, salt)}

    return _fit(build, size, f"{shape} {crd['spec']['names']['kind']}")


def config_map(name: str, *, namespace: str, labels: Mapping[str, str], size: int, salt: int = 0) -> dict[str, Any]:
    """A ConfigMap whose compact JSON is ``size`` bytes: the data in string keys of ``data``,
    as the flat shape holds them."""
    head = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name, namespace, labels)}
    fields = _fields_for(size)
    return _fit(lambda chars: {**copy.deepcopy(head), "data": _flat(fields, chars, salt)}, size, "ConfigMap")


def secret(name: str, *, namespace: str, labels: Mapping[str, str], size: int, salt: int = 0) -> dict[str, Any]:
    """A Secret whose compact JSON is ``size`` bytes as sent (``stringData``: the server stores it
    base64-encoded in ``data``, 4/3 of these bytes)."""
    head = {"apiVersion": "v1", "kind": "Secret", "metadata": _meta(name, namespace, labels), "type": "Opaque"}
    fields = _fields_for(size)
    return _fit(lambda chars: {**copy.deepcopy(head), "stringData": _flat(fields, chars, salt)}, size, "Secret")


def _meta(name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": dict(labels)}


def control_object(
    kind: str, name: str, *, namespace: str, labels: Mapping[str, str], size: int, salt: int = 0
) -> dict[str, Any]:
    """A control object of ``kind`` (one of :data:`CONTROL_KINDS`) of ``size`` JSON bytes."""
    builders = {"configmaps": config_map, "secrets": secret}
    if kind not in builders:
        raise UsageError(f"'objects.control' entries must be one of {', '.join(CONTROL_KINDS)}, got {kind!r}")
    return builders[kind](name, namespace=namespace, labels=labels, size=size, salt=salt)


def without_managed_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` asking the server to record no ``managedFields`` (``[{}]`` resets them)."""
    out = dict(obj)
    out["metadata"] = {**obj["metadata"], "managedFields": copy.deepcopy(NO_MANAGED_FIELDS)}
    return out
