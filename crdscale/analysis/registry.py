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

The types (:class:`NamedAnalysis`, :class:`RunData`, :class:`Table`, :class:`Section`,
:class:`CompareContext`) are :mod:`crdscale.analysis.named`'s, re-exported here: an entry's module
imports them from there, since this module imports it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from crdscale.analysis import components, openapiv2, perobject, process
from crdscale.analysis.named import CompareContext, NamedAnalysis, Result, RunData, Section, Table

__all__ = [
    "ANALYSES",
    "CompareContext",
    "NamedAnalysis",
    "Result",
    "RunData",
    "Section",
    "Table",
    "compare_all",
    "compute_all",
    "csv_files",
    "findings_rows",
    "json_tables",
    "named",
    "registered",
    "report_sections",
    "stack_runs",
    "table",
    "text_lines",
]

# The registry, in the order of every output (analyze's text and JSON, the key numbers, findings.md).
# Adding an analysis: its module defines ``ANALYSIS = NamedAnalysis(...)``; add it here.
ANALYSES: tuple[NamedAnalysis, ...] = (process.ANALYSIS, perobject.ANALYSIS, openapiv2.ANALYSIS, components.ANALYSIS)


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


def stack_runs(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One table from one per run, with a ``run`` column holding the label (dict order kept)."""
    frames = [t.assign(run=label) for label, t in tables.items() if t is not None and len(t)]
    if not frames:
        return pd.DataFrame(columns=["run"])
    return pd.concat(frames, ignore_index=True)


def compare_all(
    per_run: Mapping[str, Mapping[str, Result]],
    context: CompareContext,
    analyses: Sequence[NamedAnalysis] | None = None,
) -> dict[str, Result]:
    """The comparison of every analysis that has a ``compare`` and applied to one run at least:
    name -> its tables. ``per_run`` is label -> that run's results (``RunAnalysis.results``); each
    ``compare`` gets the runs' tables stacked (:func:`stack_runs`)."""
    out = {}
    for a in registered(analyses):
        results = {label: r[a.name] for label, r in per_run.items() if a.name in r}
        if a.compare is None or not results:
            continue
        names = list(dict.fromkeys(name for result in results.values() for name in result))
        stacked = {name: stack_runs({label: r.get(name) for label, r in results.items()}) for name in names}
        out[a.name] = dict(a.compare(stacked, context))
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
