"""Run one workload on every Kubernetes release and put the releases side by side: what a CRD and a
custom resource cost from v1.24 to v1.37, by cause, with 95% intervals, and where it changed.

Which releases (--versions, default 1.24..1.37):
  1.24..1.37        every minor of the range at its newest patch release that the Go module proxy
                    serves whole (some patches lack a staging module: passed over, and said why)
  1.30              one minor, at its newest buildable patch
  1.24.0,1.37.1     exact releases (a cached build always passes)
Items combine with commas. A range with no buildable release, a release the proxy does not serve and a
Go toolchain that does not exist (--go 1.18.99) are one line and exit 2, before anything is built.

The workload (WORKLOAD, default: the built-in one, --print-default shows it) stands for a provider:
100 provider-like CRDs installed in 4 steps, each LISTed and watched, then 10 custom resources of
~1 KiB per CRD: heap per CRD and per custom resource by cause, RSS and CPU, from every run. Any scenario
file without a [matrix] can be the workload instead (--set changes its keys, as in run). Each release
runs --repeats times (default 3) and is built with the Go it shipped with (--go release, the
workload's default; --go local: this machine's Go, which shares its build cache).

The history directory (runs/<UTC timestamp>-history/) is an experiment directory: one run directory per
release and repeat, experiment.json with every cell's status. Ctrl-C stops after cleaning up; --resume
DIR continues from the first cell not completed, and a completed cell is never run again. --cluster
runs the cells as one Kubernetes Indexed Job instead (as 'crdscale run --cluster': --image, --results;
then 'crdscale status DIR', 'crdscale down DIR').

'crdscale report DIR' (or --report) writes the history page: per-cause curves of heap per CRD and per
custom resource, peak and settled RSS and CPU per CRD across releases with 95% intervals, and
kube-controller-manager's and etcd's heap and RSS per CRD; the changepoints (consecutive releases whose
difference's interval excludes 0 and exceeds 10% of the older release's value) with the frames that
moved most in that process's profiles and the upstream change they point to, when known; and the
seeds' per-CRD numbers beside the measured ones. 'crdscale lab DIR' opens its notebook, and
'crdscale history --show DIR' prints the same tables (-o json: every number, for scripts).

A release not built yet is built when its first cell starts (8-50 minutes on 2 cores; the cell's time
includes it). One cell of the default workload takes about 6-8 minutes once built.

Examples:
  crdscale history --check                            # the releases it would run, every cell checked
  crdscale history                                    # 14 releases x 3 runs, here
  crdscale history --versions 1.24.0,1.37.1 --repeats 1 --set crds.count=20 --set objects.crd_steps=2
  crdscale history scenarios/reference.toml --versions 1.30..1.37 --go local
  crdscale history --resume runs/20261127T200000Z-history
  crdscale history --cluster --image REF --results s3://bucket/crdscale --parallelism 7
  crdscale report runs/20261127T200000Z-history
  crdscale history --show runs/20261127T200000Z-history -o json
"""

from __future__ import annotations

import argparse
import json
import logging

from crdscale.cli import cluster
from crdscale.cli.common import add_cluster_arguments, add_output_argument, add_set_argument
from crdscale.errors import UsageError
from crdscale.scenario import history
from crdscale.scenario.history import DEFAULT_REPEATS, DEFAULT_VERSIONS, progress_line

