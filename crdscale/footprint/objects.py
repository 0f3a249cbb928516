"""The footprint model's per-object term: what each custom resource adds to kube-apiserver's heap.

A CRD set's footprint (:mod:`crdscale.footprint.model`) is what the definitions cost with no objects.
Every object then adds what the watch cache holds for it: its body decoded into ``Unstructured`` maps,
its ``managedFields`` parsed back into maps, its coerced metadata, the store's entry
(docs/explanation/objects.md). Those grow with how many JSON values the object has more than with its
bytes (a nested 1 KiB object holds several times what a flat one does), so the term is linear in the
object's :func:`object_features`: its compact JSON ``bytes`` and its ``nodes`` (every map, list and
scalar), in the form chosen per version by :func:`choose_form` (leave one cell out, on the cells of
``scenarios/objects-shapes.toml``; ``crdscale footprint fit objects`` writes the term).

Its error is multiplicative: a cell strays from the fit by a share of its prediction, so the interval
of a total over many objects of one shape is that share of the total (their misfit is shared, not
averaged away) and never goes below zero. Pure: dicts and arrays in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crdscale.analysis.intervals import t_quantile
from crdscale.analysis.lstsq import least_squares
from crdscale.analysis.targets import TOTAL
from crdscale.errors import UsageError
from crdscale.footprint.features import crd_features
from crdscale.footprint.model import RSS, RSS_PEAK
from crdscale.schema import json_bytes

OBJECT_FEATURES = ("bytes", "nodes")
# Candidate forms of heap per object: the columns of the design (``one``: the intercept).
FORMS = {
    "bytes": ("one", "bytes"),
    "nodes": ("one", "nodes"),
    "nodes+bytes": ("one", "nodes", "bytes"),
}
FORMAT = 1
# What the server sets on every object whatever the client sent: left out of the features, so an object
# read back (kubectl get -o yaml) and one about to be applied measure alike. managedFields are the
# server's record of the fields set: the term's heap includes them, as a function of the fields.
SERVER_METADATA = (
    "managedFields",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
CAUSE = "custom-resources"  # the prediction's row for what the objects hold
DEFINITION = (
    "heap the custom resources add once the watch cache holds them (their Unstructured bodies, managedFields "
    "parsed into maps, coerced metadata, the store), per object linear in its JSON bytes and values, fitted on "
    "runs that grow objects of several shapes with kube-controller-manager watching them"
)


def _nodes(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(_nodes(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_nodes(v) for v in value)
    return 1


def as_sent(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` without the metadata the server sets (:data:`SERVER_METADATA`)."""
    out = dict(obj)
    metadata = out.get("metadata")
    if isinstance(metadata, Mapping):
        out["metadata"] = {k: v for k, v in metadata.items() if k not in SERVER_METADATA}
    return out


def object_features(obj: Mapping[str, Any]) -> dict[str, float]:
    """``{"bytes": compact JSON bytes, "nodes": JSON values}`` of a custom resource as a client sends it
    (:func:`as_sent`; its ``status`` counts: the server stores and caches it)."""
    body = as_sent(obj)
    return {"bytes": float(json_bytes(body)), "nodes": float(_nodes(body))}


