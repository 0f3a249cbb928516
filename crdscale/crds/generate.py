"""Synthetic CRD sets: a superset of ``apigen generate`` from ulucinar/terrajet-scale.

``apigen generate -g G -c C --property-count P`` spreads C cluster-scoped CRDs
round-robin over G API groups (one version, ``v1alpha1``) with schemas of P
properties of random types (``--property-count 0``: 1..100 per CRD). The same
call here is ``generate_crds(GeneratorParams(crd_count=C, group_count=G,
property_count=P))``. On top of that, :class:`GeneratorParams` controls what
makes provider CRDs heavy: several versions repeating the schema, nesting
depth, a mix of property types, description text, scope, printer columns,
categories and the ``spec.forProvider``/``status.atProvider`` layout of
Crossplane providers.

Everything is pure and deterministic for a given seed: the same parameters
give byte-identical CRDs, hence the same set hash in run manifests.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from crdscale.errors import UsageError
from crdscale.units import fmt_bytes

SCALAR_TYPES = ("integer", "string", "boolean", "number")
PROPERTY_TYPES = ("object", "array") + SCALAR_TYPES
# apigen draws uniformly from these five (no arrays).
APIGEN_TYPE_WEIGHTS: tuple[tuple[str, float], ...] = tuple((t, 1.0) for t in ("object",) + SCALAR_TYPES)
# Roughly what terraform-derived provider schemas look like: mostly strings,
# many nested blocks (arrays of objects in upjet), some numbers and flags.
PROVIDER_TYPE_WEIGHTS: tuple[tuple[str, float], ...] = (
    ("string", 5.0),
    ("object", 2.0),
    ("array", 1.5),
    ("boolean", 1.0),
    ("number", 1.0),
    ("integer", 0.5),
)
SCOPES = ("Cluster", "Namespaced", "mixed")
SHAPES = ("flat", "provider")
DEFAULT_GROUP_SUFFIX = "crdscale.example.org"
APIGEN_MAX_RANDOM_PROPERTIES = 100

# Columns every Crossplane managed resource prints, in provider order.
PROVIDER_PRINTER_COLUMNS: tuple[dict[str, Any], ...] = (
    {"name": "READY", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"},
    {"name": "SYNCED", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Synced')].status"},
    {"name": "EXTERNAL-NAME", "type": "string", "jsonPath": ".metadata.annotations.crossplane\\.io/external-name"},
    {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
)

_ADJECTIVES = (
    "admiring adoring agile amazing angry awesome blissful bold brave busy calm clever cool "
    "crazy dazzling determined eager ecstatic elastic elated elegant epic fervent festive "
    "focused friendly frosty gallant gifted goofy gracious happy hardcore heuristic hopeful "
    "hungry infallible inspiring jolly jovial keen kind laughing loving lucid magical modest "
    "musing mystifying naughty nervous nice nifty nostalgic objective optimistic peaceful "
    "pedantic pensive practical priceless quirky quizzical relaxed reverent romantic sad "
    "serene sharp silly sleepy stoic strange stupefied suspicious sweet tender thirsty "
    "trusting unruffled upbeat vibrant vigilant vigorous wizardly wonderful xenodochial "
    "youthful zealous zen"
).split()
_NOUNS = (
    "address alarm alias archive backup bucket cache certificate channel cluster connector "
    "container database deployment disk domain endpoint engine filesystem firewall function "
    "gateway grant graph group identity image instance key listener loadbalancer mesh monitor "
    "namespace network node notebook pipeline policy pool project queue record registry "
    "replica repository role route rule schedule secret server service share snapshot stack "
    "stream subnet subscription table target template topic trigger user vault volume "
    "warehouse webhook workflow workspace zone"
).split()
_LOREM = (
    "the resource identifier of the referenced object this field is required when creating "
    "a new instance and cannot be changed afterwards value must be unique within the region "
    "and account defaults to the provider configuration if not set see the upstream api "
    "documentation for the list of allowed values changing this forces a new resource to be "
    "created configuration block for the settings of the managed service"
).split()


_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
# The longest ``plural.adjective.noun.`` a generated CRD's name can have before the group suffix (a numeric
# suffix of up to 6 digits once the word pairs run out, see _Namer).
_LONGEST_NAME_WITHOUT_SUFFIX = (
    (max(map(len, _ADJECTIVES)) + max(map(len, _NOUNS)) + 6 + 1)  # plural: adjectivenoun + digits + s
    + 1
    + (max(map(len, _ADJECTIVES)) + 1 + max(map(len, _NOUNS)) + 6 + 1)  # group: adjective.noun(+digits).
)


@dataclass(frozen=True)
class GeneratorParams:
    """What to generate. Defaults reproduce ``apigen generate``.

    Attributes:
        crd_count: number of CRDs (apigen ``-c``).
        group_count: number of API groups; CRD ``i`` goes to group ``i % group_count`` (apigen ``-g``).
        property_count: generated properties per CRD schema, nested ones included
            (apigen ``--property-count``); 0 draws 1..100 per CRD like apigen.
        versions: versions per CRD, all served, the last one the storage version;
            each repeats the same schema, as provider CRDs do.
        max_depth: levels of properties; 1 means no nested objects.
        type_weights: relative weights of property types (``object``, ``array``,
            ``integer``, ``string``, ``boolean``, ``number``).
        description_length: characters of description text on every property (0: none).
        scope: ``Cluster``, ``Namespaced`` or ``mixed`` (alternating, starting with Cluster).
        printer_columns: additional printer columns per version; the first four are
            the Crossplane ones (READY, SYNCED, EXTERNAL-NAME, AGE), further ones
            print top-level generated scalar properties.
        categories: ``spec.names.categories`` of every CRD.
        shape: ``flat`` (properties at the schema root, like apigen) or ``provider``
            (``spec.forProvider`` with the properties, repeated under
            ``status.atProvider``, plus the fixed Crossplane fields and conditions).
        group_suffix: DNS suffix of generated groups (apigen ``--group-suffix``).
        seed: seed of the ``random.Random`` that draws every name and type.
        cel_rules: CEL validation rules (``x-kubernetes-validations``) on each version's ``spec``, shaped as
            Crossplane's upjet providers write them ("spec.forProvider.P is a required parameter", a check of
            ``managementPolicies``, ``forProvider`` and ``initProvider``), one per top-level ``forProvider``
            property up to this many; ``spec`` then gains ``managementPolicies`` and an ``initProvider`` with
            those properties. Provider shape only. What kube-apiserver compiles per served version: real
            providers of 2026 carry ~2 per CRD, the sweep's sets none.
    """

    crd_count: int
    group_count: int
    property_count: int = 0
    versions: int = 1
    max_depth: int = 8
    type_weights: tuple[tuple[str, float], ...] = APIGEN_TYPE_WEIGHTS
    description_length: int = 0
    scope: str = "Cluster"
    printer_columns: int = 0
    categories: tuple[str, ...] = ()
    shape: str = "flat"
    group_suffix: str = DEFAULT_GROUP_SUFFIX
    seed: int = 0
    cel_rules: int = 0

    def validate(self) -> GeneratorParams:
        """Return ``self`` or raise :class:`UsageError` naming the first bad parameter."""
        if self.crd_count < 0:
            raise UsageError(f"crd count must be >= 0, got {self.crd_count}")
        if self.crd_count > 0 and self.group_count < 1:
            raise UsageError("group count must be greater than zero")
        if self.group_count > self.crd_count:
            raise UsageError(
                f"group count cannot be greater than CRD count: groups={self.group_count}, crds={self.crd_count}"
            )
        if self.property_count < 0:
            raise UsageError(f"property count must be >= 0, got {self.property_count}")
        if self.versions < 1:
            raise UsageError(f"versions must be >= 1, got {self.versions}")
        if self.max_depth < 1:
            raise UsageError(f"depth must be >= 1, got {self.max_depth}")
        if self.description_length < 0:
            raise UsageError(f"description length must be >= 0, got {self.description_length}")
        if self.cel_rules < 0:
            raise UsageError(f"CEL rules must be >= 0, got {self.cel_rules}")
        if self.cel_rules and self.shape != "provider":
            raise UsageError("CEL rules need the provider shape (they check spec.forProvider): use preset provider")
        if self.printer_columns < 0:
            raise UsageError(f"printer columns must be >= 0, got {self.printer_columns}")
        if self.scope not in SCOPES:
            raise UsageError(f"scope must be one of {', '.join(SCOPES)}, got {self.scope!r}")
        if self.shape not in SHAPES:
            raise UsageError(f"shape must be one of {', '.join(SHAPES)}, got {self.shape!r}")
        unknown = sorted({t for t, _ in self.type_weights} - set(PROPERTY_TYPES))
        if unknown:
            raise UsageError(f"unknown property type(s) {', '.join(unknown)}; known: {', '.join(PROPERTY_TYPES)}")
        if not all(math.isfinite(w) for _, w in self.type_weights) or not math.isfinite(
            sum(w for _, w in self.type_weights)
        ):
            raise UsageError("type weights must be finite numbers (and their sum too)")
        if any(w < 0 for _, w in self.type_weights) or not any(w > 0 for _, w in self.type_weights):
            raise UsageError("type weights must be >= 0 with at least one > 0")
        if not self.group_suffix or self.group_suffix.startswith(".") or self.group_suffix.endswith("."):
            raise UsageError(f"bad group suffix {self.group_suffix!r}")
        # What kube-apiserver's CRD validation would refuse, refused before generating: a group is a DNS-1123
        # subdomain and the CRD's name (plural.group) at most 253 characters; a category a DNS-1035 label.
        if not _DNS1123_SUBDOMAIN.fullmatch(self.group_suffix) or any(
            len(label) > 63 for label in self.group_suffix.split(".")
        ):
            raise UsageError(
                f"group suffix {self.group_suffix!r} is not a DNS-1123 subdomain (lower-case letters, digits, '-' "
                "and '.', each label starting and ending with a letter or digit, at most 63 characters)"
            )
        longest = _LONGEST_NAME_WITHOUT_SUFFIX + len(self.group_suffix)
        if longest > 253:
            raise UsageError(
                f"group suffix {self.group_suffix!r} is too long: a CRD's name (plural.group) could be {longest} "
                "characters, over kube-apiserver's 253"
            )
        for category in self.categories:
            if not _DNS1035_LABEL.fullmatch(category) or len(category) > 63:
                raise UsageError(
                    f"category {category!r} is not a DNS-1035 label (lower-case letters, digits and '-', starting "
                    "with a letter, ending with a letter or digit, at most 63 characters), as kube-apiserver requires"
                )
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form for run manifests."""
        data = asdict(self)
        data["type_weights"] = dict(self.type_weights)
        data["categories"] = list(self.categories)
        return data


