"""The registry of named analyses: what ``analyze``, ``compare`` and ``report`` compute beyond the per-CRD fits.

The per-CRD fits (:mod:`crdscale.analysis.percrd`) are every run's core. Every other analysis (the
per-object view, the v2 spec's cost, the process figures, ...) is one :class:`NamedAnalysis` in
:data:`ANALYSES`: whether it applies to a run, how to compute it, and what it adds to each output.
``crdscale analyze`` (text, ``-o json``, the CSVs it writes), ``crdscale compare`` and a report's
``findings.md`` go through :data:`ANALYSES` in order, so adding an analysis is one module (its
functions) and one entry here; nothing else is edited. ``docs/contributing.md`` ("Adding an
analysis") walks through it.

A result is plain data: a mapping of table name -> DataFrame (``{"openapi_v2": table}``), computed
once from the run's inputs (:class:`RunData`) and rendered by the entry's section functions, so a
notebook gets the tables without the text (``analyze_run(run).results["openapi_v2"]``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from crdscale.rundir.manifest import Manifest

if TYPE_CHECKING:
    from crdscale.rundir import Run
    from crdscale.rundir.reader import HeapProfiles

# A result: table name -> DataFrame. Tables a run does not have are empty frames (or left out).
Result = Mapping[str, pd.DataFrame]


@dataclass(frozen=True)
class RunData:
    """What an analysis computes from: one run's inputs, read and decoded once.

    Attributes:
        points: heap in use by cause at each heap profile the per-CRD fits take (``crds, phase,
            cause, metric, value, sampling_var``: :meth:`crdscale.rundir.Run.heap_points`).
        series: the tidy metrics series (``timestamp, job, metric, labels, value``), or None.
        marks: when each of those profiles was taken (``timestamp, crds, phase``).
        manifest: the run's manifest (empty for profiles with no run behind them).
        confidence: the level of every interval (0.95).
        run: the run directory read (None for a library caller's points); an analysis that needs
            more of the run than the above (its object steps, a probe table) reads it here.
        profiles: every usable heap profile of the run decoded
            (:meth:`crdscale.rundir.Run.heap_profile_set`; object steps included), or None.
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
    configuration; empty without repeats) and the ``confidence``."""

    labels: Sequence[str]
    reference: str
    replicates: Mapping[str, str]
    confidence: float = 0.95


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
        compare: ``compare(results, context) -> Result``: the comparison's tables from each run's
            result (label -> Result, runs it did not apply to left out) and :class:`CompareContext`;
            None when the analysis is not compared.
    """

    name: str
    applies: Callable[[RunData], bool]
    compute: Callable[[RunData], Result]
    tables: tuple[Table, ...] = ()
    text: Callable[[Result, str, float], list[str]] = _no_lines
    findings: Callable[[Result, int], list[tuple]] = _no_rows
    report: Callable[[Result], list[Section]] = _no_sections
    compare: Callable[[Mapping[str, Result], CompareContext], Result] | None = None


# The registry, in the order of every output (analyze's text and JSON, the key numbers, findings.md).
ANALYSES: tuple[NamedAnalysis, ...] = ()


def registered(analyses: Sequence[NamedAnalysis] | None = None) -> tuple[NamedAnalysis, ...]:
    """``analyses``, or :data:`ANALYSES` as it is now (read at call time, so a test may add one)."""
    return tuple(analyses) if analyses is not None else ANALYSES


def named(name: str, analyses: Sequence[NamedAnalysis] | None = None) -> NamedAnalysis:
    """The registered analysis called ``name``; KeyError names the known ones."""
    for analysis in registered(analyses):
        if analysis.name == name:
            return analysis
    raise KeyError(f"no analysis {name!r}; registered: {', '.join(a.name for a in registered(analyses))}")


def compute_all(data: RunData, analyses: Sequence[NamedAnalysis] | None = None) -> dict[str, Result]:
    """Every registered analysis that applies to ``data``: name -> its result, in registry order."""
    return {a.name: dict(a.compute(data)) for a in registered(analyses) if a.applies(data)}


def compare_all(
    per_run: Mapping[str, Mapping[str, Result]],
    context: CompareContext,
    analyses: Sequence[NamedAnalysis] | None = None,
) -> dict[str, Result]:
    """The comparison of every analysis that has a ``compare`` and applied to a run at least:
    name -> its tables. ``per_run`` is label -> that run's results (``RunAnalysis.results``)."""
    out = {}
    for a in registered(analyses):
        results = {label: r[a.name] for label, r in per_run.items() if a.name in r}
        if a.compare is not None and results:
            out[a.name] = dict(a.compare(results, context))
    return out


def table(results: Mapping[str, Result], name: str) -> pd.DataFrame:
    """The table called ``name`` in any result of ``results`` (an empty frame when none has it)."""
    for result in results.values():
        if name in result and result[name] is not None:
            return result[name]
    return pd.DataFrame()


def json_tables(results: Mapping[str, Result], analyses: Sequence[NamedAnalysis] | None = None) -> dict[str, Any]:
    """The tables ``analyze -o json`` holds for one run: every registered table marked ``json``,
    in registry order, None when the run has no rows of it."""
    out: dict[str, Any] = {}
    for a in registered(analyses):
        result = results.get(a.name, {})
        for t in a.tables:
            if t.json:
                frame = result.get(t.name)
                out[t.name] = frame if frame is not None and len(frame) else None
    return out


def csv_files(
    results: Mapping[str, Result], analyses: Sequence[NamedAnalysis] | None = None
) -> list[tuple[str, pd.DataFrame]]:
    """``(file name, table)`` of every registered table with a ``file`` that has rows, in registry order."""
    out = []
    for a in registered(analyses):
        result = results.get(a.name, {})
        for t in a.tables:
            frame = result.get(t.name)
            if t.file and frame is not None and len(frame):
                out.append((t.file, frame))
    return out


def text_lines(
    results: Mapping[str, Result],
    metric: str = "bytes",
    confidence: float = 0.95,
    analyses: Sequence[NamedAnalysis] | None = None,
) -> list[str]:
    """What ``crdscale analyze`` prints of the registered analyses that have a result, in registry order."""
    return [
        line for a in registered(analyses) if a.name in results for line in a.text(results[a.name], metric, confidence)
    ]


def findings_rows(
    results: Mapping[str, Result], top_causes: int = 5, analyses: Sequence[NamedAnalysis] | None = None
) -> list[tuple]:
    """The key-numbers rows of the registered analyses that have a result, in registry order."""
    return [row for a in registered(analyses) if a.name in results for row in a.findings(results[a.name], top_causes)]


def report_sections(results: Mapping[str, Result], analyses: Sequence[NamedAnalysis] | None = None) -> list[Section]:
    """The ``findings.md`` sections of the registered analyses that have a result, in registry order."""
    return [s for a in registered(analyses) if a.name in results for s in a.report(results[a.name])]
