"""Shrink a recorded run directory into the test fixture tests/data/run-kube-apiserver.

Keeps the baseline and the given CRD counts, and in each heap profile only the
samples with memory in use (inuse views stay exact; alloc_* shrink), without
labels; unreferenced locations and functions are dropped. The manifest,
events (of the kept profiles) and metrics series are copied.

Usage: python scripts/make_run_fixture.py RECORDED_RUN OUT [--counts 20,40,60]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from crdscale.analysis.pprof.select import subset_samples
from crdscale.analysis.pprof.testing import encode_profile
from crdscale.rundir import RunWriter, layout, read_run


def shrink_run(
    run_dir: str | Path, out: str | Path, counts: set[int] | None = None, *, served_only: bool = False
) -> Path:
    """Write ``run_dir`` shrunk into ``out`` (replaced): the heap profiles at ``counts`` and 0 (every count
    when None) with only their in-use samples; ``served_only`` also drops the profiles taken at a phase
    (``-installed``)."""
    run, out = read_run(run_dir), Path(out)
    if out.exists():
        shutil.rmtree(out)
    writer = RunWriter.create_at(out)
    writer.write_manifest(run.manifest)
    heap = run.heap_profiles()
    kept = heap if counts is None else heap[heap["crds"].isin({0} | set(counts))]
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
    writer.write_series(run.series, csv=False)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("out")
    ap.add_argument("--counts", default="20,40,60")
    args = ap.parse_args()
    shrink_run(args.run, args.out, {int(c) for c in args.counts.split(",")})


if __name__ == "__main__":
    main()
