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
  crdscale footprint crds/ --activate '*.network.azure.upbound.io' --activate-policy mrap.yaml
  crdscale footprint --explain --kube-version 1.24.0    # the model: definitions, intervals, which runs did what
  crdscale footprint --calibrate                    # refit the model on this machine (~8 min)
  crdscale footprint --calibrate --kube-version 1.24.0 --out /data/runs
  crdscale footprint fit model RUN_OR_EXPERIMENT...  # refit from runs (also states, objects: 'fit --help')

CRD_SOURCE: a YAML/JSON file or a tree of them (multi-document streams, kubectl 'List' output, OLM bundles); '-'
for stdin; a Crossplane package (.xpkg image tarball, or its package.yaml); a Helm chart (directory or .tgz:
crds/, and templates/ rendered by 'helm template' when helm is on PATH, else a warning). With
--kubeconfig/--context and no CRD_SOURCE: the CRDs installed in that cluster (one LIST, nothing written). Only
apiextensions.k8s.io/v1 CRDs count; an input without any is refused (exit 5) naming what it holds instead, as
'crdscale install' does. A CRD over etcd's 1.5 MiB request limit, or YAML whose aliases expand past that many
nodes, is refused too (exit 5).

Describes the CRD set (CRDs, served versions, schema properties and bytes, depth) and applies the linear model
fitted on a sweep of generated CRD sets for that kube-apiserver version: heap added by cause (zap counters, watch
caches, OpenAPI, schemas...), the total, and RSS, each with a 95% prediction interval. "heap" is the live heap
after a GC. RSS comes as two quantities: "RSS, settled growth" is resident memory once the set is installed and
served and the server settled (at the last step's heap profile) minus RSS at 0 CRDs; "RSS, peak growth" is the
highest RSS sampled (every second) while installing and serving, minus the same baseline: what a memory limit must
hold. Peak is settled growth plus a peak excess (peak minus settled growth, an install's transient burst, about
the same for 160 and 1,800 CRDs) measured on the runs the model's provenance names. Intervals are lognormal with
the fit's mean and variance, so none goes below zero; a cause the linear model puts at or below zero shows 0 with
an interval from 0. Each run of the sweep counts as one observation, and a run strays from the model by a share of
its predicted heap (a multiplicative error, chosen by predicting each fitting run from the others), so the
interval reflects how far whole runs stray, as a share, whatever the set's size; it is still a floor on the
uncertainty for sets unlike the sweep's. A set outside what the fit saw (CRD count, served versions per CRD,
properties per served version) gets a warning on stderr.

--state says what the cluster does with the CRDs (default served):
  installed   Established, nothing watches them (no kube-controller-manager: envtest, a bare kube-apiserver):
              OpenAPI, the CRD objects;
  watched     installed, and kube-controller-manager's garbage collector and quota controller watch each CRD
              (every real cluster, before a provider runs): each resource gets its storage; at most served;
  served      installed, and a provider's informers LIST and watch every served version (what the model is
              fitted on);
  openapi-v2  served, and a client (kubectl apply/explain, Helm) fetched /openapi/v2, whose spec the server
              then keeps.
The other states follow from the served prediction with terms measured per version
(crdscale/footprint/models/states-v<version>.json, their runs in the provenance): installed keeps each cause's
share measured once installed; watched adds kube-controller-manager's per-CRD delta; openapi-v2 adds the fetched
spec (per served version and per property, scenarios/openapi-v2.toml). Their totals' bounds add the served bounds
(scaled) and the term's: wider than a joint interval. RSS moves with the heap (scaled by the state's total over
the served one): not fitted per state. --budget and OLD NEW are for the served state; --top ranks CRDs by their
served cost.

