"""Heap, allocs and goroutine profiles of kube-apiserver at every profile mark (``profiles.kinds``),
saved as ``<kind>-stepNN-crdsNNNN[-phase].pb.gz``. CPU is sampled while a step installs instead
(:mod:`.cpuprofile`), not while the server idles."""

from __future__ import annotations

from crdscale.collect.pprof import fetch_profile
from crdscale.scenario.measurements.base import PROFILE, Mark, Measurement, RunContext


class Profiles(Measurement):
    name = "profiles"

    def __init__(self, kinds: list[str]):
        self.kinds = [kind for kind in kinds if kind != "cpu"]

    @classmethod
    def create(cls, scenario) -> Profiles | None:
        return cls(scenario.profiles.kinds)

    def at(self, ctx: RunContext, mark: Mark) -> None:
        if mark.kind != PROFILE:
            return
        for kind in self.kinds:
            data = fetch_profile(ctx.cluster, kind)
            ctx.run.write_profile(kind, mark.step, mark.crds, mark.phase, data)
