"""Recover a run whose runner died (``kill -9``, the OOM killer, a closed laptop).

The runner writes its series while it goes — a local Prometheus keeps its
database inside the run directory, the direct scraper flushes chunks — so what
was collected up to the death is on disk. Recovery stops the harness processes
the run recorded (Prometheus, client programs), exports the series from that
database (or the chunks) into the usual ``metrics/series.parquet``, copies the
control plane's logs if its instance is still there, and records the run as
``abandoned``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timezone

import pandas as pd

from crdscale.cluster.local import ProcessRecord, terminate_process
from crdscale.collect import metrics
from crdscale.collect.sources import LocalPrometheus
from crdscale.paths import instances_dir
from crdscale.rundir import RunWriter, layout, read_run
from crdscale.rundir.manifest import Manifest

log = logging.getLogger(__name__)


def stop_recorded_processes(manifest: Manifest | Mapping) -> list[str]:
    """Stop the harness processes a run recorded that still run; returns their names."""
    stopped = []
    for p in Manifest.of(manifest).processes:
        record = ProcessRecord(p.name, int(p.pid), p.start_ticks, "")
        if record.alive():
            terminate_process(record)
            stopped.append(f"{record.name} (pid {record.pid})")
    return stopped


def _window(run) -> tuple[datetime, datetime]:
    started = pd.Timestamp(run.manifest.started_at or run.events["ts"].min())
    last = run.events["ts"].max() if len(run.events) else pd.Timestamp.now(tz="UTC")
    start = started.tz_localize("UTC") if started.tzinfo is None else started
    # A minute past the last event: the runner may have died well after it.
    return start.to_pydatetime(), (last + pd.Timedelta(minutes=1)).to_pydatetime()


def export_from_prometheus_tsdb(run, interval_s: float) -> pd.DataFrame:
    """Start a Prometheus on the run's own database (scraping nothing) and range-query the recorded series."""
    prom = LocalPrometheus.reopen(run.path / layout.PROMETHEUS_TSDB)
    prom.interval_s = interval_s
    prom.start()
    try:
        start, end = _window(run)
        return metrics.query_prometheus(prom.client(), start, min(end, datetime.now(timezone.utc)), interval_s)
    finally:
        prom.stop()


def recover_run(path) -> dict:
    """Export what an abandoned run collected and mark it ``abandoned``; returns what was done
    (each process stopped is also logged at INFO)."""
    run = read_run(path)
    writer = RunWriter.open(run.path)
    done: dict = {"run": str(run.path), "status_before": run.status}
    done["stopped"] = stop_recorded_processes(run.manifest)
    for name in done["stopped"]:
        log.info(f"stopped {name}")
    interval = float(run.manifest.metrics.scrape_interval_s or 1.0)
    series, source = None, None
    if (run.path / layout.SERIES).is_file():
        source = "already exported"
    else:
        # Both may be there: Prometheus scraped /metrics while the /proc sampler (or the direct
        # scraper) wrote chunks. Dropping the chunks after exporting only the database lost the
        # /proc series (RSS, CPU, fds at 1 s) of every recovered local run.
        parts, sources = [], []
        if (run.path / layout.PROMETHEUS_TSDB).is_dir():
            parts.append(export_from_prometheus_tsdb(run, interval))
            sources.append("prometheus database")
        if (run.path / layout.SERIES_CHUNKS).is_dir():
            parts.append(run.recorded_series)  # all of it: recovering leaves nothing out
            sources.append("/proc chunks" if sources else "direct-scrape chunks")
        parts = [p for p in parts if p is not None and len(p)]
        if parts:
            series = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        source = " + ".join(sources) or None
    if series is not None and len(series):
        writer.write_series(series)
        writer.drop_series_chunks()
        writer.update_manifest(
            metrics={**run.manifest.metrics.to_json(), "rows": int(len(series)), "recovered_from": source}
        )
    done["series_source"] = source
    done["series_rows"] = int(len(series)) if series is not None else None
    instance = instances_dir() / f"run-{run.manifest.run_id}" / "logs"
    if instance.is_dir():  # the control plane may still be up (crdscale down stops it)
        for log_file in instance.glob("*.log"):
            writer.copy_log(log_file)
    if run.status in ("running", "abandoned"):
        reason = "the runner died before the run ended; data up to then recovered by crdscale recover"
        writer.finish("abandoned", reason)
    done["status"] = read_run(run.path).status
    return done
