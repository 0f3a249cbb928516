"""The named steps of the discovery sweep and the LIST probe's concurrent load, on plain data."""

import math

import pytest

from crdscale.collect.probes import discovery, listload
from crdscale.models import tokenbucket


def _summary(wall_s, delay_s=0.0):
    limit = {"limit": "x", "burst": 100, "qps": 5}
    return limit | {
        "mode": "client-go",
        "requests": 200,
        "wall_s": wall_s,
        "preamble_s": 0.1,
        "max_wait_s": delay_s,
        "max_limiter_wait_s": delay_s,
        "bytes": 1000,
        "errors": 0,
        "predicted_delay_s": delay_s,
    }


def test_a_sweep_row_measures_the_delay_against_the_unthrottled_baseline():
    limit = tokenbucket.RateLimit("client-go", burst=100, qps=5)
    row = discovery._sweep_row(368, 0, limit, _summary(wall_s=40.0, delay_s=30.0), 10.0, 0.01)
    assert row["measured_delay_s"] == pytest.approx(30.0) and row["unthrottled_wall_s"] == 10.0
    assert row["predicted_extra_wall_s"] == tokenbucket.predicted_extra_wall(0.1, 30.0, 0.01, 10.0)
    assert row["relative_error"] == tokenbucket.relative_error(30.0, row["predicted_extra_wall_s"])
    assert row["model_relative_error"] == pytest.approx(0.0)
    assert list(row)[:3] == ["group_versions", "repeat", "mode"]


def test_the_unthrottled_row_is_its_own_baseline():
    row = discovery._sweep_row(192, 1, tokenbucket.PRESETS["disabled"], _summary(wall_s=2.0), 2.0, 0.01)
    assert row["measured_delay_s"] == 0.0 and row["predicted_extra_wall_s"] == 0.0
    assert math.isnan(row["relative_error"])  # below the noise floor: not held to the tolerance


def test_a_load_level_reports_latency_quantiles_and_memory_growth_over_its_baseline():
    replay = listload._Replay(latencies=[0.1, 0.2, 0.3], errors=1, bytes=3000, seconds=1.5)
    assert replay.columns() == {
        "requests": 3,
        "errors": 1,
        "seconds": 1.5,
        "throughput_rps": 2.0,
        "latency_p50_s": pytest.approx(0.2),
        "latency_p99_s": pytest.approx(0.298),
        "bytes": 3000,
    }
    before = {"rss_bytes": 100.0, "heap_inuse_bytes": 50.0}
    memory = listload._memory_columns(before, [{"rss_bytes": 90.0, "heap_inuse_bytes": 80.0}])
    assert memory["rss_growth_bytes"] == 0.0  # a peak under the baseline (a GC between) grew by 0
    assert memory["heap_inuse_growth_bytes"] == 30.0 and memory["rss_max_bytes"] == 90.0


def test_a_load_level_without_answers_or_samples_is_nan_not_zero():
    columns = listload._Replay([], errors=4, bytes=0, seconds=0.0).columns()
    assert columns["requests"] == 0 and columns["errors"] == 4
    assert all(math.isnan(columns[k]) for k in ("throughput_rps", "latency_p50_s", "latency_p99_s"))
    memory = listload._memory_columns({"rss_bytes": 1.0, "heap_inuse_bytes": 1.0}, [])
    assert math.isnan(memory["rss_max_bytes"]) and math.isnan(memory["heap_inuse_growth_bytes"])
