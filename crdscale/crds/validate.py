"""What kube-apiserver would say to a CustomResourceDefinition, said before anything is sent.

kube-apiserver refuses a CRD in two stages, and :func:`rejection` follows both, in their words:

1. **Decoding** (HTTP 400): a field of the wrong JSON type cannot be read into its Go struct
   (``served: "yes"``, a schema that is a string, ``properties`` that is a list, ``type: 5``):
   ``json: cannot unmarshal string into Go struct field CustomResourceDefinitionVersion.spec.versions.served
   of type bool``. :data:`_SPEC`, :data:`_VERSION` and :data:`_SCHEMA` below declare the Go types of the
   fields crdscale reads (k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1/types*.go).
2. **Validation** (HTTP 422, ``ValidateCustomResourceDefinition`` in
   k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go): the name is
   ``spec.names.plural + "." + spec.group``; the group a DNS-1123 subdomain with a dot; the scope
   Cluster or Namespaced; version names unique DNS-1035 labels, exactly one of them the storage
   version; names (plural, singular, short names, categories) DNS-1035 labels; and every version's
   schema structural: present, ``type: object`` at the root, a known ``type`` on every specified
   field (unless it is int-or-string or keeps unknown fields), ``items`` for arrays, not both
   ``properties`` and ``additionalProperties``.

Only rules whose refusal is certain are here: a CRD these pass may still be refused for a rule
not covered (CEL rules, defaults, conversion webhooks), never the other way round. The wording
was checked against kube-apiserver v1.37.1 (a dry-run create of each case); field paths name the
version the user wrote (``spec.versions[0].schema...``) where the server, having moved a schema
shared by every version to the top level, may say ``spec.validation...``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

# k8s.io/apimachinery/pkg/util/validation: the regexes and messages of IsDNS1123Subdomain and IsDNS1035Label.
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN_MAX = 253
_DNS1035_LABEL_MAX = 63
_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character"
)
_SCHEMA_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_SCOPES = ("Cluster", "Namespaced")

# Go types of the fields read, as encoding/json names them in its errors. A tuple: the JSON kinds a
# custom UnmarshalJSON takes (JSONSchemaPropsOrBool: a bool or a schema; OrArray: a schema or a list).
STRING, BOOL, INT64, INT32, FLOAT64 = "string", "bool", "int64", "int32", "float64"
STRINGS = "[]string"
_SCHEMA_REF = "v1.JSONSchemaProps"
_SCHEMA_MAP = "map[string]v1.JSONSchemaProps"
_SCHEMA_LIST = "[]v1.JSONSchemaProps"
_OR_BOOL = "v1.JSONSchemaPropsOrBool"
_OR_ARRAY = "v1.JSONSchemaPropsOrArray"

_META = {"name": STRING, "generateName": STRING, "namespace": STRING}
_NAMES = {
    "plural": STRING,
    "singular": STRING,
    "shortNames": STRINGS,
    "kind": STRING,
    "listKind": STRING,
    "categories": STRINGS,
}
_COLUMN = {"name": STRING, "type": STRING, "format": STRING, "description": STRING, "priority": INT32}
_COLUMN.update({"jsonPath": STRING})
_VERSION = {
    "name": STRING,
    "served": BOOL,
    "storage": BOOL,
    "deprecated": BOOL,
    "deprecationWarning": STRING,
    "schema": "v1.CustomResourceValidation",
    "subresources": "v1.CustomResourceSubresources",
    "additionalPrinterColumns": "[]v1.CustomResourceColumnDefinition",
    "selectableFields": "[]v1.SelectableField",
}
_SPEC = {
    "group": STRING,
    "names": "v1.CustomResourceDefinitionNames",
    "scope": STRING,
    "versions": "[]v1.CustomResourceDefinitionVersion",
    "conversion": "v1.CustomResourceConversion",
    "preserveUnknownFields": BOOL,
}
_SCHEMA = {
    "id": STRING,
    "$schema": STRING,
    "$ref": STRING,
    "description": STRING,
    "type": STRING,
    "format": STRING,
    "title": STRING,
    "maximum": FLOAT64,
    "exclusiveMaximum": BOOL,
    "minimum": FLOAT64,
    "exclusiveMinimum": BOOL,
    "maxLength": INT64,
    "minLength": INT64,
    "pattern": STRING,
    "maxItems": INT64,
    "minItems": INT64,
    "uniqueItems": BOOL,
    "multipleOf": FLOAT64,
    "enum": "[]v1.JSON",
    "maxProperties": INT64,
    "minProperties": INT64,
    "required": STRINGS,
    "items": _OR_ARRAY,
    "allOf": _SCHEMA_LIST,
    "oneOf": _SCHEMA_LIST,
    "anyOf": _SCHEMA_LIST,
    "not": _SCHEMA_REF,
    "properties": _SCHEMA_MAP,
    "additionalProperties": _OR_BOOL,
    "patternProperties": _SCHEMA_MAP,
    "additionalItems": _OR_BOOL,
    "definitions": _SCHEMA_MAP,
    "nullable": BOOL,
    "x-kubernetes-preserve-unknown-fields": BOOL,
    "x-kubernetes-embedded-resource": BOOL,
    "x-kubernetes-int-or-string": BOOL,
    "x-kubernetes-list-map-keys": STRINGS,
    "x-kubernetes-list-type": STRING,
    "x-kubernetes-map-type": STRING,
    "x-kubernetes-validations": "v1.ValidationRules",
}
# The JSON kinds each Go type takes (null is taken by every one: encoding/json leaves the field unset).
_TAKES: dict[str, tuple[type, ...]] = {
    STRING: (str,),
    BOOL: (bool,),
    INT64: (int,),
    INT32: (int,),
    FLOAT64: (int, float),
    STRINGS: (list,),
    _OR_BOOL: (bool, dict),
    _OR_ARRAY: (dict, list),
    "v1.ValidationRules": (list,),  # []ValidationRule
}


_UNDECODABLE = 'CustomResourceDefinition in version "v1" cannot be handled as a CustomResourceDefinition: '


class Rejected(Exception):
    """What kube-apiserver would answer, in its words (one line)."""


def _kind(value: Any) -> str:
    """How encoding/json names a JSON value's kind in ``cannot unmarshal <kind> into ...``."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _takes(go_type: str, value: Any) -> bool:
    """Whether encoding/json reads ``value`` (not null) into a field of ``go_type``."""
    takes = _TAKES.get(go_type, (list,) if go_type.startswith("[]") else (dict,))
    if isinstance(value, bool):
        return bool in takes
    if go_type in (INT64, INT32) and isinstance(value, float):
        return value.is_integer()  # YAML's 1.0 is JSON's 1.0, which an int64 takes
    return isinstance(value, takes)