# Named starting points; CLI flags override single fields.
PRESETS: Mapping[str, Mapping[str, Any]] = {
    "apigen": {},
    "provider": {
        "versions": 2,
        "max_depth": 4,
        "type_weights": PROVIDER_TYPE_WEIGHTS,
        "description_length": 120,
        "printer_columns": 4,
        "categories": ("crossplane", "managed"),
        "shape": "provider",
    },
}


def preset(name: str, **overrides: Any) -> GeneratorParams:
    """``GeneratorParams`` from a named preset (``apigen`` or ``provider``) with ``overrides`` applied."""
    if name not in PRESETS:
        raise UsageError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    values = {**PRESETS[name], **overrides}
    return GeneratorParams(**values).validate()


def parse_type_weights(text: str) -> tuple[tuple[str, float], ...]:
    """Parse ``"string=5,object=2,integer"`` (a bare name weighs 1) into ``type_weights``."""
    weights: list[tuple[str, float]] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        try:
            weight = float(value) if value else 1.0
        except ValueError:
            raise UsageError(f"bad type weight {part!r}: expected TYPE=NUMBER") from None
        weights.append((name.strip(), weight))
    if not weights:
        raise UsageError("empty type mix")
    return tuple(weights)


def version_names(count: int) -> list[str]:
    """``count`` version names in Kubernetes priority order: v1alpha1, v1beta1, v1, v2alpha1, ..."""
    names: list[str] = []
    major = 1
    while len(names) < count:
        names += [f"v{major}alpha1", f"v{major}beta1", f"v{major}"]
        major += 1
    return names[:count]


