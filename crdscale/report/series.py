"""What the notebooks plot, derived from a run directory's series and events.

Compute, then render: every function here returns plain DataFrames (no
plotting); :mod:`crdscale.report.plots` draws them. Everything here is pure
and takes a run's tidy metrics table (``timestamp, job, metric, labels,
value``) or its events frame, both read by :func:`crdscale.rundir.read_run`.

Units: bytes stay bytes (plots convert to MiB), time is UTC timestamps plus
``elapsed_s`` (seconds since the run's first event), rates are per second.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from crdscale.rundir import layout
from crdscale.rundir.reader import run_start

MIB = 2**20

# Short column names for the unlabelled kube-apiserver gauges/counters the notebooks use.
MEMORY_COLUMNS: dict[str, str] = {
    "process_resident_memory_bytes": "rss",
    "go_memstats_heap_inuse_bytes": "heap_inuse",
    "go_memstats_heap_alloc_bytes": "heap_alloc",
    "go_memstats_heap_idle_bytes": "heap_idle",
    "go_memstats_heap_released_bytes": "heap_released",
    "go_memstats_stack_inuse_bytes": "stack_inuse",
    "go_memstats_sys_bytes": "go_sys",
    "go_memstats_next_gc_bytes": "gc_goal",
}
GAUGE_COLUMNS: dict[str, str] = {
    "go_goroutines": "goroutines",
    "process_open_fds": "open_fds",
}
COUNTER_COLUMNS: dict[str, str] = {
    "process_cpu_seconds_total": "cpu_seconds",
    "go_gc_duration_seconds_count": "gc_cycles",
    "go_gc_duration_seconds_sum": "gc_pause_seconds",
}

# What each memory column means, for legends and the notebooks' Markdown.
MEMORY_LABELS: dict[str, str] = {
    "rss": "RSS (process_resident_memory_bytes)",
    "heap_inuse": "heap in use (spans holding objects)",
    "heap_alloc": "heap alloc (live + uncollected objects)",
    "stack_inuse": "goroutine stacks",
    "gc_goal": "GC goal (next_gc)",
    "idle_retained": "heap idle - released (held by the Go runtime)",
    "heap_plus_stack": "heap in use + stacks",
    "rss_minus_heap_stack": "RSS - (heap in use + stacks)",
}

# Phases of a step shaded behind the time series: event that opens -> event that closes.
PHASE_EVENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "install": ("install.start", ("established", "install.end")),
    "serve": ("serve.start", ("serve.end",)),
    "settle": ("settle.start", ()),  # closed after its ``seconds`` field, or at its settle.drained
    "hold": ("hold.start", ("hold.end",)),  # after the last step: where memory settles
}


def elapsed(ts: pd.Series | pd.DatetimeIndex, start: pd.Timestamp) -> np.ndarray:
    """Seconds since ``start``."""
    return (
        (pd.to_datetime(ts, utc=True) - start).total_seconds().to_numpy()
        if isinstance(ts, pd.DatetimeIndex)
        else (pd.to_datetime(ts, utc=True) - start).dt.total_seconds().to_numpy()
    )


# --------------------------------------------------------------------------
# Events: phases and the CRD count
# --------------------------------------------------------------------------


def phase_intervals(events: pd.DataFrame, start: pd.Timestamp | None = None) -> pd.DataFrame:
    """When each step installed, served and settled.

    Returns ``phase, step, start, end, start_s, end_s`` (``*_s``: seconds since
    ``start``, default :func:`run_start`). ``install`` runs from
    ``install.start`` until the step's CRDs are Established (``established``,
    else ``install.end``); ``serve`` from ``serve.start`` to ``serve.end``;
    ``settle`` for the ``seconds`` its ``settle.start`` announced, or until its
    ``settle.drained`` (the wait for kube-apiserver's work queues; a run recorded
    before ``settle.start`` was written with 0 seconds has only that wait). A phase a
    crash left open ends at the last event.
    """
    columns = ["phase", "step", "start", "end", "start_s", "end_s"]
    if events.empty:
        return pd.DataFrame(columns=columns)
    start = start if start is not None else run_start(events)
    last = events["ts"].max()
    step_of = _current_step(events)
    rows = []
    for phase, (opener, closers) in PHASE_EVENTS.items():
        for i in np.flatnonzero((events["kind"] == opener).to_numpy()):
            event = events.iloc[i]
            step = step_of[i]
            if phase == "settle":
                seconds = float(event.get("seconds", 0) or 0)
                end = event["ts"] + pd.Timedelta(seconds=seconds)
                # The wait for the CRD work queues that follows (settle.drained, same label) is settling too.
                if "label" in events:
                    later = events.iloc[i + 1 :]
                    drained = later[(later["kind"] == "settle.drained") & (later["label"] == event.get("label"))]
                    if len(drained):
                        end = max(end, drained["ts"].iloc[0])
            else:
                later = events.iloc[i + 1 :]
                close = later[later["kind"].isin(closers) & (step_of[i + 1 :] == step)]
                # "established" comes after "install.end"; prefer it when recorded.
                if phase == "install" and (close["kind"] == "established").any():
                    close = close[close["kind"] == "established"]
                end = close["ts"].iloc[0] if len(close) else last
            rows.append((phase, int(step), event["ts"], end))
    rows += _unopened_settles(events, step_of)
    frame = pd.DataFrame(rows, columns=columns[:4]).sort_values("start", kind="stable").reset_index(drop=True)
    frame["start_s"] = elapsed(frame["start"], start) if len(frame) else []
    frame["end_s"] = elapsed(frame["end"], start) if len(frame) else []
    return frame


def _unopened_settles(events: pd.DataFrame, step_of: np.ndarray) -> list[tuple]:
    """Settle phases of runs recorded before settle.start was written with 0 seconds: a
    settle.drained with no settle.start of its label before it began its ``seconds`` earlier."""
    if "label" not in events:
        return []
    rows, opened = [], set()
    for i, (kind, label) in enumerate(zip(events["kind"], events["label"])):
        if kind == "settle.start":
            opened.add(label)
        elif kind == "settle.drained" and label not in opened:
            end = events["ts"].iloc[i]
            waited = events["seconds"].iloc[i] if "seconds" in events else 0.0
            waited = float(waited) if pd.notna(waited) else 0.0
            rows.append(("settle", int(step_of[i]), end - pd.Timedelta(seconds=waited), end))
    return rows


def _current_step(events: pd.DataFrame) -> np.ndarray:
    """The scenario step each event belongs to (its ``step`` field, else the last ``step.start``'s)."""
    steps = np.zeros(len(events), dtype=int)
    current = 0
    own = events["step"] if "step" in events else pd.Series([np.nan] * len(events))
    for i, (kind, step) in enumerate(zip(events["kind"], own)):
        if kind == "step.start" and step == step:
            current = int(step)
        steps[i] = int(step) if step == step and step is not None else current
    return steps


def crd_count_steps(events: pd.DataFrame, start: pd.Timestamp | None = None) -> pd.DataFrame:
    """The number of CRDs installed over time, as a step line: ``ts, elapsed_s, crds``.

    Starts at 0 at ``start`` (default :func:`run_start`); each step's count takes effect when its
    CRDs were all created (``install.end``; ``step.end`` when no install
    event was logged). The last row repeats the final count at the last event
    so the line reaches the end of the run.
    """
    columns = ["ts", "elapsed_s", "crds"]
    if events.empty:
        return pd.DataFrame(columns=columns)
    start = start if start is not None else run_start(events)
    step_of = _current_step(events)
    sizes: dict[int, tuple[int, int]] = {}
    for i in np.flatnonzero((events["kind"] == "step.start").to_numpy()):
        e = events.iloc[i]
        sizes[int(step_of[i])] = (int(e.get("crds_before", 0) or 0), int(e.get("crds_in_step", 0) or 0))
    rows = [(start, 0)]
    done: set[int] = set()
    for kinds in (("install.end",), ("step.end",)):
        for i in np.flatnonzero(events["kind"].isin(kinds).to_numpy()):
            step = int(step_of[i])
            if step in done or step not in sizes or step == 0:
                continue
            done.add(step)
            before, size = sizes[step]
            rows.append((events["ts"].iloc[i], before + size))
    rows.append((events["ts"].max(), None))
    frame = pd.DataFrame(rows, columns=["ts", "crds"]).sort_values("ts", kind="stable")
    frame["crds"] = frame["crds"].ffill().fillna(0).astype(int)
    frame.insert(1, "elapsed_s", elapsed(frame["ts"], start))
    return frame.reset_index(drop=True)


def crds_at(times: pd.Series, steps: pd.DataFrame) -> np.ndarray:
    """The CRD count in force at each of ``times`` (from :func:`crd_count_steps`)."""
    if steps.empty:
        return np.zeros(len(times), dtype=int)
    idx = np.searchsorted(steps["ts"].to_numpy(), pd.to_datetime(times, utc=True).to_numpy(), side="right") - 1
    return np.where(idx >= 0, steps["crds"].to_numpy()[np.clip(idx, 0, None)], 0)


# --------------------------------------------------------------------------
# Series: wide tables, derived memory, rates
# --------------------------------------------------------------------------


def wide(series: pd.DataFrame, names: Mapping[str, str], job: str = "kube-apiserver") -> pd.DataFrame:
    """One column per metric (renamed by ``names``; summed over labels), one row per
    timestamp, sorted. Metrics not recorded are absent columns."""
    data = (
        series[(series["job"] == job) & series["metric"].isin(list(names))]
        if "job" in series
        else series[series["metric"].isin(list(names))]
    )
    if data.empty:
        return pd.DataFrame(index=pd.DatetimeIndex([], tz="UTC", name="timestamp"))
    table = data.pivot_table(index="timestamp", columns="metric", values="value", aggfunc="sum")
    table = table.rename(columns=names).sort_index()
    table.columns.name = None
    return table


def memory_frame(series: pd.DataFrame, start: pd.Timestamp | None = None, job: str = "kube-apiserver") -> pd.DataFrame:
    """kube-apiserver memory over time, in bytes.

    Columns (when recorded): ``elapsed_s``, ``rss``, ``heap_inuse``,
    ``heap_alloc``, ``stack_inuse``, ``gc_goal``, ``heap_idle``,
    ``heap_released``, ``go_sys`` and the derived ``idle_retained`` (heap
    idle - released: pages the runtime holds but no object uses),
    ``heap_plus_stack`` (heap in use + stacks) and ``rss_minus_heap_stack``
    (RSS - that: memory the process holds beyond live heap spans and stacks).
    Indexed by timestamp.
    """
    table = wide(series, MEMORY_COLUMNS, job)
    if table.empty and job == "kube-apiserver":
        # No /metrics series (a run that failed before exporting them): RSS from /proc at least.
        table = wide(series, MEMORY_COLUMNS, layout.PROC_JOB)
    if table.empty:
        return pd.DataFrame(columns=["elapsed_s"])
    if {"heap_idle", "heap_released"} <= set(table):
        table["idle_retained"] = table["heap_idle"] - table["heap_released"]
    if {"heap_inuse", "stack_inuse"} <= set(table):
        table["heap_plus_stack"] = table["heap_inuse"] + table["stack_inuse"]
        if "rss" in table:
            table["rss_minus_heap_stack"] = table["rss"] - table["heap_plus_stack"]
    start = start if start is not None else table.index.min()
    table.insert(0, "elapsed_s", elapsed(table.index, start))
    return table


def counter_rate(values: pd.Series) -> pd.Series:
    """Per-second rate of a counter indexed by timestamp; a reset (the value drops)
    counts from zero, like PromQL's ``rate``. The first sample has no rate (NaN)."""
    values = values.dropna().sort_index()
    if len(values) < 2:
        return pd.Series(np.nan, index=values.index, dtype=float)
    delta = values.diff()
    delta = delta.where(delta >= 0, values)  # reset: the counter restarted from 0
    dt = values.index.to_series().diff().dt.total_seconds()
    return (delta / dt.where(dt > 0)).astype(float)


def activity_frame(
    series: pd.DataFrame, start: pd.Timestamp | None = None, job: str = "kube-apiserver"
) -> pd.DataFrame:
    """CPU, GC and concurrency over time: ``elapsed_s``, ``cpu_cores`` (rate of CPU
    seconds), ``gc_per_s`` (GC cycles per second), ``gc_pause_share`` (fraction
    of wall time in stop-the-world pauses), ``goroutines``, ``open_fds``."""
    counters = wide(series, COUNTER_COLUMNS, job)
    gauges = wide(series, GAUGE_COLUMNS, job)
    table = pd.DataFrame(index=counters.index.union(gauges.index))
    table.index.name = "timestamp"
    for src, dst in (("cpu_seconds", "cpu_cores"), ("gc_cycles", "gc_per_s"), ("gc_pause_seconds", "gc_pause_share")):
        if src in counters:
            table[dst] = counter_rate(counters[src]).reindex(table.index)
    for col in gauges:
        table[col] = gauges[col].reindex(table.index)
    if table.empty:
        return table
    start = start if start is not None else table.index.min()
    table.insert(0, "elapsed_s", elapsed(table.index, start))
    return table


def at_marks(table: pd.DataFrame, marks: pd.DataFrame) -> pd.DataFrame:
    """The last row of a timestamp-indexed ``table`` at or before each mark.

    ``marks`` has ``timestamp, crds, phase`` (e.g.
    :func:`crdscale.analysis.percrd.profile_marks`: when each heap profile was
    taken). Returns the marks joined with the table's columns, one row per
    mark, sorted by CRD count then time; marks before the first sample are
    dropped.
    """
    if table.empty or marks.empty:
        return pd.DataFrame(columns=["crds", "phase", "timestamp", *table.columns])
    marks = marks.sort_values("timestamp", kind="stable")
    values = table.sort_index()
    idx = (
        np.searchsorted(values.index.to_numpy(), pd.to_datetime(marks["timestamp"], utc=True).to_numpy(), side="right")
        - 1
    )
    keep = idx >= 0
    joined = values.iloc[idx[keep]].reset_index(drop=True)
    head = marks.loc[keep, ["crds", "phase", "timestamp"]].reset_index(drop=True)
    out = pd.concat([head, joined], axis=1)
    return out.sort_values(["crds", "timestamp"], kind="stable").reset_index(drop=True)


def memory_summary(
    memory: pd.DataFrame,
    columns: Sequence[str] = (
        "rss",
        "heap_inuse",
        "heap_alloc",
        "stack_inuse",
        "rss_minus_heap_stack",
        "idle_retained",
    ),
) -> pd.DataFrame:
    """First, last and peak of each memory column, in MiB: ``series, first_mib, last_mib, peak_mib, growth_mib``."""
    rows = []
    for col in columns:
        if col not in memory or memory[col].dropna().empty:
            continue
        values = memory[col].dropna()
        rows.append(
            (
                MEMORY_LABELS.get(col, col),
                values.iloc[0] / MIB,
                values.iloc[-1] / MIB,
                values.max() / MIB,
                (values.iloc[-1] - values.iloc[0]) / MIB,
            )
        )
    return pd.DataFrame(rows, columns=["series", "first_mib", "last_mib", "peak_mib", "growth_mib"])


def release_advice(go_version: str | None, env: Mapping[str, str] | None = None) -> str:
    """How the Go runtime of ``go_version`` (e.g. ``go1.26.8``) returns freed memory to
    Linux, and what that means for RSS: one Markdown paragraph.

    Go 1.12-1.15 used ``MADV_FREE``: released pages stay in RSS until the
    kernel needs them. Go 1.16 went back to ``MADV_DONTNEED`` (pages leave RSS
    at once) unless ``GODEBUG=madvdontneed=0``.
    """
    env = dict(env or {})
    match = re.match(r"go(\d+)\.(\d+)", go_version or "")
    if not match:
        return (
            "The Go version of this kube-apiserver is unknown, so it is not known whether memory the runtime "
            "released leaves RSS at once (`MADV_DONTNEED`, Go >= 1.16) or only under memory pressure "
            "(`MADV_FREE`, Go 1.12-1.15)."
        )
    minor = int(match.group(2)) if match.group(1) == "1" else 99
    godebug = env.get("GODEBUG", "")
    lazy = (12 <= minor <= 15 and "madvdontneed=1" not in godebug) or (minor >= 16 and "madvdontneed=0" in godebug)
    if lazy:
        return (
            f"This kube-apiserver runs on **{go_version}**, which releases memory with `MADV_FREE`: "
            "the kernel takes released pages back only under memory pressure, so on an idle machine they "
            "stay in RSS. Expect RSS well above heap + stacks, as in the Crossplane measurements "
            "(~3.2 GB RSS for ~1.4 GB of heap)."
        )
    return (
        f"This kube-apiserver runs on **{go_version}**, which releases memory with `MADV_DONTNEED`: "
        "released pages leave RSS at once (Go 1.12-1.15 used `MADV_FREE`, which kept them until the kernel "
        "needed memory; set `GODEBUG=madvdontneed=0` in the scenario's `env` to see that behaviour). "
        "So what remains of the gap here is idle heap the runtime keeps for reuse "
        "(`heap_idle - heap_released`, dashed), GC and runtime metadata, and the binary itself."
    )


def marks_table(
    marks: pd.DataFrame,
    columns: Sequence[str] = ("rss", "heap_inuse", "heap_alloc", "stack_inuse", "rss_minus_heap_stack"),
) -> pd.DataFrame:
    """:func:`at_marks` rows as a readable table: indexed by ``crds, phase``, memory columns in MiB
    (named ``<column> (MiB)``), one decimal."""
    present = [c for c in columns if c in marks]
    table = marks.set_index(["crds", "phase"])[present] / MIB
    return table.round(1).rename(columns={c: f"{c} (MiB)" for c in present})
