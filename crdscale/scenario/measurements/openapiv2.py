"""The OpenAPI v2 phase (``profiles.openapi_v2``): after a CRD step's end profiles (and the baseline's),
GET /openapi/v2 as a client does, settle, and profile again (phase ``openapiv2``).

The server keeps what it built to answer until the next request after a CRD change
(crdscale.collect.openapi), so the next step's end profile still holds this one's spec: the v2 cost
per CRD is this phase's growth, and each step's increment is its profile minus the step's end profile
(see crdscale.analysis.openapiv2)."""

from __future__ import annotations

from crdscale.cluster.clients import ApiError
from crdscale.collect.openapi import fetch_openapi_v2
from crdscale.rundir.layout import OPENAPI_V2_PHASE  # the profile phase taken after a GET of /openapi/v2
from crdscale.scenario.measurements.base import PROFILE, STEP_END, Mark, Measurement, RunContext


class OpenApiV2Phase(Measurement):
    name = "openapi-v2"

    def __init__(self, fmt: str):
        self.fmt = fmt

    @classmethod
    def create(cls, scenario) -> OpenApiV2Phase | None:
        fmt = scenario.profiles.openapi_v2
        return None if fmt == "none" else cls(fmt)

    def at(self, ctx: RunContext, mark: Mark) -> None:
        if mark.kind != STEP_END or mark.grow != "crds":
            return

        step, crds = mark.step, mark.crds
        try:
            fetched = fetch_openapi_v2(ctx.cluster, self.fmt)
        except ApiError as err:
            # What a client would get too (v1.24.0 answered 504 after 60 s with 120 large CRDs): recorded, and
            # the step has no openapiv2 profile; the next pair then spans two steps (analysis.openapiv2).
            ctx.events.emit("openapi_v2.error", step=step, crds=crds, error=str(err), run_id=ctx.run_id)
            ctx.progress.message(f"step {step}: GET /openapi/v2 failed ({err}); no openapiv2 profile")
            return
        ctx.events.emit("openapi_v2.fetch", step=step, crds=crds, format=self.fmt, bytes=fetched.bytes,
                        seconds=round(fetched.seconds, 3), run_id=ctx.run_id)  # fmt: skip
        ctx.settle(f"step {step} openapi v2")
        ctx.mark(Mark(PROFILE, step, crds, phase=OPENAPI_V2_PHASE))
