"""Shrink a recorded A/B directory (`crdscale ab`) into a fixture: data/ab-known-cost/.

Every completed run is shrunk as scripts/make_run_fixture.py shrinks a run (the served heap
profiles only, their in-use samples, no labels; the series as Parquet), and ab.json is copied with
them. The verdict, flame graph and report are not copied: they are regenerated from what is kept
(`crdscale report DIR`), and the in-use views are exact, so they say what the recorded A/B said.

data/ab-known-cost/ is the known-cost diff's per-CRD A/B of docs/results/changes.md (3 pairs,
v1.37.1, 2 MiB held per served CRD version):

    python scripts/make_ab_fixture.py RECORDED_AB_DIR data/ab-known-cost
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_run_fixture import shrink_run  # noqa: E402

from crdscale.scenario.ab import AB, AB_MANIFEST  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ab_dir")
    ap.add_argument("out")
    args = ap.parse_args()
    ab, out = AB.open(args.ab_dir), Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for run in ab.completed():
        shrink_run(ab.path / run.run_dir, out / run.run_dir, served_only=True)
    shutil.copy2(ab.path / AB_MANIFEST, out / AB_MANIFEST)
    print(out)


if __name__ == "__main__":
    main()
