"""The targets the analyses share have one owner, and the modules that spell them take it from there."""

from __future__ import annotations

import importlib

import pytest

from crdscale.analysis import targets


@pytest.mark.parametrize(
    "module",
    ["crdscale.analysis.percrd", "crdscale.analysis.perobject", "crdscale.footprint.model"],
)
def test_total_is_the_one_in_targets(module):
    # `from crdscale.analysis.percrd import TOTAL` (notebooks, scripts) keeps working.
    assert importlib.import_module(module).TOTAL is targets.TOTAL == "total"
