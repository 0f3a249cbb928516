"""Predict what installing and serving a CRD set adds to kube-apiserver's heap and RSS, without a server.

Examples:
  crdscale footprint crds/
  crdscale footprint provider-aws/package/crds --kube-version 1.24.0
  crdscale footprint crds/ -o json

Describes the CRD set (CRDs, served versions, schema properties and bytes,
depth) and applies the linear model fitted on crdscale's sweep experiments
for that kube-apiserver version: heap added by cause (zap counters, watch
caches, OpenAPI, schemas...), the total, and RSS, each with a 95% prediction
interval. The coefficients ship with crdscale with their provenance
(experiment, machine, date), printed below the table; they were measured on
one machine and generated CRD sets, so treat the interval as a floor on the
uncertainty for very different sets. A set outside what the fit saw (CRD
count, properties per CRD) gets a warning on stderr.

-o json gives {"features": ..., "predictions": [{"target", "value", "low",
"high"}], "served_heap_bytes": {...}, "rss_bytes": {...}, "warnings": [...],
"model": ...}.
"""

from __future__ import annotations

import argparse
import json
import math


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("source", metavar="CRD_SOURCE", help="a CRD file or a directory of them")
        parser.add_argument("--kube-version", default="1.37.1", metavar="V",
                            help="kube-apiserver version whose coefficients to use (default 1.37.1)")
        parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="stdout format")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        from crdscale.analysis.footprint import RSS, TOTAL, extrapolations, footprint_features, predict
        from crdscale.cluster.gobuild import stderr_echo
        from crdscale.crds.load import load_crds
        from crdscale.footprint_models import shipped_model
        from crdscale.report.findings import fmt_bytes

        model = shipped_model(args.kube_version)
        features = footprint_features(list(load_crds(args.source).crds))
        table = predict(model, features)
        warnings = extrapolations(model, features)

        def clean(v):
            return None if isinstance(v, float) and math.isnan(v) else v

        rows = {r.target: {"value": clean(r.value), "low": clean(r.low), "high": clean(r.high)}
                for r in table.itertuples(index=False)}
        if args.output == "json":
            print(json.dumps({"kube_version": model.kube_version, "features": features,
                              "predictions": [{"target": t, **v} for t, v in rows.items()],
                              "served_heap_bytes": rows.get(TOTAL), "rss_bytes": rows.get(RSS), "warnings": warnings,
                              "model": {"features": model.features, "provenance": model.provenance,
                                        "ranges": model.ranges}}, indent=2))
            return 0
        print(f"CRD set: {features['crds']:.0f} CRDs, {features['served_versions']:.0f} served versions, "
              f"{features['properties']:,.0f} schema properties, {fmt_bytes(features['schema_bytes'])} of schemas, "
              f"depth {features['max_depth']:.0f}")
        print(f"Predicted on kube-apiserver v{model.kube_version} once installed and served (95% prediction interval):")
        width = max(len(t) for t in rows) + 2
        for target, v in rows.items():
            name = {TOTAL: "heap, total", RSS: "RSS"}.get(target, f"heap: {target}")
            interval = "" if v["low"] is None else f"  [{fmt_bytes(v['low'])}, {fmt_bytes(v['high'])}]"
            print(f"  {name:<{width + 6}} {fmt_bytes(v['value']):>12}{interval}")
        for warning in warnings:
            stderr_echo(f"warning: {warning}")
        prov = model.provenance
        print(f"model: {' + '.join(model.features)}; fitted on {prov.get('experiment', '?')}, "
              f"{prov.get('machine', '?')}, {prov.get('date', '?')}")
        return 0