--objects N adds N custom resources per CRD: what each adds once the watch cache holds it (its body as
Unstructured maps, managedFields parsed into maps, its metadata, the store), a term measured per version on runs
of objects of several shapes and sizes (scenarios/objects-shapes.toml, kube-controller-manager watching them;
crdscale/footprint/models/objects-v<version>.json), linear in the object's JSON values and bytes: a nested object
holds several times what a flat one of the same bytes does. Describe them with --object-shape (flat, nested, list,
or schema: each CRD's own schema, the default) and --object-bytes (default 1KiB), or give real ones:
--object-sample FILE (kubectl get KIND NAME -o yaml). They add a "custom-resources" row to the heap, and to RSS
the heap times the settled RSS per heap byte the runs measured; --top and --budget count each CRD's objects with
it.

--activate PATTERN and --activate-policy FILE (each repeatable) answer "what does activating these cost?" for
Crossplane v2, which makes CRDs only of the managed resources a ManagedResourceActivationPolicy
(apiextensions.crossplane.io/v1alpha1, spec.activate) matches: a pattern matches CRD names (plural.group) as Go's
filepath.Match does ('*.network.azure.upbound.io', 'buckets.s3.aws.upbound.io', '*'). Prints the whole set's
prediction, the activated part's and what activating only it saves (whole minus activated, the two taken to stray
from the model alike), served state; a malformed pattern or policy is refused (exit 2).

--explain prints the model instead of a prediction (no CRD_SOURCE): the definitions, how intervals are made, its
coefficients, and its provenance: which runs were used for fitting, feature selection, the peak excess, and which
were held out for validation (a validation set informs no decision).

Answers: the CRDs that cost most (--top N, default 10; the model is linear, so a CRD's share is its own features
times the coefficients) and how many of them make half the predicted heap; --budget SIZE: how many of the set's
CRDs fit in that much RSS beside --baseline SIZE (the server's RSS without them), cheapest first, by the
prediction and by its interval's upper bound (the safe answer), against peak RSS growth (settled when the model
has no peak excess). Two sources OLD NEW: what going from OLD to NEW adds per cause, with an interval that takes
the two sets as straying from the model alike per served version (two releases of one provider), and which CRDs
were added, removed or changed.

Which model: one calibrated on this machine for that version when there is one (--calibrate), else the one shipped
with crdscale, else --model FILE; --shipped ignores a calibrated one. The model used, and its provenance
(experiment, machine, date), is printed below the table.

--calibrate runs the footprint sweep (crdscale/footprint/models/sweep.toml, or --sweep FILE: a scenario with a
[matrix]) on a local control plane, one cell after another with progress and an ETA, as an experiment directory
under --out (default ./runs), fits it and writes the model to this machine's cache (or to --model FILE). Ctrl-C
stops it like 'crdscale run' does: processes stopped, partial runs kept, no model written.

