"""Per-CRD cost of runs against a reference, with the interval of the difference itself.

:func:`per_crd_differences` fits each run on its own (growth over step increments,
:func:`crdscale.analysis.intervals.growth_fit`) and gives each difference to the reference an interval
from both runs' own variances (Welch); repeats of a configuration are pooled. It is what
:func:`crdscale.analysis.compare.compare_runs` gives for the causes and series, and what the named
analyses of :mod:`crdscale.analysis.registry` use for theirs (:mod:`crdscale.analysis.components`):
it lives below both, since the registry's entries cannot import the module that imports the registry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from crdscale.analysis.intervals import Estimate
from crdscale.analysis.percrd import chain_fits, chain_points
from crdscale.analysis.pooled import configuration_differences

JOINT_COLUMNS = [
    "run",
    "reference",
    "metric",
    "cause",
    "per_crd_reference",
    "per_crd",
    "difference",
    "difference_low",
    "difference_high",
    "relative",
    "n",
    "dof",
]


def per_crd_differences(
    points: pd.DataFrame,
    *,
    reference: str | None = None,
    phase: str = "served",
    by: Sequence[str] = ("metric", "cause"),
    confidence: float = 0.95,
    replicates: Mapping[str, str] | None = None,
    spread: str = "own",
) -> pd.DataFrame:
    """Per-CRD cost of every run (or configuration) against a reference, with the difference's interval.

    ``points`` has ``run, crds, phase, value`` plus the ``by`` columns (for
    heap profiles ``metric, cause`` and ``sampling_var``; for series points
    ``metric``): what :func:`crdscale.analysis.registry.stack_runs` makes of per-run
    :func:`~crdscale.analysis.percrd.profile_points`. Only ``phase`` points
    are used, plus each run's baseline at 0 CRDs. ``replicates`` maps run
    label -> configuration label: runs of one configuration are pooled as
    repeats (mean of their per-CRD costs, interval from their spread; a
    single run keeps its own interval). ``reference`` is a run label, or a
    configuration label with ``replicates`` (default: the first).
    ``spread="pooled"``: each difference's interval from the spread pooled over every configuration's
    repeats (:mod:`crdscale.analysis.pooled`: an A/B's arms), rather than from the two configurations' own.

    Returns one row per other run (configuration) and group: ``run,
    reference, metric, cause, per_crd_reference, per_crd`` (the two
    per-CRD costs, e.g. bytes per CRD), ``difference`` (``per_crd -
    per_crd_reference``) with its ``confidence`` interval
    ``difference_low``/``difference_high`` (Welch; NaN when a side has no
    spread to estimate), ``relative`` (difference / reference; NaN when the
    reference is 0 up to rounding), ``n`` points and ``dof``. A run with fewer
    than two CRD counts in a group is left out of that group.
    """
    runs = list(dict.fromkeys(points["run"])) if len(points) else []
    config_of = {r: (replicates or {}).get(r, r) for r in runs}
    configs = list(dict.fromkeys(config_of[r] for r in runs))
    if reference is None and configs:
        reference = configs[0]
    if configs and reference not in configs:
        raise ValueError(f"reference run {reference!r} is not among {configs}")
    by = list(by)
    per_run = [chain_points(points[points["run"] == r], phase) for r in runs]
    data = pd.concat(per_run, ignore_index=True) if per_run else points.iloc[0:0]
    # Each run's fits, as analyze's (a total's from its causes' sampling: chain_fits).
    fits = {run: chain_fits(chain, confidence, by) for run, chain in zip(runs, per_run)}
    rows = []
    for key, group in data.groupby(by, sort=False) if len(data) else []:
        key = key if isinstance(key, tuple) else (key,)
        labels = dict(zip(by, key))
        estimates: dict[str, list[Estimate]] = {}
        for run in runs:
            if key in fits[run]:
                estimates.setdefault(config_of[run], []).append(fits[run][key].estimate)
        if reference not in estimates:
            continue
        combined, differences = configuration_differences(estimates, reference, confidence, spread)
        ref = combined[reference]
        scale = float(np.abs(group["value"]).max()) / max(float(np.ptp(group["crds"])), 1.0)
        # A per-CRD cost this small next to the data is rounding noise of a flat line: no relative change.
        negligible = 1e-9 * scale
        for config in [c for c in configs if c != reference and c in combined]:
            d = differences[config]
            # Points on the served line (the installed ones between them only inform the interval).
            line = group[group["installed"] == group["crds"]]
            n = int(line["run"].map(config_of).isin([config, reference]).sum())
            rows.append(
                {
                    "run": config,
                    "reference": reference,
                    "metric": labels.get("metric", ""),
                    "cause": labels.get("cause", ""),
                    "per_crd_reference": ref.value,
                    "per_crd": combined[config].value,
                    "difference": d.value,
                    "difference_low": d.low,
                    "difference_high": d.high,
                    "relative": d.value / ref.value if abs(ref.value) > negligible else math.nan,
                    "n": n,
                    "dof": d.dof,
                }
            )
    return pd.DataFrame(rows, columns=JOINT_COLUMNS)
