"""One run's analysis: every fit ``crdscale analyze`` computes, put together.

:func:`analyze` orchestrates the primitives of :mod:`crdscale.analysis.percrd` (heap profiles and
memory series per CRD), :mod:`crdscale.analysis.process` (which record a process figure comes from)
and :mod:`crdscale.analysis.openapiv2` (the v2 spec's cost) into one :class:`RunAnalysis`; it lives
apart from them so that they never import it back. ``read_run(path).analysis()`` calls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from crdscale.analysis.intervals import FEW_INCREMENTS
from crdscale.analysis.openapiv2 import openapi_v2_per_crd
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
    status_warning,
)
from crdscale.analysis.process import PROCESS_METRICS, end_values, points_by_source
from crdscale.errors import UsageError


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
    # Process figures over the run (``metric, first, last, peak, samples, source``: see analysis.process).
    process: pd.DataFrame = field(default_factory=pd.DataFrame)
    # A run that grew objects: bytes per object by cause and kind, and the amplification ratio
    # (crdscale.analysis.perobject); empty otherwise.
    per_object: pd.DataFrame = field(default_factory=pd.DataFrame)
    amplification: pd.DataFrame = field(default_factory=pd.DataFrame)
    # What a LIST of each kind's objects cost once all were in (objects.list_repeats; perobject.list_costs).
    object_lists: pd.DataFrame = field(default_factory=pd.DataFrame)
    # A run that fetched /openapi/v2 after its profiles (profiles.openapi_v2): the v2 spec's cost per CRD
    # by cause (crdscale.analysis.openapiv2); empty otherwise.
    openapi_v2: pd.DataFrame = field(default_factory=pd.DataFrame)

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
) -> RunAnalysis:
    """Fit per-CRD costs of one run: heap profiles by cause, and the memory series.

    ``points`` are the heap profiles by cause (:func:`profile_points`, which
    :meth:`crdscale.rundir.Run.heap_points` gives for a run); ``series`` is the tidy
    metrics table and ``marks`` (``timestamp, crds, phase``) says when each
    profile was taken, so the series can be read at the same moments.
    ``run_dir`` and ``profile_files`` only label the result; ``skipped`` are the
    profiles the caller set aside (see :func:`heap_profile_problem`), ``status`` and
    ``reason`` how the run ended (default: the manifest's), both stated in
    :attr:`RunAnalysis.warnings`. Raises UsageError unless there are heap profiles
    at two or more CRD counts.
    """
    manifest = manifest or {}
    if points.empty or points["crds"].nunique() < 2:
        left_out = f" ({len(skipped)} left out: {skipped[0]})" if skipped else ""
        raise UsageError(f"{run_dir or 'run'}: needs heap profiles at two or more CRD counts{left_out}")
    fits, residuals = fit_per_crd(points, confidence)
    # RSS (and every process figure) from the most complete record the run holds: see analysis.process.
    marks = marks if marks is not None else pd.DataFrame(columns=["timestamp", "crds", "phase"])
    spoints = points_by_source(series, marks, SERIES_METRICS)
    sfits = (
        fit_series_per_crd(spoints, confidence)
        if len(spoints)
        else fit_series_per_crd(pd.DataFrame(columns=["crds", "phase", "metric", "value"]))
    )
    return RunAnalysis(
        run_dir,
        manifest,
        points,
        fits,
        residuals,
        spoints,
        sfits,
        list(profile_files),
        fit_install_serve(points, confidence),
        skipped=list(skipped),
        status=status if status is not None else manifest.get("status"),
        reason=reason if reason is not None else manifest.get("reason"),
        notes=list(notes),
        process=end_values(series, {m: m for m in PROCESS_METRICS}),
        openapi_v2=openapi_v2_per_crd(points, confidence),
    )


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
