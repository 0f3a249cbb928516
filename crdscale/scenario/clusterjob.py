"""A matrix experiment run as one Indexed Job on a user's cluster: submit, follow, status, down, gather.

The manifests come from :mod:`crdscale.scenario.fanout` (pure); this module
talks to the cluster (:class:`crdscale.cluster.clients.Cluster`) and to the
results store (:mod:`crdscale.results.store`). The experiment directory on the
submitting machine is an ordinary :class:`~crdscale.scenario.experiment.Experiment`
whose ``experiment.json`` also holds a ``cluster`` table: where it runs
(kubeconfig, context, server, namespace), the image, the results URL, the
resources and every Job submitted with its index -> cell list.

Objects are found by the experiment's labels (:func:`fanout.experiment_selector`)
and nothing without them is read for deletion, let alone deleted.
"""

from __future__ import annotations

import calendar
import itertools
import logging
import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from crdscale.cluster.clients import ApiError, Cluster, connect
from crdscale.crds.generate import estimate_set, iter_crds
from crdscale.errors import ClusterError, UsageError
from crdscale.footprint.features import FEATURES, add_features, crd_features
from crdscale.footprint.model import RSS, predict
from crdscale.footprint.store import choose_model, shipped_versions
from crdscale.ownership import RUN_ID_LABEL, is_owned
from crdscale.results.store import cell_prefix, open_store
from crdscale.rundir import read_run
from crdscale.scenario import fanout
from crdscale.scenario.experiment import Experiment
from crdscale.units import fmt_duration

log = logging.getLogger(__name__)

CLUSTER_KEY = "cluster"  # experiment.json's table of a cluster experiment
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
# Pod memory besides kube-apiserver's growth and crdscale's copy of the set: kube-apiserver at 0 CRDs,
# etcd, kube-controller-manager, crdscale's Python and its informer clients, which grow with the set too.
# Measured by scripts/pod_limits.py (docs/results/cluster.toml, provider-like CRDs, v1.37.1): 0.73 GiB of
# RSS at 0 CRDs, 1.66 GiB at 2,000 and 2.37 GiB at 5,000 CRDs; base and slope are rounded up from those.
POD_BASE_BYTES = 0.75 * 2**30
POD_BYTES_PER_CRD = 0.5 * 2**20
# What one step line of a cell's log says (crdscale.scenario.runner's StepSummary.line).
_STEP_LINE = re.compile(r"step (\d+)/(\d+): ([\d,]+) CRDs")

PENDING, RUNNING, SUCCEEDED, FAILED = "pending", "running", "succeeded", "failed"


def is_cluster_experiment(experiment: Experiment) -> bool:
    return isinstance(experiment.manifest.get(CLUSTER_KEY), dict)


def check_cells_for_pods(cells) -> None:
    """UsageError (one line, naming the cell) for a cell (``(Cell, Scenario)`` pairs) a pod cannot run as
    this machine would: it must start its own control plane and generate its CRDs (files here are not there)."""
    for cell, sc in cells:
        where = f"cell {cell.name}"
        if not sc.is_local:
            raise UsageError(
                f"{where}: --cluster runs each cell on its own control plane in a pod; target.kind must be local"
            )
        for key in ("kube_source", "apiserver_binary"):
            if getattr(sc.target, key):
                raise UsageError(f"{where}: target.{key} names a path on this machine, which the pod does not have")
        if sc.crds.source != "generate":
            raise UsageError(
                f"{where}: crds.source {sc.crds.source} is a path on this machine; on --cluster cells "
                f'generate their CRDs (crds.source = "generate")'
            )
        if sc.target.prometheus_url:
            raise UsageError(f"{where}: target.prometheus_url: a pod collects its own metrics, set none")


@dataclass(frozen=True)
class Peak:
    """A cell's predicted peak memory in its pod (bytes): ``value`` sizes the pod, ``high`` is the
    upper bound of the footprint model's 95 % prediction interval (wide: its fit has few degrees of freedom)."""

    value: float
    high: float


# CRDs of a generated set measured for a prediction: the generator draws every CRD alike, so the
# first ones scaled to the set's size are its features (measuring 5,000 took 15 s, this 1 s).
PREDICTION_SAMPLE = 200


