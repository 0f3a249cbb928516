"""Between-run spread against single-run intervals, on a repeated experiment (scenarios/repeatability.toml).

  crdscale run scenarios/repeatability.toml --out runs/
  python benchmarks/repeatability.py runs/<timestamp>-repeatability

For each configuration and cause (heap bytes per served CRD): the repeats' mean, their standard
deviation, a single run's median standard error and 95 % half width, and their ratio (about 1 when
single-run intervals are right); then how often one run's interval holds the mean of the other
runs of its configuration (leave-one-out; the mean has an error of its own, so this should be at
least 95 %). The same table is in the experiment's findings.md (`crdscale report EXPERIMENT`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from crdscale.analysis.compare import (  # noqa: E402
    configurations,  # noqa: E402
    replicate_spread,
    stack_runs,
)
from crdscale.analysis.run import analyze_run  # noqa: E402
from crdscale.rundir import read_run  # noqa: E402
from crdscale.scenario.experiment import Experiment  # noqa: E402

CAUSES = ("total", "zap-counters", "openapi", "watch-cache", "crd-schema", "etcd-client", "crd-handler")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", help="an experiment directory of a scenario with [matrix] repeat")
    args = parser.parse_args(argv)
    cells = Experiment.open(args.experiment).completed_runs()
    fits = {name: analyze_run(read_run(path)).fits for name, path in cells}
    per_crd = stack_runs(fits)
    replicates = configurations(list(fits))
    spread = replicate_spread(per_crd, replicates).query("phase == 'served' and metric == 'bytes'")
    kib = 1024
    print(f"{args.experiment}: {len(cells)} runs; heap KiB per served CRD\n")
    print(f"{'configuration':24} {'cause':18} {'n':>2} {'mean':>8} {'sd':>7} {'one run ±':>10} {'sd/se':>6}")
    for r in spread[spread["cause"].isin(CAUSES)].itertuples(index=False):
        print(
            f"{r.configuration:24} {r.cause:18} {r.repeats:2d} {r.mean / kib:8.1f} {r.between_sd / kib:7.1f} "
            f"{r.within_half_width / kib:10.1f} {r.sd_ratio:6.2f}"
        )
    served = per_crd.query("phase == 'served' and metric == 'bytes'").assign(
        configuration=lambda d: d["run"].map(lambda r: replicates.get(r, r))
    )
    held = []
    for (_config, _cause), group in served.groupby(["configuration", "cause"]):
        if (group["per_crd_high"] - group["per_crd_low"]).max() == 0:
            continue  # a cause no run ever allocated: nothing to hold
        for i, row in group.iterrows():
            others = group.drop(i)["per_crd"].mean()
            held.append(row["per_crd_low"] <= others <= row["per_crd_high"])
    held = pd.Series(held, dtype=bool)
    print(
        f"\none run's 95% interval holds the mean of the other runs of its configuration: "
        f"{held.mean():.3f} ({int(held.sum())} of {len(held)} run x cause)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
