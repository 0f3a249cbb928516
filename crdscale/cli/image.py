from __future__ import annotations

import logging
import os
from pathlib import Path

from crdscale import __version__
from crdscale.errors import UsageError


class Command:
    """Build crdscale's OCI image (crdscale, its locked Python environment, the Go binaries).

    The image is what each pod of `crdscale run --cluster` runs: this checkout of
    crdscale in a venv of requirements.lock on a minimal Debian (debootstrap, no
    container registry), with kube-apiserver and kube-controller-manager of each
    --kube-version, etcd, crdscale-client and the kubectl versions asked, from
    crdscale's cache (built first when missing). No Docker daemon: crdscale writes
    the OCI layout itself, reproducibly (same inputs, same digest; mtimes are
    $SOURCE_DATE_EPOCH or 0). Layers are cached: a rebuild after changing only
    crdscale redoes only crdscale's layer. Needs root (debootstrap, chroot).

    The digest printed is the image's identity; pass it to the cluster
    (`--image REF@DIGEST`) and each run records it in its manifest.

    --load imports the archive into a containerd (the kubelet's k8s.io namespace),
    by tag and by digest (NAME@sha256:..., so `--image REF@DIGEST` finds it);
    --push REF uploads it to a registry over the distribution API, with
    credentials from $CRDSCALE_REGISTRY_USERNAME/_PASSWORD, $REGISTRY_AUTH_FILE
    or ~/.docker/config.json (never from the command line).

    'crdscale image load FILE...' imports archives into the test node of a local
    instance ('crdscale up --node'; its containerd is its own, so no registry is
    needed): pods then use the image by its name or by its digest (REF@DIGEST).

    Examples:
      crdscale image build                               # default kube-apiserver, ./crdscale-image.tar
      crdscale image load crdscale-image.tar             # into the node of 'crdscale up --node'
      crdscale image load --instance k1-37-1-ab12 a.tar b.tar
      crdscale image build --kube-version 1.37.1 --kube-version 1.24.0 --load
      crdscale image build --push ghcr.io/me/crdscale:0.1.0
    """

    @staticmethod
    def add_arguments(parser):
        parser.add_argument(
            "action", choices=["build", "load"], help="build: write the image; load: import archives into a test node"
        )
        parser.add_argument("archives", nargs="*", metavar="FILE", help="load: OCI image archives (tar)")
        parser.add_argument(
            "--instance", metavar="NAME", help="load: the instance whose node gets them (default: the only one)"
        )
        parser.add_argument(
            "--kube-version",
            metavar="X.Y.Z",
            action="append",
            help="kube-apiserver/kube-controller-manager version(s) to include (repeatable; default: the pinned one)",
        )
        parser.add_argument(
            "--kubectl-version", metavar="X.Y.Z", action="append", default=[], help="kubectl version(s) to include"
        )
        parser.add_argument("--etcd", metavar="VERSION", help="etcd version (default: the pinned one)")
        parser.add_argument("--no-client", dest="client", action="store_false", help="leave crdscale-client out")
        parser.add_argument(
            "--extra",
            action="append",
            metavar="NAME",
            help="crdscale extras to install (repeatable; default: s3)",
        )
        parser.add_argument("--out", metavar="FILE", default="crdscale-image.tar", help="the OCI archive to write")
        parser.add_argument("--tag", metavar="REF", help="the image's name in the archive (default: crdscale:VERSION)")
        parser.add_argument(
            "--load",
            action="store_true",
            help="import the image into containerd (ctr images import), by tag and by digest",
        )
        parser.add_argument(
            "--containerd-address",
            metavar="SOCK",
            default="/run/containerd/containerd.sock",
            help="containerd's socket for --load",
        )
        parser.add_argument("--push", metavar="REF", help="push to this registry reference (distribution API)")

    @staticmethod
    def run(args) -> int:
        if args.action == "load":
            return _load_into_node(args.archives, args.instance)
        if args.archives or args.instance:
            raise UsageError("FILE and --instance go with 'image load'")
        # lazy: would bring pandas, numpy, pyarrow into --help
        from crdscale.cluster.versions import DEFAULT_KUBE_VERSION, normalize_version
        from crdscale.image import build, oci

        if args.containerd_address != "/run/containerd/containerd.sock" and not args.load:
            raise UsageError("--containerd-address goes with --load")
        ref = args.push or args.tag or f"crdscale:{__version__}"
        oci.split_ref(ref)
        if args.load and not os.path.exists(args.containerd_address):
            raise UsageError(f"--load: no containerd socket at {args.containerd_address} (--containerd-address)")
        kube = tuple(dict.fromkeys(normalize_version(v) for v in (args.kube_version or [DEFAULT_KUBE_VERSION])))
        kubectl = tuple(dict.fromkeys(normalize_version(v) for v in args.kubectl_version))
        spec = build.ImageSpec(
            kube_versions=kube,
            kubectl_versions=kubectl,
            etcd_version=args.etcd,
            client=args.client,
            extras=tuple(args.extra or build.DEFAULT_EXTRAS),
            ref=ref,
        )
        build.requirements(build.checkout_root(), spec.extras)  # an unknown extra fails now
        built = build.build_image(spec, Path(args.out))
        if args.load:
            # lazy: would add 35 modules to --help
            from crdscale.image.containerd import import_archive

            import_archive(built.path, address=args.containerd_address)
        if args.push:
            # lazy: would bring requests into --help
            from crdscale.image.push import push_archive

            push_archive(built.path, args.push)
        print(f"image    {built.ref}")
        print(f"digest   {built.digest}")
        print(f"content  {built.content}")
        print(f"archive  {built.path} ({built.path.stat().st_size / 2**20:.0f} MiB, {built.seconds:.0f} s)")
        if args.load:
            print(f"loaded   into {args.containerd_address} (namespace k8s.io)")
        if args.push:
            print(f"pushed   {oci.normalize_ref(args.push)}@{built.digest}")
        return 0


def _load_into_node(archives: list[str], instance: str | None) -> int:
    """Import ``archives`` into the containerd of a local instance's test node."""

    # lazy: would bring requests, yaml into --help
    from crdscale.cluster import node
    from crdscale.cluster.local import LocalControlPlane, list_instances

    if not archives:
        raise UsageError("image load: which archives? (FILE...)")
    missing = [a for a in archives if not Path(a).is_file()]
    if missing:
        raise UsageError(f"no image archive at {missing[0]}")
    if instance is None:
        with_node = [i.name for i in list_instances() if i.status == "ready" and i.has_node]
        if len(with_node) != 1:
            raise UsageError(
                "no running instance has a node; start one with 'crdscale up --node'"
                if not with_node
                else "several instances have a node; pick one with --instance: " + ", ".join(with_node)
            )
        instance = with_node[0]
    state = LocalControlPlane.attach(instance).state
    for archive in archives:
        logging.getLogger(__name__).info(node.import_image(state, Path(archive)))
    return 0
