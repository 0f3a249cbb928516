"""Shrink a recorded run directory into the test fixture tests/data/run-kube-apiserver.

Keeps the baseline and the given CRD counts, and in each heap profile only the
samples with memory in use (inuse views stay exact; alloc_* shrink), without
labels; unreferenced locations and functions are dropped. The manifest,
events (of the kept profiles) and metrics series are copied.

Usage: python scripts/make_run_fixture.py RECORDED_RUN OUT [--counts 20,40,60]
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from crdscale.analysis.profile import encode_profile, read_profile
from crdscale.analysis.views import subset_samples
from crdscale.collect.naming import parse_profile_filename


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("out")
    ap.add_argument("--counts", default="20,40,60")
    args = ap.parse_args()
    keep_counts = {0} | {int(c) for c in args.counts.split(",")}
    run, out = Path(args.run), Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    (out / "profiles").mkdir(parents=True)
    kept = set()
    for path in sorted((run / "profiles").glob("heap-*.pb.gz")):
        name = parse_profile_filename(path.name)
        if name is None or name.crds not in keep_counts:
            continue
        profile = read_profile(path)
        small = subset_samples(profile, (profile.samples["inuse_space"] != 0).to_numpy())
        small.labels = small.labels.iloc[0:0]
        (out / "profiles" / path.name).write_bytes(encode_profile(small))
        kept.add(f"profiles/{path.name}")
    events = []
    for line in (run / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("kind") != "profile" or event.get("file") in kept:
            events.append(line)
    (out / "events.jsonl").write_text("\n".join(events) + "\n")
    shutil.copy(run / "manifest.json", out / "manifest.json")
    (out / "metrics").mkdir()
    shutil.copy(run / "metrics" / "series.parquet", out / "metrics" / "series.parquet")


if __name__ == "__main__":
    main()
