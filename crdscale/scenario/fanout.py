"""A matrix as one Kubernetes Indexed Job: the manifests, from an experiment, with no I/O.

Each completion index of the Job is one cell (× repeat) of the experiment.
A pod runs ``crdscale cell`` with the experiment's own ``experiment.json``
(scenario, ``--set`` overrides, matrix) shipped in a ConfigMap, so it runs
exactly the cell ``crdscale run`` would run locally: it starts its own etcd,
kube-apiserver and kube-controller-manager as plain processes inside the pod
and needs **no RBAC on the cluster** (its service account token is not even
mounted). The ConfigMap's ``indexes.json`` maps index -> cell name: a first
Job lists every cell, a ``--resume`` Job only the cells still missing, so
``completions`` counts just those. (The Job API cannot skip indexes of a
Job, and an index's meaning must not change under a running Job: a new Job
with its own list is the one way to rerun a subset.)

Resources are one pair for the whole Job (the pod template is shared): the
largest cell's predicted peak plus margin, requests equal to limits, so the
pod is Guaranteed QoS; whole CPUs by default, which the static CPU manager
makes exclusive (a fraction such as 0.5 is a CFS quota: the cell is throttled,
and its time-based numbers with it). Labels: :mod:`crdscale.ownership`'s
on every object plus :data:`EXPERIMENT_LABEL`, which ``crdscale down``
selects on.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from crdscale.errors import UsageError
from crdscale.ownership import MANAGED_BY_LABEL, MANAGED_BY_VALUE, ownership_labels
from crdscale.results.store import PVC_MOUNT, PVC_SCHEME

EXPERIMENT_LABEL = "crdscale.io/experiment"
CONTAINER = "cell"
SPEC_MOUNT = "/etc/crdscale/experiment"  # the ConfigMap: experiment.json, indexes.json
RUNS_MOUNT = "/var/lib/crdscale/runs"  # an emptyDir: the cell's run directory until it is stored
EXPERIMENT_KEY = "experiment.json"
INDEXES_KEY = "indexes.json"
# Retries of one index before it counts as failed (the others go on: backoffLimitPerIndex).
DEFAULT_RETRIES = 2
# Exit codes no retry can change: a bad scenario (2) or a binary the image lacks (3), see crdscale.errors.
FAIL_INDEX_EXIT_CODES = (2, 3)
# A cell stops its processes on SIGTERM and records its status; give it time before SIGKILL.
TERMINATION_GRACE_SECONDS = 60
MEMORY_ROUNDING = 256 * 2**20
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def check_namespace(name: str) -> str:
    """``name`` if it is a valid namespace name (an RFC 1123 label), else UsageError (one line)."""
    if len(name) > 63 or not _DNS_LABEL.match(name):
        raise UsageError(
            f"--namespace {name!r}: not a namespace name (lowercase letters, digits and '-', at most 63, "
            f"starting and ending with a letter or digit)"
        )
    return name


def experiment_id(name: str, run_id: str) -> str:
    """The experiment's label value and results prefix: its scenario name made label-safe
    (at most 20 characters) and ``run_id`` (:func:`crdscale.ownership.new_run_id`)."""
    base = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:20].strip("-") or "experiment"
    return f"{base}-{run_id}"


@dataclass(frozen=True)
class Resources:
    """What each pod of the Job gets: ``memory_bytes`` and ``cpus`` (whole by default; tenths
    allowed), requested and limited alike."""

    memory_bytes: int
    cpus: float

    def quantities(self) -> dict[str, str]:
        cpu = str(int(self.cpus)) if self.cpus == int(self.cpus) else f"{round(self.cpus * 1000)}m"
        return {"cpu": cpu, "memory": f"{self.memory_bytes // 2**20}Mi"}


# The least CPU a pod may get: below it a cell's control plane starts too slowly to be worth measuring.
MIN_CPUS = 0.5


def check_cpus(cpus: float) -> float:
    """``cpus`` if a pod can have it (at least :data:`MIN_CPUS`, in tenths), else UsageError (one line)."""
    if cpus < MIN_CPUS or abs(cpus * 10 - round(cpus * 10)) > 1e-9:
        raise UsageError(
            f"--cpus {cpus:g}: at least {MIN_CPUS:g}, in tenths (whole CPUs are exclusive under the static CPU "
            f"manager; a fraction is a CFS quota)"
        )
    return round(cpus, 1)


def pod_resources(peak_bytes: list[float], cpus: float, *, margin: float = 0.25) -> Resources:
    """The Job's :class:`Resources`: the largest of the cells' predicted peaks (bytes) plus
    ``margin`` (a share), rounded up to 256 MiB; ``cpus`` as :func:`check_cpus` allows."""
    if not peak_bytes:
        raise ValueError("no cells")
    cpus = check_cpus(cpus)
    memory = max(peak_bytes) * (1 + margin)
    return Resources(
        int(math.ceil(memory / MEMORY_ROUNDING) * MEMORY_ROUNDING), int(cpus) if cpus == int(cpus) else cpus
    )


@dataclass
class JobPlan:
    """One submission of an experiment's cells (all of them, or the ones a resume reruns).

    Attributes:
        experiment_id: see :func:`experiment_id`; labels every object, prefixes the results.
        run_id: this submission's id (:data:`crdscale.ownership.RUN_ID_LABEL`).
        attempt: 0 for the first Job, 1, 2, ... for each ``--resume``.
        cells: cell names by completion index.
        experiment: the ``experiment.json`` the pods run from.
        results: the results URL as given (``s3://...``, ``file:///...``, ``pvc://CLAIM``).
    """

    experiment_id: str
    run_id: str
    namespace: str
    image: str
    cells: list[str]
    experiment: dict[str, Any]
    results: str
    resources: Resources
    parallelism: int = 1
    attempt: int = 0
    one_per_node: bool = False
    retries: int = DEFAULT_RETRIES
    create_namespace: bool = False
    results_secret: str | None = None
    extra_labels: dict[str, str] = field(default_factory=dict)

    @property
    def job_name(self) -> str:
        return f"crdscale-{self.experiment_id}" + (f"-r{self.attempt}" if self.attempt else "")

    @property
    def configmap_name(self) -> str:
        return self.job_name

    @property
    def service_account_name(self) -> str:
        return f"crdscale-{self.experiment_id}"

    def labels(self) -> dict[str, str]:
        return {**ownership_labels(self.run_id), EXPERIMENT_LABEL: self.experiment_id, **self.extra_labels}

    def results_in_pod(self) -> str:
        """The URL the pods write to: a claim is mounted at :data:`PVC_MOUNT` and written as a directory."""
        if self.results.startswith(f"{PVC_SCHEME}://"):
            return f"file://{PVC_MOUNT}"
        return self.results


def registry_host(ref: str) -> str | None:
    """The registry host a reference names (``ghcr.io`` of ``ghcr.io/me/crdscale:1``), or ``None`` for a
    bare name (``crdscale:1``), which only a runtime's local image store can have (``crdscale image load``)."""
    first, _, rest = ref.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first
    return None


def image_pull_policy(ref: str) -> str | None:
    """``IfNotPresent`` for a reference without a registry host: a kubelet would otherwise pull a
    ``:latest`` (or untagged) one from Docker Hub instead of using the image loaded into its node.
    ``None`` (the Kubernetes default) for a registry's reference."""
    return None if registry_host(ref) else "IfNotPresent"


def image_env(ref: str) -> list[dict[str, str]]:
    """The environment telling a cell which image it runs in (:data:`crdscale.rundir.writer.IMAGE_ENVS`):
    the reference as given and, for ``NAME@sha256:...``, the digest, so each run's manifest records it."""
    env = [{"name": "CRDSCALE_IMAGE_REF", "value": ref}]
    _name, at, digest = ref.partition("@")
    if at and digest.startswith("sha256:"):
        env.append({"name": "CRDSCALE_IMAGE_DIGEST", "value": digest})
    return env


def check_secret_name(name: str) -> str:
    """``name`` if it is a valid Secret name (an RFC 1123 subdomain), else UsageError (one line)."""
    if len(name) > 253 or not all(_DNS_LABEL.match(part) for part in name.split(".")):
        raise UsageError(f"--results-secret {name!r}: not a Secret name (lowercase letters, digits, '-' and '.')")
    return name


def experiment_selector(experiment: str) -> str:
    """Label selector of every object of one experiment (all its submissions)."""
    return f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{EXPERIMENT_LABEL}={experiment}"


def _metadata(plan: JobPlan, name: str, *, namespaced: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": plan.labels()}
    if namespaced:
        meta["namespace"] = plan.namespace
    return meta


def namespace_manifest(plan: JobPlan) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _metadata(plan, plan.namespace, namespaced=False)}


def service_account_manifest(plan: JobPlan) -> dict[str, Any]:
    # The pods talk to no API server but their own: no token in them.
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _metadata(plan, plan.service_account_name),
        "automountServiceAccountToken": False,
    }