class _Namer:
    """Unique camel/lower-case names drawn from word lists, deterministic per rng."""

    def __init__(self, rng: random.Random):
        self._rng = rng
        self._used: set[str] = set()

    def pair(self) -> tuple[str, str]:
        # A few random draws keep names varied; a numeric suffix guarantees
        # termination once the word pairs run out (thousands of CRDs).
        for _ in range(8):
            adjective, noun = self._rng.choice(_ADJECTIVES), self._rng.choice(_NOUNS)
            if adjective + noun not in self._used:
                self._used.add(adjective + noun)
                return adjective, noun
        n = 2
        while f"{adjective}{noun}{n}" in self._used:
            n += 1
        self._used.add(f"{adjective}{noun}{n}")
        return adjective, f"{noun}{n}"


def _text(rng: random.Random, length: int) -> str:
    words: list[str] = []
    size = 0
    while size < length:
        word = rng.choice(_LOREM)
        words.append(word)
        size += len(word) + 1
    text = " ".join(words)[:length].rstrip()
    return (text[:1].upper() + text[1:]).ljust(length, ".")


def _property_name(rng: random.Random, taken: Mapping[str, Any]) -> str:
    for _ in range(8):
        first, second = rng.choice(_NOUNS), rng.choice(_LOREM + _NOUNS)
        name = first + second[:1].upper() + second[1:]
        if name not in taken:
            return name
    n = 2
    while f"{name}{n}" in taken:
        n += 1
    return f"{name}{n}"


