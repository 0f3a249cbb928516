"""The CRD set a scenario run installs: generated or loaded, with where it came from and its summary."""

from __future__ import annotations

from dataclasses import asdict

from crdscale.crds import summary as crd_summary
from crdscale.crds.generate import generate_crds
from crdscale.crds.load import load_crds
from crdscale.crds.objects import with_payload_field
from crdscale.scenario.config import Scenario


def load_crd_set(scenario: Scenario) -> tuple[list[dict], dict]:
    """The CRDs a run of ``scenario`` installs (generated or loaded; with the payload field the flat, nested
    and list object shapes need) and where they came from, with their summary."""
    if scenario.crds.source == "generate":
        params = scenario.generator_params()
        crds = generate_crds(params)
        origin = {"source": "generate", "params": params.to_dict()}
    else:
        loaded = load_crds(scenario.crds.source)
        crds = list(loaded.crds)
        origin = {"source": scenario.crds.source, "skipped_documents": getattr(loaded, "skipped", None)}
    if scenario.grows_objects and scenario.objects.shape != "schema":
        # The flat, nested and list shapes need a field that keeps unknown fields (else pruned).
        crds = [with_payload_field(crd) for crd in crds]
    summary = crd_summary.summarize(crds)
    return crds, {**origin, "summary": summary.to_dict() if hasattr(summary, "to_dict") else asdict(summary)}
