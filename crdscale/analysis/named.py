"""What a named analysis is: :class:`NamedAnalysis`, the inputs it computes from and what it gives.

The entries of :data:`crdscale.analysis.registry.ANALYSES` are built from these types, each in its
own module (:mod:`crdscale.analysis.perobject`'s ``ANALYSIS``); the registry imports those modules,
so the types live here, below both (an entry importing the registry would be an import cycle).
:mod:`crdscale.analysis.registry` says how the registry is used and re-exports these names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from crdscale.rundir.manifest import Manifest

if TYPE_CHECKING:
    from crdscale.analysis.rundata import HeapProfiles
    from crdscale.rundir import Run

# A result: table name -> DataFrame. Tables a run does not have are empty frames (or left out).
Result = Mapping[str, pd.DataFrame]


@dataclass(frozen=True)
class RunData:
    """What an analysis computes from: one run's inputs, read and decoded once.

    Attributes:
        points: heap in use by cause at each heap profile the per-CRD fits take (``crds, phase,
            cause, metric, value, sampling_var``: :func:`crdscale.analysis.rundata.heap_points`).
        series: the tidy metrics series (``timestamp, job, metric, labels, value``), or None.
        marks: when each of those profiles was taken (``timestamp, crds, phase``).
        manifest: the run's manifest (empty for profiles with no run behind them).
        confidence: the level of every interval (0.95).
        run: the run directory read (None for a library caller's points); an analysis that needs
            more of the run than the above (its object steps, a probe table) reads it here.
        profiles: every usable heap profile of the run decoded
            (:func:`crdscale.analysis.rundata.heap_profile_set`; object steps included), or None.
    """

    points: pd.DataFrame
    series: pd.DataFrame | None = None
    marks: pd.DataFrame | None = None
    manifest: Manifest = field(default_factory=lambda: Manifest.of({}))
    confidence: float = 0.95
    run: Run | None = None
    profiles: HeapProfiles | None = None


@dataclass(frozen=True)
class Table:
    """One table of an analysis' result and where it goes.

    ``file``: the CSV ``crdscale analyze`` writes under ``RUN_DIR/analysis/`` when the table has rows
    (None: not written). ``json``: a key of ``analyze -o json``'s run (null when empty or not computed).
    """

    name: str
    file: str | None = None
    json: bool = True


@dataclass(frozen=True)
class Section:
    """A section of ``findings.md`` after the key numbers: a title, a note and a table of strings."""

    title: str
    note: str
    table: pd.DataFrame


@dataclass(frozen=True)
class CompareContext:
    """What a comparison hook needs besides the runs' results: ``labels`` (one per run, in order),
    the ``reference`` (a label, or a configuration when runs repeat one), ``replicates`` (label ->
    configuration; empty without repeats), the ``confidence`` and the ``spread`` differences take their
    intervals from (``own``, or ``pooled`` over every configuration: :mod:`crdscale.analysis.pooled`)."""

    labels: Sequence[str]
    reference: str
    replicates: Mapping[str, str]
    confidence: float = 0.95
    spread: str = "own"


def _no_lines(_result: Result, _metric: str, _confidence: float) -> list[str]:
    return []


def _no_rows(_result: Result, _top_causes: int) -> list[tuple]:
    return []


def _no_sections(_result: Result) -> list[Section]:
    return []


@dataclass(frozen=True)
class NamedAnalysis:
    """One analysis beside the per-CRD fits, and its sections in every output.

    Attributes:
        name: its key in ``RunAnalysis.results`` and ``Comparison.results`` (snake_case).
        applies: ``applies(data) -> bool``: whether the run has what it needs (an objects run, a
            phase, a series). When False nothing else is called and the run has no result.
        compute: ``compute(data) -> Result``: its tables (name -> DataFrame), from :class:`RunData`.
        tables: the result's tables, in order: what ``analyze -o json`` holds and which CSVs it writes.
        text: ``text(result, metric, confidence) -> lines``: what ``crdscale analyze`` prints (after
            the per-CRD fits and the install/serve split, before the series), each block opened by
            an empty line; ``metric`` is ``bytes`` or ``objects``.
        findings: ``findings(result, top_causes) -> rows`` of the key numbers
            (:data:`crdscale.report.findings.NUMBER_COLUMNS`: ``key, finding, value, low, high,
            unit, source``); the registry's rows open the key numbers, in registry order.
        report: ``report(result) -> [Section]``: sections of ``findings.md`` after the key numbers.
        compare: ``compare(stacked, context) -> Result``: the comparison's tables. ``stacked`` is
            each table of the runs' results one under the other with a ``run`` column (the run's
            label), from the runs it applied to; :class:`CompareContext` says the labels, the
            reference and the repeats. None when the analysis is not compared.
    """

    name: str
    applies: Callable[[RunData], bool]
    compute: Callable[[RunData], Result]
    tables: tuple[Table, ...] = ()
    text: Callable[[Result, str, float], list[str]] = _no_lines
    findings: Callable[[Result, int], list[tuple]] = _no_rows
    report: Callable[[Result], list[Section]] = _no_sections
    compare: Callable[[Result, CompareContext], Result] | None = None