def predict_peak_bytes(scenario) -> Peak:
    """A cell's predicted peak memory in its pod: :data:`POD_BASE_BYTES` and :data:`POD_BYTES_PER_CRD`
    for the rest of the pod, plus the footprint model's RSS prediction for its CRD set (settled growth:
    kube-apiserver's measured peak growth was 18 % and 28 % above it at 2,000 and 5,000 CRDs, which the
    requests' 25 % margin on the whole pod covers), plus crdscale's own copy of the set."""
    params = scenario.generator_params()
    sample = [crd_features(c) for c in itertools.islice(iter_crds(params), PREDICTION_SAMPLE)]
    features = add_features(sample)
    if sample:
        scale = params.crd_count / len(sample)
        features.update({f: features[f] * scale for f in FEATURES})
    version = scenario.target.kube_version.lstrip("v")
    try:
        chosen = choose_model(version)
    except UsageError:
        # No model of this version: the newest one is the best guess (the margin covers the rest).
        chosen = choose_model(shipped_versions()[-1])
    row = predict(chosen.model, features).set_index("target").loc[RSS]
    base = POD_BASE_BYTES + POD_BYTES_PER_CRD * params.crd_count + estimate_set(params).memory_bytes
    value = base + max(float(row["value"]), 0.0)
    high = base + max(float(row["high"]), 0.0) if not math.isnan(row["high"]) else value
    return Peak(value, high)


def cell_peaks(cells) -> dict[str, Peak]:
    """:func:`predict_peak_bytes` per cell (``(Cell, Scenario)`` pairs) by name; cells sharing a CRD set
    and version are predicted once."""
    by_set: dict[str, Peak] = {}
    out = {}
    for cell, sc in cells:
        key = repr((sc.crds, sc.target.kube_version))
        if key not in by_set:
            by_set[key] = predict_peak_bytes(sc)
        out[cell.name] = by_set[key]
    return out


def _post(cluster: Cluster, path: str, body: dict[str, Any], *, dry_run: bool = False, exist_ok: bool = False) -> None:
    resp = cluster.post(path, body, params={"dryRun": "All"} if dry_run else None)
    if resp.status_code == 409 and exist_ok:
        return
    if resp.status_code >= 300:
        raise ApiError(f"create {body['kind']} {body['metadata']['name']}", resp)


def api_path(manifest: dict[str, Any], name: str | None = None) -> str:
    """The collection path of a manifest's kind (or one object's with ``name``)."""
    kind, ns = manifest["kind"], manifest["metadata"].get("namespace")
    plural = {
        "Namespace": "namespaces",
        "ServiceAccount": "serviceaccounts",
        "ConfigMap": "configmaps",
        "Job": "jobs",
        "Pod": "pods",
    }[kind]
    base = "/apis/batch/v1" if kind == "Job" else "/api/v1"
    path = f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"
    return f"{path}/{name}" if name else path


def namespace_exists(cluster: Cluster, namespace: str) -> bool:
    resp = cluster.get(f"/api/v1/namespaces/{namespace}")
    if resp.status_code == 404:
        return False
    if resp.status_code == 403:
        return True  # cannot tell: assume it exists (creating it would be refused anyway)
    if resp.status_code >= 300:
        raise ApiError(f"GET namespace {namespace}", resp)
    return True


def check_secret(cluster: Cluster, namespace: str, name: str) -> None:
    """UsageError (one line) when the Secret the pods take their store's credentials from is missing:
    its pods would wait forever (CreateContainerConfigError). A 403 cannot tell: assume it is there."""
    resp = cluster.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
    if resp.status_code == 404:
        raise UsageError(
            f"--results-secret {name}: no such Secret in namespace {namespace}; create it with the store's "
            f"credentials, e.g. kubectl -n {namespace} create secret generic {name} "
            f"--from-literal=AWS_ACCESS_KEY_ID=... --from-literal=AWS_SECRET_ACCESS_KEY=..."
        )
    if resp.status_code not in (200, 403):
        raise ApiError(f"GET secret {name}", resp)


