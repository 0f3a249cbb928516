"""A CRD set's footprint prediction as data: what ``crdscale footprint`` prints, for a notebook too.

:func:`predict_footprint` reads a CRD set (files, a package, a chart, or a cluster's), chooses the
model (:mod:`crdscale.footprint.store`), predicts the state asked for with its intervals, adds the
custom resources' per-object term, ranks the costliest CRDs and answers a budget: a
:class:`FootprintPrediction`, whose :meth:`~FootprintPrediction.to_json` is ``crdscale footprint -o
json`` and :meth:`~FootprintPrediction.to_text` its table. :func:`predict_upgrade` does the same for
what going from one set to another adds (:class:`FootprintDifference`), :func:`explain_model` for the
model itself (``--explain``). Warnings are kept on the result, not printed.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crdscale.analysis.targets import TOTAL
from crdscale.crds.load import cluster_crds, load_crds, read_objects_file, require_crds
from crdscale.errors import UsageError
from crdscale.footprint.features import add_features, crd_features
from crdscale.footprint.model import (
    PREDICTED_TOTAL,
    RSS,
    RSS_DEFINITIONS,
    RSS_PEAK,
    PeakExcess,
    budget_fit,
    crd_costs,
    extrapolations,
    predict_difference,
    prediction_rows,
    top_crds,
)
from crdscale.footprint.objects import (
    DEFINITION,
    ObjectTerm,
    crd_and_object_features,
    mean_features,
    object_features_of,
    rss_of,
    with_objects,
)
from crdscale.footprint.states import SERVED, STATE_DEFINITIONS, STATES, predict_state
from crdscale.footprint.store import ChosenModel, choose_model, object_term_versions, read_object_term
from crdscale.units import fmt_bytes, is_missing, parse_bytes

if TYPE_CHECKING:
    from crdscale.cluster.kubeconfig import KubeconfigFiles

log = logging.getLogger(__name__)

DEFINITIONS = {
    "heap": "live Go heap after a GC, by cause (crdscale.analysis.attribution), once the set is installed and served",
    # The two RSS quantities: crdscale.footprint.model.RSS_DEFINITIONS (rss, rss_peak), added by definitions().
    "interval": (
        "95% prediction interval for one new run: the lognormal with the fit's mean and variance "
        "(multiplicative error), never below zero; a cause predicted at or below zero shows 0 with [0, upper]. "
        "OLD NEW differences can be negative and have additive intervals"
    ),
}
# In the text table, causes under this share of the predicted heap are summed on one line.
MINOR_SHARE = 0.02
DEFAULT_OBJECT_BYTES = 1024

Row = dict[str, "float | None"]  # {"value", "low", "high"}: bytes, None where unknown


def definitions() -> dict[str, str]:
    """What each quantity of a prediction means (``definitions`` in ``-o json``)."""
    return {**DEFINITIONS, **RSS_DEFINITIONS, **{f"state {k}": v for k, v in STATE_DEFINITIONS.items()}}


def parse_size(flag: str, value: int | float | str | None) -> int | None:
    """``value`` in bytes (``"8GiB"``, ``"6G"`` or a number); UsageError naming ``flag`` when it is not a size."""
    if value is None or not isinstance(value, str):
        return value
    try:
        return parse_bytes(value)
    except ValueError as err:
        raise UsageError(f"{flag}: {err}") from None


def choose(kube_version: str, *, model: str | Path | None = None, shipped: bool = False) -> ChosenModel:
    """The model for ``kube_version`` (:func:`~crdscale.footprint.store.choose_model`): ``model`` when given,
    else this machine's calibrated one unless ``shipped``, else the shipped one; a shipped model of another
    patch release of the same minor stands in for a version none was shipped for, with a warning."""
    chosen = choose_model(kube_version, path=model, shipped_only=shipped, same_minor=True)
    if chosen.stands_in_for:
        log.warning(
            f"no model shipped for kube-apiserver v{chosen.stands_in_for}; using v{chosen.model.kube_version}'s "
            f"(same minor release, but patch releases can differ: v1.24.17 holds a third less served heap than "
            f"v1.24.0 on the 1,848 terrajet CRDs, a backported zap fix; 'crdscale footprint --calibrate "
            f"--kube-version {chosen.stands_in_for}' fits its own)"
        )
    return chosen


def provenance(chosen: ChosenModel) -> dict[str, Any]:
    """The model's provenance, its ``uses`` joined by the state terms' (which runs gave each state's term)."""
    prov = dict(chosen.model.provenance)
    if chosen.states is not None:
        prov["uses"] = {**(prov.get("uses") or {}), **(chosen.states.provenance.get("uses") or {})}
    return prov


def available_states(chosen: ChosenModel) -> set[str]:
    """The states ``chosen`` can predict: all with state terms, else served alone."""
    return set(STATES) if chosen.states is not None else {SERVED}


def model_json(chosen: ChosenModel) -> dict[str, Any]:
    """The ``model`` block of ``-o json``."""
    model = chosen.model
    return {
        "origin": chosen.origin,
        "path": str(chosen.path),
        # The version asked for when this model is another patch release's of its minor (else null).
        "stands_in_for": chosen.stands_in_for,
        "features": model.features,
        "provenance": provenance(chosen),
        "ranges": model.ranges,
        "states": sorted(available_states(chosen)),
    }


def _clean(v):
    return None if is_missing(v) else v


def _rows(rows) -> dict[str, Row]:
    """``(target, value, low, high)`` rows (or a DataFrame's itertuples) by target."""
    return {
        target: {"value": _clean(value), "low": _clean(low), "high": _clean(high)} for target, value, low, high in rows
    }


def _extrapolations(model, features) -> list[str]:
    return [
        f"{w} (a way out: calibrate on sets like this one, 'crdscale footprint --calibrate --sweep SWEEP.toml' "
        f"with a sweep that reaches it, and predict with that model)"
        for w in extrapolations(model, features)
    ]


# -- the CRD set and its objects


@dataclass
class ObjectSpec:
    """What ``--objects`` and its options say: ``count`` per CRD, and either a ``shape`` and ``size`` (crdscale's
    generated objects, per CRD) or the mean ``sample`` features of real objects."""

    count: int
    shape: str
    size: int
    sample: dict[str, float] | None = None
    sample_label: str | None = None

    def describe(self) -> str:
        if self.sample is not None:
            like = (
                f"like {self.sample_label} ({fmt_bytes(self.sample['bytes'])}, {self.sample['nodes']:,.0f} JSON "
                f"values each)"
            )
        else:
            like = f"{self.shape}, {fmt_bytes(self.size)} each as sent"
        return f"{self.count:,} custom resources per CRD, {like}"


def object_spec(
    count: int | None,
    *,
    shape: str | None = None,
    size: int | str | None = None,
    sample: str | Path | None = None,
) -> ObjectSpec | None:
    """The objects to add, checked (UsageError naming the option): ``count`` per CRD, of ``shape`` (one of
    :data:`crdscale.crds.objects.SHAPES`, default ``schema``) and ``size`` JSON bytes as sent (default
    1 KiB), or like the custom resources in the file ``sample``; None without objects (``count`` None or 0)."""
    options = [
        f
        for f, v in (("--object-shape", shape), ("--object-bytes", size), ("--object-sample", sample))
        if v is not None
    ]
    if count is None or count == 0:
        if options:
            raise UsageError(f"{' and '.join(options)} go with --objects N (custom resources per CRD)")
        return None
    if count < 0:
        raise UsageError("--objects must be >= 0 (custom resources per CRD)")
    if sample and (shape or size):
        raise UsageError("--object-sample describes the objects itself; give it or --object-shape/--object-bytes")
    size = parse_size("--object-bytes", size) if size else DEFAULT_OBJECT_BYTES
    from crdscale.crds.objects import check_size  # lazy: with the generator, ~60 ms a prediction without objects saves

    if sample:
        spec = ObjectSpec(count, "sample", 0, *read_sample(sample, check_size))
    else:
        spec = ObjectSpec(count, shape or "schema", check_size(size, "--object-bytes"))
    _check_storable(count, spec.sample["bytes"] if spec.sample is not None else spec.size)
    return spec


# etcd's largest database: --quota-backend-bytes defaults to 2 GiB and "8 GiB is a suggested maximum size for
# normal environments" (etcd.io/docs/v3.6/dev-guide/limit/). One CRD's objects beyond it cannot be stored.
ETCD_MAX_DATABASE_BYTES = 8 * 1024**3


def _check_storable(count: int, object_bytes: float) -> None:
    """Refuse ``count`` objects of ``object_bytes`` each when one CRD's objects alone could not fit in etcd:
    a prediction for objects no cluster can hold is not a number to give."""
    if count * max(object_bytes, 1) > ETCD_MAX_DATABASE_BYTES:
        raise UsageError(
            f"--objects {count:,} of ~{int(max(object_bytes, 1)):,} JSON bytes each is more than etcd's 8 GiB "
            "suggested maximum database (--quota-backend-bytes) for one CRD's objects alone: no cluster stores that"
        )


def read_sample(path: str | Path, check_size=None) -> tuple[dict[str, float], str]:
    """The mean features of the custom resources in ``path`` (documents, or a kubectl List's items), read by
    the loader CRD files go through, and a label naming them; ``check_size(bytes, what)`` refuses an object
    the API server could not store (over etcd's 1.5 MiB request limit)."""
    objects = read_objects_file(path, f"--object-sample {path}")
    kinds = {o.get("kind") for o in objects}
    if not objects or not all(o.get("apiVersion") and o.get("kind") for o in objects):
        raise UsageError(f"--object-sample {path}: no Kubernetes objects (each needs apiVersion and kind)")
    if kinds & {"CustomResourceDefinition"}:
        raise UsageError(f"--object-sample {path}: holds CRDs; give custom resources (objects of a CRD's kind)")
    if check_size is not None:
        for number, obj in enumerate(objects, 1):
            check_size(
                len(json.dumps(obj, separators=(",", ":"), default=str)), f"--object-sample {path}: object {number}"
            )
    return mean_features(objects), f"{path} ({len(objects)} object{'s' if len(objects) != 1 else ''})"


@dataclass
class CrdSet:
    """One CRD set as the prediction sees it: where from, names, per-CRD features, what was skipped."""

    label: str
    names: list[str]
    per_crd: list[dict[str, float]]
    skipped: dict[str, int]
    warnings: list[str]

    def features(self) -> dict[str, float]:
        return add_features(self.per_crd)


def read_crd_set(
    source: str | Path | None,
    objects: ObjectSpec | None = None,
    *,
    kubeconfig: KubeconfigFiles | None = None,
    context: str | None = None,
) -> CrdSet:
    """Load ``source`` (a file or tree of YAML/JSON, ``-`` for stdin, a Crossplane package, a Helm chart), or
    with ``source`` None the CRDs installed in the cluster of ``kubeconfig``/``context`` (one LIST); refuse a
    set without v1 CRDs (the wording install uses), and measure each CRD (and, for generated objects, the
    object each CRD's custom resources would be)."""
    measure = crd_features
    if objects is not None and objects.sample is None:
        measure = functools.partial(crd_and_object_features, shape=objects.shape, size=objects.size)
    if source is None:
        from crdscale.cluster.clients import connect  # lazy: a cluster's client (requests, yaml), only when one is read

        cluster = connect(kubeconfig, context)
        try:
            loaded = cluster_crds(cluster, measure=measure)
        finally:
            cluster.close()
        label = f"cluster {cluster.server}"
    else:
        loaded = load_crds(source, measure=measure)
        label = "stdin" if str(source) == "-" else str(source)
    require_crds(loaded, label)
    return CrdSet(label, loaded.names, loaded.measures, dict(loaded.skipped), list(loaded.warnings))


def object_term(version: str) -> ObjectTerm:
    """The per-object term of ``version``; a one-line error naming the versions that have one."""
    term = read_object_term(version)
    if term is None:
        known = ", ".join(f"v{v}" for v in object_term_versions()) or "none"
        raise UsageError(
            f"no per-object term for kube-apiserver v{version} (measured: {known}); --kube-version one of those, "
            f"or measure it: 'crdscale run scenarios/objects-shapes.toml --set target.kube_version={version}', "
            f"then 'crdscale footprint fit objects RUN --write'"
        )
    return term


@dataclass
class ObjectsPrediction:
    """What a set's custom resources add: ``heap`` ``(value, low, high)`` bytes, each CRD's objects' heap
    (``per_crd_heap``, value) and settled RSS rows (``per_crd_rss``, value, low, high), their count and mean
    features."""

    spec: ObjectSpec
    term: ObjectTerm
    heap: tuple[float, float, float]
    per_crd_heap: np.ndarray
    per_crd_rss: np.ndarray
    total: int
    mean: dict[str, float]

    @property
    def rss(self) -> tuple[float, float, float]:
        return rss_of(self.heap, self.term.rss_per_heap)

    def to_dict(self) -> dict[str, Any]:
        """The ``objects`` block of ``-o json``."""
        spec, term = self.spec, self.term
        return {
            "per_crd": spec.count,
            "total": self.total,
            "shape": spec.shape,
            "bytes_as_sent": spec.size if spec.sample is None else None,
            "sample": spec.sample_label,
            "mean_features": self.mean,
            "heap_bytes": dict(zip(("value", "low", "high"), self.heap, strict=True)),
            "rss_bytes": dict(zip(("value", "low", "high"), self.rss, strict=True)),
            "definition": DEFINITION,
            "term": {
                "form": term.form,
                "columns": list(term.columns),
                "coef": term.coef,
                "provenance": term.provenance,
            },
        }

    def describe(self) -> str:
        return (
            f"{self.spec.describe()}: {self.total:,} in all, {self.mean['nodes']:,.0f} JSON values and "
            f"{fmt_bytes(self.mean['bytes'])} each on average"
        )


def predict_objects(spec: ObjectSpec, term: ObjectTerm, crd_set: CrdSet, warnings: list[str]) -> ObjectsPrediction:
    """What the set's custom resources add; appends the term's warnings to ``warnings``."""
    if spec.sample is not None:
        per_crd = [spec.sample] * len(crd_set.per_crd)
    else:
        per_crd = [object_features_of(f) for f in crd_set.per_crd]
        fallback = int(sum(f.get("object_fallback", 0) for f in crd_set.per_crd))
        if fallback:
            warnings.append(
                f"{fallback:,} CRDs' schemas cannot hold a {spec.shape} object of {fmt_bytes(spec.size)} (their "
                f"required fields alone are larger): their objects are taken as flat; a way out: --object-bytes "
                f"larger, or --object-sample with a real object"
            )
    if spec.shape == "nested":
        warnings.append(
            "nested objects (maps of maps) held about twice what the term predicts from the other shapes in the "
            "cells it was fitted on, still inside its interval: read the upper end "
            "(docs/explanation/objects.md#in-a-footprint-prediction)"
        )
    # Each CRD's objects once: (value, low, high) heap; their sum is term.predict's (bounds add).
    per_crd_heap = spec.count * np.array([term.per_object(f) for f in per_crd], dtype=float).reshape(-1, 3)
    heap = tuple(float(v) for v in per_crd_heap.sum(axis=0))
    seen = set()
    for f in (min(per_crd, key=lambda f: f["nodes"]), max(per_crd, key=lambda f: f["nodes"])):
        for w in term.extrapolations(f):
            if w not in seen:
                seen.add(w)
                warnings.append(
                    f"{w} (a way out: measure objects like these, scenarios/objects-shapes.toml with their "
                    f"shape and size, and refit with 'crdscale footprint fit objects')"
                )
    per_crd_rss = np.array([rss_of(tuple(row), term.rss_per_heap) for row in per_crd_heap], dtype=float)
    mean = {k: float(np.mean([f[k] for f in per_crd])) for k in ("bytes", "nodes")}
    return ObjectsPrediction(spec, term, heap, per_crd_heap[:, 0], per_crd_rss, spec.count * len(per_crd), mean)


# -- text


def _set_lines(label: str, features: dict[str, float], skipped: dict[str, int]) -> list[str]:
    out = [
        f"{label}: {features['crds']:,.0f} CRDs, {features['served_versions']:,.0f} served versions, "
        f"{features['properties']:,.0f} schema properties, {fmt_bytes(features['schema_bytes'])} of schemas, "
        f"depth {features['max_depth']:.0f}"
    ]
    if skipped:
        out.append(f"  skipped documents: {', '.join(f'{n} {kind}' for kind, n in sorted(skipped.items()))}")
    return out


def _row_lines(rows: dict[str, Row], *, signed: bool = False) -> list[str]:
    """Total and RSS first, then causes by size; the small ones summed on one line (one screen)."""

    def line(name: str, v: Row) -> str:
        interval = "" if v["low"] is None else f"  [{fmt_bytes(v['low'])}, {fmt_bytes(v['high'])}]"
        return f"  {name:<24} {fmt_bytes(v['value'], signed=signed):>12}{interval}"

    out = []
    total = rows.get(TOTAL, {}).get("value") or 0.0
    for target, name in ((TOTAL, "heap, total"), (RSS_PEAK, "RSS, peak growth"), (RSS, "RSS, settled growth")):
        if target in rows:
            out.append(line(name, rows[target]))
    causes = [(t, v) for t, v in rows.items() if t not in (TOTAL, RSS, RSS_PEAK)]
    minor = [(t, v) for t, v in causes if abs(v["value"] or 0.0) < MINOR_SHARE * abs(total)]
    for target, v in causes:
        if (target, v) not in minor:
            out.append(line(f"heap: {target}", v))
    if minor:
        rest = sum(v["value"] or 0.0 for _, v in minor)
        out.append(
            f"  {f'heap: {len(minor)} other causes':<24} {fmt_bytes(rest, signed=signed):>12}  "
            f"(each under {MINOR_SHARE:.0%}: {', '.join(t for t, _ in minor)})"
        )
    return out


def _top_lines(top: dict[str, Any]) -> list[str]:
    if not top["costliest"]:
        return []
    return [
        f"Costliest CRDs by predicted heap ({top['half']:,} of {top['crds']:,} make half of it; "
        f"share, cumulative share):",
        *(
            f"  {fmt_bytes(r['bytes']):>12}  {r['share']:6.1%}  {r['cumulative_share']:6.1%}  {r['name']}"
            for r in top["costliest"]
        ),
    ]


def _budget_lines(budget: dict[str, Any]) -> list[str]:
    whole = budget["whole_set"]
    safe = "" if budget["fit_at_high"] is None else f"; {budget['fit_at_high']:,} by the interval's upper bound"
    return (
        f"Budget {fmt_bytes(budget['budget'])} of RSS ({'peak' if budget['target'] == 'rss_peak' else 'settled'} growth) "
        f"beside a baseline of {fmt_bytes(budget['baseline'])}: "
        f"{budget['fit']:,} of {budget['crds']:,} CRDs fit, cheapest first, by the prediction{safe}.\n"
        f"  The whole set adds {fmt_bytes(whole['value'])} [{fmt_bytes(whole['low'])}, {fmt_bytes(whole['high'])}]."
    ).split("\n")


# -- one set


@dataclass
class FootprintPrediction:
    """What a CRD set adds to kube-apiserver in ``state``, by :func:`predict_footprint`.

    ``rows``: target (a heap cause, ``total``, ``rss``, ``rss_peak``) -> ``{"value", "low", "high"}``
    bytes (95 % prediction interval; None where unknown), causes by size, then the total and RSS;
    ``top``: the costliest CRDs (:func:`~crdscale.footprint.model.top_crds`); ``budget``: how many CRDs fit
    (:func:`~crdscale.footprint.model.budget_fit`) or None; ``objects``: what the custom resources add, or
    None; ``warnings``: one line each (extrapolation, objects, budget without baseline)."""

    chosen: ChosenModel
    crd_set: CrdSet
    state: str
    rows: dict[str, Row]
    top: dict[str, Any]
    budget: dict[str, Any] | None = None
    objects: ObjectsPrediction | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def features(self) -> dict[str, float]:
        return self.crd_set.features()

    def to_dict(self) -> dict[str, Any]:
        """The data of :meth:`to_json`."""
        model, rows = self.chosen.model, self.rows
        return {
            "kube_version": model.kube_version,
            "source": self.crd_set.label,
            "state": self.state,
            "state_definition": STATE_DEFINITIONS[self.state],
            "features": self.features,
            "skipped": self.crd_set.skipped,
            "predictions": [{"target": t, **v} for t, v in rows.items()],
            "served_heap_bytes": rows.get(TOTAL),
            "rss_bytes": rows.get(RSS),
            "rss_peak_bytes": rows.get(RSS_PEAK),
            "top": self.top,
            "budget": self.budget,
            "objects": None if self.objects is None else self.objects.to_dict(),
            "warnings": self.warnings,
            "definitions": definitions(),
            "model": model_json(self.chosen),
        }

    def to_json(self) -> str:
        """``crdscale footprint -o json``: the keys its help lists, sizes in bytes."""
        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        """``crdscale footprint``'s table: the set, the prediction by cause, the costliest CRDs, the budget and
        the model used (the warnings are not in it)."""
        model = self.chosen.model
        lines = _set_lines(self.crd_set.label, self.features, self.crd_set.skipped)
        if self.objects is not None:
            lines.append(f"  objects: {self.objects.describe()}")
        lines.append(
            f"Predicted on kube-apiserver v{model.kube_version}, {self.state}: {STATE_DEFINITIONS[self.state]} "
            f"(95% prediction interval):"
        )
        lines += _row_lines(self.rows) + _top_lines(self.top)
        if self.budget is not None:
            lines += _budget_lines(self.budget)
        lines.append(self.chosen.describe())
        return "\n".join(lines)


def predict_footprint(
    source: str | Path | None = None,
    *,
    kube_version: str = "1.37.1",
    model: str | Path | None = None,
    shipped: bool = False,
    state: str = SERVED,
    objects: int | ObjectSpec | None = None,
    object_shape: str | None = None,
    object_bytes: int | str | None = None,
    object_sample: str | Path | None = None,
    top: int = 10,
    budget: int | str | None = None,
    baseline: int | str | None = None,
    kubeconfig: KubeconfigFiles | None = None,
    context: str | None = None,
) -> FootprintPrediction:
    """Predict what the CRD set ``source`` adds to kube-apiserver ``kube_version`` (``crdscale footprint``).

    Parameters:
        source: a YAML/JSON file or tree, ``-`` for stdin, a Crossplane package or a Helm chart; None with
            ``kubeconfig`` for the CRDs a cluster has installed.
        kube_version: the kube-apiserver version whose model to use.
        model: a model file to use instead of this machine's calibrated one or the shipped one.
        shipped: use the shipped model even when one was calibrated on this machine.
        state: one of :data:`~crdscale.footprint.states.STATES` (what the cluster does with the CRDs).
        objects: custom resources per CRD (:func:`object_spec`), or an :class:`ObjectSpec` that says all.
        object_shape: their shape (``flat``, ``nested``, ``list`` or ``schema``: each CRD's own; the default).
        object_bytes: JSON bytes of each as sent (default 1 KiB; a number or a size such as ``"4KiB"``).
        object_sample: a file of real custom resources, whose mean the objects are taken to be like.
        top: how many of the costliest CRDs to list.
        budget: how many CRDs fit in this much RSS growth (peak when the model has a peak excess, else settled).
        baseline: the server's RSS without these CRDs, beside ``budget`` (default 0, with a warning).
        kubeconfig: a resolved :class:`~crdscale.cluster.kubeconfig.KubeconfigFiles` (with ``source`` None).
        context: its context (default: its current context).

    Returns a :class:`FootprintPrediction`. UsageError (one line) for a version without a model or terms,
    options that do not go together, or a source without v1 CRDs.
    """
    if isinstance(objects, ObjectSpec):
        spec = objects
    else:
        spec = object_spec(objects, shape=object_shape, size=object_bytes, sample=object_sample)
    budget_bytes, baseline_bytes = parse_size("--budget", budget), parse_size("--baseline", baseline) or 0
    if budget_bytes is not None and budget_bytes <= baseline_bytes:
        raise UsageError("--budget must be larger than --baseline")
    chosen = choose(kube_version, model=model, shipped=shipped)
    model_ = chosen.model
    if state not in available_states(chosen):
        raise UsageError(
            f"no state terms for kube-apiserver v{model_.kube_version}: --state {state} needs "
            f"crdscale/footprint/models/states-v{model_.kube_version}.json ('crdscale footprint fit states'); "
            f"'served' works without"
        )
    term = object_term(model_.kube_version) if spec is not None else None
    crd_set = read_crd_set(source, spec, kubeconfig=kubeconfig, context=context)
    return footprint_of(
        chosen,
        crd_set,
        state=state,
        spec=spec,
        term=term,
        top=top,
        budget_bytes=budget_bytes,
        baseline_bytes=baseline_bytes,
        baseline_given=baseline is not None,
    )


def footprint_of(
    chosen: ChosenModel,
    crd_set: CrdSet,
    *,
    state: str = SERVED,
    spec: ObjectSpec | None = None,
    term: ObjectTerm | None = None,
    top: int = 10,
    budget_bytes: int | None = None,
    baseline_bytes: int = 0,
    baseline_given: bool = False,
) -> FootprintPrediction:
    """The prediction of :func:`predict_footprint` for a CRD set already read (``crd_set``) with the model
    ``chosen``, its options checked: what ``footprint --activate`` predicts twice, for the whole set and the
    activated part, from one reading."""
    model_ = chosen.model
    features = crd_set.features()
    # The served state without pandas (what most calls ask; pandas alone costs ~0.4 CPU-s to import).
    if state == SERVED:
        predicted = prediction_rows(model_, features)
    else:
        predicted = list(predict_state(model_, chosen.states, features, state).itertuples(index=False))
    warnings = crd_set.warnings + _extrapolations(model_, features)
    objects_ = predict_objects(spec, term, crd_set, warnings) if spec is not None else None
    if objects_ is not None:
        predicted = with_objects(predicted, objects_.heap, term.rss_per_heap)
    extra_heap = objects_.per_crd_heap if objects_ is not None else None
    ranked = top_crds(model_, crd_set.names, crd_set.per_crd, count=top, extra=extra_heap)
    fit = None
    if budget_bytes is not None:
        # A memory limit must hold the peak; a model without a peak excess can only say settled.
        fit = budget_fit(
            model_,
            crd_set.per_crd,
            budget_bytes,
            baseline=baseline_bytes,
            target=RSS_PEAK if model_.peak is not None else RSS,
            extra=objects_.per_crd_rss if objects_ is not None else None,
        )
        fit = {
            k: (_clean(v) if not isinstance(v, dict) else {a: _clean(b) for a, b in v.items()}) for k, v in fit.items()
        }
        if not baseline_given:
            warnings.append(
                "--budget without --baseline: the budget is compared with RSS growth alone; pass the server's RSS "
                "without these CRDs (e.g. --baseline 1.5GiB, from 'crdscale top' or your metrics)"
            )
    return FootprintPrediction(chosen, crd_set, state, _rows(predicted), ranked, fit, objects_, warnings)


# -- two sets


def _change(name: str, changes: dict[str, Any]) -> str:
    for kind in ("added", "removed", "changed"):
        if name in changes[kind]:
            return kind
    return "unchanged"


@dataclass
class FootprintDifference:
    """What going from CRD set ``old`` to ``new`` adds, by :func:`predict_upgrade`: ``rows`` as
    :class:`FootprintPrediction`'s (differences: signed, additive intervals), ``changes`` (CRDs added,
    removed, changed, and how many unchanged) and ``largest``: the CRDs that move the heap most."""

    chosen: ChosenModel
    old: CrdSet
    new: CrdSet
    rows: dict[str, Row]
    changes: dict[str, Any]
    largest: list[dict[str, Any]]
    names: int  # CRDs in either set
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        old, new = self.old, self.new
        return {
            "kube_version": self.chosen.model.kube_version,
            "old": {"source": old.label, "features": old.features(), "skipped": old.skipped},
            "new": {"source": new.label, "features": new.features(), "skipped": new.skipped},
            "changes": self.changes,
            "difference": [{"target": t, **v} for t, v in self.rows.items()],
            "largest": self.largest,
            "warnings": self.warnings,
            "definitions": definitions(),
            "model": model_json(self.chosen),
        }

    def to_json(self) -> str:
        """``crdscale footprint OLD NEW -o json``."""
        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        """``crdscale footprint OLD NEW``'s table."""
        changes = self.changes
        lines = _set_lines(f"OLD {self.old.label}", self.old.features(), self.old.skipped)
        lines += _set_lines(f"NEW {self.new.label}", self.new.features(), self.new.skipped)
        lines += [
            f"CRDs: {len(changes['added'])} added, {len(changes['removed'])} removed, "
            f"{len(changes['changed'])} changed, {changes['unchanged']} unchanged",
            f"What NEW adds over OLD on kube-apiserver v{self.chosen.model.kube_version} (95% prediction interval, "
            f"the two sets taken to stray from the model alike):",
            *_row_lines(self.rows, signed=True),
        ]
        if self.largest:
            lines.append(f"CRDs that move the predicted heap most (of {self.names}):")
            lines += [f"  {fmt_bytes(r['bytes'], signed=True):>12}  {r['change']:<8} {r['name']}" for r in self.largest]
        lines.append(self.chosen.describe())
        return "\n".join(lines)


def predict_upgrade(
    old: str | Path,
    new: str | Path,
    *,
    kube_version: str = "1.37.1",
    model: str | Path | None = None,
    shipped: bool = False,
    top: int = 10,
) -> FootprintDifference:
    """What going from the CRD set ``old`` to ``new`` adds (``crdscale footprint OLD NEW``), with an interval that
    takes the two sets as straying from the model alike (:func:`~crdscale.footprint.model.predict_difference`),
    and the ``top`` CRDs that move the predicted heap most."""
    chosen = choose(kube_version, model=model, shipped=shipped)
    model_ = chosen.model
    before_set, after_set = read_crd_set(old), read_crd_set(new)
    old_f, new_f = before_set.features(), after_set.features()
    rows = _rows(predict_difference(model_, old_f, new_f).itertuples(index=False))
    before = dict(zip(before_set.names, before_set.per_crd, strict=True))
    after = dict(zip(after_set.names, after_set.per_crd, strict=True))
    changes: dict[str, Any] = {
        "added": sorted(set(after) - set(before)),
        "removed": sorted(set(before) - set(after)),
        "changed": sorted(n for n in set(after) & set(before) if after[n] != before[n]),
    }
    changes["unchanged"] = len(set(after) & set(before)) - len(changes["changed"])
    # Which CRDs move the heap most: each CRD's cost in NEW minus in OLD (0 where absent).
    names = sorted(set(after) | set(before))
    zero = dict.fromkeys(model_.features, 0.0) | {"served_versions": 0.0}
    cost_new = dict(zip(names, crd_costs(model_, [after.get(n, zero) for n in names]), strict=True))
    cost_old = dict(zip(names, crd_costs(model_, [before.get(n, zero) for n in names]), strict=True))
    moved = sorted(names, key=lambda n: -abs(cost_new[n] - cost_old[n]))[:top]
    largest = [
        {"name": n, "bytes": float(cost_new[n] - cost_old[n]), "change": _change(n, changes)}
        for n in moved
        if cost_new[n] != cost_old[n]
    ]
    warnings = before_set.warnings + after_set.warnings + _extrapolations(model_, new_f)
    return FootprintDifference(chosen, before_set, after_set, rows, changes, largest, len(names), warnings)


# -- the model itself


@dataclass
class ModelExplanation:
    """The model a prediction of its version would use, by :func:`explain_model` (``crdscale footprint
    --explain``)."""

    chosen: ChosenModel

    def to_dict(self) -> dict[str, Any]:
        model = self.chosen.model
        return {
            "kube_version": model.kube_version,
            "origin": self.chosen.origin,
            "path": str(self.chosen.path),
            "definitions": definitions(),
            "model": model.to_dict(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        return "\n".join(explain_lines(self.chosen))


def explain_model(kube_version: str = "1.37.1", *, model: str | Path | None = None, shipped: bool = False):
    """The model of ``kube_version`` (:func:`choose`) with its definitions, coefficients and provenance."""
    return ModelExplanation(choose(kube_version, model=model, shipped=shipped))


def explain_lines(chosen: ChosenModel) -> list[str]:
    """The text of --explain: what the model predicts, how, from which runs."""
    model, prov = chosen.model, provenance(chosen)
    out = [f"Footprint model of kube-apiserver v{model.kube_version} ({chosen.origin}: {chosen.path})", "Definitions:"]
    for name, text in definitions().items():
        out += textwrap.wrap(text, 100, initial_indent=f"  {name + ':':<9} ", subsequent_indent=" " * 12)
    out.append(
        f"Model: per target, added bytes = {' + '.join(f'c*{f}' for f in model.features)} (least squares through "
        f"the origin, one observation per run, misfit "
        + (
            "proportional to the predicted total heap: multiplicative"
            if model.error_scale == PREDICTED_TOTAL
            else f"scaling with {model.error_scale}"
        )
        + ")."
    )
    ranges = ", ".join(f"{k} {v[0]:,.0f}-{v[1]:,.0f}" for k, v in model.ranges.items())
    if ranges:
        out.append(f"Fitted on: {ranges} (outside it a prediction warns that it extrapolates).")
    for target in (TOTAL, RSS):
        if target in model.targets:
            m = model.targets[target]
            coefs = ", ".join(f"{f} {fmt_bytes(c)}" for f, c in zip(model.features, m.coef, strict=True))
            out.append(f"  {target}: {coefs} per unit; {m.dof} degrees of freedom")
    if isinstance(model.peak, PeakExcess):
        out.append(
            f"Peak RSS growth = settled growth + {fmt_bytes(math.exp(model.peak.log_mean))} (geometric mean of "
            f"{model.peak.runs} runs' peak minus settled growth, log sd {math.sqrt(model.peak.log_var):.3f})."
        )
    elif model.peak is not None:
        out.append(
            f"Peak RSS growth = settled growth x {math.exp(model.peak.log_mean):.3f} (geometric mean of "
            f"{model.peak.runs} runs' peak/settled, log sd {math.sqrt(model.peak.log_var):.3f})."
        )
    else:
        out.append("No peak excess in this model: no peak RSS prediction (refit or calibrate to get one).")
    out += _state_lines(chosen)
    out += _object_lines(model.kube_version)
    out.append(
        f"Provenance: {prov.get('experiment', '?')}; {prov.get('method', '?')}; {prov.get('machine', '?')}; "
        f"{prov.get('date', '?')}"
    )
    uses = prov.get("uses") or {}
    if not uses:
        out.append("  (no record of which runs were used for what: a model from before crdscale kept one)")
    for role, items in uses.items():
        out.append(f"  {role}:")
        for item in items:
            out += textwrap.wrap(str(item), 100, initial_indent="    - ", subsequent_indent="      ")
    return out


def _object_lines(version: str) -> list[str]:
    """--explain: the per-object term of ``version`` (--objects), or that there is none."""
    term = read_object_term(version)
    if term is None:
        return ["Objects (--objects): no per-object term for this version."]
    names = {"one": "per object", "nodes": "per JSON value", "bytes": "per JSON byte"}
    coefs = ", ".join(
        f"{names[c]} {fmt_bytes(v) if abs(v) >= 10 else f'{v:.2f} B'}"
        for c, v in zip(term.columns, term.coef, strict=True)
    )
    ratio = term.rss_per_heap
    prov = term.provenance
    return [
        f"Objects (--objects): heap per custom resource = {coefs} (form {term.form!r}, chosen by leave-one-cell-out "
        f"on {len((prov.get('uses') or {}).get('object_fitting', []))} cells: {prov.get('experiment', '?')});",
        f"  interval x/÷ exp(t x {term.log_sd:.3f}) on {term.dof} degrees of freedom; settled RSS per heap byte "
        f"{ratio[0]:.2f} [{ratio[1]:.2f}, {ratio[2]:.2f}]; fitted on objects of "
        + ", ".join(
            f"{a:,.0f}-{b:,.0f} {'JSON bytes' if k == 'bytes' else 'JSON values'}" for k, (a, b) in term.ranges.items()
        ),
    ]


def _state_lines(chosen: ChosenModel) -> list[str]:
    """--explain: how each state besides served follows from the served prediction, with its terms."""
    terms = chosen.states
    if terms is None:
        return ["States: served only (no state terms for this version)."]
    shares = ", ".join(f"{c} {v:.0%}" for c, v in sorted(terms.installed_shares.items(), key=lambda kv: -kv[1]))
    value, low, high = terms.watch_per_crd
    v2 = ", ".join(f"{f} {fmt_bytes(c)}" for f, c in zip(terms.openapi_v2_features, terms.openapi_v2.coef, strict=True))
    return [
        "States (--state), from the served prediction:",
        f"  installed: each cause times its share already there once installed ({shares}; other causes 0)",
        f"  watched: installed + {fmt_bytes(value)} [{fmt_bytes(low)}, {fmt_bytes(high)}] per CRD "
        f"(kube-controller-manager's watches), at most served",
        f"  openapi-v2: served + the fetched /openapi/v2 spec: {v2} per unit "
        f"({terms.openapi_v2.dof} degrees of freedom)",
    ]
