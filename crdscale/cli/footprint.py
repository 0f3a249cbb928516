"""Predict what installing and serving a CRD set adds to kube-apiserver's heap and RSS, without a server.

Examples:
  crdscale footprint crds/
  crdscale footprint provider-aws-v0.47.0.xpkg --kube-version 1.24.0
  crdscale footprint charts/my-operator/                 # a Helm chart: crds/ (and templates, with helm)
  kubectl get crd -o yaml | crdscale footprint -
  crdscale footprint --kubeconfig ~/.kube/config         # the CRDs a cluster has installed (read-only)
  crdscale footprint crds/ --budget 8GiB --baseline 1.5GiB
  crdscale footprint provider-v1/ provider-v2/           # what an upgrade adds
  crdscale footprint crds/ -o json
  crdscale footprint crds/ --objects 200                # and 200 custom resources of each CRD
  crdscale footprint crds/ --objects 50 --object-sample bucket.yaml
  crdscale footprint --explain --kube-version 1.24.0    # the model: definitions, intervals, which runs did what
  crdscale footprint --calibrate                    # refit the model on this machine (~8 min)
  crdscale footprint --calibrate --kube-version 1.24.0 --out /data/runs

CRD_SOURCE: a YAML/JSON file or a tree of them (multi-document streams, kubectl
'List' output, OLM bundles); '-' for stdin; a Crossplane package (.xpkg image
tarball, or its package.yaml); a Helm chart (directory or .tgz: crds/, and
templates/ rendered by 'helm template' when helm is on PATH, else a warning).
With --kubeconfig/--context and no CRD_SOURCE: the CRDs installed in that
cluster (one LIST, nothing written). Only apiextensions.k8s.io/v1 CRDs count;
an input without any is refused (exit 5) naming what it holds instead, as
'crdscale install' does. A CRD over etcd's 1.5 MiB request limit, or YAML whose
aliases expand past that many nodes, is refused too (exit 5).

Describes the CRD set (CRDs, served versions, schema properties and bytes,
depth) and applies the linear model fitted on a sweep of generated CRD sets
for that kube-apiserver version: heap added by cause (zap counters, watch
caches, OpenAPI, schemas...), the total, and RSS, each with a 95% prediction
interval. "heap" is the live heap after a GC. RSS comes as two quantities:
"RSS, settled growth" is resident memory once the set is installed and served
and the server settled (at the last step's heap profile) minus RSS at 0 CRDs;
"RSS, peak growth" is the highest RSS sampled (every second) while installing
and serving, minus the same baseline: what a memory limit must hold. Peak is
settled growth plus a peak excess (peak minus settled growth, an install's
transient burst, about the same for 160 and 1,800 CRDs) measured on the runs
the model's provenance names. Intervals are lognormal with the fit's mean and variance,
so none goes below zero; a cause the linear model puts at or below zero shows 0
with an interval from 0. Each run of the sweep counts as one observation, and
a run strays from the model by a share of its predicted heap (a multiplicative
error, chosen by predicting each fitting run from the others), so the interval
reflects how far whole runs stray, as a share, whatever the set's size; it is
still a floor on the uncertainty for sets unlike the sweep's. A set outside
what the fit saw (CRD count, served versions per CRD, properties per served
version) gets a warning on stderr.

--state says what the cluster does with the CRDs (default served):
  installed   Established, nothing watches them (no kube-controller-manager:
              envtest, a bare kube-apiserver): OpenAPI, the CRD objects;
  watched     installed, and kube-controller-manager's garbage collector and
              quota controller watch each CRD (every real cluster, before a
              provider runs): each resource gets its storage; at most served;
  served      installed, and a provider's informers LIST and watch every
              served version (what the model is fitted on);
  openapi-v2  served, and a client (kubectl apply/explain, Helm) fetched
              /openapi/v2, whose spec the server then keeps.
The other states follow from the served prediction with terms measured per
version (crdscale/footprint_models/states-v<version>.json, their runs in the
provenance): installed keeps each cause's share measured once installed;
watched adds kube-controller-manager's per-CRD delta; openapi-v2 adds the
fetched spec (per served version and per property, scenarios/openapi-v2.toml).
Their totals' bounds add the served bounds (scaled) and the term's: wider
than a joint interval. RSS moves with the heap (scaled by the state's total
over the served one): not fitted per state. --budget and OLD NEW are for the
served state; --top ranks CRDs by their served cost.

--objects N adds N custom resources per CRD: what each adds once the watch
cache holds it (its body as Unstructured maps, managedFields parsed into maps,
its metadata, the store), a term measured per version on runs of objects of
several shapes and sizes (scenarios/objects-shapes.toml, kube-controller-manager
watching them; crdscale/footprint_models/objects-v<version>.json), linear in
the object's JSON values and bytes: a nested object holds several times what a
flat one of the same bytes does. Describe them with --object-shape (flat,
nested, list, or schema: each CRD's own schema, the default) and
--object-bytes (default 1KiB), or give real ones: --object-sample FILE
(kubectl get KIND NAME -o yaml). They add a "custom-resources" row to the
heap, and to RSS the heap times the settled RSS per heap byte the runs
measured; --top and --budget count each CRD's objects with it.

--explain prints the model instead of a prediction (no CRD_SOURCE): the
definitions, how intervals are made, its coefficients, and its provenance:
which runs were used for fitting, feature selection, the peak excess, and
which were held out for validation (a validation set informs no decision).

Answers: the CRDs that cost most (--top N, default 10; the model is linear, so
a CRD's share is its own features times the coefficients) and how many of them
make half the predicted heap; --budget SIZE: how many of the set's CRDs fit in
that much RSS beside --baseline SIZE (the server's RSS without them), cheapest
first, by the prediction and by its interval's upper bound (the safe answer),
against peak RSS growth (settled when the model has no peak excess).
Two sources OLD NEW: what going from OLD to NEW adds per cause, with an interval
that takes the two sets as straying from the model alike per served version
(two releases of one provider), and which CRDs were added, removed or changed.

Which model: one calibrated on this machine for that version when there is
one (--calibrate), else the one shipped with crdscale, else --model FILE;
--shipped ignores a calibrated one. The model used, and its provenance
(experiment, machine, date), is printed below the table.

--calibrate runs the footprint sweep (crdscale/footprint_models/sweep.toml,
or --sweep FILE: a scenario with a [matrix]) on a local control plane, one
cell after another with progress and an ETA, as an experiment directory under
--out (default ./runs), fits it and writes the model to this machine's cache
(or to --model FILE). Ctrl-C stops it like 'crdscale run' does: processes
stopped, partial runs kept, no model written.

-o json gives {"kube_version", "source", "state", "state_definition",
"features", "skipped", "predictions":
[{"target", "value", "low", "high"}], "served_heap_bytes": {...}, "rss_bytes":
{...} (settled growth), "rss_peak_bytes": {...} (peak growth, null without a
peak excess), "top": {"target", "crds", "half", "costliest": [{"name", "bytes",
"share", "cumulative_share"}]}, "budget": {"budget", "baseline", "target", "crds",
"fit", "fit_at_high", "whole_set"} or null, "objects": {"per_crd", "total",
"shape", "bytes_as_sent", "sample", "mean_features", "heap_bytes", "rss_bytes",
"definition", "term"} or null, "warnings": [...], "definitions":
{...}, "model": {"origin": "calibrated"|"shipped"|"file", "path", "features",
"provenance", "ranges", "states"}}; with OLD NEW, {"old", "new", "changes": {"added",
"removed", "changed", "unchanged"}, "difference": [{"target", "value", "low",
"high"}], ...}; with --calibrate, {"model_path", "experiment", "model": ...};
with --explain, {"kube_version", "origin", "path", "definitions", "model": ...}.
Sizes are bytes.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import dataclass
from typing import Any

from crdscale.cli.common import add_cluster_arguments
from crdscale.errors import UsageError
from crdscale.units import fmt_bytes, is_missing

log = logging.getLogger(__name__)

DEFINITIONS = {
    "heap": "live Go heap after a GC, by cause (crdscale.analysis.attribution), once the set is installed and served",
    # The two RSS quantities: crdscale.analysis.footprint.RSS_DEFINITIONS (rss, rss_peak), added below.
    "interval": (
        "95% prediction interval for one new run: the lognormal with the fit's mean and variance "
        "(multiplicative error), never below zero; a cause predicted at or below zero shows 0 with [0, upper]. "
        "OLD NEW differences can be negative and have additive intervals"
    ),
}
# In the text table, causes under this share of the predicted heap are summed on one line.
MINOR_SHARE = 0.02


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "sources",
            metavar="CRD_SOURCE",
            nargs="*",
            help="CRDs: a file, directory, '-', .xpkg, Helm chart; two (OLD NEW) to see what an upgrade adds",
        )
        parser.add_argument(
            "--kube-version",
            default="1.37.1",
            metavar="V",
            help="kube-apiserver version whose coefficients to use or fit (default 1.37.1)",
        )
        parser.add_argument(
            "--model",
            metavar="FILE",
            help="use this model file; with --calibrate, write the model there instead of the cache",
        )
        parser.add_argument(
            "--shipped",
            action="store_true",
            help="use the model shipped with crdscale even when one was calibrated on this machine",
        )
        parser.add_argument(
            "--top", type=int, default=10, metavar="N", help="list the N CRDs that cost most (default 10; 0: none)"
        )
        parser.add_argument(
            "--budget", metavar="SIZE", help="how many of the CRDs fit in this much RSS (e.g. 8GiB, 8Gi, 6G)"
        )
        parser.add_argument(
            "--baseline",
            metavar="SIZE",
            help="--budget: the server's RSS without these CRDs (default 0: the budget is for growth alone)",
        )
        parser.add_argument(
            "--state",
            choices=("installed", "watched", "served", "openapi-v2"),
            default="served",
            help="what the cluster does with the CRDs (default served; each defined below and in -o json)",
        )
        parser.add_argument(
            "--objects",
            type=int,
            metavar="N",
            help="custom resources per CRD (default 0: the CRDs alone); their heap comes from the version's "
            "per-object term",
        )
        parser.add_argument(
            "--object-shape",
            # crdscale.crds.objects.SHAPES, spelled out: importing it would cost every command ~60 ms (a test
            # keeps the two equal)
            choices=("flat", "nested", "list", "schema"),
            help="--objects: their shape as crdscale's runs write them (default schema: each CRD's own schema)",
        )
        parser.add_argument(
            "--object-bytes", metavar="SIZE", help="--objects: JSON bytes of each as sent (default 1KiB)"
        )
        parser.add_argument(
            "--object-sample",
            metavar="FILE",
            help="--objects: real custom resources (YAML/JSON, e.g. 'kubectl get KIND NAME -o yaml'); every "
            "object is taken to be like their mean, instead of --object-shape/--object-bytes",
        )
        add_cluster_arguments(parser)
        parser.add_argument(
            "--calibrate",
            action="store_true",
            help="run the footprint sweep on a local control plane, fit, and keep the model",
        )
        parser.add_argument(
            "--out", metavar="DIR", help="--calibrate: parent of the sweep's experiment directory (default: ./runs)"
        )
        parser.add_argument(
            "--sweep",
            metavar="SCENARIO.toml",
            help="--calibrate: the sweep to run (a scenario with a [matrix]; default: the shipped one)",
        )
        parser.add_argument(
            "--features",
            metavar="F,F",
            help="--calibrate: features to fit (default: the shipped model's, else crds,served_versions,properties)",
        )
        parser.add_argument(
            "--explain",
            action="store_true",
            help="print the model (definitions, intervals, coefficients, which runs fitted and validated it)",
        )
        parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="stdout format")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        if args.explain:
            if args.sources or args.calibrate or args.kubeconfig or args.context:
                raise UsageError("--explain takes no CRD_SOURCE, cluster or --calibrate: it describes the model")
            return _explain(args)
        if args.calibrate:
            if args.sources or args.shipped:
                raise UsageError("--calibrate takes no CRD_SOURCE and no --shipped")
            return _calibrate(args)
        if args.out or args.sweep or args.features:
            raise UsageError("--out, --sweep and --features go with --calibrate")
        cluster = bool(args.kubeconfig or args.context)
        if cluster and args.sources:
            raise UsageError("--kubeconfig/--context read the CRDs a cluster has; give no CRD_SOURCE with them")
        if not args.sources and not cluster:
            raise UsageError("footprint needs a CRD_SOURCE (or --kubeconfig for a cluster's CRDs, or --calibrate)")
        if len(args.sources) > 2:
            raise UsageError("give one CRD_SOURCE, or two (OLD NEW) to see what an upgrade adds")
        if args.shipped and args.model:
            raise UsageError("--shipped and --model choose different models; give one")
        if args.top < 0:
            raise UsageError("--top must be >= 0")
        if args.baseline and not args.budget:
            raise UsageError("--baseline goes with --budget")
        if args.budget and len(args.sources) == 2:
            raise UsageError("--budget takes one CRD set, not OLD NEW")
        args.budget_bytes = _size("--budget", args.budget)
        args.baseline_bytes = _size("--baseline", args.baseline) or 0
        if args.budget_bytes is not None and args.budget_bytes <= args.baseline_bytes:
            raise UsageError("--budget must be larger than --baseline")
        if args.state != "served" and (args.budget or len(args.sources) == 2):
            raise UsageError(
                f"--state {args.state} goes with one CRD set and no --budget (budgets and upgrades are "
                f"predicted for the served state)"
            )
        args.objects_spec = _object_spec(args)
        if args.objects_spec is not None and len(args.sources) == 2:
            raise UsageError(
                "--objects goes with one CRD set: a cluster's objects do not come with a release; predict OLD "
                "and NEW each with --objects to compare"
            )
        if len(args.sources) == 2:
            return _difference(args)
        return _predict(args)


@dataclass
class _ObjectSpec:
    """What --objects and its options say: ``count`` per CRD, and either a ``shape`` and ``size`` (crdscale's
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


def _object_spec(args: argparse.Namespace) -> _ObjectSpec | None:
    """--objects and its options, checked; None without --objects (or with 0)."""
    options = [
        f
        for f, v in (
            ("--object-shape", args.object_shape),
            ("--object-bytes", args.object_bytes),
            ("--object-sample", args.object_sample),
        )
        if v is not None
    ]
    if args.objects is None or args.objects == 0:
        if options:
            raise UsageError(f"{' and '.join(options)} go with --objects N (custom resources per CRD)")
        return None
    if args.objects < 0:
        raise UsageError("--objects must be >= 0 (custom resources per CRD)")
    if args.object_sample and (args.object_shape or args.object_bytes):
        raise UsageError("--object-sample describes the objects itself; give it or --object-shape/--object-bytes")
    size = _size("--object-bytes", args.object_bytes) if args.object_bytes else 1024
    if args.object_sample:
        return _ObjectSpec(args.objects, "sample", 0, *_read_sample(args.object_sample))
    from crdscale.crds.objects import check_size

    check_size(size, "--object-bytes")
    return _ObjectSpec(args.objects, args.object_shape or "schema", size)


def _read_sample(path: str) -> tuple[dict[str, float], str]:
    """The mean features of the custom resources in ``path`` (documents, or a kubectl List's items), read by
    the loader CRD files go through."""
    from pathlib import Path

    from crdscale.analysis.objectterm import mean_features
    from crdscale.crds.load import objects_in_text
    from crdscale.errors import CRDError

    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise UsageError(f"--object-sample {path}: {err.strerror}") from None
    try:
        objects = objects_in_text(Path(path), data)
    except CRDError as err:
        raise UsageError(f"--object-sample {path}: not YAML or JSON objects ({err})") from None
    kinds = {o.get("kind") for o in objects}
    if not objects or not all(o.get("apiVersion") and o.get("kind") for o in objects):
        raise UsageError(f"--object-sample {path}: no Kubernetes objects (each needs apiVersion and kind)")
    if kinds & {"CustomResourceDefinition"}:
        raise UsageError(f"--object-sample {path}: holds CRDs; give custom resources (objects of a CRD's kind)")
    return mean_features(objects), f"{path} ({len(objects)} object{'s' if len(objects) != 1 else ''})"


def _definitions() -> dict[str, str]:
    from crdscale.analysis.footprint import RSS_DEFINITIONS, STATE_DEFINITIONS

    return {**DEFINITIONS, **RSS_DEFINITIONS, **{f"state {k}": v for k, v in STATE_DEFINITIONS.items()}}


def _choose(args: argparse.Namespace):
    """The model for --kube-version/--model/--shipped; a shipped model of another patch release of the
    same minor stands in for a version none was shipped for, with a warning that says so."""
    from crdscale.footprint_models import choose_model

    chosen = choose_model(args.kube_version, path=args.model, shipped_only=args.shipped, same_minor=True)
    if chosen.stands_in_for:
        log.warning(
            f"no model shipped for kube-apiserver v{chosen.stands_in_for}; using v{chosen.model.kube_version}'s "
            f"(same minor release, but patch releases can differ: v1.24.17 holds a third less served heap than "
            f"v1.24.0 on the 1,848 terrajet CRDs, a backported zap fix; 'crdscale footprint --calibrate "
            f"--kube-version {chosen.stands_in_for}' fits its own)"
        )
    return chosen


def _explain(args: argparse.Namespace) -> int:

    chosen = _choose(args)
    model = chosen.model
    if args.output == "json":
        _print_json(
            {
                "kube_version": model.kube_version,
                "origin": chosen.origin,
                "path": str(chosen.path),
                "definitions": _definitions(),
                "model": model.to_dict(),
            }
        )
        return 0
    for line in explain_lines(chosen):
        print(line)
    return 0


def explain_lines(chosen) -> list[str]:
    """The text of --explain: what the model predicts, how, from which runs."""
    import math
    import textwrap

    from crdscale.analysis.footprint import PREDICTED_TOTAL, RSS, PeakExcess
    from crdscale.analysis.targets import TOTAL

    model, prov = chosen.model, _provenance(chosen)
    out = [f"Footprint model of kube-apiserver v{model.kube_version} ({chosen.origin}: {chosen.path})", "Definitions:"]
    for name, text in _definitions().items():
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
    from crdscale.footprint_models import read_object_term

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


def _state_lines(chosen) -> list[str]:
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


def _size(flag: str, text: str | None) -> int | None:
    from crdscale.units import parse_bytes

    if text is None:
        return None
    try:
        return parse_bytes(text)
    except ValueError as err:
        raise UsageError(f"{flag}: {err}") from None


@dataclass
class _CrdSet:
    """One CRD set as the prediction sees it: where from, names, per-CRD features, what was skipped."""

    label: str
    names: list[str]
    per_crd: list[dict[str, float]]
    skipped: dict[str, int]
    warnings: list[str]

    def features(self) -> dict[str, float]:
        from crdscale.analysis.footprint import add_features

        return add_features(self.per_crd)


def _read_set(args: argparse.Namespace, source: str | None, objects: _ObjectSpec | None = None) -> _CrdSet:
    """Load, refuse a set without v1 CRDs (the wording install uses), and measure each CRD (and, for
    generated objects, the object each CRD's custom resources would be)."""
    import functools

    from crdscale.analysis.footprint import crd_features
    from crdscale.analysis.objectterm import crd_and_object_features
    from crdscale.crds.load import cluster_crds, load_crds, require_crds

    measure = crd_features
    if objects is not None and objects.sample is None:
        measure = functools.partial(crd_and_object_features, shape=objects.shape, size=objects.size)

    if source is None:
        from crdscale.cli.common import resolve_kubeconfig
        from crdscale.cluster.clients import connect

        cluster = connect(resolve_kubeconfig(args.kubeconfig), args.context)
        try:
            loaded = cluster_crds(cluster, measure=measure)
        finally:
            cluster.close()
        label = f"cluster {cluster.server}"
    else:
        loaded = load_crds(source, measure=measure)
        label = "stdin" if source == "-" else source
    require_crds(loaded, label)
    return _CrdSet(label, loaded.names, loaded.measures, dict(loaded.skipped), list(loaded.warnings))


def _clean(v):
    return None if is_missing(v) else v


def _rows(rows) -> dict[str, dict[str, float | None]]:
    """``(target, value, low, high)`` rows (or a DataFrame's itertuples) by target."""
    return {
        target: {"value": _clean(value), "low": _clean(low), "high": _clean(high)} for target, value, low, high in rows
    }


def _provenance(chosen) -> dict[str, Any]:
    """The model's provenance, its ``uses`` joined by the state terms' (which runs gave each state's term)."""
    prov = dict(chosen.model.provenance)
    if chosen.states is not None:
        prov["uses"] = {**(prov.get("uses") or {}), **(chosen.states.provenance.get("uses") or {})}
    return prov


def _model_json(chosen) -> dict[str, Any]:
    model = chosen.model
    return {
        "origin": chosen.origin,
        "path": str(chosen.path),
        # The version asked for when this model is another patch release's of its minor (else null).
        "stands_in_for": chosen.stands_in_for,
        "features": model.features,
        "provenance": _provenance(chosen),
        "ranges": model.ranges,
        "states": sorted(_available_states(chosen)),
    }


def _available_states(chosen) -> set[str]:
    from crdscale.analysis.footprint import SERVED, STATES

    return set(STATES) if chosen.states is not None else {SERVED}


def _extrapolations(model, features) -> list[str]:
    from crdscale.analysis.footprint import extrapolations

    return [
        f"{w} (a way out: calibrate on sets like this one, 'crdscale footprint --calibrate --sweep SWEEP.toml' "
        f"with a sweep that reaches it, and predict with that model)"
        for w in extrapolations(model, features)
    ]


def _predict(args: argparse.Namespace) -> int:
    from crdscale.analysis.footprint import (
        RSS,
        RSS_PEAK,
        SERVED,
        STATE_DEFINITIONS,
        TOTAL,
        budget_fit,
        predict_state,
        prediction_rows,
        top_crds,
    )

    chosen = _choose(args)
    model = chosen.model
    if args.state not in _available_states(chosen):
        raise UsageError(
            f"no state terms for kube-apiserver v{model.kube_version}: --state {args.state} needs "
            f"crdscale/footprint_models/states-v{model.kube_version}.json (scripts/fit_footprint_states.py); "
            f"'served' works without"
        )
    spec = args.objects_spec
    term = _object_term(model.kube_version) if spec is not None else None
    crd_set = _read_set(args, args.sources[0] if args.sources else None, spec)
    features = crd_set.features()
    # The served state without pandas (what most calls ask; pandas alone costs ~0.4 CPU-s to import).
    if args.state == SERVED:
        predicted = prediction_rows(model, features)
    else:
        predicted = list(predict_state(model, chosen.states, features, args.state).itertuples(index=False))
    warnings = crd_set.warnings + _extrapolations(model, features)
    objects = _objects_prediction(spec, term, crd_set, warnings) if spec is not None else None
    if objects is not None:
        from crdscale.analysis.objectterm import with_objects

        predicted = with_objects(predicted, objects["heap_tuple"], term.rss_per_heap)
    rows = _rows(predicted)
    extra_heap = objects["per_crd_heap"] if objects is not None else None
    top = top_crds(model, crd_set.names, crd_set.per_crd, count=args.top, extra=extra_heap)
    budget = None
    if args.budget_bytes is not None:
        # A memory limit must hold the peak; a model without a peak excess can only say settled.
        budget_target = RSS_PEAK if model.peak is not None else RSS
        budget = budget_fit(
            model,
            crd_set.per_crd,
            args.budget_bytes,
            baseline=args.baseline_bytes,
            target=budget_target,
            extra=objects["per_crd_rss"] if objects is not None else None,
        )
        budget = {
            k: (_clean(v) if not isinstance(v, dict) else {a: _clean(b) for a, b in v.items()})
            for k, v in budget.items()
        }
        if not args.baseline:
            warnings.append(
                "--budget without --baseline: the budget is compared with RSS growth alone; pass the server's RSS "
                "without these CRDs (e.g. --baseline 1.5GiB, from 'crdscale top' or your metrics)"
            )
    if args.output == "json":
        _print_json(
            {
                "kube_version": model.kube_version,
                "source": crd_set.label,
                "state": args.state,
                "state_definition": STATE_DEFINITIONS[args.state],
                "features": features,
                "skipped": crd_set.skipped,
                "predictions": [{"target": t, **v} for t, v in rows.items()],
                "served_heap_bytes": rows.get(TOTAL),
                "rss_bytes": rows.get(RSS),
                "rss_peak_bytes": rows.get(RSS_PEAK),
                "top": top,
                "budget": budget,
                "objects": None if objects is None else objects["json"],
                "warnings": warnings,
                "definitions": _definitions(),
                "model": _model_json(chosen),
            }
        )
    else:
        _print_set(crd_set.label, features, crd_set.skipped)
        if objects is not None:
            print(f"  objects: {objects['describe']}")
        print(
            f"Predicted on kube-apiserver v{model.kube_version}, {args.state}: {STATE_DEFINITIONS[args.state]} "
            f"(95% prediction interval):"
        )
        _print_rows(rows)
        _print_top(top)
        if budget is not None:
            _print_budget(budget)
        print(chosen.describe())
    _warn(warnings)
    return 0


def _object_term(version: str):
    """The per-object term of ``version``; a one-line error naming the versions that have one."""
    from crdscale.footprint_models import object_term_versions, read_object_term

    term = read_object_term(version)
    if term is None:
        known = ", ".join(f"v{v}" for v in object_term_versions()) or "none"
        raise UsageError(
            f"no per-object term for kube-apiserver v{version} (measured: {known}); --kube-version one of those, "
            f"or measure it: 'crdscale run scenarios/objects-shapes.toml --set target.kube_version={version}', "
            f"then 'python scripts/fit_object_term.py RUN --write'"
        )
    return term


def _objects_prediction(spec: _ObjectSpec, term, crd_set: _CrdSet, warnings: list[str]) -> dict[str, Any]:
    """What the set's custom resources add: the heap ``(value, low, high)``, each CRD's share of it (heap,
    and RSS rows for --budget), the JSON block; appends the term's warnings to ``warnings``."""
    import numpy as np

    from crdscale.analysis.objectterm import DEFINITION, object_features_of, rss_of

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
                    f"shape and size, and refit with scripts/fit_object_term.py)"
                )
    per_crd_rss = np.array([rss_of(tuple(row), term.rss_per_heap) for row in per_crd_heap], dtype=float)
    total = spec.count * len(per_crd)
    mean = {k: float(np.mean([f[k] for f in per_crd])) for k in ("bytes", "nodes")}
    rss = rss_of(heap, term.rss_per_heap)
    return {
        "heap_tuple": heap,
        "per_crd_heap": per_crd_heap[:, 0],
        "per_crd_rss": per_crd_rss,
        "json": {
            "per_crd": spec.count,
            "total": total,
            "shape": spec.shape,
            "bytes_as_sent": spec.size if spec.sample is None else None,
            "sample": spec.sample_label,
            "mean_features": mean,
            "heap_bytes": dict(zip(("value", "low", "high"), heap, strict=True)),
            "rss_bytes": dict(zip(("value", "low", "high"), rss, strict=True)),
            "definition": DEFINITION,
            "term": {
                "form": term.form,
                "columns": list(term.columns),
                "coef": term.coef,
                "provenance": term.provenance,
            },
        },
        "describe": (
            f"{spec.describe()}: {total:,} in all, {mean['nodes']:,.0f} JSON values and "
            f"{fmt_bytes(mean['bytes'])} each on average"
        ),
    }


