"""benchmarks/kubernetes_parity.py: crdscale's kubeconfig/auth code against kubernetes' config loader.

crdscale's column always runs (it must pass every case crdscale supports, so the harness itself
stays honest). kubernetes' column runs only where ``kubernetes`` is importable -- it is not a
crdscale dependency and not in requirements.lock -- and is held to the outcomes docs/dependencies.md
records, so a kubernetes release that changes them is noticed where someone has it installed.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _harness():
    spec = importlib.util.spec_from_file_location("kubernetes_parity", ROOT / "benchmarks" / "kubernetes_parity.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


PARITY = _harness()

# What crdscale does not support (docs/how-to/any-cluster.md says so).
CRDSCALE_FAILS = {"new: tls-server-name", "new: proxy-url", "new: impersonation"}
# What kubernetes 37.0.2's config loader fails, as docs/dependencies.md shows.
KUBERNETES_FAILS = {
    "merge: later-current-context-ignored",
    "paths: relative to the defining file",
    "exec: relative command",
    "exec: a 4-minute token is kept",
    "exec: 401 runs it again",
    "exec: no loop on a second 401",
    "exec: a failing plugin is an error",
    "token file: read",
    "token file: re-read after a 401",
    "token file: re-read every minute",
    "certs: key written privately",
    "new: impersonation",
}


def _failing(results: dict[str, str]) -> set[str]:
    return {name for name, outcome in results.items() if outcome != "ok"}


def test_crdscale_passes_every_case_it_supports():
    out = PARITY.measure(["crdscale"])
    results = out["results"]["crdscale"]
    assert set(results) == set(out["scenarios"])
    assert _failing(results) == CRDSCALE_FAILS, {k: v for k, v in results.items() if v != "ok"}


def test_kubernetes_fails_the_cases_docs_dependencies_md_records():
    if PARITY.kubernetes_available() is None:
        pytest.skip("kubernetes is not installed (not a crdscale dependency; see benchmarks/kubernetes_parity.py)")
    results = PARITY.measure(["kubernetes"])["results"]["kubernetes"]
    assert _failing(results) == KUBERNETES_FAILS, "update docs/dependencies.md: " + str(
        {k: v for k, v in results.items() if (v != "ok") != (k in KUBERNETES_FAILS)}
    )