def _unmarshal(value: Any, struct: str, path: str, go_type: str) -> Rejected:
    number = f" {value}" if go_type in (INT64, INT32) and isinstance(value, float) else ""
    return Rejected(
        f"{_UNDECODABLE}json: cannot unmarshal {_kind(value)}{number} into Go struct field {struct}.{path} of type {go_type}"
    )


def _decode_fields(obj: Mapping, fields: Mapping[str, str], struct: str, path: str) -> None:
    """Each declared field of ``obj`` of a JSON kind its Go type takes; nested structs decoded in turn."""
    for name, go_type in fields.items():
        value = obj.get(name)
        if value is None:
            continue
        where = f"{path}.{name}" if path else name
        if go_type == _OR_ARRAY and not isinstance(value, (dict, list)):
            continue  # JSONSchemaPropsOrArray reads any other value as unset ("items: Required value" then)
        if go_type == _OR_BOOL and not isinstance(value, (bool, dict)):
            raise Rejected(f"{_UNDECODABLE}boolean or JSON schema expected")  # its own UnmarshalJSON's words
        if not _takes(go_type, value):
            raise _unmarshal(value, struct, where, go_type)
        if go_type == STRINGS:
            for item in value:
                if item is not None and not isinstance(item, str):
                    raise _unmarshal(item, struct, where, STRING)


