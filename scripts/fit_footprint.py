"""Refit the footprint models shipped in crdscale/footprint_models/, or check one on a run.

Usage:
  crdscale run crdscale/footprint_models/sweep.toml --out /tmp/fp --set 'target.kube_version="1.37.1"'
  python scripts/fit_footprint.py /tmp/fp/<experiment> [--features crds,served_versions,properties]
  python scripts/fit_footprint.py --validate RUN_DIR [--model FILE]   # predicted vs measured, a run not fitted on

The fit is crdscale's own (crdscale.scenario.calibrate.fit_runs, the one behind
`crdscale footprint --calibrate`); this script only writes its result over the
shipped model of the runs' kube-apiserver version, with its provenance. An
experiment directory stands for its completed cells.
"""

from __future__ import annotations

import argparse
import sys

from crdscale.analysis.footprint import RSS, TOTAL, final_growth, predict, training_rows
from crdscale.errors import CrdscaleError
from crdscale.footprint_models import choose_model, shipped_path, write_model
from crdscale.scenario.calibrate import fit_runs, read_run_input, run_dirs_of


def validate(paths, model_file=None) -> None:
    for path in paths:
        run = read_run_input(path)
        chosen = choose_model(run.kube_version, path=model_file, shipped_only=model_file is None)
        measured = final_growth(training_rows(run.points, {str(run.path): run.features})).set_index("target")["added"]
        predicted = predict(chosen.model, run.features).set_index("target")
        for target in (TOTAL, RSS):
            p, m = predicted.loc[target], measured[target]
            print(
                f"{path}: {target}: predicted {p['value'] / 2**20:,.1f} MiB "
                f"[{p['low'] / 2**20:,.1f}, {p['high'] / 2**20:,.1f}], measured {m / 2**20:,.1f} MiB "
                f"({100 * (p['value'] - m) / m:+.1f}%)"
            )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run or experiment directories")
    parser.add_argument("--experiment", help="how the provenance names the experiment (default: its directory)")
    parser.add_argument("--features", help="comma-separated (default: the shipped model's)")
    parser.add_argument("--validate", action="store_true", help="predict each run and compare, fit nothing")
    parser.add_argument("--model", help="--validate with this model file instead of the shipped one")
    args = parser.parse_args(argv)
    try:
        if args.validate:
            validate(args.runs, args.model)
            return 0
        inputs = [read_run_input(p) for p in run_dirs_of(args.runs)]
        model = fit_runs(
            inputs,
            features=args.features.split(",") if args.features else None,
            experiment=args.experiment or ", ".join(args.runs),
            method="scripts/fit_footprint.py",
        )
    except CrdscaleError as err:
        sys.exit(f"fit_footprint: {err}")
    print(write_model(model, shipped_path(model.kube_version)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
