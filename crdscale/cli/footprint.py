"""Predict what installing and serving a CRD set adds to kube-apiserver's heap and RSS, without a server.

Examples:
  crdscale footprint crds/
  crdscale footprint provider-aws/package/crds --kube-version 1.24.0
  crdscale footprint crds/ -o json
  crdscale footprint --calibrate                    # refit the model on this machine (~8 min)
  crdscale footprint --calibrate --kube-version 1.24.0 --out /data/runs

Describes the CRD set (CRDs, served versions, schema properties and bytes,
depth) and applies the linear model fitted on a sweep of generated CRD sets
for that kube-apiserver version: heap added by cause (zap counters, watch
caches, OpenAPI, schemas...), the total, and RSS, each with a 95% prediction
interval. Each run of the sweep counts as one observation, so the interval
reflects how far whole runs stray from the model; it is still a floor on the
uncertainty for sets unlike the sweep's. A set outside what the fit saw (CRD
count, served versions per CRD, properties per served version) gets a warning
on stderr.

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

-o json gives {"features": ..., "predictions": [{"target", "value", "low",
"high"}], "served_heap_bytes": {...}, "rss_bytes": {...}, "warnings": [...],
"model": {"origin": "calibrated"|"shipped"|"file", "path", "features",
"provenance", "ranges"}}; with --calibrate, {"model_path", "experiment",
"model": ...}.
"""

from __future__ import annotations

import argparse
import json
import math

from crdscale.errors import UsageError


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("source", metavar="CRD_SOURCE", nargs="?", help="a CRD file or a directory of them")
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
        parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="stdout format")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        if args.calibrate:
            if args.source or args.shipped:
                raise UsageError("--calibrate takes no CRD_SOURCE and no --shipped")
            return _calibrate(args)
        if not args.source:
            raise UsageError("footprint needs a CRD_SOURCE (or --calibrate)")
        if args.out or args.sweep or args.features:
            raise UsageError("--out, --sweep and --features go with --calibrate")
        if args.shipped and args.model:
            raise UsageError("--shipped and --model choose different models; give one")
        return _predict(args)


def _predict(args: argparse.Namespace) -> int:
    from crdscale.analysis.footprint import RSS, TOTAL, extrapolations, footprint_features, predict
    from crdscale.cluster.gobuild import stderr_echo
    from crdscale.crds.load import load_crds
    from crdscale.footprint_models import choose_model
    from crdscale.report.findings import fmt_bytes

    chosen = choose_model(args.kube_version, path=args.model, shipped_only=args.shipped)
    model = chosen.model
    features = footprint_features(list(load_crds(args.source).crds))
    table = predict(model, features)
    warnings = extrapolations(model, features)

    def clean(v):
        return None if isinstance(v, float) and math.isnan(v) else v

    rows = {
        r.target: {"value": clean(r.value), "low": clean(r.low), "high": clean(r.high)}
        for r in table.itertuples(index=False)
    }
    if args.output == "json":
        print(
            json.dumps(
                {
                    "kube_version": model.kube_version,
                    "features": features,
                    "predictions": [{"target": t, **v} for t, v in rows.items()],
                    "served_heap_bytes": rows.get(TOTAL),
                    "rss_bytes": rows.get(RSS),
                    "warnings": warnings,
                    "model": {
                        "origin": chosen.origin,
                        "path": str(chosen.path),
                        "features": model.features,
                        "provenance": model.provenance,
                        "ranges": model.ranges,
                    },
                },
                indent=2,
            )
        )
        return 0
    print(
        f"CRD set: {features['crds']:.0f} CRDs, {features['served_versions']:.0f} served versions, "
        f"{features['properties']:,.0f} schema properties, {fmt_bytes(features['schema_bytes'])} of schemas, "
        f"depth {features['max_depth']:.0f}"
    )
    print(f"Predicted on kube-apiserver v{model.kube_version} once installed and served (95% prediction interval):")
    width = max(len(t) for t in rows) + 2
    for target, v in rows.items():
        name = {TOTAL: "heap, total", RSS: "RSS"}.get(target, f"heap: {target}")
        interval = "" if v["low"] is None else f"  [{fmt_bytes(v['low'])}, {fmt_bytes(v['high'])}]"
        print(f"  {name:<{width + 6}} {fmt_bytes(v['value']):>12}{interval}")
    for warning in warnings:
        stderr_echo(f"warning: {warning}")
    print(chosen.describe())
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from crdscale.cli.common import run_with_progress
    from crdscale.cluster.gobuild import stderr_echo
    from crdscale.footprint_models import calibrated_path, write_model
    from crdscale.paths import runs_dir
    from crdscale.scenario.calibrate import calibrate

    features = [f.strip() for f in args.features.split(",") if f.strip()] if args.features else None
    stderr_echo(
        f"calibrating the footprint model of kube-apiserver v{args.kube_version.lstrip('v')}: "
        f"one run per cell of the sweep, then a fit"
    )
    result = calibrate(
        args.kube_version,
        runs_parent=args.out or runs_dir(),
        sweep=args.sweep,
        features=features,
        run_cell=run_with_progress,
        message=stderr_echo,
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
    stderr_echo(
        f"fitted {' + '.join(result.model.features)} on {len(prov['runs'])} runs "
        f"({prov['machine']}); 'crdscale footprint' now uses it for v{result.model.kube_version}"
        if not args.model
        else f"fitted {' + '.join(result.model.features)} on {len(prov['runs'])} runs"
    )
    print(path)
    return 0
