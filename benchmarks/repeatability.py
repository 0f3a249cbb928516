"""Between-run spread against single-run intervals, on a repeated experiment (scenarios/repeatability.toml).

  crdscale run scenarios/repeatability.toml --out runs/
  python benchmarks/repeatability.py runs/<timestamp>-repeatability [more experiments] [--write docs/results/repeatability.md]

For each configuration and cause (heap bytes per served CRD): the repeats' mean, their standard
deviation, a single run's median standard error and 95 % half width, and their ratio (about 1 when
single-run intervals are right); then how often one run's interval holds the mean of the other
runs of its configuration (leave-one-out; the mean has an error of its own, so this should be at
least 95 %). The same table is in the experiment's findings.md (`crdscale report EXPERIMENT`).
"""

from __future__ import annotations

import argparse
import json
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


KIB = 1024


def measure(experiment: str) -> tuple[pd.DataFrame, pd.Series]:
    """An experiment's between-run spread per configuration and cause (heap bytes per served CRD), and, per
    run and cause, whether the run's 95 % interval held the mean of the other runs of its configuration."""
    cells = Experiment.open(experiment).completed_runs()
    fits = {name: analyze_run(read_run(path)).fits for name, path in cells}
    per_crd = stack_runs(fits)
    replicates = configurations(list(fits))
    spread = replicate_spread(per_crd, replicates).query("phase == 'served' and metric == 'bytes'")
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
    return spread[spread["cause"].isin(CAUSES)], pd.Series(held, dtype=bool)


def held_line(held: pd.Series) -> str:
    return (
        "one run's 95 % interval holds the mean of the other runs of its configuration: "
        f"{held.mean():.3f} ({int(held.sum())} of {len(held)} run × cause)"
    )


def page_section(experiment: str, spread: pd.DataFrame, held: pd.Series) -> str:
    """One experiment's table for the docs' results page."""
    runs = int(spread["repeats"].max()) if len(spread) else 0
    configurations_run = spread["configuration"].nunique()
    about = json.loads((Path(experiment) / "experiment.json").read_text())
    scenario = Path(about.get("scenario_file") or "").name
    lines = [
        f"## {about.get('name', Path(experiment).name)}\n",
        f"`{Path(experiment).name}`: {scenario}, started {about.get('started_at', '?')}, "
        f"{configurations_run} configuration{'s' if configurations_run > 1 else ''} of {runs} runs; heap KiB per "
        "served CRD.\n",
        "| configuration | cause | runs | mean | sd | one run ± | sd/se |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in spread.itertuples(index=False):
        lines.append(
            f"| {r.configuration} | {r.cause} | {r.repeats} | {r.mean / KIB:,.1f} | {r.between_sd / KIB:,.1f} | "
            f"{r.within_half_width / KIB:,.1f} | {'—' if r.sd_ratio != r.sd_ratio else f'{r.sd_ratio:.2f}'} |"
        )
    return "\n".join(lines) + f"\n\n{held_line(held).capitalize()}.\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "experiments", nargs="+", metavar="experiment", help="experiment directories of scenarios with [matrix] repeat"
    )
    parser.add_argument(
        "--write",
        type=Path,
        metavar="PAGE",
        help="also write the tables as the docs' results page (docs/results/repeatability.md: the error-model page "
        "quotes it, and a test ties its numbers to it)",
    )
    args = parser.parse_args(argv)
    sections = []
    for experiment in args.experiments:
        spread, held = measure(experiment)
        print(f"{experiment}: heap KiB per served CRD\n")
        print(f"{'configuration':24} {'cause':18} {'n':>2} {'mean':>8} {'sd':>7} {'one run ±':>10} {'sd/se':>6}")
        for r in spread.itertuples(index=False):
            print(
                f"{r.configuration:24} {r.cause:18} {r.repeats:2d} {r.mean / KIB:8.1f} {r.between_sd / KIB:7.1f} "
                f"{r.within_half_width / KIB:10.1f} {r.sd_ratio:6.2f}"
            )
        print(f"\n{held_line(held)}\n")
        sections.append(page_section(experiment, spread, held))
    if args.write:
        command = (
            "python benchmarks/repeatability.py "
            + " ".join(f"runs/{Path(e).name}" for e in args.experiments)
            + f" --write {args.write}"
        )
        args.write.write_text(
            f"<!-- Written by `{command}`; do not edit. -->\n\n"
            "# Repeatability on real runs\n\n"
            "Repeated runs of one configuration against the intervals a single run gives "
            "([the error model](../explanation/error-model.md) says how they are made). `sd` is the spread of the "
            "runs' estimates, `one run ±` a single run's median 95 % half width, `sd/se` the spread over the "
            "standard error one run claims: about 1 when single-run intervals are right (with five repeats a "
            "standard deviation is itself uncertain by about ±35 %). Each experiment was run with "
            "`crdscale run SCENARIO` and scored with:\n\n"
            f"```\n{command}\n```\n\n" + "\n".join(sections)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
