"""Unit tests need no network: the Go module proxy, which `crdscale run` asks whether a version to
build exists (crdscale.cluster.buildable), answers "served" here unless a test fakes it otherwise, and nothing is remembered outside the test."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_module_proxy(monkeypatch, tmp_path):
    from crdscale.cluster import buildable

    monkeypatch.setattr(buildable, "ask_proxy", lambda *_a, **_k: buildable.ModuleAnswer(True))
    # ...and its answers stay out of the real cache (~/.cache/crdscale/go-module-versions.json).
    monkeypatch.setattr(buildable, "_cache_path", lambda: tmp_path / buildable.CACHE_FILE)