def generate_properties(rng: random.Random, params: GeneratorParams, count: int) -> dict[str, Any]:
    """A ``properties`` map holding exactly ``count`` generated properties, nested ones included.

    Each new property lands in a random object already generated (or the
    root) whose depth allows it; objects deeper than ``max_depth`` are drawn
    again as another type, and arrays hold scalars so they count as one.
    """
    types = [t for t, _ in params.type_weights]
    weights = [w for _, w in params.type_weights]
    non_object = [(t, w) for t, w in params.type_weights if t != "object" and w > 0] or [("string", 1.0)]
    root: dict[str, Any] = {}
    containers: list[tuple[dict[str, Any], int]] = [(root, 1)]
    for _ in range(count):
        props, depth = rng.choice(containers)
        prop_type = rng.choices(types, weights)[0]
        if prop_type == "object" and depth >= params.max_depth:
            prop_type = rng.choices([t for t, _ in non_object], [w for _, w in non_object])[0]
        node: dict[str, Any] = {}
        if params.description_length:
            node["description"] = _text(rng, params.description_length)
        node["type"] = prop_type
        if prop_type == "object":
            node["properties"] = {}
            containers.append((node["properties"], depth + 1))
        elif prop_type == "array":
            node["items"] = {"type": rng.choice(SCALAR_TYPES)}
        props[_property_name(rng, props)] = node
    return root


