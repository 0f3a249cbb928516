from __future__ import annotations

import logging

from crdscale.errors import UsageError

log = logging.getLogger(__name__)


class Command:
    """Stop local control-plane instances and delete their state (etcd data, credentials, logs).

    Only the processes an instance recorded are stopped (PIDs checked against
    their start time). With no NAME, stops the only instance, or asks you to pick.

    Examples:
      crdscale down                 # the only running instance
      crdscale down k1-37-1-ab12
      crdscale down --all           # every instance, including stale ones
    """

    @staticmethod
    def add_arguments(parser):
        parser.add_argument("names", nargs="*", metavar="NAME", help="instance name(s), see 'crdscale status'")
        parser.add_argument("--all", action="store_true", help="stop every recorded instance")

    @staticmethod
    def run(args) -> int:
        from crdscale.cluster.local import list_instances, stop_instance

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
