"""Findings tables for the probe notebooks: pure functions over the probes' parquet tables."""

from __future__ import annotations

import pandas as pd


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
                rows.append({"finding": f"{gv} group-versions, {limit}: {command.removeprefix('kubectl ')}",
                             "value": f"wall {row['wall_s']:.2f} s, {int(row['requests'])} GETs "
                                      f"(model's longest wait {row['predicted_delay_s']:.2f} s)"})
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
    """Headline comparisons of the LIST probe per resource: cache vs etcd latency, metadata-only and Table savings."""
    rows = []
    for resource, grp in lists.groupby("resource"):
        by = grp.set_index("kind")

        def get(kind: str, col: str):
            return by.loc[kind, col] if kind in by.index else float("nan")

        rows.append({"finding": f"{resource}: objects listed", "value": f"{int(get('rv0', 'items'))}"})
        for kind in ("rv0", "consistent", "exact", "paged"):
            if kind in by.index:
                rows.append(
                    {
                        "finding": f"{resource}: {kind}",
                        "value": f"{get(kind, 'latency_s') * 1000:.1f} ms, {get(kind, 'bytes') / 1e6:.2f} MB, served from {get(kind, 'served_from')}",
                    }
                )
        full, meta = get("rv0", "bytes"), get("metadata-only", "bytes")
        if full == full and meta == meta and meta > 0:
            rows.append({"finding": f"{resource}: metadata-only response", "value": f"{full / meta:.1f}x smaller than full objects"})
        table = get("table", "bytes")
        if full == full and table == table and table > 0:
            rows.append({"finding": f"{resource}: Table response", "value": f"{full / table:.1f}x smaller than full objects"})
    mismatched = lists[(lists["served_from"].isin(["cache", "etcd"])) & ((lists["served_from"] == "cache") != lists["expected_from_cache"])]
    for row in mismatched.itertuples(index=False):
        rows.append({"finding": f"{row.resource}: {row.kind} place", "value": f"served from {row.served_from}, unlike the APF estimator's assumption"})
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
                "value": f"{row.bytes / 1e6:.2f} MB from {row.served_from}: object count {row.object_count_seats}, size based {row.size_based_seats}",
            }
        )
    if "observed_matches" in seats:
        counts = seats["observed_matches"].replace("", "not observed").value_counts()
        rows.append({"finding": "server's seats match", "value": ", ".join(f"{k}: {v}" for k, v in counts.items())})
    return pd.DataFrame(rows)
