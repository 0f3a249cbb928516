from __future__ import annotations

from crdscale.cluster.gobuild import stderr_echo
from crdscale.errors import UsageError


class Command:
    """Import OCI image archives into the test node of a local instance ('crdscale up --node').

    The node's containerd is its own (socket under the instance directory), so
    images reach it without a registry: 'ctr images import' into the k8s.io
    namespace the kubelet uses. Pods then use the image by its name with
    imagePullPolicy: Never (or IfNotPresent and a tag other than latest).

    Examples:
      crdscale images load crdscale.oci.tar
      crdscale images load --instance k1-37-1-ab12 a.tar b.tar
    """

    @staticmethod
    def add_arguments(parser):
        parser.add_argument("action", choices=["load"], help="load: import archives into the node's containerd")
        parser.add_argument("archives", nargs="+", metavar="FILE", help="OCI image layout (or docker-archive) tar")
        parser.add_argument("--instance", metavar="NAME", help="instance whose node gets them (default: the only one)")

    @staticmethod
    def run(args) -> int:
        from pathlib import Path

        from crdscale.cluster import node
        from crdscale.cluster.local import LocalControlPlane, list_instances

        missing = [a for a in args.archives if not Path(a).is_file()]
        if missing:
            raise UsageError(f"no image archive at {missing[0]}")
        if args.instance:
            name = args.instance
        else:
            with_node = [i.name for i in list_instances() if i.status == "ready" and i.has_node]
            if len(with_node) != 1:
                raise UsageError(
                    "no running instance has a node; start one with 'crdscale up --node'"
                    if not with_node
                    else "several instances have a node; pick one with --instance: " + ", ".join(with_node)
                )
            name = with_node[0]
        state = LocalControlPlane.attach(name).state
        for archive in args.archives:
            stderr_echo(node.import_image(state, Path(archive)))
        return 0
