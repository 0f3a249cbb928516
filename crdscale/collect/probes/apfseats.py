"""APF seats probe: the seats both estimators give the measured LISTs, and the seats the server observed.

Requests from ``system:masters`` land in the *exempt* priority level, which
never runs the work estimator. To see the server's own estimate the probe
replays each LIST impersonating a throwaway user (``crdscale-apf-probe``,
allowed to get/list only what the probe lists, through an ownership-labelled
ClusterRole and binding), whose requests fall into ``global-default``, and
reads ``apiserver_flowcontrol_work_estimated_seats`` before and after.

The server's estimator works from each resource's object count and average size,
which kube-apiserver refreshes only every minute or two (:data:`.configs.STATS_REFRESH_MAX_S`);
:func:`wait_for_estimator_stats` waits for a refresh that has seen the probe's
objects, and each observation records whether the server's statistics were current
(``stats_current``), so a seat count made from stale statistics is labelled, not
compared as if it were the estimator's answer.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable, Mapping

import pandas as pd

from crdscale.cluster.listing import METADATA_ONLY_ACCEPT, ListTarget
from crdscale.collect.promtext import Samples
from crdscale.errors import ClusterError
from crdscale.models import apf
from crdscale.units import is_missing

from . import ProbeResult, Section, listcost, listobjects, requestcost, write_tables
from ._http import check, fresh_transport, timed_get
from .configs import STATS_WAIT_S, ApfConfig
from .fixtures import ProbeFixtures, probe_labels
from .requests import ListRequest

log = logging.getLogger(__name__)

SEATS_HISTOGRAM = "apiserver_flowcontrol_work_estimated_seats"
PROBE_USER = "crdscale-apf-probe"
# The priority level the probe user's requests get: the suggested "global-default" FlowSchema
# catches authenticated users no other schema matches, in every release since APF's 1.20.
PROBE_LEVEL = "global-default"
ATTEMPTS = 5

STATS_POLL_S = 5.0
STATS_NOT_CURRENT = "stats-not-current"


# Per measured LIST: what it was and both estimators' seats (the seats table starts with these).
ESTIMATE_COLUMNS = (
    "resource",
    "kind",
    "items",
    "bytes",
    "served_from",
    "estimator_assumes",
    "object_count_seats",
    "size_based_seats",
    "size_based_seats_measured_place",
)


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


def _split(group_resource: str) -> tuple[str, str]:
    """``listprobes.g.example.io`` -> (``g.example.io``, ``listprobes``); ``secrets`` -> (``""``, ``secrets``)."""
    resource, _, group = group_resource.partition(".")
    return group, resource


def stats_current(object_count: float, total_size_bytes: float, stored: int | None) -> bool:
    """Whether the server's estimator statistics for a resource describe its ``stored`` objects:
    its count equals them, and its size estimate (where the server exposes one) is positive when
    there are objects. ``stored`` None (unknown): current. NaN count (not exposed): not current."""
    if stored is None:
        return True
    if is_missing(object_count) or int(object_count) != stored:
        return False
    return is_missing(total_size_bytes) or stored == 0 or total_size_bytes > 0


def stored_counts(cluster, targets: list[ListTarget]) -> dict[str, int]:
    """Objects of each target resource stored now, all namespaces (a consistent metadata-only LIST):
    the number a current estimator count must equal. Keys are ``group_resource`` names."""
    out = {}
    for target in targets:
        path = target.collection_path()
        resp = check(cluster.get(path, headers={"Accept": METADATA_ONLY_ACCEPT}, timeout=60), f"count {path}")
        out[target.group_resource] = len(resp.json().get("items") or [])
    return out


def estimator_stats(cluster, stored: Mapping[str, int]) -> pd.DataFrame:
    """The server's object count and size estimate per resource in ``stored``, with ``stored_objects``
    and ``stats_current`` (:func:`stats_current`)."""
    samples = requestcost.scrape(cluster, names=requestcost.OBJECT_COUNT_METRICS + requestcost.SIZE_ESTIMATE_METRICS)
    rows = []
    for group_resource, count in stored.items():
        stats = requestcost.object_stats(samples, *_split(group_resource))
        current = stats_current(stats["object_count"], stats["total_size_bytes"], count)
        rows.append({"resource": group_resource, **stats, "stored_objects": count, "stats_current": current})
    return pd.DataFrame(rows)


def wait_for_estimator_stats(
    cluster,
    targets: list[ListTarget],
    *,
    timeout_s: float = STATS_WAIT_S,
    poll_s: float = STATS_POLL_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> pd.DataFrame:
    """Poll :func:`estimator_stats` until every resource's statistics are current, at most ``timeout_s``
    (by default one refresh interval at its longest, :data:`.configs.STATS_REFRESH_MAX_S`, plus a margin).
    Returns the last table; rows still not current are logged as a warning, and observations made
    from them are labelled (:func:`observe_seats`)."""
    stored = stored_counts(cluster, targets)
    deadline = clock() + timeout_s
    logged = False
    while True:
        stats = estimator_stats(cluster, stored)
        if stats["stats_current"].all():
            return stats
        if clock() >= deadline:
            stale = stats[~stats["stats_current"]]
            log.warning(
                "the server's object statistics are not current after %.0f s (%s); "
                "seats observed now are labelled stats-not-current",
                timeout_s,
                ", ".join(
                    f"{r.resource}: {r.object_count:g} counted, {r.stored_objects} stored" for r in stale.itertuples()
                ),
            )
            return stats
        if not logged:
            log.info(
                "waiting up to %.0f s for the server to refresh the object counts its APF estimator reads", timeout_s
            )
            logged = True
        sleep(poll_s)


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
    stored: Mapping[str, int] | None = None,
) -> pd.DataFrame:
    """Replay each LIST once as a non-exempt user; returns ``resource``, ``kind``,
    ``observed_seats`` (NaN when the metric did not move), ``priority_level``, ``flow_schema``,
    ``status``, and the statistics the server's estimator had when it estimated (read in the same
    scrape): ``estimator_object_count`` and ``stats_current`` (:func:`stats_current` against
    ``stored``, the objects stored per resource; always True without it)."""
    groups = sorted({r.split(".", 1)[1] if "." in r else "" for r in lists["resource"]})
    resources = sorted({r.split(".", 1)[0] for r in lists["resource"]})
    role, binding = _rbac(
        run_id, secrets.token_hex(3), [{"apiGroups": groups, "resources": resources, "verbs": ["get", "list"]}]
    )
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    check(cluster.post(f"{rbac}/clusterroles", role, timeout=30), "create ClusterRole", ok=(201, 409))
    check(cluster.post(f"{rbac}/clusterrolebindings", binding, timeout=30), "create ClusterRoleBinding", ok=(201, 409))
    rows = []
    probe_transport = fresh_transport(cluster, pool_size=2)
    try:
        for row in lists.itertuples(index=False):
            params = json.loads(row.params) if isinstance(row.params, str) else dict(row.params)
            request = ListRequest(row.kind, row.path, params, accept=row.accept)
            level, seats, schema, status = "", float("nan"), "", 0
            group, resource = _split(row.resource)
            stored_now = None if stored is None else stored.get(row.resource)
            counted, current = float("nan"), stored_now is None
            # Other clients' requests land in the same histogram; ours is never exempt (the
            # probe user is not in system:masters). Accept a scrape pair in which exactly one
            # non-exempt request was estimated, and retry a few times otherwise.
            for _attempt in range(ATTEMPTS):
                before = requestcost.scrape(
                    cluster,
                    names=(SEATS_HISTOGRAM, *requestcost.OBJECT_COUNT_METRICS, *requestcost.SIZE_ESTIMATE_METRICS),
                )
                result = timed_get(
                    probe_transport,
                    cluster.url(request.path),
                    params=request.params,
                    headers={"Accept": request.accept, "Impersonate-User": PROBE_USER},
                )
                after = requestcost.scrape(cluster, names=(SEATS_HISTOGRAM,))
                status = result.status
                if status == 403:
                    raise ClusterError(
                        f"impersonated LIST {request.path} forbidden; RBAC for {PROBE_USER} not effective yet"
                    )
                moved = {
                    k: d
                    for k, d in requestcost.histogram_delta_by(before, after, SEATS_HISTOGRAM, "priority_level").items()
                    if k != "exempt"
                }
                # kube-controller-manager's controllers (service-account credentials, workload-high)
                # and other clients are estimated between the scrapes too: ours is the one request
                # of the probe user's level, or else the only non-exempt request of the window.
                if moved.get(PROBE_LEVEL, {}).get("count") == 1:
                    moved = {PROBE_LEVEL: moved[PROBE_LEVEL]}
                if len(moved) == 1 and next(iter(moved.values()))["count"] == 1:
                    level, d = next(iter(moved.items()))
                    seats = d["sum"]
                    by_schema = requestcost.histogram_delta_by(before, after, SEATS_HISTOGRAM, "flow_schema")
                    schema = (
                        PROBE_LEVEL  # the suggested FlowSchema of that name leads to the level of that name
                        if level == PROBE_LEVEL and by_schema.get(PROBE_LEVEL, {}).get("count") == 1
                        else next((k for k, d in by_schema.items() if d["count"] == 1 and k != "exempt"), "")
                    )
                    estimator = requestcost.object_stats(before, group, resource)
                    counted = estimator["object_count"]
                    current = stats_current(counted, estimator["total_size_bytes"], stored_now)
                    break
            rows.append(
                {
                    "resource": row.resource,
                    "kind": row.kind,
                    "observed_seats": seats,
                    "priority_level": level,
                    "flow_schema": schema,
                    "status": status,
                    "estimator_object_count": counted,
                    "stats_current": current,
                }
            )
            log.info(
                "  %32s %24s: observed seats %g (%s)", row.resource, row.kind, seats, level or "metric did not move"
            )
            if not current:
                log.warning(
                    "%s %s: the server estimated from %g objects, %s are stored; observation labelled stats-not-current",
                    row.resource,
                    row.kind,
                    counted,
                    stored_now,
                )
    finally:
        probe_transport.close()
        # Delete by name: exactly the two objects created above.
        for kind, obj in (("clusterrolebindings", binding), ("clusterroles", role)):
            resp = cluster.delete(f"{rbac}/{kind}/{obj['metadata']['name']}", timeout=30)
            if resp.status_code not in (200, 202, 404):
                log.warning("cleanup of %s/%s failed: HTTP %s", kind, obj["metadata"]["name"], resp.status_code)
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
    nominal = requestcost.scrape(cluster, names=(NOMINAL_LIMIT,))
    plcs = check(cluster.get(PLC_PATH, timeout=30), "list PriorityLevelConfigurations").json().get("items", [])
    return level_limits_from(nominal, plcs)


def compare(
    lists: pd.DataFrame, stats: pd.DataFrame | None, observed: pd.DataFrame | None, limits: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The APF table: per measured LIST, bytes, place, both estimates and (if any) the server's
    observation, with both estimates capped at the observed priority level's ``max_seats`` as the
    server computes it from its own configuration (``limits``: :func:`level_limits`)."""
    table = estimate(lists, stats)
    table = table[list(ESTIMATE_COLUMNS)]
    if observed is not None and not observed.empty:
        # stats_current: observations from before this label existed count as current.
        observed = observed if "stats_current" in observed else observed.assign(stats_current=True)
        table = table.merge(
            observed[["resource", "kind", "observed_seats", "priority_level", "stats_current"]],
            on=["resource", "kind"],
            how="left",
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
            if not row.stats_current:  # NaN (no observation) was handled above
                # The server estimated from counts older than the objects: not the estimator's answer.
                return STATS_NOT_CURRENT
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


SEATS_COLUMNS = (
    *ESTIMATE_COLUMNS,
    "observed_seats",
    "priority_level",
    "level_max_seats",
    "observed_matches",
)


def run(cluster, config: ApfConfig, writer, *, step: int = 0, run_id: str) -> ProbeResult:
    """The APF probe as one step: the LIST probe's requests (same objects and kinds), both estimators on
    them, and with ``config.observe`` the seats the server observed and its priority levels' limits.
    Writes ``seats`` (main), ``lists`` and ``levels`` into ``writer``."""
    config.validate()
    with ProbeFixtures(cluster, run_id, keep=config.keep) as fixtures:
        populated = listobjects.populate(fixtures, config)
        lists = listcost.measure_lists(
            cluster, populated, repeats=config.repeats, page_size=config.page_size, kinds=config.kinds
        )
        if config.observe:
            stats = wait_for_estimator_stats(cluster, populated.targets, timeout_s=config.stats_wait_s)
            stored = dict(zip(stats["resource"], stats["stored_objects"]))
            observed = observe_seats(cluster, lists, run_id=run_id, stored=stored)
            limits = level_limits(cluster)
        else:
            stats, observed, limits = listcost.server_object_stats(cluster, populated), None, None
    table = compare(lists, stats, observed, limits)
    tables = {"seats": table, "lists": lists}
    if limits is not None:
        tables["levels"] = limits  # each priority level's seat limit, read from the server
    write_tables(writer, "apf", step, tables, main="seats")
    note = ""
    if "observed_matches" in table:
        counts = table["observed_matches"].replace("", "not observed").value_counts().to_dict()
        note = (
            "(bytes in MiB; observed = apiserver_flowcontrol_work_estimated_seats for an impersonated non-exempt "
            "user; estimates capped at the level's max seats, which the server derives from its nominal "
            f"concurrency limit and the level's hand size: {counts})"
        )
    section = Section(
        "APF seats per LIST: object-count estimator (max 10) vs size-based (max 100)",
        "seats",
        SEATS_COLUMNS,
        {"bytes": "MiB", "observed_seats": "int", "level_max_seats": "int"},
        note,
    )
    return ProbeResult("apf", tables, "seats", sections=[section])
