"""The contract between the runner and what it measures: a run goes through marks (a step starts, a
profile is due, a step ends), and each registered :class:`StepMeasurement` acts at the marks it cares
about, as clusterloader2's measurements (``Execute``/``Dispose``) and kube-burner's (``Start``/``Stop``/
``Collect``) do."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pandas as pd

    from crdscale.cluster.clients import Cluster
    from crdscale.cluster.local import LocalControlPlane
    from crdscale.collect.sources import MetricsSource
    from crdscale.rundir import EventLog, RunWriter
    from crdscale.scenario.config import Scenario

# The marks of a run, in the order a step passes them.
STEP_START = "step.start"  # a step begins (before its install or object writes)
STEP_SERVED = "step.served"  # a CRD step's resources are installed and served (before its settle)
PROFILE = "profile"  # settled: profiles are due (phase None: end of step; "installed"; "openapiv2")
STEP_END = "step.end"  # the step's end profiles are taken (step 0: the baseline)
STEPS_END = "steps.end"  # every step is done (before the hold)


@dataclass(frozen=True)
class Mark:
    """A point of the run: ``kind`` (above), the ``step`` (0: baseline) and the CRDs installed then;
    ``phase`` for profile marks; ``grow`` is ``"objects"`` on the steps that add objects."""

    kind: str
    step: int
    crds: int
    phase: str | None = None
    grow: str = "crds"


@dataclass
class RunContext:
    """What measurements share with the runner. ``settle(label)`` waits as a step does before its
    profiles; ``mark(m)`` hands a mark to every measurement (a measurement that settles and wants
    profiles again calls ``mark(Mark(PROFILE, ...))``)."""

    scenario: Scenario
    run: RunWriter
    events: EventLog
    run_id: str
    progress: Any
    cluster: Cluster | None = None
    plane: LocalControlPlane | None = None
    source: MetricsSource | None = None
    settle: Callable[[str], None] = lambda label: None
    mark: Callable[[Mark], None] = lambda mark: None
    # crdscale's own CPU times when the run began (the harness cost is measured from there).
    cpu_at_start: os.times_result = field(default_factory=os.times)
    window_start: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    series: pd.DataFrame | None = None  # the exported series, once written
    # steps.grow = "objects": (targets by kind, the ObjectWriter) once the objects are written.
    objects: tuple[dict, Any] | None = None


class StepMeasurement(Protocol):
    """One measurement of a run. The runner calls, in registry order:

    - ``start(ctx)`` once the target and the metrics source are up;
    - ``at(ctx, mark)`` at every :class:`Mark`;
    - ``series(ctx, start, end)`` when the run's series are exported (rows to add, or ``None``);
    - ``stop(ctx)`` on the way out, in reverse order, while the metrics source still runs (also after a
      failure or Ctrl-C);
    - ``collect(ctx)`` after the metrics source stopped (its own cost is known then).
    """

    name: str

    def start(self, ctx: RunContext) -> None: ...

    def at(self, ctx: RunContext, mark: Mark) -> None: ...

    def series(self, ctx: RunContext, start: datetime, end: datetime) -> pd.DataFrame | None: ...

    def stop(self, ctx: RunContext) -> None: ...

    def collect(self, ctx: RunContext) -> None: ...


class Measurement:
    """A :class:`StepMeasurement` that does nothing at every call: subclasses override what they need."""

    name = "measurement"

    def start(self, ctx: RunContext) -> None:
        pass

    def at(self, ctx: RunContext, mark: Mark) -> None:
        pass

    def series(self, ctx: RunContext, start: datetime, end: datetime) -> pd.DataFrame | None:
        return None

    def stop(self, ctx: RunContext) -> None:
        pass

    def collect(self, ctx: RunContext) -> None:
        pass