def create(cluster: Cluster, plan: fanout.JobPlan, *, dry_run: bool = False) -> None:
    """Create the plan's objects in order; ``dry_run``: the server validates them (``?dryRun=All``) and keeps nothing."""
    for manifest in fanout.manifests(plan):
        exist_ok = manifest["kind"] in ("Namespace", "ServiceAccount")
        _post(cluster, api_path(manifest), manifest, dry_run=dry_run, exist_ok=exist_ok)


def record_job(experiment: Experiment, plan: fanout.JobPlan) -> None:
    """Add a submitted Job to the experiment's ``cluster`` table and save."""
    table = experiment.manifest[CLUSTER_KEY]
    table.setdefault("jobs", []).append(
        {
            "name": plan.job_name,
            "configmap": plan.configmap_name,
            "run_id": plan.run_id,
            "attempt": plan.attempt,
            "submitted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "resources": plan.resources.quantities(),
            "indexes": list(plan.cells),  # index -> cell name
        }
    )
    experiment.save()


@dataclass
class IndexState:
    """One completion index of one Job: its cell, state, and what the newest pod says."""

    job: str
    index: int
    cell: str
    state: str = PENDING
    pod: str | None = None
    detail: str = ""
    seconds: float | None = None  # how long a succeeded index's pod ran
    log_tail: list[str] = field(default_factory=list)


def _time(text: str | None) -> float | None:
    if not text:
        return None

    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))


