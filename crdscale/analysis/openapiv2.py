"""What a client's GET of /openapi/v2 adds per CRD, from a run that profiled before and after it.

A run with ``profiles.openapi_v2`` takes, at 0 CRDs and at the end of every step,
the step's profile (phase ``served``), GETs /openapi/v2, and profiles again
(phase ``openapiv2``). kube-apiserver keeps what it built to answer (the merged
spec on lazily aggregating servers, its serialized JSON and protobuf bytes on
older ones; see the collector that fetches it) until the next GET after a CRD
change replaces it. So a step's served profile still holds the previous step's
spec, and its openapiv2 profile holds this step's:

    openapiv2_k - served_k = S(n_k) - S(n_{k-1})

with ``S(n)`` what the fetched spec holds at ``n`` CRDs. Each step's difference
over the CRDs it added is one estimate of the v2 spec's cost per CRD; their
spread gives the interval, as the step increments of any other per-CRD cost do
(:func:`crdscale.analysis.intervals.growth_fit` on the cumulated differences).
At 0 CRDs the difference is ``S(0)``, the built-in APIs' spec: reported, not
counted per CRD. The openapiv2 phase's own growth per CRD (in the run's fits)
is the state "served, and a client fetched /openapi/v2" per CRD, whatever
the server keeps.

Nothing here reads files. The registry's ``openapi_v2`` entry (:mod:`crdscale.analysis.registry`)
computes it for a run with openapiv2 profiles and prints it in ``crdscale analyze`` (:func:`text_lines`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from crdscale.analysis.intervals import growth_fit
from crdscale.analysis.named import NamedAnalysis, RunData, Table
from crdscale.analysis.percrd import heap_resolution
from crdscale.analysis.targets import TOTAL
from crdscale.rundir.layout import OPENAPI_V2_PHASE
from crdscale.units import fmt_per_crd

COLUMNS = [
    "metric", "cause", "per_crd", "per_crd_low", "per_crd_high", "per_crd_se", "dof", "steps", "at_baseline",
]  # fmt: skip


def step_differences(points: pd.DataFrame) -> pd.DataFrame:
    """Per metric, cause and CRD count: ``metric, cause, crds, added, difference`` where ``difference``
    is the openapiv2 profile minus the served profile at that count and ``added`` the CRDs since the
    previous count (0 at the baseline). Counts without both profiles are left out; empty when the run
    took no openapiv2 profiles."""
    served = points[points["phase"].isin(["served"]) | points["phase"].isna()]
    after = points[points["phase"] == OPENAPI_V2_PHASE]
    if not len(after):
        return pd.DataFrame(columns=["metric", "cause", "crds", "added", "difference"])
    keys = ["metric", "cause", "crds"]
    both = after[[*keys, "value"]].merge(served[[*keys, "value"]], on=keys, suffixes=("_after", "_served"))
    both["difference"] = both["value_after"] - both["value_served"]
    counts = np.sort(both["crds"].unique())
    previous = dict(zip(counts[1:], counts[:-1], strict=True)) | {counts[0]: counts[0]}
    both["added"] = both["crds"] - both["crds"].map(previous)
    return both[["metric", "cause", "crds", "added", "difference"]].sort_values(keys, kind="stable")


def openapi_v2_per_crd(points: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """The v2 spec's cost per CRD by cause (and ``total``), from :func:`step_differences`:
    ``metric, cause, per_crd`` (bytes or objects per CRD, summed differences over CRDs added),
    its interval ``per_crd_low/high`` from the steps' spread (NaN with one step), ``per_crd_se``,
    ``dof``, ``steps`` and ``at_baseline`` (the difference at 0 CRDs: the built-in APIs' spec, NaN
    without a baseline pair). Total first, then causes by size; empty without openapiv2 profiles."""
    diffs = step_differences(points)
    rows = []
    for (metric, cause), group in diffs.groupby(["metric", "cause"], sort=False):
        base = group.loc[group["crds"] == 0, "difference"]
        steps = group[group["added"] > 0]
        if not len(steps):
            continue
        x = np.concatenate([[0.0], np.cumsum(steps["added"].to_numpy(dtype=float))])
        y = np.concatenate([[0.0], np.cumsum(steps["difference"].to_numpy(dtype=float))])
        e = growth_fit(x, y, confidence, resolution=heap_resolution(metric, points)).estimate
        at_baseline = float(base.iloc[0]) if len(base) else math.nan
        rows.append((metric, cause, e.value, e.low, e.high, e.se, e.dof, len(steps), at_baseline))
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["_total"] = out["cause"] != TOTAL
    out = out.sort_values(["metric", "_total", "per_crd"], ascending=[True, True, False], kind="stable")
    return out.drop(columns="_total").reset_index(drop=True)


# --------------------------------------------------------------------------
# The registry's entry
# --------------------------------------------------------------------------


def applies(data: RunData) -> bool:
    """A run that fetched /openapi/v2 after its profiles (profiles.openapi_v2): it has openapiv2 points."""
    return len(data.points) > 0 and OPENAPI_V2_PHASE in set(data.points["phase"])


def compute(data: RunData) -> dict[str, pd.DataFrame]:
    """``openapi_v2``: the v2 spec's cost per CRD by cause (:func:`openapi_v2_per_crd`)."""
    return {"openapi_v2": openapi_v2_per_crd(data.points, data.confidence)}


def text_lines(result: Mapping[str, pd.DataFrame], metric: str = "bytes", confidence: float = 0.95) -> list[str]:
    """What a client's GET of /openapi/v2 added per CRD, as ``crdscale analyze`` prints it (no lines
    without rows of ``metric``)."""
    table = result.get("openapi_v2")
    if table is None or not len(table) or not len(table[table["metric"] == metric]):
        return []
    level = f"{100 * confidence:g}% CI"
    table = table[table["metric"] == metric]
    lines = [
        "",
        f"After a GET of /openapi/v2, per CRD ({metric}; each step's openapiv2 profile minus its served profile, "
        f"over the CRDs it added; {int(table['steps'].iloc[0])} steps; {level}):",
        f"{'cause':<18} {'per CRD':>14} {level:>29} {'at 0 CRDs':>14}",
    ]
    for r in table.itertuples(index=False):
        ci = f"[{fmt_per_crd(r.per_crd_low, metric)}, {fmt_per_crd(r.per_crd_high, metric)}]"
        lines.append(
            f"{r.cause:<18} {fmt_per_crd(r.per_crd, metric):>14} {ci:>29} {fmt_per_crd(r.at_baseline, metric):>14}"
        )
    return lines


ANALYSIS = NamedAnalysis(
    name="openapi_v2",
    applies=applies,
    compute=compute,
    tables=(Table("openapi_v2", file="openapi_v2.csv"),),
    text=text_lines,
)
