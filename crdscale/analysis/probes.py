"""Findings tables for the probe notebooks: pure functions over the probes' parquet tables."""

from __future__ import annotations

import pandas as pd

from crdscale.models.probecosts import cache_vs_etcd
from crdscale.units import fmt_bytes


def discovery_findings(sweep: pd.DataFrame, *, tolerance: float = 0.15) -> pd.DataFrame:
    """One finding per (group-versions, limit): measured vs predicted throttling delay (seconds) and verdict."""
    if sweep.empty:
        return pd.DataFrame(columns=["finding", "value"])
    rows = []
    for (gv, limit), grp in sweep.groupby(["group_versions", "limit"], sort=True):
        if str(limit).startswith("kubectl"):
            # A real kubectl: its own wall time and GETs, beside the model's longest wait for its limiter.
            for _, row in grp.iterrows():
                command = row.get("command") if isinstance(row.get("command"), str) else "kubectl"
                rows.append(
                    {
                        "finding": f"{gv} group-versions, {limit}: {command.removeprefix('kubectl ')}",
                        "value": f"wall {row['wall_s']:.2f} s, {int(row['requests'])} GETs "
                        f"(model's longest wait {row['predicted_delay_s']:.2f} s)",
                    }
                )
            continue
        measured = grp["measured_delay_s"].median()
        predicted = grp["predicted_delay_s"].iloc[0]
        # End-to-end prediction (the wait net of overlapping transfer) when the sweep recorded it.
        expected = grp["predicted_extra_wall_s"].iloc[0] if "predicted_extra_wall_s" in grp else predicted
        if predicted > 0 and expected > 0:
            err = abs(measured - expected) / expected
            verdict = "agrees" if err <= tolerance else "disagrees"
            value = (
                f"measured {measured:.2f} s vs predicted {expected:.2f} s end to end "
                f"(longest wait {predicted:.2f} s; {err:.0%}, {verdict})"
            )
        else:
            value = f"no throttling predicted; measured {measured:+.2f} s vs unthrottled"
        rows.append({"finding": f"{gv} group-versions, {limit}", "value": value})
    return pd.DataFrame(rows)


def list_findings(lists: pd.DataFrame) -> pd.DataFrame:
    """Headline comparisons of the LIST probe per resource: metadata-only and Table savings on the
    default server, and each LIST served from etcd vs from the watch cache (:func:`cache_vs_etcd`)."""
    rows = []
    every_server = lists
    if "apiserver" in lists:
        lists = lists[lists["apiserver"] == lists["apiserver"].iloc[0]] if len(lists) else lists
    for resource, grp in lists.groupby("resource"):
        by = grp.set_index("kind")

        def get(kind: str, col: str, by=by):
            return by.loc[kind, col] if kind in by.index else float("nan")

        rows.append({"finding": f"{resource}: objects listed", "value": f"{int(get('rv0', 'items'))}"})
        for kind in ("rv0", "consistent", "exact", "paged"):
            if kind in by.index:
                rows.append(
                    {
                        "finding": f"{resource}: {kind}",
                        "value": f"{get(kind, 'latency_s') * 1000:.1f} ms, {fmt_bytes(get(kind, 'bytes'), digits=2)}, served from {get(kind, 'served_from')}",
                    }
                )
        full, meta = get("rv0", "bytes"), get("metadata-only", "bytes")
        if full == full and meta == meta and meta > 0:
            rows.append(
                {
                    "finding": f"{resource}: metadata-only response",
                    "value": f"{full / meta:.1f}x smaller than full objects",
                }
            )
        table = get("table", "bytes")
        if full == full and table == table and table > 0:
            rows.append(
                {"finding": f"{resource}: Table response", "value": f"{full / table:.1f}x smaller than full objects"}
            )
    mismatched = lists[
        (lists["served_from"].isin(["cache", "etcd"]))
        & ((lists["served_from"] == "cache") != lists["expected_from_cache"])
    ]
    for row in mismatched.itertuples(index=False):
        rows.append(
            {
                "finding": f"{row.resource}: {row.kind} place",
                "value": f"served from {row.served_from}, unlike the APF estimator's assumption",
            }
        )
    paired = cache_vs_etcd(every_server)
    paired = paired[paired["same_response"]]
    for row in paired.itertuples(index=False):
        ratios = ", ".join(
            f"{label} {getattr(row, f'{name}_ratio'):.1f}x"
            for name, label in (("latency", "latency"), ("cpu", "CPU"), ("alloc", "allocated"))
            if getattr(row, f"{name}_ratio") == getattr(row, f"{name}_ratio")
        )
        value = (
            f"{row.latency_etcd * 1000:.1f} vs {row.latency_cache * 1000:.1f} ms"
            + (f" ({ratios})" if ratios else "")
            + f"; objects read {row.fetched_etcd:g} vs {row.fetched_cache:g} for {int(row.items)} returned"
        )
        rows.append({"finding": f"{row.resource}: {row.kind}, etcd vs watch cache", "value": value})
    return pd.DataFrame(rows)


def apf_findings(seats: pd.DataFrame) -> pd.DataFrame:
    """Where the two estimators differ, and which one the server's observed seats match."""
    rows = []
    differ = seats[seats["object_count_seats"] != seats["size_based_seats"]]
    rows.append({"finding": "LISTs where the estimators differ", "value": f"{len(differ)} of {len(seats)}"})
    for row in differ.itertuples(index=False):
        rows.append(
            {
                "finding": f"{row.resource}: {row.kind}",
                "value": f"{fmt_bytes(row.bytes, digits=2)} from {row.served_from}: object count {row.object_count_seats}, size based {row.size_based_seats}",
            }
        )
    if "observed_matches" in seats:
        counts = seats["observed_matches"].replace("", "not observed").value_counts()
        rows.append({"finding": "server's seats match", "value": ", ".join(f"{k}: {v}" for k, v in counts.items())})
    return pd.DataFrame(rows)
