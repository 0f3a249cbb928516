"""Ownership labels: crdscale only ever deletes objects that carry them.

Every object crdscale creates (CRDs, custom resources, Secrets, ConfigMaps,
namespaces) gets both labels; cleanup selects on them and nothing else.
"""

from __future__ import annotations

import secrets
import time

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "crdscale"
RUN_ID_LABEL = "crdscale.io/run-id"


def new_run_id() -> str:
    """A short, sortable, unique run id such as ``20261122t031500-3fa2``."""
    return time.strftime("%Y%m%dt%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def ownership_labels(run_id: str) -> dict[str, str]:
    """The labels to put on every object created by run ``run_id``."""
    return {MANAGED_BY_LABEL: MANAGED_BY_VALUE, RUN_ID_LABEL: run_id}


def owned_selector(run_id: str | None = None) -> str:
    """Label selector for objects crdscale created (all runs, or one run)."""
    selector = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
    if run_id:
        selector += f",{RUN_ID_LABEL}={run_id}"
    return selector


def is_owned(labels: dict[str, str] | None, run_id: str | None = None) -> bool:
    """True when ``labels`` mark an object as crdscale's (and of ``run_id`` if given)."""
    labels = labels or {}
    if labels.get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
        return False
    return run_id is None or labels.get(RUN_ID_LABEL) == run_id
