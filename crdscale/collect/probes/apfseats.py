"""APF seats probe: the seats both estimators give the measured LISTs, and the seats the server observed.

Requests from ``system:masters`` land in the *exempt* priority level, which
never runs the work estimator. To see the server's own estimate the probe
replays each LIST impersonating a throwaway user (``crdscale-apf-probe``,
allowed to get/list only what the probe lists, through an ownership-labelled
ClusterRole and binding), whose requests fall into ``global-default``, and
reads ``apiserver_flowcontrol_work_estimated_seats`` before and after.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable

import pandas as pd

from crdscale.collect.promtext import Samples
from crdscale.errors import ClusterError
from crdscale.models import apf

from . import metrics as m
from ._http import check, fresh_session, timed_get
from .fixtures import probe_labels
from .requests import ListRequest

SEATS_HISTOGRAM = "apiserver_flowcontrol_work_estimated_seats"
PROBE_USER = "crdscale-apf-probe"
ATTEMPTS = 3


def average_sizes(lists: pd.DataFrame, stats: pd.DataFrame | None = None) -> dict[str, int]:
    """Average object size per resource, bytes: the server's estimate where exposed, else the measured
    JSON bytes per item of the full ``rv0`` LIST (JSON is larger than what etcd stores)."""
    out: dict[str, int] = {}
    if stats is not None and not stats.empty and "avg_size_bytes" in stats:
        for row in stats.itertuples(index=False):
            if row.avg_size_bytes == row.avg_size_bytes and row.avg_size_bytes > 0:  # not NaN
                out[row.resource] = int(row.avg_size_bytes)
    full = lists[(lists["kind"] == "rv0") & (lists["items"] > 0)]
    for row in full.itertuples(index=False):
        out.setdefault(row.resource, int(row.bytes / row.items))
    return out


def object_counts(lists: pd.DataFrame, stats: pd.DataFrame | None = None) -> dict[str, int]:
    """Stored objects per resource: the server's count where exposed, else the items of the full ``rv0`` LIST."""
    out: dict[str, int] = {}
    if stats is not None and not stats.empty and "object_count" in stats:
        for row in stats.itertuples(index=False):
            if row.object_count == row.object_count and row.object_count > 0:
                out[row.resource] = int(row.object_count)
    for row in lists[lists["kind"] == "rv0"].itertuples(index=False):
        out.setdefault(row.resource, int(row.items))
    return out


def estimate(lists: pd.DataFrame, stats: pd.DataFrame | None = None) -> pd.DataFrame:
    """Both estimators applied to the LIST probe's rows (``object_count_seats``, ``size_based_seats``)."""
    return apf.estimate_measured_lists(
        lists, object_counts=object_counts(lists, stats), avg_sizes=average_sizes(lists, stats)
    )


def _rbac(run_id: str, instance: str, rules: list[dict]) -> tuple[dict, dict]:
    name = f"crdscale-apf-probe-{instance}"
    labels = probe_labels(run_id, instance)
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels},
        "rules": rules,
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": labels},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": PROBE_USER}],
    }
    return role, binding


