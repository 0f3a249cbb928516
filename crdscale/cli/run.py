from __future__ import annotations

import argparse
import logging
import os
import tempfile
from pathlib import Path

from crdscale.cli import cluster
from crdscale.cli.common import (
    add_cluster_arguments,
    add_output_argument,
    add_set_argument,
    add_yes_argument,
    confirm_cluster_write,
    print_json,
    resolve_kubeconfig,
    run_with_progress,
)
from crdscale.errors import UsageError
from crdscale.scenario.config import default_text, load_scenario, parse_override

log = logging.getLogger(__name__)


class Command:
    """Run a scenario end to end: install CRDs step by step, profile and record metrics at every step.

    With no SCENARIO, runs the built-in default: a local kube-apiserver v1.37.1
    (etcd v3.6.16), 500 generated CRDs (50 groups, 100 properties) in 5 steps of
    100, each served with a LIST and a watch, 15 s settle, a heap profile
    (gc=1) at the start and after every step; RSS, CPU and fds from /proc every
    1 s, kube-apiserver's /metrics every 20 s (longer when a scrape outlasts it,
    or while scrapes would cost the server more than 5 % of its own CPU).
    Print the default with --print-default, copy it and edit what you need.

    Everything lands in runs/<UTC timestamp>-<name>/: manifest.json (scenario,
    versions, machine, status), events.jsonl, profiles/*.pb.gz (open with
    'crdscale top' or 'go tool pprof'), metrics/series.parquet, logs/.
    Ctrl-C stops cleanly (status 'interrupted'; data kept, processes stopped).

    A scenario with a [matrix] table is an experiment: its cells (the cross
    product of the axes, e.g. "target.env.GOGC" = ["100", "50"]) run one after
    another, each an ordinary run directory inside runs/<UTC timestamp>-<name>/
    next to experiment.json, with an ETA over the whole matrix. After Ctrl-C,
    'crdscale run --resume EXPERIMENT_DIR' skips the completed cells and redoes
    the interrupted one; 'crdscale report EXPERIMENT_DIR' compares the cells.
    --set on a matrix axis runs that one value instead of the axis's list (the
    log says so); a matrix left without axes is one ordinary run.

    Before anything starts, every cell is checked: the kube-apiserver and etcd
    versions crdscale can build (a cached binary always passes; otherwise the Go
    module proxy is asked, answers cached), binaries and source trees the scenario
    names, crds.source, the kubeconfig and its context, Prometheus credential
    files, probe names. A mistake is one line (exit 2 bad scenario, 3 binary, 5
    CRDs) before a run directory exists or a build starts. --check does only
    that and prints what it checked per cell (-o json for scripts).

    Any cluster: --kubeconfig FILE (or FILE:FILE:..., merged as kubectl merges
    $KUBECONFIG; exec plugins such as aws or gke-gcloud-auth-plugin are run again
    when their token expires or is refused) and an existing Prometheus with
    --prometheus-url. Its credentials come from files or the environment, never
    from an argument ps would show: --prometheus-bearer-token-file (or
    $CRDSCALE_PROMETHEUS_TOKEN), --prometheus-username with
    --prometheus-password-file (or $CRDSCALE_PROMETHEUS_PASSWORD); its certificate
    is verified with --prometheus-ca-file, or not at all with
    --prometheus-insecure-skip-tls-verify. The manifest records file names only.
    Scenario keys: target.prometheus_bearer_token_file, prometheus_username,
    prometheus_password_file, prometheus_ca_file, prometheus_insecure_skip_tls_verify.

    A matrix on your cluster: --cluster submits the cells as one Kubernetes
    Indexed Job (index = cell x repeat; --kubeconfig/--context name the cluster,
    never a local instance) running --image, each pod a cell on its own control
    plane, Guaranteed QoS sized from the footprint prediction (--memory, --cpus),
    one pod per node with --one-per-node, retried per index; each cell's run
    directory goes to --results (s3://BUCKET/PREFIX, pvc://CLAIM, file:///PATH).
    It follows the Job (Ctrl-C stops following; the Job goes on); then
    'crdscale status EXPERIMENT', 'crdscale run --resume EXPERIMENT' (a new Job
    over the cells not succeeded), 'crdscale down EXPERIMENT', 'crdscale report
    EXPERIMENT' (gathers the cells first). --print-manifests shows the objects
    and the Role the submitting user needs, creating nothing.

    Examples:
      crdscale run
      crdscale run my-scenario.toml --out /data/runs
      crdscale run --check scenarios/gogc.toml       # check every cell, run nothing
      crdscale run --kubeconfig ~/.kube/config --prometheus-url http://127.0.0.1:9090
      KUBECONFIG=~/.kube/config:~/.kube/eks.yaml crdscale run --kubeconfig "$KUBECONFIG" --context eks
      crdscale run --kubeconfig eks.yaml --prometheus-url https://prom.example --prometheus-bearer-token-file prom.token
      CRDSCALE_PROMETHEUS_PASSWORD=... crdscale run --kubeconfig kind.yaml --prometheus-url https://127.0.0.1:9090 --prometheus-ca-file ca.crt --prometheus-username crdscale
      crdscale run --set steps.count=3 --set crds.count=60 --set crds.groups=6
      crdscale run scenarios/gogc.toml                # a [matrix] experiment
      crdscale run --resume runs/20261123T091500Z-gogc
      crdscale run scenarios/gogc.toml --cluster --image registry.example/crdscale:0.1.0 --results s3://bucket/crdscale --parallelism 4
      crdscale run scenarios/gogc.toml --cluster --image REF --results pvc://results --print-manifests
    """

    @staticmethod
    def add_arguments(parser):
        parser.add_argument("scenario", nargs="?", metavar="SCENARIO.toml", help="scenario file (default: built-in)")
        parser.add_argument("--out", metavar="DIR", help="parent directory for the run directory (default: ./runs)")
        add_cluster_arguments(
            parser,
            default="a local control plane the run starts; with it, the run uses that cluster and never "
            "touches objects it did not create",
        )
        add_yes_argument(parser)
        prom = parser.add_argument_group("an existing Prometheus (credentials from files, never on the command line)")
        prom.add_argument("--prometheus-url", metavar="URL", help="an existing Prometheus scraping the target")
        prom.add_argument(
            "--prometheus-bearer-token-file",
            metavar="PATH",
            help="send the bearer token in this file (default: $CRDSCALE_PROMETHEUS_TOKEN if set)",
        )
        prom.add_argument("--prometheus-username", metavar="USER", help="basic auth as USER")
        prom.add_argument(
            "--prometheus-password-file",
            metavar="PATH",
            help="basic-auth password from this file (default: $CRDSCALE_PROMETHEUS_PASSWORD)",
        )
        prom.add_argument(
            "--prometheus-ca-file", metavar="PATH", help="verify Prometheus' certificate with this CA bundle"
        )
        prom.add_argument(
            "--prometheus-insecure-skip-tls-verify",
            action="store_true",
            help="do not verify Prometheus' certificate (explicit only)",
        )
        add_set_argument(parser)
        parser.add_argument(
            "--check",
            action="store_true",
            help="check the scenario (every cell of a matrix) and exit: versions crdscale can build, binaries, "
            "files, kubeconfig and context; nothing is built or started (a run does the same checks first)",
        )
        add_output_argument(parser)
        parser.add_argument("--print-default", action="store_true", help="print the default scenario and exit")
        parser.add_argument(
            "--report",
            action="store_true",
            help="when the run (or every cell of a matrix) completes, write its report as 'crdscale report' "
            "does: findings.md and HTML under <run>/report/ (a matrix: the comparison of its cells)",
        )
        parser.add_argument(
            "--resume",
            metavar="EXPERIMENT_DIR",
            help="finish an interrupted experiment: skip completed cells, redo the interrupted one "
            "(a cluster experiment: a new Job over the cells not succeeded)",
        )

        cluster.add_arguments(parser)

    @staticmethod
    def run(args) -> int:
        if args.print_default:
            print(default_text(), end="")
            return 0

        if args.output == "json" and not args.check:
            raise UsageError("-o json goes with --check (a run prints its run directory)")
        cluster.check_flags(args)
        if args.resume:
            # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
            from crdscale.scenario.clusterjob import is_cluster_experiment
            from crdscale.scenario.experiment import Experiment

            if args.scenario or args.set:
                raise UsageError("--resume takes the scenario from the experiment directory; drop SCENARIO and --set")
            experiment = Experiment.open(args.resume)
            if is_cluster_experiment(experiment):
                return cluster.resume(args, experiment)
            if args.cluster or cluster.cluster_flags_given(args):
                flag = "--cluster" if args.cluster else cluster.cluster_flags_given(args)[0]
                raise UsageError(f"{args.resume} ran on this machine; --resume reruns it here (drop {flag})")
            cells = [(c.cell, c.scenario) for c in experiment.cells if c.status != "completed"]
            reports = _check(experiment.scenario, cells)
            if args.check:
                return _print_check(str(experiment.path), reports, args)
            return _run_experiment(experiment, args)
        if args.cluster:
            cluster.check_submission(args, resume=False)
        overrides = _parse_sets(args.set)
        if args.kubeconfig and not args.cluster:
            overrides.update({"target.kind": "kubeconfig", "target.kubeconfig": args.kubeconfig})
        if args.context:
            overrides["target.context"] = args.context
        if args.prometheus_url:
            overrides["target.prometheus_url"] = args.prometheus_url
        for flag in PROMETHEUS_FLAGS:
            value = getattr(args, flag)
            if value:
                # Absolute: relative paths in a scenario file are taken from the file's directory instead.
                is_file = flag.endswith("_file")
                overrides[f"target.{flag}"] = os.path.abspath(os.path.expanduser(value)) if is_file else value
        scenario = load_scenario(args.scenario, overrides=overrides)
        for axis, values in scenario.replaced_axes.items():
            log.info(
                f"--set {axis}={scenario.overrides[axis]!r} replaces the matrix axis {axis} = {values!r}"
                + ("" if scenario.matrix else ": one run, not an experiment")
            )
        if args.context and scenario.is_local:
            raise UsageError("--context names a context of --kubeconfig; this run starts its own control plane")
        # Before a run directory exists or a binary is resolved: a bad cell fails in seconds, not after a build.
        reports = _check(scenario)
        if args.out and not args.cluster:
            _check_out(args.out)
        if args.check and args.cluster and not args.print_manifests:
            # The cells are checked above; then what the submission would check, up to the server's dry run.
            # lazy: would bring requests, yaml into --help
            from crdscale.scenario.check import CellReport

            reports.append(CellReport("cluster", checks=cluster.submit(args, scenario, check=True)))
        if args.check:
            return _print_check(scenario.source_path or "default scenario", reports, args)
        if args.cluster:
            return cluster.submit(args, scenario)
        if not scenario.is_local:
            kubeconfig = resolve_kubeconfig(scenario.target.kubeconfig)
            confirm_cluster_write(kubeconfig, scenario.target.context, yes=args.yes, what="run")
        if scenario.matrix:
            # lazy: would bring pandas, numpy, pyarrow into --help
            from crdscale.paths import runs_dir
            from crdscale.scenario.experiment import Experiment

            return _run_experiment(Experiment.create(args.out or runs_dir(), scenario), args)
        run = run_with_progress(scenario, args.out)
        log.info(f"completed; explore with: crdscale analyze {run}")
        print(run)
        return _report(run) if args.report else 0