def _decode_schema(schema: Any, path: str) -> None:
    """A JSONSchemaProps and every schema inside it, decoded as encoding/json would (map keys are not in
    its paths: ``...openAPIV3Schema.properties.properties.type``)."""
    _decode_fields(schema, _SCHEMA, "JSONSchemaProps", path)
    for name in ("properties", "patternProperties", "definitions"):
        for sub in (schema.get(name) or {}).values():
            _decode_child(sub, "JSONSchemaProps", f"{path}.{name}", _SCHEMA_REF)
    for name in ("allOf", "oneOf", "anyOf"):
        for sub in schema.get(name) or []:
            _decode_child(sub, "JSONSchemaProps", f"{path}.{name}", _SCHEMA_REF)
    for name in ("not", "additionalProperties", "additionalItems"):
        sub = schema.get(name)
        if isinstance(sub, dict):
            _decode_schema(sub, f"{path}.{name}")
    items = schema.get("items")
    for sub in items if isinstance(items, list) else [items] if isinstance(items, dict) else []:
        _decode_child(sub, "JSONSchemaProps", f"{path}.items", _SCHEMA_REF)


def _decode_child(value: Any, struct: str, path: str, go_type: str) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise _unmarshal(value, struct, path, go_type)
    _decode_schema(value, path)


def _decode(crd: Mapping) -> None:
    """Stage 1: :class:`Rejected` for the first field of a JSON kind its Go field cannot take."""
    _decode_fields(
        crd, {"metadata": "v1.ObjectMeta", "spec": "v1.CustomResourceDefinitionSpec"}, "CustomResourceDefinition", ""
    )
    _decode_fields(crd.get("metadata") or {}, _META, "ObjectMeta", "metadata")
    spec = crd.get("spec") or {}
    _decode_fields(spec, _SPEC, "CustomResourceDefinitionSpec", "spec")
    _decode_fields(spec.get("names") or {}, _NAMES, "CustomResourceDefinitionNames", "spec.names")
    for version in spec.get("versions") or []:
        if version is None:
            continue
        if not isinstance(version, dict):
            raise _unmarshal(
                version, "CustomResourceDefinitionSpec", "spec.versions", "v1.CustomResourceDefinitionVersion"
            )
        _decode_fields(version, _VERSION, "CustomResourceDefinitionVersion", "spec.versions")
        for column in version.get("additionalPrinterColumns") or []:
            if isinstance(column, dict):
                _decode_fields(
                    column, _COLUMN, "CustomResourceColumnDefinition", "spec.versions.additionalPrinterColumns"
                )
        schema = version.get("schema") or {}
        _decode_fields(schema, {"openAPIV3Schema": _SCHEMA_REF}, "CustomResourceValidation", "spec.versions.schema")
        if isinstance(schema.get("openAPIV3Schema"), dict):
            _decode_schema(schema["openAPIV3Schema"], "spec.versions.schema.openAPIV3Schema")


