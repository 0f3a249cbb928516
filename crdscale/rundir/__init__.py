"""The run directory: its layout, its one writer, its event kinds and its one reader.

Only this package knows file names inside a run directory::

    from crdscale.rundir import read_run, RunWriter
    run = read_run("runs/20261122T031500Z-default")
    run.manifest, run.events, run.series, run.profiles, run.probe_table("list"), run.analysis()
"""

from crdscale.rundir import layout
from crdscale.rundir.events import EVENT_KINDS, EventKind, EventLog, read_events
from crdscale.rundir.reader import Run, events_frame, read_experiment_manifest, read_run, read_runs, run_start
from crdscale.rundir.writer import RunWriter, write_experiment_manifest

__all__ = [
    "layout",
    "EVENT_KINDS",
    "EventKind",
    "EventLog",
    "read_events",
    "Run",
    "RunWriter",
    "events_frame",
    "read_experiment_manifest",
    "read_run",
    "read_runs",
    "run_start",
    "write_experiment_manifest",
]
