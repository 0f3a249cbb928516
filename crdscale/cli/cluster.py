"""`crdscale run --cluster`, `--resume` of a cluster experiment, and the cluster side of
`status`, `down` and `report` (not a subcommand: the glue those commands share).

The work is in :mod:`crdscale.scenario.clusterjob` (cluster I/O) and
:mod:`crdscale.scenario.fanout` (the manifests); this module checks flags,
prints, and turns Ctrl-C while following into "the Job goes on".
"""

from __future__ import annotations

import argparse
import copy
import logging
import re
import sys
from urllib.parse import urlsplit

from crdscale.cli.common import print_json, resolve_kubeconfig
from crdscale.cli.options import finite_float
from crdscale.errors import CrdscaleError, UsageError

log = logging.getLogger(__name__)

# Flags that only mean something with --cluster (dest -> how it is spelled).
CLUSTER_ONLY = {
    "namespace": "--namespace",
    "image": "--image",
    "results": "--results",
    "results_secret": "--results-secret",
    "print_manifests": "--print-manifests",
    "one_per_node": "--one-per-node",
    "detach": "--detach",
}
DEFAULT_NAMESPACE = "crdscale"
DEFAULT_CPUS = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "a matrix as a Kubernetes Indexed Job on your cluster (one pod per cell; see docs: A matrix on a cluster)"
    )
    group.add_argument(
        "--cluster",
        action="store_true",
        help="submit the cells as one Indexed Job to the cluster of --kubeconfig/--context instead of running them here",
    )
    group.add_argument("--namespace", help=f"namespace of the Job (default {DEFAULT_NAMESPACE}; created when missing)")
    group.add_argument("--image", metavar="REF", help="crdscale image the pods run (see 'crdscale image build')")
    group.add_argument(
        "--parallelism",
        type=int,
        metavar="N",
        help="cells running at once (default 1; a resume keeps the last value)",
    )
    group.add_argument(
        "--cpus",
        type=finite_float,  # the range is check_cpus's (at least 0.5), said in its own words
        metavar="N",
        help=f"CPUs per pod, requested = limit (default {DEFAULT_CPUS}; whole CPUs are exclusive under the static CPU "
        f"manager, a fraction such as 0.5 is a CFS quota that slows the cell's time-based numbers)",
    )
    group.add_argument(
        "--memory",
        metavar="SIZE",
        help="memory per pod, requested = limit (default: the largest cell's predicted peak + 25 %%), e.g. 8GiB",
    )
    group.add_argument(
        "--results",
        metavar="URL",
        help="where each cell's run directory goes: s3://BUCKET/PREFIX (credentials from the usual "
        "environment/files), pvc://CLAIM (mounted in the pods) or file:///PATH (a path in the pods)",
    )
    group.add_argument(
        "--results-secret",
        metavar="NAME",
        help="a Secret in the Job's namespace whose keys become the pods' environment: the S3 store's "
        "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL_S3, AWS_REGION for an "
        "S3-compatible server); referenced by name, never copied into the manifests",
    )
    group.add_argument(
        "--print-manifests",
        action="store_true",
        help="print the manifests (and the Role the submitting user needs) as YAML and exit",
    )
    group.add_argument("--one-per-node", action="store_true", help="at most one cell per node (pod anti-affinity)")
    group.add_argument("--detach", action="store_true", help="submit and exit without following the Job")


def cluster_flags_given(args: argparse.Namespace) -> list[str]:
    """The cluster-only flags on the command line, as spelled."""
    given = [flag for dest, flag in CLUSTER_ONLY.items() if getattr(args, dest, None)]
    return given + [
        f
        for d, f in (("parallelism", "--parallelism"), ("cpus", "--cpus"), ("memory", "--memory"))
        if getattr(args, d) is not None
    ]