def _quote(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _subdomain(value: str) -> str | None:
    if len(value) > _DNS1123_SUBDOMAIN_MAX:
        return f"must be no more than {_DNS1123_SUBDOMAIN_MAX} characters"
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        return f"{_SUBDOMAIN_MESSAGE} (e.g. 'example.com', regex used for validation is '{_DNS1123_SUBDOMAIN.pattern}')"
    return None


def _label(value: str) -> str | None:
    if len(value) > _DNS1035_LABEL_MAX:
        return f"must be no more than {_DNS1035_LABEL_MAX} characters"
    if not _DNS1035_LABEL.fullmatch(value):
        return (
            f"{_LABEL_MESSAGE} (e.g. 'my-name', or 'abc-123', regex used for validation is '{_DNS1035_LABEL.pattern}')"
        )
    return None


def _invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {_quote(value)}: {detail}"


def _structural(
    schema: Mapping, path: str, errors: list[str], *, root: bool = False, array_items: bool = False
) -> None:
    """The structural-schema rules whose refusal is certain, for ``schema`` and the schemas below it."""
    kind = schema.get("type")
    loose = schema.get("x-kubernetes-int-or-string") or schema.get("x-kubernetes-preserve-unknown-fields")
    if kind in (None, ""):
        if root:
            errors.append(f"{path}.type: Required value: must not be empty at the root")
        elif not loose:
            what = "array items" if array_items else "object fields"
            errors.append(f"{path}.type: Required value: must not be empty for specified {what}")
    elif kind not in _SCHEMA_TYPES:
        supported = ", ".join(_quote(t) for t in _SCHEMA_TYPES)
        errors.append(f"{path}.type: Unsupported value: {_quote(kind)}: supported values: {supported}")
    elif root and kind != "object":
        errors.append(_invalid(f"{path}.type", kind, "must be object at the root"))
    if kind == "array" and not isinstance(schema.get("items"), (dict, list)):
        errors.append(f"{path}.items: Required value: must be specified")
    properties = schema.get("properties") or {}
    if properties and isinstance(schema.get("additionalProperties"), dict):
        errors.append(
            f"{path}.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        )
    for name, sub in properties.items():
        if isinstance(sub, dict):
            _structural(sub, f"{path}.properties[{name}]", errors)
    items = schema.get("items")
    if isinstance(items, list):
        errors.append(f"{path}.items: Forbidden: items must be a schema object and not an array")
    elif isinstance(items, dict):
        _structural(items, f"{path}.items", errors, array_items=True)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        _structural(extra, f"{path}.additionalProperties", errors)


def _validate(crd: Mapping) -> list[str]:
    """Stage 2: ValidateCustomResourceDefinition's errors for the rules covered, in its order."""
    errors: list[str] = []
    metadata, spec = crd.get("metadata") or {}, crd.get("spec") or {}
    names = spec.get("names") or {}
    group, plural = spec.get("group") or "", names.get("plural") or ""
    name = metadata.get("name") or ""
    if not name:
        errors.append("metadata.name: Required value: name or generateName is required")
    else:
        problem = _subdomain(name)
        if problem:
            errors.append(_invalid("metadata.name", name, problem))
        if name != f"{plural}.{group}":
            errors.append(_invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    if not group:
        errors.append("spec.group: Required value")
    elif problem := _subdomain(group):
        errors.append(_invalid("spec.group", group, problem))
    elif "." not in group:
        errors.append(_invalid("spec.group", group, "should be a domain with at least one dot"))
    scope = spec.get("scope") or ""
    if not scope:
        errors.append("spec.scope: Required value")
    elif scope not in _SCOPES:
        errors.append(f'spec.scope: Unsupported value: {_quote(scope)}: supported values: "Cluster", "Namespaced"')
    versions = [v for v in spec.get("versions") or [] if isinstance(v, dict)]
    seen: set[str] = set()
    twice: list[str] = []
    for i, version in enumerate(versions):
        vname = version.get("name") or ""
        if vname in seen:
            twice.append(vname)
        seen.add(vname)
        if problem := _label(vname):
            errors.append(_invalid(f"spec.versions[{i}].name", vname, problem))
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        where = f"spec.versions[{i}].schema.openAPIV3Schema"
        if schema is None:
            errors.append(f"{where}: Required value")
        else:
            _structural(schema, where, errors, root=True)
    if twice:
        errors.append(f"spec.versions: Invalid value: {_quote(twice[0])} twice: must contain unique version names")
    storage = [v.get("name") for v in versions if v.get("storage")]
    if len(storage) != 1:
        which = f"{len(storage)} marked ({', '.join(map(str, storage))})" if storage else "none marked"
        errors.append(f"spec.versions: Invalid value: {which}: must have exactly one version marked as storage version")
    if not plural:
        errors.append("spec.names.plural: Required value")
    if not names.get("kind"):
        errors.append("spec.names.kind: Required value")
    for field in ("plural", "singular"):
        value = names.get(field)
        if value and (problem := _label(value)):
            errors.append(_invalid(f"spec.names.{field}", value, problem))
    kind = names.get("kind") or ""
    if kind and (problem := _label(kind.lower())):
        errors.append(_invalid("spec.names.kind", kind, problem))
    if kind and kind == names.get("listKind"):
        errors.append(_invalid("spec.names.listKind", kind, "kind and listKind may not be the same"))
    for field in ("shortNames", "categories"):
        for i, value in enumerate(names.get(field) or []):
            if value is not None and (problem := _label(value)):
                errors.append(_invalid(f"spec.names.{field}[{i}]", value, problem))
    return errors


def rejection(crd: Mapping[str, Any]) -> str | None:
    """What kube-apiserver would answer to creating ``crd`` (an ``apiextensions.k8s.io/v1`` CRD as a dict),
    in its words, or ``None`` when the rules covered here let it through. Several validation errors
    are given as the first and how many more (the server lists them all)."""
    try:
        _decode(crd)
    except Rejected as err:
        return str(err)
    errors = _validate(crd)
    if not errors:
        return None
    name = (crd.get("metadata") or {}).get("name") or ""
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f'CustomResourceDefinition.apiextensions.k8s.io "{name}" is invalid: {errors[0]}{more}'
