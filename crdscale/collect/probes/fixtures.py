"""Objects the probes create: CRDs in many groups, namespaces, custom resources, Secrets, ConfigMaps.

Builders are pure (dicts carrying the labels they are given); :class:`ProbeFixtures`
creates them and deletes exactly what it created. Besides crdscale's ownership
labels every object gets a per-probe-instance label, because inside a scenario
the probe shares the scenario's run id and must not delete the scenario's CRDs.
"""

from __future__ import annotations

import logging
import secrets as _secrets
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from crdscale.cluster.listing import METADATA_ONLY_ACCEPT
from crdscale.cluster.local import instance_serving
from crdscale.errors import ClusterError
from crdscale.ownership import owned_selector, ownership_labels

from ._http import check, create_many, delete_collection, is_loopback

log = logging.getLogger(__name__)

PROBE_GROUP_SUFFIX = "probe.crdscale.io"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
# Label selecting one tenth of the objects, for the label-selector LIST.
BUCKET_LABEL = "crdscale.io/bucket"
BUCKETS = 10
# Marks objects of one probe instance; cleanup selects on it plus the run id.
PROBE_INSTANCE_LABEL = "crdscale.io/probe-instance"
# The list probe's custom resources carry their bucket in this selectable field too.
CR_SELECTABLE_FIELD = "spec.bucket"
# A Pod's data is spread over this many environment variables.
POD_ENV_VARS = 20
POD_IMAGE = "registry.k8s.io/pause:3.10"


def probe_labels(run_id: str, instance: str) -> dict[str, str]:
    """Ownership labels of ``run_id`` plus the probe-instance label."""
    return {**ownership_labels(run_id), PROBE_INSTANCE_LABEL: instance}


def probe_selector(run_id: str, instance: str) -> str:
    """Label selector for exactly one probe instance's objects."""
    return f"{owned_selector(run_id)},{PROBE_INSTANCE_LABEL}={instance}"


def sweep_group(index: int, instance: str) -> str:
    """Group name of the ``index``-th sweep CRD; one group per CRD so each adds one group-version."""
    return f"g{index:04d}-{instance}.sweep.{PROBE_GROUP_SUFFIX}"


def crd_manifest(group: str, kind: str, plural: str, labels: dict[str, str], *, scope: str = "Namespaced") -> dict:
    """A minimal CRD (one served version ``v1``, a string ``spec.data``) carrying ``labels``."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": dict(labels)},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"data": {"type": "string"}, "index": {"type": "integer"}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


def sweep_crds(start: int, stop: int, labels: dict[str, str], instance: str) -> list[dict]:
    """CRDs ``start..stop-1`` of a discovery sweep, each in its own group."""
    return [crd_manifest(sweep_group(i, instance), "SweepProbe", "sweepprobes", labels) for i in range(start, stop)]


def list_probe_group(instance: str) -> str:
    return f"l{instance}.{PROBE_GROUP_SUFFIX}"


def list_probe_crd(labels: dict[str, str], instance: str) -> dict:
    """The CRD holding the LIST probe's custom resources: ``listprobes.l<instance>.probe.crdscale.io``.

    ``spec.bucket`` is a selectable field, so a field selector can pick one tenth of the
    objects by a field that is neither namespace nor name (which the server turns into a
    narrower etcd key). Servers before v1.31 drop ``selectableFields`` when storing the CRD.
    """
    crd = crd_manifest(list_probe_group(instance), "ListProbe", "listprobes", labels)
    version = crd["spec"]["versions"][0]
    version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["bucket"] = {"type": "string"}
    version["selectableFields"] = [{"jsonPath": f".{CR_SELECTABLE_FIELD}"}]
    return crd


def has_selectable_field(stored_crd: dict) -> bool:
    """Did the server keep the list probe CRD's selectable field (v1.31+)?"""
    versions = stored_crd.get("spec", {}).get("versions", [])
    return any(
        f.get("jsonPath") == f".{CR_SELECTABLE_FIELD}" for v in versions for f in v.get("selectableFields") or []
    )


