"""The error model behind every per-CRD interval crdscale prints.

How the data are made decides the model. Go samples a heap allocation of
``s`` bytes with probability ``p = 1 - exp(-s / rate)`` (``rate`` = the
profile's period, 512 KiB) and scales what it samples by ``1 / p``. A sampled
object that stays live is in every later profile, so the sampling error of
step k is carried into step k+1: the profiles' errors are a random walk, not
independent draws, and an ordinary least-squares line through the steps
claims about twice the precision the data hold (a simulated 95 % interval
covered the true slope in 72 % of runs).

What *is* independent is each step's increment: the objects a step added
were sampled afresh. So per-CRD costs are fitted on first differences:

    Δy_k = b · Δx_k + e_k,   Var(e_k) = σ² · Δx_k

(the variance of a sum of independently sampled objects grows with how many
were added). Weighted least squares gives ``b = ΣΔy / ΣΔx`` — the growth
from the first profile to the last per CRD — and ``σ²`` is estimated from the
spread of the increments around it, so the interval is Student's t with
``m - 1`` degrees of freedom for ``m`` increments. Noise that does not carry
over (a transient allocation caught at one profile, GC timing) makes
increments negatively correlated, which this estimate over-counts: the
interval stays conservative, never optimistic. ``benchmarks/coverage.py``
checks the coverage by simulating Go's sampling.

Differences between runs use each run's own variance (Welch–Satterthwaite),
never a pooled one; repeated runs of one configuration are the unit of
replication when there are several (the interval comes from their spread).

Everything here is pure: arrays in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from crdscale.errors import UsageError

# Go's default heap sampling rate (runtime.MemProfileRate): one sample per 512 KiB allocated on average.
GO_HEAP_SAMPLING_RATE = 512 * 1024


def t_quantile(p: float, dof: float) -> float:
    """Quantile of Student's t distribution with ``dof`` degrees of freedom (``scipy.stats.t.ppf``)."""
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    # Imported here: scipy.stats takes ~0.3 s to import and only the fits need it.
    from scipy import stats

    return float(stats.t.ppf(p, dof))


@dataclass(frozen=True)
class Estimate:
    """A per-unit estimate with its standard error and a two-sided interval.

    ``dof`` is the degrees of freedom of the t quantile (``inf`` for a normal
    one, 0 when nothing is left to estimate the spread: the interval is NaN).
    """

    value: float
    se: float
    dof: float
    low: float
    high: float

    @classmethod
    def from_se(cls, value: float, se: float, dof: float, confidence: float = 0.95) -> Estimate:
        if not dof > 0 or not math.isfinite(se):
            return cls(value, math.nan, dof, math.nan, math.nan)
        t = t_quantile(0.5 + confidence / 2, dof) if math.isfinite(dof) else _normal_quantile(confidence)
        return cls(value, se, dof, value - t * se, value + t * se)


def _normal_quantile(confidence: float) -> float:
    from scipy import stats

    return float(stats.norm.ppf(0.5 + confidence / 2))


@dataclass(frozen=True)
class GrowthFit:
    """``y ≈ base + per_unit · x`` fitted on the increments between consecutive points.

    ``per_unit`` is the growth from the first point to the last per unit of x;
    ``base`` the value the line gives at x = 0 (the line passes through the
    first point); ``increments`` how many increments estimated the spread.
    ``r2`` says how straight the points are around that line (NaN when flat).
    """

    estimate: Estimate
    base: float
    n: int
    increments: int
    r2: float
    residuals: np.ndarray

    @property
    def per_unit(self) -> float:
        return self.estimate.value