log = logging.getLogger(__name__)


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "workload", nargs="?", metavar="WORKLOAD.toml", help="a scenario without [matrix] (default: built-in)"
        )
        parser.add_argument(
            "--versions",
            default=DEFAULT_VERSIONS,
            metavar="SPEC",
            help=f"minors (1.30), ranges of minors (1.24..1.37) and releases (1.24.0), comma-separated "
            f"(default {DEFAULT_VERSIONS})",
        )
        parser.add_argument(
            "--repeats",
            type=int,
            default=DEFAULT_REPEATS,
            metavar="N",
            help=f"runs per release (default {DEFAULT_REPEATS})",
        )
        parser.add_argument(
            "--go",
            metavar="GO",
            help='"release" (each release with the Go it shipped with; the default workload\'s), "local" '
            "(this machine's Go) or a Go version such as 1.18.10",
        )
        add_set_argument(parser)
        parser.add_argument("--out", metavar="DIR", help="parent of the history directory (default: ./runs)")
        parser.add_argument(
            "--check",
            action="store_true",
            help="resolve the releases and check every cell, then exit; nothing is built",
        )
        add_output_argument(parser)
        parser.add_argument("--resume", metavar="HISTORY_DIR", help="continue an interrupted history")
        parser.add_argument(
            "--show",
            metavar="HISTORY_DIR",
            help="print a history's tables (per release, changepoints, seeds) from its completed cells, then exit; "
            "-o json: every number",
        )
        parser.add_argument("--report", action="store_true", help="when every cell completes, write the history page")
        parser.add_argument("--print-default", action="store_true", help="print the default workload and exit")
        add_cluster_arguments(parser, default="with --cluster: $KUBECONFIG, else ~/.kube/config")
        cluster.add_arguments(parser)

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        # lazy: would add 37 modules (cli.run, scenario.config) to --help
        from crdscale.cli.run import _check, _parse_sets, _print_check

        if args.print_default:
            print(history.workload_text(), end="")
            return 0
        if args.show:
            return _show(args)
        if args.output == "json" and not args.check:
            raise UsageError("-o json goes with --check or --show (a history prints its directory)")
        cluster.check_flags(args)
        if args.resume:
            # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
            from crdscale.scenario.clusterjob import is_cluster_experiment

            if args.workload or args.set or args.go or args.versions != history.DEFAULT_VERSIONS:
                raise UsageError("--resume takes the workload and the releases from the history directory")
            experiment = history.open_history(args.resume)
            log.info(f"history {experiment.path.name}: {history.progress_line(experiment)}")
            if is_cluster_experiment(experiment):
                return cluster.resume(args, experiment)
            if args.cluster or cluster.cluster_flags_given(args):
                raise UsageError(
                    f"{args.resume} ran on this machine; --resume continues it here (drop the cluster flags)"
                )
            cells = [(c.cell, c.scenario) for c in experiment.cells if c.status != "completed"]
            reports = _check(experiment.scenario, cells)
            if args.check:
                return _print_check(str(experiment.path), reports, args)
            return _run(experiment, args)
        if args.kubeconfig and not args.cluster:
            raise UsageError("--kubeconfig goes with --cluster: each release runs on a control plane of its own")
        if args.cluster:
            cluster.check_submission(args, resume=False)
        if args.go:
            # lazy: would add 21 modules to --help
            from crdscale.cluster.toolchain import CHOICES, check_toolchain_version

            if args.go not in CHOICES:
                check_toolchain_version(args.go)  # a Go the proxy has no toolchain of: exit 2 now
        plan = history.resolve_versions(args.versions)
        scenario = history.history_scenario(
            args.workload, plan.versions, repeats=args.repeats, go=args.go, overrides=_parse_sets(args.set)
        )
        table = history.history_table(
            plan, spec=args.versions, repeats=args.repeats, go=scenario.target.go or "local", workload=args.workload
        )
        reports = _check(scenario)
        if args.check:
            if args.output == "table":
                print(f"releases ({len(plan.versions)}): {', '.join(plan.versions)}")
                for line in plan.choices:
                    print(f"  {line}")
            return _print_check(args.workload or "default history workload", reports, args)
        for line in plan.choices:
            log.info(f"release {line}")
        if args.cluster:
            return cluster.submit(args, scenario, extra={history.HISTORY_KEY: table})
        # lazy: would add a module to --help
        from crdscale.paths import runs_dir

        return _run(history.create_history(args.out or runs_dir(), scenario, table, check=False), args)


def _show(args) -> int:
    # lazy: would bring pandas, numpy and the report's modules into --help
    from crdscale.report.history import history_json, history_markdown, load_history

    if args.workload or args.set or args.go or args.resume or args.check or args.versions != DEFAULT_VERSIONS:
        raise UsageError("--show reads the history directory alone: drop the workload, --versions, --set, --go")
    shown = load_history(args.show)
    if args.output == "json":
        print(json.dumps(history_json(shown), indent=2, default=str))
    else:
        print(history_markdown(shown), end="")
    return 0


def _run(experiment, args) -> int:
    # lazy: tests patch common.run_with_progress here (a top import would not see it); cli.run: 37 modules more
    from crdscale.cli.common import run_with_progress
    from crdscale.cli.run import _report

    log.info(f"history {experiment.path}: {len(experiment.cells)} cells")
    experiment.run(run_with_progress)
    log.info(f"{progress_line(experiment)}; its page: crdscale report {experiment.path}")
    print(experiment.path)
    return _report(experiment.path) if args.report else 0
