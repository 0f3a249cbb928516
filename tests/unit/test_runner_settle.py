"""A settle records its start mark whatever its seconds, so its queue wait (settle.drained) always has one."""

from __future__ import annotations

import pytest

from crdscale.rundir import EventLog, read_events
from crdscale.scenario.config import Steps
from crdscale.scenario.progress import Progress
from crdscale.scenario.settle import Settler


@pytest.mark.parametrize(("seconds", "queues"), [(0, True), (0, False), (2, True)])
def test_settle_start_precedes_the_queue_wait(tmp_path, seconds, queues):
    slept: list[float] = []
    events = EventLog(tmp_path / "events.jsonl", fsync=False)
    settler = Settler(Steps(settle_seconds=seconds, settle_queues=queues), None, events, Progress(), sleep=slept.append)
    # The real wait scrapes /metrics; only its event matters here.
    settler.wait_queues = lambda label: events.emit("settle.drained", label=label, drained=True, seconds=0.5)
    settler.settle("step 1")
    events.close()
    got = [(e["kind"], e["label"], e["seconds"]) for e in read_events(tmp_path / "events.jsonl")]
    start = ("settle.start", "step 1", float(seconds))
    assert got == ([start, ("settle.drained", "step 1", 0.5)] if queues else [start])
    assert slept == ([float(seconds)] if seconds else [])
