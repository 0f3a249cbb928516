"""Footprint model coefficients shipped with crdscale, one JSON file per kube-apiserver version.

Each ``v<version>.json`` is a :meth:`crdscale.analysis.footprint.FootprintModel.to_dict`
with its provenance (experiment, runs, machine, date); ``scripts/fit_footprint.py``
refits them from sweep runs.
"""

from __future__ import annotations

import json
from importlib import resources

from crdscale.errors import UsageError


def shipped_versions() -> list[str]:
    """Versions with shipped coefficients, e.g. ``["1.24.0", "1.37.1"]``."""
    names = [p.name for p in resources.files(__name__).iterdir() if p.name.endswith(".json")]
    return sorted(n[1:-len(".json")] for n in names if n.startswith("v"))


def shipped_model(version: str):
    """The :class:`~crdscale.analysis.footprint.FootprintModel` shipped for ``version``
    (``1.37.1`` or ``v1.37.1``); UsageError naming the shipped versions when there is none."""
    from crdscale.analysis.footprint import FootprintModel

    version = version.lstrip("v")
    path = resources.files(__name__).joinpath(f"v{version}.json")
    if not path.is_file():
        known = ", ".join(shipped_versions()) or "none"
        raise UsageError(f"no footprint coefficients for kube-apiserver v{version} (shipped: {known})")
    return FootprintModel.from_dict(json.loads(path.read_text()))
