from __future__ import annotations

import logging
import sys

from crdscale.cli.options import positive_float
from crdscale.cluster.versions import DEFAULT_CONTROLLERS
from crdscale.errors import UsageError

log = logging.getLogger(__name__)


class Command:
    """Start a local control plane (etcd, kube-apiserver, kube-controller-manager) and print its kubeconfig path.

    Binaries are found or built from Go modules on first use and cached per
    version under ~/.cache/crdscale (override with CRDSCALE_CACHE); the first
    build of a version (kube-apiserver and kube-controller-manager, one go build)
    takes 8-11 minutes on 2 cores for kube-apiserver and 3-5 more for
    kube-controller-manager. kube-controller-manager runs as in real
    clusters (its garbage collector watches every CRD); --no-controller-manager
    gives the control plane crdscale measured before it.
    The processes keep running after this command returns; stop them with
    'crdscale down NAME' (works even if this command was killed).

    Examples:
      export KUBECONFIG=$(crdscale up)
      crdscale up --kube-version 1.24.0 --name old
      crdscale up --kube-source ~/src/kubernetes --name patched   # your checkout with a patch
      crdscale up --etcd system            # Debian's etcd 3.4: LISTs are served from etcd
      crdscale up --apiserver-flag=--v=2 --env GOGC=50
      crdscale up --no-controller-manager    # etcd + kube-apiserver only
      crdscale up --controllers '*,-podgc,-garbagecollector'   # also without the garbage collector
      crdscale up --node       # plus a node (containerd, kubelet, kube-scheduler): pods run here
    """

    @staticmethod
    def add_arguments(parser):
        parser.add_argument("--kube-version", metavar="X.Y.Z", help="kube-apiserver version (default: pinned v1.37.1)")
        parser.add_argument(
            "--etcd",
            metavar="VERSION|system|PATH",
            help="etcd to run: a version built from Go modules (default v3.6.16), "
            "'system' for the etcd on PATH (Debian's 3.4), or a binary path",
        )
        parser.add_argument(
            "--apiserver-binary", metavar="PATH", help="use this kube-apiserver instead of building one"
        )
        parser.add_argument(
            "--kube-source",
            metavar="DIR",
            help="build kube-apiserver from this Kubernetes source tree (cached per commit + "
            "uncommitted diff; see 'crdscale binaries --help')",
        )
        parser.add_argument("--name", help="instance name (default: derived from the version)")
        parser.add_argument(
            "--apiserver-flag",
            action="append",
            default=[],
            metavar="--FLAG=VALUE",
            help="extra kube-apiserver flag (repeatable)",
        )
        parser.add_argument(
            "--env",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="environment for kube-apiserver, e.g. GOGC=50, GOMEMLIMIT=2GiB (repeatable)",
        )
        parser.add_argument(
            "--no-controller-manager",
            dest="controller_manager",
            action="store_false",
            help="run no kube-controller-manager (etcd + kube-apiserver only, as crdscale did before)",
        )
        parser.add_argument(
            "--controllers",
            default=",".join(DEFAULT_CONTROLLERS),
            metavar="LIST",
            help="kube-controller-manager's --controllers, comma-separated (default '%(default)s': its default "
            "set but the pod garbage collector, which deletes Pods bound to the Nodes no kubelet registers)",
        )
        parser.add_argument(
            "--node",
            action="store_true",
            help="also run a test node on this machine: Debian's containerd and runc, a CNI bridge, a kubelet "
            "and kube-scheduler built like kube-apiserver (needs root; see docs: 'A test node on this machine')",
        )
        parser.add_argument(
            "--timeout",
            type=positive_float,
            default=180.0,
            metavar="SECONDS",
            help="wait this long for /readyz (default 180)",
        )

    @staticmethod
    def run(args) -> int:
        # lazy: would bring requests, yaml into --help
        from crdscale.cluster.local import LocalControlPlane

        env = {}
        for item in args.env:
            key, sep, value = item.partition("=")
            if not sep:
                raise UsageError(f"--env takes KEY=VALUE, got {item!r}")
            env[key] = value
        # lazy: would add a module to --help
        from crdscale.cluster.goenv import check_env

        check_env(env, "--env")
        cp = LocalControlPlane(
            args.kube_version,
            etcd=args.etcd,
            name=args.name,
            apiserver_binary=args.apiserver_binary,
            kube_source=args.kube_source,
            apiserver_flags=args.apiserver_flag,
            apiserver_env=env,
            controller_manager=args.controller_manager,
            controller_manager_controllers=[c.strip() for c in args.controllers.split(",") if c.strip()],
            ready_timeout_s=args.timeout,
            keep_state=True,
            node=args.node,
        ).start()
        log.info(f"instance {cp.name}: stop it with 'crdscale down {cp.name}'")
        print(cp.kubeconfig)
        sys.stdout.flush()
        return 0
