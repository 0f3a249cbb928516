"""What the harness costs the machine measured: computed from a run's tidy series, no runner needed."""

from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest

from crdscale.analysis.harness import SCRAPE_CPU_PER_SECOND, harness_cost, scrape_cost

T0 = datetime(2026, 11, 24, tzinfo=timezone.utc)


def _series(cpu_values, durations, job="kube-apiserver"):
    rows = [
        {"timestamp": T0 + timedelta(seconds=10 * i), "job": job, "metric": "process_cpu_seconds_total", "value": v}
        for i, v in enumerate(cpu_values)
    ]
    rows += [
        {"timestamp": T0 + timedelta(seconds=10 * i), "job": job, "metric": "scrape_duration_seconds", "value": d}
        for i, d in enumerate(durations)
    ]
    rows.append({"timestamp": T0, "job": "etcd", "metric": "scrape_duration_seconds", "value": 100.0})
    return pd.DataFrame(rows).sample(frac=1.0, random_state=1)  # order must not matter


def test_scrape_cost_splits_the_servers_cpu_into_our_scrapes_and_its_own_work():
    cost, own = scrape_cost(16.0, 1.2)
    assert cost == pytest.approx(SCRAPE_CPU_PER_SECOND * 1.2) and own == pytest.approx(16.0 - cost)


def test_harness_cost_against_kube_apiservers_own_work():
    harness = harness_cost(_series([50.0, 58.0, 66.0], [0.2] * 6), crdscale_cpu_s=0.4567, prometheus_cpu_s=0.24)
    cost = SCRAPE_CPU_PER_SECOND * 1.2  # six scrapes of 0.2 s; etcd's are not the server's
    assert harness == {
        "crdscale_cpu_seconds": 0.457,
        "prometheus_cpu_seconds": 0.24,
        "kube_apiserver_cpu_seconds": 16.0,
        "harness_share_of_apiserver_cpu": round((0.4567 + 0.24) / 16.0, 4),
        "apiserver_scrapes": {"count": 6, "cpu_per_wall_second": SCRAPE_CPU_PER_SECOND, "cpu_seconds_estimate": 1.56},
        "scrape_share_of_apiserver_cpu": round(round(cost, 3) / (16.0 - cost), 4),
    }


@pytest.mark.parametrize("series", [None, pd.DataFrame(columns=["timestamp", "job", "metric", "value"])])
def test_without_series_only_the_harness_own_cpu_is_known(series):
    harness = harness_cost(series, crdscale_cpu_s=1.0, prometheus_cpu_s=None)
    assert harness["crdscale_cpu_seconds"] == 1.0 and harness["apiserver_scrapes"] is None
    assert harness["kube_apiserver_cpu_seconds"] is None and harness["harness_share_of_apiserver_cpu"] is None
    assert harness["scrape_share_of_apiserver_cpu"] is None


def test_one_cpu_sample_is_no_rate_and_no_share():
    harness = harness_cost(_series([50.0], [0.2]), crdscale_cpu_s=1.0, prometheus_cpu_s=2.0)
    assert harness["kube_apiserver_cpu_seconds"] is None and harness["scrape_share_of_apiserver_cpu"] is None
    assert harness["apiserver_scrapes"]["count"] == 1