def configmap_manifest(plan: JobPlan) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(plan, plan.configmap_name),
        "data": {
            EXPERIMENT_KEY: json.dumps(plan.experiment, sort_keys=True),
            INDEXES_KEY: json.dumps(plan.cells),
        },
    }


def job_manifest(plan: JobPlan) -> dict[str, Any]:
    """The ``batch/v1`` Indexed Job: ``completions`` = cells of the plan, ``backoffLimitPerIndex``
    retries per cell, no retry for exits a retry cannot change, node disruptions not counted."""
    if not plan.cells:
        raise ValueError("a Job needs at least one cell")
    quantities = plan.resources.quantities()
    volumes: list[dict[str, Any]] = [
        {"name": "experiment", "configMap": {"name": plan.configmap_name}},
        {"name": "runs", "emptyDir": {}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "experiment", "mountPath": SPEC_MOUNT, "readOnly": True},
        {"name": "runs", "mountPath": RUNS_MOUNT},
    ]
    if plan.results.startswith(f"{PVC_SCHEME}://"):
        claim = plan.results[len(PVC_SCHEME) + 3 :].strip("/")
        volumes.append({"name": "results", "persistentVolumeClaim": {"claimName": claim}})
        mounts.append({"name": "results", "mountPath": PVC_MOUNT})
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": plan.image,
        # The index comes from $JOB_COMPLETION_INDEX, which the Job controller sets.
        "command": ["crdscale", "cell", SPEC_MOUNT, "--results", plan.results_in_pod(), "--out", RUNS_MOUNT],
        "env": image_env(plan.image),
        "resources": {"requests": dict(quantities), "limits": dict(quantities)},
        "volumeMounts": mounts,
    }
    policy = image_pull_policy(plan.image)
    if policy:
        container["imagePullPolicy"] = policy
    if plan.results_secret:
        # The store's credentials (and endpoint: AWS_ENDPOINT_URL_S3) as the user put them in a Secret:
        # referenced by name, never copied into a manifest.
        container["envFrom"] = [{"secretRef": {"name": plan.results_secret}}]
    pod_spec: dict[str, Any] = {
        "serviceAccountName": plan.service_account_name,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        "containers": [container],
        "volumes": volumes,
    }
    if plan.one_per_node:
        pod_spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {EXPERIMENT_LABEL: plan.experiment_id}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(plan, plan.job_name),
        "spec": {
            "completionMode": "Indexed",
            "completions": len(plan.cells),
            "parallelism": max(1, min(plan.parallelism, len(plan.cells))),
            "backoffLimitPerIndex": plan.retries,
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "FailIndex",
                        "onExitCodes": {
                            "containerName": CONTAINER,
                            "operator": "In",
                            "values": list(FAIL_INDEX_EXIT_CODES),
                        },
                    },
                    # A drained or preempted node is not the cell's fault: not counted against its retries.
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                ]
            },
            "template": {"metadata": {"labels": plan.labels()}, "spec": pod_spec},
        },
    }


