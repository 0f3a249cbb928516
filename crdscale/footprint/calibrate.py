"""Footprint calibration: run the footprint sweep here, fit the model, keep it with its provenance.

``crdscale footprint --calibrate`` and ``crdscale footprint fit model`` (which refits the
shipped models) both go through :func:`fit_runs`: runs of a sweep are read with
:func:`crdscale.rundir.read_run`, turned into the points the pure fit of
:mod:`crdscale.footprint.fit` takes, and fitted. :func:`calibrate` first runs
the sweep (``crdscale/footprint/models/sweep.toml`` unless told otherwise) as an
ordinary experiment directory, one cell after another, so Ctrl-C ends it like any
``crdscale run``: processes stopped, partial runs kept and marked interrupted, and
no model written.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crdscale.analysis.percrd import series_points
from crdscale.analysis.rundata import heap_points, heap_profile_set
from crdscale.analysis.targets import TOTAL
from crdscale.crds.generate import generate_crds
from crdscale.crds.load import load_crds
from crdscale.crds.summary import summarize
from crdscale.errors import UsageError
from crdscale.footprint.features import (
    TERM_FEATURES,
    add_features,
    crd_features,
    features_from_summary,
    summary_counts_cel,
)
from crdscale.footprint.fit import (
    final_growth,
    fit_footprint,
    fit_peak_excess,
    leave_one_run_out,
    rss_growths,
    training_rows,
)
from crdscale.footprint.model import ERROR_SCALES, RSS, RSS_PEAK, FootprintModel, predict
from crdscale.footprint.store import (
    choose_model,
    read_model,
    shipped_path,
    shipped_versions,
    sweep_path,
    write_model,
)
from crdscale.rundir import layout, read_run
from crdscale.scenario.config import Crds, Scenario, load_scenario
from crdscale.scenario.experiment import Experiment
from crdscale.scenario.runner import ScenarioRunner

# Per CRD, per served version, per schema property: what the sweep varies independently.
DEFAULT_FEATURES = ("crds", "served_versions", "properties")
PROC_JOB = layout.PROC_JOB  # RSS read from /proc every interval
APISERVER_JOB = layout.APISERVER_JOB  # its own /metrics: the RSS of runs without /proc samples (remote, older)

log = logging.getLogger(__name__)


@dataclass
class RunInput:
    """What a fit takes from one run: ``points`` (``run, crds, phase, target, value``: heap bytes
    by cause and ``total`` from its heap profiles, ``rss`` from its series) and the
    ``features`` of its whole CRD set."""

    path: Path
    manifest: dict[str, Any]
    points: pd.DataFrame
    features: dict[str, float]
    rss: dict[str, float] | None = None  # rss_growths: baseline, settled, peak, end

    @property
    def kube_version(self) -> str | None:
        version = (self.manifest.get("versions") or {}).get("kube-apiserver")
        return version.lstrip("v") if version else None


def read_run_input(path: str | Path) -> RunInput:
    """:class:`RunInput` of the run directory ``path``; UsageError when it has no CRD set summary."""

    run = read_run(path)
    found = heap_profile_set(run)
    for skipped in found.skipped:  # as analyze and compare do: left out of the fit, and said
        log.warning(f"{run.path}: left out of the fit: {skipped}")
    points = heap_points(run, profiles=found)
    points = points[points["metric"] == "bytes"].rename(columns={"cause": "target"})
    marks = run.profile_marks()
    rss = pd.DataFrame(columns=["crds", "phase", "metric", "value"])
    # /proc first: sampled every second, while kube-apiserver's /metrics may be 5 s or more old at a mark.
    for job in (PROC_JOB, APISERVER_JOB):
        rss = series_points(run.series, marks, job=job, metrics={"process_resident_memory_bytes": RSS})
        if len(rss):
            break
    rss = rss.rename(columns={"metric": "target"})
    both = pd.concat(
        [points[["crds", "phase", "target", "value"]], rss[["crds", "phase", "target", "value"]]], ignore_index=True
    )
    summary = run.manifest.get("crds")
    if not summary:
        raise UsageError(f"{path}: no CRD set summary in its manifest: not a run of a scenario")
    return RunInput(
        run.path,
        run.manifest,
        both.assign(run=str(run.path)),
        features_from_summary(_with_term_counts(summary, run.manifest.get("scenario") or {})),
        _rss_growth(run),
    )


def _with_term_counts(summary: Mapping[str, Any], scenario: Mapping[str, Any]) -> Mapping[str, Any]:
    """``summary`` with its CEL rules and description text counted: a summary recorded before they were (2026-11-28)
    of a generated set gets them from the set regenerated from its recorded parameters (the same CRDs: checked
    by the summary's sha256); any other is returned as it is."""
    crds = scenario.get("crds") or {}
    if summary.get("description_bytes") is not None or crds.get("source") != "generate":
        return summary
    keys = {f.name for f in dataclasses.fields(Crds)}
    again = summarize(generate_crds(Crds(**{k: v for k, v in crds.items() if k in keys}).generator_params())).to_dict()
    return again if again["sha256"] == summary.get("sha256") else summary


def read_rss_growth(path: str | Path) -> dict[str, float]:
    """The RSS growths of the run directory ``path`` (:func:`crdscale.footprint.fit.rss_growths`:
    baseline, settled, peak, end; bytes) from its /proc samples, else kube-apiserver's own metric."""
    return _rss_growth(read_run(path))


def _rss_growth(run) -> dict[str, float]:
    series = run.series
    if series is None or not len(series):
        return rss_growths(pd.Series(dtype=float), run.profile_marks())
    rss_rows = series["metric"] == "process_resident_memory_bytes"
    for job in (PROC_JOB, APISERVER_JOB) if "job" in series.columns else (None,):
        sel = series[rss_rows & (series["job"] == job)] if job else series[rss_rows]
        if len(sel):
            rss = pd.Series(sel["value"].to_numpy(dtype=float), index=pd.to_datetime(sel["timestamp"], utc=True))
            return rss_growths(rss.groupby(level=0).sum(), run.profile_marks())
    return rss_growths(pd.Series(dtype=float), run.profile_marks())


def machine_line(manifest: Mapping[str, Any]) -> str:
    """``2 CPUs, AMD EPYC, 24 GiB``: the machine a run recorded."""
    machine = manifest.get("machine") or {}
    return (
        f"{machine.get('cpus')} CPUs, {machine.get('cpu_model')}, {(machine.get('memory_bytes') or 0) / 2**30:.0f} GiB"
    )


def provenance(inputs: Sequence[RunInput], *, experiment: str, method: str) -> dict[str, Any]:
    """Where a model's coefficients come from: the ``experiment`` (what was run, where it is),
    the ``method`` (the command that fitted), its runs, machine, date, kube-apiserver binary
    and the CRD sets' sha256."""
    first = inputs[0].manifest
    binary = (first.get("binaries") or {}).get("kube-apiserver") or {}
    return {
        "experiment": experiment,
        "method": method,
        "runs": [i.path.name for i in inputs],
        "machine": machine_line(first),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "kube_apiserver_sha256": binary.get("sha256"),
        "crd_sets": [(i.manifest.get("crds") or {}).get("sha256") for i in inputs],
        # Which runs informed what; a validation set must appear under no other role.
        "uses": {"fitting": [i.path.name for i in inputs]},
    }


def default_features(version: str) -> list[str]:
    """The features of the model shipped for ``version`` (so calibrating refits the same model),
    else :data:`DEFAULT_FEATURES`."""
    if version.lstrip("v") in shipped_versions():
        features = choose_model(version, shipped_only=True).model.features
        return [f for f in features if f not in TERM_FEATURES]  # a sweep cannot fit those: terms, added after
    return list(DEFAULT_FEATURES)


def runs_training_rows(inputs: Sequence[RunInput]) -> tuple[str, pd.DataFrame]:
    """The one kube-apiserver version of ``inputs`` and their
    :func:`~crdscale.footprint.fit.training_rows`; UsageError without runs or when they mix versions."""
    if not inputs:
        raise UsageError("no runs to fit on")
    versions = {i.kube_version for i in inputs}
    if len(versions) != 1 or None in versions:
        raise UsageError(f"runs of several kube-apiserver versions: {sorted(map(str, versions))}")
    points = pd.concat([i.points for i in inputs], ignore_index=True)
    return versions.pop(), training_rows(points, {str(i.path): i.features for i in inputs})


def fit_runs(
    inputs: Sequence[RunInput], *, features: Sequence[str] | None = None, experiment: str, method: str
) -> FootprintModel:
    """Fit a :class:`FootprintModel` on sweep runs of one kube-apiserver version (see
    :func:`crdscale.footprint.fit.fit_footprint`); ``features`` default to
    :func:`default_features`. UsageError when the runs mix versions or the features
    cannot be told apart on them."""
    version, rows = runs_training_rows(inputs)
    features = list(features or default_features(version))
    try:
        model = fit_footprint(
            rows, features, kube_version=version, provenance=provenance(inputs, experiment=experiment, method=method)
        )
    except ValueError as err:
        raise UsageError(f"{err} (--features)") from None
    # The same runs' peak minus settled RSS growth (they sample RSS every second): peak RSS growth.
    measured = [i for i in inputs if i.rss and i.rss["peak"] > 0 and i.rss["settled"] > 0]
    try:
        model.peak = fit_peak_excess([(i.rss["peak"], i.rss["settled"]) for i in measured])
        model.provenance["uses"]["peak_excess"] = [i.path.name for i in measured]
    except ValueError as err:
        log.warning(f"no peak RSS prediction: {err}")
    return model


def sweep_scenario(
    kube_version: str, sweep: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> Scenario:
    """The sweep (a scenario with a ``[matrix]``, default :func:`sweep_path`) on kube-apiserver
    ``kube_version``; UsageError when it has no matrix: one run cannot separate the features."""
    path = Path(sweep) if sweep else sweep_path()
    scenario = load_scenario(path, overrides={**(overrides or {}), "target.kube_version": kube_version.lstrip("v")})
    if not scenario.matrix:
        raise UsageError(f"{path}: a calibration sweep needs a [matrix] of CRD shapes (see {sweep_path()})")
    if not scenario.is_local:
        raise UsageError(f'{path}: calibration runs on a local control plane (target.kind = "local")')
    return scenario


def run_quietly(scenario: Scenario, parent: Path, name: str) -> Path:
    """Run one cell without progress output (what a notebook wants); returns its run directory."""

    return Path(ScenarioRunner(scenario, runs_parent=parent, run_name=name).execute().path)


@dataclass
class Calibration:
    """A calibration's result: the fitted ``model`` and the ``experiment`` directory it ran."""

    model: FootprintModel
    experiment: Path


def calibrate(
    kube_version: str,
    *,
    runs_parent: str | Path,
    sweep: str | Path | None = None,
    features: Sequence[str] | None = None,
    run_cell: Callable[[Scenario, Path, str], Path] = run_quietly,
) -> Calibration:
    """Run the sweep on a local kube-apiserver ``kube_version`` (an experiment directory under
    ``runs_parent``) and fit a model on its cells. Writes no model file: the caller decides
    where it goes. ``run_cell`` runs one cell (the CLI's draws progress bars); the experiment
    logs its progress lines with an ETA. Raises what the runs raise (Ctrl-C:
    :class:`crdscale.errors.RunInterrupted`)."""

    scenario = sweep_scenario(kube_version, sweep)
    experiment = Experiment.create(runs_parent, scenario)
    run_dirs = experiment.run(run_cell)
    model = fit_runs(
        [read_run_input(p) for p in run_dirs],
        features=features,
        experiment=f"{scenario.name} ({scenario.source_path}, {experiment.path.resolve()})",
        method=f"crdscale footprint --calibrate --kube-version {kube_version.lstrip('v')}",
    )
    return Calibration(model, experiment.path)


def run_dirs_of(paths: Iterable[str | Path]) -> list[Path]:
    """Run directories from ``paths``: an experiment directory stands for its completed cells."""

    out: list[Path] = []
    for path in map(Path, paths):
        if (path / layout.EXPERIMENT_MANIFEST).is_file():
            out += [run for _name, run in Experiment.open(path).completed_runs()]
        else:
            out.append(path)
    return out


# -- refitting and checking the shipped models (`crdscale footprint fit model|validate|peak|record|error-model`)


def validation_lines(paths: Iterable[str | Path], model_file: str | Path | None = None) -> list[str]:
    """Each run (one not fitted on) predicted by the model of its version (``model_file``, else the shipped
    one) and compared with what it measured: total heap, settled RSS growth and, when the model has a peak
    excess, peak RSS growth (:func:`read_rss_growth`), MiB. A run stopped before its whole set was in is named
    and not compared."""
    out = []
    for path in paths:
        run = read_run_input(path)
        chosen = choose_model(run.kube_version, path=model_file, shipped_only=model_file is None)
        final = final_growth(training_rows(run.points, {str(run.path): run.features}))
        installed, whole = int(final["installed"].max()), int(run.features["crds"])
        if installed < whole:
            # A prediction is for the whole set: against a run stopped early it reads as a gain it never measured
            # (the Azure run stopped at 1,155 of 1,539 CRDs showed +4.1 % where its installed CRDs' prediction is -15 %).
            out.append(
                f"{path}: stopped at {installed:,} of its {whole:,} CRDs: not compared (a prediction is for the whole "
                f"set; benchmarks/footprint.py --validation compares the CRDs a run installed)"
            )
            continue
        measured = final.set_index("target")["added"]
        predicted = predict(chosen.model, run.features).set_index("target")
        # A real set's summary recorded before its CEL rules and description text were counted reads as none of
        # either: said, since the model charges for them (a generated set's are counted again on reading).
        generated = ((run.manifest.get("scenario") or {}).get("crds") or {}).get("source") == "generate"
        uncounted = [
            what
            for feature, what in (("cel_rules", "CEL rules"), ("description_bytes", "description text"))
            if feature in chosen.model.features and run.manifest["crds"].get(feature) is None and not generated
        ]
        note = (
            f" ({' and '.join(uncounted)} not counted in this run's manifest: predicted without them)"
            if uncounted
            else ""
        )
        targets = [TOTAL, RSS]
        if RSS_PEAK in predicted.index:
            measured[RSS_PEAK] = read_rss_growth(run.path)["peak"]
            targets.append(RSS_PEAK)
        for target in targets:
            p, m = predicted.loc[target], measured[target]
            out.append(
                f"{path}: {target}: predicted {p['value'] / 2**20:,.1f} MiB "
                f"[{p['low'] / 2**20:,.1f}, {p['high'] / 2**20:,.1f}], measured {m / 2**20:,.1f} MiB "
                f"({100 * (p['value'] - m) / m:+.1f}%){note}"
            )
    return out


def add_peak(paths: Iterable[str | Path], model_file: str | Path | None = None) -> tuple[Path, list[str]]:
    """Fit the peak RSS excess (peak minus settled growth) on these runs and write it into the model of their
    version (``model_file``, else the shipped one), recording the runs under ``provenance.uses.peak_excess``;
    returns the file and a line per run."""
    runs = run_dirs_of(paths)
    versions = {read_run_input(p).kube_version for p in runs}
    if len(versions) != 1:
        raise UsageError(f"--peak takes runs of one kube-apiserver version, got {sorted(map(str, versions))}")
    target = Path(model_file) if model_file else shipped_path(versions.pop())
    model = read_model(target)
    growths, lines = [], []
    for run in runs:
        g = read_rss_growth(run)
        lines.append(f"{run}: peak {g['peak'] / 2**20:,.1f} MiB, settled {g['settled'] / 2**20:,.1f} MiB")
        growths.append((g["peak"], g["settled"]))
    try:
        model.peak = fit_peak_excess(growths)
    except ValueError as err:
        raise UsageError(str(err)) from None
    uses = model.provenance.setdefault("uses", {})
    uses.pop("peak_ratio", None)
    uses["peak_excess"] = [f"{p.parent.name}/{p.name}" for p in runs]
    return write_model(model, target), lines


def record_uses(entries: Iterable[str], version: str, model_file: str | Path | None = None) -> Path:
    """Add ``ROLE=TEXT`` entries to the ``provenance.uses`` of the model ``model_file`` (else the shipped one of
    ``version``): the record of which runs informed what (fitting, feature_selection, peak_excess,
    validation), so a validation set is known to be held out."""
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


def keep_from(model: FootprintModel, old_path: str | Path) -> None:
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


def error_model(
    paths: Iterable[str | Path], features: Sequence[str] | None = None
) -> tuple[str, int, pd.DataFrame, list[dict[str, Any]]]:
    """Which error model a model's intervals should use, chosen on its fitting runs alone: each run predicted
    by a model fitted on the others (:func:`~crdscale.footprint.fit.leave_one_run_out`), once per error scale.
    Returns the version, the number of runs, every prediction, and per error scale and target: ``runs,
    inside`` (their 95 % interval), ``mean_abs_error`` and ``median_width`` (high over low)."""
    inputs = [read_run_input(p) for p in run_dirs_of(paths)]
    version, rows = runs_training_rows(inputs)
    features = list(features) if features else default_features(version)
    table = pd.concat(
        [leave_one_run_out(rows, features, error_scale=s).assign(error_scale=s) for s in ERROR_SCALES],
        ignore_index=True,
    )
    summary = []
    for (scale, target), g in table.groupby(["error_scale", "target"], sort=False):
        summary.append(
            {
                "error_scale": scale,
                "target": target,
                "runs": len(g),
                "inside": int(g["inside"].sum()),
                "mean_abs_error": float(g["error"].abs().mean()),
                "median_width": float((g["high"] / g["low"]).median()),
            }
        )
    return version, len(inputs), table, summary


# Go samples the heap about once per 512 KiB allocated: a cause's sampled bytes B carry a variance of ~B x 512 KiB.
HEAP_SAMPLE_BYTES = 512 * 1024
CEL = "cel"


def _term_column(model: FootprintModel, feature: str) -> int:
    """The column of the term ``feature`` in ``model``, added (coefficient 0, no covariance) if it is not there:
    a term measured apart from the fit (CEL rules, description text) sits beside the fitted features."""
    if feature not in model.features:
        model.features.append(feature)
        for m in model.targets.values():
            m.coef.append(0.0)
            for row in m.cov:
                row.append(0.0)
            m.cov.append([0.0] * len(m.coef))
    return model.features.index(feature)


def add_cel_term(
    run_path: str | Path, crds: str | Path | None = None, model_file: str | Path | None = None
) -> tuple[Path, str]:
    """Add CEL validation rules to the model of the run's version (``model_file``, else the shipped one) as a
    feature, ``cel_rules``, measured on one run of real CRDs that carry them (``crds``: the set the run
    installed, in its order): heap per served rule = the run's ``cel`` growth over the rules it had installed
    at its last profile, added to the ``cel`` cause and the total; settled RSS per rule = that times the run's
    settled RSS over heap growth. Its variance is Go's heap sampling of that growth alone (the model's
    multiplicative misfit, which scales with the predicted total, covers the rest). The sweep's generated CRDs
    have no rules, so a refit leaves the feature out (:func:`default_features`); this adds it back. Without
    ``crds``, the rules the run's manifest counted (a run that installed its whole set, whose summary counts
    them: generated upjet-shaped rules, ``scenarios/calibration-cel.toml``). Returns
    the file written and a line saying what was measured. UsageError when the run recorded no CEL growth or
    its CRDs no rules."""
    run = read_run_input(run_path)
    growth = final_growth(training_rows(run.points, {str(run.path): run.features}))
    installed = int(growth["installed"].max())
    added = growth.set_index("target")["added"]
    if crds is not None:
        rules = add_features(load_crds(crds, measure=crd_features).measures[:installed])["cel_rules"]
    elif not summary_counts_cel(run.manifest["crds"]) or installed < run.features["crds"]:
        raise UsageError(
            f"{run_path}: its manifest does not count the CEL rules of the {installed:,} CRDs it installed "
            f"(recorded before they were counted, or stopped early): name the CRDs it installed"
        )
    else:
        rules = run.features["cel_rules"]
    if not rules or CEL not in added or added[CEL] <= 0:
        raise UsageError(f"{run_path}: no CEL rules installed or no CEL heap growth measured: nothing to fit")
    per_rule = float(added[CEL]) / rules
    se = math.sqrt(float(added[CEL]) * HEAP_SAMPLE_BYTES) / rules
    rss_per_heap = float(added[RSS]) / float(added[TOTAL])
    target = Path(model_file) if model_file else shipped_path(run.kube_version)
    model = read_model(target)
    i = _term_column(model, "cel_rules")
    for name, scale in ((CEL, 1.0), (TOTAL, 1.0), (RSS, rss_per_heap)):
        m = model.targets[name]
        m.coef[i], m.cov[i][i] = per_rule * scale, (se * scale) ** 2
    line = (
        f"{Path(run_path).name}: {rules:,.0f} CEL rules in {installed:,} CRDs, cel heap growth "
        f"{added[CEL] / 2**20:,.1f} MiB: {per_rule / 1024:,.1f} KiB per rule (se {se / 1024:,.1f} KiB, heap "
        f"sampling), settled RSS {rss_per_heap:.2f} x heap"
    )
    model.provenance.setdefault("uses", {})["cel_term"] = [line]
    return write_model(model, target), line


DESCRIPTIONS = "description_bytes"


def add_description_term(paths: Iterable[str | Path], model_file: str | Path | None = None) -> tuple[Path, list[str]]:
    """Add description text to the model of the cells' version (``model_file``, else the shipped one) as a feature,
    ``description_bytes``, measured on provider-scale cells of generated CRDs whose schemas carry it: per target
    (each heap cause, the total, settled RSS), what the cells measured beyond the model's prediction, summed over
    the cells, per byte of description text they served; kept at 0 or above (text holds memory, it frees none).
    Its variance is the spread of the cells' own per-byte figures. The sweep's generated schemas have no
    descriptions, so a refit leaves the feature out (:func:`default_features`); this adds it back.

    ``paths``: completed runs or experiments of one version, generated sets with descriptions and without CEL
    rules (their term is measured apart, :func:`add_cel_term`), e.g. two cells of
    ``benchmarks/footprint-calibration-provider-scale.toml``. Returns the file written and a line per target;
    the cells and lines go to ``provenance.uses.description_term``. UsageError for runs of several versions, sets
    with CEL rules or without descriptions, a run stopped early, or fewer than two cells."""
    inputs = [read_run_input(p) for p in run_dirs_of(paths)]
    if len(inputs) < 2:
        raise UsageError(f"a description term needs at least two cells, got {len(inputs)}")
    versions = {i.kube_version for i in inputs}
    if len(versions) != 1:
        raise UsageError(f"cells of one kube-apiserver version, got {', '.join(sorted(map(str, versions)))}")
    version = versions.pop()
    target = Path(model_file) if model_file else shipped_path(version)
    model = read_model(target)
    column = _term_column(model, DESCRIPTIONS)
    measured, predicted, text = [], [], []
    for run in inputs:
        if run.features.get("cel_rules"):
            raise UsageError(f"{run.path}: its CRDs carry CEL rules, whose term is measured apart: use cells without")
        if not run.features.get(DESCRIPTIONS):
            raise UsageError(f"{run.path}: no description text counted in its manifest: nothing to fit")
        final = final_growth(training_rows(run.points, {str(run.path): run.features}))
        if int(final["installed"].max()) < int(run.features["crds"]):
            raise UsageError(f"{run.path}: stopped before its whole set was in")
        measured.append(final.set_index("target")["added"])
        without = {**run.features, DESCRIPTIONS: 0.0}
        predicted.append(predict(model, without).set_index("target")["value"])
        text.append(run.features[DESCRIPTIONS])
    text_ = np.asarray(text)
    lines = []
    for name, m in model.targets.items():
        beyond = np.array([float(g.get(name, np.nan)) - float(p.get(name, 0.0)) for g, p in zip(measured, predicted)])
        if np.isnan(beyond).any():
            continue
        per_byte = max(float(beyond.sum() / text_.sum()), 0.0)
        cells = beyond / text_
        var = float(np.var(cells, ddof=1) / len(cells))
        m.coef[column], m.cov[column][column] = per_byte, var
        lines.append(
            f"{name}: {per_byte:.2f} bytes per byte of text (se {math.sqrt(var):.2f}; cells "
            f"{', '.join(f'{c:.2f}' for c in cells)})"
        )
    cells_line = ", ".join(f"{Path(i.path).name} ({t / 2**20:,.1f} MiB of text)" for i, t in zip(inputs, text))
    model.provenance.setdefault("uses", {})["description_term"] = [f"cells {cells_line}"] + lines
    return write_model(model, target), lines