def _provider_schema(properties: dict[str, Any], params: GeneratorParams, kind: str) -> dict[str, Any]:
    def described(node: dict[str, Any], what: str) -> dict[str, Any]:
        return {"description": what, **node} if params.description_length else node

    at_provider = json.loads(json.dumps(properties))  # a copy: YAML would emit aliases for shared dicts
    condition = {
        "type": "object",
        "required": ["lastTransitionTime", "reason", "status", "type"],
        "properties": {
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "message": {"type": "string"},
            "reason": {"type": "string"},
            "status": {"type": "string"},
            "type": {"type": "string"},
        },
    }
    spec_properties: dict[str, Any] = {
        "deletionPolicy": {"type": "string", "enum": ["Orphan", "Delete"], "default": "Delete"},
        "forProvider": {"type": "object", "properties": properties},
        "providerConfigRef": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}},
        },
        "writeConnectionSecretToRef": {
            "type": "object",
            "required": ["name", "namespace"],
            "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}},
        },
    }
    spec: dict[str, Any] = {"type": "object", "required": ["forProvider"], "properties": spec_properties}
    checked = list(properties)[: params.cel_rules]
    if checked:
        # As upjet writes a required parameter: enforced only when the policies let crdscale create or update.
        spec_properties["managementPolicies"] = {
            "type": "array",
            "default": ["*"],
            "items": {"type": "string", "enum": ["Observe", "Create", "Update", "Delete", "LateInitialize", "*"]},
        }
        spec_properties["initProvider"] = {
            "type": "object",
            "properties": json.loads(json.dumps({name: properties[name] for name in checked})),
        }
        spec["x-kubernetes-validations"] = [
            {
                "message": f"spec.forProvider.{name} is a required parameter",
                "rule": "!('*' in self.managementPolicies || 'Create' in self.managementPolicies || "
                f"'Update' in self.managementPolicies) || has(self.forProvider.{name}) || "
                f"(has(self.initProvider) && has(self.initProvider.{name}))",
            }
            for name in checked
        ]
    return {
        "description": f"{kind} is the Schema for the {kind}s API." if params.description_length else None,
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": described(
                spec,
                f"{kind}Spec defines the desired state of {kind}",
            ),
            "status": described(
                {
                    "type": "object",
                    "properties": {
                        "atProvider": {"type": "object", "properties": at_provider},
                        "conditions": {
                            "type": "array",
                            "items": condition,
                            "x-kubernetes-list-map-keys": ["type"],
                            "x-kubernetes-list-type": "map",
                        },
                    },
                },
                f"{kind}Status defines the observed state of {kind}.",
            ),
        },
    }


def _printer_columns(params: GeneratorParams, properties: dict[str, Any]) -> list[dict[str, Any]]:
    columns = [dict(c) for c in PROVIDER_PRINTER_COLUMNS[: params.printer_columns]]
    prefix = ".spec.forProvider." if params.shape == "provider" else "."
    scalars = [name for name, node in properties.items() if node["type"] in SCALAR_TYPES]
    for name in scalars[: max(0, params.printer_columns - len(columns))]:
        columns.append(
            {"name": name.upper(), "type": properties[name]["type"], "jsonPath": prefix + name, "priority": 1}
        )
    return columns


def generate_crds(params: GeneratorParams) -> list[dict[str, Any]]:
    """The CRD set described by ``params``: a list of ``apiextensions.k8s.io/v1`` CRD dicts.

    No ownership labels: the installer adds them, so the set (and its hash) is
    independent of the run that installs it.
    """
    return list(iter_crds(params))


# The API server stores a CRD in etcd with one request, and etcd refuses requests over
# --max-request-bytes (1.5 MiB by default; crdscale's local etcd keeps the default).
ETCD_REQUEST_LIMIT_BYTES = 1536 * 1024
# The etcd backend quota of crdscale's local control plane (--quota-backend-bytes in
# cluster/local.py): a set whose objects alone exceed it cannot be installed there.
SET_LIMIT_BYTES = 8 * 2**30
# Python holds a generated CRD in 3-9x its compact JSON (measured with tracemalloc: provider
# preset 3.2x, apigen 8.3x); the set's summary and the installer keep it whole, so 10x is budgeted.
MEMORY_PER_JSON_BYTE = 10
# CRDs generated to estimate a set's size before generating all of it.
ESTIMATE_SAMPLE = 100


def crd_json_bytes(crd: Mapping[str, Any]) -> int:
    """Bytes of the compact JSON of ``crd`` (what a create request carries, near enough)."""
    return len(json.dumps(crd, separators=(",", ":")).encode("utf-8"))


# The fewest bytes one generated property takes in a CRD's JSON, its description aside:
# ``"ab":{"type":"string"}`` (names are two words, types at least "array").
MIN_PROPERTY_JSON_BYTES = 20


def minimum_crd_json_bytes(params: GeneratorParams) -> int:
    """A lower bound on the JSON size of each CRD ``params`` generates, from the arguments alone:
    every version repeats the schema, every property costs :data:`MIN_PROPERTY_JSON_BYTES` plus its
    description. Used to refuse a set before generating any of it."""
    properties = params.property_count or 1  # 0: 1..100 at random
    return params.versions * properties * (MIN_PROPERTY_JSON_BYTES + params.description_length)


