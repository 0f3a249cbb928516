"""RSS, CPU, fds and threads of the local kube-apiserver, kube-controller-manager and etcd read from /proc
at the scrape interval: complete even when a /metrics scrape of a server with thousands of CRDs takes
longer than the interval. Rows go to the run directory as chunks while the run goes (``proc``,
``controller-manager-proc``, ``etcd-proc``) and into the exported series at its end, as jobs
:data:`crdscale.rundir.layout.PROC_JOBS`. Remote targets: nothing."""

from __future__ import annotations

from datetime import datetime

import pandas as pd

from crdscale.collect.sources import ProcSampler
from crdscale.rundir import layout
from crdscale.scenario.measurements.base import Measurement, RunContext


class ProcSamplers(Measurement):
    name = "proc"

    def __init__(self, interval_s: float):
        self.interval_s = interval_s
        self.samplers: list[ProcSampler] = []

    @classmethod
    def create(cls, scenario) -> ProcSamplers | None:
        return cls(float(scenario.metrics.scrape_interval_seconds))

    def start(self, ctx: RunContext) -> None:
        plane = ctx.plane
        if plane is None:
            return
        self.samplers.append(
            ProcSampler(
                plane.apiserver_pid, self.interval_s, sink=lambda frame: ctx.run.write_series_chunk(frame, "proc")
            ).start()
        )
        if plane.controller_manager_pid is not None:
            self.samplers.append(
                ProcSampler(
                    plane.controller_manager_pid,
                    self.interval_s,
                    job=layout.CONTROLLER_MANAGER_PROC_JOB,
                    sink=lambda frame: ctx.run.write_series_chunk(frame, "controller-manager-proc"),
                ).start()
            )
        if plane.etcd_pid is not None:
            self.samplers.append(
                ProcSampler(
                    plane.etcd_pid,
                    self.interval_s,
                    job=layout.ETCD_PROC_JOB,
                    sink=lambda frame: ctx.run.write_series_chunk(frame, "etcd-proc"),
                ).start()
            )

    def series(self, ctx: RunContext, start: datetime, end: datetime) -> pd.DataFrame | None:
        frames = [sampler.series(start, end) for sampler in self.samplers]
        return pd.concat(frames, ignore_index=True) if frames else None

    def stop(self, ctx: RunContext) -> None:
        for sampler in reversed(self.samplers):
            sampler.stop()
