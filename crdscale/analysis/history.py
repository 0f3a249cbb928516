"""Releases side by side: heap per CRD by cause at each release with its 95 % interval, and the changepoints
between consecutive releases.

A history is a set of runs of one workload on several kube-apiserver releases (with repeats). Each release's
figure pools its repeats: their mean, with an interval from their spread, never narrower than the runs' own
intervals allow (a single run keeps its own). A **changepoint** is a pair of consecutive releases whose
difference's interval (:func:`crdscale.analysis.compare.compare_runs`, repeats pooled) excludes zero *and*
whose difference exceeds a threshold (bytes per CRD, or a share of the older release's value): a change that
is surely there and large enough to matter. Each changepoint carries the frames that moved most (the
comparison's profile diff), which is where an upstream change is recognised.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from crdscale.analysis.compare import compare_runs
from crdscale.analysis.intervals import replicate_mean, t_quantile

HISTORY_COLUMNS = ["version", "cause", "per_crd", "low", "high", "runs"]
CHANGE_COLUMNS = [
    "older", "newer", "cause", "per_crd_older", "per_crd_newer", "difference", "low", "high", "relative", "frames",
]  # fmt: skip


def _release_key(version: str) -> tuple:
    digits = re.findall(r"\d+", str(version))
    return tuple(int(d) for d in digits[:3]), str(version)


def release_order(versions) -> list[str]:
    """Versions oldest first (``v1.9.0`` before ``v1.24.0``)."""
    return sorted(set(versions), key=_release_key)


def history_table(
    per_crd: pd.DataFrame,
    versions: Mapping[str, str],
    *,
    phase: str = "served",
    metric: str = "bytes",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Each release's per-CRD figure by cause: ``version, cause, per_crd, low, high, runs``.

    ``per_crd`` is stacked :func:`~crdscale.analysis.percrd.fit_per_crd` tables with a ``run`` column (what
    ``Comparison.per_crd`` holds); ``versions`` maps each run label to its release. Repeats are pooled: the
    mean, with a t interval on their spread whose standard error is at least the runs' own (mean se / sqrt n)."""
    data = per_crd[(per_crd["phase"] == phase) & (per_crd["metric"] == metric)].copy()
    data["version"] = data["run"].map(versions)
    data = data.dropna(subset=["version"])
    rows = []
    z = t_quantile(0.5 + confidence / 2, math.inf)
    for (version, cause), group in data.groupby(["version", "cause"], sort=False):
        n = len(group)
        values = group["per_crd"].to_numpy(dtype=float)
        if n == 1:
            r = group.iloc[0]
            rows.append((version, cause, float(r["per_crd"]), float(r["per_crd_low"]), float(r["per_crd_high"]), 1))
            continue
        spread = replicate_mean(values, confidence)  # the mean with a t interval on the repeats' spread
        own = group["per_crd_se"].to_numpy(dtype=float)
        own_se = float(np.sqrt(np.nanmean(own**2)) / math.sqrt(n)) if np.isfinite(own).any() else 0.0
        half = max(spread.high - spread.value, z * own_se)
        rows.append((version, cause, spread.value, spread.value - half, spread.value + half, n))
    table = pd.DataFrame(rows, columns=HISTORY_COLUMNS)
    order = {v: i for i, v in enumerate(release_order(table["version"]))}
    return table.sort_values(["cause", "version"], key=lambda s: s.map(order) if s.name == "version" else s)


def changepoints(
    differences: pd.DataFrame,
    *,
    min_bytes: float = 0.0,
    min_relative: float = 0.10,
    causes: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The rows of ``differences`` (:data:`CHANGE_COLUMNS`, consecutive releases) that are changepoints:
    the interval excludes 0 and ``|difference|`` is at least ``min_bytes`` and at least ``min_relative`` of
    the older release's value. Largest first."""
    if differences.empty:
        return differences
    d = differences if causes is None else differences[differences["cause"].isin(causes)]
    sure = (d["low"] > 0) | (d["high"] < 0)
    big = d["difference"].abs() >= np.maximum(min_bytes, min_relative * d["per_crd_older"].abs())
    picked = d[sure & big]
    return picked.reindex(picked["difference"].abs().sort_values(ascending=False).index)


def consecutive_differences(runs_by_version: Mapping[str, Sequence], *, frames: int = 3) -> pd.DataFrame:
    """Each pair of consecutive releases compared (repeats pooled): :data:`CHANGE_COLUMNS` rows by cause,
    with the ``frames`` functions whose flat bytes per CRD moved most. ``runs_by_version``: version ->
    :class:`crdscale.rundir.Run` objects (or run directories)."""
    ordered = release_order(runs_by_version)
    rows = []
    for older, newer in zip(ordered, ordered[1:]):
        runs = [*runs_by_version[older], *runs_by_version[newer]]
        labels = [f"{older},repeat={i + 1}" for i in range(len(runs_by_version[older]))]
        labels += [f"{newer},repeat={i + 1}" for i in range(len(runs_by_version[newer]))]
        if len(runs_by_version[older]) == 1:
            labels[0] = older
        if len(runs_by_version[newer]) == 1:
            labels[-1] = newer
        comparison = compare_runs(runs, labels)
        moved = _moved_frames(comparison.profile_diff, frames)
        joint = comparison.joint[comparison.joint["metric"] == "bytes"]
        for r in joint.to_dict("records"):
            rows.append(
                (older, newer, r["cause"], r["per_crd_reference"], r["per_crd"], r["difference"],
                 r["difference_low"], r["difference_high"], r["relative"], moved)
            )  # fmt: skip
    return pd.DataFrame(rows, columns=CHANGE_COLUMNS)


def _moved_frames(profile_diff: pd.DataFrame, n: int) -> str:
    if profile_diff is None or profile_diff.empty or "flat_per_crd" not in profile_diff.columns:
        return ""
    top = profile_diff.reindex(profile_diff["flat_per_crd"].abs().sort_values(ascending=False).index).head(n)
    return "; ".join(f"{name} {value / 1024:+.1f} KiB" for name, value in zip(top["name"], top["flat_per_crd"]))
