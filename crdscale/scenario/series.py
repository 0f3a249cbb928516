"""The export of a run's time series: the metrics source's rows and every measurement's own (the /proc
samplers), for the whole run window, into ``metrics/series.parquet`` with its manifest facts."""

from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd

from crdscale.collect import metrics as metric_defs
from crdscale.collect.sources import ProcSampler
from crdscale.scenario.measurements import RunContext


def export_series(ctx: RunContext, measurements) -> None:
    """Write the series of the window ``ctx.window_start`` .. now (also after failures); a failed
    query is recorded (``metrics_error``) and the run's other results kept."""
    source = ctx.source
    if source is None:
        return
    start, end = ctx.window_start, datetime.now(timezone.utc)
    try:
        df = source.series(start, end)
        for m in measurements:
            extra = m.series(ctx, start, end)
            if extra is not None:
                df = pd.concat([df, extra], ignore_index=True)
    except Exception as err:  # keep the run's other results even if the query fails
        ctx.run.update_manifest(metrics_error=f"{type(err).__name__}: {err}")
        return
    ctx.run.write_series(df)
    ctx.run.drop_series_chunks()
    ctx.series = df
    manifest = ctx.run.manifest()
    manifest.setdefault("metrics", {}).update(
        window={"start": start.isoformat(), "end": end.isoformat()},
        rows=int(len(df)),
        series=sorted(df["metric"].unique().tolist()) if len(df) else [],
        **{k: v for k, v in source.describe().items() if k in ("job_interval_s", "cadence_changes")},
        resolution=metric_defs.resolution(df, start, end),
        resolution_proc=metric_defs.resolution(df, start, end, job=ProcSampler.JOB),
    )
    ctx.run.write_manifest(manifest)
