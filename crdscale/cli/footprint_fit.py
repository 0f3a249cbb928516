"""Fit the footprint's models and terms from runs, or check them: what refits crdscale's shipped files.

Examples:
  crdscale run crdscale/footprint/models/sweep.toml --out /tmp/fp --set target.kube_version=1.37.1
  crdscale footprint fit model /tmp/fp/<experiment> [--features crds,served_versions,properties]
  crdscale footprint fit model SWEEP CELLS... --keep-from crdscale/footprint/models/v1.37.1.json --out NEW.json
  crdscale footprint fit validate RUN... [--model FILE]     # predicted vs measured, runs not fitted on
  crdscale footprint fit peak RUN_OR_EXPERIMENT... [--model FILE]
  crdscale footprint fit record 'validation=RUN: what it validates' --kube-version V [--model FILE]
  crdscale footprint fit error-model RUN_OR_EXPERIMENT... [--features F,F] [-v] [-o json]
  crdscale footprint fit states --installed REPEATABILITY --openapi-v2 OPENAPI_V2 [--controller-manager CM]
  crdscale footprint fit objects EXPERIMENT_OR_RUNS... [--validate RUN...] [--write] [-o json]
  crdscale footprint fit cel RUN [CRD_SOURCE] [--model FILE]  # heap per CEL rule, from a run of CRDs with rules
  crdscale footprint fit descriptions CELL CELL... [--model FILE]  # heap per byte of description text

model: fits the model on sweep runs of one kube-apiserver version (the fit behind 'crdscale footprint
--calibrate', crdscale.footprint.calibrate.fit_runs) and writes it over the shipped model of that version
(or to --out), with its provenance; --keep-from MODEL keeps MODEL's peak excess and every provenance.uses
role but fitting (its validation sets stay named as held out, its feature selection as made): for adding
calibration cells to a model whose other decisions stand. An experiment directory stands for its
completed cells.

validate: predicts each run with the model of its version and prints predicted vs measured growth (heap,
settled RSS, and peak RSS when the model has a peak excess).
peak: measures peak minus settled RSS growth on each run (crdscale.footprint.fit.rss_growths) and writes
its lognormal excess into the model of the runs' version, recording the runs under provenance.uses.peak_excess.
record ROLE=TEXT: adds TEXT to provenance.uses.ROLE (fitting, feature_selection, peak_excess, validation):
the record, shipped with the model and printed by 'crdscale footprint --explain', of which runs informed
what, so a validation set is known to be held out.
error-model: which error model a model's intervals should use, chosen on its fitting runs alone: each run
predicted by a model fitted on the others, once per error scale (the misfit proportional to the predicted
total, or to served versions): how many runs fall inside their 95 % interval, the mean absolute error and
the median width (high over low). No held-out validation set belongs here.

states: writes crdscale/footprint/models/states-v<version>.json for every version both experiments ran
(scenarios/repeatability.toml: installed vs served, kube-controller-manager off; scenarios/openapi-v2.toml:
before and after a GET of /openapi/v2; scenarios/controller-manager.toml: installed only, without and
with it), each term's runs in its provenance (crdscale.footprint.terms says how each term is measured).

cel: adds CEL validation rules (x-kubernetes-validations, which the sweep's generated CRDs lack) to the model of
the run's version as a feature, cel_rules: the run's cel heap growth over the rules it had installed (CRD_SOURCE:
the set it installed, in its order; omitted, the rules its manifest counted, for a run that installed its whole
set, e.g. scenarios/calibration-cel.toml's generated upjet-shaped rules), into the cel cause, the total and settled RSS (crdscale.footprint.calibrate.
add_cel_term), the run recorded under provenance.uses.cel_term. A refit ('fit model', --calibrate) leaves the
feature out; run this again after it.

descriptions: adds description text (which the sweep's generated schemas lack) to the model of the cells'
version as a feature, description_bytes: per target, what provider-scale cells of generated CRDs with
descriptions (benchmarks/footprint-calibration-provider-scale.toml, no CEL rules) measured beyond the model's
prediction, per byte of their text (crdscale.footprint.calibrate.add_description_term), recorded under
provenance.uses.description_term. Run it after 'fit model' and, like 'fit cel', again after a refit.

objects: fits the per-object term on the cells of scenarios/objects-shapes.toml (one kube-apiserver
version; crdscale.footprint.terms); --validate runs are predicted and compared, never fitted on; --write
stores it as crdscale/footprint/models/objects-v<version>.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from crdscale.cli.common import add_output_argument
from crdscale.cli.options import footprint_features
from crdscale.errors import UsageError

log = logging.getLogger(__name__)


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="what", metavar="WHAT", required=True)
        model = sub.add_parser("model", help="fit the model on sweep runs and write it")
        model.add_argument("runs", nargs="+", metavar="RUN_OR_EXPERIMENT")
        model.add_argument("--experiment", help="how the provenance names the experiment (default: its directories)")
        model.add_argument("--features", type=footprint_features, help="comma-separated (default: the shipped model's)")
        model.add_argument("--out", metavar="FILE", help="write the model here instead of over the shipped one")
        model.add_argument("--keep-from", metavar="MODEL", help="keep this model's peak excess and provenance roles")
        validate = sub.add_parser("validate", help="predict runs with the model of their version, compare")
        validate.add_argument("runs", nargs="+", metavar="RUN")
        peak = sub.add_parser("peak", help="fit the peak RSS excess on runs into the model of their version")
        peak.add_argument("runs", nargs="+", metavar="RUN_OR_EXPERIMENT")
        record = sub.add_parser("record", help="add ROLE=TEXT to a model's provenance.uses")
        record.add_argument("entries", nargs="+", metavar="ROLE=TEXT")
        record.add_argument("--kube-version", metavar="V", help="the shipped model of this version")
        described = sub.add_parser("descriptions", help="add heap per byte of description text, from generated cells")
        described.add_argument("runs", nargs="+", metavar="CELL")
        cel = sub.add_parser("cel", help="add heap per CEL rule, measured on a run of real CRDs, to the model")
        cel.add_argument("runs", nargs=1, metavar="RUN")
        cel.add_argument(
            "crds",
            metavar="CRD_SOURCE",
            nargs="?",
            help="the CRDs the run installed, in its order (default: the rules its manifest counted)",
        )
        for p in (validate, peak, record, cel, described):
            p.add_argument("--model", metavar="FILE", help="this model file instead of the shipped one")
        errors = sub.add_parser("error-model", help="each run predicted from the others, per error scale")
        errors.add_argument("runs", nargs="+", metavar="RUN_OR_EXPERIMENT")
        errors.add_argument(
            "--features", type=footprint_features, help="comma-separated (default: the shipped model's)"
        )
        errors.add_argument("-v", "--verbose", action="store_true", help="every run's prediction")
        states = sub.add_parser("states", help="fit the state terms (installed, watched, openapi-v2) and write them")
        states.add_argument("--installed", nargs="+", required=True, metavar="RUN_OR_EXPERIMENT")
        states.add_argument("--openapi-v2", nargs="+", required=True, metavar="RUN_OR_EXPERIMENT")
        states.add_argument("--controller-manager", nargs="+", default=[], metavar="RUN_OR_EXPERIMENT")
        states.add_argument("--watch", action="append", default=[], metavar="VERSION=VALUE,LOW,HIGH")
        objects = sub.add_parser("objects", help="fit the per-object term on object runs")
        objects.add_argument("runs", nargs="+", metavar="EXPERIMENT_OR_RUNS")
        objects.add_argument("--validate", nargs="*", default=[], metavar="RUN", help="object runs to predict, not fit")
        objects.add_argument("--write", action="store_true", help="write crdscale/footprint/models/objects-v<V>.json")
        for p in (errors, objects):
            add_output_argument(p, human="text")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        try:
            return FITS[args.what](args)
        except ValueError as err:  # a fit the runs cannot determine (numpy's or ours): one line, not a traceback
            raise UsageError(str(err)) from None


def _model(args: argparse.Namespace) -> int:
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.footprint.calibrate import fit_runs, keep_from, read_run_input, run_dirs_of
    from crdscale.footprint.store import shipped_path, write_model

    model = fit_runs(
        [read_run_input(p) for p in run_dirs_of(args.runs)],
        features=args.features.split(",") if args.features else None,
        experiment=args.experiment or ", ".join(args.runs),
        method="crdscale footprint fit model",
    )
    if args.keep_from:
        keep_from(model, args.keep_from)
    print(write_model(model, args.out or shipped_path(model.kube_version)))
    return 0


def _validate(args: argparse.Namespace) -> int:
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.footprint.calibrate import validation_lines

    print("\n".join(validation_lines(args.runs, args.model)))
    return 0


def _peak(args: argparse.Namespace) -> int:
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.footprint.calibrate import add_peak

    path, lines = add_peak(args.runs, args.model)
    print("\n".join([*lines, str(path)]))
    return 0


def _cel(args: argparse.Namespace) -> int:
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.footprint.calibrate import add_cel_term

    path, line = add_cel_term(args.runs[0], args.crds, args.model)
    print("\n".join([line, str(path)]))
    return 0


def _descriptions(args: argparse.Namespace) -> int:
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.footprint.calibrate import add_description_term

    path, lines = add_description_term(args.runs, args.model)
    print("\n".join([*lines, str(path)]))
    return 0


def _record(args: argparse.Namespace) -> int:
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.footprint.calibrate import record_uses

    if not args.kube_version and not args.model:
        raise UsageError("record needs --kube-version or --model")
    print(record_uses(args.entries, args.kube_version or "", args.model))
    return 0


def _error_model(args: argparse.Namespace) -> int:
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.footprint.calibrate import error_model

    version, runs, table, summary = error_model(args.runs, args.features.split(",") if args.features else None)
    if args.output == "json":
        print(json.dumps({"kube_version": version, "summary": summary}, indent=1))
        return 0
    print(f"kube-apiserver v{version}, {runs} runs, each predicted from the others:")
    for r in summary:
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


def _states(args: argparse.Namespace) -> int:
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.footprint.store import states_path
    from crdscale.footprint.terms import fit_state_terms
    from crdscale.fsutil import write_atomic

    terms, missing = fit_state_terms(
        args.installed, args.openapi_v2, controller_manager=args.controller_manager, watch=args.watch
    )
    for version, term in terms.items():
        print(write_atomic(states_path(version), json.dumps(term.to_dict(), indent=1) + "\n"))
    if missing:
        print(f"left out (only one experiment ran them): {', '.join(missing)}", file=sys.stderr)
    return 0


def _objects(args: argparse.Namespace) -> int:
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.footprint.store import objects_path
    from crdscale.footprint.terms import fit_object_cells, object_fit_lines

    term, result = fit_object_cells(args.runs, args.validate)
    if args.write:
        path = objects_path(term.kube_version)
        path.write_text(json.dumps(term.to_dict(), indent=1) + "\n")
        result["written"] = str(path)
    if args.output == "json":
        print(json.dumps(result, indent=1))
        return 0
    print("\n".join(object_fit_lines(result, term)))
    if args.write:
        print(f"wrote {result['written']}")
    return 0


FITS = {
    "model": _model,
    "validate": _validate,
    "peak": _peak,
    "record": _record,
    "error-model": _error_model,
    "states": _states,
    "objects": _objects,
    "cel": _cel,
    "descriptions": _descriptions,
}


def calibrate(args: argparse.Namespace) -> int:
    """``crdscale footprint --calibrate``: run the sweep here, fit, keep the model (its output as -o asks)."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.cli.common import run_with_progress
    from crdscale.footprint.calibrate import calibrate
    from crdscale.footprint.store import calibrated_path, write_model
    from crdscale.paths import runs_dir

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
        data = {"model_path": str(path), "experiment": str(result.experiment), "model": result.model.to_dict()}
        print(json.dumps(data, indent=2))
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
