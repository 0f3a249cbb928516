"""The measurements a scenario run takes, each one small module behind :class:`StepMeasurement`,
registered by name in :data:`REGISTRY` (as kube-burner's ``factory.go`` does).

A factory takes the :class:`~crdscale.scenario.config.Scenario` and returns the measurement, or
``None`` when the scenario does not ask for it. To add one: a module here with a
:class:`Measurement` subclass and its ``create``, plus one line below (see docs/contributing.md,
"Add a measurement").
"""

from __future__ import annotations

from collections.abc import Callable

from crdscale.scenario.measurements.base import (
    PROFILE,
    STEP_END,
    STEP_SERVED,
    STEP_START,
    STEPS_END,
    Mark,
    Measurement,
    RunContext,
    StepMeasurement,
)
from crdscale.scenario.measurements.componentprofiles import ComponentProfiles
from crdscale.scenario.measurements.cpuprofile import CpuProfile
from crdscale.scenario.measurements.harness import HarnessCost
from crdscale.scenario.measurements.objectlists import ObjectLists
from crdscale.scenario.measurements.openapiv2 import OPENAPI_V2_PHASE, OpenApiV2Phase
from crdscale.scenario.measurements.procsamplers import ProcSamplers
from crdscale.scenario.measurements.profiles import Profiles
from crdscale.scenario.measurements.stepprobes import StepProbes

Factory = Callable[..., "StepMeasurement | None"]

# name -> factory. Registry order is the order measurements start and see each mark (they stop in
# reverse): at a step's end the OpenAPI v2 phase (which profiles again) comes before the probes.
REGISTRY: dict[str, Factory] = {
    "harness": HarnessCost.create,
    "proc": ProcSamplers.create,
    "profiles": Profiles.create,
    "component-profiles": ComponentProfiles.create,  # after kube-apiserver's, at the same marks
    "cpu-profile": CpuProfile.create,
    "openapi-v2": OpenApiV2Phase.create,
    "probes": StepProbes.create,
    "object-lists": ObjectLists.create,
}


def for_scenario(scenario) -> list[StepMeasurement]:
    """The measurements ``scenario`` asks for, in registry order."""
    made = (factory(scenario) for factory in REGISTRY.values())
    return [m for m in made if m is not None]


__all__ = [
    "OPENAPI_V2_PHASE",
    "PROFILE",
    "REGISTRY",
    "STEPS_END",
    "STEP_END",
    "STEP_SERVED",
    "STEP_START",
    "Mark",
    "Measurement",
    "RunContext",
    "StepMeasurement",
    "for_scenario",
]
