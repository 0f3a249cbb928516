"""The target a run measures: a local control plane crdscale starts (and stops), or a cluster reached
through a kubeconfig. :func:`open_target` brings it up and records what it is in the run directory;
:func:`local_endpoints` is what a metrics source needs of a local one."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

from crdscale.cluster import patches
from crdscale.cluster.clients import Cluster, connect
from crdscale.cluster.gates import check_feature_gates
from crdscale.cluster.gobuild import go_version
from crdscale.cluster.local import LocalControlPlane
from crdscale.cluster.versions import normalize_version
from crdscale.collect.sources import LocalEndpoints
from crdscale.errors import ClusterError, CrdscaleError
from crdscale.rundir import EventLog, RunWriter
from crdscale.scenario.config import Scenario


@dataclass
class RunTarget:
    """A running target: the ``cluster`` to talk to and, for a local target, its ``plane``."""

    cluster: Cluster
    plane: LocalControlPlane | None = None

    def adopt(self, run: RunWriter, name: str, pid: int, log) -> None:
        """A harness process (Prometheus) was started: record it where `crdscale down` and
        `crdscale recover` look."""
        run.record_process(name, pid)
        if self.plane is not None:
            self.plane.adopt_process(name, pid, log)

    def release(self, pid: int | None) -> None:
        """That harness process has ended: the instance no longer owns it."""
        if pid is not None and self.plane is not None and self.plane.state:
            self.plane.release_process(pid)


def open_target(scenario: Scenario, run: RunWriter, events: EventLog, run_id: str, stack: ExitStack) -> RunTarget:
    """Start (local) or connect to (kubeconfig) the scenario's target; its stop or close goes on ``stack``.
    Records versions, binaries, the controller-manager and the server in the manifest."""
    versions = {"crdscale": run.manifest()["versions"]["crdscale"]}
    t = scenario.target
    if scenario.is_local:
        changes = patches.build_changes(t.patches, t.build_tags) if (t.patches or t.build_tags) else None
        plane = LocalControlPlane(
            t.kube_version,
            etcd=t.etcd,
            apiserver_binary=t.apiserver_binary,
            kube_source=t.kube_source,
            apiserver_flags=[*t.apiserver_flags, *gate_flags(t.feature_gates)],
            apiserver_env=t.env,
            controller_manager=t.controller_manager,
            controller_manager_controllers=t.controller_manager_controllers,
            controller_manager_flags=t.controller_manager_flags,
            name=f"run-{run_id}",
            keep_state=True,
            changes=changes,
            go=t.go,
        )
        events.emit("target.start", target="local")
        stack.callback(_stop_plane, plane, run, events)
        plane.start()
        target = RunTarget(plane.connect(), plane)
        versions.update(plane.versions)
        run.record_binaries(plane.state["binaries"], built_from=plane.state.get("built_from"))
        run.update_manifest(change=change_record(scenario, plane.state.get("built_from") or {}))
        # Whether a controller-manager ran, with which controllers and flags: it decides what
        # every installed CRD costs (its garbage collector watches each one).
        run.update_manifest(controller_manager=plane.state.get("controller_manager", {}))
    else:
        target = RunTarget(connect(t.kubeconfig, t.context))
        stack.callback(target.cluster.close)
        try:
            versions["kube-apiserver"] = target.cluster.server_version()
        except ClusterError as err:
            raise ClusterError(f"target unreachable: {err}") from err
    info = target.cluster.get_json("/version", timeout=10)
    versions["kube-apiserver-go"] = info.get("goVersion")
    versions["go-toolchain"] = go_version()
    run.update_manifest(versions=versions, target={"kind": t.kind, "server": target.cluster.server})
    events.emit("target.ready", server=target.cluster.server, version=versions.get("kube-apiserver"))
    return target


def gate_flags(gates: dict[str, bool]) -> list[str]:
    """``{"A": True, "B": False}`` -> ``["--feature-gates=A=true,B=false"]`` (none for no gates)."""
    if not gates:
        return []
    return ["--feature-gates=" + ",".join(f"{name}={str(bool(on)).lower()}" for name, on in sorted(gates.items()))]


def change_record(scenario: Scenario, built_from: dict) -> dict:
    """What a run changed on the release, for its manifest and a verdict's provenance: each diff's name,
    sha256 and files, the build tags, the feature gates with their stage, the extra flags, and the Go."""
    t = scenario.target
    apiserver = built_from.get("kube-apiserver") or {}
    record: dict = {
        "diffs": apiserver.get("diffs", []),
        "build_tags": list(t.build_tags),
        "feature_gates": {},
        "apiserver_flags": list(t.apiserver_flags),
        "controller_manager_flags": list(t.controller_manager_flags),
        "go": t.go,
    }
    for key in ("go", "release_go", "release_go_source", "go_is_release"):
        if key in apiserver:
            record[f"built_{key}" if key == "go" else key] = apiserver[key]
    if t.feature_gates:
        try:
            record["feature_gates"] = check_feature_gates(dict(t.feature_gates), normalize_version(t.kube_version))
        except CrdscaleError:  # checked before the run; a failure here only loses the stage
            record["feature_gates"] = {name: {"enabled": on} for name, on in t.feature_gates.items()}
    return record


def _stop_plane(plane: LocalControlPlane, run: RunWriter, events: EventLog) -> None:
    for record in plane.processes:
        run.copy_log(record.log)  # component logs help explain a failure
    plane.keep_state = False
    plane.stop()
    events.emit("target.stop")


def local_endpoints(plane: LocalControlPlane | None) -> LocalEndpoints | None:
    """What a metrics source scrapes on a local control plane (``None`` for a remote target)."""
    if plane is None:
        return None
    creds = plane.credentials
    return LocalEndpoints(
        apiserver=f"127.0.0.1:{plane.ports['apiserver']}",
        etcd_client=f"127.0.0.1:{plane.ports['etcd_client']}",
        ca_cert=creds.ca_cert,
        token_file=creds.admin_token_file,
        etcd_metrics_url=plane.etcd_metrics_url,
        controller_manager=(
            f"127.0.0.1:{plane.ports['controller_manager']}" if plane.controller_manager_metrics_url else None
        ),
        controller_manager_metrics_url=plane.controller_manager_metrics_url,
        workdir=plane.state_dir / "prometheus",
    )
