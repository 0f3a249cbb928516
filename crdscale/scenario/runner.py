"""Run a scenario end to end and leave behind everything needed to explain it.

Flow: target up (local control plane or a kubeconfig) -> metrics source
(Prometheus or direct scrapes) -> baseline profiles -> for each step: install,
profile ("installed" phase), serve, settle, profile, probes -> export series ->
manifest ``completed``. Ctrl-C/SIGTERM end the run as ``interrupted``, a dead
API server as ``failed``; in every case the run directory stays readable.

The runner only sequences the steps. What is measured at each point of a step (profiles, the
OpenAPI v2 phase, probes, /proc samplers, LIST timing, the harness's cost) is a registered
:mod:`crdscale.scenario.measurements` module that acts at the :class:`Mark`\\ s the runner passes.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

from crdscale.collect.prometheus import PrometheusAccess
from crdscale.collect.sources import LocalPrometheus, MetricsSource, open_metrics_source
from crdscale.crds.install import Installer
from crdscale.crds.serve import Server
from crdscale.errors import ClusterError, CrdscaleError, RunInterrupted
from crdscale.ownership import new_run_id
from crdscale.paths import runs_dir
from crdscale.rundir import RunWriter
from crdscale.scenario import targets
from crdscale.scenario.config import Scenario
from crdscale.scenario.crdset import load_crd_set
from crdscale.scenario.measurements import (
    OPENAPI_V2_PHASE,
    PROFILE,
    STEP_END,
    STEP_SERVED,
    STEP_START,
    STEPS_END,
    Mark,
    RunContext,
    StepMeasurement,
    for_scenario,
)
from crdscale.scenario.objectsteps import grow_objects
from crdscale.scenario.progress import Progress, StepSummary, current_metrics
from crdscale.scenario.series import export_series
from crdscale.scenario.settle import Settler
from crdscale.scenario.targets import RunTarget
from crdscale.scenario.watchdog import Watchdog as _Watchdog

# Kept importable from here: the phase name, the CRD loader scripts use, the CLI's callbacks.
__all__ = ["OPENAPI_V2_PHASE", "Progress", "ScenarioRunner", "StepSummary", "load_crd_set", "run_scenario"]

OpenTarget = Callable[[RunContext, ExitStack], RunTarget]
OpenSource = Callable[[RunContext, RunTarget], MetricsSource]


def open_target(ctx: RunContext, stack: ExitStack) -> RunTarget:
    """The scenario's target, up (see :func:`crdscale.scenario.targets.open_target`)."""
    return targets.open_target(ctx.scenario, ctx.run, ctx.events, ctx.run_id, stack)


def open_source(ctx: RunContext, target: RunTarget) -> MetricsSource:
    """The scenario's metrics source (not started), from :func:`crdscale.collect.sources.open_metrics_source`."""
    m, run = ctx.scenario.metrics, ctx.run
    source = open_metrics_source(
        m.source,
        float(m.scrape_interval_seconds),
        cluster=target.cluster,
        local=targets.local_endpoints(target.plane),
        remote=PrometheusAccess.from_target(ctx.scenario.target.table()),
        job_labels=ctx.scenario.target.prometheus_jobs,
        apiserver_interval_s=float(m.apiserver_metrics_interval_seconds),
        cpu_budget=float(m.apiserver_cpu_budget_percent) / 100,
        tsdb_dir=run.prometheus_tsdb,
        on_spawn=lambda pid, log: target.adopt(run, "prometheus", pid, log),
        on_cadence=lambda change: ctx.events.emit("metrics.cadence", **change),
        sink=lambda frame: run.write_series_chunk(frame, "scrape"),
        on_fallback=ctx.progress.message,
    )
    if isinstance(source, LocalPrometheus):
        run.record_binaries({"prometheus": source.binary.path})
    return source


