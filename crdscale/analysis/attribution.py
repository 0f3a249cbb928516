"""Attribute profile samples to causes with an ordered table of rules.

The table (:data:`RULES`) is read top to bottom; the first rule that claims a
stack names its cause:

- ``decides="any"``: the rule claims the stack if *any* frame matches. Used for
  context that must win wherever it sits (the watch cache's reflector decodes
  objects with the same JSON code as everyone else; what it keeps is the
  watch cache).
- ``decides="leaf"``: consecutive ``leaf`` rows compete; the row matching the
  frame *nearest the leaf* claims the stack (rows in table order break a tie
  on the same frame). The CRD handler builds schemas, CEL programs, OpenAPI
  models and etcd clients; the nearest component to the allocation is the
  one that allocated.

A stack no rule claims is ``other``; its share is always reported.

Patterns are regular expressions searched in function names. They name
frames that sit close to the allocation, not only entry points near the
root, because Go before 1.23 cut heap profile stacks at 32 frames (from the
leaf): rules still work on such profiles as long as a matching frame is
among the 32 nearest the leaf.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from crdscale.analysis.pprof.decode import (
    Profile,
    expand_stacks,
    function_arrays,
    location_function_rows,
)

OTHER = "other"


@dataclass(frozen=True)
class Rule:
    """One row of the attribution table: frames matching ``pattern`` mean ``name``."""

    name: str
    pattern: str
    decides: Literal["leaf", "any"]
    why: str
    regex: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.decides not in ("leaf", "any"):
            raise ValueError(f"rule {self.name}: decides must be 'leaf' or 'any'")
        object.__setattr__(self, "regex", re.compile(self.pattern))

    def matches(self, function_name: str) -> bool:
        """Does this rule's pattern match one frame's function name?"""
        return self.regex.search(function_name) is not None


_APIEXT = r"k8s\.io/apiextensions-apiserver/pkg"

RULES: tuple[Rule, ...] = (
    Rule(
        "zap-counters",
        r"^go\.uber\.org/zap/zapcore\.newCounters",
        "any",
        "zap's sampler preallocates a large counters array per logger; etcd clients build such loggers",
    ),
    Rule(
        "watch-cache",
        r"^k8s\.io/apiserver/pkg/storage/cacher|^k8s\.io/apiserver/pkg/storage/etcd3\.|^k8s\.io/apiserver/pkg/storage/value",
        "any",
        "the cacher lists and watches etcd and keeps every object of a resource (per resource, per CRD)",
    ),
    Rule(
        "informer-cache",
        r"^k8s\.io/client-go/tools/cache|^k8s\.io/client-go/informers|^k8s\.io/apiextensions-apiserver/pkg/client/informers|^k8s\.io/client-go/tools/pager",
        "any",
        "client-go informers inside the server keep a decoded copy of what they watch (e.g. every CRD)",
    ),
    # --- leaf group: the component nearest the allocation decides -----------
    Rule(
        "etcd-client",
        r"^go\.etcd\.io/etcd/client/v3|^go\.etcd\.io/etcd/api/v3|^google\.golang\.org/grpc"
        r"|^k8s\.io/apiserver/pkg/storage/storagebackend",
        "leaf",
        "etcd clientv3 and its gRPC transport (connections, buffers, per-client state)",
    ),
    Rule(
        "cel",
        r"^github\.com/google/cel-go|^cel\.dev/|^k8s\.io/apiserver/pkg/cel|^github\.com/antlr4-go"
        rf"|^{_APIEXT}/apiserver/schema/cel",
        "leaf",
        "CEL environments, compiled x-kubernetes-validations programs and their type providers",
    ),
    Rule(
        "ssa-typeconverter",
        r"^sigs\.k8s\.io/structured-merge-diff|^k8s\.io/kube-openapi/pkg/schemaconv"
        r"|^k8s\.io/apimachinery/pkg/util/managedfields|^k8s\.io/apiserver/pkg/endpoints/handlers/fieldmanager",
        "leaf",
        "server-side apply: per-CRD type converters built from the OpenAPI models",
    ),
    Rule(
        "openapi",
        r"^k8s\.io/kube-openapi/pkg/(builder|builder3|handler|handler3|schemamutation|aggregator|cached|common"
        r"|spec3|util/proto|openapiconv)|^k8s\.io/kube-aggregator/pkg/controllers/openapi"
        rf"|^{_APIEXT}/controller/openapi|^k8s\.io/apiserver/pkg/endpoints/openapi"
        r"|^k8s\.io/apiserver/pkg/util/openapi|^github\.com/google/gnostic",
        "leaf",
        "OpenAPI v2/v3 specs: per-CRD building, merging into the aggregated spec, serving caches",
    ),
    Rule(
        "discovery",
        r"^k8s\.io/apiserver/pkg/endpoints/discovery|"
        rf"^{_APIEXT}/apiserver\.\(\*DiscoveryController\)",
        "leaf",
        "discovery documents (aggregated and legacy) list every CRD group, version and resource",
    ),
    Rule(
        "crd-schema",
        # ToKubeOpenAPI is left to its caller: the OpenAPI builder or a validator.
        rf"^{_APIEXT}/apiserver/schema(/(defaulting|pruning|objectmeta|listtype))?\.(?!\(\*Structural\)\.ToKubeOpenAPI)"
        rf"|^{_APIEXT}/apiserver/validation|^{_APIEXT}/apis/apiextensions/validation"
        r"|^k8s\.io/kube-openapi/pkg/validation/(validate|strfmt|errors)",
        "leaf",
        "CRD structural schemas, defaulting/pruning and OpenAPI schema validators, per CRD version",
    ),
    Rule(
        "crd-handler",
        rf"^{_APIEXT}/apiserver\.|^{_APIEXT}/registry/customresource|^{_APIEXT}/controller/"
        rf"|^{_APIEXT}/crdserverscheme",
        "leaf",
        "the CRD handler's per-CRD serving info: REST storage, scopes, request handlers, controllers",
    ),
    Rule(
        "jsonschemaprops",
        rf"^{_APIEXT}/apis/apiextensions",
        "leaf",
        "CRD objects and their JSONSchemaProps: conversion between versions, deep copies, decoding",
    ),
    Rule(
        "goroutines",
        r"^runtime\.(malg|newproc1)$",
        "leaf",
        "goroutine descriptors: caches, watchers and clients start goroutines per resource",
    ),
    Rule(
        "metrics",
        r"^github\.com/prometheus/|^k8s\.io/component-base/metrics",
        "leaf",
        "Prometheus metric vectors with per-resource label values",
    ),
    Rule(
        "endpoints",
        r"^k8s\.io/apiserver/pkg/endpoints|^k8s\.io/apiserver/pkg/registry|^k8s\.io/apiserver/pkg/admission"
        r"|^k8s\.io/apiserver/pkg/server",
        "leaf",
        "generic API server machinery: handlers, REST registries, admission, server setup",
    ),
    # --- fallbacks: only if no component above claimed the stack -------------
    Rule(
        "decoding",
        r"^encoding/json|^sigs\.k8s\.io/json|^sigs\.k8s\.io/yaml|^k8s\.io/apimachinery/pkg/runtime"
        r"|^k8s\.io/apimachinery/pkg/apis/meta/v1/unstructured|^github\.com/gogo/protobuf"
        r"|^google\.golang\.org/protobuf|^github\.com/json-iterator",
        "any",
        "JSON/protobuf decoding outside any component named above",
    ),
)


# What objects bring, read before RULES by the per-object view (crdscale.analysis.perobject).
# The objects a watch cache holds are decoded by its etcd watch, which RULES charges to
# "watch-cache" whole; these rows say what the held objects are made of (patterns read off
# kube-apiserver v1.37.1 heap profiles of 4,000 custom resources and 4,000 ConfigMaps:
# tests/data/objects/). Kept apart from RULES so per-CRD numbers stay comparable with
# runs analysed before them. All "any": the frame that names what is held wins wherever it sits.
OBJECT_RULES: tuple[Rule, ...] = (
    Rule(
        "consistency-check",
        r"^k8s\.io/apiserver/pkg/storage/cacher/consistency\.",
        "any",
        "transient, no object's own: the watch cache's consistency checker (KEP-4988, DetectCacheInconsistency, "
        "on since v1.34) LISTs each cached resource from etcd every 5-7.5 min in pages of 10,000, decoded in "
        "full; a profile taken during a check holds a page of copies (seen as +95 MiB in a ConfigMap step)",
    ),
    Rule(
        "managed-fields",
        r"^sigs\.k8s\.io/structured-merge-diff/v\d+/value\.unmarshal"
        r"|^k8s\.io/apimachinery/pkg/apis/meta/v1\.\(\*FieldsV1\)",
        "any",
        "managedFields held per object: a custom resource's are parsed back into maps when its metadata "
        "is coerced on decode; a built-in keeps them as raw bytes",
    ),
    Rule(
        "object-metadata",
        r"^k8s\.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta",
        "any",
        "a custom resource's metadata, round-tripped through ObjectMeta into new maps on every decode",
    ),
    Rule(
        "size-estimator",
        r"^k8s\.io/apiserver/pkg/storage/etcd3\.\(\*resourceSizeEstimator\)",
        "any",
        "the etcd3 store's per-key sizes behind apiserver_resource_size_estimate_bytes (one entry per object)",
    ),
    Rule(
        "unstructured",
        r"^k8s\.io/apimachinery/pkg/apis/meta/v1/unstructured|^sigs\.k8s\.io/json"
        r"|^k8s\.io/apimachinery/pkg/runtime/serializer/cbor|^github\.com/fxamacker/cbor",
        "any",
        "custom resources decoded (from JSON, or CBOR with CBORServingAndStorage) into Unstructured "
        "(map[string]interface{}): a map entry and an interface value per field, which the watch cache "
        "holds (#124680, #142062)",
    ),
    Rule(
        "typed-objects",
        r"^k8s\.io/api/",
        "any",
        "built-in objects (ConfigMaps, Secrets) decoded from protobuf into their Go structs",
    ),
    *RULES,
)


def rules_table(rules: Sequence[Rule] = RULES) -> pd.DataFrame:
    """The rule table as a DataFrame: ``order, cause, decides, pattern, why``."""
    return pd.DataFrame(
        [(i, r.name, r.decides, r.pattern, r.why) for i, r in enumerate(rules)],
        columns=["order", "cause", "decides", "pattern", "why"],
    )


def classify_stack(function_names: Sequence[str], rules: Sequence[Rule] = RULES) -> str:
    """Cause of one stack given its function names from the leaf (first) to the root.

    The reference implementation of the table's semantics; :func:`attribute`
    computes the same for whole profiles at once.
    """
    depth_of = []
    for rule in rules:
        hits = [d for d, name in enumerate(function_names) if rule.matches(name)]
        depth_of.append(hits[0] if hits else None)
    for group in _groups(rules):
        if rules[group[0]].decides == "any":
            if depth_of[group[0]] is not None:
                return rules[group[0]].name
            continue
        found = [(depth_of[i], i) for i in group if depth_of[i] is not None]
        if found:
            return rules[min(found)[1]].name
    return OTHER


def _groups(rules: Sequence[Rule]) -> list[list[int]]:
    """Rule indexes grouped: each ``any`` rule alone, consecutive ``leaf`` rules together."""
    groups: list[list[int]] = []
    for i, rule in enumerate(rules):
        if rule.decides == "leaf" and groups and rules[groups[-1][0]].decides == "leaf":
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def rule_matches(rules: tuple[Rule, ...], names: np.ndarray) -> np.ndarray:
    """Bool matrix (names x rules): does each rule's pattern match each function name?

    Profiles of one server share most function names, so each name is matched
    once per process; one combined pattern first sets aside the many names no
    rule matches.
    """
    known = _NAME_HITS.setdefault(rules, {})
    if len(known) > 500_000:  # bound the memory of a long notebook session
        known.clear()
    names_list = names.tolist()
    new = [n for n in dict.fromkeys(names_list) if n not in known]
    if new:
        try:
            anything = re.compile("|".join(f"(?:{r.pattern})" for r in rules))
        except re.error:  # patterns that cannot be joined (e.g. repeated group names): no shortcut
            anything = re.compile("")
        for n in new:
            # One int per name, bit i set when rule i matches: read back for all names in one pass.
            known[n] = sum(1 << i for i, r in enumerate(rules) if r.regex.search(n)) if anything.search(n) else 0
    if len(rules) > 62:
        bits = [known[n] for n in names_list]
        return np.array([[(b >> i) & 1 for i in range(len(rules))] for b in bits], dtype=bool).reshape(
            len(names), len(rules)
        )
    codes = np.fromiter(map(known.__getitem__, names_list), dtype=np.int64, count=len(names_list))
    return ((codes[:, None] >> np.arange(len(rules), dtype=np.int64)) & 1).astype(bool)


_NAME_HITS: dict[tuple[Rule, ...], dict[str, int]] = {}


def attribute(profile: Profile, rules: Sequence[Rule] = RULES) -> pd.DataFrame:
    """Cause of every sample: DataFrame indexed by sample with ``cause`` and
    ``frame`` (the function name that decided, ``""`` for ``other``)."""
    key = ("attribution", tuple(rules))
    if key in profile._cache:
        return profile._cache[key]
    cause, deciding = _causes(profile, rules)
    cause_names = np.array([r.name for r in rules] + [OTHER], dtype=object)
    out = pd.DataFrame({"cause": cause_names[cause], "frame": deciding})
    out.index.name = "sample"
    profile._cache[key] = out
    return out


def _causes(
    profile: Profile, rules: Sequence[Rule], samples: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: the deciding rule's position (``len(rules)`` for other) and the deciding function name.

    With ``samples`` (bool per sample) only those are attributed and the others
    get ``other``: what a sum over values that are 0 elsewhere needs (most of a
    heap profile's samples hold no bytes in use).
    """
    key = ("causes", tuple(rules))
    if key in profile._cache:
        return profile._cache[key]
    subset = samples is not None and not samples.all()
    n_samples = profile.n_samples
    # Match each function name once, not each frame: through the locations rows for all
    # samples, and through the functions their frames use for a subset (a few thousand).
    fn_names = function_arrays(profile)["name"]
    fn_of_row = location_function_rows(profile)
    row, frame_sample = expand_stacks(profile).rows_of(samples if subset else None)
    if subset:
        frame_fn, used = pd.factorize(fn_of_row[row], sort=False)  # hashing: faster than np.unique's sort
        frame_fn_match = rule_matches(tuple(rules), fn_names[used])
    else:
        frame_fn, frame_fn_match = row, rule_matches(tuple(rules), fn_names)[fn_of_row]
    # Only frames of functions some rule matches can decide (a small share of all frames).
    hit_frames = np.flatnonzero(frame_fn_match.any(axis=1)[frame_fn]) if len(row) else np.zeros(0, dtype=np.int64)
    frame_match = frame_fn_match[frame_fn[hit_frames]]
    # Only samples with a frame some rule matches can get a cause: they are numbered 0..k-1
    # here (frames come sample by sample, so a new sample number starts a new one).
    hit_sample = frame_sample[hit_frames]
    starts = np.r_[True, hit_sample[1:] != hit_sample[:-1]] if len(hit_sample) else np.zeros(0, dtype=bool)
    candidates = hit_sample[starts]
    sample = np.cumsum(starts) - 1
    # Frames are ordered by sample then from the leaf, so within a sample a smaller
    # frame index is a frame nearer the leaf: the index stands in for the depth.
    never = np.iinfo(np.int64).max
    nearest = np.full((len(rules), len(candidates)), never, dtype=np.int64)
    for r in range(len(rules)):
        sel = np.flatnonzero(frame_match[:, r])
        if len(sel) == 0:
            continue
        first = sel[np.r_[True, sample[sel][1:] != sample[sel][:-1]]]
        nearest[r, sample[first]] = hit_frames[first]

    found = np.full(len(candidates), -1, dtype=np.int64)
    for group in _groups(rules):
        open_ = found < 0
        if not open_.any():
            break
        sub = nearest[group][:, open_]
        best = np.argmin(sub, axis=0)  # argmin keeps the first (table order) on ties
        hit = sub[best, np.arange(sub.shape[1])] != never
        idx = np.flatnonzero(open_)[hit]
        found[idx] = np.asarray(group)[best[hit]]

    cause = np.full(n_samples, len(rules), dtype=np.int64)
    deciding = np.full(n_samples, "", dtype=object)
    has = np.flatnonzero(found >= 0)
    cause[candidates[has]] = found[has]
    deciding[candidates[has]] = fn_names[fn_of_row[row[nearest[found[has], has]]]]
    if not subset:
        profile._cache[key] = (cause, deciding)
    return cause, deciding


