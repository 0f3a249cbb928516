"""The kubeconfig/auth cases of crdscale.testing.kubeconfig_parity, one test each, for crdscale's own
loader and (where it is importable) kubernetes' config loader.

crdscale must pass every case it supports. ``kubernetes`` is not a crdscale dependency and not in
requirements.lock: its cases run only where it is installed, held to the outcomes
docs/dependencies.md records, so a kubernetes release that changes them is noticed there
(benchmarks/kubernetes_parity.py prints that column).
"""

from __future__ import annotations

import logging

import pytest

from crdscale.testing import kubeconfig_parity as parity

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
NAMES = parity.scenario_names()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return parity.make_pki(tmp_path_factory.mktemp("parity-pki"))


def test_the_recorded_outcomes_name_real_cases():
    assert len(NAMES) == len(set(NAMES)) == 25
    assert CRDSCALE_FAILS <= set(NAMES) and KUBERNETES_FAILS <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_crdscale(name, pki, tmp_path):
    outcome = parity.run_scenario(name, parity.CrdscaleClient, root=tmp_path / "case", pki=pki)
    if name in CRDSCALE_FAILS:
        assert outcome != "ok", f"crdscale now passes {name!r}: update CRDSCALE_FAILS and docs/dependencies.md"
    else:
        assert outcome == "ok"


@pytest.mark.parametrize("name", NAMES)
def test_kubernetes(name, pki, tmp_path):
    if parity.kubernetes_available() is None:
        pytest.skip("kubernetes is not installed (not a crdscale dependency; see benchmarks/kubernetes_parity.py)")
    levels = {name: logging.getLogger(name).level for name in ("kubernetes", "")}
    parity.quiet_kubernetes_logs()
    try:
        outcome = parity.run_scenario(name, parity.KubernetesClient, root=tmp_path / "case", pki=pki)
    finally:
        for logger, level in levels.items():
            logging.getLogger(logger).setLevel(level)
    assert (outcome == "ok") == (name not in KUBERNETES_FAILS), f"update docs/dependencies.md: {name}: {outcome}"
