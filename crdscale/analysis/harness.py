"""What measuring costs the machine being measured: crdscale's and Prometheus' CPU beside
kube-apiserver's, and what kube-apiserver spends answering our ``/metrics`` scrapes.

Pure functions on a run's tidy series (``timestamp``, ``job``, ``metric``, ``labels``, ``value``:
what a run exports as its metrics); the runner records their result in the manifest's ``harness``
and the findings quote it.
"""

from __future__ import annotations

import pandas as pd

from crdscale.models.scrapecost import SCRAPE_CPU_PER_SECOND, scrape_cost
from crdscale.rundir.layout import APISERVER_JOB


def harness_cost(series: pd.DataFrame | None, crdscale_cpu_s: float, prometheus_cpu_s: float | None) -> dict:
    """The load the harness put on the machine during a run, as the manifest's ``harness`` records it.

    ``series`` is the run's tidy table (kube-apiserver's ``process_cpu_seconds_total`` and
    Prometheus' ``scrape_duration_seconds`` of its scrapes; None or empty when none were
    exported); ``crdscale_cpu_s`` and ``prometheus_cpu_s`` (None: no local Prometheus) are the
    CPU seconds those processes used. Returns ``crdscale_cpu_seconds``, ``prometheus_cpu_seconds``,
    ``kube_apiserver_cpu_seconds`` (its CPU over the series, None with fewer than two samples),
    ``harness_share_of_apiserver_cpu`` (crdscale and Prometheus against it), ``apiserver_scrapes``
    (``count``, ``cpu_per_wall_second``, ``cpu_seconds_estimate``; None without series) and
    ``scrape_share_of_apiserver_cpu`` (the scrapes' estimated cost against the server's own work).
    """
    apiserver = scrapes = own_work = None
    if series is not None and len(series):
        of_apiserver = series[series["job"] == APISERVER_JOB]
        cpu = of_apiserver[of_apiserver["metric"] == "process_cpu_seconds_total"].sort_values("timestamp")["value"]
        apiserver = float(cpu.iloc[-1] - cpu.iloc[0]) if len(cpu) > 1 else None
        # What our /metrics scrapes cost the server itself, from their durations (an upper bound;
        # benchmarks/overhead.py measures it).
        durations = of_apiserver.loc[of_apiserver["metric"] == "scrape_duration_seconds", "value"]
        cost, own_work = scrape_cost(apiserver or 0.0, float(durations.sum()))
        scrapes = {
            "count": int(len(durations)),
            "cpu_per_wall_second": SCRAPE_CPU_PER_SECOND,
            "cpu_seconds_estimate": round(cost, 3),
        }
    harness = crdscale_cpu_s + (prometheus_cpu_s or 0.0)
    return {
        "crdscale_cpu_seconds": round(crdscale_cpu_s, 3),
        "prometheus_cpu_seconds": prometheus_cpu_s,
        "kube_apiserver_cpu_seconds": apiserver,
        "harness_share_of_apiserver_cpu": round(harness / apiserver, 4) if apiserver else None,
        "apiserver_scrapes": scrapes,
        # The load collection puts on the server measured, against what the server did besides.
        "scrape_share_of_apiserver_cpu": (
            round(scrapes["cpu_seconds_estimate"] / own_work, 4) if apiserver and own_work > 0 else None
        ),
    }
