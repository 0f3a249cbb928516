"""Prometheus time series: which series crdscale records, and getting them as a
tidy table from either a Prometheus server or direct scrapes of ``/metrics``.

The tidy table has one row per sample: ``timestamp`` (UTC), ``job``
(``kube-apiserver``, ``etcd``, ``kube-controller-manager``, or a ``-proc`` job),
``metric`` (the series key below), ``labels`` (a JSON object of the labels kept
after aggregation) and ``value``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

import pandas as pd

from crdscale.collect.promtext import parse_exposition
from crdscale.errors import ClusterError

if TYPE_CHECKING:
    from crdscale.collect.prometheus import PrometheusClient

TIDY_COLUMNS = ["timestamp", "job", "metric", "labels", "value"]

# Prometheus refuses range queries returning more than 11,000 points per series.
MAX_POINTS_PER_QUERY = 11_000
# Raw samples are read in windows of this many seconds (each answer stays small).
RAW_WINDOW_S = 3600.0


@dataclass(frozen=True)
class Series:
    """One recorded series: ``metric`` summed over all labels but ``by``.

    ``by=None`` keeps the series as exposed (a single unlabelled gauge such as
    ``process_resident_memory_bytes``).
    """

    metric: str
    job: str = "kube-apiserver"
    by: tuple[str, ...] | None = None
    why: str = ""

    @property
    def key(self) -> str:
        return self.metric

    def promql(self, job_label: str) -> str:
        selector = f'{self.metric}{{job="{job_label}"}}'
        if self.by is None:
            return selector
        return f"sum by ({', '.join(self.by)}) ({selector})"


SERIES: tuple[Series, ...] = (
    Series("process_resident_memory_bytes", why="RSS: what the kernel charges the process"),
    Series("go_memstats_heap_alloc_bytes", why="live + not-yet-collected heap (the GC sawtooth)"),
    Series("go_memstats_heap_inuse_bytes", why="heap spans in use"),
    Series("go_memstats_heap_idle_bytes", why="heap spans idle; minus released = held but unused"),
    Series("go_memstats_heap_released_bytes", why="idle heap returned to the OS (may stay in RSS with MADV_FREE)"),
    Series("go_memstats_stack_inuse_bytes", why="goroutine stacks"),
    Series("go_memstats_sys_bytes", why="everything the Go runtime obtained from the OS"),
    Series("go_memstats_next_gc_bytes", why="heap size that triggers the next GC (the GC goal)"),
    Series("go_gc_duration_seconds_count", why="GC cycles (rate = GC frequency)"),
    Series("go_gc_duration_seconds_sum", why="time in GC stop-the-world pauses"),
    Series("go_goroutines", why="goroutines: watches and per-CRD controllers add some"),
    Series("process_cpu_seconds_total", why="CPU time (rate = cores used)"),
    Series("process_open_fds", why="one etcd connection per served CRD shows here"),
    Series("apiserver_request_total", by=("verb", "code"), why="request rate by verb and status"),
    Series("apiserver_request_duration_seconds_bucket", by=("verb", "le"), why="request latency histogram"),
    Series("apiserver_request_duration_seconds_count", by=("verb",)),
    Series("apiserver_request_duration_seconds_sum", by=("verb",)),
    Series("apiserver_storage_objects", by=("resource",), why="objects per resource in etcd (<= 1.30 name)"),
    Series("apiserver_resource_objects", by=("resource",), why="objects per resource (>= 1.31 name)"),
    Series(
        "apiserver_resource_size_estimate_bytes",
        by=("resource",),
        why="summed serialized size of a resource's stored objects, the server's own estimate (>= 1.34)",
    ),
    Series("apiserver_storage_size_bytes", why="etcd's database file as kube-apiserver sees it"),
    Series("apiserver_registered_watchers", by=("kind",), why="open watches per kind"),
    Series("apiserver_longrunning_requests", by=("verb",), why="in-flight WATCHes and other long requests"),
    Series("etcd_request_duration_seconds_count", by=("operation",), why="kube-apiserver -> etcd requests"),
    Series("etcd_request_duration_seconds_sum", by=("operation",)),
    Series("apiserver_flowcontrol_current_executing_seats", by=("priority_level",), why="APF seats in use"),
    Series("apiserver_flowcontrol_current_inqueue_requests", by=("priority_level",), why="APF queued requests"),
    Series("apiserver_flowcontrol_work_estimated_seats_sum", by=("priority_level",), why="APF estimated seats"),
    Series("apiserver_flowcontrol_work_estimated_seats_count", by=("priority_level",)),
    Series("process_resident_memory_bytes", job="etcd", why="etcd RSS"),
    Series("process_cpu_seconds_total", job="etcd"),
    Series("etcd_mvcc_db_total_size_in_bytes", job="etcd", why="etcd database size"),
    Series("etcd_mvcc_db_total_size_in_use_in_bytes", job="etcd", why="etcd database size in use (after compaction)"),
    Series("go_goroutines", job="etcd"),
    # What each scrape cost: a scrape slower than the interval leaves a gap in every series above.
    Series("scrape_duration_seconds", why="how long scraping kube-apiserver's /metrics took"),
    Series("scrape_body_size_bytes", why="size of kube-apiserver's /metrics body (grows with CRDs)"),
    Series("scrape_duration_seconds", job="etcd"),
    # A local kube-controller-manager: what it costs, and what it asks of kube-apiserver.
    Series("process_resident_memory_bytes", job="kube-controller-manager", why="controller-manager RSS"),
    Series("process_cpu_seconds_total", job="kube-controller-manager"),
    Series("go_memstats_heap_inuse_bytes", job="kube-controller-manager", why="its informer caches live here"),
    Series("go_goroutines", job="kube-controller-manager", why="informers and workers per resource"),
    Series(
        "rest_client_requests_total",
        job="kube-controller-manager",
        by=("method", "code"),
        why="its requests to kube-apiserver (LISTs and WATCHes of every discovered resource)",
    ),
    Series("scrape_duration_seconds", job="kube-controller-manager"),
)


# Suffixes a histogram or summary adds to its family's name in the exposition.
_SAMPLE_SUFFIXES = ("_bucket", "_count", "_sum")


def exposed_families(job: str, series: Iterable[Series] = SERIES) -> list[str]:
    """The metric family names behind the recorded series of ``job``, for a scrape's
    ``name[]`` parameters: a server with client_golang >= 1.24 (kube-apiserver >= 1.37)
    then encodes only these families (at 300 CRDs about 0.1 instead of 0.3 CPU-s per
    scrape); older servers ignore the parameter and send everything."""
    names: set[str] = set()
    for s in series:
        if s.job != job or s.metric.startswith("scrape_"):  # scrape_*: Prometheus' own, not the target's
            continue
        names.add(s.metric)
        for suffix in _SAMPLE_SUFFIXES:
            if s.metric.endswith(suffix):
                names.add(s.metric[: -len(suffix)])
    return sorted(names)


# ---------------------------------------------------------------- scrapes


def aggregate_scrape(text: str, job: str, timestamp: datetime, series: Iterable[Series] = SERIES) -> list[dict]:
    """Turn one ``/metrics`` scrape into tidy rows for the recorded ``series`` of ``job``,
    summing over dropped labels exactly as the PromQL of :meth:`Series.promql` would."""
    wanted = {s.metric: s for s in series if s.job == job}
    sums: dict[tuple[str, str], float] = {}
    for name, labels, value in parse_exposition(text, set(wanted)):
        s = wanted.get(name)
        if s is None or math.isnan(value):
            continue
        kept = labels if s.by is None else {k: labels.get(k, "") for k in s.by}
        key = (name, json.dumps(kept, sort_keys=True))
        sums[key] = sums.get(key, 0.0) + value
    return [
        {"timestamp": timestamp, "job": job, "metric": name, "labels": labels, "value": value}
        for (name, labels), value in sums.items()
    ]


def tidy_frame(rows: list[dict]) -> pd.DataFrame:
    """Rows -> the tidy DataFrame (UTC timestamps, sorted)."""
    df = pd.DataFrame(rows, columns=TIDY_COLUMNS)
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True)
    df["value"] = df["value"].astype(float)
    return df.sort_values(["job", "metric", "labels", "timestamp"], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------- range queries


def split_range(
    start: datetime, end: datetime, step_s: float, max_points: int = MAX_POINTS_PER_QUERY
) -> list[tuple[datetime, datetime]]:
    """Split ``[start, end]`` into consecutive windows of at most ``max_points`` samples at ``step_s``."""
    if end <= start:
        return [(start, end)]
    span = timedelta(seconds=step_s * (max_points - 1))
    windows = []
    cursor = start
    while cursor <= end:
        window_end = min(cursor + span, end)
        windows.append((cursor, window_end))
        cursor = window_end + timedelta(seconds=step_s)
    return windows


def raw_windows(start: datetime, end: datetime, seconds: float = RAW_WINDOW_S) -> list[tuple[datetime, datetime]]:
    """Consecutive windows ``(lo, hi]`` covering ``[start, end]``, each at most ``seconds`` long."""
    windows, lo = [], start
    while lo < end:
        hi = min(lo + timedelta(seconds=seconds), end)
        windows.append((lo, hi))
        lo = hi
    return windows or [(start, end)]


def _range_query_bisecting(
    client, query: str, lo: datetime, hi: datetime, step_s: float, min_span_s: float = 60.0
) -> list[dict]:
    """``client.query_range``, halving the window while Prometheus refuses it for loading too
    many samples (``--query.max-samples``): an aggregation over every resource's histogram
    buckets does at thousands of CRDs (5,000 CRDs: refused over a few minutes). Below
    ``min_span_s`` the refusal stands."""
    try:
        return client.query_range(query, lo, hi, step_s)
    except ClusterError as err:
        if "too many samples" not in str(err) or (hi - lo).total_seconds() < 2 * min_span_s:
            raise
    # Split on the step grid, so both halves sample at the same instants the whole window would.
    middle = lo + timedelta(seconds=step_s * math.floor((hi - lo).total_seconds() / step_s / 2))
    return _merge_results(
        _range_query_bisecting(client, query, lo, middle, step_s, min_span_s),
        _range_query_bisecting(client, query, middle + timedelta(seconds=step_s), hi, step_s, min_span_s),
    )


def _merge_results(first: list[dict], second: list[dict]) -> list[dict]:
    """Two query_range results over consecutive windows as one: values joined per label set."""
    merged: dict[str, dict] = {}
    for result in (*first, *second):
        key = json.dumps(result["metric"], sort_keys=True)
        if key in merged:
            merged[key]["values"] = merged[key]["values"] + result["values"]
        else:
            merged[key] = {"metric": result["metric"], "values": list(result["values"])}
    return list(merged.values())


def query_prometheus(
    client: PrometheusClient,
    start: datetime,
    end: datetime,
    step_s: float,
    *,
    series: Iterable[Series] = SERIES,
    job_labels: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Every recorded series from the Prometheus behind ``client`` between ``start`` and ``end`` (UTC)
    as the tidy DataFrame: unaggregated series as their raw samples, aggregated ones
    (``Series.by``) range-queried at ``step_s`` seconds.

    ``client`` is a :class:`crdscale.collect.prometheus.PrometheusClient` (it carries the URL,
    TLS and credentials). ``job_labels`` maps crdscale's job names to the ``job`` label used
    by that Prometheus (a user's may call kube-apiserver ``apiserver``).
    """
    job_labels = dict(job_labels or {})
    rows: list[dict] = []
    for s in series:
        query = s.promql(job_labels.get(s.job, s.job))
        if s.by is None:
            # Unaggregated: the raw samples at their scrape times, so a missed scrape stays a gap
            # and a job scraped less often than step_s keeps its own cadence.
            for lo, hi in raw_windows(start, end):
                window = (hi - lo).total_seconds() + (0.001 if lo == start else 0.0)  # (hi - window, hi]
                for result in client.query(f"{query}[{int(window * 1000)}ms]", hi):
                    rows += _sample_rows(result, s, drop=("__name__", "job", "instance"))
            continue
        for lo, hi in split_range(start, end, step_s):
            for result in _range_query_bisecting(client, query, lo, hi, step_s):
                rows += _sample_rows(result, s, drop=("__name__",))
    return tidy_frame(rows)


