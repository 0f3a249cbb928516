"""CEL validation rules in the footprint: counted per served version, and the v1.37.1 model's term for them
(heap per rule, measured on a run of the Azure provider's 2026 CRDs; the sweep's generated CRDs have none)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crdscale.errors import UsageError
from crdscale.footprint import predict_footprint
from crdscale.footprint.calibrate import add_cel_term, default_features
from crdscale.footprint.features import cel_rules, crd_features
from crdscale.footprint.store import choose_model

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "tests" / "data" / "crds" / "azure-2026"
RULE = {"rule": "self.a > 0", "message": "a must be positive"}


def test_rules_are_counted_wherever_a_schema_nests_them():
    schema = {
        "type": "object",
        "x-kubernetes-validations": [RULE, RULE],
        "properties": {
            "spec": {"type": "object", "x-kubernetes-validations": [RULE]},
            "list": {"type": "array", "items": {"type": "object", "x-kubernetes-validations": [RULE]}},
            "map": {"type": "object", "additionalProperties": {"x-kubernetes-validations": [RULE]}},
            "plain": {"type": "string"},
        },
    }
    assert cel_rules(schema) == 5
    assert cel_rules({"type": "object"}) == 0 and cel_rules(None) == 0


def test_only_served_versions_count():
    def version(name, served):
        return {"name": name, "served": served, "schema": {"openAPIV3Schema": {"x-kubernetes-validations": [RULE]}}}

    crd = {"spec": {"versions": [version("v1", True), version("v2", True), version("v0", False)]}}
    assert crd_features(crd)["cel_rules"] == 2


def test_the_model_adds_heap_per_rule_to_the_cel_cause_and_the_total():
    model = choose_model("1.37.1", shipped_only=True).model
    assert "cel_rules" in model.features and model.provenance["uses"]["cel_term"]
    i = model.features.index("cel_rules")
    per_rule = model.targets["cel"].coef[i]
    assert 10 * 1024 < per_rule < 1024 * 1024 and model.targets["total"].coef[i] == per_rule
    prediction = predict_footprint(CRDS, shipped=True, top=0)
    rules = prediction.features["cel_rules"]
    assert rules == 14  # the nine recorded CRDs: 1 or 2 rules each (tests/data/crds/azure-2026)
    assert prediction.rows["cel"]["value"] == pytest.approx(rules * per_rule)


def test_a_refit_leaves_the_term_out_and_a_run_without_cel_gives_none():
    assert "cel_rules" not in default_features("1.37.1")
    with pytest.raises(UsageError, match="no CEL rules installed or no CEL heap growth"):
        add_cel_term(ROOT / "data" / "reference-run", ROOT / "tests" / "data" / "crds" / "tree", model_file="none.json")


def test_a_run_manifest_counts_its_served_rules_and_a_fit_reads_them_back():
    """The set summary a run records counts CEL rules (served versions only), so `footprint fit validate` predicts
    with them; a summary recorded before they were counted is told apart from one with none."""
    from crdscale.crds.load import load_crds
    from crdscale.crds.summary import summarize
    from crdscale.footprint.features import features_from_summary, summary_counts_cel

    summary = summarize(load_crds(CRDS).crds).to_dict()
    assert summary["cel_rules"] == 14 and summary_counts_cel(summary)
    assert features_from_summary(summary)["cel_rules"] == 14
    older = {k: v for k, v in summary.items() if k != "cel_rules"}
    assert not summary_counts_cel(older) and features_from_summary(older)["cel_rules"] == 0


def test_generated_provider_crds_carry_upjet_shaped_rules_on_request_only():
    from crdscale.crds.generate import generate_crds, preset

    plain = generate_crds(preset("provider", crd_count=3, group_count=1, property_count=5, seed=3))
    ruled = generate_crds(preset("provider", crd_count=3, group_count=1, property_count=5, seed=3, cel_rules=2))
    assert sum(crd_features(c)["cel_rules"] for c in plain) == 0
    assert [crd_features(c)["cel_rules"] for c in ruled] == [4, 4, 4]  # 2 rules x 2 served versions (the preset's)
    spec = ruled[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    checked = list(spec["properties"]["forProvider"]["properties"])[:2]
    assert list(spec["properties"]["initProvider"]["properties"]) == checked
    assert [r["message"] for r in spec["x-kubernetes-validations"]] == [
        f"spec.forProvider.{name} is a required parameter" for name in checked
    ]
    assert f"has(self.initProvider.{checked[0]})" in spec["x-kubernetes-validations"][0]["rule"]
    with pytest.raises(UsageError, match="provider shape"):
        preset("apigen", crd_count=1, group_count=1, cel_rules=1)


def test_a_cel_term_from_a_run_without_its_crds_needs_a_manifest_that_counted_them(tmp_path):
    with pytest.raises(UsageError, match="does not count the CEL rules"):
        add_cel_term(ROOT / "data" / "reference-run", model_file=tmp_path / "m.json")


def test_a_scenarios_cel_rules_are_checked_where_they_enter():
    from crdscale.scenario.config import build_scenario

    with pytest.raises(UsageError, match="'crds.cel_rules' must be >= 0, got -1"):
        build_scenario({"crds": {"preset": "provider", "cel_rules": -1}})
