"""Process figures (RSS, CPU, fds, threads) come from the most complete record a run holds —
crdscale's 1 s /proc samples or kube-apiserver's own /metrics — and every place that shows one
names that record: the comparison's peak RSS, its process table, the findings' resolution line."""

from __future__ import annotations

import pandas as pd
import pytest

from crdscale.analysis.compare import series_end_values
from crdscale.analysis.process import (
    METRICS_JOB,
    PROC_JOB,
    end_values,
    largest_gaps,
    points_by_source,
    process_source,
)
from crdscale.report.findings import provenance

T0 = pd.Timestamp("2026-01-01", tz="UTC")
RSS = "process_resident_memory_bytes"


def _samples(job: str, seconds, values, metric: str = RSS) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "timestamp": [T0 + pd.Timedelta(seconds=s) for s in seconds],
            "job": job,
            "metric": metric,
            "labels": "{}",
            "value": [float(v) for v in values],
        }
    )


def _peak_between_scrapes() -> pd.DataFrame:
    """/proc every second over 120 s with a 10 GiB peak at 61 s; /metrics scraped at 0, 60 and 119 s:
    the sparse job never sees the peak (the v1.24.0 run of ~1,900 CRDs: 9.2 vs 10.67 GiB)."""
    proc = [2**30 * (10 if s == 61 else 5) for s in range(120)]
    return pd.concat(
        [
            _samples(PROC_JOB, range(120), proc),
            _samples(METRICS_JOB, [0, 60, 119], [5 * 2**30] * 3),
            _samples(METRICS_JOB, range(120), range(120), metric="go_goroutines"),
        ],
        ignore_index=True,
    )


def test_the_dense_record_wins_and_its_peak_is_the_peak():
    series = _peak_between_scrapes()
    assert largest_gaps(series, RSS) == {PROC_JOB: 1.0, METRICS_JOB: 60.0}
    assert process_source(series, RSS) == PROC_JOB
    end = end_values(series, {RSS: "rss_bytes", "go_goroutines": "goroutines"}).set_index("metric")
    assert end.loc["rss_bytes", "peak"] == 10 * 2**30 and end.loc["rss_bytes", "source"] == PROC_JOB
    assert end.loc["rss_bytes", "samples"] == 120
    assert end.loc["goroutines", "source"] == METRICS_JOB  # only /metrics has the Go runtime's figures
    forced = series_end_values(series, job=METRICS_JOB).set_index("metric")
    assert forced.loc["rss_bytes", "peak"] == 5 * 2**30  # what the sparse job alone says


@pytest.mark.parametrize(
    ("proc_seconds", "metrics_seconds", "expected"),
    [
        (range(120), range(0, 120, 30), PROC_JOB),  # /metrics sparse
        (range(60), range(120), METRICS_JOB),  # /proc stopped half-way: a 60 s gap at the end
        (range(120), range(120), PROC_JOB),  # as complete: /proc (costs the server nothing)
        ([0.0 + s * 1.004 for s in range(120)], range(121), PROC_JOB),  # a second's jitter is no difference
        ([], range(120), METRICS_JOB),  # a remote target: /metrics only
    ],
)
def test_source_choice(proc_seconds, metrics_seconds, expected):
    series = pd.concat(
        [
            _samples(PROC_JOB, proc_seconds, [1] * len(proc_seconds)),
            _samples(METRICS_JOB, metrics_seconds, [1] * len(metrics_seconds)),
        ],
        ignore_index=True,
    )
    assert process_source(series, RSS) == expected


def test_no_record_and_non_process_metrics_read_metrics():
    assert process_source(None) == METRICS_JOB
    assert process_source(pd.DataFrame(columns=["timestamp", "job", "metric", "labels", "value"])) == METRICS_JOB
    assert process_source(_peak_between_scrapes(), "go_memstats_heap_inuse_bytes") == METRICS_JOB


def test_points_at_marks_come_from_each_metrics_source():
    series = _peak_between_scrapes()
    marks = pd.DataFrame({"timestamp": [T0 + pd.Timedelta(seconds=61.5)], "crds": [100], "phase": ["served"]})
    points = points_by_source(series, marks, {RSS: "rss_bytes", "go_goroutines": "goroutines"}).set_index("metric")
    assert points.loc["rss_bytes", "value"] == 10 * 2**30 and points.loc["rss_bytes", "source"] == PROC_JOB
    assert points.loc["goroutines", "value"] == 61 and points.loc["goroutines", "source"] == METRICS_JOB


def test_resolution_line_describes_the_record_used():
    metrics = {
        "resolution": {"metric": RSS, "samples": 11, "median_gap_s": 30.0, "max_gap_s": 63.0, "end_gap_s": 51.0},
        "resolution_proc": {"metric": RSS, "samples": 600, "median_gap_s": 1.0, "max_gap_s": 1.2, "end_gap_s": 0.5},
    }
    line = provenance({"metrics": metrics}, PROC_JOB)["metrics resolution"]
    assert line.startswith(f"process figures (RSS, CPU, fds, threads) from /proc (job {PROC_JOB}): 600 samples")
    assert line.endswith(
        "also /metrics (job kube-apiserver): 11 samples of process_resident_memory_bytes, median gap 30 s, largest 63 s, last sample 51.0 s before the end"
    )
    remote = provenance({"metrics": {"resolution": metrics["resolution"]}}, METRICS_JOB)["metrics resolution"]
    assert remote.startswith("process figures (RSS, CPU, fds, threads) from /metrics (job kube-apiserver): 11 samples")


def test_reference_comparison_names_its_process_source():
    from pathlib import Path

    from crdscale.analysis.compare import compare_runs, series_table
    from crdscale.report.compare import comparison_markdown, headline

    root = Path(__file__).resolve().parents[2]
    comparison = compare_runs([root / "data" / "reference-run-v1.24.0", root / "data" / "reference-run"])
    table = series_table(comparison).set_index(["run", "metric"])
    for label in comparison.labels:
        assert table.loc[(label, "rss_bytes"), "source"] == PROC_JOB
        assert table.loc[(label, "heap_inuse_bytes"), "source"] == METRICS_JOB
    assert "(/proc)." in headline(comparison)
    assert f"process figures (RSS, CPU, fds, threads) from /proc (job {PROC_JOB})" in comparison_markdown(comparison)