def open_cluster_directory(path: str):
    """The experiment (``run --cluster``) or the A/B (``ab --cluster``) a directory holds, for ``status``
    and ``down``: both record their Jobs in the same ``cluster`` table."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.scenario.ab import AB, is_ab_directory
    from crdscale.scenario.experiment import Experiment

    return AB.open(path) if is_ab_directory(path) else Experiment.open(path)


def check_flags(args: argparse.Namespace) -> None:
    """One-line UsageError for cluster flags without --cluster, before anything else (a --resume
    takes them when its experiment turns out to be a cluster one)."""
    given = cluster_flags_given(args)
    if given and not args.cluster and not args.resume:
        raise UsageError(f"{given[0]} goes with --cluster")


# An image reference as the OCI distribution grammar has it (github.com/distribution/reference): an optional
# registry host[:port], lower-case path components, an optional :tag and @digest.
_IMAGE = re.compile(
    r"(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[0-9a-fA-F]{32,})?"
)


def check_image(ref: str) -> None:
    """``--image``: an image reference a pod spec can name (``has space`` is refused here, not by the kubelet)."""
    if not _IMAGE.fullmatch(ref):
        raise UsageError(
            f"--image {ref!r}: not an image reference (e.g. registry.example/crdscale:1.2 or crdscale@sha256:...)"
        )


def check_results_url(url: str, scheme: str) -> None:
    """``--results``: the store's address has what the pods need (a bucket, a claim, a path)."""
    parts = urlsplit(url)
    if scheme == "s3":
        # lazy: would add ~80 modules (urllib3, ssl) to --help
        from crdscale.results.s3 import S3Location

        S3Location.parse(url)
    elif scheme == "file" and not parts.path.strip("/"):
        raise UsageError(f"--results {url}: a file store names a directory, file:///PATH")
    elif scheme not in ("s3", "file") and not parts.netloc:
        raise UsageError(f"--results {url}: names no {'claim' if scheme == 'pvc' else 'store'} ({scheme}://NAME)")


def check_submission(args: argparse.Namespace, *, resume: bool) -> None:
    # lazy: would bring yaml (scenario.fanout) into --help
    from crdscale.results.store import scheme_of
    from crdscale.scenario.fanout import check_namespace

    if not resume and not args.image:
        raise UsageError("--cluster needs --image REF: the crdscale image the pods run ('crdscale image build')")
    if not resume and not args.results:
        raise UsageError(
            "--cluster needs --results URL (s3://BUCKET/PREFIX, pvc://CLAIM or file:///PATH): "
            "a pod's run directory is gone when the pod is"
        )
    if args.image:
        check_image(args.image)
    if args.results:
        check_results_url(args.results, scheme_of(args.results))
    if args.namespace:
        check_namespace(args.namespace)
    if args.results_secret:
        # lazy: would bring yaml (scenario.fanout) into --help
        from crdscale.scenario.fanout import check_secret_name

        check_secret_name(args.results_secret)
    if args.parallelism is not None and args.parallelism < 1:
        raise UsageError(f"--parallelism {args.parallelism}: at least 1")
    if args.cpus is not None:
        # lazy: would bring yaml (scenario.fanout) into --help
        from crdscale.scenario.fanout import check_cpus

        check_cpus(args.cpus)
    if args.memory is not None:
        _memory(args)


def _memory(args: argparse.Namespace) -> int | None:
    """--memory in bytes (None when not given); UsageError for a size that is not one."""
    # lazy: would add a module to --help
    from crdscale.units import parse_bytes

    if args.memory is None:
        return None
    try:
        value = parse_bytes(args.memory)
    except ValueError as err:
        raise UsageError(f"--memory: {err}") from None
    if value < 256 * 2**20:
        raise UsageError(f"--memory {args.memory}: at least 256MiB (a control plane and crdscale run in the pod)")
    return int(value)


def _resources(args: argparse.Namespace, peaks: dict[str, float], cpus: int):
    """The pods' resources: the prediction (:func:`fanout.pod_resources`), or --memory as given."""
    # lazy: would bring yaml (scenario.fanout) into --help
    from crdscale.scenario import fanout

    resources = fanout.pod_resources([p.value for p in peaks.values()], cpus)
    memory = _memory(args)
    return resources if memory is None else fanout.Resources(memory, resources.cpus)


def _peak_line(peaks) -> str:
    top = max(peaks.values(), key=lambda p: p.value)
    return (
        f"largest predicted peak {top.value / 2**30:.2f} GiB, 95 % interval up to {top.high / 2**30:.2f} GiB; "
        f"--memory sets it"
    )


