"""Recover a run whose runner died: stop its leftovers, export its series, mark it abandoned.

A run killed with kill -9 (or by the OOM killer, or a closed laptop) keeps its
manifest at 'running'; 'crdscale status' shows it as abandoned. Its series are
not lost: a local Prometheus kept its database in RUN_DIR/metrics/prometheus/,
the direct scraper flushed chunks to RUN_DIR/metrics/chunks/. This command
stops the harness processes the run recorded (Prometheus, client programs),
exports the series into RUN_DIR/metrics/series.parquet, copies the control
plane's logs, and sets the status to 'abandoned'. The control plane itself is
an instance named run-<run id>: stop it with 'crdscale down run-<run id>'.

Examples:
  crdscale recover runs/20261122T031500Z-default
  crdscale recover runs/<run> -o json
"""

from __future__ import annotations

import json

from crdscale.cli.common import add_output_argument
from crdscale.errors import UsageError


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser):
        parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory of the abandoned run")
        parser.add_argument(
            "--force",
            action="store_true",
            help="also for a run that is not abandoned (re-export from its Prometheus database)",
        )
        add_output_argument(parser, human="text")

    @staticmethod
    def run(args) -> int:
        # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
        from crdscale.rundir import read_run
        from crdscale.scenario.recover import recover_run

        status = read_run(args.run_dir).status
        if status not in ("abandoned", "running") and not args.force:
            raise UsageError(
                f"{args.run_dir}: status is {status!r}; recover is for runs whose runner died "
                "(status 'abandoned'); use --force to re-export anyway"
            )
        if status == "running" and not args.force:
            raise UsageError(f"{args.run_dir}: its runner is still running")
        done = recover_run(args.run_dir)
        if args.output == "json":
            print(json.dumps(done, indent=2))
        else:
            print(
                f"{done['run']}: {done['status']}; series: {done['series_source'] or 'none found'}"
                + (f" ({done['series_rows']:,} rows)" if done["series_rows"] else "")
            )
        return 0
