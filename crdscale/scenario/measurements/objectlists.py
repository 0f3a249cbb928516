"""LIST timing of a run's objects (``objects.list_repeats`` > 0), once every object step is done.

After the last profile (a LIST's garbage stays out of the heap fits): with a resource's watch cache
off (``--watch-cache-sizes=<resource>#0``) its LISTs go to etcd, and this is where that cost shows.
Written as ``probes/objects-lists-stepNN.parquet`` (:data:`crdscale.rundir.layout.OBJECT_LISTS`)."""

from __future__ import annotations

from crdscale.collect.probes.listcost import measure_targets
from crdscale.rundir import layout
from crdscale.scenario.measurements.base import STEPS_END, Mark, Measurement, RunContext

# Seconds with no request before the object LISTs: the background their CPU is net of.
OBJECT_LISTS_IDLE_S = 5.0


class ObjectLists(Measurement):
    name = "object-lists"

    def __init__(self, repeats: int, kinds: list[str]):
        self.repeats = repeats
        self.kinds = list(kinds)

    @classmethod
    def create(cls, scenario) -> ObjectLists | None:
        o = scenario.objects
        return cls(int(o.list_repeats), o.list_kinds) if o.list_repeats > 0 else None

    def at(self, ctx: RunContext, mark: Mark) -> None:
        if mark.kind != STEPS_END or ctx.objects is None:
            return

        targets, writer = ctx.objects
        step = mark.step
        lists = {kind: [t.list_target() for t in ts] for kind, ts in targets.items()}
        counts = {t.list_target().group_resource: writer.written(t) for ts in targets.values() for t in ts}
        ctx.progress.message(f"timing LISTs of the objects ({', '.join(self.kinds)}, {self.repeats} each)")
        ctx.events.emit("objects.lists.start", step=step, kinds=list(self.kinds), repeats=self.repeats)
        table = measure_targets(
            ctx.cluster,
            lists,
            counts,
            repeats=self.repeats,
            kinds=self.kinds,
            # etcd's own background (compaction, leases, the controller-manager's watches) is what the
            # per-LIST CPU is net of: a longer idle window estimates it better than the probe's 1 s.
            idle_window_s=OBJECT_LISTS_IDLE_S,
        )
        name, table_name = layout.OBJECT_LISTS
        ctx.run.write_probe_table(name, step, table, table_name)
        ctx.events.emit("objects.lists.end", step=step, rows=int(len(table)))