def observe_seats(
    cluster,
    lists: pd.DataFrame,
    *,
    run_id: str,
    echo: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Replay each LIST once as a non-exempt user; returns ``resource``, ``kind``,
    ``observed_seats`` (NaN when the metric did not move), ``priority_level``, ``flow_schema``."""
    say = echo or (lambda _m: None)
    groups = sorted({r.split(".", 1)[1] if "." in r else "" for r in lists["resource"]})
    resources = sorted({r.split(".", 1)[0] for r in lists["resource"]})
    role, binding = _rbac(
        run_id, secrets.token_hex(3), [{"apiGroups": groups, "resources": resources, "verbs": ["get", "list"]}]
    )
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    check(cluster.post(f"{rbac}/clusterroles", role, timeout=30), "create ClusterRole", ok=(201, 409))
    check(cluster.post(f"{rbac}/clusterrolebindings", binding, timeout=30), "create ClusterRoleBinding", ok=(201, 409))
    rows = []
    probe_session = fresh_session(cluster, pool_size=2)
    probe_session.headers["Impersonate-User"] = PROBE_USER
    try:
        for row in lists.itertuples(index=False):
            params = json.loads(row.params) if isinstance(row.params, str) else dict(row.params)
            request = ListRequest(row.kind, row.path, params, accept=row.accept)
            level, seats, schema, status = "", float("nan"), "", 0
            # Other clients' requests land in the same histogram; ours is never exempt (the
            # probe user is not in system:masters). Accept a scrape pair in which exactly one
            # non-exempt request was estimated, and retry a few times otherwise.
            for _attempt in range(ATTEMPTS):
                before = m.scrape(cluster, names=(SEATS_HISTOGRAM,))
                result = timed_get(
                    probe_session, cluster.url(request.path), params=request.params, headers={"Accept": request.accept}
                )
                after = m.scrape(cluster, names=(SEATS_HISTOGRAM,))
                status = result.status
                if status == 403:
                    raise ClusterError(
                        f"impersonated LIST {request.path} forbidden; RBAC for {PROBE_USER} not effective yet"
                    )
                moved = {
                    k: d
                    for k, d in m.histogram_delta_by(before, after, SEATS_HISTOGRAM, "priority_level").items()
                    if k != "exempt"
                }
                if len(moved) == 1 and next(iter(moved.values()))["count"] == 1:
                    level, d = next(iter(moved.items()))
                    seats = d["sum"]
                    by_schema = m.histogram_delta_by(before, after, SEATS_HISTOGRAM, "flow_schema")
                    schema = next((k for k, d in by_schema.items() if d["count"] == 1 and k != "exempt"), "")
                    break
            rows.append(
                {
                    "resource": row.resource,
                    "kind": row.kind,
                    "observed_seats": seats,
                    "priority_level": level,
                    "flow_schema": schema,
                    "status": status,
                }
            )
            say(f"  {row.resource:>32} {row.kind:>24}: observed seats {seats:g} ({level or 'metric did not move'})")
    finally:
        probe_session.close()
        # Delete by name: exactly the two objects created above.
        for kind, obj in (("clusterrolebindings", binding), ("clusterroles", role)):
            resp = cluster.delete(f"{rbac}/{kind}/{obj['metadata']['name']}", timeout=30)
            if resp.status_code not in (200, 202, 404):
                say(f"cleanup of {kind}/{obj['metadata']['name']} failed: HTTP {resp.status_code}")
    return pd.DataFrame(rows)


NOMINAL_LIMIT = "apiserver_flowcontrol_nominal_limit_seats"
PLC_PATH = "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations"


def level_limits_from(nominal: Samples, plcs: list[dict]) -> pd.DataFrame:
    """Per priority level: ``nominal_limit_seats`` (the server's gauge), ``hand_size`` (its
    PriorityLevelConfiguration) and ``max_seats`` a request may occupy there
    (:func:`crdscale.models.apf.priority_level_max_seats`; 0 = the level does not limit)."""
    hands = {}
    for plc in plcs:
        limited = (plc.get("spec") or {}).get("limited") or {}
        queuing = (limited.get("limitResponse") or {}).get("queuing") or {}
        hands[plc["metadata"]["name"]] = queuing.get("handSize")
    rows = []
    for labels, value in nominal.get(NOMINAL_LIMIT, []):
        level = labels.get("priority_level", "")
        hand = hands.get(level)
        rows.append(
            {
                "priority_level": level,
                "nominal_limit_seats": int(value),
                "hand_size": hand,
                "max_seats": apf.priority_level_max_seats(int(value), hand),
            }
        )
    return pd.DataFrame(rows, columns=["priority_level", "nominal_limit_seats", "hand_size", "max_seats"])


def level_limits(cluster) -> pd.DataFrame:
    """:func:`level_limits_from` read from the server: its ``/metrics`` gauge and its PriorityLevelConfigurations."""
    nominal = m.scrape(cluster, names=(NOMINAL_LIMIT,))
    plcs = check(cluster.get(PLC_PATH, timeout=30), "list PriorityLevelConfigurations").json().get("items", [])
    return level_limits_from(nominal, plcs)


def compare(
    lists: pd.DataFrame, stats: pd.DataFrame | None, observed: pd.DataFrame | None, limits: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The APF table: per measured LIST, bytes, place, both estimates and (if any) the server's
    observation, with both estimates capped at the observed priority level's ``max_seats`` as the
    server computes it from its own configuration (``limits``: :func:`level_limits`)."""
    table = estimate(lists, stats)
    cols = [
        "resource",
        "kind",
        "items",
        "bytes",
        "served_from",
        "estimator_assumes",
        "object_count_seats",
        "size_based_seats",
        "size_based_seats_measured_place",
    ]
    table = table[cols]
    if observed is not None and not observed.empty:
        table = table.merge(
            observed[["resource", "kind", "observed_seats", "priority_level"]], on=["resource", "kind"], how="left"
        )
        caps = {} if limits is None else dict(zip(limits["priority_level"], limits["max_seats"]))
        table["level_max_seats"] = table["priority_level"].map(caps)
        for name in ("object_count_seats", "size_based_seats"):
            table[f"{name}_at_level"] = [
                min(v, int(cap)) if cap == cap and cap > 0 else v
                for v, cap in zip(table[name], table["level_max_seats"])
            ]

        def matches(row) -> str:
            if row.observed_seats != row.observed_seats:
                return ""
            hits = [
                n
                for n, v in (
                    ("object-count", row.object_count_seats_at_level),
                    ("size-based", row.size_based_seats_at_level),
                )
                if v == row.observed_seats
            ]
            return ",".join(hits) or "neither"

        table["observed_matches"] = table.apply(matches, axis=1)
    return table