def _plan(experiment_id, run_id, manifest, cells, resources, args, *, attempt=0, table=None):
    # lazy: would bring yaml (scenario.fanout) into --help
    from crdscale.scenario.fanout import JobPlan

    table = table or {}
    return JobPlan(
        experiment_id=experiment_id,
        run_id=run_id,
        namespace=args.namespace or table.get("namespace") or DEFAULT_NAMESPACE,
        image=args.image or table["image"],
        cells=cells,
        experiment=manifest,
        results=args.results or table["results"],
        resources=resources,
        parallelism=args.parallelism or table.get("parallelism") or 1,
        attempt=attempt,
        one_per_node=bool(args.one_per_node or table.get("one_per_node")),
        results_secret=args.results_secret or table.get("results_secret"),
    )


def _cluster_table(plan, args, cluster, peaks) -> dict:
    return {
        "experiment_id": plan.experiment_id,
        # Absolute: status and down may run from another directory.
        "kubeconfig": cluster.kubeconfig.child_env()["KUBECONFIG"] if cluster is not None else args.kubeconfig,
        "context": args.context,
        "server": cluster.server if cluster is not None else None,
        "namespace": plan.namespace,
        "image": plan.image,
        "results": plan.results,
        "results_secret": plan.results_secret,
        "parallelism": plan.parallelism,
        "one_per_node": plan.one_per_node,
        "cpus": plan.resources.cpus,
        # What the pods' memory was sized from (clusterjob.predict_peak_bytes), per cell.
        "predicted_peak_bytes": {cell: {"value": int(p.value), "high": int(p.high)} for cell, p in peaks.items()},
        "jobs": [],
    }


def _user_kubeconfig(explicit: str | None):
    """--kubeconfig, else $KUBECONFIG, else ~/.kube/config: the user's cluster. Unlike other commands,
    never a local instance of 'crdscale up' found by itself: it may have no node to run pods on."""
    return resolve_kubeconfig(
        explicit, local_instance=False, missing="--cluster: which cluster? pass --kubeconfig (or set $KUBECONFIG)"
    )


def print_manifests(plan, command: str = "run") -> None:
    # lazy: would bring yaml (scenario.fanout) into --help
    from crdscale.scenario import fanout

    plan = copy.copy(plan)
    plan.create_namespace = True
    print(
        f"# crdscale {command} --cluster: what it creates (the Namespace only when missing). The pods need no RBAC:\n"
        "# each starts its own etcd + kube-apiserver inside the pod (no service account token is mounted)."
    )
    print(fanout.to_yaml(fanout.manifests(plan)), end="")
    print(
        "---\n# The Role the *submitting user* needs in the namespace (not created by crdscale;\n"
        "# creating a missing namespace also needs 'create namespaces' cluster-wide)."
    )
    print(fanout.to_yaml([fanout.submitter_role(plan)]), end="")


