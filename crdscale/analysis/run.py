"""One run's analysis: every fit ``crdscale analyze`` computes, put together.

:func:`analyze` orchestrates the primitives of :mod:`crdscale.analysis.percrd` (heap profiles and
memory series per CRD) and every analysis of :data:`crdscale.analysis.registry.ANALYSES` (the
process figures, the per-object view, the v2 spec's cost, ...) into one :class:`RunAnalysis`; it
lives apart from them so that they never import it back. :func:`analyze_run` is it for a run
directory read by :func:`crdscale.rundir.read_run` (what ``crdscale analyze`` and notebooks call).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from crdscale.analysis.intervals import FEW_INCREMENTS
from crdscale.analysis.percrd import (
    FEW_INCREMENTS_WARNING,
    SERIES_METRICS,
    SkippedProfile,
    fit_install_serve,
    fit_per_crd,
    fit_per_property,
    fit_series_per_crd,
    phase_points,
    properties_per_crd,
    served_chain_fits,
    status_warning,
)
from crdscale.analysis.process import points_by_source
from crdscale.analysis.registry import Result, RunData, compute_all
from crdscale.analysis.rundata import HeapProfiles, crd_profiles, crd_step_marks, heap_points, heap_profile_set
from crdscale.errors import UsageError
from crdscale.rundir import layout
from crdscale.rundir.evidence import Problem
from crdscale.rundir.manifest import Manifest

if TYPE_CHECKING:
    from crdscale.rundir import Run


@dataclass
class RunAnalysis:
    """Everything ``crdscale analyze`` computes for one run directory."""

    run_dir: Path | None
    manifest: dict
    points: pd.DataFrame
    fits: pd.DataFrame
    residuals: pd.DataFrame
    series_points: pd.DataFrame
    series_fits: pd.DataFrame
    profiles: list[str]
    install_serve: pd.DataFrame = field(default_factory=pd.DataFrame)
    # Profiles the run holds that the fits leave out, with why; and how the run ended.
    skipped: list[SkippedProfile] = field(default_factory=list)
    status: str | None = None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)  # other problems of the run's files (a reader's)
    # The run's evidence problems (crdscale.rundir.evidence), stated among the notes in sentences.
    evidence: list[Problem] = field(default_factory=list)
    # Every analysis of the registry that applied to the run: name -> its tables (crdscale.analysis.registry);
    # one table by its name, whichever analysis made it: table(analysis.results, "per_object").
    results: dict[str, Result] = field(default_factory=dict)

    @property
    def phases(self) -> list[str]:
        return sorted(set(self.fits["phase"])) if len(self.fits) else []

    @property
    def few_increments(self) -> bool:
        """Fewer than 3 increments between the served profiles: the intervals of causes carried by a
        heap sample or two per step are unreliable (intervals.FEW_INCREMENTS; totals are not affected)."""
        if not len(self.points) or "served" not in set(self.points["phase"]):
            return False
        return phase_points(self.points, "served")["crds"].nunique() - 1 < FEW_INCREMENTS

    @property
    def warnings(self) -> list[str]:
        """Sentences a reader must see beside the numbers: a run that did not complete,
        each profile left out of the fits (empty when there is nothing to say)."""
        state = status_warning(self.status, self.reason)
        few = [FEW_INCREMENTS_WARNING] if self.few_increments else []
        return (
            ([state] if state else []) + [f"left out of the fits: {s}" for s in self.skipped] + list(self.notes) + few
        )


def analyze(
    points: pd.DataFrame,
    *,
    manifest: dict | None = None,
    series: pd.DataFrame | None = None,
    marks: pd.DataFrame | None = None,
    confidence: float = 0.95,
    run_dir: Path | None = None,
    profile_files: Sequence[str] = (),
    skipped: Sequence[SkippedProfile] = (),
    status: str | None = None,
    reason: str | None = None,
    notes: Sequence[str] = (),
    run: Run | None = None,
    profiles: HeapProfiles | None = None,
    evidence: Sequence[Problem] = (),
) -> RunAnalysis:
    """Fit per-CRD costs of one run: heap profiles by cause, and the memory series.

    ``points`` are the heap profiles by cause (:func:`profile_points`, which
    :meth:`crdscale.rundir.Run.heap_points` gives for a run); ``series`` is the tidy
    metrics table and ``marks`` (``timestamp, crds, phase``) says when each
    profile was taken, so the series can be read at the same moments.
    ``run_dir`` and ``profile_files`` only label the result; ``skipped`` are the
    profiles the caller set aside (see :func:`heap_profile_problem`), ``status`` and
    ``reason`` how the run ended (default: the manifest's), both stated in
    :attr:`RunAnalysis.warnings`, as are ``notes`` (the run's other problems; ``evidence``: its evidence
    problems, which the notes state). ``run`` and ``profiles`` (every usable heap profile of it,
    decoded) are for the registry's analyses that read more of a run (its object steps). Raises
    UsageError unless there are heap profiles at two or more CRD counts.
    """
    manifest = manifest or {}
    if points.empty or points["crds"].nunique() < 2:
        left_out = f" ({len(skipped)} left out: {skipped[0]})" if skipped else ""
        raise UsageError(f"{run_dir or 'run'}: needs heap profiles at two or more CRD counts{left_out}")
    served = served_chain_fits(points, confidence)  # once, for the per-CRD fits and the install/serve split
    fits, residuals = fit_per_crd(points, confidence, served=served)
    # RSS (and every process figure) from the most complete record the run holds: see analysis.process.
    marks = marks if marks is not None else pd.DataFrame(columns=["timestamp", "crds", "phase"])
    spoints = points_by_source(series, marks, SERIES_METRICS)
    sfits = (
        fit_series_per_crd(spoints, confidence)
        if len(spoints)
        else fit_series_per_crd(pd.DataFrame(columns=["crds", "phase", "metric", "value"]))
    )
    data = RunData(points, series, marks, Manifest.of(manifest), confidence, run, profiles)
    return RunAnalysis(
        run_dir,
        manifest,
        points,
        fits,
        residuals,
        spoints,
        sfits,
        list(profile_files),
        fit_install_serve(points, confidence, served=served),
        skipped=list(skipped),
        status=status if status is not None else manifest.get("status"),
        reason=reason if reason is not None else manifest.get("reason"),
        notes=list(notes),
        evidence=list(evidence),
        results=compute_all(data),
    )


# analyze_run's results, kept while the Run is: a notebook may ask often, and decoding takes seconds.
_ANALYSES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def analyze_run(run: Run, rules: Sequence | None = None, confidence: float = 0.95) -> RunAnalysis:
    """Per-CRD cost fits of a run directory and the registry's analyses (:class:`RunAnalysis`).

    Decodes every heap profile; the result for the default rules is kept while ``run`` is. Profiles
    the fits cannot use are listed, with why, in the result's ``skipped`` and ``warnings``. A run
    that grew objects is fitted per CRD up to its object steps. Raises UsageError unless there are
    heap profiles at two or more CRD counts.
    """
    key = (id(rules) if rules is not None else None, confidence)
    cache = _ANALYSES.setdefault(run, {})
    if key not in cache:
        every = heap_profile_set(run)
        found = crd_profiles(run, every)  # object steps add objects, not CRDs
        heap = found.rows
        if heap["crds"].nunique() < 2:
            left_out = f" ({len(found.skipped)} left out: {found.skipped[0]})" if found.skipped else ""
            raise UsageError(
                f"{run.path}: needs heap profiles at two or more CRD counts under {layout.PROFILES}/{left_out}"
            )
        cache[key] = analyze(
            heap_points(run, rules, found),
            manifest=run.manifest,
            series=run.series,
            marks=crd_step_marks(run, found),
            confidence=confidence,
            run_dir=run.path,
            profile_files=[str(run.path / f) for f in heap["file"]],
            skipped=found.skipped,
            status=run.status,
            reason=run.manifest.reason,
            notes=run.file_warnings,
            run=run,
            profiles=every,
            evidence=run.evidence.problems,
        )
    return cache[key]


def per_property_from_runs(
    analyses: Sequence[RunAnalysis], phase: str = "served", metric: str = "bytes", confidence: float = 0.95
) -> pd.DataFrame:
    """Bytes per schema property by cause across runs that differ in schema size
    (see :func:`crdscale.analysis.percrd.fit_per_property`); empty when fewer than two sizes were run."""
    rows = []
    for analysis in analyses:
        properties = properties_per_crd(analysis.manifest)
        if properties is None:
            continue
        fits = analysis.fits[(analysis.fits["phase"] == phase) & (analysis.fits["metric"] == metric)]
        for r in fits.itertuples(index=False):
            rows.append((r.cause, properties, r.per_crd))
    table = pd.DataFrame(rows, columns=["cause", "properties", "per_crd"])
    if table["properties"].nunique() < 2:
        return fit_per_property(table.iloc[0:0], confidence)
    return fit_per_property(table, confidence)
