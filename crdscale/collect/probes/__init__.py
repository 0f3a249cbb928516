"""Probes: client-side and request-cost experiments, each redoable with one command.

* ``discovery`` -- legacy and aggregated discovery, client-go throttling, kubectl.
* ``list`` -- LIST latency and bytes per request kind, cache vs etcd.
* ``apf`` -- APF seats of those LISTs: both estimators and the server's view.
* ``clientmem`` -- peak RSS of a client listing full objects vs metadata only.

Each is a function ``(cluster, run, options) -> DataFrame`` in
:data:`PROBES`; :func:`run_probe` calls one as a scenario step and writes its
tables into the run directory through its :class:`~crdscale.rundir.RunWriter`
(``run.probe_table(name)`` reads them back). Imports are lazy so that the client-memory
child process, which runs ``python -m crdscale.collect.probes.clientmem``,
stays small.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crdscale.rundir import RunWriter


def write_tables(run: RunWriter, name: str, step: int, tables: Mapping[str, Any], main: str) -> None:
    """Write a probe's tables into ``run``: ``main`` as the probe's own table, the others as side tables."""
    for table_name, frame in tables.items():
        run.write_probe_table(name, step, frame, None if table_name == main else table_name)


def _run_id(options: Mapping[str, Any]) -> str:
    from crdscale.ownership import new_run_id

    return options.get("run_id") or new_run_id()


def discovery_step(cluster, run: RunWriter, options: Mapping[str, Any]):
    """Discovery as a step: legacy discovery per limit, aggregated discovery, kubectl.

    Options: ``limits`` (names or ``BURST,QPS``; default ``kubectl-1.24`` and
    ``disabled`` -- the (100, 5) preset waits (N - 100) / 5 s, three minutes at
    1,000 group-versions, too long for every step), ``kubeconfig``, ``with_kubectl``,
    ``kubectl_versions`` (e.g. ``["1.24.0"]``, built from Go modules), ``step``.
    """
    from . import discovery

    limits = discovery.validate_limits(options.get("limits") or ["kubectl-1.24", "disabled"])
    tables = discovery.probe(
        cluster,
        limits,
        kubeconfig=options.get("kubeconfig"),
        with_kubectl=options.get("with_kubectl", True),
        kubectl_versions=options.get("kubectl_versions", ()),
        echo=options.get("echo"),
    )
    write_tables(run, "discovery", int(options.get("step", 0)), tables, main="summary")
    return tables["summary"]


def list_step(cluster, run: RunWriter, options: Mapping[str, Any]):
    """LIST cost as a step. Options: the fields of :class:`.listcost.ListProbeConfig`, ``load_levels``, ``step``."""
    from . import listcost

    config_fields = {k: v for k, v in options.items() if k in listcost.ListProbeConfig.__dataclass_fields__}
    config = listcost.ListProbeConfig(**config_fields)
    tables = listcost.probe(
        cluster,
        run_id=_run_id(options),
        config=config,
        load_levels=options.get("load_levels", ()),
        allow_remote_load=bool(options.get("allow_remote_load", False)),
        keep=bool(options.get("keep")),
        echo=options.get("echo"),
    )
    write_tables(run, "list", int(options.get("step", 0)), tables, main="lists")
    return tables["lists"]


def apf_step(cluster, run: RunWriter, options: Mapping[str, Any]):
    """APF seats as a step: runs the LIST probe (same options), then estimates and observes seats."""
    from . import apfseats, listcost

    config_fields = {k: v for k, v in options.items() if k in listcost.ListProbeConfig.__dataclass_fields__}
    config = listcost.ListProbeConfig(**config_fields)
    run_id = _run_id(options)
    from .fixtures import ProbeFixtures

    config.validate()
    with ProbeFixtures(cluster, run_id, keep=bool(options.get("keep")), echo=options.get("echo")) as fixtures:
        populated = listcost.populate(fixtures, config, echo=options.get("echo"))
        lists = listcost.measure_lists(
            cluster, populated, repeats=config.repeats, page_size=config.page_size, kinds=config.kinds
        )
        observe = options.get("observe", True)
        if observe:
            # The server estimates seats from object statistics it refreshes every minute or two.
            stats = apfseats.wait_for_estimator_stats(cluster, populated.targets)
            stored = dict(zip(stats["resource"], stats["stored_objects"]))
            observed = apfseats.observe_seats(cluster, lists, run_id=run_id, stored=stored)
            limits = apfseats.level_limits(cluster)
        else:
            stats, observed, limits = listcost.server_object_stats(cluster, populated), None, None
    table = apfseats.compare(lists, stats, observed, limits)
    tables = {"seats": table, "lists": lists}
    if limits is not None:
        tables["levels"] = limits  # each priority level's seat limit, read from the server
    write_tables(run, "apf", int(options.get("step", 0)), tables, main="seats")
    return table


def clientmem_step(cluster, run: RunWriter, options: Mapping[str, Any]):
    """Client memory as a step. Options: ``secrets`` (count), ``secret_bytes``, ``step``."""
    from . import clientmem

    table = clientmem.probe(
        cluster,
        run_id=_run_id(options),
        secrets=int(options.get("secrets", 100)),
        secret_bytes=int(options.get("secret_bytes", 1_000_000)),
        keep=bool(options.get("keep")),
        echo=options.get("echo"),
    )
    write_tables(run, "clientmem", int(options.get("step", 0)), {"main": table}, main="main")
    return table


PROBES: dict[str, Callable] = {
    "discovery": discovery_step,
    "list": list_step,
    "apf": apf_step,
    "clientmem": clientmem_step,
}


def run_probe(name: str, cluster, run: RunWriter, options: Mapping[str, Any] | None = None):
    """Run probe ``name`` as a scenario step; writes its tables into ``run`` and returns the main one.

    ``options["step"]`` is the scenario step number (default 0).
    """
    if name not in PROBES:
        from crdscale.errors import UsageError

        raise UsageError(f"unknown probe {name!r}; known: {', '.join(PROBES)}")
    return PROBES[name](cluster, run, dict(options or {}))
