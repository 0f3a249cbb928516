"""The probes of ``probes.each_step``, after every step's end profiles (not at the baseline), through
the same entry point as `crdscale probe NAME`; ``probes.options`` is read into each probe's config."""

from __future__ import annotations

from crdscale.collect.probes import run_probe
from crdscale.scenario.measurements.base import STEP_END, Mark, Measurement, RunContext


class StepProbes(Measurement):
    name = "probes"

    def __init__(self, names: list[str], options: dict[str, dict]):
        self.names = list(names)
        self.options = options

    @classmethod
    def create(cls, scenario) -> StepProbes | None:
        names = scenario.probes.each_step
        return cls(names, scenario.probes.options) if names else None

    def at(self, ctx: RunContext, mark: Mark) -> None:
        if mark.kind != STEP_END or mark.step == 0:
            return

        for name in self.names:
            ctx.events.emit("probe.start", probe=name, step=mark.step)
            run_probe(name, ctx.cluster, ctx.run, self.options.get(name, {}), step=mark.step, run_id=ctx.run_id)
            ctx.events.emit("probe.end", probe=name, step=mark.step)
