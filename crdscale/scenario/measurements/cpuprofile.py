"""A CPU profile of each CRD step's install (``"cpu"`` in ``profiles.kinds``): sampled for
``profiles.cpu_seconds`` from the start of the install, in a thread, saved as
``cpu-stepNN-crdsNNNN-install.pb.gz``; the step waits for it before settling."""

from __future__ import annotations

import threading

from crdscale.collect.pprof import fetch_profile
from crdscale.errors import ClusterError
from crdscale.scenario.measurements.base import STEP_SERVED, STEP_START, Mark, Measurement, RunContext


class CpuProfile(Measurement):
    name = "cpu-profile"

    def __init__(self, seconds: int):
        self.seconds = seconds
        self._thread: threading.Thread | None = None

    @classmethod
    def create(cls, scenario) -> CpuProfile | None:
        return cls(int(scenario.profiles.cpu_seconds)) if "cpu" in scenario.profiles.kinds else None

    def at(self, ctx: RunContext, mark: Mark) -> None:
        if mark.grow != "crds":
            return
        if mark.kind == STEP_START:
            self._thread = threading.Thread(
                target=self._capture, args=(ctx, mark), name=f"crdscale-cpu-step{mark.step}", daemon=True
            )
            self._thread.start()
        elif mark.kind == STEP_SERVED and self._thread is not None:
            self._thread.join()
            self._thread = None

    def _capture(self, ctx: RunContext, mark: Mark) -> None:
        try:
            data = fetch_profile(ctx.cluster, "cpu", cpu_seconds=self.seconds)
        except ClusterError as err:  # the run itself reports a dead server
            ctx.events.emit("profile.error", profile="cpu", step=mark.step, error=str(err))
            return
        ctx.run.write_profile("cpu", mark.step, mark.crds, "install", data)
