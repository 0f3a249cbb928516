"""The object steps of ``steps.grow = "objects"``: each adds one kind's objects, then settles and profiles
as a CRD step does. ``step.end`` records the objects per kind so far and their JSON bytes as sent
(``objects``, ``object_bytes``): the x of the per-object fits (crdscale.analysis.perobject)."""

from __future__ import annotations

import time
from dataclasses import asdict

from crdscale.crds.objects import CUSTOM_RESOURCES
from crdscale.crds.populate import ObjectWriter, control_target, custom_resource_target, namespace_name
from crdscale.scenario.measurements import PROFILE, STEP_END, STEP_START, Mark, RunContext
from crdscale.scenario.progress import StepSummary, current_metrics


def grow_objects(ctx: RunContext, crds: list[dict], *, first_step: int, total_steps: int, started: float) -> None:
    """Run the object steps (numbered from ``first_step``); ``ctx.objects`` holds the targets and the
    writer afterwards, for the measurements of ``steps.end``."""
    sc, o, run_id = ctx.scenario, ctx.scenario.objects, ctx.run_id
    writer = ObjectWriter(
        ctx.cluster,
        run_id=run_id,
        size=o.bytes,
        shape=o.shape,
        managed_fields=o.managed_fields,
        apply=o.apply,
        concurrency=o.concurrency,
    )
    cr_namespace = namespace_name(run_id, "objects")
    if any(c["spec"].get("scope", "Cluster") == "Namespaced" for c in crds):
        writer.ensure_namespace(cr_namespace)
    targets = {CUSTOM_RESOURCES: [custom_resource_target(c, cr_namespace) for c in crds]}
    for kind in o.control:
        targets[kind] = [control_target(kind, writer.ensure_namespace(namespace_name(run_id, kind)))]
    stored: dict[str, dict] = {}
    # The resource label values of each kind's series (apiserver_resource_size_estimate_bytes).
    resources = {kind: sorted({t.path.rsplit("/", 1)[1] for t in ts}) for kind, ts in targets.items()}
    for offset, (kind, per_crd) in enumerate(sc.object_steps()):
        index = first_step + offset
        # A control kind gets as many objects as all CRDs together: the same count x bytes.
        per_target = per_crd if kind == CUSTOM_RESOURCES else per_crd * len(crds)
        adding = per_target * len(targets[kind])
        ctx.progress.step_started(index, total_steps, adding, unit="object")
        ctx.events.emit("step.start", step=index, crds_before=len(crds), crds_in_step=0, grow="objects",
                        object_kind=kind, objects_in_step=adding, run_id=run_id)  # fmt: skip
        ctx.mark(Mark(STEP_START, index, len(crds), grow="objects"))
        t0 = time.monotonic()
        writer.write(targets[kind], per_target, progress=ctx.progress.advance)
        write_s = time.monotonic() - t0
        # The profile must see this step's objects in the watch cache, not the next step's.
        waited = writer.wait_cached(targets[kind])
        ctx.events.emit("objects.cached", step=index, object_kind=kind, seconds=round(waited, 3))
        if kind not in stored:
            stored[kind] = {"sent_bytes": o.bytes, "stored_bytes": writer.stored_bytes(targets[kind][0])}
            ctx.run.update_manifest(objects={**asdict(o), "kinds": stored, "resources": resources})
        ctx.settle(f"step {index}")
        ctx.mark(Mark(PROFILE, index, len(crds), grow="objects"))
        ctx.mark(Mark(STEP_END, index, len(crds), grow="objects"))
        summary = StepSummary(index, total_steps, len(crds), **current_metrics(ctx.cluster), install_s=write_s,
                              serve_s=0.0, elapsed_s=time.monotonic() - started, objects=dict(writer.counts.objects))  # fmt: skip
        ctx.events.emit("step.end", run_id=run_id, grow="objects", object_kind=kind, objects_in_step=adding,
                        object_bytes=dict(writer.counts.bytes), **asdict(summary))  # fmt: skip
        ctx.progress.step_finished(summary)
    ctx.objects = (targets, writer)
