from __future__ import annotations

import logging

from crdscale.cli.common import add_cluster_arguments
from crdscale.errors import UsageError

log = logging.getLogger(__name__)


class Command:
    """Stop local control-plane instances and delete their state (etcd data, credentials, logs).

    Only the processes an instance recorded are stopped (PIDs checked against
    their start time). With no NAME, stops the only instance, or asks you to pick.

    Given the directory of a cluster experiment ('crdscale run --cluster'),
    deletes its Jobs with their pods, its ConfigMaps and its ServiceAccount
    instead: only objects carrying the experiment's labels (the namespace stays).

    Examples:
      crdscale down                 # the only running instance
      crdscale down k1-37-1-ab12
      crdscale down --all           # every instance, including stale ones
      crdscale down runs/20261124T040000Z-gogc   # a cluster experiment's Job
    """

    @staticmethod
    def add_arguments(parser):
        parser.add_argument(
            "names",
            nargs="*",
            metavar="NAME",
            help="instance name(s), see 'crdscale status', or EXPERIMENT directories",
        )
        parser.add_argument("--all", action="store_true", help="stop every recorded instance")
        add_cluster_arguments(parser, default="with EXPERIMENT, the one it recorded")

    @staticmethod
    def run(args) -> int:
        # lazy: would bring requests, yaml into --help
        from crdscale.cluster.local import list_instances, stop_instance
        from crdscale.rundir.layout import is_experiment_directory
        from crdscale.scenario.ab import is_ab_directory

        experiments = [n for n in args.names if "/" in n or is_experiment_directory(n) or is_ab_directory(n)]
        if experiments:
            # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
            from crdscale.cli.cluster import down, open_cluster_directory
            from crdscale.scenario.clusterjob import is_cluster_experiment

            if len(experiments) != len(args.names) or args.all:
                raise UsageError("name either local instances or experiment directories, not both")
            for path in experiments:
                experiment = open_cluster_directory(path)
                if not is_cluster_experiment(experiment):
                    raise UsageError(f"{path}: ran on this machine; it has no Job to delete")
                down(experiment, args)
            return 0
        instances = list_instances()
        if args.all:
            names = [i.name for i in instances]
        elif args.names:
            names = args.names
        elif len(instances) == 1:
            names = [instances[0].name]
        elif not instances:
            log.info("no local instances")
            return 0
        else:
            raise UsageError("several instances exist; name one or use --all: " + ", ".join(i.name for i in instances))
        for name in names:
            stop_instance(name)
            log.info(f"stopped {name}")
        return 0
