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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("out")
    ap.add_argument("--counts", default="20,40,60")
    args = ap.parse_args()
    keep_counts = {0} | {int(c) for c in args.counts.split(",")}
    run, out = read_run(args.run), Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    writer = RunWriter.create_at(out)
    writer.write_manifest(run.manifest)
    heap = run.heap_profiles()
    kept = heap[heap["crds"].isin(keep_counts)]
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


if __name__ == "__main__":
    main()
