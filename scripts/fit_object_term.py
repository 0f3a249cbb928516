"""Fit the footprint model's per-object term from runs that grow custom resources of several shapes.

Usage:
  python scripts/fit_object_term.py EXPERIMENT_OR_RUNS... [--validate RUN...] [--write] [-o json]

EXPERIMENT_OR_RUNS: the cells of ``scenarios/objects-shapes.toml`` (an experiment directory, or run
directories), all of one kube-apiserver version. Each cell gives heap per custom resource (``crdscale
analyze``'s fit over its object steps) and settled kube-apiserver RSS per custom resource; its objects'
features (:func:`crdscale.analysis.objectterm.object_features`) come from rebuilding a few of them
with the run's own generator settings. The form is chosen by leave-one-cell-out
(:func:`crdscale.analysis.objectterm.choose_form`, the rule fixed before the cells ran); ``--validate``
runs (other object runs, never fitted on) are predicted and compared; ``--write`` stores the term as
``crdscale/footprint_models/objects-v<version>.json`` with its provenance.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from crdscale.analysis.objectterm import FORMS, choose_form, fit_object_term, leave_one_cell_out, mean_features
from crdscale.errors import CrdscaleError, UsageError
from crdscale.footprint_models import objects_path
from crdscale.scenario.calibrate import run_dirs_of

SAMPLE_OBJECTS = 5  # objects rebuilt per cell for its features (salts 0..4: they differ by their strings only)
RULE = (
    "lowest mean absolute leave-one-cell-out relative error; within 1 percentage point, fewer columns "
    "(written down before the cells ran)"
)


def cell_input(path: Path) -> dict:
    """One run's heap and RSS per custom resource and its objects' mean features."""
    from crdscale.crds.objects import CUSTOM_RESOURCES, custom_resource
    from crdscale.rundir import read_run
    from crdscale.scenario.config import build_scenario
    from crdscale.scenario.runner import load_crd_set

    run = read_run(path)
    manifest = run.manifest
    # A matrix cell's manifest adds which cell it is ("experiment"): not a scenario key.
    recorded = {k: v for k, v in manifest["scenario"].items() if k != "experiment"}
    scenario = build_scenario(recorded, where=str(path))
    if not scenario.grows_objects:
        raise UsageError(f'{path}: not a run that grows objects (steps.grow = "objects")')
    crds, _ = load_crd_set(scenario)
    shape, size = scenario.objects.get("shape", "flat"), int(scenario.objects.get("bytes", 1024))
    crd = crds[0]  # with the payload field the flat, nested and list shapes need (load_crd_set adds it)
    namespace = "ns" if crd["spec"].get("scope", "Namespaced") == "Namespaced" else None
    labels = {"app.kubernetes.io/managed-by": "crdscale", "crdscale.io/run": manifest.get("run_id", "run")}
    samples = [
        custom_resource(crd, f"obj-{i:06d}", namespace=namespace, labels=labels, size=size, shape=shape, salt=i)
        for i in range(SAMPLE_OBJECTS)
    ]
    per_object = run.analysis().per_object
    mine = per_object[per_object["kind"] == CUSTOM_RESOURCES]

    def one(metric: str, cause: str) -> dict | None:
        rows = mine[(mine["metric"] == metric) & (mine["cause"] == cause)]
        return rows.iloc[0].to_dict() if len(rows) else None

    heap, rss = one("bytes", "total"), one("series", "kube-apiserver RSS")
    if heap is None:
        raise UsageError(f"{path}: no heap per custom resource (did its object steps complete?)")
    return {
        "run": path.name,
        "path": str(path),
        "kube_version": (manifest.get("versions") or {}).get("kube-apiserver", "").lstrip("v"),
        "shape": shape,
        "sent_bytes": size,
        "crds": len(crds),
        "objects": int(heap["objects"]),
        "features": mean_features(samples),
        "heap": float(heap["per_object"]),
        "heap_low": float(heap["per_object_low"]),
        "heap_high": float(heap["per_object_high"]),
        "rss": None if rss is None else float(rss["per_object"]),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--validate", nargs="*", default=[], metavar="RUN", help="object runs to predict, not fit")
    parser.add_argument("--write", action="store_true", help="write crdscale/footprint_models/objects-v<V>.json")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    try:
        cells = [cell_input(p) for p in run_dirs_of(args.runs)]
        versions = {c["kube_version"] for c in cells}
        if len(versions) != 1:
            raise UsageError(f"cells of one kube-apiserver version, got {', '.join(sorted(versions))}")
        version = versions.pop()
        features, heap = [c["features"] for c in cells], [c["heap"] for c in cells]
        form, errors = choose_form(features, heap)
        loo = {f: leave_one_cell_out(features, heap, f) for f in FORMS}
        rss = [c["rss"] if c["rss"] is not None else float("nan") for c in cells]
        experiments = sorted({Path(c["path"]).parent.name for c in cells})
        term = fit_object_term(
            version,
            features,
            heap,
            form,
            rss=rss,
            provenance={
                "experiment": f"scenarios/objects-shapes.toml ({', '.join(experiments)})",
                "method": "scripts/fit_object_term.py",
                "date": dt.date.today().isoformat(),
                "form_rule": RULE,
                "form_errors": errors,
                "uses": {"object_fitting": [c["run"] for c in cells]},
            },
        )
        validation = [cell_input(p) for p in run_dirs_of(args.validate)] if args.validate else []
        if validation:
            term.provenance["uses"]["object_validation"] = [v["run"] for v in validation]
    except (CrdscaleError, ValueError) as err:
        print(f"fit_object_term: {err}", file=sys.stderr)
        return getattr(err, "exit_code", 2)

    def predicted(c: dict) -> dict:
        value, low, high = term.per_object(c["features"])
        return {
            **{k: c[k] for k in ("run", "shape", "sent_bytes", "heap", "heap_low", "heap_high")},
            **c["features"],
            "predicted": value,
            "low": low,
            "high": high,
            "error": (value - c["heap"]) / c["heap"],
            "inside": low <= c["heap"] <= high,
        }

    result = {
        "kube_version": version,
        "form": form,
        "form_errors": errors,
        "term": term.to_dict(),
        "cells": [{**predicted(c), "loo_error": {f: float(loo[f][i]) for f in FORMS}} for i, c in enumerate(cells)],
        "validation": [predicted(v) for v in validation],
    }
    if args.write:
        path = objects_path(version)
        path.write_text(json.dumps(term.to_dict(), indent=1) + "\n")
        result["written"] = str(path)
    if args.output == "json":
        print(json.dumps(result, indent=1))
        return 0
    print(
        f"kube-apiserver v{version}: {len(cells)} cells; form {form!r} ("
        + ", ".join(f"{f} {e:.1%}" for f, e in errors.items())
        + " mean |LOO error|)"
    )
    print("  coefficients: " + ", ".join(f"{c} {v:,.1f}" for c, v in zip(term.columns, term.coef, strict=True)))
    print(
        f"  log sd {term.log_sd:.3f} on {term.dof} d.f.; settled RSS per heap byte "
        f"{term.rss_per_heap[0]:.2f} [{term.rss_per_heap[1]:.2f}, {term.rss_per_heap[2]:.2f}]"
    )
    for title, rows in (("cells", result["cells"]), ("validation (never fitted)", result["validation"])):
        if rows:
            print(f"  {title}:")
        for r in rows:
            print(
                f"    {r['shape']:<7} {r['sent_bytes']:>8,} B {r['nodes']:>7,.0f} values: measured "
                f"{r['heap'] / 1024:8.1f} KiB [{r['heap_low'] / 1024:.1f}, {r['heap_high'] / 1024:.1f}], predicted "
                f"{r['predicted'] / 1024:8.1f} KiB [{r['low'] / 1024:.1f}, {r['high'] / 1024:.1f}] "
                f"{r['error']:+.1%} {'inside' if r['inside'] else 'OUTSIDE'}  {r['run']}"
            )
    if args.write:
        print(f"wrote {result['written']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
