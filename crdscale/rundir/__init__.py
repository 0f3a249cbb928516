"""The run directory: its layout, its one writer, its event kinds, its manifest and its one reader.

Only this package knows file names inside a run directory::

    from crdscale.rundir import read_run, RunWriter
    run = read_run("runs/20261122T031500Z-default")
    run.manifest, run.events, run.series, run.profiles, run.probe_table("list")

It reads; the analyses sit above it (``crdscale.analysis.run.analyze_run(run)``).

The reader and the writer (pandas, pyarrow) are imported on first use, so the layout's names
(``crdscale.rundir.layout``) cost the CLI's ``--help`` and the scenario loader nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from crdscale.rundir import layout
from crdscale.rundir.events import EVENT_KINDS, EventKind, EventLog, read_events
from crdscale.rundir.manifest import Manifest

if TYPE_CHECKING:
    from crdscale.rundir.reader import Run, events_frame, read_experiment_manifest, read_run, read_runs, run_start
    from crdscale.rundir.writer import RunWriter, write_experiment_manifest

# Name -> the module that holds it, imported when the name is first asked for.
_LAZY = {
    "Run": "reader",
    "events_frame": "reader",
    "read_experiment_manifest": "reader",
    "read_run": "reader",
    "read_runs": "reader",
    "run_start": "reader",
    "RunWriter": "writer",
    "write_experiment_manifest": "writer",
}

__all__ = [
    "layout",
    "EVENT_KINDS",
    "EventKind",
    "EventLog",
    "Manifest",
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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