def namespace_manifest(name: str, labels: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels)}}


def _object_labels(labels: dict[str, str], index: int) -> dict[str, str]:
    return {**labels, BUCKET_LABEL: bucket(index)}


def bucket(index: int) -> str:
    """The bucket (``"0"``..``"9"``) of the ``index``-th object: its label, selectable field and node."""
    return str(index % BUCKETS)


def node_name(index: int) -> str:
    """The node the ``index``-th Pod is bound to: one node per bucket."""
    return f"node-{bucket(index)}"


def padding(size_bytes: int) -> str:
    """A compressible-free filler string of ``size_bytes`` characters (varied so etcd stores it as is)."""
    unit = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return (unit * (size_bytes // len(unit) + 1))[:size_bytes]


def custom_resource(group: str, name: str, namespace: str, labels: dict[str, str], index: int, data_bytes: int) -> dict:
    return {
        "apiVersion": f"{group}/v1",
        "kind": "ListProbe",
        "metadata": {"name": name, "namespace": namespace, "labels": _object_labels(labels, index)},
        "spec": {"index": index, "bucket": bucket(index), "data": padding(data_bytes)},
    }


def secret(name: str, namespace: str, labels: dict[str, str], index: int, data_bytes: int) -> dict:
    # stringData avoids base64 on our side; the server stores it base64-encoded (4/3 larger in JSON).
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": _object_labels(labels, index)},
        "type": "Opaque",
        "stringData": {"data": padding(data_bytes)},
    }


def pod(name: str, namespace: str, labels: dict[str, str], index: int, data_bytes: int) -> dict:
    """A Pod bound to :func:`node_name` whose ``data_bytes`` sit in environment variables
    (:data:`POD_ENV_VARS` of them), as a big application Pod's do.

    No kubelet or scheduler runs on the local control plane: the Pod stays Pending.
    ``terminationGracePeriodSeconds: 0`` because a bound Pod with a grace period is only
    marked Terminating on delete and waits for its kubelet, which never comes.
    """
    chunk = -(-data_bytes // POD_ENV_VARS) if data_bytes else 0
    env = [
        {"name": f"PADDING_{i:02d}", "value": padding(min(chunk, data_bytes - i * chunk))}
        for i in range(POD_ENV_VARS)
        if data_bytes - i * chunk > 0
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": _object_labels(labels, index)},
        "spec": {
            "nodeName": node_name(index),
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "app", "image": POD_IMAGE, "env": env}],
        },
    }


def config_map(name: str, namespace: str, labels: dict[str, str], index: int, data_bytes: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": _object_labels(labels, index)},
        "data": {"data": padding(data_bytes)},
    }


