"""The shape experiment (``crdscale probe list --load-shapes``): one response size, two shapes.

Does kube-apiserver's memory under concurrent LISTs follow a response's bytes or
its object count (the APF proposal, seed 003)? :func:`shape_load` creates one
namespace of Secrets per shape (``OBJECTSxBYTES``, about the same data in each)
and LISTs each with :func:`.listload.concurrent_load` at several concurrency
levels; :func:`run_shapes` is the LIST probe's entry point in this mode.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import pandas as pd

from crdscale.cluster.apiservers import apiservers
from crdscale.cluster.listing import ListTarget
from crdscale.errors import UsageError
from crdscale.models.probecosts import SHAPE_FINDING_COLUMNS, shape_findings

from . import ProbeResult, Section
from ._http import is_loopback
from .configs import ListProbeConfig, LoadShape, parse_load_shapes
from .fixtures import ProbeFixtures, secret
from .listload import concurrent_load
from .requests import ListRequest

log = logging.getLogger(__name__)

# The LISTs the shape experiment sends to each shape's namespace, both served from the watch cache on v1.31+.
SHAPE_LIST_PARAMS = {"rv0": {"resourceVersion": "0"}, "consistent": {}}
# A LIST of tens of MB holds its memory for a fraction of a second: sample often enough to see
# the peak, not so often that scraping /metrics becomes the CPU being measured.
SHAPE_SAMPLE_INTERVAL_S = 0.2


def shape_load(
    cluster,
    *,
    run_id: str,
    shapes: Sequence[LoadShape],
    concurrency_levels: Iterable[int] = (1, 4, 16),
    kinds: Sequence[str] = ("rv0",),
    requests_per_level: int = 100,
    max_seconds_per_level: float = 30.0,
    allow_remote: bool = False,
    keep: bool = False,
) -> pd.DataFrame:
    """Concurrent LISTs of one namespace per shape: the same data in few large or many small Secrets.

    Every shape is created before any is loaded, so all see the same server. Each (kind, shape)
    runs :func:`concurrent_load` over ``concurrency_levels`` with a garbage collection before each
    level. Returns its rows plus ``shape``, ``objects``, ``object_bytes``, ``data_bytes``.
    """
    levels = tuple(concurrency_levels)
    unknown = set(kinds) - set(SHAPE_LIST_PARAMS)
    if unknown:
        raise UsageError(f"unknown load kinds: {', '.join(sorted(unknown))} (known: {', '.join(SHAPE_LIST_PARAMS)})")
    if not (is_loopback(cluster.server) or allow_remote):
        raise UsageError(
            f"refusing concurrent load against {cluster.server}: pass --allow-remote-load for your own cluster"
        )
    with ProbeFixtures(cluster, run_id, keep=keep) as fixtures:
        with apiservers(cluster, compare_etcd=False) as found:
            pid = found.servers[0].pid
        targets = []
        for index, shape in enumerate(shapes):
            target = ListTarget("secrets", "", "v1", fixtures.namespace(f"shape{index}"))
            log.info(f"creating {shape.objects} Secrets of {shape.object_bytes} B in {target.namespace}")
            bodies = [
                secret(f"s-{i:06d}", target.namespace, fixtures.labels, i, shape.object_bytes)
                for i in range(shape.objects)
            ]
            fixtures.create_objects(target.collection_path, bodies, workers=8)
            targets.append(target)
        tables = []
        for kind in kinds:
            for shape, target in zip(shapes, targets):
                request = ListRequest(
                    kind,
                    target.collection_path(target.namespace),
                    SHAPE_LIST_PARAMS[kind],
                    description=f"{shape.label} in {target.namespace}",
                )
                log.info(f"loading {shape.label} ({kind}) at concurrency {','.join(map(str, levels))}")
                table = concurrent_load(
                    cluster,
                    request,
                    concurrency_levels=levels,
                    requests_per_level=requests_per_level,
                    max_seconds_per_level=max_seconds_per_level,
                    allow_remote=allow_remote,
                    pid=pid,
                    collect_garbage=True,
                    sample_interval_s=SHAPE_SAMPLE_INTERVAL_S,
                )
                tables.append(
                    table.assign(
                        shape=shape.label,
                        objects=shape.objects,
                        object_bytes=shape.object_bytes,
                        data_bytes=shape.data_bytes,
                    )
                )
    return pd.concat(tables, ignore_index=True)


SHAPE_COLUMNS = (
    "kind",
    "shape",
    "concurrency",
    "requests",
    "errors",
    "latency_p50_s",
    "latency_p99_s",
    "bytes",
    "heap_inuse_before_bytes",
    "heap_inuse_growth_bytes",
    "rss_before_bytes",
    "rss_growth_bytes",
    "cpu_s",
    "cpu_source",
)


def run_shapes(cluster, config: ListProbeConfig, writer, *, step: int, run_id: str) -> ProbeResult:
    """The LIST probe with ``config.load_shapes``: runs :func:`shape_load`, writes its table
    (``list-shapes``) into ``writer`` and returns it with the findings derived from it."""
    load = shape_load(
        cluster,
        run_id=run_id,
        shapes=parse_load_shapes(",".join(config.load_shapes)),
        concurrency_levels=config.load_levels or config.SHAPE_LOAD_LEVELS,
        kinds=config.load_kinds,
        requests_per_level=config.load_requests,
        max_seconds_per_level=config.load_seconds,
        allow_remote=config.allow_remote_load,
        keep=config.keep,
    )
    writer.write_probe_table("list", step, load, "shapes")
    # Derived from the rows (crdscale.models.probecosts.shape_findings), so not stored in the run directory.
    findings = shape_findings(load)
    units = {"latency_p50_s": "ms", "latency_p99_s": "ms", "cpu_s": "s", "bytes": "MiB"}
    units |= {c: "MiB" for c in SHAPE_COLUMNS if c.startswith(("heap_", "rss_"))}
    sections = [
        Section(
            "Concurrent LISTs of one namespace per shape",
            "shapes",
            SHAPE_COLUMNS,
            units,
            "(latency in ms; bytes = all responses of the level and memory in MiB; growth = peak over the level's "
            "baseline after a garbage collection; cpu_s = kube-apiserver CPU seconds over the level)",
        ),
        Section(
            "Each shape / the shape of fewest objects: memory follows bytes if heap_growth_ratio is near bytes_ratio, "
            "object count if near objects_ratio",
            "shape_findings",
            SHAPE_FINDING_COLUMNS,
            {c: "x2" for c in SHAPE_FINDING_COLUMNS if c.endswith("_ratio")},
        ),
    ]
    summary = {
        "heap_follows": {
            f"{r.kind} c={r.concurrency} {r.shape}": r.heap_follows for r in findings.itertuples(index=False)
        }
    }
    return ProbeResult(
        "list",
        {"shapes": load},
        None,
        derived={"shape_findings": findings},
        summary=summary,
        exit_code=1 if load["errors"].sum() else 0,
        sections=sections,
    )
