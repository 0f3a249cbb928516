"""The registry of local instances: one directory per control plane under ``<cache>/instances/``,
each with its record (:data:`INSTANCE_FILE`), read here without starting or attaching anything.

:mod:`crdscale.cluster.local` writes the records; :func:`list_instances` is what ``crdscale
status`` shows and what a node checks before starting (one node per host).
"""

from __future__ import annotations

from dataclasses import dataclass

from crdscale.cluster.process import ProcessRecord
from crdscale.fsutil import read_json
from crdscale.paths import instances_dir

INSTANCE_FILE = "instance.json"


@dataclass(frozen=True)
class InstanceInfo:
    name: str
    status: str  # ready | starting | stopped | failed | stale (recorded as running, processes gone)
    server: str
    kubeconfig: str
    versions: dict
    created_at: str
    processes_alive: dict
    has_node: bool = False  # runs a test node (crdscale.cluster.node)


def list_instances() -> list[InstanceInfo]:
    """All instances recorded under the cache, newest first, with stale ones detected."""
    found = []
    root = instances_dir()
    if not root.is_dir():
        return []
    for state_file in root.glob(f"*/{INSTANCE_FILE}"):
        try:
            state = read_json(state_file)
        except (OSError, ValueError):
            continue
        alive = {p["name"]: ProcessRecord.from_json(p).alive() for p in state.get("processes", [])}
        status = state.get("status", "unknown")
        if status in ("ready", "starting") and not all(alive.values()):
            status = "stale"
        elif status == "starting" and state.get("starter") and not ProcessRecord.from_json(state["starter"]).alive():
            status = "stale"  # its starter died before recording (all of) the servers
        found.append(
            InstanceInfo(
                state.get("name", state_file.parent.name),
                status,
                state.get("server", ""),
                state.get("kubeconfig", ""),
                state.get("versions", {}),
                state.get("created_at", ""),
                alive,
                bool(state.get("node")),
            )
        )
    return sorted(found, key=lambda i: i.created_at, reverse=True)