@dataclass
class ProbeFixtures:
    """Creates the probes' objects and removes them again (only labelled ones of this run).

    Use as a context manager; ``keep=True`` leaves the objects for inspection.
    """

    cluster: object
    run_id: str
    keep: bool = False
    namespaces: list[str] = field(default_factory=list)
    crd_names: list[str] = field(default_factory=list)
    collections: set[tuple[str, str]] = field(default_factory=set)  # (collection path, namespace)
    instance: str = field(default_factory=lambda: _secrets.token_hex(3))

    @property
    def labels(self) -> dict[str, str]:
        """Labels for every object this instance creates."""
        return probe_labels(self.run_id, self.instance)

    @property
    def selector(self) -> str:
        return probe_selector(self.run_id, self.instance)

    def __enter__(self) -> ProbeFixtures:
        return self

    def __exit__(self, *exc) -> None:
        if not self.keep:
            self.cleanup()

    # -- namespaces

    def namespace(self, suffix: str) -> str:
        name = f"crdscale-probe-{self.instance}-{suffix}"
        resp = self.cluster.post("/api/v1/namespaces", namespace_manifest(name, self.labels), timeout=30)
        check(resp, f"create namespace {name}", ok=(201,))
        self.namespaces.append(name)
        return name

    # -- CRDs

    def install_crds(self, crds: list[dict], *, timeout_s: float = 600.0, workers: int = 8) -> None:
        """Create CRDs and wait until every one is Established and its group-version is discoverable."""
        self.crd_names.extend(c["metadata"]["name"] for c in crds)
        create_many(self.cluster, CRD_PATH, crds, workers=workers)
        wanted = {f"{c['spec']['group']}/v1" for c in crds}
        deadline = time.monotonic() + timeout_s
        while True:
            served = {
                v["groupVersion"]
                for g in self.cluster.get_json("/apis").get("groups", [])
                for v in g.get("versions", [])
            }
            missing = wanted - served
            if not missing:
                break
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{len(missing)} CRD group-versions not served after {timeout_s:.0f} s (e.g. {sorted(missing)[0]})"
                )
            time.sleep(0.5)
        # A group-version shows up in /apis a moment before its resource list
        # answers; discovery measured in between would count 404s.
        pending = sorted(wanted)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            while pending:
                answers = pool.map(lambda gv: self.cluster.get(f"/apis/{gv}").status_code, pending)
                pending = [gv for gv, status in zip(pending, answers) if status != 200]
                if not pending:
                    return
                if time.monotonic() > deadline:
                    raise ClusterError(
                        f"{len(pending)} CRD resource lists not served after {timeout_s:.0f} s (e.g. /apis/{pending[0]})"
                    )
                time.sleep(0.3)

    def wait_resource_served(self, group: str, plural: str, *, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            resp = self.cluster.get(f"/apis/{group}/v1")
            if resp.status_code == 200 and any(r.get("name") == plural for r in resp.json().get("resources", [])):
                # The storage behind a fresh CRD may lag discovery by a moment.
                probe = self.cluster.get(f"/apis/{group}/v1/{plural}?limit=1")
                if probe.status_code == 200:
                    return
            time.sleep(0.3)
        raise ClusterError(f"{plural}.{group} not served after {timeout_s:.0f} s")

    # -- objects

    def create_objects(self, collection_path_fn, bodies: list[dict], *, workers: int = 16) -> int:
        """POST ``bodies``; ``collection_path_fn(namespace)`` gives the collection URL per namespace."""
        by_ns: dict[str, list[dict]] = {}
        for body in bodies:
            by_ns.setdefault(body["metadata"]["namespace"], []).append(body)
        created = 0
        for ns, items in by_ns.items():
            path = collection_path_fn(ns)
            self.collections.add((path, ns))
            created += create_many(self.cluster, path, items, workers=workers)
            self.wait_cached(path, len(items))
        return created

    def wait_cached(self, path: str, count: int, *, timeout_s: float = 60.0) -> None:
        """Wait until the watch cache serves ``count`` of this probe's objects at ``path``.

        Informers and the list probes LIST with resourceVersion=0, which the watch cache
        answers with whatever it has seen; right after the last create it can be a few
        objects short (seen in CI: 103 of 105 Secrets). Metadata-only, so a 100 MiB
        collection costs a few kB per poll.
        """
        deadline = time.monotonic() + timeout_s
        seen = -1
        while time.monotonic() < deadline:
            resp = self.cluster.get(
                path,
                params={"resourceVersion": "0", "labelSelector": self.selector},
                headers={"Accept": METADATA_ONLY_ACCEPT},
            )
            if resp.status_code == 200:
                seen = len(resp.json().get("items") or [])
                if seen >= count:
                    return
            time.sleep(0.2)
        raise ClusterError(f"the watch cache served {seen} of {count} objects at {path} after {timeout_s:.0f} s")

    # -- cleanup

    def cleanup(self) -> None:
        """Delete this run's labelled objects, CRDs and namespaces (best effort, reports failures)."""
        selector = self.selector
        errors = []
        for path, _ns in sorted(self.collections):
            try:
                delete_collection(self.cluster, path, selector)
            except ClusterError as err:
                errors.append(str(err))
        if self.crd_names:
            try:
                self._delete_crds(selector)
            except ClusterError as err:
                errors.append(str(err))
        for ns in self.namespaces:
            try:
                self._delete_namespace(ns)
            except ClusterError as err:
                errors.append(str(err))
        self.collections.clear()
        self.crd_names.clear()
        self.namespaces.clear()
        if errors:
            log.warning("cleanup incomplete: %s", "; ".join(errors))

    def _delete_crds(self, selector: str, *, workers: int = 8) -> None:
        """Delete this instance's CRDs one request each: a DELETE of the whole collection is one
        request that the server gives up on after its request timeout (60 s), and 900 real CRDs
        take longer than that (seen: 389 of 900 left behind, the connection closed unanswered)."""
        names = [
            item["metadata"]["name"]
            for item in self.cluster.get_json(
                CRD_PATH, params={"labelSelector": selector}, headers={"Accept": METADATA_ONLY_ACCEPT}
            ).get("items")
            or []
        ]

        def delete(name: str) -> str | None:
            resp = self.cluster.delete(f"{CRD_PATH}/{name}", timeout=60)
            return None if resp.status_code in (200, 202, 404) else f"{name}: HTTP {resp.status_code}"

        with ThreadPoolExecutor(max_workers=workers) as pool:
            failed = [f for f in pool.map(delete, names) if f]
        if failed:
            raise ClusterError(f"{len(failed)} of {len(names)} CRDs not deleted (e.g. {failed[0]})")
        self._wait_crds_gone(selector, timeout_s=max(60.0, 0.5 * len(names)))

    def _wait_crds_gone(self, selector: str, *, timeout_s: float) -> None:
        """Wait until the deleted CRDs are gone, not just Terminating: the server removes a CRD only
        after its finalizer has deleted every stored object, and until then it still serves the
        group-version, which the next measurement would count (seen: a discovery sweep started
        beside 60 Terminating CRDs of the test before and found 67 group-versions where it made 82)."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = self.cluster.get_json(
                CRD_PATH, params={"labelSelector": selector}, headers={"Accept": METADATA_ONLY_ACCEPT}
            ).get("items")
            if not left:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"{len(left)} CRDs still terminating after {timeout_s:.0f} s")
            time.sleep(0.5)

    def _delete_namespace(self, name: str) -> None:
        cluster = self.cluster
        resp = cluster.get(f"/api/v1/namespaces/{name}")
        if resp.status_code == 404:
            return
        labels = resp.json().get("metadata", {}).get("labels", {})
        if labels != {**labels, **self.labels}:
            return  # not ours: never touch it
        cluster.delete(f"/api/v1/namespaces/{name}", timeout=30)
        if not is_loopback(cluster.server) or _runs_namespace_controller(cluster.server):
            # The namespace controller finishes the job (and deletes what the controller-manager
            # put there: the default ServiceAccount, the kube-root-ca.crt ConfigMap).
            return
        # A local control plane without kube-controller-manager: nothing would remove the
        # namespace's finalizer; our objects in it are gone already, so finalize it ourselves.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            resp = cluster.get(f"/api/v1/namespaces/{name}")
            if resp.status_code == 404:
                return
            body = resp.json()
            if body.get("status", {}).get("phase") == "Terminating":
                body.setdefault("spec", {})["finalizers"] = []
                cluster.put(f"/api/v1/namespaces/{name}/finalize", body, timeout=30)
                return
            time.sleep(0.2)


def _runs_namespace_controller(server: str) -> bool:
    """Whether ``server`` is a local instance that runs kube-controller-manager (by default it does)."""
    plane = instance_serving(server)
    return plane is not None and plane.runs_controller_manager