def submit(args: argparse.Namespace, scenario, extra: dict | None = None, *, check: bool = False):
    """`crdscale run SCENARIO --cluster ...` once the flags (:func:`check_submission`) and the
    scenario's cells are checked: predict resources, dry-run, create, follow. ``extra``: more tables of
    ``experiment.json`` (a history's ``history``). ``check`` (``run --check --cluster``): everything up
    to the server's dry run, nothing created; returns what was checked as ``(what, result)`` lines."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.cluster.clients import connect
    from crdscale.ownership import new_run_id
    from crdscale.paths import runs_dir
    from crdscale.scenario import clusterjob, fanout
    from crdscale.scenario.experiment import Experiment, new_manifest
    from crdscale.scenario.matrix import expand

    if not scenario.matrix:
        raise UsageError("--cluster runs the cells of a [matrix] scenario; this one has no [matrix] table")
    cells = expand(scenario)  # checked already (run's _check), as for a local run
    clusterjob.check_cells_for_pods(cells)
    run_id = new_run_id()
    experiment_id = fanout.experiment_id(scenario.name, run_id)
    peaks = clusterjob.cell_peaks(cells)
    resources = _resources(args, peaks, args.cpus or DEFAULT_CPUS)
    manifest = {**new_manifest(scenario), **(extra or {})}
    plan = _plan(experiment_id, run_id, manifest, [c.name for c, _s in cells], resources, args)
    if args.print_manifests:
        manifest[clusterjob.CLUSTER_KEY] = _cluster_table(plan, args, None, peaks)
        print_manifests(plan)
        return 0
    cluster = connect(_user_kubeconfig(args.kubeconfig), args.context)
    try:
        cluster.server_version()
        manifest[clusterjob.CLUSTER_KEY] = _cluster_table(plan, args, cluster, peaks)
        plan.create_namespace = not clusterjob.namespace_exists(cluster, plan.namespace)
        if plan.results_secret:
            clusterjob.check_secret(cluster, plan.namespace, plan.results_secret)
        if not plan.create_namespace:
            # The server validates every object (admission, quota, RBAC) before anything exists.
            clusterjob.create(cluster, plan, dry_run=True)
        if check:
            return [
                ("cluster", f"{cluster.server} answers ({cluster.server_version()})"),
                (
                    "namespace",
                    f"{plan.namespace}: "
                    + ("does not exist yet: it would be created" if plan.create_namespace else "exists"),
                ),
                (
                    "job",
                    f"{len(plan.cells)} cells, parallelism {plan.parallelism}, each pod {resources.cpus:g} CPUs and "
                    f"{resources.memory_bytes / 2**30:.2f} GiB ({_peak_line(peaks)}); "
                    + ("objects not dry-run (no namespace yet)" if plan.create_namespace else "server dry run passed"),
                ),
            ]
        experiment = Experiment.create(args.out or runs_dir(), scenario, check=False)
        experiment.manifest[clusterjob.CLUSTER_KEY] = manifest[clusterjob.CLUSTER_KEY]
        experiment.manifest.update(extra or {})
        experiment.save()
        plan.experiment = dict(experiment.manifest)
        _create(cluster, experiment, plan)
        log.info(
            f"experiment {experiment.path}: job {plan.namespace}/{plan.job_name}, {len(plan.cells)} cells, "
            f"parallelism {plan.parallelism}, each pod {resources.cpus:g} CPUs and "
            f"{resources.memory_bytes / 2**30:.2f} GiB (requests = limits; {_peak_line(peaks)})"
        )
        return _follow_or_detach(cluster, experiment, args)
    finally:
        cluster.close()


def resume(args: argparse.Namespace, experiment) -> int:
    """`crdscale run --resume EXPERIMENT` of a cluster experiment: a new Job over the cells not succeeded."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.ownership import new_run_id
    from crdscale.scenario import clusterjob

    check_submission(args, resume=True)
    table = experiment.manifest[clusterjob.CLUSTER_KEY]
    if args.namespace and args.namespace != table["namespace"]:
        raise UsageError(f"--namespace: experiment {experiment.path.name} runs in {table['namespace']}")
    cluster = clusterjob.connect_experiment(experiment, args.kubeconfig, args.context)
    try:
        active = clusterjob.active_jobs(cluster, experiment)
        if active:
            raise UsageError(
                f"job {active[0]} of this experiment is still running; wait for it (crdscale status "
                f"{experiment.path}) or stop it (crdscale down {experiment.path})"
            )
        states = clusterjob.index_states(cluster, experiment)
        missing = clusterjob.missing_cells(experiment, states)
        if not missing:
            log.info(f"experiment {experiment.path.name}: every cell succeeded; nothing to resume")
            print(experiment.path)
            return 0
        peaks = clusterjob.cell_peaks([(c.cell, c.scenario) for c in experiment.cells if c.cell.name in missing])
        resources = _resources(args, peaks, args.cpus or table.get("cpus") or DEFAULT_CPUS)
        plan = _plan(
            table["experiment_id"],
            new_run_id(),
            dict(experiment.manifest),
            missing,
            resources,
            args,
            attempt=len(table.get("jobs", [])),
            table=table,
        )
        if args.print_manifests:
            print_manifests(plan)
            return 0
        table.update(
            image=plan.image, results=plan.results, results_secret=plan.results_secret, parallelism=plan.parallelism
        )
        if plan.results_secret:
            clusterjob.check_secret(cluster, plan.namespace, plan.results_secret)
        clusterjob.create(cluster, plan, dry_run=True)
        _create(cluster, experiment, plan)
        log.info(f"experiment {experiment.path.name}: job {plan.job_name} reruns {len(missing)} cells")
        return _follow_or_detach(cluster, experiment, args)
    finally:
        cluster.close()