def mean_features(objects: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The mean :func:`object_features` of ``objects``; ValueError when there are none."""
    rows = [object_features(o) for o in objects]
    if not rows:
        raise ValueError("no objects")
    return {f: float(np.mean([r[f] for r in rows])) for f in OBJECT_FEATURES}


def generated_object_features(crd: Mapping[str, Any], shape: str, size: int) -> dict[str, float]:
    """:func:`object_features` of the object crdscale's runs would write for ``crd``: ``shape`` (one of
    :data:`crdscale.crds.objects.SHAPES`; ``schema`` follows ``crd``'s own schema) of ``size`` JSON bytes
    as sent, with the metadata a run's objects carry (a name, a namespace when namespaced, two labels)."""
    # lazy: crdscale.crds.objects (with the generator) costs a prediction without --objects ~60 ms.
    from crdscale.crds.objects import custom_resource, with_payload_field

    namespaced = (crd.get("spec") or {}).get("scope", "Namespaced") == "Namespaced"
    target = crd if shape == "schema" else with_payload_field(crd)
    labels = {"app.kubernetes.io/managed-by": "crdscale", "crdscale.io/run": "run"}
    obj = custom_resource(
        target, "obj-000000", namespace="ns" if namespaced else None, labels=labels, size=size, shape=shape
    )
    return object_features(obj)


def crd_and_object_features(crd: Mapping[str, Any], shape: str, size: int) -> dict[str, float]:
    """A CRD's :func:`crdscale.footprint.features.crd_features` with its generated objects' features as
    ``object_bytes`` and ``object_nodes`` (a ``measure`` for :func:`crdscale.crds.load.load_crds`; pass it
    as a ``functools.partial``). A schema too small or too strict for ``size`` bytes (its required fields
    alone are larger) falls back to the flat shape, counted in ``object_fallback``."""
    fallback = 0.0
    try:
        features = generated_object_features(crd, shape, size)
    except (UsageError, KeyError, TypeError, ValueError):
        features, fallback = generated_object_features(crd, "flat", size), 1.0
    return {
        **crd_features(crd),
        "object_bytes": features["bytes"],
        "object_nodes": features["nodes"],
        "object_fallback": fallback,
    }


def object_features_of(per_crd: Mapping[str, float]) -> dict[str, float]:
    """The object features :func:`crd_and_object_features` stored beside a CRD's own."""
    return {"bytes": float(per_crd["object_bytes"]), "nodes": float(per_crd["object_nodes"])}


def _design(features: Sequence[Mapping[str, float]], columns: Sequence[str]) -> np.ndarray:
    return np.array([[1.0 if c == "one" else float(f[c]) for c in columns] for f in features], dtype=float)


def _wls(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # Weights 1/y^2: least squares on relative misfits, the error model's scale.
    return least_squares(x, y, weights=1.0 / np.maximum(y, 1.0) ** 2).coef


@dataclass
class ObjectTerm:
    """Heap per custom resource for one kube-apiserver version: ``coef`` over ``FORMS[form]``; ``log_sd``
    the spread of ``log(measured / predicted)`` when each cell is predicted from the others, on ``dof``
    degrees of freedom; ``rss_per_heap`` settled RSS per byte of that heap (its ``(value, low, high)``
    over the cells); ``ranges`` the ``[min, max]`` of each feature over the cells; ``provenance``: the
    experiment, the cells (``uses``: fitting, validation) and the rule that chose the form."""

    kube_version: str
    form: str
    coef: list[float]
    log_sd: float
    dof: int
    rss_per_heap: tuple[float, float, float]
    ranges: dict[str, list[float]] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def columns(self) -> tuple[str, ...]:
        return FORMS[self.form]

    def mean(self, features: Mapping[str, float]) -> float:
        """Heap per object (bytes) the fit gives for ``features`` (never below 0)."""
        return max(float(_design([features], self.columns)[0] @ np.asarray(self.coef)), 0.0)

    def per_object(self, features: Mapping[str, float], confidence: float = 0.95) -> tuple[float, float, float]:
        """``(value, low, high)`` heap per object: the fit and its multiplicative prediction interval."""
        value = self.mean(features)
        q = t_quantile(0.5 + confidence / 2, self.dof) if self.dof > 0 else math.nan
        spread = math.exp(q * self.log_sd) if not math.isnan(q) else math.nan
        return value, value / spread, value * spread

    def predict(
        self, groups: Iterable[tuple[float, Mapping[str, float]]], confidence: float = 0.95
    ) -> tuple[float, float, float]:
        """``(value, low, high)`` heap of ``groups``: ``(how many objects, their features)``; the misfit
        taken as shared by every group (bounds add), so the total's interval is the per-object one's share."""
        total = np.zeros(3)
        for count, features in groups:
            total += float(count) * np.asarray(self.per_object(features, confidence))
        return tuple(float(v) for v in total)

    def extrapolations(self, features: Mapping[str, float]) -> list[str]:
        """One line per feature of ``features`` outside what the term was fitted on."""
        out = []
        for name, value in features.items():
            low, high = self.ranges.get(name, (None, None))
            if low is not None and not low <= value <= high:
                out.append(
                    f"objects of {value:,.0f} {'JSON bytes' if name == 'bytes' else 'JSON values'} are outside "
                    f"the fitted range [{low:,.0f}, {high:,.0f}]: the per-object term extrapolates"
                )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "kube_version": self.kube_version,
            "definition": DEFINITION,
            "form": self.form,
            "columns": list(self.columns),
            "coef": list(self.coef),
            "log_sd": self.log_sd,
            "dof": self.dof,
            "rss_per_heap": list(self.rss_per_heap),
            "ranges": self.ranges,
            "provenance": self.provenance,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ObjectTerm:
        if data.get("format") != FORMAT:
            raise ValueError(f"object term format {data.get('format')!r}, this crdscale reads {FORMAT}")
        if data["form"] not in FORMS:
            raise ValueError(f"object term form {data['form']!r}: known are {', '.join(FORMS)}")
        return cls(
            str(data["kube_version"]),
            str(data["form"]),
            [float(c) for c in data["coef"]],
            float(data["log_sd"]),
            int(data["dof"]),
            tuple(float(v) for v in data["rss_per_heap"]),
            {k: [float(a) for a in v] for k, v in (data.get("ranges") or {}).items()},
            dict(data.get("provenance") or {}),
        )


def rss_of(heap: tuple[float, float, float], rss_per_heap: tuple[float, float, float]) -> tuple[float, float, float]:
    """Settled RSS ``(value, low, high)`` of objects holding ``heap``: the value by the median ratio, the
    bounds by the lowest and highest ratio the cells measured (wider than either alone)."""
    return heap[0] * rss_per_heap[0], heap[1] * rss_per_heap[1], heap[2] * rss_per_heap[2]


def with_objects(
    rows: Iterable[tuple[str, float, float, float]],
    heap: tuple[float, float, float],
    rss_per_heap: tuple[float, float, float],
) -> list[tuple[str, float, float, float]]:
    """A CRD set's prediction rows (``target, value, low, high``) with its objects added: a
    :data:`CAUSE` row of ``heap``, which the total also gets, and its :func:`rss_of` added to settled and
    peak RSS (objects are written after the CRDs are served, so their growth adds to the peak as it
    does to settled RSS). Bounds add: the objects' misfit is not known to offset the CRDs'."""
    rss = rss_of(heap, rss_per_heap)
    added = {TOTAL: heap, RSS: rss, RSS_PEAK: rss}
    out = []
    for target, value, low, high in rows:
        extra = added.get(target, (0.0, 0.0, 0.0))
        out.append((target, value + extra[0], low + extra[1], high + extra[2]))
    causes = [r for r in out if r[0] not in added]
    last = [r for r in out if r[0] in added]
    return sorted([*causes, (CAUSE, *heap)], key=lambda r: -r[1]) + last


def leave_one_cell_out(features: Sequence[Mapping[str, float]], heap: Sequence[float], form: str) -> np.ndarray:
    """``log(measured / predicted)`` of each cell, predicted by ``form`` fitted on the other cells
    (NaN where the others cannot determine the form, or it predicts no heap)."""
    columns = FORMS[form]
    x, y = _design(features, columns), np.asarray(heap, dtype=float)
    out = np.full(len(y), math.nan)
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        if np.linalg.matrix_rank(x[keep]) < len(columns):
            continue
        predicted = float(x[i] @ _wls(x[keep], y[keep]))
        if predicted > 0 and y[i] > 0:
            out[i] = math.log(y[i] / predicted)
    return out


def choose_form(
    features: Sequence[Mapping[str, float]], heap: Sequence[float], forms: Iterable[str] = FORMS, tie: float = 0.01
) -> tuple[str, dict[str, float]]:
    """The form with the lowest mean absolute leave-one-cell-out relative error, and each form's error;
    within ``tie`` (1 percentage point) of the best, the one with fewer columns wins (the rule written
    down before the cells ran: /work/runs/s8/PREREGISTERED.md, recorded in the term's provenance)."""
    errors = {}
    for form in forms:
        logs = leave_one_cell_out(features, heap, form)
        errors[form] = float(np.mean(np.abs(np.expm1(logs)))) if not np.isnan(logs).any() else math.inf
    best = min(errors.values())
    near = [f for f in errors if errors[f] <= best + tie]
    return min(near, key=lambda f: (len(FORMS[f]), errors[f])), errors


def fit_object_term(
    kube_version: str,
    features: Sequence[Mapping[str, float]],
    heap: Sequence[float],
    form: str,
    *,
    rss: Sequence[float] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> ObjectTerm:
    """:class:`ObjectTerm` of ``form`` fitted on cells (each cell's object ``features`` and measured heap
    per object); its spread from :func:`leave_one_cell_out` (a new cell's error, coefficients' uncertainty
    included), on ``cells - columns`` degrees of freedom. ``rss``: each cell's settled RSS per object, whose
    ratio to the heap gives ``rss_per_heap`` (median and range; 1 when not given). ValueError when the
    cells cannot determine the form or leave no degree of freedom."""
    columns = FORMS[form]
    x, y = _design(features, columns), np.asarray(heap, dtype=float)
    if len(y) <= len(columns) or np.linalg.matrix_rank(x) < len(columns):
        raise ValueError(f"{len(y)} cells cannot fit the {form!r} form with an interval")
    logs = leave_one_cell_out(features, heap, form)
    logs = logs[~np.isnan(logs)]
    dof = len(y) - len(columns)
    log_sd = float(np.sqrt(np.sum(logs**2) / max(len(logs), 1)))
    if rss is not None:
        ratios = np.asarray(rss, dtype=float) / y
        ratios = ratios[np.isfinite(ratios)]
        rss_per_heap = (float(np.median(ratios)), float(ratios.min()), float(ratios.max()))
    else:
        rss_per_heap = (1.0, 1.0, 1.0)
    ranges = {f: [float(min(r[f] for r in features)), float(max(r[f] for r in features))] for f in OBJECT_FEATURES}
    return ObjectTerm(
        kube_version.lstrip("v"),
        form,
        [float(c) for c in _wls(x, y)],
        log_sd,
        dof,
        rss_per_heap,
        ranges,
        dict(provenance or {}),
    )