def _pod_seconds(pod: dict[str, Any]) -> float | None:
    start = _time((pod.get("status") or {}).get("startTime"))
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        end = _time(((cs.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        if start is not None and end is not None:
            return end - start
    return None


def _pod_index(pod: dict[str, Any]) -> int | None:
    meta = pod.get("metadata") or {}
    value = (meta.get("labels") or {}).get(INDEX_LABEL) or (meta.get("annotations") or {}).get(INDEX_LABEL)
    return int(value) if value is not None and str(value).isdigit() else None


def pod_log_tail(cluster: Cluster, namespace: str, pod: str, lines: int = 20) -> list[str]:
    """The last ``lines`` lines of a pod's cell container ([] when it has none yet)."""
    resp = cluster.get(
        f"/api/v1/namespaces/{namespace}/pods/{pod}/log",
        params={"container": fanout.CONTAINER, "tailLines": str(lines)},
    )
    if resp.status_code != 200:
        return []
    # tqdm redraws with carriage returns: keep what a terminal would show last.
    return [line.rsplit("\r", 1)[-1] for line in resp.text.splitlines() if line.strip()]


def current_step(lines: list[str]) -> str:
    """``step 2/5 done (200 CRDs)`` from a cell's log lines, or ``""`` before its first step."""
    for line in reversed(lines):
        m = _STEP_LINE.search(line)
        if m:
            return f"step {m.group(1)}/{m.group(2)} done ({m.group(3)} CRDs)"
    return ""


def index_states(cluster: Cluster, experiment: Experiment, *, logs: bool = False) -> list[IndexState]:
    """The state of every index of every Job the experiment submitted, newest Job last.
    ``logs``: read running pods' logs for their step and failed pods' last lines. Each Job's
    succeeded indexes are recorded in ``experiment.json`` (saved when they changed)."""
    table = experiment.manifest[CLUSTER_KEY]
    namespace = table["namespace"]
    pods, _rv = cluster.list(
        f"/api/v1/namespaces/{namespace}/pods",
        params={"labelSelector": fanout.experiment_selector(table["experiment_id"])},
    )
    out = []
    changed = False
    for job in table.get("jobs", []):
        resp = cluster.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{job['name']}")
        if resp.status_code == 404:
            status: dict[str, Any] = {"gone": True}
        elif resp.status_code >= 300:
            raise ApiError(f"GET job {job['name']}", resp)
        elif (resp.json().get("metadata") or {}).get("deletionTimestamp"):
            status = {**(resp.json().get("status") or {}), "gone": True}  # `crdscale down` deleted it
        else:
            status = resp.json().get("status") or {}
        done = fanout.parse_indexes(status.get("completedIndexes"))
        # Remembered, so a success survives the Job's deletion (`crdscale down`, a TTL) and a resume skips it.
        if status.get("gone") and not done:
            done = set(job.get("completed_indexes") or [])
        elif sorted(done) != (job.get("completed_indexes") or []):
            job["completed_indexes"] = sorted(done)
            changed = True
        failed = fanout.parse_indexes(status.get("failedIndexes"))
        newest: dict[int, dict[str, Any]] = {}
        for pod in pods:
            if (pod["metadata"].get("labels") or {}).get(JOB_NAME_LABEL) != job["name"]:
                continue
            index = _pod_index(pod)
            if index is None:
                continue
            if (
                index not in newest
                or pod["metadata"]["creationTimestamp"] >= newest[index]["metadata"]["creationTimestamp"]
            ):
                newest[index] = pod
        for index, cell in enumerate(job["indexes"]):
            st = IndexState(job["name"], index, cell)
            pod = newest.get(index)
            st.pod = pod["metadata"]["name"] if pod else None
            phase = (pod or {}).get("status", {}).get("phase")
            if index in done:
                st.state, st.seconds = SUCCEEDED, _pod_seconds(pod) if pod else None
            elif index in failed:
                st.state = FAILED
                if logs and pod:
                    st.log_tail = pod_log_tail(cluster, namespace, st.pod, 10)
            elif status.get("gone"):
                st.state, st.detail = FAILED, "job deleted before this index succeeded"
            elif phase == "Running":
                st.state = RUNNING
                if logs:
                    st.detail = current_step(pod_log_tail(cluster, namespace, st.pod, 50)) or "starting"
            elif phase == "Failed":
                st.detail = "retrying after a failed attempt"
            elif phase == "Pending":
                st.detail = _pending_reason(pod)
            out.append(st)
    if changed:
        experiment.save()
    return out


def _pending_reason(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return f"not scheduled: {cond.get('reason', '')} {cond.get('message', '')}".strip()
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting:
            return f"{waiting.get('reason', '')}: {waiting.get('message', '')}".strip(": ")
    return "not scheduled yet" if not pod.get("spec", {}).get("nodeName") else "starting"


def cell_states(states: list[IndexState]) -> dict[str, IndexState]:
    """Per cell, what counts: a success in any Job, else its newest Job's index."""
    out: dict[str, IndexState] = {}
    for st in states:
        if out.get(st.cell) is None or out[st.cell].state != SUCCEEDED:
            out[st.cell] = st
    return out


def summary_line(states: list[IndexState], parallelism: int) -> str:
    """``cells: 2 pending, 1 running, 3 succeeded, 0 failed; ETA 12m`` (ETA once one cell succeeded)."""
    cells = cell_states(states)
    counts = Counter(st.state for st in cells.values())
    line = "cells: " + ", ".join(f"{counts.get(s, 0)} {s}" for s in (PENDING, RUNNING, SUCCEEDED, FAILED))
    done = [st.seconds for st in cells.values() if st.state == SUCCEEDED and st.seconds]
    left = counts.get(PENDING, 0) + counts.get(RUNNING, 0)
    if done and left:
        line += f"; ETA {fmt_duration(sum(done) / len(done) * math.ceil(left / max(parallelism, 1)))}"
    return line


def job_finished(cluster: Cluster, namespace: str, job: str) -> bool:
    resp = cluster.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{job}")
    if resp.status_code == 404:
        return True
    if resp.status_code >= 300:
        raise ApiError(f"GET job {job}", resp)
    if (resp.json().get("metadata") or {}).get("deletionTimestamp"):
        return True  # being deleted (`crdscale down`): it runs nothing more
    conditions = (resp.json().get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)


def follow(cluster: Cluster, experiment: Experiment, *, interval_s: float = 10.0) -> list[IndexState]:
    """Log the experiment's progress whenever it changes, until its newest Job finishes; returns the final states."""
    table = experiment.manifest[CLUSTER_KEY]
    job = table["jobs"][-1]["name"]
    last = None
    while True:
        finished = job_finished(cluster, table["namespace"], job)  # before the states: they are then final
        states = index_states(cluster, experiment)
        line = summary_line(states, int(table.get("parallelism", 1)))
        if line != last:
            log.info("%s", line)
            last = line
        if finished:
            return states
        time.sleep(interval_s)


def delete_submission(cluster: Cluster, plan: fanout.JobPlan) -> None:
    """Delete what a submission that failed half-way created (its ConfigMap and Job, by name and labels)."""
    for manifest in (fanout.job_manifest(plan), fanout.configmap_manifest(plan)):
        path = api_path(manifest, manifest["metadata"]["name"])
        resp = cluster.get(path)
        if resp.status_code == 200 and (resp.json()["metadata"].get("labels") or {}).get(RUN_ID_LABEL) == plan.run_id:
            cluster.delete(path, {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})


def delete_experiment(cluster: Cluster, experiment: Experiment) -> dict[str, int]:
    """Delete the experiment's Jobs (their pods with them: propagationPolicy Background), then any
    of its pods, ConfigMaps and ServiceAccounts left: only objects carrying its labels. Returns counts by kind."""
    table = experiment.manifest[CLUSTER_KEY]
    namespace, selector = table["namespace"], fanout.experiment_selector(table["experiment_id"])
    counts: dict[str, int] = {}
    for kind, path in (
        ("Job", f"/apis/batch/v1/namespaces/{namespace}/jobs"),
        ("Pod", f"/api/v1/namespaces/{namespace}/pods"),
        ("ConfigMap", f"/api/v1/namespaces/{namespace}/configmaps"),
        ("ServiceAccount", f"/api/v1/namespaces/{namespace}/serviceaccounts"),
    ):
        items, _rv = cluster.list(path, params={"labelSelector": selector})
        for item in items:
            labels = item["metadata"].get("labels") or {}
            # The selector already says so; checked again so a server ignoring it cannot widen a delete.
            if not is_owned(labels) or labels.get(fanout.EXPERIMENT_LABEL) != table["experiment_id"]:
                continue
            body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
            resp = cluster.delete(f"{path}/{item['metadata']['name']}", body)
            if resp.status_code not in (200, 202, 404):
                raise ApiError(f"delete {kind} {item['metadata']['name']}", resp)
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def gather(experiment: Experiment, results_url: str | None = None) -> list[str]:
    """Copy every cell's newest run directory from the results store into the experiment directory
    and record it (completed or not, as its run manifest says); returns the cells gathered."""
    table = experiment.manifest[CLUSTER_KEY]
    store = open_store(results_url or table["results"])
    gathered = []
    for state in experiment.cells:
        runs = store.list_prefixes(cell_prefix(table["experiment_id"], state.cell.name))
        if not runs:
            continue
        for name in runs:
            if not (experiment.path / name).is_dir():
                store.get_tree(cell_prefix(table["experiment_id"], state.cell.name, name), experiment.path / name)
        newest = runs[-1]  # run directory names start with their UTC start time
        try:
            status = read_run(experiment.path / newest).status
        except UsageError:
            status = "failed"
        state.run_dir, state.attempts = newest, list(runs)
        state.status = "completed" if status == "completed" else "failed"
        gathered.append(state.cell.name)
    if gathered and all(c.status == "completed" for c in experiment.cells):
        experiment.manifest["status"] = "completed"
    experiment.save()
    return gathered


def connect_experiment(experiment: Experiment, kubeconfig: str | None = None, context: str | None = None) -> Cluster:
    """The cluster the experiment was submitted to (``kubeconfig``/``context`` override what it recorded)."""
    table = experiment.manifest[CLUSTER_KEY]
    files = kubeconfig or table.get("kubeconfig")
    if not files:
        raise UsageError(f"{experiment.path}: no kubeconfig recorded; pass --kubeconfig")
    cluster = connect(files, context or table.get("context"))
    try:
        cluster.server_version()
    except ClusterError as err:
        raise ClusterError(f"experiment {experiment.path.name}: {err}") from None
    return cluster


def missing_cells(experiment: Experiment, states: list[IndexState]) -> list[str]:
    """Cells with no success in any Job, in matrix order (what ``--resume`` resubmits)."""
    cells = cell_states(states)
    return [
        c.cell.name
        for c in experiment.cells
        if c.status != "completed" and getattr(cells.get(c.cell.name), "state", None) != SUCCEEDED
    ]


def active_jobs(cluster: Cluster, experiment: Experiment) -> list[str]:
    """The experiment's Jobs still running."""
    table = experiment.manifest[CLUSTER_KEY]
    return [j["name"] for j in table.get("jobs", []) if not job_finished(cluster, table["namespace"], j["name"])]