def _difference(args: argparse.Namespace) -> int:
    from crdscale.analysis.footprint import crd_costs, predict_difference

    chosen = _choose(args)
    model = chosen.model
    old, new = (_read_set(args, s) for s in args.sources)
    old_f, new_f = old.features(), new.features()
    rows = _rows(predict_difference(model, old_f, new_f).itertuples(index=False))
    before = dict(zip(old.names, old.per_crd, strict=True))
    after = dict(zip(new.names, new.per_crd, strict=True))
    changes = {
        "added": sorted(set(after) - set(before)),
        "removed": sorted(set(before) - set(after)),
        "changed": sorted(n for n in set(after) & set(before) if after[n] != before[n]),
    }
    changes["unchanged"] = len(set(after) & set(before)) - len(changes["changed"])
    # Which CRDs move the heap most: each CRD's cost in NEW minus in OLD (0 where absent).
    names = sorted(set(after) | set(before))
    zero = dict.fromkeys(model.features, 0.0) | {"served_versions": 0.0}
    cost_new = dict(zip(names, crd_costs(model, [after.get(n, zero) for n in names]), strict=True))
    cost_old = dict(zip(names, crd_costs(model, [before.get(n, zero) for n in names]), strict=True))
    moved = sorted(names, key=lambda n: -abs(cost_new[n] - cost_old[n]))[: args.top]
    largest = [
        {"name": n, "bytes": float(cost_new[n] - cost_old[n]), "change": _change(n, changes)}
        for n in moved
        if cost_new[n] != cost_old[n]
    ]
    warnings = old.warnings + new.warnings + _extrapolations(model, new_f)
    if args.output == "json":
        _print_json(
            {
                "kube_version": model.kube_version,
                "old": {"source": old.label, "features": old_f, "skipped": old.skipped},
                "new": {"source": new.label, "features": new_f, "skipped": new.skipped},
                "changes": changes,
                "difference": [{"target": t, **v} for t, v in rows.items()],
                "largest": largest,
                "warnings": warnings,
                "definitions": _definitions(),
                "model": _model_json(chosen),
            }
        )
    else:
        _print_set(f"OLD {old.label}", old_f, old.skipped)
        _print_set(f"NEW {new.label}", new_f, new.skipped)
        print(
            f"CRDs: {len(changes['added'])} added, {len(changes['removed'])} removed, "
            f"{len(changes['changed'])} changed, {changes['unchanged']} unchanged"
        )
        print(
            f"What NEW adds over OLD on kube-apiserver v{model.kube_version} (95% prediction interval, "
            f"the two sets taken to stray from the model alike):"
        )
        _print_rows(rows, signed=True)
        if largest:
            print(f"CRDs that move the predicted heap most (of {len(names)}):")
            for r in largest:
                print(f"  {fmt_bytes(r['bytes'], signed=True):>12}  {r['change']:<8} {r['name']}")
        print(chosen.describe())
    _warn(warnings)
    return 0