def submitter_role(plan: JobPlan) -> dict[str, Any]:
    """The Role the *submitting user* needs in the namespace (printed, never created): create the
    ConfigMap, ServiceAccount and Job, follow them and their pods' logs, delete them. Creating the
    namespace itself needs ``create namespaces`` cluster-wide (a ClusterRole), only when it is missing."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "crdscale-submitter", "namespace": plan.namespace},
        "rules": [
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch", "delete"]},
            {
                "apiGroups": [""],
                "resources": ["configmaps", "serviceaccounts"],
                "verbs": ["create", "get", "list", "delete"],
            },
            {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]},
        ]
        # Whether the Secret the pods read exists (checked before submitting); never its data's use here.
        + (
            [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [plan.results_secret], "verbs": ["get"]}]
            if plan.results_secret
            else []
        ),
    }


def manifests(plan: JobPlan) -> list[dict[str, Any]]:
    """What a submission creates, in creation order (the Job last: its pods need the rest)."""
    out = [namespace_manifest(plan)] if plan.create_namespace else []
    # A resume's too: shared by the experiment's Jobs, but `crdscale down` may have deleted it since.
    return [*out, service_account_manifest(plan), configmap_manifest(plan), job_manifest(plan)]


def parse_indexes(text: str | None) -> set[int]:
    """A Job status' ``completedIndexes``/``failedIndexes`` (``"0,2-4"``) as a set of indexes."""
    out: set[int] = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return out


def to_yaml(documents: list[dict[str, Any]]) -> str:
    """``documents`` as one YAML stream (``---`` between them), keys in the order written."""
    return "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in documents)
