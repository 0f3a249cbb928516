"""Refit the footprint models shipped in crdscale/footprint_models/, or check one on a run.

Usage:
  crdscale run crdscale/footprint_models/sweep.toml --out /tmp/fp --set 'target.kube_version="1.37.1"'
  python scripts/fit_footprint.py /tmp/fp/<experiment> [--features crds,served_versions,properties]
  python scripts/fit_footprint.py --validate RUN_DIR [--model FILE]   # predicted vs measured, a run not fitted on
  python scripts/fit_footprint.py --peak RUN_OR_EXPERIMENT... [--model FILE]   # the peak RSS excess, from these runs
  python scripts/fit_footprint.py --record 'validation=RUN: what it validates' --kube-version V [--model FILE]
  python scripts/fit_footprint.py SWEEP CELLS... --keep-from crdscale/footprint_models/vV.json --out NEW.json

--peak measures peak minus settled RSS growth on each run (crdscale.analysis.footprint.rss_growths)
and writes its lognormal excess into the model of the runs' version, recording the runs under
provenance.uses.peak_excess. --record ROLE=TEXT adds TEXT to provenance.uses.ROLE (fitting,
feature_selection, peak_excess, validation): the record, shipped with the model and printed by
'crdscale footprint --explain', of which runs informed what, so a validation set is known to be
held out. --keep-from MODEL refits on new runs but keeps MODEL's peak excess and every
provenance.uses role but fitting (its validation sets stay named as held out, its feature selection
as made): for adding calibration cells to a model whose other decisions stand.

The fit is crdscale's own (crdscale.scenario.calibrate.fit_runs, the one behind
`crdscale footprint --calibrate`); this script only writes its result over the
shipped model of the runs' kube-apiserver version, with its provenance. An
experiment directory stands for its completed cells.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from crdscale.analysis.footprint import RSS, final_growth, fit_peak_excess, predict, training_rows
from crdscale.analysis.targets import TOTAL
from crdscale.errors import CrdscaleError, UsageError
from crdscale.footprint_models import choose_model, read_model, shipped_path, write_model
from crdscale.scenario.calibrate import fit_runs, read_rss_growth, read_run_input, run_dirs_of


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


def add_peak(paths, model_file=None) -> Path:
    """Fit the peak RSS excess (peak minus settled growth) on these runs and write it into the model of
    their version."""
    runs = run_dirs_of(paths)
    versions = {read_run_input(p).kube_version for p in runs}
    if len(versions) != 1:
        raise UsageError(f"--peak takes runs of one kube-apiserver version, got {sorted(map(str, versions))}")
    target = Path(model_file) if model_file else shipped_path(versions.pop())
    model = read_model(target)
    growths = []
    for run in runs:
        g = read_rss_growth(run)
        print(f"{run}: peak {g['peak'] / 2**20:,.1f} MiB, settled {g['settled'] / 2**20:,.1f} MiB")
        growths.append((g["peak"], g["settled"]))
    try:
        model.peak = fit_peak_excess(growths)
    except ValueError as err:
        raise UsageError(str(err)) from None
    uses = model.provenance.setdefault("uses", {})
    uses.pop("peak_ratio", None)
    uses["peak_excess"] = [f"{p.parent.name}/{p.name}" for p in runs]
    return write_model(model, target)


def record(entries, version, model_file=None) -> Path:
    """Add ``ROLE=TEXT`` entries to the model's provenance.uses."""
    target = Path(model_file) if model_file else shipped_path(version)
    model = read_model(target)
    uses = model.provenance.setdefault("uses", {})
    for entry in entries:
        role, sep, text = entry.partition("=")
        if not sep or not text:
            raise UsageError(f"--record {entry!r}: expected ROLE=TEXT")
        if text not in uses.setdefault(role.strip(), []):
            uses[role.strip()].append(text.strip())
    return write_model(model, target)


def keep_from(model, old_path) -> None:
    """Carry ``old_path``'s peak excess and its provenance.uses roles other than fitting into ``model``
    (a refit on more cells: the decisions those roles record were not redone)."""
    old = read_model(Path(old_path))
    if old.kube_version != model.kube_version:
        raise UsageError(f"--keep-from {old_path}: a v{old.kube_version} model, the runs are v{model.kube_version}")
    uses = model.provenance.setdefault("uses", {})
    for role, entries in (old.provenance.get("uses") or {}).items():
        if role not in ("fitting", "peak_excess"):
            uses[role] = list(entries)
    if old.peak is not None:
        model.peak = old.peak
        uses["peak_excess"] = list((old.provenance.get("uses") or {}).get("peak_excess", []))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="*", help="run or experiment directories")
    parser.add_argument("--experiment", help="how the provenance names the experiment (default: its directory)")
    parser.add_argument("--features", help="comma-separated (default: the shipped model's)")
    parser.add_argument("--validate", action="store_true", help="predict each run and compare, fit nothing")
    parser.add_argument("--model", help="--validate/--peak/--record: this model file instead of the shipped one")
    parser.add_argument("--peak", action="store_true", help="fit the peak RSS ratio on the runs into the model")
    parser.add_argument("--record", action="append", metavar="ROLE=TEXT", help="add to the model's provenance.uses")
    parser.add_argument("--kube-version", help="--record: the shipped model of this version")
    parser.add_argument("--out", help="write the fitted model here instead of over the shipped one")
    parser.add_argument("--keep-from", metavar="MODEL", help="keep this model's peak excess and provenance roles")
    args = parser.parse_args(argv)
    try:
        if args.record:
            if not args.kube_version and not args.model:
                raise UsageError("--record needs --kube-version or --model")
            print(record(args.record, args.kube_version or "", args.model))
            return 0
        if not args.runs:
            raise UsageError("no run directories given")
        if args.peak:
            print(add_peak(args.runs, args.model))
            return 0
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
        if args.keep_from:
            keep_from(model, args.keep_from)
    except CrdscaleError as err:
        sys.exit(f"fit_footprint: {err}")
    print(write_model(model, args.out or shipped_path(model.kube_version)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