def _change(name: str, changes: dict[str, Any]) -> str:
    for kind in ("added", "removed", "changed"):
        if name in changes[kind]:
            return kind
    return "unchanged"


def _print_json(data: dict[str, Any]) -> None:
    print(json.dumps(data, indent=2))


def _warn(warnings: list[str]) -> None:
    for warning in warnings:
        log.warning(warning)


def _print_set(label: str, features: dict[str, float], skipped: dict[str, int]) -> None:
    print(
        f"{label}: {features['crds']:,.0f} CRDs, {features['served_versions']:,.0f} served versions, "
        f"{features['properties']:,.0f} schema properties, {fmt_bytes(features['schema_bytes'])} of schemas, "
        f"depth {features['max_depth']:.0f}"
    )
    if skipped:
        print(f"  skipped documents: {', '.join(f'{n} {kind}' for kind, n in sorted(skipped.items()))}")


def _print_rows(rows: dict[str, dict[str, float | None]], *, signed: bool = False) -> None:
    """Total and RSS first, then causes by size; the small ones summed on one line (one screen)."""
    from crdscale.analysis.footprint import RSS, RSS_PEAK
    from crdscale.analysis.targets import TOTAL

    def line(name: str, v: dict[str, float | None]) -> None:
        interval = "" if v["low"] is None else f"  [{fmt_bytes(v['low'])}, {fmt_bytes(v['high'])}]"
        print(f"  {name:<24} {fmt_bytes(v['value'], signed=signed):>12}{interval}")

    total = rows.get(TOTAL, {}).get("value") or 0.0
    for target, name in ((TOTAL, "heap, total"), (RSS_PEAK, "RSS, peak growth"), (RSS, "RSS, settled growth")):
        if target in rows:
            line(name, rows[target])
    causes = [(t, v) for t, v in rows.items() if t not in (TOTAL, RSS, RSS_PEAK)]
    minor = [(t, v) for t, v in causes if abs(v["value"] or 0.0) < MINOR_SHARE * abs(total)]
    for target, v in causes:
        if (target, v) not in minor:
            line(f"heap: {target}", v)
    if minor:
        rest = sum(v["value"] or 0.0 for _, v in minor)
        print(
            f"  {f'heap: {len(minor)} other causes':<24} {fmt_bytes(rest, signed=signed):>12}  "
            f"(each under {MINOR_SHARE:.0%}: {', '.join(t for t, _ in minor)})"
        )