# --prometheus-* flags that set the scenario key of the same name (target.prometheus_*).
PROMETHEUS_FLAGS = (
    "prometheus_bearer_token_file",
    "prometheus_username",
    "prometheus_password_file",
    "prometheus_ca_file",
    "prometheus_insecure_skip_tls_verify",
)


def _check(scenario, cells=None):
    """:func:`~crdscale.scenario.check.check_cells`, its warnings on stderr."""
    # lazy: would add 17 modules to --help
    from crdscale.scenario.check import check_cells

    reports = check_cells(scenario, cells)
    for report in reports:
        for warning in report.warnings:
            log.warning(f"cell {report.cell}: {warning}" if scenario.matrix else warning)
    return reports


def _check_out(out: str) -> None:
    """``--out``: a run directory can be made there (tried with a temporary folder, removed at once),
    so ``/proc/nope`` fails the check, not the run once it has started."""
    existing = Path(out).expanduser().absolute()
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"--out {out}: {existing} is not a directory")
    try:
        tempfile.TemporaryDirectory(dir=existing, prefix=".crdscale-check-").cleanup()
    except OSError as err:
        raise UsageError(f"--out {out}: cannot make a run directory in {existing}: {err.strerror or err}") from None


def _print_check(what: str, reports, args) -> int:
    if args.output == "json":
        print_json(
            {
                "scenario": what,
                "ok": True,
                "cells": [
                    {"cell": r.cell, "checks": [{"what": w, "result": h} for w, h in r.checks], "warnings": r.warnings}
                    for r in reports
                ],
            }
        )
        return 0
    warnings = sum(len(r.warnings) for r in reports)
    found = f"{warnings} warning{'s' if warnings != 1 else ''}" if warnings else "nothing wrong found"
    cells = sum(r.cell != "cluster" for r in reports)  # run --check --cluster adds the cluster's checks
    print(f"{what}: {cells} cell{'s' if cells != 1 else ''} checked, {found}")
    for report in reports:
        print(f"cell {report.cell}:")
        width = max((len(w) for w, _h in report.checks), default=0)
        for what_, how in report.checks:
            print(f"  {what_:<{width}}  {how}")
        for warning in report.warnings:
            print(f"  warning: {warning}")
    return 0


def _run_experiment(experiment, args) -> int:
    log.info(f"experiment {experiment.path}: {len(experiment.cells)} cells")
    experiment.run(run_with_progress)
    log.info(f"completed; compare the cells with: crdscale report {experiment.path}")
    print(experiment.path)
    return _report(experiment.path) if getattr(args, "report", False) else 0


def _report(path) -> int:
    """``crdscale report PATH`` with its defaults: one report pipeline, whoever asks."""

    # lazy: would add 4 modules to --help
    from crdscale.cli import report

    parser = argparse.ArgumentParser(prog="crdscale report")
    report.Command.add_arguments(parser)
    return report.Command.run(parser.parse_args([str(path)]))


def _parse_sets(items: list[str]) -> dict:
    """``--set KEY=VALUE`` items as overrides, each value typed by its key (see
    :func:`~crdscale.scenario.config.parse_override`)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set takes SECTION.KEY=VALUE (or KEY=VALUE for name, description), got {item!r}")
        out[key.strip()] = parse_override(key.strip(), value)
    return out
