"""A settle records its start mark whatever its seconds, so its queue wait (settle.drained) always has one."""

from __future__ import annotations

import argparse

import pytest

from crdscale.rundir import EventLog, read_events
from crdscale.scenario import runner as runner_module
from crdscale.scenario.config import Steps
from crdscale.scenario.runner import ScenarioRunner


@pytest.mark.parametrize(("seconds", "queues"), [(0, True), (0, False), (2, True)])
def test_settle_start_precedes_the_queue_wait(tmp_path, monkeypatch, seconds, queues):
    slept: list[float] = []
    monkeypatch.setattr(runner_module.time, "sleep", slept.append)
    events = EventLog(tmp_path / "events.jsonl", fsync=False)

    def wait_queues(label):  # the real one scrapes /metrics; only its event matters here
        events.emit("settle.drained", label=label, drained=True, seconds=0.5)

    runner = argparse.Namespace(
        scenario=argparse.Namespace(steps=Steps(settle_seconds=seconds, settle_queues=queues)),
        events=events,
        _wait_queues=wait_queues,
    )
    ScenarioRunner._settle(runner, "step 1")
    events.close()
    got = [(e["kind"], e["label"], e["seconds"]) for e in read_events(tmp_path / "events.jsonl")]
    start = ("settle.start", "step 1", float(seconds))
    assert got == ([start, ("settle.drained", "step 1", 0.5)] if queues else [start])
    assert slept == ([float(seconds)] if seconds else [])
