"""Which growth form a cost follows, chosen by held-out error on sweep runs (not guessed).

Usage:
  python scripts/superlinear_footprint.py RUN_OR_EXPERIMENT... [--target openapi] [-o json]

For each run, every form of crdscale.footprint.fit.GROWTH_FORMS (linear in CRDs; plus CRDs x
schema bytes; plus CRDs squared) is fitted on the other runs' steps and this run's steps but its
largest, and predicts the largest (crdscale.footprint.fit.held_out_growth_errors). Prints each
form's held-out errors per run and their mean absolute error. Runs of one kube-apiserver version;
a held-out validation set (the model provenance's uses.validation) must not be given here.
"""

from __future__ import annotations

import argparse
import json
import sys

import pandas as pd

from crdscale.errors import CrdscaleError
from crdscale.footprint.calibrate import read_run_input, run_dirs_of
from crdscale.footprint.fit import held_out_growth_errors, training_rows


def steps_of(paths, target: str) -> pd.DataFrame:
    frames = []
    for path in run_dirs_of(paths):
        run = read_run_input(path)
        rows = training_rows(run.points, {str(run.path): run.features})
        rows = rows[rows["target"] == target]
        frames.append(
            pd.DataFrame(
                {
                    "run": run.path.name,
                    "installed": rows["installed"].to_numpy(),
                    "bytes_per_crd": run.features["schema_bytes"] / run.features["crds"],
                    "added": rows["added"].to_numpy(),
                    "version": run.kube_version,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--target", default="openapi", help="a cause, total or rss (default openapi)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    try:
        steps = steps_of(args.runs, args.target)
    except CrdscaleError as err:
        sys.exit(f"superlinear_footprint: {err}")
    if steps["version"].nunique() != 1:
        sys.exit(f"superlinear_footprint: runs of several versions: {sorted(steps['version'].unique())}")
    errors = held_out_growth_errors(steps)
    summary = errors.groupby("form", sort=False)["error"].agg(lambda e: float(e.abs().mean())).to_dict()
    if args.output == "json":
        print(json.dumps({"errors": errors.to_dict("records"), "mean_abs_error": summary}, indent=2))
        return 0
    print(f"{args.target}, v{steps['version'].iloc[0]}: a run's largest step predicted from the rest")
    for r in errors.itertuples(index=False):
        print(
            f"  {r.form:<22}{r.run[-48:]:<50}{r.installed:>6} CRDs  predicted {r.predicted / 2**20:10,.1f} MiB  "
            f"measured {r.measured / 2**20:10,.1f} MiB  {100 * r.error:+7.1f}%"
        )
    for form, mae in summary.items():
        print(f"mean absolute held-out error, {form}: {100 * mae:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
