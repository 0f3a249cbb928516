"""Benchmark: what the harness itself costs, as a share of kube-apiserver's CPU.

Two measurements in one run:

1. **A scenario run** (``crdscale run`` on a local control plane, the CRD count
   and steps given below): the CPU seconds of crdscale's own process (runner,
   watchers, scrapes), of the Prometheus it started, and of kube-apiserver over
   the same run (from the run's series) — the manifest's ``harness`` entry.
2. **The load collection puts on kube-apiserver**: with the run's CRDs installed
   and served, kube-apiserver's CPU (from /proc) over quiet windows without any
   scraping, alternating with windows of Prometheus scraping as a run does
   (``/metrics`` at its own interval, etcd at the run's). The difference is
   the extra kube-apiserver CPU that collection causes. Those windows differ by
   a GC cycle or an OpenAPI rebuild as much as by their two or three scrapes, so
   the estimate printed last is the server's CPU per ``/metrics`` request made
   as Prometheus makes it (the families crdscale records, Prometheus' Accept
   header, gzip), from windows of a scrape every 2 s against quiet ones, times
   the scrapes the run made: in CPU seconds and as a share of what
   kube-apiserver spent during the run. The run's ``/metrics`` interval starts
   at ``--apiserver-interval`` and grows while its scrapes would cost the server
   more than ``--budget`` percent of its own work (the scenario default, 5).

Prints a table and the overhead percentage (goal: <= 5 %). It reports; it does
not assert.

Usage: python benchmarks/overhead.py [--crds 300] [--steps 3] [--window 40] [--pairs 3] [--interval 1]
                                    [--apiserver-interval 20] [--budget 5] [--hold 0]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

from crdscale.cluster.local import LocalControlPlane
from crdscale.collect import metrics
from crdscale.collect.sources import SCRAPE_CPU_PER_SECOND, LocalPrometheus
from crdscale.crds.generate import GeneratorParams, generate_crds
from crdscale.crds.install import Installer
from crdscale.crds.serve import ResourceServer
from crdscale.proc import cpu_seconds
from crdscale.rundir import read_run
from crdscale.scenario.config import load_scenario
from crdscale.scenario.runner import ScenarioRunner


def scenario_run(
    crds: int, steps: int, interval: float, apiserver_interval: float, budget: float, hold: float, out: Path
) -> dict:
    """Run the scenario; returns the manifest's harness entry, the run's duration (s) and the
    kube-apiserver /metrics cadence (``job_interval_s``, ``cadence_changes``)."""
    overrides = {
        "crds.count": crds,
        "crds.groups": max(1, crds // 10),
        "steps.count": steps,
        "steps.settle_seconds": 5,
        "metrics.scrape_interval_seconds": interval,
        "metrics.apiserver_metrics_interval_seconds": apiserver_interval,
        "metrics.apiserver_cpu_budget_percent": budget,
        "steps.hold_seconds": hold,
        "name": "overhead",
    }
    runner = ScenarioRunner(load_scenario(None, overrides=overrides), runs_parent=out)
    started = time.monotonic()
    path = runner.execute().path
    run = read_run(path)
    cadence = {k: run.manifest.metrics.get(k) for k in ("job_interval_s", "cadence_changes")}
    return {
        **run.manifest.harness.to_json(),
        **cadence,
        "run_seconds": time.monotonic() - started,
        "run_dir": str(path),
    }


def scrape_load(crds: int, window: float, interval: float, apiserver_interval: float, pairs: int) -> dict:
    """kube-apiserver CPU per minute with and without a Prometheus scraping it, CRDs served.

    Quiet and scraped windows alternate ``pairs`` times, so that a drift of the
    server's idle CPU (an OpenAPI rebuild, a GC) falls on both sides.
    """
    with LocalControlPlane(name="bench-overhead") as plane:
        cluster = plane.connect()
        crd_set = generate_crds(
            GeneratorParams(crd_count=crds, group_count=max(1, crds // 10), property_count=100, seed=7)
        )
        with (
            Installer(cluster, run_id="bench-overhead") as installer,
            ResourceServer(cluster, "list", run_id="bench-overhead") as server,
        ):
            result = installer.install_step(1, crd_set)
            server.serve(1, result.served_resources())
        time.sleep(15)  # let the install's aftermath (OpenAPI rebuilds) pass
        pid = plane.apiserver_pid

        def cpu_over(seconds: float) -> float:
            before = cpu_seconds(pid)
            time.sleep(seconds)
            return (cpu_seconds(pid) - before) * 60 / seconds

        creds = plane.credentials
        quiet, scraped, prometheus = [], [], []
        for _ in range(pairs):
            quiet.append(cpu_over(window))
            prom = LocalPrometheus(
                f"127.0.0.1:{plane.ports['apiserver']}",
                creds.ca_cert,
                creds.admin_token_file,
                f"127.0.0.1:{plane.ports['etcd_client']}",
                interval_s=interval,
                apiserver_interval_s=apiserver_interval,
            ).start()
            try:
                scraped.append(cpu_over(window))
            finally:
                prom.stop()
            prometheus.append((prom.cpu_seconds or 0) * 60 / window)
            time.sleep(5)  # the last scrape's garbage is collected before the next quiet window
        extra = [s - q for s, q in zip(scraped, quiet)]
        return {
            "quiet_cpu_s_per_min": statistics.mean(quiet),
            "scraped_cpu_s_per_min": statistics.mean(scraped),
            "extra": extra,
            "prometheus_cpu_s_per_min": statistics.mean(prometheus),
            "per_scrape": per_scrape_cpu(cluster, pid, window),
        }


# What Prometheus 2.42 sends (captured), so that the server encodes what it encodes for Prometheus.
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


def per_scrape_cpu(cluster, pid: int, window: float, rounds: int = 2, every: float = 2.0) -> dict:
    """kube-apiserver CPU seconds per ``/metrics`` scrape as Prometheus asks for it
    (``costs``, one per round), and the scrapes' mean wall time (``wall_s``).

    A window of scrapes every ``every`` seconds against a quiet window of the
    same length, ``rounds`` times: many scrapes per window, so that the garbage
    collections their allocations bring about are counted and a stray GC cycle
    or OpenAPI rebuild is spread over all of them (windows with Prometheus at its
    20 s cadence hold two or three scrapes, and differ by those events more than
    by the scrapes).
    """
    params = {"name[]": metrics.exposed_families("kube-apiserver")}
    headers = {"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"}
    costs, walls = [], []
    for _ in range(rounds):
        c0 = cpu_seconds(pid)
        time.sleep(window)
        quiet = cpu_seconds(pid) - c0
        c0, t0, scrapes = cpu_seconds(pid), time.monotonic(), 0
        while time.monotonic() - t0 < window:
            began = time.monotonic()
            cluster.get("/metrics", params=params, headers=headers, timeout=60)
            walls.append(time.monotonic() - began)
            scrapes += 1
            time.sleep(max(0.0, t0 + scrapes * every - time.monotonic()))
        scraped = (cpu_seconds(pid) - c0) * window / (time.monotonic() - t0)
        costs.append((scraped - quiet) / scrapes)
    return {"costs": costs, "wall_s": statistics.mean(walls)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crds", type=int, default=300, help="CRDs installed and served (default 300)")
    ap.add_argument("--steps", type=int, default=3, help="steps of the scenario run (default 3)")
    ap.add_argument("--window", type=float, default=40, help="seconds per CPU window of measurement 2 (default 40)")
    ap.add_argument(
        "--pairs", type=int, default=3, help="quiet/scraped window pairs in measurement 2, alternating (default 3)"
    )
    ap.add_argument("--interval", type=float, default=1.0, help="/proc and etcd interval in seconds (default 1)")
    ap.add_argument(
        "--apiserver-interval",
        type=float,
        default=20.0,
        help="kube-apiserver /metrics interval in seconds to start from (default 20, the scenario "
        "default); also the cadence of measurement 2's Prometheus",
    )
    ap.add_argument(
        "--budget",
        type=float,
        default=5.0,
        help="metrics.apiserver_cpu_budget_percent of the run (default 5, the scenario default; "
        "0: the interval stays fixed)",
    )
    ap.add_argument(
        "--hold",
        type=float,
        default=0.0,
        help="steps.hold_seconds: keep the last step served this long (default 0); a settling "
        "server is where a fixed interval costs most",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(format="%(message)s")  # crdscale's build and start-up lines on stderr
    logging.getLogger("crdscale").setLevel(logging.INFO)

    with tempfile.TemporaryDirectory(prefix="crdscale-overhead-") as out:
        run = scenario_run(
            args.crds, args.steps, args.interval, args.apiserver_interval, args.budget, args.hold, Path(out)
        )
    load = scrape_load(args.crds, args.window, args.interval, args.apiserver_interval, args.pairs)

    apiserver_per_min = run["kube_apiserver_cpu_seconds"] * 60 / run["run_seconds"]
    extra_windows = statistics.mean(load["extra"])
    spread = f"{min(load['extra']):.2f} to {max(load['extra']):.2f} over {len(load['extra'])} pairs"
    per_scrape = statistics.mean(load["per_scrape"]["costs"])
    wall = load["per_scrape"]["wall_s"]
    # The estimate: a scrape's cost times the scrapes the run made (the windows' difference is the
    # cross-check). The cost is measured with every CRD served, so earlier scrapes are over-counted.
    scrapes = (run.get("apiserver_scrapes") or {}).get("count") or 0
    extra = per_scrape * scrapes * 60 / run["run_seconds"]
    cadence = " -> ".join(
        [f"{args.apiserver_interval:g} s"]
        + [
            f"{c['interval_s']:g} s ({c.get('reason', 'scrape duration')})"
            for c in run.get("cadence_changes") or []
            if c["job"] == "kube-apiserver"
        ]
    )
    estimate = run.get("scrape_share_of_apiserver_cpu")
    harness = (run["crdscale_cpu_seconds"] + (run["prometheus_cpu_seconds"] or 0)) / run["kube_apiserver_cpu_seconds"]
    rows = [
        (
            "kube-apiserver CPU during the run",
            f"{run['kube_apiserver_cpu_seconds']:.1f} s "
            f"({apiserver_per_min:.1f} s/min over {run['run_seconds']:.0f} s)",
        ),
        ("crdscale's own process during the run", f"{run['crdscale_cpu_seconds']:.1f} s"),
        ("Prometheus during the run", f"{run['prometheus_cpu_seconds'] or 0:.1f} s"),
        ("harness CPU / kube-apiserver CPU", f"{100 * harness:.1f} %  (machine load beside the server)"),
        ("kube-apiserver /metrics scrapes in the run", f"{scrapes}, every {cadence}"),
        (
            "the run's own estimate of their cost",
            "-"
            if estimate is None
            else f"<= {100 * estimate:.1f} % of the server's own work (their wall time x {SCRAPE_CPU_PER_SECOND:g})",
        ),
        ("kube-apiserver CPU, quiet, CRDs served", f"{load['quiet_cpu_s_per_min']:.2f} s/min"),
        (
            f"kube-apiserver CPU, /metrics scraped every {args.apiserver_interval:g} s",
            f"{load['scraped_cpu_s_per_min']:.2f} s/min",
        ),
        (
            "extra, windows with minus without Prometheus",
            f"{extra_windows:.2f} s/min ({spread}) = {100 * extra_windows / apiserver_per_min:.1f} %",
        ),
        (
            "kube-apiserver CPU per /metrics scrape",
            f"{per_scrape:.3f} s (scrapes every 2 s vs quiet, "
            f"{', '.join(f'{c:.3f}' for c in load['per_scrape']['costs'])})",
        ),
        (
            "a scrape's wall time",
            f"{wall:.3f} s: {per_scrape / wall:.2f} CPU-s per wall second (crdscale assumes {SCRAPE_CPU_PER_SECOND:g})",
        ),
        (
            "extra kube-apiserver CPU caused by collection",
            f"{extra:.2f} s/min ({scrapes} scrapes x {per_scrape:.3f} s "
            f"over {run['run_seconds']:.0f} s) = "
            f"{100 * extra / apiserver_per_min:.1f} % of its CPU in the run",
        ),
    ]
    width = max(len(r[0]) for r in rows)
    print(
        f"harness overhead, {args.crds} CRDs in {args.steps} steps (hold {args.hold:g} s), "
        f"/metrics from every {args.apiserver_interval:g} s "
        f"(budget {args.budget:g} %), /proc and etcd every {args.interval:g} s"
    )
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print(
        f"overhead (extra kube-apiserver CPU from collection): {100 * extra / apiserver_per_min:.1f} %  (goal <= 5 %)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
