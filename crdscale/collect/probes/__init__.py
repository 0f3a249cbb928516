"""Probes: client-side and request-cost experiments, each redoable with one command.

* ``discovery`` -- legacy and aggregated discovery, client-go throttling, kubectl.
* ``list`` -- LIST latency and bytes per request kind, cache vs etcd.
* ``apf`` -- APF seats of those LISTs: both estimators and the server's view.
* ``clientmem`` -- peak RSS of a client listing full objects vs metadata only.

:data:`.configs.PROBES` is the one registry of probes: probe name -> its typed
configuration class, which names the module holding the probe and its entry
point there, ``run(cluster, config, writer, *, step, run_id) -> ProbeResult``.
``crdscale probe NAME`` and a scenario's ``[probes]`` steps both go through
:func:`run_probe`. A probe writes its tables into the run directory through its
:class:`~crdscale.rundir.RunWriter` (``run.probe_table(name)`` reads them back)
and reports progress through :mod:`logging` (the CLI prints it; notebooks stay
quiet). Imports are lazy so that the client-memory child process, which runs
``python -m crdscale.collect.probes.clientmem``, stays small.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from crdscale.rundir import RunWriter

    from .configs import ProbeConfig


@dataclass(frozen=True)
class Section:
    """One printed table of a probe's result: ``table`` (a key of the result's tables), its ``columns``,
    each column's unit (a key of :data:`crdscale.units.COLUMN_FORMATS`: ``ms``, ``MiB``, ``s``, ``count``,
    ``int``, ``pct``, ``x1``, ``x2``, ``f1``; a seconds or bytes value is shown in the unit named), and a
    ``note`` printed below."""

    title: str
    table: str
    columns: tuple[str, ...]
    units: Mapping[str, str] = field(default_factory=dict)
    note: str = ""


@dataclass
class ProbeResult:
    """What a probe measured.

    Attributes:
        name: the probe.
        tables: the tables written into the run directory, ``main`` as the probe's own table
            (``probes/NAME-stepNN.parquet``), the others as side tables.
        main: the key of the main table (None: all are side tables).
        derived: tables computed from those (shown and in ``-o json``, not written).
        summary: plain JSON values for the run manifest (``result`` of ``-o json``).
        exit_code: 1 when the probe's own check failed (errors, disagreement with a model).
        sections: how the CLI prints it.
    """

    name: str
    tables: dict[str, pd.DataFrame]
    main: str | None
    derived: dict[str, pd.DataFrame] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    exit_code: int = 0
    sections: list[Section] = field(default_factory=list)

    @property
    def table(self) -> pd.DataFrame | None:
        """The main table."""
        return self.tables.get(self.main) if self.main else None


def write_tables(run: RunWriter, name: str, step: int, tables: Mapping[str, Any], main: str | None) -> None:
    """Write a probe's tables into ``run``: ``main`` as the probe's own table, the others as side tables."""
    for table_name, frame in tables.items():
        run.write_probe_table(name, step, frame, None if table_name == main else table_name)


def new_run_id() -> str:
    # lazy: ownership and its imports, not for `crdscale probe --help` nor the client-memory child
    from crdscale.ownership import new_run_id as make

    return make()


def run_probe(
    name: str,
    cluster,
    run: RunWriter,
    config: ProbeConfig | Mapping[str, Any] | None = None,
    *,
    step: int = 0,
    run_id: str | None = None,
) -> ProbeResult:
    """Run probe ``name`` (a scenario step or ``crdscale probe NAME``); writes its tables into ``run``.

    ``config`` is the probe's config, or a scenario's options table for it
    (:func:`.configs.from_options`); ``run_id`` labels the objects it creates
    (default: a new one); ``step`` numbers its tables.
    """
    # lazy: the client-memory child imports this package and measures its own RSS.
    from .configs import PROBES, from_options

    config = from_options(name, config)
    entry = PROBES[name].entry_point()
    return entry(cluster, config, run, step=step, run_id=run_id or new_run_id())
