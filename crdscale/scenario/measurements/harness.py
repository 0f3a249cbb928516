"""What the harness costs the machine being measured: CPU seconds of crdscale itself and of a local
Prometheus beside kube-apiserver's own during the run (manifest ``harness``). Collected after the
metrics source stopped, when Prometheus's CPU is known."""

from __future__ import annotations

import os

from crdscale.analysis.harness import harness_cost
from crdscale.scenario.measurements.base import Measurement, RunContext


class HarnessCost(Measurement):
    name = "harness"

    @classmethod
    def create(cls, scenario) -> HarnessCost | None:
        return cls()

    def collect(self, ctx: RunContext) -> None:
        now, then = os.times(), ctx.cpu_at_start
        own = (now.user - then.user) + (now.system - then.system)
        prometheus = ctx.source.harness_cpu_seconds if ctx.source is not None else None
        ctx.run.update_manifest(harness=harness_cost(ctx.series, own, prometheus))
