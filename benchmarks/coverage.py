"""Empirical coverage and width of crdscale's 95 % intervals, by simulating how heap profiles are made.

  python benchmarks/coverage.py                    # 2,000 runs and run pairs per case (~1 min)
  python benchmarks/coverage.py --runs 300 --seed 7 --all-causes

Object sizes and per-CRD counts come from the committed reference runs
(data/reference-run: kube-apiserver v1.37.1, data/reference-run-v1.24.0). Each
case (2, 3, 4, 10 and uneven steps; a cause that starts late; strong GC noise;
OpenAPI rebuilt at every profile; a true difference of zero; noise beyond the
sampling that persists, as real runs at provider scale have) simulates runs the
way Go samples the heap, analyses each by the estimators of `crdscale analyze`
and `crdscale compare`, and counts how often the intervals hold the true cost.
Prints, per case, the coverage of the totals, OpenAPI and the zap counters over
every interval kind, their median half width against the ideal (1.96 times the
estimates' standard deviation), the lowest and highest cause, and the largest
share of zero-width intervals; then issue 32's goals (crdscale.analysis.coverage.goals):
how many interval kinds and causes miss each, and the one farthest off. The
simulator is crdscale.analysis.coverage.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from crdscale.analysis.coverage import (  # noqa: E402
    MODELS,
    benchmark_table,
    goal_misses,
    goals,
    models_from_run,
    summary,
)
from crdscale.rundir import read_run  # noqa: E402

RUNS = {"v1.24.0": ROOT / "data" / "reference-run-v1.24.0", "v1.37.1": ROOT / "data" / "reference-run"}


def markdown(frame: pd.DataFrame) -> str:
    """A DataFrame as a Markdown table (ratios to 2 decimals, shares to 3)."""

    def cell(value) -> str:
        if isinstance(value, float):
            return "—" if value != value else f"{value:.2f}"
        return str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def results_page(table: pd.DataFrame, args: argparse.Namespace, before: pd.DataFrame | None = None) -> str:
    """The docs' results page: how it was made, the summary per case, the goals, the contrast with OLS, and
    (``before``: the same runs scored with ``--model spread``) what the intervals were before the error model."""
    command = f"python benchmarks/coverage.py --runs {args.runs} --seed {args.seed} --write {args.write}"
    if args.model != "components":
        command += f" --model {args.model}"
    ols = table[table["interval"].str.startswith("OLS")]
    contrast = (
        f"Ordinary least squares through the profiles, for contrast ({ols['case'].iloc[0]}): coverage "
        f"{ols['coverage'].min():.3f}–{ols['coverage'].max():.3f}.\n"
        if len(ols)
        else ""
    )
    return (
        f"<!-- Written by `{command}`; do not edit. -->\n\n"
        "# Interval coverage, simulated\n\n"
        "How often crdscale's 95 % intervals hold the true per-CRD cost, and how wide they are against the ideal "
        "(1.96 times the estimates' standard deviation), over runs simulated the way Go samples the heap "
        "([the error model](../explanation/error-model.md) says how). "
        f"{args.runs:,} simulated runs per version and case, seed {args.seed}, model {args.model}:\n\n"
        f"```\n{command}\n```\n\n"
        f"{markdown(summary(table))}\n\n"
        "Issue 32's goals, over every interval kind and cause: misses of those scored, the clear ones (beyond the "
        "band by more than twice the Monte Carlo standard error at its edge), and the one farthest off:\n\n"
        f"{markdown(goals(table))}\n\n"
        "The intervals that miss the goals, farthest first:\n\n"
        f"{markdown(goal_misses(table))}\n\n{contrast}{_before_section(before)}"
    )


def _before_section(before: pd.DataFrame | None) -> str:
    """The spread model's summary: the intervals crdscale gave before its error model, on the same runs."""
    if before is None:
        return ""
    return (
        "\n## Before the error model\n\n"
        "The same simulated runs, scored with the spread of the increments alone (no known sampling variance, "
        "no floor, no per-profile noise: `--model spread`, what crdscale computed before issue 32):\n\n"
        f"{markdown(summary(before))}\n"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="simulated runs per version and case")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--all-causes", action="store_true", help="also print every interval kind and cause")
    parser.add_argument(
        "--model",
        choices=MODELS,
        default="components",
        help="interval model to score: crdscale's (components) or the spread of the increments alone (before)",
    )
    parser.add_argument("--markdown", action="store_true", help="print the summary as a Markdown table (the docs')")
    parser.add_argument("--csv", type=Path, help="also write every interval kind and cause to this CSV file")
    parser.add_argument(
        "--write",
        type=Path,
        metavar="PAGE",
        help="also write the tables as the docs' results page (docs/results/coverage.md: the README and the "
        "error-model page quote it, and a test ties their numbers to it)",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    models = {label: models_from_run(read_run(path)) for label, path in RUNS.items()}
    table = benchmark_table(models, args.runs, seed=args.seed, model=args.model)
    print(
        f"{args.runs} simulated runs per version and case, seed {args.seed}, model {args.model}, "
        f"{time.monotonic() - started:.0f} s; "
        "coverage of the 95 % intervals over every interval kind, median half width / ideal:\n"
    )
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 60):
        if args.markdown:
            print(markdown(summary(table)))
        else:
            print(summary(table).to_string(index=False, float_format=lambda v: f"{v:.2f}"))
        print("\nIssue 32's goals (every interval kind and cause; misses of those scored, and the worst):\n")
        checked = goals(table)
        if args.markdown:
            print(markdown(checked))
        else:
            print(checked.to_string(index=False))
        ols = table[table["interval"].str.startswith("OLS")]
        if len(ols):
            print(
                f"\nOLS through the profiles, for contrast ({ols['case'].iloc[0]}): coverage "
                f"{ols['coverage'].min():.3f}–{ols['coverage'].max():.3f}"
            )
        if args.csv:
            table.to_csv(args.csv, index=False)
        if args.write:
            # The page also shows the model before, on the same seed (~1 more minute).
            before = (
                None
                if args.model != "components"
                else benchmark_table(models, args.runs, seed=args.seed, model="spread")
            )
            args.write.write_text(results_page(table, args, before))
        if args.all_causes:
            print()
            print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
