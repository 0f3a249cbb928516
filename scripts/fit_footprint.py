"""Fit the footprint coefficients shipped in crdscale/footprint_models/ from sweep runs.

Usage:
  python scripts/fit_footprint.py --experiment "schema-size sweep" RUN_DIR... [--features crds,properties]
  python scripts/fit_footprint.py --validate RUN_DIR      # predicted vs measured on a run not used to fit

Every run must be of the same kube-apiserver version (read from its manifest);
the model goes to crdscale/footprint_models/v<version>.json with its provenance
(experiment, runs, machine, date). --validate prints predicted vs measured
served heap growth and RSS growth for a run with the shipped model.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

from crdscale.analysis.footprint import RSS, TOTAL, features_from_summary, fit_footprint, predict, training_rows
from crdscale.analysis.percrd import profile_points, series_points
from crdscale.footprint_models import shipped_model
from crdscale.rundir import read_run

MODELS = Path(__file__).resolve().parents[1] / "crdscale" / "footprint_models"


def run_points(path: str) -> tuple[dict, pd.DataFrame, dict]:
    """``(manifest, points: crds, phase, target, value, run, features)`` of one run: heap by cause and RSS."""
    run = read_run(path)
    heap = run.heap_profiles()
    points = profile_points((int(r.crds), r.phase if isinstance(r.phase, str) and r.phase else None,
                             run.read_profile(r.file)) for r in heap.itertuples(index=False))
    points = points[points["metric"] == "bytes"].rename(columns={"cause": "target"})
    rss = series_points(run.series, run.profile_marks(), metrics={"process_resident_memory_bytes": RSS})
    rss = rss.rename(columns={"metric": "target"})
    both = pd.concat([points[["crds", "phase", "target", "value"]], rss[["crds", "phase", "target", "value"]]])
    # The manifest carries the CRD set summary; crds/summary.json nests it under "summary".
    summary = run.manifest.get("crds") or (run.crd_summary or {}).get("summary")
    if not summary:
        sys.exit(f"{path}: no CRD set summary in its manifest or crds/summary.json")
    return run.manifest, both.assign(run=str(path)), features_from_summary(summary)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--experiment", default="sweep")
    parser.add_argument("--features", default="crds,properties")
    parser.add_argument("--validate", action="store_true")
    args = parser.parse_args(argv)
    loaded = [run_points(p) for p in args.runs]
    versions = {(m.get("versions") or {}).get("kube-apiserver") for m, _p, _f in loaded}
    if len(versions) != 1:
        sys.exit(f"runs of several kube-apiserver versions: {sorted(map(str, versions))}")
    version = versions.pop().lstrip("v")
    if args.validate:
        model = shipped_model(version)
        for (manifest, points, features), path in zip(loaded, args.runs):
            measured = training_rows(points, {str(path): features})
            top = measured[measured["installed"] == measured["installed"].max()].set_index("target")["added"]
            predicted = predict(model, features).set_index("target")
            for target in (TOTAL, RSS):
                p = predicted.loc[target]
                m = top.get(target)
                print(f"{path}: {target}: predicted {p['value'] / 2**20:,.1f} MiB "
                      f"[{p['low'] / 2**20:,.1f}, {p['high'] / 2**20:,.1f}], measured {m / 2**20:,.1f} MiB "
                      f"({100 * (p['value'] - m) / m:+.1f}%)")
        return 0
    points = pd.concat([p for _m, p, _f in loaded], ignore_index=True)
    features = {str(path): f for (_m, _p, f), path in zip(loaded, args.runs)}
    machine = loaded[0][0].get("machine") or {}
    model = fit_footprint(training_rows(points, features), args.features.split(","), kube_version=version,
                          provenance={"experiment": args.experiment,
                                      "runs": [Path(p).name for p in args.runs],
                                      "machine": f"{machine.get('cpus')} CPUs, {machine.get('cpu_model')}, "
                                                 f"{(machine.get('memory_bytes') or 0) / 2**30:.0f} GiB",
                                      "date": time.strftime("%Y-%m-%d", time.gmtime()),
                                      "crd_sets": [(m.get("crds") or {}).get("sha256") for m, _p, _f in loaded]})
    out = MODELS / f"v{version}.json"
    out.write_text(json.dumps(model.to_dict(), indent=1) + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