def growth_fit(
    x: Sequence[float], y: Sequence[float], confidence: float = 0.95, *, min_variance: float = 0.0
) -> GrowthFit:
    """Per-unit growth of ``y`` in ``x`` with an interval from the step increments (see the module doc).

    Points are ordered by x; several points at one x are averaged first. Needs
    two distinct x values (raises UsageError otherwise); with only two the
    interval is NaN (one increment says nothing about its own spread).
    ``min_variance`` is a floor for σ² (variance per unit of x), e.g. the heap
    sampling variance a profile implies: when every increment happens to be
    equal, the spread alone would claim certainty the sampling does not give.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if len(x) < 2 or np.ptp(x) == 0:
        raise UsageError("a per-CRD fit needs profiles at two or more different CRD counts")
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    ux, inverse = np.unique(x, return_inverse=True)
    uy = np.bincount(inverse, weights=y) / np.bincount(inverse)
    dx, dy = np.diff(ux), np.diff(uy)
    estimate = increments_estimate(dx, dy, confidence, min_variance=min_variance)
    base = float(uy[0] - estimate.value * ux[0])
    fitted = base + estimate.value * x
    residuals = y - fitted
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((residuals**2).sum()) / ss_tot if ss_tot > 0 else math.nan
    return GrowthFit(estimate, base, len(x), len(dx), r2, residuals)


def increments_estimate(
    dx: Sequence[float], dy: Sequence[float], confidence: float = 0.95, *, min_variance: float = 0.0
) -> Estimate:
    """Per-unit growth from independent increments ``dy`` over ``dx`` units each (``Var(dy) ∝ dx``).

    ``ΣΔy / ΣΔx`` with a t interval on ``m - 1`` degrees of freedom; NaN
    interval for a single increment. ``dx`` must be positive.
    """
    dx = np.asarray(dx, dtype=float)
    dy = np.asarray(dy, dtype=float)
    if len(dx) == 0 or (dx <= 0).any():
        raise UsageError("increments need a positive number of CRDs each")
    total = float(dx.sum())
    value = float(dy.sum()) / total
    dof = len(dx) - 1
    if dof < 1:
        return Estimate.from_se(value, math.nan, 0, confidence)
    variance = float(((dy - value * dx) ** 2 / dx).sum()) / dof
    variance = max(variance, min_variance)
    return Estimate.from_se(value, math.sqrt(variance / total), dof, confidence)


def difference(a: Estimate, b: Estimate, confidence: float = 0.95) -> Estimate:
    """``a - b`` for independent estimates, with Welch–Satterthwaite degrees of freedom.

    Each side keeps its own variance: pooling one residual variance across
    runs lends a noiseless run's degrees of freedom to a noisy one (a "95 %"
    interval that holds ~91 %). An exact side (se 0, e.g. a cause absent
    from every profile) leaves the other side's degrees of freedom.
    """
    value = a.value - b.value
    va, vb = a.se**2, b.se**2
    if not (math.isfinite(va) and math.isfinite(vb)):
        return Estimate.from_se(value, math.nan, 0, confidence)
    var = va + vb
    if var == 0:
        return Estimate(value, 0.0, math.inf, value, value)
    denominator = (va**2 / a.dof if va > 0 else 0.0) + (vb**2 / b.dof if vb > 0 else 0.0)
    dof = var**2 / denominator
    return Estimate.from_se(value, math.sqrt(var), dof, confidence)


def replicate_mean(values: Sequence[float], confidence: float = 0.95) -> Estimate:
    """Mean of independent repeats with a t interval from their spread (NaN interval for one)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return Estimate(math.nan, math.nan, 0, math.nan, math.nan)
    if len(values) == 1:
        return Estimate.from_se(float(values[0]), math.nan, 0, confidence)
    sd = float(values.std(ddof=1))
    return Estimate.from_se(float(values.mean()), sd / math.sqrt(len(values)), len(values) - 1, confidence)


def repeats_for_half_width(sd: float, half_width: float, confidence: float = 0.95, *, at_most: int = 1000) -> int:
    """How many repeats give a ``confidence`` interval of the mean no wider than ± ``half_width``.

    ``sd`` is the between-run standard deviation (e.g. of the per-CRD
    estimates of repeated runs). Solves ``t(n-1) · sd / √n ≤ half_width``;
    returns ``at_most + 1`` when even ``at_most`` repeats are not enough.
    """
    if half_width <= 0:
        raise UsageError("the interval's half width must be positive")
    if not sd > 0:
        return 2
    for n in range(2, at_most + 1):
        if t_quantile(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n) <= half_width:
            return n
    return at_most + 1


def heap_sampling_variance(
    space: np.ndarray, objects: np.ndarray, rate: float = GO_HEAP_SAMPLING_RATE
) -> tuple[np.ndarray, np.ndarray]:
    """Sampling variance of each heap-profile sample's scaled ``inuse_space`` and ``inuse_objects``.

    Go reports a sampled allocation of average size ``s`` scaled by ``1/p``,
    ``p = 1 - exp(-s/rate)``: each live object of that size is counted with
    probability p as ``s/p`` bytes, so the estimate of N objects' bytes has
    variance ``N s² (1-p)/p``, which with ``N ≈ objects`` (already scaled) is
    ``space · s · (1-p)/p``; for the object count ``objects · (1-p)/p``.
    Returns ``(bytes², objects²)`` per sample (0 where nothing is in use).
    """
    space = np.asarray(space, dtype=float)
    objects = np.asarray(objects, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        size = np.where(objects > 0, space / objects, 0.0)
        p = -np.expm1(-size / rate)
        ratio = np.where(p > 0, (1.0 - p) / p, 0.0)
    return space * size * ratio, objects * ratio