class ScenarioRunner:
    """Runs one :class:`Scenario`; see the module docstring for the flow.

    Parameters:
        scenario: the validated scenario.
        runs_parent: where the run directory goes (default ``./runs``).
        progress: a :class:`Progress` (the CLI's draws bars; default silent).
        run_name: names the run directory ``<UTC timestamp>-<run_name>`` (default: the
            scenario's name; an experiment passes the cell's).
        open_target, open_source, measurements: the target, the metrics source and the
            measurements (default: the scenario's, see :func:`open_target`, :func:`open_source`
            and :func:`crdscale.scenario.measurements.for_scenario`); tests pass fakes.
        watchdog: watch the server and the machine's memory (tests of a fake server turn it off).
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        runs_parent: str | Path | None = None,
        progress: Progress | None = None,
        run_name: str | None = None,
        open_target: OpenTarget = open_target,
        open_source: OpenSource = open_source,
        measurements: list[StepMeasurement] | None = None,
        watchdog: bool = True,
    ):
        self.scenario = scenario
        self.progress = progress or Progress()
        self.run_id = new_run_id()
        self.run = RunWriter.create(runs_parent or runs_dir(), run_name or scenario.name)
        self.started = time.monotonic()
        self._cpu_at_start = os.times()
        self.measurements = list(measurements) if measurements is not None else for_scenario(scenario)
        self._open_target, self._open_source, self._watch = open_target, open_source, watchdog
        self.ctx: RunContext | None = None
        self.watchdog: _Watchdog | None = None

    # ------------------------------------------------------------ public

    def execute(self) -> RunWriter:
        """Run the scenario. Returns the run directory; raises :class:`CrdscaleError`
        subclasses (after recording them in the manifest) on failure or interruption."""
        self.run.start_manifest(run_id=self.run_id, scenario=self.scenario.raw, scenario_file=self.scenario.source_path)
        self.ctx = RunContext(
            self.scenario, self.run, self.run.events, self.run_id, self.progress, cpu_at_start=self._cpu_at_start
        )
        self.ctx.mark = self._mark
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        interrupted_by: list[str] = []

        def on_signal(signum, _frame):
            interrupted_by.append(signal.Signals(signum).name)
            raise KeyboardInterrupt

        in_main = threading.current_thread() is threading.main_thread()
        if in_main:
            for sig in previous:
                signal.signal(sig, on_signal)
        status, reason, error = "completed", None, None
        try:
            with ExitStack() as stack:
                self._run(stack)
        except KeyboardInterrupt:
            if self.watchdog and self.watchdog.reason:
                status, reason = "failed", self.watchdog.reason
                error = ClusterError(f"run failed: {reason}; run directory: {self.run.path}")
            else:
                status, reason = "interrupted", f"{(interrupted_by or ['SIGINT'])[0]} received"
                error = RunInterrupted(f"run interrupted ({reason}); partial results kept in {self.run.path}")
        except CrdscaleError as err:
            if self.watchdog and self.watchdog.reason:
                reason = self.watchdog.reason
            else:
                reason = str(err)
            status = "failed"
            error = type(err)(f"run failed: {reason}; run directory: {self.run.path}")
        except Exception as err:  # a bug: record it, keep the traceback
            status, reason = "failed", f"{type(err).__name__}: {err}"
            self._finish(status, reason)
            raise
        finally:
            if in_main:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        self._finish(status, reason)
        if error is not None:
            raise error
        return self.run

    # ------------------------------------------------------------ phases

    def _finish(self, status: str, reason: str | None) -> None:
        self.run.events.emit("run.end", status=status, reason=reason, run_id=self.run_id)
        self.run.finish(status, reason)

    def _mark(self, mark: Mark) -> None:
        for measurement in self.measurements:
            measurement.at(self.ctx, mark)

    def _run(self, stack: ExitStack) -> None:
        sc, ctx = self.scenario, self.ctx
        crds, crd_info = load_crd_set(sc)
        self.run.write_crd_summary(crd_info)
        self.run.update_manifest(crds=crd_info["summary"])
        ctx.events.emit("run.start", run_id=self.run_id, scenario=sc.name, crds=len(crds))

        target = self._open_target(ctx, stack)
        ctx.cluster, ctx.plane = target.cluster, target.plane
        self._start_metrics(stack, target)
        if self._watch:
            # Only a run on the main thread (the CLI) can be interrupted; elsewhere the
            # next request to the dead server fails the run instead.
            self.watchdog = _Watchdog(
                ctx.cluster,
                ctx.plane,
                interrupt_main=threading.current_thread() is threading.main_thread(),
                min_available_bytes=int(sc.steps.memory_guard_mib) * 2**20,
            )
            self.watchdog.start()
            stack.callback(self.watchdog.stop)

        installer = Installer(
            ctx.cluster,
            run_id=self.run_id,
            events=ctx.events,
            concurrency=sc.steps.concurrency,
            qps=sc.steps.qps or None,
            establish_timeout_s=sc.steps.establish_timeout_seconds,
            on_rejected=sc.steps.on_rejected,
        )
        stack.callback(installer.close)
        server = Server(
            ctx.cluster,
            mode=sc.steps.serve,
            events=ctx.events,
            run_id=self.run_id,
            clients=sc.steps.serve_clients,
            record_process=self.run.record_process,
        )
        stack.callback(server.close)
        ctx.settle = Settler(sc.steps, ctx.cluster, ctx.events, self.progress).settle

        # Growing objects: the CRDs in objects.crd_steps steps, then the object steps (see Scenario.object_steps).
        sizes = sc.crd_step_sizes(len(crds))
        total_steps = len(sizes) + len(sc.object_steps())
        self.progress.message(f"run directory: {self.run.path}")
        ctx.settle("baseline")
        self._mark(Mark(PROFILE, 0, 0))
        self._mark(Mark(STEP_END, 0, 0))
        installed = 0
        for index, size in enumerate(sizes, start=1):
            step_crds = crds[installed : installed + size]
            self.progress.step_started(index, total_steps, size)
            ctx.events.emit("step.start", step=index, crds_before=installed, crds_in_step=size, run_id=self.run_id)
            self._mark(Mark(STEP_START, index, installed + size))
            t0 = time.monotonic()
            result = installer.install_step(index, step_crds, on_established=lambda n=1: self.progress.advance(n))
            install_s = time.monotonic() - t0
            installed += size
            serve_s = 0.0
            if sc.steps.serve != "none":
                if sc.profiles.installed_phase:
                    # Settle first: right after Established the OpenAPI controllers are still
                    # rebuilding specs, and that transient heap would be charged to installing.
                    ctx.settle(f"step {index} installed")
                    self._mark(Mark(PROFILE, index, installed, phase="installed"))
                t1 = time.monotonic()
                server.serve(index, result.served_resources())  # rejected CRDs have nothing to serve
                serve_s = time.monotonic() - t1
            self._mark(Mark(STEP_SERVED, index, installed))
            ctx.settle(f"step {index}")
            self._mark(Mark(PROFILE, index, installed))
            self._mark(Mark(STEP_END, index, installed))
            summary = StepSummary(index, total_steps, installed, **current_metrics(ctx.cluster), install_s=install_s,
                                  serve_s=serve_s, elapsed_s=time.monotonic() - self.started)  # fmt: skip
            ctx.events.emit("step.end", run_id=self.run_id, **result.counts(), **asdict(summary))
            self.progress.step_finished(summary)
        if sc.grows_objects:
            grow_objects(ctx, crds, first_step=len(sizes) + 1, total_steps=total_steps, started=self.started)
        self._mark(Mark(STEPS_END, total_steps, installed))
        self._hold(installed)

    def _start_metrics(self, stack: ExitStack, target: RunTarget) -> None:
        ctx = self.ctx
        ctx.source = source = self._open_source(ctx, target)
        stack.callback(self._stop_source, target)
        source.start()
        for measurement in self.measurements:
            measurement.start(ctx)
            stack.callback(measurement.stop, ctx)
        # Callbacks unwind last-in first-out: the export runs before the measurements and the source
        # stop, after the last step -- or after a failure or Ctrl-C.
        stack.callback(export_series, ctx, self.measurements)
        ctx.window_start = datetime.now(timezone.utc)
        self.run.update_manifest(metrics=source.describe())
        ctx.events.emit("metrics.start", source=source.kind)

    def _stop_source(self, target: RunTarget) -> None:
        self.ctx.source.stop()
        for measurement in self.measurements:
            measurement.collect(self.ctx)
        target.release(self.ctx.source.harness_pid)

    def _hold(self, crds: int) -> None:
        """Keep the last step's resources served for ``steps.hold_seconds``: the series show
        where memory settles once the install churn is over (the one-pager's "jumps, then settles")."""
        seconds = float(self.scenario.steps.hold_seconds or 0)
        if seconds > 0:
            self.progress.message(f"holding {crds} served CRDs for {seconds:.0f} s")
            self.ctx.events.emit("hold.start", seconds=seconds, crds=crds)
            time.sleep(seconds)
            self.ctx.events.emit("hold.end", seconds=seconds, crds=crds)


def run_scenario(scenario: Scenario, **kwargs) -> RunWriter:
    """Convenience wrapper: ``ScenarioRunner(scenario, **kwargs).execute()``."""
    return ScenarioRunner(scenario, **kwargs).execute()
