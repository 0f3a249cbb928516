"""Which recorded series a process figure (RSS, CPU, fds, threads) comes from.

A local run records kube-apiserver's process figures twice: in its ``/metrics``
(job ``kube-apiserver``), scraped as often as the server can afford — at
thousands of CRDs a scrape takes tens of seconds and the job is sparse — and
read from ``/proc`` every second by crdscale itself (job
:data:`crdscale.rundir.layout.PROC_JOB`), which costs the server nothing. Both
read the same kernel counters, so the one with more samples is the better
record of the same quantity: a peak between two sparse scrapes is simply
missing from the other (9.2 GiB "peak" from 11 ``/metrics`` samples where
``/proc`` saw 10.67 GiB). A remote target has only ``/metrics``.

:func:`process_source` picks that job per metric; :func:`source_label` says it
in words; :func:`points_by_source` reads series at profile marks, process
figures from their source and everything else from ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from crdscale.analysis.named import NamedAnalysis, RunData, Table
from crdscale.analysis.percrd import series_points
from crdscale.rundir.layout import APISERVER_JOB, PROC_JOB

METRICS_JOB = APISERVER_JOB
# The figures client_golang's process collector and crdscale's /proc sampler both record.
PROCESS_METRICS = (
    "process_resident_memory_bytes",
    "process_cpu_seconds_total",
    "process_open_fds",
    "process_threads",
)
# Most complete first on a tie: /proc is read every second whatever the server's load.
PROCESS_JOBS = (PROC_JOB, METRICS_JOB)


def largest_gaps(series: pd.DataFrame | None, metric: str, jobs: Sequence[str] = PROCESS_JOBS) -> dict[str, float]:
    """Per job of ``jobs`` that recorded ``metric``: the longest time (seconds) with no sample of it,
    over the window all those jobs span together (so a record that stops early, or starts late,
    shows the gap it leaves at the end)."""
    if series is None or not len(series) or "job" not in series.columns:
        return {}
    sel = series[(series["metric"] == metric) & series["job"].isin(list(jobs))]
    if not len(sel):
        return {}
    times = pd.to_datetime(sel["timestamp"], utc=True)
    start, end = times.min(), times.max()
    gaps = {}
    for job in jobs:
        ts = times[sel["job"] == job].drop_duplicates().sort_values()
        if len(ts):
            edges = pd.concat([pd.Series([start]), ts, pd.Series([end])], ignore_index=True)
            gaps[job] = float(edges.diff().dropna().dt.total_seconds().max())
    return gaps


def process_source(
    series: pd.DataFrame | None, metric: str = "process_resident_memory_bytes", jobs: Sequence[str] = PROCESS_JOBS
) -> str:
    """The job whose samples of ``metric`` are the most complete record: the shortest longest gap
    (to the second: both nominally sample every second, and a second's jitter is no difference;
    on a tie, the first of ``jobs``). ``METRICS_JOB`` when none recorded it, or when ``metric``
    is not a process figure (only ``/metrics`` has the Go runtime's)."""
    if metric not in PROCESS_METRICS:
        return METRICS_JOB
    gaps = largest_gaps(series, metric, jobs)
    if not gaps:
        return METRICS_JOB
    return min(gaps, key=lambda job: (round(gaps[job]), list(jobs).index(job)))


def source_label(job: str) -> str:
    """``/proc every 1 s (job kube-apiserver-proc)`` or ``/metrics (job kube-apiserver)``."""
    return f"/proc (job {job})" if job == PROC_JOB else f"/metrics (job {job})"


def points_by_source(series: pd.DataFrame | None, marks: pd.DataFrame, metrics: Mapping[str, str]) -> pd.DataFrame:
    """:func:`crdscale.analysis.percrd.series_points` with each process figure read from its
    :func:`process_source` and every other metric from ``/metrics``; adds a ``source`` column (the job)."""
    by_job: dict[str, dict[str, str]] = {}
    for name, column in metrics.items():
        by_job.setdefault(process_source(series, name), {})[name] = column
    frames = [series_points(series, marks, job=job, metrics=names).assign(source=job) for job, names in by_job.items()]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=["crds", "phase", "metric", "value", "source"])
    order = {column: i for i, column in enumerate(metrics.values())}
    out = pd.concat(frames, ignore_index=True)
    return out.sort_values("metric", key=lambda m: m.map(order), kind="stable").reset_index(drop=True)


def end_values(series: pd.DataFrame | None, metrics: Mapping[str, str]) -> pd.DataFrame:
    """Each series of ``metrics`` (name -> column) at the start, at the end and at its peak:
    ``metric, first, last, peak, samples, source``; process figures from their
    :func:`process_source`, the rest from ``/metrics``; values summed over labels, in the
    series' own units; ``samples`` is how many sample times the source holds."""
    columns = ["metric", "first", "last", "peak", "samples", "source"]
    if series is None or not len(series):
        return pd.DataFrame(columns=columns)
    rows = []
    for name, metric in metrics.items():
        job = process_source(series, name)
        sel = series[series["metric"] == name]
        if "job" in sel.columns:
            sel = sel[sel["job"] == job]
        if not len(sel):
            continue
        one = sel.groupby(pd.to_datetime(sel["timestamp"], utc=True))["value"].sum().sort_index()
        rows.append((metric, float(one.iloc[0]), float(one.iloc[-1]), float(one.max()), len(one), job))
    return pd.DataFrame(rows, columns=columns)


# --------------------------------------------------------------------------
# The registry's entry
# --------------------------------------------------------------------------


def applies(data: RunData) -> bool:
    """Every run: a run without a series has an empty table (the key numbers then fall back on the
    memory frame for the peak RSS)."""
    return True


def compute(data: RunData) -> dict[str, pd.DataFrame]:
    """``process``: RSS, CPU seconds, open fds and threads over the run (:func:`end_values`:
    ``metric, first, last, peak, samples, source``), each from its most complete record."""
    return {"process": end_values(data.series, {m: m for m in PROCESS_METRICS})}


# Its numbers are read by the key numbers' memory rows (the peak RSS, beside RSS at the marks) and the
# provenance (which record the process figures came from): not a section of its own, nor in -o json.
ANALYSIS = NamedAnalysis(name="process", applies=applies, compute=compute, tables=(Table("process", json=False),))