def check_crd_size(crd: Mapping[str, Any]) -> int:
    """The JSON size of ``crd``; :class:`UsageError` when it is over etcd's request limit, which
    the API server would answer with an error instead of storing it."""
    size = crd_json_bytes(crd)
    if size > ETCD_REQUEST_LIMIT_BYTES:
        raise UsageError(
            f"CRD {crd['metadata']['name']} would be {fmt_bytes(size)} of JSON, over etcd's "
            f"{fmt_bytes(ETCD_REQUEST_LIMIT_BYTES)} request limit (the API server could not store it); "
            "use fewer properties, versions or description characters"
        )
    return size


@dataclass(frozen=True)
class SetEstimate:
    """A generated set's size, extrapolated from its first CRDs: ``json_bytes`` of CRD objects
    and ``memory_bytes`` to hold them in crdscale."""

    crds: int
    json_bytes: float
    memory_bytes: float

    def line(self) -> str:
        return f"about {fmt_bytes(self.json_bytes)} of CRDs ({fmt_bytes(self.json_bytes / max(self.crds, 1))} each)"


def estimate_set(params: GeneratorParams, *, available_memory: int | None = None) -> SetEstimate:
    """Estimate the set ``params`` describes from its first :data:`ESTIMATE_SAMPLE` CRDs (a
    fraction of a second) and refuse, with :class:`UsageError` naming the limit, a set that
    crdscale could not install: a CRD over etcd's request limit, objects over the local etcd's
    backend quota, or more memory than ``available_memory`` bytes (when given)."""
    least = minimum_crd_json_bytes(params.validate())
    if least > ETCD_REQUEST_LIMIT_BYTES:  # refused from the arguments: generating one would take minutes
        raise UsageError(
            f"each CRD would be at least {fmt_bytes(least)} of JSON ({params.property_count or 1:,} properties "
            f"x {params.versions} versions x {params.description_length:,} description characters), over etcd's "
            f"{fmt_bytes(ETCD_REQUEST_LIMIT_BYTES)} request limit; use fewer properties, versions or description characters"
        )
    sample = []
    for crd in iter_crds(params):
        sample.append(check_crd_size(crd))
        if len(sample) >= ESTIMATE_SAMPLE:
            break
    mean = sum(sample) / len(sample) if sample else 0.0
    estimate = SetEstimate(params.crd_count, mean * params.crd_count, mean * params.crd_count * MEMORY_PER_JSON_BYTE)
    what = f"{params.crd_count:,} CRDs would be {estimate.line()}"
    if estimate.json_bytes > SET_LIMIT_BYTES:
        most = int(SET_LIMIT_BYTES / mean)
        raise UsageError(
            f"{what}, more than the {fmt_bytes(SET_LIMIT_BYTES)} etcd quota of crdscale's local control plane; "
            f"at most ~{most:,} CRDs of this shape"
        )
    if available_memory is not None and estimate.memory_bytes > available_memory:
        most = int(available_memory / (mean * MEMORY_PER_JSON_BYTE))
        raise UsageError(
            f"{what}, needing about {fmt_bytes(estimate.memory_bytes)} of memory to generate and install; this "
            f"machine has {fmt_bytes(available_memory)} available: at most ~{most:,} CRDs of this shape"
        )
    return estimate


def iter_crds(params: GeneratorParams) -> Iterator[dict[str, Any]]:
    """The CRDs of :func:`generate_crds` one at a time (the same CRDs, in the same order), so a
    caller can show progress or stop early."""
    params.validate()
    rng = random.Random(params.seed)
    group_namer, kind_namer = _Namer(rng), _Namer(rng)
    groups = []
    for _ in range(params.group_count):
        adjective, noun = group_namer.pair()
        groups.append(f"{adjective}.{noun}.{params.group_suffix}")
    versions = version_names(params.versions)

    for index in range(params.crd_count):
        group = groups[index % params.group_count]
        adjective, noun = kind_namer.pair()
        kind = adjective.capitalize() + noun.capitalize()
        singular = kind.lower()
        plural = singular + "s"
        count = params.property_count or rng.randint(1, APIGEN_MAX_RANDOM_PROPERTIES)
        properties = generate_properties(rng, params, count)
        if params.shape == "provider":
            schema = _provider_schema(properties, params, kind)
            if schema["description"] is None:
                del schema["description"]
        else:
            schema = {"type": "object", "properties": properties}
        if params.scope == "mixed":
            scope = ("Cluster", "Namespaced")[index % 2]
        else:
            scope = params.scope
        columns = _printer_columns(params, properties)
        schema_json = json.dumps(schema)
        crd_versions = []
        for name in versions:
            version: dict[str, Any] = {
                "name": name,
                "served": True,
                "storage": name == versions[-1],
                "schema": {"openAPIV3Schema": json.loads(schema_json)},
            }
            if params.shape == "provider":
                version["subresources"] = {"status": {}}
            if columns:
                version["additionalPrinterColumns"] = [dict(c) for c in columns]
            crd_versions.append(version)
        names: dict[str, Any] = {"kind": kind, "listKind": kind + "List", "plural": plural, "singular": singular}
        if params.categories:
            names["categories"] = list(params.categories)
        yield {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "names": names, "scope": scope, "versions": crd_versions},
        }