-o json gives {"kube_version", "source", "state", "state_definition", "features", "skipped", "predictions":
[{"target", "value", "low", "high"}], "served_heap_bytes": {...}, "rss_bytes": {...} (settled growth),
"rss_peak_bytes": {...} (peak growth, null without a peak excess), "top": {"target", "crds", "half", "costliest":
[{"name", "bytes", "share", "cumulative_share"}]}, "budget": {"budget", "baseline", "target", "crds", "fit",
"fit_at_high", "whole_set"} or null, "objects": {"per_crd", "total", "shape", "bytes_as_sent", "sample",
"mean_features", "heap_bytes", "rss_bytes", "definition", "term"} or null, "warnings": [...], "definitions":
{...}, "model": {"origin": "calibrated"|"shipped"|"file", "path", "features", "provenance", "ranges", "states"}};
with OLD NEW, {"old", "new", "changes": {"added", "removed", "changed", "unchanged"}, "difference": [{"target",
"value", "low", "high"}], ...}; with --activate, {"patterns": [{"pattern", "from", "crds"}], "activated",
"activated_names", "whole", "active" (each as one set's), "saved": [{"target", ...}], ...}; with --calibrate,
{"model_path", "experiment", "model": ...}; with --explain, {"kube_version", "origin", "path", "definitions",
"model": ...}. Sizes are bytes. In Python: crdscale.footprint.predict_footprint(...).to_json()."""

from __future__ import annotations

import argparse
import logging

from crdscale.cli.common import add_cluster_arguments, add_output_argument, resolve_kubeconfig
from crdscale.cli.options import footprint_features
from crdscale.errors import UsageError

log = logging.getLogger(__name__)

CLUSTER = ("--kubeconfig", "--context")  # add_cluster_arguments's, at their place in --help
OUTPUT = ("-o", "--output")  # add_output_argument's
# Every argument, one per line in --help's order: its flags, then argparse's keywords.
# fmt: off
OPTIONS = (
    (("sources",), dict(metavar="CRD_SOURCE", nargs="*", help="CRDs: a file, directory, '-', .xpkg, Helm chart; two (OLD NEW) to see what an upgrade adds")),
    (("--kube-version",), dict(default="1.37.1", metavar="V", help="kube-apiserver version whose coefficients to use or fit (default 1.37.1)")),
    (("--model",), dict(metavar="FILE", help="use this model file; with --calibrate, write the model there instead of the cache")),
    (("--shipped",), dict(action="store_true", help="use the model shipped with crdscale even when one was calibrated on this machine")),
    (("--top",), dict(type=int, default=10, metavar="N", help="list the N CRDs that cost most (default 10; 0: none)")),
    (("--budget",), dict(metavar="SIZE", help="how many of the CRDs fit in this much RSS (e.g. 8GiB, 8Gi, 6G)")),
    (("--baseline",), dict(metavar="SIZE", help="--budget: the server's RSS without these CRDs (default 0: the budget is for growth alone)")),
    (("--state",), dict(choices=("installed", "watched", "served", "openapi-v2"), default="served", help="what the cluster does with the CRDs (default served; each defined below and in -o json)")),
    (("--objects",), dict(type=int, metavar="N", help="custom resources per CRD (default 0: the CRDs alone); their heap comes from the version's per-object term")),
    # crdscale.crds.objects.SHAPES, spelled out: importing it would cost every command ~60 ms (a test keeps the two equal)
    (("--object-shape",), dict(choices=("flat", "nested", "list", "schema"), help="--objects: their shape as crdscale's runs write them (default schema: each CRD's own schema)")),
    (("--object-bytes",), dict(metavar="SIZE", help="--objects: JSON bytes of each as sent (default 1KiB)")),
    (("--object-sample",), dict(metavar="FILE", help="--objects: real custom resources (YAML/JSON, e.g. 'kubectl get KIND NAME -o yaml'); every object is taken to be like their mean, instead of --object-shape/--object-bytes")),
    (("--activate",), dict(action="append", metavar="PATTERN", help="Crossplane activation pattern (repeatable; e.g. '*.network.azure.upbound.io'): the whole set, the CRDs it activates, and what that saves")),
    (("--activate-policy",), dict(action="append", metavar="FILE", help="the patterns of the ManagedResourceActivationPolicy objects in FILE (repeatable; with or without --activate)")),
    (CLUSTER, {}),
    (("--calibrate",), dict(action="store_true", help="run the footprint sweep on a local control plane, fit, and keep the model")),
    (("--out",), dict(metavar="DIR", help="--calibrate: parent of the sweep's experiment directory (default: ./runs)")),
    (("--sweep",), dict(metavar="SCENARIO.toml", help="--calibrate: the sweep to run (a scenario with a [matrix]; default: the shipped one)")),
    (("--features",), dict(metavar="F,F", type=footprint_features, help="--calibrate: features to fit (default: the shipped model's, else crds,served_versions,properties)")),
    (("--explain",), dict(action="store_true", help="print the model (definitions, intervals, coefficients, which runs fitted and validated it)")),
    (OUTPUT, {}),
)
# fmt: on


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        for flags, options in OPTIONS:
            if flags == CLUSTER:
                add_cluster_arguments(parser)
            elif flags == OUTPUT:
                add_output_argument(parser, human="text")
            else:
                parser.add_argument(*flags, **options)

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        # lazy: the package (numpy, the loaders), not for `crdscale footprint --help`.
        from crdscale import footprint

        which = {"kube_version": args.kube_version, "model": args.model, "shipped": args.shipped}
        if args.explain:
            if any((args.sources, args.calibrate, args.kubeconfig, args.context, args.activate, args.activate_policy)):
                raise UsageError("--explain takes no CRD_SOURCE, cluster or --calibrate: it describes the model")
            return _render(args, footprint.explain_model(**which))
        if args.calibrate:
            if args.sources or args.shipped or args.activate or args.activate_policy:
                raise UsageError("--calibrate takes no CRD_SOURCE, --shipped or --activate")
            # lazy: would add a module to --help
            from crdscale.cli.footprint_fit import calibrate

            return calibrate(args)
        cluster, activate, two = (
            bool(args.kubeconfig or args.context),
            args.activate or args.activate_policy,
            len(args.sources) == 2,
        )
        # fmt: off
        for wrong, message in (  # the first that applies is the one-line answer
            (args.out or args.sweep or args.features, "--out, --sweep and --features go with --calibrate"),
            (cluster and args.sources, "--kubeconfig/--context read the CRDs a cluster has; give no CRD_SOURCE with them"),
            (not args.sources and not cluster, "footprint needs a CRD_SOURCE (or --kubeconfig for a cluster's CRDs, or --calibrate)"),
            (len(args.sources) > 2, "give one CRD_SOURCE, or two (OLD NEW) to see what an upgrade adds"),
            ([str(s) for s in args.sources].count("-") > 1, "'-' (stdin) can be only one of OLD and NEW: stdin is read once"),
            (args.shipped and args.model, "--shipped and --model choose different models; give one"),
            (args.top < 0, "--top must be >= 0"),
            (args.baseline and not args.budget, "--baseline goes with --budget"),
            (args.budget and two, "--budget takes one CRD set, not OLD NEW"),
            (activate and (two or args.budget or args.objects or args.state != "served"), "--activate and --activate-policy go with one CRD set, served, without --budget or --objects"),
        ):
            if wrong:
                raise UsageError(message)
        # fmt: on
        budget = footprint.parse_size("--budget", args.budget)
        baseline = footprint.parse_size("--baseline", args.baseline)
        if budget is not None and budget <= (baseline or 0):
            raise UsageError("--budget must be larger than --baseline")
        if args.state != "served" and (args.budget or two):
            raise UsageError(
                f"--state {args.state} goes with one CRD set and no --budget (budgets and upgrades are "
                f"predicted for the served state)"
            )
        shape, size, sample = args.object_shape, args.object_bytes, args.object_sample
        objects = footprint.object_spec(args.objects, shape=shape, size=size, sample=sample)
        if objects is not None and two:
            raise UsageError(
                "--objects goes with one CRD set: a cluster's objects do not come with a release; predict OLD "
                "and NEW each with --objects to compare"
            )
        if two:
            return _render(args, footprint.predict_upgrade(*args.sources, top=args.top, **which))
        kubeconfig = resolve_kubeconfig(args.kubeconfig) if cluster else None
        if activate:
            source, patterns, policies = (args.sources or [None])[0], args.activate or (), args.activate_policy or ()
            ctx = {"kubeconfig": kubeconfig, "context": args.context}
            return _render(args, footprint.predict_activation(source, patterns, policies, top=args.top, **which, **ctx))
        prediction = footprint.predict_footprint(
            args.sources[0] if args.sources else None,
            **which,
            state=args.state,
            objects=objects,
            top=args.top,
            budget=budget,
            baseline=baseline,
            kubeconfig=kubeconfig,
            context=args.context,
        )
        return _render(args, prediction)


def _render(args: argparse.Namespace, result) -> int:
    """Print ``result`` (a prediction, difference or model explanation) as -o asks; its warnings on stderr."""
    print(result.to_json() if args.output == "json" else result.to_text())
    for warning in getattr(result, "warnings", ()):
        log.warning(warning)
    return 0
