from __future__ import annotations

from crdscale.cli.common import add_output_argument, print_json
from crdscale.cluster.local import list_instances


class Command:
    """List local control-plane instances: name, status, versions, server, kubeconfig.

    Status 'stale' means the instance was recorded as running but its processes
    are gone (e.g. the machine rebooted); 'crdscale down NAME' cleans it up.

    -o json prints {"instances": [{name, status, server, kubeconfig, versions,
    created_at, processes_alive}, ...]}, newest first (an empty list when none).
    """

    @staticmethod
    def add_arguments(parser):
        parser.add_argument("--kubeconfig-only", action="store_true", help="print only the newest ready instance's kubeconfig path")
        add_output_argument(parser)

    @staticmethod
    def run(args) -> int:
        instances = list_instances()
        if args.kubeconfig_only:
            ready = [i for i in instances if i.status == "ready"]
            if ready:
                print(ready[0].kubeconfig)
                return 0
            return 1
        if args.output == "json":
            print_json({"instances": instances})
            return 0
        if not instances:
            print("no local instances (start one with 'crdscale up')")
            return 0
        rows = [("NAME", "STATUS", "KUBE-APISERVER", "ETCD", "SERVER", "CREATED (UTC)", "KUBECONFIG")]
        for i in instances:
            rows.append((i.name, i.status, i.versions.get("kube-apiserver", "?"), i.versions.get("etcd", "?"),
                         i.server, i.created_at, i.kubeconfig))
        widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        for r in rows:
            print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
        return 0
