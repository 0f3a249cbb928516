"""Series bookkeeping: exposition parsing, aggregation like PromQL's sum by, range splitting."""

import json
from datetime import datetime, timedelta, timezone

import pytest

from crdscale.collect import metrics

SCRAPE = """\
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 2.5165824e+08
go_goroutines 1234
apiserver_request_total{code="200",component="apiserver",resource="pods",verb="LIST"} 5
apiserver_request_total{code="200",component="apiserver",resource="widgets",verb="LIST"} 7
apiserver_request_total{code="404",component="apiserver",resource="pods",verb="GET"} 1
apiserver_storage_objects{resource="widgets.example.org"} 12
weird_label{path="a \\"quoted\\" value"} 1
not_recorded_metric 9
"""

T0 = datetime(2026, 11, 22, 3, 0, tzinfo=timezone.utc)


def test_parse_exposition_reads_values_and_escaped_labels():
    samples = list(metrics.parse_exposition(SCRAPE))
    assert ("process_resident_memory_bytes", {}, 251658240.0) in samples
    assert ("weird_label", {"path": 'a "quoted" value'}, 1.0) in samples


def test_aggregate_scrape_sums_over_dropped_labels_like_promql():
    rows = metrics.aggregate_scrape(SCRAPE, "kube-apiserver", T0)
    by_key = {(r["metric"], r["labels"]): r["value"] for r in rows}
    assert by_key[("apiserver_request_total", json.dumps({"code": "200", "verb": "LIST"}))] == 12
    assert by_key[("apiserver_request_total", json.dumps({"code": "404", "verb": "GET"}))] == 1
    assert by_key[("process_resident_memory_bytes", "{}")] == 251658240.0
    assert not any(r["metric"] == "not_recorded_metric" for r in rows)
    assert all(r["job"] == "kube-apiserver" for r in rows)


def test_tidy_frame_is_utc_and_has_the_documented_columns():
    df = metrics.tidy_frame(metrics.aggregate_scrape(SCRAPE, "kube-apiserver", T0))
    assert list(df.columns) == metrics.TIDY_COLUMNS
    assert str(df["timestamp"].dt.tz) == "UTC"
    assert metrics.latest(df, "go_goroutines") == 1234


@pytest.mark.parametrize("seconds,step,windows", [(100, 1, 1), (11_000, 1, 2), (30_000, 1, 3), (30_000, 5, 1)])
def test_split_range_respects_the_point_limit(seconds, step, windows):
    end = T0 + timedelta(seconds=seconds)
    parts = metrics.split_range(T0, end, step)
    assert len(parts) == windows
    assert parts[0][0] == T0 and parts[-1][1] == end
    for lo, hi in parts:
        assert (hi - lo).total_seconds() / step + 1 <= metrics.MAX_POINTS_PER_QUERY
    for (_, hi), (lo, _) in zip(parts, parts[1:]):
        assert (lo - hi).total_seconds() == step  # no gap, no overlap


def test_promql_for_aggregated_and_plain_series():
    plain = metrics.Series("process_resident_memory_bytes")
    assert plain.promql("kube-apiserver") == 'process_resident_memory_bytes{job="kube-apiserver"}'
    agg = metrics.Series("apiserver_request_total", by=("verb", "code"))
    assert agg.promql("apiserver") == 'sum by (verb, code) (apiserver_request_total{job="apiserver"})'


def test_required_series_are_recorded():
    names = {s.metric for s in metrics.SERIES}
    for required in [
        "process_resident_memory_bytes",
        "go_memstats_heap_alloc_bytes",
        "go_memstats_heap_inuse_bytes",
        "go_memstats_heap_idle_bytes",
        "go_memstats_heap_released_bytes",
        "go_memstats_stack_inuse_bytes",
        "go_memstats_sys_bytes",
        "go_memstats_next_gc_bytes",
        "go_goroutines",
        "process_cpu_seconds_total",
        "process_open_fds",
        "apiserver_request_total",
        "apiserver_storage_objects",
    ]:
        assert required in names


def test_a_range_query_refused_for_too_many_samples_is_split_until_prometheus_accepts_it():
    from datetime import datetime, timedelta, timezone

    from crdscale.collect.metrics import Series, query_prometheus
    from crdscale.errors import ClusterError

    start = datetime(2026, 11, 23, tzinfo=timezone.utc)
    end = start + timedelta(seconds=600)
    asked, accepted = [], []

    class Prometheus:  # refuses any window over 150 s, as --query.max-samples does for big aggregations
        def query_range(self, query, lo, hi, step):
            asked.append((hi - lo).total_seconds())
            if (hi - lo).total_seconds() > 150:
                raise ClusterError(
                    "Prometheus refused /api/v1/query_range: HTTP 422: query processing would load "
                    "too many samples into memory in query execution"
                )
            accepted.append((hi - lo).total_seconds())
            t = lo.timestamp()
            values = []
            while t <= hi.timestamp():
                values.append([t, "1"])
                t += step
            return [{"metric": {"verb": "GET"}, "values": values}]

    df = query_prometheus(Prometheus(), start, end, 1.0, series=[Series("apiserver_request_total", by=("verb",))])
    assert asked[0] == 600 and len(accepted) == 4 and max(accepted) <= 150
    assert len(df) == 601 and df["timestamp"].is_unique  # every second once, no window lost or doubled


def test_exposed_families_name_every_recorded_series_family_for_a_name_filter():
    """A scrape's name[] list must hold the family of every recorded series (a histogram's
    _bucket/_count/_sum come from one family) and nothing Prometheus records itself."""
    families = metrics.exposed_families("kube-apiserver")
    assert "apiserver_request_duration_seconds" in families  # _bucket, _count, _sum
    assert "go_gc_duration_seconds" in families  # a summary's _count and _sum
    assert "process_cpu_seconds_total" in families  # a counter's family name keeps _total
    assert not any(f.startswith("scrape_") for f in families)
    recorded = {s.metric for s in metrics.SERIES if s.job == "kube-apiserver" and not s.metric.startswith("scrape_")}
    for metric in recorded:
        assert metric in families or any(
            metric == f + suffix for f in families for suffix in ("_bucket", "_count", "_sum")
        )
    assert metrics.exposed_families("etcd") == sorted(
        {
            "process_resident_memory_bytes",
            "process_cpu_seconds_total",
            "etcd_mvcc_db_total_size_in_bytes",
            "etcd_mvcc_db_total_size_in_use_in_bytes",
            "go_goroutines",
        }
    )