def _sample_rows(result: dict, s: Series, drop: tuple[str, ...]) -> list[dict]:
    """The tidy rows of one Prometheus result of series ``s``: one per ``[timestamp, value]``, its labels
    but ``drop`` as the ``labels`` JSON."""
    labels = json.dumps({k: v for k, v in result["metric"].items() if k not in drop}, sort_keys=True)
    return [
        {
            "timestamp": datetime.fromtimestamp(float(ts), tz=timezone.utc),
            "job": s.job,
            "metric": s.key,
            "labels": labels,
            "value": float(value),
        }
        for ts, value in result["values"]
    ]


def resolution(
    df: pd.DataFrame,
    start: datetime,
    end: datetime,
    metric: str = "process_resident_memory_bytes",
    job: str = "kube-apiserver",
) -> dict:
    """The effective resolution of a recorded series over ``[start, end]`` (seconds):
    median and largest gap between samples, and how far the first and last samples are
    from the window's ends. What the manifest and the report state beside the interval."""
    sel = df[(df["metric"] == metric) & (df["job"] == job)] if len(df) else df
    if len(sel) == 0:
        return {"metric": metric, "samples": 0}
    ts = pd.to_datetime(sel["timestamp"], utc=True).drop_duplicates().sort_values()
    gaps = ts.diff().dropna().dt.total_seconds()
    return {
        "metric": metric,
        "samples": int(len(ts)),
        "median_gap_s": float(gaps.median()) if len(gaps) else None,
        "max_gap_s": float(gaps.max()) if len(gaps) else None,
        "start_gap_s": float((ts.iloc[0] - pd.Timestamp(start)).total_seconds()),
        "end_gap_s": float((pd.Timestamp(end) - ts.iloc[-1]).total_seconds()),
    }


def latest(df: pd.DataFrame, metric: str, job: str = "kube-apiserver") -> float | None:
    """The last value of an unlabelled series (e.g. RSS) in a tidy frame, or ``None``."""
    sel = df[(df["metric"] == metric) & (df["job"] == job)]
    return None if sel.empty else float(sel.sort_values("timestamp")["value"].iloc[-1])