def _dumper():
    return getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump_yaml(crd: Mapping[str, Any]) -> str:
    """One CRD as YAML text (keys in insertion order, no aliases)."""
    return yaml.dump(crd, Dumper=_dumper(), sort_keys=False, default_flow_style=False, width=1 << 16)


FORMATS = ("yaml", "json")


def write_crds(
    crds: Iterable[Mapping[str, Any]], out: str | Path, *, single_file: bool = False, fmt: str = "yaml"
) -> list[Path]:
    """Write CRDs as ``OUT/<crd name>.yaml`` files, or one multi-document stream at ``out``.

    ``fmt="json"`` writes ``.json`` files instead (a JSON array for a single
    file is not a CRD stream, so ``single_file`` needs YAML); JSON loads about
    ten times faster than YAML for provider-sized schemas.
    Returns the paths written. Existing files of the same names are replaced.
    """
    if fmt not in FORMATS:
        raise UsageError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if single_file and fmt != "yaml":
        raise UsageError("a single-file stream is written as YAML only")
    out = Path(out)
    check_output(out, single_file=single_file)
    written = []
    try:
        if single_file:
            out.parent.mkdir(parents=True, exist_ok=True)
            with open(out, "w", encoding="utf-8") as stream:
                for crd in crds:
                    stream.write("---\n" + dump_yaml(crd))
            return [out]
        out.mkdir(parents=True, exist_ok=True)
        for crd in crds:
            path = out / f"{crd['metadata']['name']}.{fmt}"
            text = dump_yaml(crd) if fmt == "yaml" else json.dumps(crd, indent=1) + "\n"
            path.write_text(text, encoding="utf-8")
            written.append(path)
    except OSError as err:
        raise UsageError(f"cannot write {err.filename or out}: {err.strerror or err}") from err
    return written


def check_output(out: str | Path, *, single_file: bool = False) -> None:
    """:class:`UsageError` (one line) now, before anything is generated, when :func:`write_crds`
    could not write to ``out``: a directory wanted where a file is, or the reverse, or no
    permission to create it."""
    out = Path(out)
    if single_file:
        if out.is_dir():
            raise UsageError(f"{out} is a directory; --single-file writes one file (omit it to write one file per CRD)")
        parent = next((p for p in (out.parent, *out.parent.parents) if p.exists()), Path("."))
    else:
        if out.exists() and not out.is_dir():
            raise UsageError(
                f"{out} exists and is not a directory; -o takes a directory for one file per CRD "
                "(or a file with --single-file)"
            )
        parent = next((p for p in (out, *out.parents) if p.exists()), Path("."))
    if not parent.is_dir():
        raise UsageError(f"cannot write {out}: {parent} is not a directory")
    target = out if single_file and out.exists() else parent
    if not os.access(target, os.W_OK):
        raise UsageError(f"cannot write {out}: permission denied on {target}")


__all__ = [
    "GeneratorParams",
    "PRESETS",
    "preset",
    "parse_type_weights",
    "generate_crds",
    "iter_crds",
    "estimate_set",
    "check_crd_size",
    "check_output",
    "generate_properties",
    "version_names",
    "write_crds",
    "dump_yaml",
]
