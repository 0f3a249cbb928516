"""The runner sequences steps and nothing else: built here with a fake API server as its target, a fake
metrics source and recording measurements, it passes every mark in order and leaves a complete run
directory -- no control plane, no Prometheus, no sockets."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import pytest
from fakeapi import CRD_COLLECTION, FakeApiServer

from crdscale.cluster.clients import Cluster, Credentials
from crdscale.errors import CrdscaleError
from crdscale.rundir import read_events, read_run
from crdscale.scenario import measurements
from crdscale.scenario.config import parse_scenario
from crdscale.scenario.measurements import Measurement
from crdscale.scenario.runner import ScenarioRunner
from crdscale.scenario.targets import RunTarget

SCENARIO = """
name = "fake"
[crds]
count = 6
groups = 2
property_count = 5
[steps]
count = 3
serve = "none"
settle_seconds = 0
settle_queues = false
"""


class FakeSource:
    kind = "fake"
    harness_pid = None

    def __init__(self, log):
        self.log = log
        self.harness_cpu_seconds = None

    def start(self):
        self.log.append("source.start")
        return self

    def stop(self):
        self.log.append("source.stop")
        self.harness_cpu_seconds = 1.5

    def series(self, start: datetime, end: datetime) -> pd.DataFrame:
        self.log.append("source.series")
        row = {"timestamp": start, "job": "kube-apiserver", "metric": "go_goroutines", "labels": "{}", "value": 7.0}
        return pd.DataFrame([row])

    def describe(self) -> dict:
        return {"source": self.kind, "scrape_interval_s": 1.0}


class Recorder(Measurement):
    """Records every call it gets, into the shared log."""

    def __init__(self, name, log, fail_at=None):
        self.name, self.log, self.fail_at = name, log, fail_at

    def start(self, ctx):
        self.log.append(f"{self.name}.start")

    def at(self, ctx, mark):
        self.log.append((self.name, mark.kind, mark.step, mark.crds, mark.phase))
        if self.fail_at == (mark.kind, mark.step):
            raise CrdscaleError("measurement failed")

    def series(self, ctx, start, end):
        self.log.append(f"{self.name}.series")
        return None

    def stop(self, ctx):
        self.log.append(f"{self.name}.stop")

    def collect(self, ctx):
        self.log.append(f"{self.name}.collect")


def _runner(tmp_path, log, server, *, scenario=SCENARIO, fail_at=None):
    def open_target(ctx, stack):
        log.append("target.open")
        stack.callback(log.append, "target.close")
        return RunTarget(Cluster("https://127.0.0.1:6443", server, Credentials()))

    return ScenarioRunner(
        parse_scenario(scenario),
        runs_parent=tmp_path,
        open_target=open_target,
        open_source=lambda ctx, target: FakeSource(log),
        measurements=[Recorder("a", log, fail_at), Recorder("b", log)],
        watchdog=False,
    )


def test_a_run_with_fakes_passes_every_mark_in_order(tmp_path):
    log, server = [], FakeApiServer()
    run = _runner(tmp_path, log, server).execute()
    assert len(server.objects[CRD_COLLECTION]) == 6  # installed through the fake's transport
    marks = [entry[1:] for entry in log if isinstance(entry, tuple) and entry[0] == "a"]
    assert marks == [
        ("profile", 0, 0, None),
        ("step.end", 0, 0, None),
        *[
            m
            for step, crds in ((1, 2), (2, 4), (3, 6))
            for m in (
                ("step.start", step, crds, None),
                ("step.served", step, crds, None),
                ("profile", step, crds, None),
                ("step.end", step, crds, None),
            )  # fmt: skip
        ],
        ("steps.end", 3, 6, None),
    ]
    lifecycle = [entry for entry in log if isinstance(entry, str)]
    # The export before the measurements stop, they before the source; collect after it; the target last.
    assert lifecycle == [
        "target.open", "source.start", "a.start", "b.start", "source.series", "a.series", "b.series",
        "b.stop", "a.stop", "source.stop", "a.collect", "b.collect", "target.close",
    ]  # fmt: skip
    result = read_run(run.path)
    assert result.manifest["status"] == "completed"
    assert result.manifest["metrics"]["rows"] == 1 and result.manifest["metrics"]["source"] == "fake"
    kinds = [e["kind"] for e in read_events(run.path / "events.jsonl")]
    assert kinds.count("step.end") == 3 and kinds.count("settle.start") == 4 and kinds[-1] == "run.end"


def test_a_failing_measurement_fails_the_run_and_still_exports(tmp_path):
    log, server = [], FakeApiServer()
    with pytest.raises(CrdscaleError, match="run failed: measurement failed"):
        _runner(tmp_path, log, server, fail_at=("step.end", 2)).execute()
    assert "source.series" in log and "source.stop" in log and log[-1] == "target.close"
    (run_dir,) = tmp_path.iterdir()
    assert read_run(run_dir).manifest["status"] == "failed"


def test_the_registry_builds_what_the_scenario_asks_for():
    names = lambda text: [m.name for m in measurements.for_scenario(parse_scenario(text))]  # noqa: E731
    assert names(None) == ["harness", "proc", "profiles", "component-profiles"]
    assert names("[profiles]\ncomponents = []\n") == ["harness", "proc", "profiles"]
    assert names('[profiles]\nkinds = ["heap", "cpu"]\nopenapi_v2 = "json"\n[probes]\neach_step = ["discovery"]\n') == [
        "harness", "proc", "profiles", "component-profiles", "cpu-profile", "openapi-v2", "probes",
    ]  # fmt: skip
    objects = '[steps]\ngrow = "objects"\ncount = 2\n[objects]\ncount = 4\nlist_repeats = 2\n'
    assert names(objects)[-1] == "object-lists"


def test_harness_cost_is_collected_after_the_source_stops(tmp_path):
    from crdscale.scenario.measurements.harness import HarnessCost

    log, server = [], FakeApiServer()
    runner = _runner(tmp_path, log, server)
    runner.measurements.append(HarnessCost())
    run = runner.execute()
    harness = read_run(run.path).manifest["harness"]
    assert harness  # from the exported series and the source's CPU (known once it stopped)
