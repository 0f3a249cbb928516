from __future__ import annotations

from crdscale.cli.common import add_cluster_arguments, add_output_argument, print_json
from crdscale.errors import CrdscaleError, UsageError


class Command:
    """List local control-plane instances: name, status, versions, server, kubeconfig.

    Status 'stale' means the instance was recorded as running but its processes
    are gone (e.g. the machine rebooted); 'crdscale down NAME' cleans it up.

    Also lists the runs under ./runs (or $CRDSCALE_RUNS) that have not ended:
    'running', or 'abandoned' when their runner died (kill -9, OOM) —
    'crdscale recover RUN_DIR' exports what they collected.

    -o json prints {"instances": [{name, status, server, kubeconfig, versions,
    created_at, processes_alive}, ...], "runs": [{path, status, reason}, ...]},
    newest first (empty lists when none).

    Given EXPERIMENT (the directory of 'crdscale run --cluster'), shows each index
    of its Jobs instead: pending (and why: not scheduled, pulling the image),
    running (with the last step its log shows), succeeded, or failed with the
    pod's last log lines; -o json: {"experiment", "namespace", "indexes": [...]}.
    """

    @staticmethod
    def add_arguments(parser):
        parser.add_argument(
            "experiment",
            nargs="?",
            metavar="EXPERIMENT",
            help="a cluster experiment directory ('run --cluster', 'ab --cluster')",
        )
        add_cluster_arguments(parser, default="with EXPERIMENT, the one it recorded")
        parser.add_argument(
            "--kubeconfig-only", action="store_true", help="print only the newest ready instance's kubeconfig path"
        )
        add_output_argument(parser)

    @staticmethod
    def run(args) -> int:
        if args.experiment:
            return _experiment_status(args)
        # lazy: would bring requests, yaml into --help
        from crdscale.cluster.local import list_instances

        instances = list_instances()
        if args.kubeconfig_only:
            ready = [i for i in instances if i.status == "ready"]
            if ready:
                print(ready[0].kubeconfig)
                return 0

            raise CrdscaleError("no ready local instance (start one with 'crdscale up')")
        unfinished = _unfinished_runs()
        if args.output == "json":
            print_json(
                {
                    "instances": instances,
                    "runs": [{"path": r.path, "status": r.status, "reason": r.manifest.reason} for r in unfinished],
                }
            )
            return 0
        if not instances:
            print("no local instances (start one with 'crdscale up')")
            _print_runs(unfinished)
            return 0
        rows = [("NAME", "STATUS", "KUBE-APISERVER", "ETCD", "SERVER", "CREATED (UTC)", "KUBECONFIG")]
        for i in instances:
            rows.append(
                (
                    i.name,
                    i.status,
                    i.versions.get("kube-apiserver", "?"),
                    i.versions.get("etcd", "?"),
                    i.server,
                    i.created_at,
                    i.kubeconfig,
                )
            )
        widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        for r in rows:
            print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
        _print_runs(unfinished)
        return 0


def _experiment_status(args) -> int:
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.cli.cluster import open_cluster_directory, print_status
    from crdscale.scenario.clusterjob import is_cluster_experiment

    experiment = open_cluster_directory(args.experiment)
    if not is_cluster_experiment(experiment):
        raise UsageError(f"{args.experiment} ran on this machine; its cells are in its experiment.json")
    return print_status(experiment, args)


def _unfinished_runs() -> list:
    """Runs under the runs directory whose manifest says running (alive or abandoned)."""
    # lazy: would add 11 modules to --help
    from crdscale.paths import runs_dir
    from crdscale.rundir import layout, read_run

    parent = runs_dir()
    found = []
    for path in sorted(parent.iterdir()) if parent.is_dir() else []:
        if not layout.is_run_directory(path):
            continue
        try:
            run = read_run(path)
        except UsageError:
            continue
        if run.status in ("running", "abandoned"):
            found.append(run)
    return found


def _print_runs(runs) -> None:
    for run in runs:
        hint = f"  (recover with: crdscale recover {run.path})" if run.status == "abandoned" else ""
        print(f"run {run.path}: {run.status}{hint}")