def cause_totals(
    profile: Profile,
    rules: Sequence[Rule] = RULES,
    sample_types: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Sum of every sample type by cause.

    Returns a DataFrame indexed by cause (every rule's cause in table order,
    then ``other``, zeros included so the unattributed row is always there),
    one int64 column per sample type in its own unit (bytes, count, ns).
    """
    columns = list(sample_types) if sample_types else profile.sample_columns
    causes, totals = _cause_sums(profile, rules, columns)
    return pd.DataFrame(totals, index=pd.Index(causes, name="cause"), columns=columns)


def _cause_sums(profile: Profile, rules: Sequence[Rule], columns: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """:func:`cause_totals` as numpy: the causes in table order, and their sums (causes x columns)."""
    all_columns = profile.sample_columns
    values = profile.value_matrix()[:, [all_columns.index(c) for c in columns]]
    return sums_by_cause(profile, values, rules)


def sums_by_cause(profile: Profile, values: np.ndarray, rules: Sequence[Rule] = RULES) -> tuple[list[str], np.ndarray]:
    """Any per-sample quantities (samples x k, e.g. sampling variances) summed by cause.

    Returns the causes in table order (``other`` last) and their sums (causes x k).
    Samples whose values are all 0 are not attributed (they add nothing).
    """
    cause, _ = _causes(profile, rules, (values != 0).any(axis=1))
    names = [r.name for r in rules] + [OTHER]
    order = list(dict.fromkeys(names))
    group = np.array([order.index(n) for n in names], dtype=np.int64)[cause]
    totals = np.zeros((len(order), values.shape[1]), dtype=values.dtype)
    np.add.at(totals, group, values)
    return order, totals


def attribution_table(
    profile: Profile, sample_index: str | int | None = None, rules: Sequence[Rule] = RULES
) -> pd.DataFrame:
    """Value and share by cause for one sample type: ``cause, value, share``.

    ``value`` is in the sample type's unit (``df.attrs["unit"]``), ``share``
    a fraction of the profile total (0-1). Sorted by value, largest first,
    with ``other`` (unattributed) always present.
    """
    index = profile.sample_index(sample_index)
    column = profile.sample_columns[index]
    causes, totals = _cause_sums(profile, rules, [column])
    values = totals[:, 0]
    total = int(values.sum())
    order = np.argsort(-values, kind="stable")  # largest first; table order among equals
    out = pd.DataFrame(
        {
            "cause": np.array(causes, dtype=object)[order],
            "value": values[order],
            "share": values[order] / total if total else 0.0,
        }
    )
    out.attrs.update(unit=profile.meta.sample_types[index].unit, sample_type=column, total=total)
    return out
