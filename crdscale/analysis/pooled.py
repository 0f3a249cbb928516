"""Configurations against one reference, each difference's interval from a spread pooled over all of them.

An A/B with several arms (``crdscale ab --each``: a base and N changes, each run the same number of rounds)
has many configurations of few repeats each. Judged pair by pair, each difference would rest on two
configurations' repeats: 3 repeats a side give Welch's t about 4 degrees of freedom and a quantile near 2.8.
The model here lends every configuration's repeats to every difference:

    y[c, i] = mu[c] + e[c, i],   e independent, Normal(0, sigma^2), sigma the same for every configuration

(each configuration its own mean, one common spread). sigma^2 is estimated by the pooled variance
``s^2 = sum over c, i of (y[c, i] - mean[c])^2 / sum over c of (n[c] - 1)``, with ``N - k`` degrees of
freedom (``N`` runs of the ``k`` configurations that were repeated), and the difference of configuration
``a`` to the reference ``b`` is ``mean[a] - mean[b]`` with standard error ``s * sqrt(1/n[a] + 1/n[b])`` and
Student's t of ``N - k`` degrees of freedom: 8 configurations of 3 repeats give 16 (t = 2.12) where a pair
of them alone gives 4 (t = 2.78). The point estimates are those of :func:`crdscale.analysis.intervals.pooled_estimate`
(each configuration the mean of its repeats); only the intervals change.

**Spreads out of line.** The pooled interval holds when the spreads are alike; a configuration whose
repeats spread much more than the others' (a change that makes the server noisy) would get an interval
too narrow. So each configuration's variance is held against the pool of the others with an F test
(one-sided, at :data:`OUT_OF_LINE`, the largest ratio first, until none is out of line): one that is keeps
its own spread, ``s[c]^2 / n[c]`` with ``n[c] - 1`` degrees of freedom, leaves the pool, and a difference
involving it combines the two variance estimates with Satterthwaite's degrees of freedom (Welch's
interval when both sides keep their own). With one run per configuration nothing is pooled: each run
keeps its own interval (its fit's), as :func:`~crdscale.analysis.intervals.difference` gives it; so too
when the pooled repeats do not spread at all (a cause that no run of them holds, 0 in each).

In balanced rounds, a drift common to a round (the machine's load) adds the same to every configuration's
mean and cancels from each difference, while it inflates the pooled spread: the interval is then
conservative, not wrong.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from crdscale.analysis.intervals import Estimate, difference, pooled_estimate

SPREADS = ("own", "pooled")
# An F test at 1 %: with 3 repeats a configuration's variance has 2 degrees of freedom and swings by a factor
# of 10 by chance. Each configuration taken out of the pool by chance leaves it smaller than sigma^2: at 5 %
# the pooled intervals of 8 configurations of 3 repeats held 94 % (tests/unit/test_analysis_pooled.py), at 1 % 95 %.
OUT_OF_LINE = 0.01


def _f_quantile(p: float, dfn: float, dfd: float) -> float:
    # lazy: scipy.special takes ~0.3 s of CPU to import (as intervals.t_quantile)
    from scipy.special import fdtri

    return float(fdtri(dfn, dfd, p))


@dataclass(frozen=True)
class CommonSpread:
    """The pooled variance of the configurations' repeats (``variance``, ``dof`` degrees of freedom) and the
    configurations whose spread is out of line with it (``own``: configuration -> (its variance, its dof))."""

    variance: float
    dof: int
    own: dict[str, tuple[float, int]] = field(default_factory=dict)

    @property
    def sd(self) -> float:
        return math.sqrt(self.variance) if self.variance >= 0 else math.nan

    @property
    def usable(self) -> bool:
        """Whether there is a spread to lend: some configuration repeated, and its repeats not all equal (a
        cause no run of the pool holds is 0 in each: it says nothing of another configuration's spread)."""
        return self.dof > 0 and self.variance > 0


def _finite(values: Sequence[float]) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    return values[np.isfinite(values)]


def common_spread(values: Mapping[str, Sequence[float]], *, out_of_line: float = OUT_OF_LINE) -> CommonSpread:
    """The spread pooled over configurations (configuration -> its repeats' values), configurations whose own
    variance an F test at ``out_of_line`` finds larger than the pool of the others' kept apart (the largest
    ratio first, one at a time, until none is). ``dof`` 0 (variance NaN) when no configuration was repeated."""
    own_var = {}
    for config, vals in values.items():
        v = _finite(vals)
        if len(v) >= 2:
            own_var[config] = (float(v.var(ddof=1)), len(v) - 1)
    apart: dict[str, tuple[float, int]] = {}
    while True:
        pool = {c: s for c, s in own_var.items() if c not in apart}
        worst, worst_ratio = None, 1.0
        for c, (var, dof) in pool.items():
            rest_dof = sum(d for o, (_, d) in pool.items() if o != c)
            if rest_dof < 1:
                continue
            rest = sum(v * d for o, (v, d) in pool.items() if o != c) / rest_dof
            if rest > 0:
                ratio = var / rest
                if ratio > _f_quantile(1 - out_of_line, dof, rest_dof) and ratio > worst_ratio:
                    worst, worst_ratio = c, ratio
            elif var > 0:  # the others do not spread at all
                worst, worst_ratio = c, math.inf
        if worst is None:
            break
        apart[worst] = own_var[worst]
    pool = {c: s for c, s in own_var.items() if c not in apart}
    dof = sum(d for _, d in pool.values())
    variance = sum(v * d for v, d in pool.values()) / dof if dof else math.nan
    return CommonSpread(variance, dof, apart)


def pooled_difference(
    a: Sequence[float], b: Sequence[float], spread: CommonSpread, confidence: float = 0.95, *, a_name="", b_name=""
) -> Estimate:
    """``mean(a) - mean(b)`` with its interval from ``spread`` (:func:`common_spread`): the pooled variance
    for a side in the pool, the side's own for one kept apart (``a_name``/``b_name`` name them in
    ``spread.own``), Satterthwaite's degrees of freedom when the two kinds of variance meet."""
    a, b = _finite(a), _finite(b)
    value = float(a.mean() - b.mean()) if len(a) and len(b) else math.nan
    pooled_part, own_parts = 0.0, []
    for name, side in ((a_name, a), (b_name, b)):
        if not len(side):
            return Estimate(value, math.nan, 0, math.nan, math.nan)
        if name in spread.own:
            var, dof = spread.own[name]
            own_parts.append((var / len(side), dof))
        else:
            pooled_part += spread.variance / len(side)
    parts = ([(pooled_part, spread.dof)] if pooled_part or not own_parts else []) + own_parts
    total = sum(v for v, _ in parts)
    if not all(d > 0 for _, d in parts) or not math.isfinite(total):
        return Estimate(value, math.nan, 0, math.nan, math.nan)
    denominator = sum(v * v / d for v, d in parts)
    # Both sides in the pool: exactly its dof (Satterthwaite would count the one estimate twice).
    dof = parts[0][1] if len(parts) == 1 else (total * total / denominator if denominator > 0 else math.inf)
    return Estimate.from_se(value, math.sqrt(total), dof, confidence)


def configuration_differences(
    estimates: Mapping[str, Sequence[Estimate]],
    reference: str,
    confidence: float = 0.95,
    spread: str = "own",
) -> tuple[dict[str, Estimate], dict[str, Estimate]]:
    """Each configuration's estimate (:func:`~crdscale.analysis.intervals.pooled_estimate` of its runs') and
    each other configuration's difference to ``reference``: ``(combined, differences)``.

    ``spread="own"``: each configuration's interval from its own repeats (or its one run's fit) and the
    difference's by Welch (:func:`~crdscale.analysis.intervals.difference`), what a comparison always did.
    ``spread="pooled"``: the difference's interval from the spread pooled over every configuration's repeats
    (:func:`common_spread`, :func:`pooled_difference`: the module's model); as ``own`` when no configuration
    was repeated."""
    if spread not in SPREADS:
        raise ValueError(f"spread {spread!r}: one of {SPREADS}")
    combined = {c: pooled_estimate(e, confidence) for c, e in estimates.items()}
    ref = combined[reference]
    others = [c for c in combined if c != reference]
    values = {c: [e.value for e in es] for c, es in estimates.items()}
    common = common_spread(values) if spread == "pooled" else None
    if common is None or not common.usable:
        return combined, {c: difference(combined[c], ref, confidence) for c in others}
    return combined, {
        c: pooled_difference(values[c], values[reference], common, confidence, a_name=c, b_name=reference)
        for c in others
    }


VALUE_DIFFERENCE_COLUMNS = ["run", "reference", "base", "value", "difference", "low", "high", "dof", "runs"]


def value_differences(
    frame: pd.DataFrame,
    value: str,
    *,
    configuration: Mapping[str, str],
    reference: str,
    by: Sequence[str] = (),
    confidence: float = 0.95,
) -> pd.DataFrame:
    """One number a run (a peak RSS, a LIST's CPU seconds), each configuration against ``reference`` with
    the interval from the spread pooled over every configuration (:func:`common_spread`), by the ``by`` groups.

    ``frame`` has a ``run`` column (a run's label), ``value`` and the ``by`` columns; ``configuration`` maps a
    label to its configuration (a label missing from it is its own). Returns ``by`` and
    :data:`VALUE_DIFFERENCE_COLUMNS`: ``run`` the configuration, ``base`` and ``value`` the means of the
    reference's and its runs, ``difference`` with ``low``/``high`` (NaN when nothing was repeated), ``dof``
    and ``runs`` (its runs)."""
    by = list(by)
    columns = [*by, *VALUE_DIFFERENCE_COLUMNS]
    if frame is None or not len(frame) or value not in frame.columns:
        return pd.DataFrame(columns=columns)
    data = frame.assign(_config=frame["run"].map(lambda label: configuration.get(label, label)))
    data[value] = pd.to_numeric(data[value], errors="coerce")
    rows = []
    for key, group in data.groupby(by, sort=False) if by else [((), data)]:
        key = key if isinstance(key, tuple) else (key,)
        values = {c: list(g[value]) for c, g in group.groupby("_config", sort=False)}
        if reference not in values:
            continue
        spread = common_spread(values)
        for config, mine in values.items():
            if config == reference:
                continue
            if spread.usable:
                d = pooled_difference(mine, values[reference], spread, confidence, a_name=config, b_name=reference)
            else:
                d = Estimate(float(np.nanmean(mine) - np.nanmean(values[reference])), math.nan, 0, math.nan, math.nan)
            base = float(np.nanmean(values[reference]))
            rows.append(
                (*key, config, reference, base, base + d.value, d.value, d.low, d.high, d.dof, len(_finite(mine)))
            )
    return pd.DataFrame(rows, columns=columns)
