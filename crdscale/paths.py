"""Where crdscale keeps things: every path comes from here.

The cache (binaries built per version, control-plane instances) lives outside
any clone so that fresh clones and CI reruns reuse expensive builds.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "CRDSCALE_CACHE"


def cache_dir() -> Path:
    """Root of crdscale's cache: ``$CRDSCALE_CACHE`` or ``~/.cache/crdscale``, absolute (the local
    control plane runs in its instance directory, so a relative path there would name nothing)."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return (base / "crdscale").absolute()


def binaries_dir(component: str, version: str) -> Path:
    """Directory holding one built binary and its throwaway Go module, e.g. ``kube-apiserver/v1.37.1``."""
    return cache_dir() / component / version


def instances_dir() -> Path:
    """Directory with one sub-directory per local control-plane instance."""
    return cache_dir() / "instances"


def calibrated_models_dir() -> Path:
    """Footprint models fitted on this machine by ``crdscale footprint --calibrate``, one
    ``v<version>.json`` each; they win over the ones shipped with crdscale."""
    return cache_dir() / "footprint-models"


def runs_dir() -> Path:
    """Default parent of run directories: ``$CRDSCALE_RUNS`` or ``./runs``."""
    return Path(os.environ.get("CRDSCALE_RUNS", "runs"))
