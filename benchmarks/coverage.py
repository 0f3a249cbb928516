"""Empirical coverage of crdscale's 95 % intervals, by simulating how heap profiles are made.

  python benchmarks/coverage.py                    # 2,000 runs and run pairs (~2 min)
  python benchmarks/coverage.py --runs 300 --seed 7

Object sizes and per-CRD counts come from the committed reference runs
(data/reference-run: kube-apiserver v1.37.1, data/reference-run-v1.24.0): each
cause's sizes from the last served heap profile, its bytes per CRD installed and
served and its baseline from the run's own fits. Each simulated run samples those
objects as Go does (p = 1 - exp(-size / 512 KiB), sampled live objects persist
across steps, plus transient objects as GC-timing noise), is analysed by the same
functions as `crdscale analyze` / `crdscale compare`, and counts as covered when
the interval holds the true per-CRD cost. Prints coverage per interval kind: the
total, and the worst and median cause, plus the zap counters (the seed's 448 KiB).
See crdscale/analysis/coverage.py.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from crdscale.analysis.coverage import (  # noqa: E402
    comparison_coverage,
    coverage_table,
    models_from_run,
    ols_coverage,
    per_run_coverage,
    simulate_runs,
)
from crdscale.rundir import read_run  # noqa: E402

RUNS = {"v1.24.0": ROOT / "data" / "reference-run-v1.24.0", "v1.37.1": ROOT / "data" / "reference-run"}


def reference_models():
    """Cause models per reference run (label -> models)."""
    return {label: models_from_run(read_run(path)) for label, path in RUNS.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="simulated runs per version (and run pairs)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--transient", type=float, default=0.001, help="GC-timing noise (see simulate_runs)")
    parser.add_argument("--all-causes", action="store_true", help="print every cause's coverage")
    args = parser.parse_args(argv)
    started = time.monotonic()
    models = reference_models()
    simulated = {
        label: simulate_runs(m, args.runs, seed=args.seed + i, transient_fraction=args.transient)
        for i, (label, m) in enumerate(models.items())
    }
    results = []
    for label, sim in simulated.items():
        results += per_run_coverage(sim, label=label)
    for label, sim in simulated.items():
        results += ols_coverage(sim, label=label)
    results += comparison_coverage(simulated["v1.37.1"], simulated["v1.24.0"])
    table = coverage_table(results)
    print(
        f"{args.runs} simulated runs per version and {args.runs} run pairs (v1.24.0 minus v1.37.1), "
        f"seed {args.seed}, {time.monotonic() - started:.0f} s; empirical coverage of the 95 % intervals:\n"
    )
    print(f"{'interval':38} {'total':>7} {'zap':>7} {'median cause':>13} {'lowest cause':>28}")
    for interval, group in table.groupby("interval", sort=False):
        by = group.set_index("cause")["coverage"]
        causes = group[group["cause"] != "total"]
        worst = causes.loc[causes["coverage"].idxmin()] if len(causes) else None
        zap = by.get("zap-counters")
        print(
            f"{interval:38} {by.get('total', float('nan')):7.3f} "
            f"{'' if zap is None else f'{zap:.3f}':>7} {causes['coverage'].median():13.3f} "
            f"{'' if worst is None else f'{worst.cause} {worst.coverage:.3f}':>28}"
        )
    if args.all_causes:
        print()
        print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
