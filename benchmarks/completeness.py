"""Benchmark: are a run's memory and CPU series complete? (issue 13, goal: no gap > 3 intervals, to the end)

Reads a finished run directory and prints, for each series that tracks kube-apiserver's
memory and CPU (RSS, CPU, open fds, threads from /proc; heap in use, stacks, goroutines
and GC from ``/metrics``), how many samples it has over the run, the median and the
largest gap between samples, and how far its last sample is from the end of the run
(the final profile included). Also prints how long the ``/metrics`` scrapes took and
how large their bodies were, since a scrape that outlasts the interval is what tears
holes into the ``/metrics`` series of a server with thousands of CRDs.

Record a run at scale, then check it (the scenario records 2,000 provider-like CRDs
served by client-go informers, 1 s interval)::

    crdscale run benchmarks/scale-2000.toml --out /tmp/scale
    python benchmarks/completeness.py /tmp/scale/<run>            # add -o json for scripts

A ``/metrics`` job that moved to a longer interval during the run (its scrapes outlasted
the run's, see ``metrics.cadence`` events) is held to 3 of its own final intervals; the
/proc series to 3 of the run's. Reports; exits 1 when a series misses its goal.
"""

from __future__ import annotations

import argparse
import json
import sys

import pandas as pd

from crdscale.collect.metrics import resolution
from crdscale.collect.sources import ProcSampler
from crdscale.rundir import read_run

# (job, metric): the memory/CPU series the issue names, from /proc and from /metrics.
SERIES = [
    (ProcSampler.JOB, "process_resident_memory_bytes"),
    (ProcSampler.JOB, "process_cpu_seconds_total"),
    (ProcSampler.JOB, "process_open_fds"),
    (ProcSampler.JOB, "process_threads"),
    ("kube-apiserver", "process_resident_memory_bytes"),
    ("kube-apiserver", "go_memstats_heap_inuse_bytes"),
    ("kube-apiserver", "go_memstats_stack_inuse_bytes"),
    ("kube-apiserver", "go_goroutines"),
    ("kube-apiserver", "go_gc_duration_seconds_count"),
]


def completeness(run_dir: str, goal_s: float) -> dict:
    """Per series: samples, median/max gap and end gap (s), and whether it meets ``goal_s``;
    plus the ``/metrics`` scrape duration and body size quantiles."""
    run = read_run(run_dir)
    metrics = run.manifest.metrics
    start = pd.Timestamp(metrics.window.start or run.manifest.started_at)
    end = pd.Timestamp(metrics.window.end or run.manifest.ended_at)
    series = run.series
    # A /metrics job may have moved to a longer interval when its scrapes outlasted the run's
    # (metrics.cadence events): its goal is 3 of its own final intervals.
    cadence = metrics.job_interval_s
    interval = metrics.scrape_interval_s or 1.0
    rows = []
    for job, metric in SERIES:
        r = resolution(series, start, end, metric=metric, job=job)
        if not r["samples"]:
            continue
        job_goal = max(goal_s, goal_s / interval * cadence.get(job, interval))
        ok = (r["max_gap_s"] or 0) <= job_goal and r["end_gap_s"] <= job_goal
        rows.append(
            {
                "job": job,
                "metric": metric,
                "interval_s": cadence.get(job, interval),
                **r,
                "goal_s": job_goal,
                "meets_goal": ok,
            }
        )
    scrapes = {}
    for metric in ("scrape_duration_seconds", "scrape_body_size_bytes"):
        values = series[(series["metric"] == metric) & (series["job"] == "kube-apiserver")]["value"]
        if len(values):
            scrapes[metric] = {q: float(values.quantile(q)) for q in (0.5, 0.9, 0.99, 1.0)}
    summary = run.manifest.crds.to_json() or run.crd_summary or {}
    return {
        "run_dir": str(run.path),
        "crds": summary.get("count"),
        "kube_apiserver": run.manifest.versions.kube_apiserver,
        "interval_s": run.manifest.scenario.metrics.scrape_interval_seconds,
        "window_s": (end - start).total_seconds(),
        "goal_s": goal_s,
        "series": rows,
        "scrapes": scrapes,
        "cadence_changes": list(metrics.cadence_changes),
        "meets_goal": all(r["meets_goal"] for r in rows) and bool(rows),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument(
        "--goal",
        type=float,
        default=3.0,
        help="largest allowed gap and end gap, seconds at a 1 s interval (default 3 = 3 intervals)",
    )
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    result = completeness(args.run_dir, args.goal)
    if args.output == "json":
        print(json.dumps(result, indent=2, default=str))
    else:
        print(
            f"{result['run_dir']}: {result['crds']} CRDs, kube-apiserver {result['kube_apiserver']}, "
            f"interval {result['interval_s']} s, run window {result['window_s']:.0f} s"
        )
        table = pd.DataFrame(result["series"])[
            ["job", "metric", "interval_s", "samples", "median_gap_s", "max_gap_s", "end_gap_s", "goal_s", "meets_goal"]
        ]
        print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
        for change in result["cadence_changes"]:
            print(
                f"cadence: {change['job']} {change['previous_s']:g} s -> {change['interval_s']:g} s "
                f"(last scrape {change['scrape_duration_s']:g} s, {'up' if change['up'] else 'failed'})"
            )
        for metric, q in result["scrapes"].items():
            print(f"{metric}: " + ", ".join(f"p{int(k * 100)} {v:,.3g}" for k, v in q.items()))
        proc = [r for r in result["series"] if r["job"] == ProcSampler.JOB]
        if proc:
            print(
                f"/proc series: largest gap {max(r['max_gap_s'] or 0 for r in proc):.2f} s, "
                f"last sample {max(r['end_gap_s'] for r in proc):.2f} s before the end"
            )
        print(
            f"{'every series meets' if result['meets_goal'] else 'some series MISS'} the goal "
            f"(gap and end gap <= {args.goal:g} intervals of its job)"
        )
    return 0 if result["meets_goal"] else 1


if __name__ == "__main__":
    sys.exit(main())