def _create(cluster, experiment, plan) -> None:
    """Create the plan's objects and record the Job; when one is refused, delete this submission's others."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.scenario import clusterjob

    try:
        clusterjob.create(cluster, plan)
    except CrdscaleError:
        clusterjob.delete_submission(cluster, plan)
        raise
    clusterjob.record_job(experiment, plan)


def follow_job(cluster, experiment, args, when_done: str):
    """Follow a submitted Job (an experiment's or an A/B's) to its end and return its index states; None, with
    the directory printed and how to go on logged, when ``--detach`` asked not to follow or Ctrl-C stopped
    following (the Job goes on). ``when_done``: what takes the results once the Job is done ("when done: ...")."""
    from crdscale.scenario import clusterjob  # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help

    hint = (
        f"follow it with: crdscale status {experiment.path}; stop it with: crdscale down {experiment.path}; {when_done}"
    )
    if args.detach:
        log.info(f"submitted; {hint}")
        print(experiment.path)
        return None
    try:
        return clusterjob.follow(cluster, experiment)
    except KeyboardInterrupt:
        log.info(f"stopped following; the Job goes on. {hint}")
        print(experiment.path)
        return None


def _follow_or_detach(cluster, experiment, args) -> int:
    from crdscale.scenario import clusterjob  # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help

    states = follow_job(cluster, experiment, args, f"when done: crdscale report {experiment.path}")
    if states is None:
        return 0
    cells = clusterjob.cell_states(states)
    failed = [c for c, st in cells.items() if st.state != clusterjob.SUCCEEDED]
    print(experiment.path)
    if failed:
        raise CrdscaleError(
            f"{len(failed)} of {len(cells)} cells failed ({', '.join(failed[:3])}{', ...' if len(failed) > 3 else ''}); "
            f"their last log lines: crdscale status {experiment.path}; rerun them: crdscale run --resume {experiment.path}"
        )
    log.info(f"every cell succeeded; gather and compare them with: crdscale report {experiment.path}")
    return 0


def print_status(experiment, args) -> int:
    """`crdscale status EXPERIMENT`: every index of every Job, failed ones with their last log lines."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.scenario import clusterjob

    table = experiment.manifest[clusterjob.CLUSTER_KEY]
    cluster = clusterjob.connect_experiment(experiment, args.kubeconfig, args.context)
    try:
        states = clusterjob.index_states(cluster, experiment, logs=True)
    finally:
        cluster.close()
    if args.output == "json":
        print_json({"experiment": str(experiment.path), "namespace": table["namespace"], "indexes": states})
        return 0
    print(f"experiment {experiment.path} on {table.get('server')} namespace {table['namespace']}")
    print(clusterjob.summary_line(states, int(table.get("parallelism", 1))))
    rows = [("JOB", "INDEX", "CELL", "STATE", "DETAIL")]
    rows += [(s.job, str(s.index), s.cell, s.state, s.detail) for s in states]
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r[:4], widths)) + "  " + r[4])
    for s in states:
        if s.state == clusterjob.FAILED and s.log_tail:
            print(f"{s.job} index {s.index} ({s.cell}), last lines of pod {s.pod}:")
            for line in s.log_tail:
                print(f"  {line}")
    sys.stdout.flush()
    return 0


def down(experiment, args) -> None:
    """`crdscale down EXPERIMENT`: delete its Jobs, pods, ConfigMaps and ServiceAccount (by its labels)."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.scenario import clusterjob

    cluster = clusterjob.connect_experiment(
        experiment, getattr(args, "kubeconfig", None), getattr(args, "context", None)
    )
    try:
        counts = clusterjob.delete_experiment(cluster, experiment)
    finally:
        cluster.close()
    deleted = ", ".join(f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in counts.items()) or "nothing left"
    table = experiment.manifest[clusterjob.CLUSTER_KEY]
    log.info(f"experiment {experiment.path.name}: deleted {deleted} in namespace {table['namespace']}")
