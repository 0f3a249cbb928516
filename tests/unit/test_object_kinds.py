"""The kind name of a run's custom resources has one owner, crdscale.crds.objects.CUSTOM_RESOURCES; the modules
that compare with it (analysis, report, footprint) take it from there rather than spell it."""

from __future__ import annotations

import ast
from pathlib import Path

from crdscale.crds.objects import CUSTOM_RESOURCES, OBJECT_KINDS

ROOT = Path(__file__).resolve().parents[2] / "crdscale"
OWNER = ROOT / "crds" / "objects.py"


def test_only_crds_objects_spells_customresources():
    spelled = sorted(
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.py")
        if path != OWNER
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value == CUSTOM_RESOURCES
    )
    assert spelled == [], spelled
    assert CUSTOM_RESOURCES == "customresources" == OBJECT_KINDS[0]
