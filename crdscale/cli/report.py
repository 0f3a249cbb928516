"""Execute the notebooks on a run and write an HTML report plus findings.md.

Examples:
  crdscale report runs/20261122T031500Z-default
  crdscale report data/reference-run --out /tmp/report
  crdscale report runs/<run> --timeout 1200

Runs the memory and heap-attribution notebooks (and the discovery, LIST and
APF notebooks when the run has their probe tables) against RUN_DIR in a
fresh Jupyter kernel, then writes into OUT (default RUN_DIR/report/):

  report-nocode.html   summary, figures and explanations, no code: attach this
  report.html          the same with the notebooks' code
  findings.md          key numbers with provenance (versions, CRD set and its
                       sha256, scenario, machine) and the figures as PNG and SVG
                       next to it: paste into a GitHub issue or KEP
  notebooks/*.ipynb    the executed notebooks (open them in JupyterLab)

Given an A/B directory ('crdscale ab'), runs the A/B notebook on it instead:
the verdict first, then the per-cause differences, the pairs' spread, the
frames that changed and the interactive differential flame graph, in
AB_DIR/report/.

Given an experiment directory (a [matrix] scenario's, see 'crdscale run'),
compares its completed cells instead, as 'crdscale compare CELL_RUNS...
--out EXPERIMENT_DIR/report' does. A cluster experiment ('run --cluster')
first gathers the cells' run directories from its results store into the
experiment directory (--results URL reads them elsewhere, e.g. where a
pvc:// claim is mounted: file:///mnt/claim).

A run that did not complete (failed, interrupted, abandoned) and profiles the
fits leave out are stated, with why, on stderr, on the report's first screen
and at the top of findings.md. The run's files are checked before any
notebook starts: an unreadable series or a renamed profile is one line.

A notebook that fails is named with its failing cell (file:line) on stderr;
its output up to that cell stays in the report and the exit code is 1. The
path of the HTML report is printed last on stdout.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from crdscale.cli.common import add_notebook_arguments
from crdscale.errors import UsageError
from crdscale.outputs import check_out_directory

log = logging.getLogger(__name__)


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "run_dir",
            metavar="RUN_DIR",
            help="run directory written by `crdscale run`, an experiment directory or an A/B directory",
        )
        parser.add_argument("--out", metavar="DIR", help="output directory (default: RUN_DIR/report)")
        parser.add_argument(
            "--results", metavar="URL", help="cluster experiment: gather from this store instead of the recorded one"
        )
        parser.add_argument(
            "--force", action="store_true", help="replace a non-empty --out directory (its files are removed)"
        )
        add_notebook_arguments(parser)

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
        from crdscale.report.render import render_report
        from crdscale.rundir.layout import REPORT, is_experiment_directory
        from crdscale.scenario.experiment import Experiment

        if args.out:  # never onto the run read, into another run, or over a report without --force
            check_out_directory(args.out, inputs=[args.run_dir], force=args.force, allow=[Path(args.run_dir) / REPORT])

        # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
        from crdscale.scenario.ab import is_ab_directory

        if is_ab_directory(args.run_dir):
            # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
            from crdscale.report.ab import render_ab_report
            from crdscale.scenario.ab import AB
            from crdscale.scenario.clusterjob import is_cluster_experiment

            ab = AB.open(args.run_dir)
            if is_cluster_experiment(ab):  # 'ab --cluster': its runs are in the results store
                gathered = ab.gather(args.results)
                log.info(f"gathered {len(gathered)} of {len(ab.runs)} runs from the results store")
            result = render_ab_report(args.run_dir, args.out, notebooks_dir=args.notebooks, timeout=args.timeout)
        elif is_experiment_directory(args.run_dir):
            # lazy: would bring pandas, numpy, pyarrow into --help
            from crdscale.report.compare import render_comparison

            experiment = Experiment.open(args.run_dir)
            # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
            from crdscale.scenario.clusterjob import gather, is_cluster_experiment

            if is_cluster_experiment(experiment):
                gathered = gather(experiment, args.results)
                log.info(f"gathered {len(gathered)} of {len(experiment.cells)} cells from the results store")
            # lazy: would add 16 modules to --help
            from crdscale.scenario.history import is_history

            cells = experiment.completed_runs()
            if is_history(experiment):  # a history (crdscale history): the releases side by side
                # lazy: would bring pandas, numpy, pyarrow into --help
                from crdscale.report.history import render_history

                result = render_history(experiment.path, args.out, notebooks_dir=args.notebooks, timeout=args.timeout)
            elif len(cells) < 2:
                raise UsageError(
                    f"{args.run_dir}: {len(cells)} completed cells; a comparison needs two "
                    f"(finish it with: crdscale run --resume {args.run_dir})"
                )
            else:
                result = render_comparison(
                    [p for _n, p in cells],
                    args.out or experiment.path / "report",
                    labels=[n for n, _p in cells],
                    notebooks_dir=args.notebooks,
                    timeout=args.timeout,
                )
        else:
            result = render_report(args.run_dir, args.out, notebooks_dir=args.notebooks, timeout=args.timeout)
        print(f"findings: {result.findings_md}")
        print(f"with code: {result.html}")
        for failure in result.failures:
            log.info(f"notebook failed at {failure.describe()}")
        print(result.html_nocode)
        return 0 if result.ok else 1
