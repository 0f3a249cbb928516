"""A run directory's data as the analyses take it: heap profiles decoded and attributed by cause.

:class:`crdscale.rundir.Run` reads a run's files (events, series, profiles by step, CRD count and
phase); this module turns them into what the fits compute from, above it: every heap profile
decoded with those the fits cannot use set aside (:func:`heap_profile_set`), and the points by
cause of the per-CRD fits (:func:`heap_points`) and of the per-object view (:func:`object_points`).
Every fit of a run (``analyze``, ``compare``, the footprint's calibration) takes its points from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from crdscale.analysis.attribution import OBJECT_RULES, RULES
from crdscale.analysis.percrd import SkippedProfile, heap_profile_problem, profile_points
from crdscale.rundir import Run, layout
from crdscale.rundir.evidence import HEAP


@dataclass
class HeapProfiles:
    """A run's heap profiles the fits can use (``rows``: :attr:`crdscale.rundir.Run.profiles` rows;
    ``decoded``: file -> :class:`crdscale.analysis.pprof.Profile`) and those set aside (``skipped``)."""

    rows: pd.DataFrame
    decoded: dict
    skipped: list


def heap_profile_set(run: Run) -> HeapProfiles:
    """Every heap profile of ``run`` decoded, those the fits cannot use set aside with why (not
    a heap profile inside, no event recording it). Decodes each time: nothing is kept. Refuses
    (EvidenceError) a run whose profiles contradict its other files (crdscale.rundir.evidence)."""
    run.evidence.require(HEAP, run.path)  # a foreign, swapped or copied profile: no fit
    heap = run.heap_profiles()
    skipped = [
        SkippedProfile(f, why)
        for f, why in run.unrecorded_profiles
        if (p := layout.parse_profile_filename(Path(f).name)) and p.kind == "heap"
    ]
    decoded, usable = {}, []
    for r in heap.itertuples(index=False):
        profile = run.read_profile(r.file)
        problem = heap_profile_problem(profile)
        if problem:
            skipped.append(SkippedProfile(r.file, problem))
            continue
        decoded[r.file] = profile
        usable.append(r.file)
    return HeapProfiles(heap[heap["file"].isin(usable)].reset_index(drop=True), decoded, skipped)


def heap_points(run: Run, rules: Sequence | None = None, profiles: HeapProfiles | None = None) -> pd.DataFrame:
    """Heap in use by cause at each usable heap profile of ``run``: the points every fit of it takes
    (:func:`crdscale.analysis.percrd.profile_points`: ``crds, phase, cause, metric, value,
    sampling_var``; ``phase`` is ``served`` for the end of a step, ``installed`` otherwise).

    ``profiles`` is :func:`heap_profile_set` when the caller has decoded them already; the
    profiles it set aside (with why) are not points. ``rules`` default to
    :data:`crdscale.analysis.attribution.RULES`.
    """
    found = profiles if profiles is not None else heap_profile_set(run)
    return profile_points(
        # The one place a profile row's phase becomes a point's: no phase (None, NaN, "") is the end of a step.
        (
            (int(r.crds), r.phase if isinstance(r.phase, str) and r.phase else None, found.decoded[r.file])
            for r in found.rows.itertuples(index=False)
        ),
        rules if rules is not None else RULES,
    )


def object_points(run: Run, rules: Sequence | None = None, profiles: HeapProfiles | None = None) -> pd.DataFrame:
    """Heap in use by cause at each end-of-step heap profile of ``run``, keyed by ``step`` (the
    per-object view's points: ``step, phase, cause, metric, value, sampling_var``), attributed with
    :data:`crdscale.analysis.attribution.OBJECT_RULES` unless ``rules`` are given."""
    found = profiles if profiles is not None else heap_profile_set(run)
    rows = found.rows[found.rows["phase"].isna() | (found.rows["phase"] == "")]
    points = profile_points(
        ((int(r.step), None, found.decoded[r.file]) for r in rows.itertuples(index=False)),
        rules if rules is not None else OBJECT_RULES,
    )
    return points.rename(columns={"crds": "step"})


def crd_profiles(run: Run, profiles: HeapProfiles) -> HeapProfiles:
    """``profiles`` without the steps that added objects: object steps add objects, not CRDs, so the
    per-CRD fits end where the CRDs were installed (``profiles`` itself for a run that grew CRDs)."""
    if not len(run.object_steps):
        return profiles
    return HeapProfiles(_crd_step_rows(run, profiles.rows), profiles.decoded, profiles.skipped)


def _crd_step_rows(run: Run, rows: pd.DataFrame) -> pd.DataFrame:
    """The profile rows of the steps that added CRDs (every row of a run that grew CRDs)."""
    steps = run.object_steps
    return rows[~rows["step"].isin(steps["step"])].reset_index(drop=True) if len(steps) else rows


def crd_step_marks(run: Run, profiles: HeapProfiles | None = None) -> pd.DataFrame:
    """When each heap profile of a step that added CRDs was taken (``timestamp, crds, phase``): the marks
    every per-CRD fit of a series (RSS, CPU, heap in use) reads the series at, in ``analyze``, ``compare``,
    ``ab``, a history and the components' fits alike. Object steps stay at the last CRD count, and what
    they add is the objects' memory, not the CRDs': with their marks a series' slope per CRD would take
    the objects' growth for the CRDs'. ``profiles`` (:func:`heap_profile_set`, or :func:`crd_profiles`
    of it) keeps the usable profiles' marks only; without it, every heap profile's (nothing decoded)."""
    rows = profiles.rows if profiles is not None else run.heap_profiles()
    return run.profile_marks(_crd_step_rows(run, rows))


def profile_marks(heap: pd.DataFrame) -> pd.DataFrame:
    """When each heap profile of ``heap`` (:attr:`crdscale.rundir.Run.profiles` rows) was taken:
    ``timestamp, crds, phase`` (``served`` for the end of a step); :meth:`crdscale.rundir.Run.profile_marks`
    of a subset of the run's profiles."""
    heap = heap.dropna(subset=["timestamp"])
    return pd.DataFrame(
        {"timestamp": heap["timestamp"], "crds": heap["crds"].astype(int), "phase": heap["phase"].fillna("served")}
    ).reset_index(drop=True)
