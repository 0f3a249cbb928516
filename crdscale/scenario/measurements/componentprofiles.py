"""Heap profiles of kube-controller-manager and etcd at every profile mark (``profiles.components``), as
clusterloader2 profiles each process of the control plane: saved beside kube-apiserver's as
``kube-controller-manager-heap-stepNN-crdsNNNN[-phase].pb.gz`` and ``etcd-heap-...``
(:class:`crdscale.rundir.layout.ProfileName`), so their per-CRD cost is fitted as kube-apiserver's is
(:mod:`crdscale.analysis.components`).

Each comes from the process itself: etcd serves ``/debug/pprof`` on its client URL (``--enable-pprof``),
kube-controller-manager on its secure port, which the local control plane opens to loopback
(``CONTROLLER_MANAGER_OPEN_PATHS``). So only a local target has them: a cluster reached through a
kubeconfig that is not a crdscale instance, a target without a controller-manager, or an instance
started before crdscale opened those endpoints is skipped, with why, in the manifest's ``components``.
A profile that cannot be taken is a ``profile.error`` event, never a failed run: the run measures
kube-apiserver first. The manifest's ``components`` also records how many profiles each component
gave and the seconds they took (what the measurement adds to a step).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from crdscale.cluster.clients import Credentials
from crdscale.cluster.local import LocalControlPlane, instance_serving
from crdscale.collect.pprof import fetch_component_profile
from crdscale.errors import ClusterError
from crdscale.rundir.layout import CONTROLLER_MANAGER
from crdscale.scenario.measurements.base import PROFILE, Mark, Measurement, RunContext

# (component, its /debug/pprof URL) -> the gzip heap profile; tests pass their own.
Fetch = Callable[[str, str], bytes]

NOT_LOCAL = (
    "the target is a cluster reached through a kubeconfig, not a control plane crdscale started: "
    "crdscale reaches only its API server"
)


def skip_reason(plane: LocalControlPlane | None, component: str) -> str | None:
    """Why ``component``'s heap cannot be profiled on this target, or ``None`` when it can."""
    if plane is None:
        return NOT_LOCAL
    if component == CONTROLLER_MANAGER and not plane.runs_controller_manager:
        return "the local control plane runs no kube-controller-manager (target.controller_manager = false)"
    if plane.pprof_url(component) is None:
        return f"the instance started {component} without /debug/pprof open to loopback (an older crdscale)"
    return None


class ComponentProfiles(Measurement):
    name = "component-profiles"

    def __init__(self, components: list[str], fetch: Fetch | None = None, plane: LocalControlPlane | None = None):
        self.components = list(components)
        self.fetch = fetch
        self.plane = plane  # default: the run's local control plane, or the instance a kubeconfig points at
        self.urls: dict[str, str] = {}
        self.taken = dict.fromkeys(self.components, 0)
        self.seconds = dict.fromkeys(self.components, 0.0)
        self._session = None

    @classmethod
    def create(cls, scenario) -> ComponentProfiles | None:
        components = scenario.profiles.components
        return cls(components) if components else None

    def start(self, ctx: RunContext) -> None:
        plane = self.plane or ctx.plane
        if plane is None and ctx.cluster is not None:
            plane = instance_serving(ctx.cluster.server)  # `run --kubeconfig` of a crdscale instance
        record = {}
        for component in self.components:
            why = skip_reason(plane, component)
            if why is None:
                self.urls[component] = plane.pprof_url(component)
                record[component] = {"profiles": ["heap"], "pprof": self.urls[component]}
            else:
                record[component] = {"skipped": why}
                ctx.progress.message(f"no {component} heap profiles: {why}")
        ctx.run.update_manifest(components=record)
        if self.urls and self.fetch is None:
            # kube-controller-manager's serving certificate is signed by the instance's CA; etcd is plain HTTP.
            self._session = Credentials(verify=str(plane.credentials.ca_cert)).session()
            self.fetch = lambda component, url: fetch_component_profile(self._session.get, url, "heap")

    def at(self, ctx: RunContext, mark: Mark) -> None:
        if mark.kind != PROFILE:
            return
        for component, url in self.urls.items():
            t0 = time.monotonic()
            try:
                data = self.fetch(component, url)
            except ClusterError as err:
                ctx.events.emit("profile.error", profile="heap", step=mark.step, error=str(err), component=component)
                continue
            finally:
                self.seconds[component] += time.monotonic() - t0
            ctx.run.write_profile("heap", mark.step, mark.crds, mark.phase, data, component=component)
            self.taken[component] += 1

    def stop(self, ctx: RunContext) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
        if self.urls:
            record = dict(ctx.run.read_manifest().components)
            for component in self.urls:
                record[component] = {
                    **record.get(component, {}),
                    "taken": self.taken[component],
                    "seconds": round(self.seconds[component], 3),
                }
            ctx.run.update_manifest(components=record)
