"""Run a scenario end to end and leave behind everything needed to explain it.

Flow: target up (local control plane or a kubeconfig) -> metrics source
(Prometheus or direct scrapes) -> baseline profiles -> for each step: install,
profile ("installed" phase), serve, settle, profile, probes -> export series ->
manifest ``completed``. Ctrl-C/SIGTERM end the run as ``interrupted``, a dead
API server as ``failed``; in every case the run directory stays readable.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from crdscale.analysis.harness import harness_cost
from crdscale.cluster.clients import ApiError, Cluster, connect
from crdscale.cluster.gobuild import go_version
from crdscale.cluster.local import LocalControlPlane
from crdscale.collect import metrics as metric_defs
from crdscale.collect.pprof import fetch_profile
from crdscale.collect.prometheus import PrometheusAccess
from crdscale.collect.promtext import parse_exposition
from crdscale.collect.sources import (
    DirectScraper,
    LocalPrometheus,
    ProcSampler,
    RemotePrometheus,
)
from crdscale.collect.workqueues import QUEUE_METRICS, wait_drained
from crdscale.errors import BinaryError, ClusterError, CrdscaleError, RunInterrupted
from crdscale.ownership import new_run_id
from crdscale.paths import runs_dir
from crdscale.proc import available_memory_bytes
from crdscale.rundir import EventLog, RunWriter, layout
from crdscale.rundir.layout import OPENAPI_V2_PHASE
from crdscale.scenario.config import Scenario
from crdscale.units import fmt_bytes, fmt_count

log = logging.getLogger(__name__)


@dataclass
class StepSummary:
    """One line per step: what the CLI prints and the events log records."""

    step: int
    steps: int
    crds: int
    rss_bytes: float | None
    heap_inuse_bytes: float | None
    open_fds: float | None
    goroutines: float | None
    install_s: float
    serve_s: float
    elapsed_s: float
    # Objects per kind after the step (steps.grow = "objects"); None for a CRD step.
    objects: dict[str, int] | None = None

    def line(self) -> str:
        def mib(v):
            return fmt_bytes(v, unit="MiB", digits=0, missing="?")

        def num(v):
            return fmt_count(v, missing="?")

        objects = (
            " + " + ", ".join(f"{n:,} {kind}" for kind, n in self.objects.items()) if self.objects is not None else ""
        )
        return (
            f"step {self.step}/{self.steps}: {self.crds} CRDs{objects} | RSS {mib(self.rss_bytes)} | heap in use "
            f"{mib(self.heap_inuse_bytes)} | open fds {num(self.open_fds)} | goroutines {num(self.goroutines)} | "
            f"install {self.install_s:.1f} s, serve {self.serve_s:.1f} s | elapsed {self.elapsed_s:.0f} s"
        )


# Seconds with no request before the object LISTs: the background their CPU is net of.
OBJECT_LISTS_IDLE_S = 5.0


class Progress:
    """Callbacks the runner makes; the CLI renders them (progress bars), libraries stay quiet."""

    def message(self, text: str) -> None: ...

    def step_started(self, step: int, steps: int, crds: int, unit: str = "CRD") -> None: ...

    def advance(self, n: int = 1) -> None: ...

    def step_finished(self, summary: StepSummary) -> None: ...


class _Watchdog(threading.Thread):
    """Ends the run (interrupting the main thread) when the API server dies.

    Local target: the recorded kube-apiserver/etcd processes are checked every
    second, and so is the machine's available memory: below ``min_available_bytes``
    the run stops as failed (reason naming memory) before the kernel's OOM killer
    picks a victim — which could be crdscale itself, losing the run's end.
    ``/readyz`` failing for ``unready_limit_s`` (checked every 5 s): 15 s for a remote
    target, where nothing else tells a dead server from a slow one; 180 s for a local one,
    whose processes are watched directly, so a failing ``/readyz`` there means a saturated
    server (a 5,000-CRD run on 2 busy cores timed /readyz out for 15 s while it served on).
    """

    CHECK_EVERY_S = 5.0

    def __init__(
        self,
        cluster: Cluster,
        plane: LocalControlPlane | None,
        *,
        interrupt_main: bool = True,
        min_available_bytes: int = 0,
        available: Callable[[], int | None] = available_memory_bytes,
        unready_limit_s: float | None = None,
    ):
        super().__init__(name="crdscale-watchdog", daemon=True)
        self.unready_limit_s = unready_limit_s if unready_limit_s is not None else (15.0 if plane is None else 180.0)
        self.interrupt_main = interrupt_main
        self.min_available_bytes = min_available_bytes
        self.available = available
        self.cluster = cluster
        self.plane = plane
        self.reason: str | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        failures, last_http = 0, time.monotonic()
        while not self._stop_event.wait(1.0):
            if self.plane is not None:
                dead = [p for p in self.plane.processes if not p.alive()]
                if dead:
                    self._fail(f"{dead[0].name} (pid {dead[0].pid}) exited unexpectedly")
                    return
                left = self.available() if self.min_available_bytes else None
                if left is not None and left < self.min_available_bytes:
                    self._fail(
                        f"memory guard: only {fmt_bytes(left, unit='MiB', digits=0)} of memory available, below the "
                        f"{fmt_bytes(self.min_available_bytes, unit='MiB', digits=0)} guard (steps.memory_guard_mib); "
                        "stopped before the OOM killer"
                    )
                    return
            if time.monotonic() - last_http >= self.CHECK_EVERY_S:
                last_http = time.monotonic()
                try:
                    ok = self.cluster.get("/readyz", timeout=self.CHECK_EVERY_S).status_code == 200
                except ClusterError:
                    ok = False
                failures = 0 if ok else failures + 1
                if failures * self.CHECK_EVERY_S >= self.unready_limit_s:
                    alive = " although its process runs (saturated?)" if self.plane is not None else ""
                    self._fail(f"API server {self.cluster.server} not ready for {self.unready_limit_s:.0f} s{alive}")
                    return

    def _fail(self, reason: str) -> None:
        if self._stop_event.is_set():  # the run is already shutting the server down
            return
        self.reason = reason
        # A real signal to the main thread: unlike _thread.interrupt_main() it also
        # cuts short a blocking sleep (the settle period) or socket wait.
        main = threading.main_thread()
        if main.ident is not None and self.interrupt_main:
            signal.pthread_kill(main.ident, signal.SIGINT)

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=10)


def _current_metrics(cluster: Cluster) -> dict[str, float]:
    """RSS, heap in use, open fds and goroutines from one ``/metrics`` scrape."""
    try:
        text = cluster.get("/metrics", timeout=30).text
    except ClusterError:
        return {}
    wanted = {"process_resident_memory_bytes", "go_memstats_heap_inuse_bytes", "process_open_fds", "go_goroutines"}
    return {name: value for name, labels, value in parse_exposition(text, wanted) if not labels}


def load_crd_set(scenario: Scenario) -> tuple[list[dict], dict]:
    """The CRDs a run of ``scenario`` installs (generated or loaded; with the payload field the flat, nested
    and list object shapes need) and where they came from, with their summary."""
    from crdscale.crds import summary as crd_summary

    if scenario.crds.source == "generate":
        from crdscale.crds.generate import generate_crds

        params = scenario.generator_params()
        crds = generate_crds(params)
        origin = {"source": "generate", "params": params.to_dict()}
    else:
        from crdscale.crds.load import load_crds

        loaded = load_crds(scenario.crds.source)
        crds = list(loaded.crds)
        origin = {"source": scenario.crds.source, "skipped_documents": getattr(loaded, "skipped", None)}
    if scenario.grows_objects and scenario.objects.shape != "schema":
        from crdscale.crds.objects import with_payload_field

        # The flat, nested and list shapes need a field that keeps unknown fields (else pruned).
        crds = [with_payload_field(crd) for crd in crds]
    summary = crd_summary.summarize(crds)
    return crds, {**origin, "summary": summary.to_dict() if hasattr(summary, "to_dict") else asdict(summary)}


class ScenarioRunner:
    """Runs one :class:`Scenario`; see the module docstring for the flow.

    Parameters:
        scenario: the validated scenario.
        runs_parent: where the run directory goes (default ``./runs``).
        progress: a :class:`Progress` (the CLI's draws bars; default silent).
        run_name: names the run directory ``<UTC timestamp>-<run_name>`` (default: the
            scenario's name; an experiment passes the cell's).
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        runs_parent: str | Path | None = None,
        progress: Progress | None = None,
        run_name: str | None = None,
    ):
        self.scenario = scenario
        self.progress = progress or Progress()
        self.run_id = new_run_id()
        self.run = RunWriter.create(runs_parent or runs_dir(), run_name or scenario.name)
        self.events: EventLog | None = None
        self.started = time.monotonic()
        self.window_start = datetime.now(timezone.utc)
        self.plane: LocalControlPlane | None = None
        self.cluster: Cluster | None = None
        self.source = None
        self.watchdog: _Watchdog | None = None
        self._series = None  # the exported series, for the harness-cost summary
        self.proc_sampler: ProcSampler | None = None
        self.controller_manager_sampler: ProcSampler | None = None
        self._cpu_at_start = os.times()

    # ------------------------------------------------------------ public

    def execute(self) -> RunWriter:
        """Run the scenario. Returns the run directory; raises :class:`CrdscaleError`
        subclasses (after recording them in the manifest) on failure or interruption."""
        self.run.start_manifest(run_id=self.run_id, scenario=self.scenario.raw, scenario_file=self.scenario.source_path)
        self.events = self.run.events
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
        if self.events:
            self.events.emit("run.end", status=status, reason=reason, run_id=self.run_id)
        self.run.finish(status, reason)

    def _run(self, stack: ExitStack) -> None:
        sc = self.scenario
        crds, crd_info = load_crd_set(sc)
        self.run.write_crd_summary(crd_info)
        self.run.update_manifest(crds=crd_info["summary"])
        self.events.emit("run.start", run_id=self.run_id, scenario=sc.name, crds=len(crds))

        self._start_target(stack)
        self._start_metrics(stack)
        # Only a run on the main thread (the CLI) can be interrupted; elsewhere the
        # next request to the dead server fails the run instead.
        self.watchdog = _Watchdog(
            self.cluster,
            self.plane,
            interrupt_main=threading.current_thread() is threading.main_thread(),
            min_available_bytes=int(sc.steps.memory_guard_mib) * 2**20,
        )
        self.watchdog.start()
        stack.callback(self.watchdog.stop)

        from crdscale.crds.install import Installer
        from crdscale.crds.serve import Server

        installer = Installer(
            self.cluster,
            run_id=self.run_id,
            events=self.events,
            concurrency=sc.steps.concurrency,
            qps=sc.steps.qps or None,
            establish_timeout_s=sc.steps.establish_timeout_seconds,
            on_rejected=sc.steps.on_rejected,
        )
        stack.callback(installer.close)
        server = Server(
            self.cluster,
            mode=sc.steps.serve,
            events=self.events,
            run_id=self.run_id,
            clients=sc.steps.serve_clients,
            record_process=self.run.record_process,
        )
        stack.callback(server.close)

        # Growing objects: every CRD in one step, then the object steps (see Scenario.object_steps).
        sizes = [len(crds)] if sc.grows_objects and crds else sc.step_sizes(len(crds))
        total_steps = len(sizes) + len(sc.object_steps())
        self.progress.message(f"run directory: {self.run.path}")
        self._settle("baseline")
        self._take_profiles(step=0, crds=0)
        self._openapi_v2_phase(step=0, crds=0)
        installed = 0
        for index, size in enumerate(sizes, start=1):
            step_crds = crds[installed : installed + size]
            self.progress.step_started(index, total_steps, size)
            self.events.emit("step.start", step=index, crds_before=installed, crds_in_step=size, run_id=self.run_id)
            cpu_capture = self._start_cpu_profile(step=index, crds=installed + size)
            t0 = time.monotonic()
            result = installer.install_step(index, step_crds, on_established=lambda n=1: self.progress.advance(n))
            install_s = time.monotonic() - t0
            installed += size
            serve_s = 0.0
            if sc.steps.serve != "none":
                if sc.profiles.installed_phase:
                    # Settle first: right after Established the OpenAPI controllers are still
                    # rebuilding specs, and that transient heap would be charged to installing.
                    self._settle(f"step {index} installed")
                    self._take_profiles(step=index, crds=installed, phase="installed")
                t1 = time.monotonic()
                server.serve(index, result.served_resources())  # rejected CRDs have nothing to serve
                serve_s = time.monotonic() - t1
            if cpu_capture is not None:
                cpu_capture.join()
            self._settle(f"step {index}")
            self._take_profiles(step=index, crds=installed)
            self._openapi_v2_phase(step=index, crds=installed)
            self._run_probes(index)
            current = _current_metrics(self.cluster)
            summary = StepSummary(
                step=index,
                steps=total_steps,
                crds=installed,
                rss_bytes=current.get("process_resident_memory_bytes"),
                heap_inuse_bytes=current.get("go_memstats_heap_inuse_bytes"),
                open_fds=current.get("process_open_fds"),
                goroutines=current.get("go_goroutines"),
                install_s=install_s,
                serve_s=serve_s,
                elapsed_s=time.monotonic() - self.started,
            )
            self.events.emit("step.end", run_id=self.run_id, **result.counts(), **asdict(summary))
            self.progress.step_finished(summary)
        if sc.grows_objects:
            self._grow_objects(crds, first_step=len(sizes) + 1, total_steps=total_steps)
        self._hold(installed)

    def _grow_objects(self, crds: list[dict], *, first_step: int, total_steps: int) -> None:
        """The object steps of ``steps.grow = "objects"``: each adds one kind's objects, then
        settles and profiles as a CRD step does. ``step.end`` records the objects per kind so
        far and their JSON bytes as sent (``objects``, ``object_bytes``): the x of the
        per-object fits (crdscale.analysis.perobject)."""
        from crdscale.crds.objects import CUSTOM_RESOURCES
        from crdscale.crds.populate import ObjectWriter, control_target, custom_resource_target, namespace_name

        sc, o = self.scenario, self.scenario.objects
        writer = ObjectWriter(
            self.cluster,
            run_id=self.run_id,
            size=o.bytes,
            shape=o.shape,
            managed_fields=o.managed_fields,
            apply=o.apply,
            concurrency=o.concurrency,
        )
        cr_namespace = namespace_name(self.run_id, "objects")
        if any(c["spec"].get("scope", "Cluster") == "Namespaced" for c in crds):
            writer.ensure_namespace(cr_namespace)
        targets = {CUSTOM_RESOURCES: [custom_resource_target(c, cr_namespace) for c in crds]}
        for kind in o.control:
            targets[kind] = [control_target(kind, writer.ensure_namespace(namespace_name(self.run_id, kind)))]
        stored: dict[str, dict] = {}
        # The resource label values of each kind's series (apiserver_resource_size_estimate_bytes).
        resources = {kind: sorted({t.path.rsplit("/", 1)[1] for t in ts}) for kind, ts in targets.items()}
        for offset, (kind, per_crd) in enumerate(sc.object_steps()):
            index = first_step + offset
            # A control kind gets as many objects as all CRDs together: the same count x bytes.
            per_target = per_crd if kind == CUSTOM_RESOURCES else per_crd * len(crds)
            adding = per_target * len(targets[kind])
            self.progress.step_started(index, total_steps, adding, unit="object")
            self.events.emit(
                "step.start",
                step=index,
                crds_before=len(crds),
                crds_in_step=0,
                grow="objects",
                object_kind=kind,
                objects_in_step=adding,
                run_id=self.run_id,
            )
            t0 = time.monotonic()
            writer.write(targets[kind], per_target, progress=self.progress.advance)
            write_s = time.monotonic() - t0
            # The profile must see this step's objects in the watch cache, not the next step's.
            waited = writer.wait_cached(targets[kind])
            self.events.emit("objects.cached", step=index, object_kind=kind, seconds=round(waited, 3))
            if kind not in stored:
                sent = o.bytes
                stored[kind] = {"sent_bytes": sent, "stored_bytes": writer.stored_bytes(targets[kind][0])}
                self.run.update_manifest(objects={**asdict(o), "kinds": stored, "resources": resources})
            self._settle(f"step {index}")
            self._take_profiles(step=index, crds=len(crds))
            self._run_probes(index)
            current = _current_metrics(self.cluster)
            summary = StepSummary(
                step=index,
                steps=total_steps,
                crds=len(crds),
                rss_bytes=current.get("process_resident_memory_bytes"),
                heap_inuse_bytes=current.get("go_memstats_heap_inuse_bytes"),
                open_fds=current.get("process_open_fds"),
                goroutines=current.get("go_goroutines"),
                install_s=write_s,
                serve_s=0.0,
                elapsed_s=time.monotonic() - self.started,
                objects=dict(writer.counts.objects),
            )
            self.events.emit(
                "step.end",
                run_id=self.run_id,
                grow="objects",
                object_kind=kind,
                objects_in_step=adding,
                object_bytes=dict(writer.counts.bytes),
                **asdict(summary),
            )
            self.progress.step_finished(summary)
        if o.list_repeats > 0:
            self._time_object_lists(targets, writer, step=first_step + len(sc.object_steps()) - 1)

    def _time_object_lists(self, targets: dict, writer, *, step: int) -> None:
        """Time LISTs of every kind's objects once all are in, after the last profile (a LIST's
        garbage stays out of the heap fits): with a resource's watch cache off
        (``--watch-cache-sizes=<resource>#0``) its LISTs go to etcd, and this is where that cost shows.
        Written as ``probes/objects-lists-stepNN.parquet`` (:data:`crdscale.rundir.layout.OBJECT_LISTS`)."""
        from crdscale.collect.probes.listcost import measure_targets

        o = self.scenario.objects
        lists = {kind: [t.list_target() for t in ts] for kind, ts in targets.items()}
        counts = {t.list_target().group_resource: writer.written(t) for ts in targets.values() for t in ts}
        self.progress.message(f"timing LISTs of the objects ({', '.join(o.list_kinds)}, {o.list_repeats} each)")
        self.events.emit("objects.lists.start", step=step, kinds=list(o.list_kinds), repeats=o.list_repeats)
        table = measure_targets(
            self.cluster,
            lists,
            counts,
            repeats=int(o.list_repeats),
            kinds=o.list_kinds,
            # etcd's own background (compaction, leases, the controller-manager's watches) is what the
            # per-LIST CPU is net of: a longer idle window estimates it better than the probe's 1 s.
            idle_window_s=OBJECT_LISTS_IDLE_S,
        )
        name, table_name = layout.OBJECT_LISTS
        self.run.write_probe_table(name, step, table, table_name)
        self.events.emit("objects.lists.end", step=step, rows=int(len(table)))

    def _start_target(self, stack: ExitStack) -> None:
        sc, versions = self.scenario, {"crdscale": self.run.manifest()["versions"]["crdscale"]}
        if sc.is_local:
            t = sc.target
            self.plane = LocalControlPlane(
                t.kube_version,
                etcd=t.etcd,
                apiserver_binary=t.apiserver_binary,
                kube_source=t.kube_source,
                apiserver_flags=t.apiserver_flags,
                apiserver_env=t.env,
                controller_manager=t.controller_manager,
                controller_manager_controllers=t.controller_manager_controllers,
                name=f"run-{self.run_id}",
                keep_state=True,
            )
            self.events.emit("target.start", target="local")
            stack.callback(self._stop_plane)
            self.plane.start()
            self.cluster = self.plane.connect()
            versions.update(self.plane.versions)
            self.run.record_binaries(self.plane.state["binaries"], built_from=self.plane.state.get("built_from"))
            # Whether a controller-manager ran, with which controllers and flags: it decides what
            # every installed CRD costs (its garbage collector watches each one).
            self.run.update_manifest(controller_manager=self.plane.state.get("controller_manager", {}))
        else:
            self.cluster = connect(sc.target.kubeconfig, sc.target.context)
            stack.callback(self.cluster.close)
            try:
                versions["kube-apiserver"] = self.cluster.server_version()
            except ClusterError as err:
                raise ClusterError(f"target unreachable: {err}") from err
        info = self.cluster.get_json("/version", timeout=10)
        versions["kube-apiserver-go"] = info.get("goVersion")
        versions["go-toolchain"] = go_version()
        self.run.update_manifest(versions=versions, target={"kind": sc.target.kind, "server": self.cluster.server})
        self.events.emit("target.ready", server=self.cluster.server, version=versions.get("kube-apiserver"))

    def _stop_plane(self) -> None:
        if self.plane is None:
            return
        for record in self.plane.processes:
            self.run.copy_log(record.log)  # component logs help explain a failure
        self.plane.keep_state = False
        self.plane.stop()
        if self.events:
            self.events.emit("target.stop")

    def _start_metrics(self, stack: ExitStack) -> None:
        sc = self.scenario
        interval = float(sc.metrics.scrape_interval_seconds)
        wanted = sc.metrics.source
        remote = PrometheusAccess.from_target(sc.target.table())
        source = None
        if remote is not None:
            source = RemotePrometheus(remote, interval, job_labels=sc.target.prometheus_jobs)
        elif wanted in ("auto", "prometheus") and self.plane is not None:
            try:
                creds = self.plane.credentials
                source = LocalPrometheus(
                    f"127.0.0.1:{self.plane.ports['apiserver']}",
                    creds.ca_cert,
                    creds.admin_token_file,
                    f"127.0.0.1:{self.plane.ports['etcd_client']}",
                    interval_s=interval,
                    tsdb_dir=self.run.prometheus_tsdb,
                    on_spawn=self._adopt,
                    on_cadence=lambda change: self.events.emit("metrics.cadence", **change),
                    apiserver_interval_s=float(sc.metrics.apiserver_metrics_interval_seconds),
                    cpu_budget=float(sc.metrics.apiserver_cpu_budget_percent) / 100,
                    # in the instance's directory: `crdscale down` removes it after a kill -9
                    workdir=self.plane.state_dir / "prometheus",
                    controller_manager_target=(
                        f"127.0.0.1:{self.plane.ports['controller_manager']}"
                        if self.plane.controller_manager_metrics_url
                        else None
                    ),
                )
            except BinaryError:
                if wanted == "prometheus":
                    raise
                self.progress.message("no prometheus binary: scraping /metrics directly")
        if source is None:
            source = DirectScraper(
                self.cluster,
                self.plane.etcd_metrics_url if self.plane else None,
                interval,
                controller_manager_metrics_url=self.plane.controller_manager_metrics_url if self.plane else None,
                ca_file=self.plane.credentials.ca_cert if self.plane else None,
                sink=lambda frame: self.run.write_series_chunk(frame, "scrape"),
            )
        if isinstance(source, LocalPrometheus):
            self.run.record_binaries({"prometheus": source.binary.path})
        self.source = source
        stack.callback(self._stop_source)
        source.start()
        if self.plane is not None:
            # RSS, CPU and fds from /proc at the same interval: complete even when a /metrics
            # scrape of a server with thousands of CRDs takes longer than the interval.
            self.proc_sampler = ProcSampler(
                self.plane.apiserver_pid, interval, sink=lambda frame: self.run.write_series_chunk(frame, "proc")
            ).start()
            stack.callback(self.proc_sampler.stop)
            if self.plane.controller_manager_pid is not None:
                self.controller_manager_sampler = ProcSampler(
                    self.plane.controller_manager_pid,
                    interval,
                    job=layout.CONTROLLER_MANAGER_PROC_JOB,
                    sink=lambda frame: self.run.write_series_chunk(frame, "controller-manager-proc"),
                ).start()
                stack.callback(self.controller_manager_sampler.stop)
        # Callbacks unwind last-in first-out: the export runs before the source stops,
        # after the last step -- or after a failure or Ctrl-C.
        stack.callback(self._export_series)
        self.window_start = datetime.now(timezone.utc)
        self.run.update_manifest(metrics=source.describe())
        self.events.emit("metrics.start", source=source.kind)

    def _adopt(self, pid: int, log) -> None:
        """A harness process was started: record it where `crdscale down` and `crdscale recover` look."""
        self.run.record_process("prometheus", pid)
        if self.plane is not None:
            self.plane.adopt_process("prometheus", pid, log)

    def _stop_source(self) -> None:
        self.source.stop()
        self._harness_cost()
        proc = getattr(self.source, "proc", None)
        if proc is not None and self.plane is not None and self.plane.state:
            self.plane.release_process(proc.pid)

    def _harness_cost(self) -> None:
        """CPU seconds of crdscale itself and of Prometheus beside kube-apiserver's own during the
        run: the load the harness adds to the machine being measured (manifest ``harness``)."""
        now = os.times()
        own = (now.user - self._cpu_at_start.user) + (now.system - self._cpu_at_start.system)
        prometheus = getattr(self.source, "cpu_seconds", None)
        self.run.update_manifest(harness=harness_cost(self._series, own, prometheus))

    def _export_series(self) -> None:
        """Write the time series of the whole run window (also after failures)."""
        if self.source is None:
            return
        end = datetime.now(timezone.utc)
        try:
            df = self.source.series(self.window_start, end)
            for sampler in (self.proc_sampler, self.controller_manager_sampler):
                if sampler is not None:
                    df = pd.concat([df, sampler.series(self.window_start, end)], ignore_index=True)
        except Exception as err:  # keep the run's other results even if the query fails
            self.run.update_manifest(metrics_error=f"{type(err).__name__}: {err}")
            return
        self.run.write_series(df)
        self.run.drop_series_chunks()
        self._series = df
        manifest = self.run.manifest()
        manifest.setdefault("metrics", {}).update(
            window={"start": self.window_start.isoformat(), "end": end.isoformat()},
            rows=int(len(df)),
            series=sorted(df["metric"].unique().tolist()) if len(df) else [],
            **{k: v for k, v in self.source.describe().items() if k in ("job_interval_s", "cadence_changes")},
            resolution=metric_defs.resolution(df, self.window_start, end),
            resolution_proc=metric_defs.resolution(df, self.window_start, end, job=ProcSampler.JOB),
        )
        self.run.write_manifest(manifest)

    def _hold(self, crds: int) -> None:
        """Keep the last step's resources served for ``steps.hold_seconds``: the series show
        where memory settles once the install churn is over (the one-pager's "jumps, then settles")."""
        seconds = float(self.scenario.steps.hold_seconds or 0)
        if seconds > 0:
            self.progress.message(f"holding {crds} served CRDs for {seconds:.0f} s")
            self.events.emit("hold.start", seconds=seconds, crds=crds)
            time.sleep(seconds)
            self.events.emit("hold.end", seconds=seconds, crds=crds)

    def _settle(self, label: str) -> None:
        seconds = float(self.scenario.steps.settle_seconds)
        # Recorded with seconds 0 too: every settle, and so every settle.drained, has its start mark.
        self.events.emit("settle.start", label=label, seconds=seconds)
        if seconds > 0:
            time.sleep(seconds)
        if self.scenario.steps.settle_queues:
            self._wait_queues(label)

    def _wait_queues(self, label: str) -> None:
        """Wait until the work the step caused is done (crdscale.collect.workqueues): a profile taken
        while v1.24.0 still merges the whole OpenAPI spec charges the merge's transient heap to the CRDs."""
        timeout = float(self.scenario.steps.settle_queues_timeout_seconds)

        def scrape() -> str:
            # name[]: only these families are encoded, where the server supports it (>= 1.37)
            resp = self.cluster.get("/metrics", params={"name[]": list(QUEUE_METRICS)}, timeout=120)
            if resp.status_code >= 400:
                raise ApiError("GET /metrics", resp)
            return resp.text

        result = wait_drained(scrape, timeout_s=timeout)
        log.info("%s: %s", label, result.describe())
        if result.waited_s >= 5 or not result.drained:
            self.progress.message(f"{label}: {result.describe()}")
        self.events.emit(
            "settle.drained",
            label=label,
            drained=result.drained,
            seconds=round(result.waited_s, 3),
            scrapes=result.scrapes,
            queues=result.queues,
            **({"busy": result.busy} if result.busy else {}),
            **({"error": result.error} if result.error else {}),
        )

    def _take_profiles(self, *, step: int, crds: int, phase: str | None = None) -> None:
        # CPU is sampled while a step installs (see _start_cpu_profile), not while idle.
        for kind in self.scenario.profiles.kinds:
            if kind != "cpu":
                self._save_profile(kind, fetch_profile(self.cluster, kind), step=step, crds=crds, phase=phase)

    def _openapi_v2_phase(self, *, step: int, crds: int) -> None:
        """With ``profiles.openapi_v2``: GET /openapi/v2 as a client does, settle, profile again
        (phase ``openapiv2``). The server keeps what it built to answer until the next request after a
        CRD change (crdscale.collect.openapi), so the next step's end profile still holds this one's
        spec: the v2 cost per CRD is this phase's growth, and each step's increment is its profile
        minus the step's end profile (see crdscale.analysis.openapiv2)."""
        fmt = self.scenario.profiles.openapi_v2
        if fmt == "none":
            return
        from crdscale.collect.openapi import fetch_openapi_v2

        try:
            fetched = fetch_openapi_v2(self.cluster, fmt)
        except ApiError as err:
            # What a client would get too (v1.24.0 answered 504 after 60 s with 120 large CRDs): recorded, and
            # the step has no openapiv2 profile; the next pair then spans two steps (analysis.openapiv2).
            self.events.emit("openapi_v2.error", step=step, crds=crds, error=str(err), run_id=self.run_id)
            self.progress.message(f"step {step}: GET /openapi/v2 failed ({err}); no openapiv2 profile")
            return
        self.events.emit("openapi_v2.fetch", step=step, crds=crds, format=fmt, bytes=fetched.bytes,
                         seconds=round(fetched.seconds, 3), run_id=self.run_id)  # fmt: skip
        self._settle(f"step {step} openapi v2")
        self._take_profiles(step=step, crds=crds, phase=OPENAPI_V2_PHASE)

    def _save_profile(self, kind: str, data: bytes, *, step: int, crds: int, phase: str | None) -> None:
        self.run.write_profile(kind, step, crds, phase, data)

    def _start_cpu_profile(self, *, step: int, crds: int) -> threading.Thread | None:
        """Sample CPU for ``profiles.cpu_seconds`` from the start of a step's install, in a thread;
        saved as ``cpu-stepNN-crdsNNNN-install.pb.gz``."""
        if "cpu" not in self.scenario.profiles.kinds:
            return None
        seconds = int(self.scenario.profiles.cpu_seconds)

        def capture():
            try:
                data = fetch_profile(self.cluster, "cpu", cpu_seconds=seconds)
            except ClusterError as err:  # the run itself reports a dead server
                self.events.emit("profile.error", profile="cpu", step=step, error=str(err))
                return
            self._save_profile("cpu", data, step=step, crds=crds, phase="install")

        thread = threading.Thread(target=capture, name=f"crdscale-cpu-step{step}", daemon=True)
        thread.start()
        return thread

    def _run_probes(self, step: int) -> None:
        names = self.scenario.probes.each_step
        if not names:
            return
        from crdscale.collect.probes import run_probe

        for name in names:
            # The same entry point as `crdscale probe NAME`; the options table is read into the probe's config.
            options = self.scenario.probes.options.get(name, {})
            self.events.emit("probe.start", probe=name, step=step)
            run_probe(name, self.cluster, self.run, options, step=step, run_id=self.run_id)
            self.events.emit("probe.end", probe=name, step=step)


def run_scenario(scenario: Scenario, **kwargs) -> RunWriter:
    """Convenience wrapper: ``ScenarioRunner(scenario, **kwargs).execute()``."""
    return ScenarioRunner(scenario, **kwargs).execute()
