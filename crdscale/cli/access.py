"""What each command reads, what it writes and where, and the RBAC it needs on a cluster: declared here,
once, and rendered into the docs (``reference/access.md``, :func:`crdscale.docs_reference.render_access`).

A test keeps a row for every command ``crdscale --help`` lists. ``asks`` marks the commands that ask
before writing to a cluster which is not a crdscale local instance (``--yes`` goes ahead:
:func:`crdscale.cli.common.confirm_cluster_write`).
"""

from __future__ import annotations

from dataclasses import dataclass

# The cluster a command uses without --kubeconfig (crdscale.cli.common.resolve_kubeconfig).
FALLBACK = "the one local instance that is up, else `$KUBECONFIG`, else `~/.kube/config`"
LOCAL_ONLY = "none: no cluster"
CRD_WRITE = "`customresourcedefinitions`: create, get, list, watch, update (with `--existing update`)"


@dataclass(frozen=True)
class Access:
    """One command: ``reads`` and ``writes`` (files and clusters, and where), ``rbac`` on the cluster it
    talks to, ``asks`` whether it asks before writing to a cluster that is not a crdscale local instance."""

    command: str
    reads: str
    writes: str
    rbac: str
    asks: bool = False


ACCESS = (
    Access(
        "up",
        "binaries in `~/.cache/crdscale` (built with Go when missing)",
        "a local instance under `~/.cache/crdscale/instances/NAME/` (etcd data, credentials, logs); processes on 127.0.0.1",
        LOCAL_ONLY,
    ),
    Access("down", "`~/.cache/crdscale/instances/`", "stops local instances and deletes their directories", LOCAL_ONLY),
    Access("status", "`~/.cache/crdscale/instances/`; an experiment directory", "nothing", LOCAL_ONLY),
    Access(
        "binaries",
        "`~/.cache/crdscale`; the Go module proxy when a version must be built",
        "binaries into `~/.cache/crdscale`",
        LOCAL_ONLY,
    ),
    Access(
        "image",
        "this checkout, `requirements.lock`, binaries in `~/.cache/crdscale`",
        "an OCI archive (`--out`); with `--load` a containerd, with `--push` a registry",
        "none (a registry's own credentials for `--push`)",
    ),
    Access("generate", "nothing (a seed)", "CRD YAML files into `--out`", LOCAL_ONLY),
    Access(
        "install",
        f"CRD files; the cluster: {FALLBACK}",
        "CRDs on that cluster (labelled as crdscale's); a run directory under `./runs/` (or `--out`)",
        CRD_WRITE + "; with `--serve`: list, watch on each new resource",
        asks=True,
    ),
    Access(
        "clean",
        f"the cluster: {FALLBACK}",
        "deletes the objects carrying crdscale's ownership labels on that cluster, nothing else",
        "get, list, delete on `customresourcedefinitions`, `namespaces` and the kinds crdscale created",
    ),
    Access(
        "run",
        "a scenario file (or the built-in one); CRD files; binaries in `~/.cache/crdscale`",
        "a run directory under `./runs/` (or `--out`); by default a local control plane it starts and stops; "
        "with `--kubeconfig` CRDs and probe objects on that cluster; with `--cluster` a Job and its objects there",
        "none locally; with `--kubeconfig`: "
        + CRD_WRITE
        + ", list/watch on the resources served, `nonResourceURLs` `/metrics` and `/debug/pprof/*`: get; "
        "with `--cluster`: `--print-manifests` prints the Role the submitting user needs",
        asks=True,
    ),
    Access("top", "a heap or CPU profile (`.pb.gz`)", "nothing (a table on stdout)", LOCAL_ONLY),
    Access("analyze", "a run directory", "`RUN_DIR/analysis/` (its tables; not with `--no-write`)", LOCAL_ONLY),
    Access(
        "report",
        "a run directory; `notebooks/`",
        "`RUN_DIR/report/` (or `--out`): HTML, findings.md/json, figures, executed notebooks",
        LOCAL_ONLY,
    ),
    Access(
        "ab",
        "a scenario; a change (`--patch` diffs, build tags, feature gates, flags); Go module sources",
        "an A/B directory under `./runs/` (or `--out`): each pair's runs, verdict.md/json, flame.html; binaries built "
        "with the change into `~/.cache/crdscale`; local control planes it starts and stops",
        LOCAL_ONLY,
    ),
    Access(
        "history",
        "a workload scenario (or the built-in one); the Go module proxy (which releases can be built, cached a day); "
        "binaries in `~/.cache/crdscale`",
        "a history directory under `./runs/` (or `--out`): one run directory per release and repeat; each release's "
        "binaries (built with its own Go) into `~/.cache/crdscale`; local control planes it starts and stops; with "
        "`--cluster` a Job and its objects on that cluster",
        "none locally; with `--cluster`: `--print-manifests` prints the Role the submitting user needs",
    ),
    Access("compare", "two or more run directories", "nothing unless `--out` names a report directory", LOCAL_ONLY),
    Access(
        "footprint",
        "CRD files, or with `--kubeconfig`/`--context` the CRDs a cluster has installed",
        "nothing (a prediction on stdout)",
        "with `--kubeconfig`: `customresourcedefinitions`: list (read-only)",
    ),
    Access(
        "footprint fit",
        "run and experiment directories",
        "see each subcommand",
        LOCAL_ONLY,
    ),
    Access(
        "footprint fit model",
        "sweep run directories",
        "a footprint model file (`--out`, default the shipped model of the runs' version in `crdscale/footprint_models/`)",
        LOCAL_ONLY,
    ),
    Access(
        "footprint fit validate", "run directories; a model (`--model`)", "nothing (predictions on stdout)", LOCAL_ONLY
    ),
    Access("footprint fit peak", "run directories", "the peak RSS excess into the model of their version", LOCAL_ONLY),
    Access("footprint fit record", "a model file", "that model's `provenance.uses`", LOCAL_ONLY),
    Access(
        "footprint fit cel",
        "a run directory; its CRD files, if named",
        "heap per CEL rule into the model of its version",
        LOCAL_ONLY,
    ),
    Access(
        "footprint fit descriptions",
        "run directories of generated cells",
        "heap per byte of description text into the model of their version",
        LOCAL_ONLY,
    ),
    Access(
        "footprint fit error-model",
        "run directories",
        "nothing (each run predicted from the others, on stdout)",
        LOCAL_ONLY,
    ),
    Access(
        "footprint fit states",
        "run directories",
        "the state terms (installed, watched, openapi-v2) into the models",
        LOCAL_ONLY,
    ),
    Access(
        "footprint fit objects",
        "object run directories",
        "with `--write`: the per-object term into the models",
        LOCAL_ONLY,
    ),
    Access(
        "lab",
        "run directories; `notebooks/`",
        "`RUN_DIR/notebooks/*.ipynb` (never overwritten); JupyterLab settings; a server on 127.0.0.1 until Ctrl-C",
        LOCAL_ONLY,
    ),
    Access(
        "probe",
        f"the cluster: {FALLBACK}",
        "objects on that cluster (CRDs, namespaces, custom resources, Secrets, ConfigMaps; labelled, deleted "
        "afterwards); a run directory under `./runs/` (or `--runs-dir`)",
        "see each probe",
        asks=True,
    ),
    Access(
        "probe discovery",
        f"the cluster: {FALLBACK}",
        "with `--sweep`: CRDs in many groups, deleted afterwards; a run directory",
        "discovery (`/api`, `/apis`): get; with `--sweep`: " + CRD_WRITE + ", delete",
        asks=True,
    ),
    Access(
        "probe list",
        f"the cluster: {FALLBACK}",
        "a namespace with custom resources, Secrets, ConfigMaps and Pods, deleted afterwards; a run directory",
        CRD_WRITE + "; create, list, delete on `namespaces`, `secrets`, `configmaps`, `pods` and the probe's resource",
        asks=True,
    ),
    Access(
        "probe apf",
        f"the cluster: {FALLBACK}",
        "objects to LIST (as probe list), deleted afterwards; a run directory",
        "as probe list; `flowcontrol.apiserver.k8s.io` and `/metrics`: get",
        asks=True,
    ),
    Access(
        "probe clientmem",
        f"the cluster: {FALLBACK}",
        "CRDs and custom resources for the informers, deleted afterwards; a run directory",
        CRD_WRITE + "; create, list, watch, delete on the probe's resources",
        asks=True,
    ),
    Access(
        "recover",
        "a run directory and its recorded processes",
        "the run directory (series exported, status abandoned); stops the run's leftover processes",
        LOCAL_ONLY,
    ),
    Access(
        "cell",
        "a cell spec (in a pod of `run --cluster`)",
        "a run directory, uploaded to the results store (S3 or a directory)",
        "inside its pod: none beyond the local control plane it starts",
    ),
)
