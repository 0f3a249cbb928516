"""Which error model a footprint model's intervals should use, chosen on its fitting runs alone.

Usage:
  python scripts/footprint_error_model.py RUN_OR_EXPERIMENT... [--features F,F] [-o json]

Each run is predicted by a model fitted on the others (crdscale.analysis.footprint.leave_one_run_out), once
per error scale (crdscale.analysis.footprint.ERROR_SCALES: the misfit proportional to the predicted total,
or to served versions): how many runs fall inside their 95 % interval, the mean absolute error, and the
median width (high over low). Features default to the shipped model's of the runs' version. Runs of one
kube-apiserver version; no held-out validation set belongs here.
"""

from __future__ import annotations

import argparse
import json
import sys

import pandas as pd

from crdscale.analysis.footprint import ERROR_SCALES, leave_one_run_out
from crdscale.errors import CrdscaleError
from crdscale.scenario.calibrate import default_features, read_run_input, run_dirs_of, runs_training_rows


def summary(table: pd.DataFrame) -> list[dict]:
    out = []
    for (scale, target), g in table.groupby(["error_scale", "target"], sort=False):
        out.append(
            {
                "error_scale": scale,
                "target": target,
                "runs": len(g),
                "inside": int(g["inside"].sum()),
                "mean_abs_error": float(g["error"].abs().mean()),
                "median_width": float((g["high"] / g["low"]).median()),
            }
        )
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--features", help="comma-separated (default: the shipped model's)")
    parser.add_argument("-v", "--verbose", action="store_true", help="every run's prediction")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    try:
        inputs = [read_run_input(p) for p in run_dirs_of(args.runs)]
        version, rows = runs_training_rows(inputs)
        features = args.features.split(",") if args.features else default_features(version)
        table = pd.concat(
            [leave_one_run_out(rows, features, error_scale=s).assign(error_scale=s) for s in ERROR_SCALES],
            ignore_index=True,
        )
    except (CrdscaleError, ValueError) as err:
        print(f"footprint_error_model: {err}", file=sys.stderr)
        return getattr(err, "exit_code", 2)
    result = summary(table)
    if args.output == "json":
        print(json.dumps({"kube_version": version, "summary": result}, indent=1))
        return 0
    print(f"kube-apiserver v{version}, {len(inputs)} runs, each predicted from the others:")
    for r in result:
        print(
            f"  {r['error_scale']:<16} {r['target']:<6} inside {r['inside']}/{r['runs']}, "
            f"mean |error| {100 * r['mean_abs_error']:.1f} %, median width x{r['median_width']:.2f}"
        )
    if args.verbose:
        for r in table.itertuples(index=False):
            print(
                f"    {r.error_scale:<16} {r.target:<6} {r.run.rsplit('/', 2)[-2][:16]}/{r.run.rsplit('/', 1)[-1]}: "
                f"{100 * r.error:+.1f} % {'inside' if r.inside else 'OUTSIDE'} (x{r.high / r.low:.2f})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
