"""Issue 30's limits on the two modules that grew by accretion: the runner orchestrates registered
measurements, and the footprint command only parses and renders (crdscale.footprint computes)."""

from __future__ import annotations

from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "crdscale"


@pytest.mark.parametrize(("module", "limit"), [("scenario/runner.py", 400), ("cli/footprint.py", 250)])
def test_module_stays_small(module, limit):
    lines = len((PACKAGE / module).read_text().splitlines())
    assert lines < limit, f"{module} has {lines} lines; move what it computes where it belongs"