def _print_top(top: dict[str, Any]) -> None:
    if not top["costliest"]:
        return
    print(
        f"Costliest CRDs by predicted heap ({top['half']:,} of {top['crds']:,} make half of it; "
        f"share, cumulative share):"
    )
    for r in top["costliest"]:
        print(f"  {fmt_bytes(r['bytes']):>12}  {r['share']:6.1%}  {r['cumulative_share']:6.1%}  {r['name']}")


def _print_budget(budget: dict[str, Any]) -> None:
    whole = budget["whole_set"]
    safe = "" if budget["fit_at_high"] is None else f"; {budget['fit_at_high']:,} by the interval's upper bound"
    print(
        f"Budget {fmt_bytes(budget['budget'])} of RSS ({'peak' if budget['target'] == 'rss_peak' else 'settled'} growth) "
        f"beside a baseline of {fmt_bytes(budget['baseline'])}: "
        f"{budget['fit']:,} of {budget['crds']:,} CRDs fit, cheapest first, by the prediction{safe}.\n"
        f"  The whole set adds {fmt_bytes(whole['value'])} [{fmt_bytes(whole['low'])}, {fmt_bytes(whole['high'])}]."
    )


def _calibrate(args: argparse.Namespace) -> int:
    from crdscale.cli.common import run_with_progress
    from crdscale.footprint_models import calibrated_path, write_model
    from crdscale.paths import runs_dir
    from crdscale.scenario.calibrate import calibrate

    features = [f.strip() for f in args.features.split(",") if f.strip()] if args.features else None
    log.info(
        f"calibrating the footprint model of kube-apiserver v{args.kube_version.lstrip('v')}: "
        f"one run per cell of the sweep, then a fit"
    )
    result = calibrate(
        args.kube_version,
        runs_parent=args.out or runs_dir(),
        sweep=args.sweep,
        features=features,
        run_cell=run_with_progress,
    )
    path = write_model(result.model, args.model or calibrated_path(args.kube_version))
    if args.output == "json":
        print(
            json.dumps(
                {"model_path": str(path), "experiment": str(result.experiment), "model": result.model.to_dict()},
                indent=2,
            )
        )
        return 0
    prov = result.model.provenance
    log.info(
        f"fitted {' + '.join(result.model.features)} on {len(prov['runs'])} runs "
        f"({prov['machine']}); 'crdscale footprint' now uses it for v{result.model.kube_version}"
        if not args.model
        else f"fitted {' + '.join(result.model.features)} on {len(prov['runs'])} runs"
    )
    print(path)
    return 0
