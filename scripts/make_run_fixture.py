"""Shrink a recorded run directory into the test fixture tests/data/run-kube-apiserver.

Keeps the baseline and the given CRD counts, and in each heap profile only the
samples with memory in use (inuse views stay exact; alloc_* shrink), without
labels; unreferenced locations and functions are dropped. The manifest,
events (of the kept profiles) and metrics series are copied.

With --components, kube-controller-manager's and etcd's heap profiles at the same counts are kept
too (shrunk alike); --served-only drops the installed-phase profiles; --series-metric NAME
(repeatable) keeps only those series.

Usage: python scripts/make_run_fixture.py RECORDED_RUN OUT [--counts 20,40,60] [--components]
       [--served-only] [--series-metric process_resident_memory_bytes]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pandas as pd

from crdscale.analysis.pprof.select import subset_samples
from crdscale.analysis.pprof.testing import encode_profile
from crdscale.rundir import RunWriter, layout, read_run


def shrink_run(
    run_dir: str | Path,
    out: str | Path,
    counts: set[int] | None = None,
    *,
    served_only: bool = False,
    components: bool = False,
    series_metrics: list[str] | None = None,
) -> Path:
    """Write ``run_dir`` shrunk into ``out`` (replaced): the heap profiles at ``counts`` and 0 (every count
    when None) with only their in-use samples; ``served_only`` also drops the profiles taken at a phase
    (``-installed``); ``components`` keeps kube-controller-manager's and etcd's profiles too;
    ``series_metrics`` keeps only those series."""
    run, out = read_run(run_dir), Path(out)
    if out.exists():
        shutil.rmtree(out)
    writer = RunWriter.create_at(out)
    writer.write_manifest(run.manifest)
    kinds = layout.COMPONENTS if components else (layout.APISERVER,)
    heap = pd.concat([run.component_profiles(c) for c in layout.COMPONENTS], ignore_index=True)
    heap = heap[heap["kind"] == "heap"]
    kept = heap if counts is None else heap[heap["crds"].isin({0} | set(counts))]
    kept = kept[kept["file"].map(lambda f: layout.parse_profile_filename(Path(f).name).component in kinds)]
    if served_only:
        kept = kept[kept["phase"].isna()]
    dropped = set(heap["file"]) - set(kept["file"])
    for row in kept.itertuples(index=False):
        profile = run.read_profile(row.file)
        small = subset_samples(profile, (profile.samples["inuse_space"] != 0).to_numpy())
        small.labels = small.labels.iloc[0:0]
        writer.write_file(row.file, encode_profile(small))
    # The events of the kept profiles and every other event, as recorded.
    events = run.read_jsonl(layout.EVENTS)
    writer.write_jsonl(layout.EVENTS, [e for e in events if e.get("kind") != "profile" or e.get("file") not in dropped])
    series = run.series
    if series_metrics:
        series = series[series["metric"].isin(series_metrics)].reset_index(drop=True)
        # The manifest counts the series' rows (a run's evidence): the kept rows, or every number of the
        # fixture's series would be flagged unreliable (series-row-count).
        metrics = {**run.manifest.get("metrics", {}), "rows": int(len(series))}
        writer.update_manifest(metrics=metrics)
    writer.write_series(series, csv=False)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("out")
    ap.add_argument("--counts", default="20,40,60")
    ap.add_argument("--components", action="store_true", help="also kube-controller-manager's and etcd's profiles")
    ap.add_argument("--served-only", action="store_true", help="only the end-of-step profiles")
    ap.add_argument("--series-metric", action="append", default=[], help="keep only these series")
    args = ap.parse_args()
    counts = {int(c) for c in args.counts.split(",")}
    shrink_run(
        args.run,
        args.out,
        counts,
        served_only=args.served_only,
        components=args.components,
        series_metrics=args.series_metric,
    )


if __name__ == "__main__":
    main()
