"""The error model behind every per-CRD interval crdscale prints.

How the data are made decides the model. Go samples a heap allocation of
``s`` bytes with probability ``p = 1 - exp(-s / rate)`` (``rate`` = the
profile's period, 512 KiB) and scales what it samples by ``1 / p``. A sampled
object that stays live is in every later profile, so the sampling error of
step k is carried into step k+1: the profiles' errors are a random walk, not
independent draws, and an ordinary least-squares line through the steps
claims about twice the precision the data hold (a simulated 95 % interval
covered the true slope in 59-84 % of runs).

What *is* independent is each step's increment: the objects a step added
were sampled afresh. So per-CRD costs are the growth over the increments,
``b = ΣΔy / ΣΔx`` (the growth from the first profile to the last per CRD),
and its variance comes from a model of the increments ``e = Δy - b·Δx``::

    Var(e) = K + σ²·diag(Δx) + τ²·T

- ``K``: the heap sampling variance each increment added, known from the
  profiles themselves (:func:`heap_sampling_variance`): the random walk of
  sampled objects that stay;
- ``σ²·diag(Δx)``: any other noise that persists (allocation counts that
  vary from step to step), estimated;
- ``τ²·T``: noise of one profile that does not carry over (garbage in
  flight, objects rebuilt at every profile, GC timing), estimated. It enters
  two neighbouring increments with opposite signs (``T``: 2 on the diagonal,
  -1 beside it), so it adds ``2τ²`` to the growth, not ``2τ²`` per increment
  as the spread of the increments alone would count it.

The chain of increments is every profile a run took from its first served
profile to its last: each step's installed profile too (an install
increment, then a serve increment), so 4 steps give 8 increments. The
installed profiles add nothing to the growth; they double what the noise is
estimated from (the mean of an increment is then a cost per CRD installed
plus one per CRD served: two columns, fitted by weighted least squares).

``σ²`` and ``τ²`` come from the spread of the increments and their lag-1
products set to their expectations, kept at 0 or above (a MINQUE-like moment
estimate, non-negative least squares where the exact solution is not). From
:data:`TREND_MIN_STEPS` served steps on, a chain's noise is also estimated
around a cost per CRD that bends: linearly along the run (one more column of
the increments' mean), or at a served profile (a kink: a cost per CRD
installed and one per CRD served from there on, two more columns, as a cause
that starts late has); where the best of them is significant (by generalised
least squares: a t test at :data:`TREND_LEVEL` for the line, a Wald test for a
kink at ``TREND_LEVEL`` shared among the profiles tried) the noise left around
it is the one used: a growth every repeat shares is no noise (the growth
itself is unchanged). The install/serve split takes the kink its chain found
where each kind's own increments confirm it (:func:`_around_kink`).
Objects rebuilt for every profile
(the whole OpenAPI spec at every CRD change) are sampled afresh each time, so
their sampling does not carry over: their increments' covariance is ``T_V``
(``V_i + V_(i-1)`` on the diagonal, ``-V_i`` beside it, ``V`` each profile's
own sampling variance) instead of ``K``, which adds ``V_first + V_last`` to the
growth instead of ``V_last - V_first``. Weighed by ``T_V``, the residual
increments' dispersion ``φ`` is about 1 when the sampling is rebuilt and far
below when it carries over (the increments then vary by what each added
only); from the :data:`REBUILT_FROM` quantile of the χ² that ``φ`` follows
when rebuilt to its :data:`REBUILT_FULL` quantile (``φ`` from 0.35 to 0.6 at
4 steps) a share ``λ`` rising from 0 to 1 of the variance is the rebuilt
reading's: ``T_V``'s
plus the ``σ²`` and ``τ²`` beyond it, estimated by quadratic forms weighed by
``T_V`` (REML's at no other noise), the rest the carried reading's.
A total adds up causes read apart (OpenAPI's sampling rebuilt, every other
cause's carried over), so neither reading fits it; the causes' samplings are
independent, so its known covariance is the sum of theirs, each
``(1 - λ)·diag(K) + λ·T_V`` at the share ``λ`` its own fit found
(:func:`known_covariance`); and the noise beyond that sum is its causes'
noise added up: each cause's estimate before it is kept at 0 or above
(unbiased), summed, and kept at 0 or above once (:func:`_sum_of_parts`), not
``σ²`` and ``τ²`` estimated again from the total's own few residual degrees
of freedom (where noise beyond the sampling persists, half of those found
none). The install/serve split's totals add up their causes' the same way.
The interval is Student's t on Satterthwaite's degrees of freedom for the
estimated part (the known part has none to lose), never fewer than the
increments' ``m - 1`` (``m - 2`` with installed and served). Every half width
is at least ``1.96 · sampling_se`` (the sampling alone; a count of a few
samples is given ~3 samples' worth more, as the rule of three gives a cause no
sample touched, fading beyond :data:`UNSEEN_SAMPLES_UP_TO` samples). Without a known sampling variance (the memory series, the
OpenAPI v2 phase) the interval is the spread's t on ``m - 1`` degrees of
freedom over the served profiles: conservative when per-profile noise
dominates, and estimating both noises from the increments alone under-covers.
With fewer than 3 steps, causes carried by a sample or two per step are
unreliable (:data:`FEW_INCREMENTS`). ``benchmarks/coverage.py`` checks
coverage and width by simulating Go's sampling (:mod:`crdscale.analysis.coverage`).

Differences between runs use each run's own variance (Welch–Satterthwaite),
never a pooled one, without the rule of three's allowance when both sides are
growths of heap samples (a difference of two counts is near symmetric); repeated runs of one configuration are the unit of
replication when there are several (the interval comes from their spread).

Everything here is pure: arrays in, numbers out.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

from crdscale.errors import UsageError

# Go's default heap sampling rate (runtime.MemProfileRate): one sample per 512 KiB allocated on average.
GO_HEAP_SAMPLING_RATE = 512 * 1024


# t's 0.975 quantile (a 95 % two-sided interval, what crdscale prints) for 1-30 degrees of freedom, from
# scipy.special.stdtrit (a unit test compares them): a footprint prediction needs nothing else from scipy,
# whose import is ~0.3 s of CPU, a tenth of the prediction.
# fmt: off
_T975 = (
    12.706204736174694, 4.302652729749462, 3.1824463052837078, 2.7764451051977934, 2.5705818356363146,
    2.4469118511449786, 2.364624251592784, 2.306004135204166, 2.262157162798205, 2.228138851986274,
    2.200985160091639, 2.1788128296672284, 2.1603686564627913, 2.144786687917804, 2.131449545559776,
    2.1199052992212546, 2.1098155778333156, 2.1009220402410382, 2.0930240544083087, 2.085963447265864,
    2.0796138447276795, 2.0738730679040254, 2.0686576104190486, 2.0638985616280245, 2.0595385527532972,
    2.0555294386428735, 2.0518305164802846, 2.0484071417952454, 2.045229642132703, 2.0422724563012378,
)
# fmt: on


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, dof: float) -> float:
    """Quantile of Student's t distribution with ``dof`` degrees of freedom (normal for ``inf``)."""
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    if p in (0.975, 0.025) and float(dof).is_integer() and 1 <= dof <= len(_T975):
        return _T975[int(dof) - 1] if p == 0.975 else -_T975[int(dof) - 1]
    if math.isinf(dof):
        return NormalDist().inv_cdf(p)  # the standard library's, exact: no scipy for the normal
    # lazy: scipy.special takes ~0.3 s of CPU to import, for the quantiles off the table only. Its stdtrit
    # is what scipy.stats.t.ppf calls: scipy.stats takes ~1 s (a footprint prediction's largest import).
    from scipy.special import stdtrit

    return float(stdtrit(dof, p))


@dataclass(frozen=True)
class Estimate:
    """A per-unit estimate with its standard error and a two-sided interval.

    ``dof`` is the degrees of freedom of the t quantile (``inf`` for a normal
    one, 0 when nothing is left to estimate the spread: the interval is NaN).
    ``allowance``: for a growth of heap samples, the share of ``se²`` that is
    the rule of three's allowance for a count of a few samples
    (:func:`unseen_allowance`), which a difference of two such growths leaves
    out (:func:`difference`). 0 for anything else.
    """

    value: float
    se: float
    dof: float
    low: float
    high: float
    allowance: float = 0.0

    @classmethod
    def from_se(cls, value: float, se: float, dof: float, confidence: float = 0.95) -> Estimate:
        if not dof > 0 or not math.isfinite(se):
            return cls(value, math.nan, dof, math.nan, math.nan)
        t = t_quantile(0.5 + confidence / 2, dof) if math.isfinite(dof) else _normal_quantile(confidence)
        return cls(value, se, dof, value - t * se, value + t * se)


def _normal_quantile(confidence: float) -> float:
    return t_quantile(0.5 + confidence / 2, math.inf)


@dataclass(frozen=True)
class GrowthFit:
    """``y ≈ base + per_unit · x`` fitted on the increments between consecutive points.

    ``per_unit`` is the growth from the first point to the last per unit of x;
    ``base`` the value the line gives at x = 0 (the line passes through the
    first point); ``increments`` how many increments estimated the spread.
    ``r2`` says how straight the points are around that line (NaN when flat).
    ``rebuilt``: the share of the variance read as heap sampling rebuilt at
    every profile (:attr:`Growths.rebuilt`); ``excess`` and ``excess_var``:
    the noise beyond the sampling estimated unclipped, and that estimate's
    variance (:attr:`Growths.excess`). The three are what a total's fit
    takes from its causes' (:func:`growth_fit`'s ``parts``). ``bend``: the
    served step from which the kink its chain's test found applies, 0 for
    none (:attr:`Growths.bend`; the install/serve split's ``kink``).
    """

    estimate: Estimate
    base: float
    n: int
    increments: int
    r2: float
    residuals: np.ndarray
    rebuilt: float = 0.0
    excess: float = 0.0
    excess_var: float = 0.0
    bend: int = 0

    @property
    def per_unit(self) -> float:
        return self.estimate.value

    @property
    def few_increments(self) -> bool:
        """Fewer than :data:`FEW_INCREMENTS` increments: causes carried by a heap sample or two per
        step are unreliable (their intervals under-cover; totals and large causes are not affected)."""
        return self.increments < FEW_INCREMENTS


def growth_fit(
    x: Sequence[float],
    y: Sequence[float],
    confidence: float = 0.95,
    *,
    resolution: float = 0.0,
    sampling_var: Sequence[float] | None = None,
    installed: Sequence[float] | None = None,
    parts: Sequence[tuple[Sequence[float], float, float, float]] | None = None,
) -> GrowthFit:
    """Per-unit growth of ``y`` in ``x`` with an interval from the step increments (see the module doc).

    Points are ordered by x; several points at one x are averaged first. Needs
    two distinct x values (raises UsageError otherwise); with only two the
    interval is NaN (one increment says nothing about its own spread).
    ``resolution`` is the least change one heap sample stands for (Go's
    sampling rate, for bytes): when no increment changed at all, the spread
    says nothing, and the interval is what no sample in ``x``'s range allows
    (:func:`unseen_growth_bounds`) instead of a zero width. ``sampling_var``:
    each point's heap sampling variance (:func:`heap_sampling_variance`),
    which is the interval's floor and its known part (see the module doc).
    ``installed``: CRDs installed at each point, when a run also profiled each
    step's CRDs installed before serving them (``x`` is then the CRDs served):
    the points with ``installed > x`` lie between two served ones, add
    nothing to the growth (it is still from the first served point to the
    last), and make the chain of increments twice as long, which tells the
    noise of one profile from the noise that persists far better (used with
    ``sampling_var`` only). ``parts``: for a total, each of its causes'
    points' sampling variances (as ``sampling_var``, same points), the
    share of its own fit's variance read as rebuilt at every profile
    (:attr:`GrowthFit.rebuilt`), and its fit's ``excess`` and
    ``excess_var``: the total's variance is the sum of theirs (see
    :func:`increments_batch`). ``n``, ``base``, ``r2`` and ``residuals``
    are of the served points.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    sv = None if sampling_var is None else np.asarray(sampling_var, dtype=float)
    inst = x if installed is None else np.asarray(installed, dtype=float)
    served = inst == x
    if len(x) < 2 or np.ptp(x[served]) == 0:
        raise UsageError("a per-CRD fit needs profiles at two or more different CRD counts")
    between = None
    if sv is not None and np.isfinite(sv).all() and (~served).any():
        # Installed points after the last served one or before the first are no part of the growth.
        keep = (inst <= x[served].max()) & (x >= x[served].min())
        if (~served & keep).any():
            between = keep
    kept = served if between is None else between
    x, y, sv, inst = x[kept], y[kept], None if sv is None else sv[kept], inst[kept]
    order = np.lexsort((x, inst))
    x, y, inst = x[order], y[order], inst[order]
    keys, inverse = np.unique(np.stack([inst, x], axis=1), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    counts = np.bincount(inverse)
    uy = np.bincount(inverse, weights=y) / counts
    uinst, ux = keys[:, 0], keys[:, 1]
    dx, dy, dinst = np.diff(ux), np.diff(uy), np.diff(uinst)
    dvar, first_var = None, None
    if sv is not None:
        sv = sv[order]
        if np.isfinite(sv).all():
            usv = np.bincount(inverse, weights=sv) / counts
            dvar, first_var = np.diff(usv), usv[0]
    causes = None
    if parts is not None and dvar is not None:
        causes = []
        for var, share, excess, excess_var in parts:
            part = np.asarray(var, dtype=float)[kept][order]
            if not np.isfinite(part).all():
                causes = None
                break
            upart = np.bincount(inverse, weights=part) / counts
            causes.append(
                (np.diff(upart)[None, :], upart[:1], *(np.array([float(v)]) for v in (share, excess, excess_var)))
            )
    batch = increments_batch(
        dx,
        dy[None, :],
        confidence,
        resolution=resolution,
        first=uy[:1],
        sampling_var=None if dvar is None else dvar[None, :],
        first_var=None if first_var is None else np.array([first_var]),
        chain=True,
        installed=None if between is None else dinst,
        parts=causes,
    )
    estimate = batch.estimate()
    line = inst == x
    x, y = x[line], y[line]
    base = float(uy[0] - estimate.value * ux[0])
    fitted = base + estimate.value * x
    residuals = y - fitted
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((residuals**2).sum()) / ss_tot if ss_tot > 0 else math.nan
    excess, excess_var = float(batch.excess[0]), float(batch.excess_var[0])
    return GrowthFit(
        estimate,
        base,
        len(x),
        int((dx > 0).sum()),
        r2,
        residuals,
        float(batch.rebuilt[0]),
        excess,
        excess_var,
        int(batch.bend[0]),
    )


# Poisson's "rule of three": seeing no event, 95 % of rates that could be true are below 3.0 events.
UNSEEN_EVENTS_95 = 2.995732273553991


def unseen_growth_bounds(first_value, resolution: float, span: float):
    """95 % bounds on a growth per unit when no heap sample came or went over ``span`` units.

    Each sample stands for at least ``resolution`` (Go's sampling rate in
    bytes: an object of s bytes is reported as s/p ≥ rate), so up to ~3
    samples' worth could have grown, or shrunk, unseen; it cannot shrink
    below zero (``first_value``). Works on arrays too.
    """
    reach = UNSEEN_EVENTS_95 * resolution
    return -np.minimum(reach, np.maximum(first_value, 0.0)) / span, reach / span


def increments_estimate(
    dx: Sequence[float],
    dy: Sequence[float],
    confidence: float = 0.95,
    *,
    resolution: float = 0.0,
    first: float = 0.0,
    sampling_var: Sequence[float] | None = None,
    first_var: float | None = None,
    chain: bool = False,
    installed: Sequence[float] | None = None,
) -> Estimate:
    """Per-unit growth from increments ``dy`` over ``dx`` units each, with its interval (see the module doc).

    ``ΣΔy / ΣΔx``; NaN interval for a single increment. ``dx`` must be
    positive. Without ``sampling_var``, a t interval on ``m - 1`` degrees of
    freedom from the increments' spread (``Var(dy) ∝ dx``). With it (how much
    each increment added to the heap sampling variance), the known variance
    plus what the increments add beyond it, and never narrower than the
    sampling alone; ``chain``: consecutive increments share their profiles
    (a run's served profiles, not the install/serve pairs), so per-profile
    noise is told apart from 4 increments on. ``resolution``: the least change
    one heap sample stands for; when no increment changed at all, the interval
    is what no sample allows (:func:`unseen_growth_bounds`, from the ``first``
    value) instead of a zero width. ``installed``: the CRDs each increment
    installed, for a chain that also holds each step's installed profile
    (``dx`` is then 0 for an increment that only installed; see
    :func:`growth_fit`).
    """
    batch = increments_batch(
        np.asarray(dx, dtype=float),
        np.atleast_2d(np.asarray(dy, dtype=float)),
        confidence,
        resolution=resolution,
        first=np.atleast_1d(float(first)),
        sampling_var=None if sampling_var is None else np.atleast_2d(np.asarray(sampling_var, dtype=float)),
        first_var=None if first_var is None else np.atleast_1d(float(first_var)),
        chain=chain,
        installed=None if installed is None else np.asarray(installed, dtype=float),
    )
    return batch.estimate()


def increments_batch(
    dx: np.ndarray,
    dy: np.ndarray,
    confidence: float = 0.95,
    *,
    resolution: float = 0.0,
    first: np.ndarray | float = 0.0,
    sampling_var: np.ndarray | None = None,
    first_var: np.ndarray | None = None,
    chain: bool = False,
    installed: np.ndarray | None = None,
    parts: Sequence[tuple[np.ndarray, ...]] | None = None,
    kink: np.ndarray | None = None,
) -> Growths:
    """:func:`increments_estimate` for many series at once: ``dy`` is (series x increments) over one ``dx``
    (``first``: each series' first value; ``sampling_var``: how much each increment added to the
    profiles' heap sampling variance, same shape as ``dy``; ``first_var``: each series' first
    profile's sampling variance; ``installed``: CRDs each increment installed, see :func:`growth_fit`).
    ``parts``: for totals, each of their causes' ``(sampling_var, first_var, rebuilt, excess, excess_var)`` (the
    last three from its own fit, :class:`Growths`): a chain's variance is then the sum of the causes'
    (:func:`_sum_of_parts`): their known covariances (:func:`known_covariance`) plus the noise beyond them
    each found, instead of being estimated from the total's own increments. ``kink``: for increments that
    share no profile (the install/serve split, one per step), per series the step from which the served
    chain's fit found its cost per CRD to change (:attr:`Growths.bend`, 0: none): the noise is then
    estimated around that kink (:func:`_around_kink`).

    Returns :class:`Growths`, arrays ``(value, se, dof, low, high, allowance, rebuilt)``, one entry per series: what
    simulations of thousands of runs need (``crdscale.analysis.coverage``).
    """
    dx = np.asarray(dx, dtype=float)
    dy = np.asarray(dy, dtype=float)
    if installed is None:
        if dx.ndim != 1 or len(dx) == 0 or (dx <= 0).any():
            raise UsageError("increments need a positive number of CRDs each")
        design = dx[:, None]
    else:
        installed = np.asarray(installed, dtype=float)
        if dx.ndim != 1 or installed.shape != dx.shape or (dx < 0).any() or (installed < 0).any():
            raise UsageError("increments need a number of CRDs installed and served each")
        if (dx + installed <= 0).any() or dx.sum() <= 0:
            raise UsageError("increments need a positive number of CRDs each")
        design = np.stack([installed, dx], axis=1)
    n = dy.shape[0]
    total = float(dx.sum())
    value = dy.sum(axis=1) / total
    m = len(dx)
    steps = int((dx > 0).sum())  # increments that served CRDs: what the spread alone would have
    dvar = None if sampling_var is None else np.nan_to_num(np.broadcast_to(np.asarray(sampling_var, float), dy.shape))
    if installed is not None and (dvar is None or steps < 2):
        # The chain through installed profiles is for the variance components only: without them, the
        # served profiles' own increments.
        ends = np.flatnonzero(dx > 0)
        cumulate = lambda a: np.diff(np.concatenate([np.zeros((n, 1)), np.cumsum(a, axis=1)[:, ends]], 1), axis=1)  # noqa: E731
        dy = cumulate(dy)
        dvar = None if dvar is None else cumulate(dvar)
        dx, design, m = dx[ends], dx[ends, None], steps
    if dvar is not None and resolution > 0:
        # The rule of three's allowance for a count of a few samples (unseen_allowance; Go reports a
        # sampled object as at least `resolution` bytes): samples are what the growth's sampling variance
        # is worth in samples of `resolution`². Negligible for a cause of hundreds of samples; keeps those
        # of a few near 95 %. (A growth's sampling variance below zero, from objects freed, counts as none.)
        dvar = dvar.copy()
        samples = np.clip(dvar.sum(axis=1), 0.0, None) / resolution**2
        extra = unseen_allowance(samples, resolution**2)
        added = np.clip(-dvar.sum(axis=1), 0.0, None) + extra
        dvar[:, -1] += added
        allowance = extra / total**2
    else:
        allowance, added = np.zeros(n), np.zeros(n)
    rebuilt, excess, bend = np.zeros(n), np.zeros((2, n)), np.zeros(n, dtype=int)
    if steps < 2:
        se = np.full(n, math.nan)
        dof = np.zeros(n)
    elif dvar is not None and parts is not None:
        # A total: its causes' samplings are independent, so its known covariance is the sum of theirs, each
        # read as carried or rebuilt by the share its own fit found; what the allowance added, on its last.
        known = sum(known_covariance(*part[:3]) for part in parts)
        known[:, -1, -1] += added
        se, dof = _sum_of_parts(known, parts, total, m - design.shape[1])
    else:
        weight = design.sum(axis=1)  # CRDs each increment installed or served
        chained = dvar is not None and chain and m >= CHAIN_MIN_INCREMENTS
        profile_var = None
        if chained and first_var is not None:
            profile_var = _profile_variances(dvar, first_var)
        se, dof, _cov, rebuilt, excess = _growth_variance(design, weight, dy, dvar, chained, profile_var, total)
        if chained and steps >= TREND_MIN_STEPS:
            se, dof, rebuilt, excess, bend = _around_bend(
                design, weight, dy, dvar, profile_var, total, se, dof, rebuilt, excess
            )
        elif kink is not None and dvar is not None and not chained:
            se, dof, excess = _around_kink(design, weight, dy, dvar, total, np.asarray(kink), se, dof, excess)
    half = _quantile(dof, confidence) * se
    if dvar is not None and steps >= 2:
        # The sampling alone: sampled objects that stay carry their error from profile to profile, so
        # the growth's sampling variance is what the increments added. No interval is narrower.
        floor = np.sqrt(np.clip(dvar.sum(axis=1), 0.0, None)) / total
        z = _normal_quantile(confidence)
        floored = (z * floor > half) & (floor > 0)
        se, dof = np.where(floored, floor, se), np.where(floored, math.inf, dof)
        half = np.where(floored, z * floor, half)
    low, high = value - half, value + half
    if resolution > 0:
        # No sample came or went: the bounds no sample allows, not a zero width.
        unseen = ~dy.any(axis=1)
        bound_low, bound_high = unseen_growth_bounds(np.asarray(first, dtype=float), resolution, total)
        low, high = np.where(unseen, bound_low, low), np.where(unseen, bound_high, high)
        # Known only by those bounds (se 0 with a width): a difference combines them by their margins (MOVER).
        se, dof = np.where(unseen, 0.0, se), np.where(unseen, float(max(steps - 1, 0)), dof)
        allowance = np.where(unseen, 0.0, allowance)
    return Growths(value, se, dof, low, high, allowance, rebuilt, *excess, bend)


class Growths(NamedTuple):
    """What :func:`increments_batch` returns, one entry per series: :class:`Estimate`'s fields as arrays, and
    ``rebuilt``: the share ``λ`` of a chain's variance its fit read as sampling rebuilt at every profile (0
    without a chain); ``excess``: the growth's variance beyond its known sampling as estimated before it is kept
    at 0 or above (``ΣΔy``'s, not per CRD; unbiased, so a total adds its causes' up), and ``excess_var`` that
    estimate's variance (both 0 without a chain). ``rebuilt`` and both are what a total's fit takes from its
    causes' (:func:`increments_batch`'s ``parts``). ``bend``: the served step (counted from 0) from which the
    best kink that passed a chain's test applies, whether or not a line beat it (:func:`_around_bend`), 0
    where none passed: what the install/serve split takes from the chain (:func:`increments_batch`'s
    ``kink``)."""

    value: np.ndarray
    se: np.ndarray
    dof: np.ndarray
    low: np.ndarray
    high: np.ndarray
    allowance: np.ndarray
    rebuilt: np.ndarray
    excess: np.ndarray
    excess_var: np.ndarray
    bend: np.ndarray

    def estimate(self, i: int = 0) -> Estimate:
        """Series ``i`` as an :class:`Estimate`."""
        return Estimate(*(float(v[i]) for v in self[:6]))


def unseen_allowance(samples, sample_var):
    """The rule of three's allowance for a count of ``samples`` heap samples, each of variance ``sample_var``.

    Counts of a few samples run low when unlucky, and the variance they give
    with them: up to ~3 samples could be missing unseen (the rule of three, as
    for a cause no sample touched), so the known variance counts 3 samples more.
    Beyond :data:`UNSEEN_SAMPLES_UP_TO` samples the 3 fade as
    ``UNSEEN_SAMPLES_UP_TO / samples``: a count of many is near normal, and 3
    more made causes of 20-50 samples cover 0.97-0.98. Works on arrays.
    """
    samples = np.asarray(samples, dtype=float)
    return UNSEEN_EVENTS_95 * sample_var * np.minimum(1.0, UNSEEN_SAMPLES_UP_TO / np.maximum(samples, 1e-9))


def _sum_of_parts(known: np.ndarray, parts: Sequence[tuple], total: float, least_dof: float):
    """A total's growth se per unit and its degrees of freedom from its causes': its known sampling covariance
    (``known``, series x m x m, the sum of theirs) plus the noise beyond it that its causes' fits estimated,
    each unclipped (:attr:`Growths.excess`), added up and kept at 0 or above once, on Welch–Satterthwaite
    degrees of freedom (never fewer than ``least_dof``; infinite when nothing is estimated beyond the known).

    A heap profile's total is the sum of its causes, so its increments are theirs added up and, their noises
    being independent, so is its variance. Estimated from the total's own increments instead, σ² and τ² come
    from the few residual degrees of freedom of one chain, kept at 0 or above: where there is noise beyond the
    sampling that persists, ~half of the runs found none and their totals covered 0.82-0.87 (cells 0.89; the
    persisting-noise case of benchmarks/coverage.py). Each cause's unclipped estimate is unbiased and their sum
    varies far less than any one of them, so it is kept at 0 or above only once; clipped causes summed covered
    0.98 where there is no such noise.
    """
    ones = np.ones(known.shape[1])
    beyond = sum(part[3] for part in parts)
    beyond_var = sum(part[4] for part in parts)
    estimated = np.clip(beyond, 0.0, None)
    var = np.clip(np.einsum("i,nij,j->n", ones, known, ones), 0.0, None) + estimated
    with np.errstate(divide="ignore", invalid="ignore"):
        dof = np.where((estimated > 0) & (beyond_var > 0), 2 * var**2 / beyond_var, math.inf)
    return np.sqrt(var) / total, np.maximum(dof, least_dof)


def _growth_variance(
    design: np.ndarray,
    weight: np.ndarray,
    dy: np.ndarray,
    dvar: np.ndarray | None,
    chained: bool,
    profile_var: np.ndarray | None,
    total: float,
):
    """The growth's standard error per unit and its degrees of freedom from the increments ``dy`` around
    their mean ``design`` (fitted with weights ``1 / weight``), the increments' covariance the components found
    (series x m x m; None without ``dvar``: the spread's), and the share of it read as sampling rebuilt at
    every profile (0 without ``profile_var``; :attr:`Growths.rebuilt`), and the noise beyond the sampling
    unclipped, ``(estimate, its variance)`` (:attr:`Growths.excess`; zeros without ``dvar``)."""
    n, m = dy.shape
    cov = None
    share, excess = np.zeros(n), np.zeros((2, n))
    resid = dy @ _residual_maker(design, weight).T
    free = m - design.shape[1]
    spread = (resid**2 / weight).sum(axis=1) / free
    se = np.sqrt(spread * weight.sum()) / total
    dof = np.full(n, float(free))
    if dvar is not None:
        # Only with the sampling variance known: estimating both noises from the increments alone
        # under-covered (0.83-0.89 in a one-off check on benchmarks/coverage.py's simulated runs at
        # 4 and 10 steps), where the spread holds 95 %.
        var_c, dof_c, cov, share, excess = _variance_components(design, weight, resid, dvar, chained, profile_var)
        se_c = np.sqrt(var_c) / total
        use = se_c > 0
        se, dof = np.where(use, se_c, se), np.where(use, dof_c, dof)
    return se, dof, cov, share, excess


def _around_bend(design, weight, dy, dvar, profile_var, total, se, dof, rebuilt, excess):
    """A chain's growth se and dof around the bend that fits each series best, where that bend is significant.

    A growth that bends the same way in every repeat (a cause that starts late, a cache that fills) is no
    noise, but around a straight line it reads as persistent noise: a run's totals 2.7 times wider than the
    data need, coverage 1.00. Around a bent cost per CRD it does not: the noise is what is left around the
    bend where the bend is told from that noise. Two shapes are tried: a cost per CRD that changes linearly
    along the run (:func:`_with_trend`, t test at :data:`TREND_LEVEL` on the increments' ``m - p`` degrees of
    freedom), and a kink: a cost per CRD installed and one per CRD served that change at a served profile
    (a cause that starts late: 0, then its cost; :func:`_kinks`), each by a Wald test of its columns at
    ``TREND_LEVEL`` shared among the served profiles tried (Bonferroni), on the Satterthwaite degrees of
    freedom of the noise found around it (the sampling is known, so a kink that leaves only the sampling
    is told at once), at most :data:`KINK_DOF_CAP` times the increments' ``m - p``. The bend whose test is passed
    by the widest margin wins. The coefficients come from generalised least squares at the covariance found
    around the bend (:func:`_wald`); the growth ``ΣΔy / ΣΔx`` is unchanged. Also returns ``bend``: per series the
    step from which the best kink that passed applies, whether or not the line beat it (:attr:`Growths.bend`).
    """
    m, columns = design.shape
    kinks = _kinks(design, weight)
    best = np.ones(len(dy))  # the margin (Wald statistic over its critical value) to beat
    # The best kink apart, whether or not the line beat it: the install/serve split can take a kink only
    # (a cause that starts late: its first steps' installs are 0, the rest all of it; no line through them).
    best_kink, bend = np.ones(len(dy)), np.zeros(len(dy), dtype=int)
    for start, bent in [(0, _with_trend(design, weight)), *kinks]:  # the line at 0: every kink starts at 1 or later
        se_bent, dof_bent, cov, share_bent, excess_bent = _growth_variance(
            bent, weight, dy, dvar, True, profile_var, total
        )
        q = bent.shape[1] - columns  # the bend's columns: a Wald test of them all (t² for one)
        wald = _wald(bent, cov, dy, q)
        linear = start == 0
        if linear:
            critical = np.full(len(dy), t_quantile(1 - TREND_LEVEL / 2, m - bent.shape[1]) ** 2)
        else:
            test_dof = np.minimum(dof_bent, KINK_DOF_CAP * (m - bent.shape[1]))
            critical = _wald_critical(q, test_dof, TREND_LEVEL / len(kinks))
        with np.errstate(divide="ignore", invalid="ignore"):
            margin = np.nan_to_num(wald / critical)
        better = margin > best
        best = np.where(better, margin, best)
        se, dof = np.where(better, se_bent, se), np.where(better, dof_bent, dof)
        rebuilt = np.where(better, share_bent, rebuilt)  # the share read as rebuilt around the bend
        excess = np.where(better, excess_bent, excess)
        if not linear:
            kinked = margin > best_kink
            best_kink, bend = np.where(kinked, margin, best_kink), np.where(kinked, start, bend)
    return se, dof, rebuilt, excess, bend


def _wald(bent: np.ndarray, cov: np.ndarray, dy: np.ndarray, q: int) -> np.ndarray:
    """The Wald statistic of ``bent``'s last ``q`` columns per series, their coefficients from generalised least
    squares at the increments' covariance ``cov`` (series x m x m).

    Tried and dropped (2026-11-28): an increment that moved with no sampling variance (no sample came or left:
    garbage in flight, objects freed) weighed as varying by a heap sample's worth at least. In the simulation it
    stopped crd-schema and etcd-client on v1.37.1 bending in half the runs where noise beyond the sampling
    persists (per run 0.896 -> 0.9175, 0.915 -> 0.942). But on five real runs of the reference scenario it made
    OpenAPI on v1.37.1 bend at a kink (its serves move by up to 10 MB with no sampling variance: the garbage of
    the install's rebuild, freed), one run's half width 106.6 -> 62.8 KiB against a spread of 43.0 between runs
    (sd/se 0.88 -> 1.37); the reference run's OpenAPI interval narrowed by a third."""
    m = bent.shape[0]
    scale = np.trace(cov, axis1=1, axis2=2)[:, None, None] / m
    scale = np.where(scale > 0, scale, 1.0)
    inv_cov = _inverse_per_series(cov / scale + 1e-9 * np.eye(m)) / scale
    xtv = np.swapaxes(inv_cov @ bent, 1, 2)  # series x columns x increments
    info = _inverse_per_series(xtv @ bent)
    coef = np.einsum("npm,nm->np", info[:, -q:, :] @ xtv, dy)
    return np.einsum("np,npq,nq->n", coef, _inverse_per_series(info[:, -q:, -q:]), coef)


def _around_kink(design, weight, dy, dvar, total, kink, se, dof, excess):
    """The growth se, dof and unclipped excess of increments that share no profile (one per step: the
    install/serve split) around the kink their served chain found (``kink``: per series the step from which the
    cost per CRD changes, 0 for none; :attr:`Growths.bend`), where one was found.

    A cause that starts late adds nothing to its first steps' installs and all of its cost to the rest. Around a
    straight line that reads as noise beyond the sampling: its installs' intervals were 7 times the ideal width
    and its totals' 2.8-3.8 times (benchmarks/coverage.py, the watch cache from 80 of 160 CRDs). A kink tested
    on a kind's own 4 increments instead told it, but read OpenAPI's noise rebuilt at every profile as a kink one
    run in ten (its installs 0.938 -> 0.849): the chain, twice as long and through the same profiles, tells it
    far better."""
    m, columns = design.shape
    se, dof, excess = se.copy(), dof.copy(), excess.copy()
    for start in np.unique(kink):
        if start <= 0 or start >= m:
            continue
        rows = np.flatnonzero(kink == start)
        bent = _kink_at(design, start)  # one increment per step: the step is the increment
        se_k, dof_k, cov, _share, excess_k = _growth_variance(bent, weight, dy[rows], dvar[rows], False, None, total)
        # The kink's own test on these increments too (at the chain's step: no profiles to share the level among).
        wald = _wald(bent, cov, dy[rows], bent.shape[1] - columns)
        test_dof = np.minimum(dof_k, KINK_DOF_CAP * (m - bent.shape[1]))
        kept = wald > _wald_critical(bent.shape[1] - columns, test_dof, TREND_LEVEL)
        told = rows[kept]
        se[told], dof[told], excess[:, told] = se_k[kept], dof_k[kept], excess_k[:, kept]
    return se, dof, excess


def _kinks(design: np.ndarray, weight: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``design`` with its columns again from one served profile on (:func:`_kink_at`), one design per served
    profile between the first and the last, each with the served step it starts at (the increments that served
    CRDs before it: :attr:`Growths.bend`): a cost per CRD installed and one per CRD served that change there."""
    m = len(weight)
    serves = design[:, -1] > 0  # increments that served CRDs (all of them without installed profiles)
    return [(int(serves[:j].sum()), _kink_at(design, j)) for j in range(1, m) if serves[j - 1]]


def _kink_at(design: np.ndarray, first: int) -> np.ndarray:
    """``design`` with its columns again from increment ``first`` on: costs per CRD that change there."""
    return np.concatenate([design, design * (np.arange(len(design)) >= first)[:, None]], axis=1)


def _wald_critical(q: int, dof: np.ndarray, level: float) -> np.ndarray:
    """The Wald statistic of ``q`` columns that is significant at ``level``: ``q·F(q, dof)``'s upper quantile
    (``χ²(q)``'s for infinite ``dof``; one column: ``t²``, two: closed forms, no scipy)."""
    dof = np.asarray(dof, dtype=float)
    if q == 1:
        return _quantile(dof, 1 - level) ** 2
    if q == 2:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            finite = dof * (level ** (-2 / dof) - 1)  # P(F(2, d) > f) = (1 + 2f/d)^(-d/2)
        return np.where(np.isinf(dof), -2 * math.log(level), finite)
    from scipy.special import chdtri, fdtri  # lazy: ~0.3 s of CPU, for three or more columns only (none today)

    return np.where(np.isinf(dof), chdtri(q, level), q * fdtri(q, np.where(np.isinf(dof), 1.0, dof), 1 - level))


def _with_trend(design: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``design`` with one more column: a cost per CRD that changes linearly along the run (the
    increment's CRDs times its midpoint's distance from the run's CRD-weighted middle), so that the
    residual increments, and the noise estimated from them, leave a smooth bend of the growth out (the
    growth itself, ``ΣΔy / ΣΔx``, is unchanged)."""
    middle = np.cumsum(weight) - weight / 2
    middle = middle - (middle * weight).sum() / weight.sum()
    return np.concatenate([design, (weight * middle)[:, None]], axis=1)


def _residual_maker(design: np.ndarray, weight: np.ndarray | None = None) -> np.ndarray:
    """``I - H`` for the increments' mean ``design @ β`` fitted by weighted least squares with weights
    ``1 / weight`` (persistent noise grows with the CRDs an increment adds; ``weight`` defaults to the
    row sums): the residual increments are ``(I - H) @ Δy``. For one column it is ``Δy - (ΣΔy / ΣΔx)·Δx``."""
    inverse = 1.0 / (design.sum(axis=1) if weight is None else weight)
    fitted = design @ np.linalg.pinv(design.T @ (design * inverse[:, None])) @ (design * inverse[:, None]).T
    return np.eye(len(design)) - fitted


# With fewer increments the persistent and the per-profile noise cannot both be estimated: only the known
# sampling and the persistent noise are (per-profile noise is then counted in every increment: conservative).
# A chain through the installed profiles has 4 from 2 steps on.
CHAIN_MIN_INCREMENTS = 4
# Below this many increments, causes carried by a sample or two per step are unreliable (their
# increments are Poisson-like counts, far from normal): say so beside the numbers.
FEW_INCREMENTS = 3
# From this many served steps on, a chain's noise is also estimated around a cost per CRD that bends
# linearly along the run (:func:`_with_trend`), and used where the bend is significant at TREND_LEVEL
# (two-sided t test by generalised least squares). benchmarks/coverage.py (2,000 runs, seeds 1-3): the
# column always on narrowed where nothing bends too, and OpenAPI on v1.24.0 (noise of a few 3-4 MB objects,
# no sampling variance to speak of) fell from 0.926 to 0.921 under strong GC noise; a test at 10 % still
# cost it 1-5 runs of 2,000 on seeds 2 and 3, weighted least squares' test at 5 % too; this one at 5 % none.
# A kink too (_kinks: a cost per CRD installed and one per CRD served from a served profile on), for a cause that
# starts late (the watch cache from 80 of 160 CRDs, seed 1; v1.37.1/v1.24.0): a run's totals 1.53/1.43 ->
# 1.05/1.08 times the ideal, coverage 0.987/0.974 -> 0.974/0.961; the watch cache 0.988/0.991 at 1.9/1.7 ->
# 0.962/0.956 at 1.03; comparisons 0.987 at 1.50 (total) and 0.997 at 1.75 (watch cache) -> 0.972 at 1.19 and
# 0.965 at 1.03 (uncapped, KINK_DOF_CAP: 1.00-1.02 times, seeds 1-3). Tried and dropped: one kink column for
# both kinds (the CRDs an increment adds) left the watch cache on v1.24.0 (installs 14 times its serves) at
# 1.53 times, coverage 0.985; the kink tested on the increments' m - p degrees of
# freedom (a Wald test of two columns on 4) missed it: totals 1.8-2.3 times; the line tested on
# Satterthwaite's degrees of freedom as the kink is took OpenAPI on v1.24.0 per run from 0.9275 to 0.9205
# under strong GC noise and from 0.9355 to 0.9295 at 10×16 (its noise around a bend read as none now and then,
# then the sampling alone tells any bend). Not on the install/serve split: with 4 increments of a kind the
# line made a late cause's installs no narrower (4.1 -> 3.9 times the ideal) and OpenAPI's installs shorter
# (0.938 -> 0.929); a kink at any profile tested on Satterthwaite's degrees of freedom made the late installs
# 1.0 times the ideal (coverage 0.94-0.97), but OpenAPI rebuilt at every profile's installs 0.938 -> 0.849
# (its noise grows along the run; 2 increments left around a kink read it as none one run in ten).
# Later on 2026-11-28 the split took its chain's kink (the best that passed, the line aside: the late watch cache
# on v1.24.0 has the line win 57 % of runs) where each kind's increments confirm it by the same test at that
# step (_around_kink). Seed 1, 2,000 runs: the late installs 7.2 -> 1.04-1.06 times the ideal, coverage 1.000 ->
# 0.9645-0.9675, the late split totals 3.76/2.75/1.65 -> 1.01/1.31/1.02 (0.9505-0.968); OpenAPI rebuilt at every
# profile's installs 0.9375 -> 0.924 and those totals 0.9355/0.937 -> 0.9255/0.9275 (a spurious kink leaves 2
# increments of a kind to read the rebuilt sampling's noise from; 10,000 runs: 0.9344/0.9385, 0.931/0.9387).
# Tried: the chain's verdict as it is (the line where the line won): the late installs on v1.24.0 stayed 6.3 times;
# the kind's test at 1 % instead of 5 %: the late serves on v1.37.1 3.9 times; the split's known sampling read rebuilt by the chain's λ: the carried
# causes' λ is above 0 in 5-28 % of runs (the late watch cache's 60 %) and adds their whole profile's variance.
TREND_MIN_STEPS = 4
TREND_LEVEL = 0.05
# A kink's Wald test believes Satterthwaite's degrees of freedom only up to this many times the increments'
# m - p: noise around a kink estimated as none (m - p = 4 at 4 steps) is not taken for the sampling alone.
# Uncapped, OpenAPI on v1.24.0 per run fell under strong GC noise 0.9275/0.928/0.9305 -> 0.9185/0.9195/0.9245
# (seeds 1-3) and at 10×16 0.9355/0.9305 -> 0.929/0.9255 (seeds 1-2); capped at 2: 0.9235/0.9235 under strong
# GC noise (seeds 1-2; 4: 0.9225 at seed 1), 0.931 at 10×16 (seed 1), the late cause's totals per run 1.05/1.08
# times the ideal, coverage 0.974/0.961 (seed 1). Still below the base under strong GC noise by 8-9 runs of 2,000.
KINK_DOF_CAP = 2
# The rule of three's 3 samples more (see increments_batch) in full up to this many samples in a growth.
UNSEEN_SAMPLES_UP_TO = 20
# Whether a chain's sampling is rebuilt for every profile (the whole OpenAPI spec at every CRD change) is read
# from the dispersion φ of its residual increments weighed by the covariance rebuilt sampling would have (T_V,
# see _variance_components): ~1 when the sampling does not carry over (φ·(m - p) a χ² on m - p degrees of
# freedom), far below when it does. Below the χ²'s REBUILT_FROM quantile the rebuilt reading gets no share of
# the variance, from its REBUILT_FULL quantile on all of it, linearly in the χ²'s distribution function between
# (at 4 steps, m - p = 6: φ from 0.35 to 0.6). benchmarks/coverage.py (2,000 runs, seeds 1-3): OpenAPI on
# v1.24.0 under strong GC noise (its sampling carries over) lost a run of 2,000 at seed 2 with a ramp from
# φ = 0.3, none from 0.35; a ramp in φ itself, the same at every length, read crd-schema's comparisons at
# 10×16 (m - p = 18, where rebuilt sampling's φ lies near 1) as partly rebuilt (0.968 -> 0.977). Before
# (until 2026-11-28) the carried reading's noise of one profile τ² was read as rebuilt up to V̄: σ² and τ²
# are then told apart by the lag-1 products alone, and σ² costs a growth Σw where τ² costs 2, so σ² took what
# a low τ² missed: OpenAPI rebuilt at every profile covered 0.99 at 1.6-1.7 times the ideal width.
REBUILT_FROM = 0.09
REBUILT_FULL = 0.27
# A total (known_covariance, increments_batch's parts): until 2026-11-28 it took the blend above itself, by its
# own φ against its own T_V. But a total mixes OpenAPI's sampling rebuilt at every profile with every other
# cause's carried over, so neither reading fits it and the blend overstated its variance: where OpenAPI is
# rebuilt, totals covered 0.9725-0.988 at 1.12-1.49 times the ideal (seed 1). Its known covariance is now the sum
# of its causes', each at the share λ its own fit found (around the bend it used, where one won), with σ² and τ²
# beyond it from forms weighed by it: there 0.9475-0.975 at 0.94-1.09 times (seeds 1-2, 2,000 runs; 10,000 runs:
# 0.970-0.988 at 1.12-1.48 -> 0.953-0.966 at 0.95-1.08), every other case's totals within 0.0075 of before (10,000
# runs, 4×40, 10×16 and a true difference of zero: within 0.003) and no other cause's interval moved. Tried: the carried reading's forms
# (the increments' spread and lag-1 products, unweighed) beyond that sum: as good where OpenAPI is rebuilt, but
# the other totals 0.01-0.02 lower (500 runs: 4×40 comparison 0.946 -> 0.932, 3 steps on v1.24.0 0.930 ->
# 0.920, a true difference of zero 0.962 -> 0.944). On the real runs of docs/explanation/error-model.md's
# repeatability table one run's v1.37.1 total is 107.0 KiB wide, not 185.0 (sd/se 0.87 -> 1.20; v1.24.0 177.2 ->
# 182.1 KiB, 0.61 -> 0.67), one run's interval holding the others' mean as often (163 of 170).
# Later on 2026-11-28 the σ² and τ² beyond that sum stopped being the total's own: its noise beyond the sampling
# is its causes' unclipped estimates added up (_sum_of_parts). Seed 1, 2,000 runs: the persisting-noise case's
# totals 0.8885-0.8945 -> 0.9375-0.9505; the other cases' totals 0.9385-0.9775 (0.930-0.975 before), the v1.24.0
# ones per run 0.92-0.94 -> 0.96-1.15 times the ideal; no cause's interval moved. On the real repeats: sd/se of the
# v1.24.0 total 0.67 -> 0.46, v1.37.1 1.20 and Azure 1.60 -> 1.62 (the first repeats of 2026-11-28, no longer
# kept; docs/results/repeatability.md now holds a second pair).


def _quantile(dof: np.ndarray, confidence: float) -> np.ndarray:
    """t quantiles for an array of degrees of freedom (normal for ``inf``, NaN for 0): :func:`t_quantile`'s
    table and the normal without scipy, scipy only for degrees of freedom off the table."""
    dof = np.asarray(dof, dtype=float)
    p = 0.5 + confidence / 2
    out = np.full(dof.shape, math.nan)
    tabled = (dof > 0) & (np.isinf(dof) | ((dof == np.round(dof)) & (dof <= len(_T975))))
    for d in np.unique(dof[tabled]):
        out[dof == d] = t_quantile(p, float(d))
    rest = (dof > 0) & ~tabled
    if rest.any():
        from scipy.special import stdtrit  # lazy: ~0.3 s of CPU, for the quantiles off the table (t_quantile)

        out[rest] = stdtrit(dof[rest], p)
    return out


def _pinv_per_series(a: np.ndarray) -> np.ndarray:
    """``np.linalg.pinv`` of each series' matrix (series x rows x columns), without an SVD per series where
    none is needed (a benchmark's thousands of series): once for a matrix every series shares (broadcast),
    in closed form for one column."""
    if a.strides[0] == 0:
        return np.broadcast_to(np.linalg.pinv(a[0]), (a.shape[0], a.shape[2], a.shape[1]))
    if a.shape[2] == 1:
        norm = (a**2).sum(axis=1, keepdims=True)
        cutoff = 1e-15 * norm  # pinv's rcond: a column of zeros (or nearly) has none
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.swapaxes(np.where(norm > cutoff, a / norm, 0.0), 1, 2)
    return np.linalg.pinv(a)


def _inverse_per_series(a: np.ndarray) -> np.ndarray:
    """``np.linalg.pinv`` of each series' square matrix, by LU where that is as good (a benchmark's thousands of
    series: an SVD each costs ~10 times more): where a matrix is near singular (its condition, estimated
    from the norms of it and its inverse, beyond 1e12) or exactly so, by the SVD still."""
    try:
        inverse = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        return np.linalg.pinv(a)
    with np.errstate(invalid="ignore", over="ignore"):
        condition = np.linalg.norm(a, axis=(1, 2)) * np.linalg.norm(inverse, axis=(1, 2))
    bad = ~(condition < 1e12)
    if bad.any():
        inverse[bad] = np.linalg.pinv(a[bad])
    return inverse


def _pinv_within(a: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """``np.linalg.pinv`` of each series' symmetric ``a`` whose rows and columns lie in the range of ``centre``
    (a residual maker, shared by every series): ``N (Nᵀ a N)⁻¹ Nᵀ`` with ``N`` an orthonormal basis of that
    range, one SVD for all series and a smaller inverse each (:func:`_inverse_per_series`)."""
    u, singular, _vt = np.linalg.svd(centre)
    basis = u[:, singular > 1e-9 * singular.max()]
    return basis @ _inverse_per_series(basis.T @ a @ basis) @ basis.T


def _nonnegative(coef: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Variance components ``v >= 0`` with ``coef @ v`` nearest ``rhs``, per series (``coef``: series x
    forms x components; least squares, exact when every component of the exact solution is 0 or
    above), how each weighs ``rhs`` (series x components x forms, for Satterthwaite), and how the
    components with none kept at 0 or above would weigh it (``coef``'s pseudo-inverse, the first subset
    tried: :func:`_excess`). A handful of components: every subset of them is tried, the best one that
    keeps them all at 0 or above wins."""
    n, forms, k = coef.shape
    unconstrained = None
    best = np.full(n, np.inf)
    tolerance = 1e-9 * (rhs**2).sum(axis=1)  # a smaller subset must fit better than rounding, not tie
    solved, per_form = np.zeros((n, k)), np.zeros((n, k, forms))
    for size in range(k, -1, -1):
        for subset in itertools.combinations(range(k), size):
            cols = list(subset)
            pinv = _pinv_per_series(coef[:, :, cols]) if cols else np.zeros((n, 0, forms))
            if unconstrained is None:
                unconstrained = pinv
            beta = np.einsum("ncf,nf->nc", pinv, rhs)
            miss = ((rhs - np.einsum("nfc,nc->nf", coef[:, :, cols], beta)) ** 2).sum(axis=1)
            better = (beta >= 0).all(axis=1) & (miss + tolerance < best)
            best = np.where(better, miss, best)
            solved[better] = 0.0
            per_form[better] = 0.0
            for i, col in enumerate(cols):
                solved[better, col] = beta[better, i]
                per_form[better, col] = pinv[better, i]
    return solved, per_form, unconstrained


def _variance_components(
    design: np.ndarray,
    weight: np.ndarray,
    resid: np.ndarray,
    known: np.ndarray,
    chain: bool,
    profile_var: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Variance and degrees of freedom of the growth ``ΣΔy`` (times the CRDs squared), from the residual
    increments ``resid``; and the increments' covariance found, the share ``λ`` of it read as sampling
    rebuilt at every profile (0 unless ``profile_var`` is given, :func:`_with_rebuilt`), and the estimated
    part before it is kept at 0 or above with that estimate's variance (2 x series, :attr:`Growths.excess`).

    Model (see the module doc): ``Var(e) = K + σ²·diag(w) (+ τ²·T for a chain)``, ``w`` the CRDs
    each increment adds (``design``'s row sums: one column of CRDs, or CRDs installed and served).
    ``K`` is the heap sampling variance each increment added (``known``, from the profiles; zeros
    without it), ``σ²`` any other persistent growth noise, ``τ²`` noise of each profile that does not
    carry over (``T``: 2 on the diagonal and -1 beside it, as differences of independent noise are;
    only when consecutive increments share their profiles, ``chain``). ``σ²`` (and ``τ²``) come from
    quadratic forms of the residuals (the spread, and for a chain the lag-1 products) set to their
    expectations, each kept at 0 or above (MINQUE-like). The variance of the sum ``c·Δy`` is
    ``c'Kc + σ²·c'diag(w)c + τ²·c'Tc`` (for a growth, all of a chain: ``ΣK + σ²·Σw + 2τ²``), on
    Satterthwaite's degrees of freedom for the estimated part (the known part has no error).

    ``profile_var`` (series x profiles, a chain's): each profile's own sampling variance ``V``, for the
    reading that the sampling is rebuilt for every profile (:func:`_with_rebuilt`): its covariance is then
    ``T_V`` (``V_i + V_(i-1)`` on the diagonal, ``-V_i`` beside it) where the sampling that carries over
    has ``K``, and ``σ²``, ``τ²`` are what lies beyond ``T_V``. Why not the carried reading's ``τ²`` read as
    rebuilt up to ``V̄`` (what crdscale did before): ``σ²`` and ``τ²`` are told apart by the lag-1
    products alone there, and ``σ²`` costs a growth ``Σw`` where ``τ²`` costs 2, so ``σ²`` took what a low
    ``τ²`` missed; weighed by ``T_V`` the profiles' own scatter tells them apart (persistent noise drifts
    from profile to profile, rebuilt sampling does not).
    """
    n, m = resid.shape
    c = np.ones(m)  # the growth adds up every increment
    eye = np.eye(m)
    centre = _residual_maker(design, weight)  # residuals = centre @ increments
    # The unknown components' covariances: persistent noise in proportion to an increment's CRDs, and for a
    # chain noise of one profile; and the quadratic forms of the residuals that estimate them.
    shapes = [np.diag(weight)]
    forms = [np.diag(1 / weight)]
    if chain:
        inv = 1 / np.sqrt(weight)
        shapes.append(2 * eye - np.eye(m, k=1) - np.eye(m, k=-1))
        forms.append((np.eye(m, k=1) + np.eye(m, k=-1)) * np.outer(inv, inv) / 2)
    k = len(forms)
    target = np.broadcast_to(np.array([c @ shape @ c for shape in shapes]), (n, k))  # the sum's variance per unit
    q = np.stack([np.einsum("ni,ij,nj->n", resid, a, resid) for a in forms], axis=1)
    g = [centre.T @ a @ centre for a in forms]
    rhs = q - np.stack([known @ np.diagonal(gi) for gi in g], axis=1)
    # E[q] - known part = coef @ components (the same for every series)
    coef = np.broadcast_to(np.array([[np.trace(gi @ v) for v in shapes] for gi in g]), (n, k, k))
    solved, per_form, unconstrained = _nonnegative(coef, rhs)
    estimated = (solved * target).sum(axis=1)
    known_part = np.clip(known @ (c * c), 0.0, None)
    var = known_part + estimated
    cov = known[:, :, None] * eye + sum(solved[:, i, None, None] * shapes[i] for i in range(k))
    residual_cov = centre @ cov @ centre.T
    var_estimated = _satterthwaite(np.einsum("nj,njf->nf", target, per_form), forms, residual_cov)
    excess = _excess(unconstrained, rhs, target, forms, residual_cov)
    share = np.zeros(n)
    if chain and profile_var is not None:
        var, var_estimated, cov, estimated, excess, share = _with_rebuilt(
            (var, var_estimated, cov, estimated, excess), centre, shapes, target, resid, profile_var, design.shape[1]
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        dof = np.where((estimated > 0) & (var_estimated > 0), 2 * var**2 / var_estimated, math.inf)
    # Never fewer than the spread of the increments alone has: m - 1 (m - 2 with installed and served).
    return var, np.maximum(dof, float(m - design.shape[1])), cov, share, excess


def _satterthwaite(weights: np.ndarray, forms: Sequence[np.ndarray], residual_cov: np.ndarray) -> np.ndarray:
    """The variance of ``Σ_i weights_i · rᵀ A_i r`` (``forms`` ``A_i``, shared or per series) for normal
    residuals ``r`` of covariance ``residual_cov``: ``2 tr(BWBW)``, ``B = Σ w_i A_i``, ``W`` that covariance."""
    b = sum(weights[:, i, None, None] * form for i, form in enumerate(forms))
    bw = b @ residual_cov
    return 2 * np.einsum("nij,nji->n", bw, bw)


def _excess(unconstrained, rhs, target, forms, residual_cov) -> np.ndarray:
    """The growth's variance beyond the known part as the quadratic forms estimate it with no component
    kept at 0 or above (``unconstrained``: the forms' coefficients' pseudo-inverse, :func:`_nonnegative`;
    unbiased, where the kept estimate is not), and its variance: 2 x series (:attr:`Growths.excess`).
    One cause's is too noisy to use alone; a total adds up its causes'."""
    estimate = np.einsum("nj,njf,nf->n", target, unconstrained, rhs)
    weights = np.einsum("nj,njf->nf", target, unconstrained)
    return np.stack([estimate, _satterthwaite(weights, forms, residual_cov)])


def _with_rebuilt(carried, centre, shapes, target, resid, profile_var, columns):
    """The carried reading's ``(var, var_estimated, cov, estimated, excess)`` of a chain's growth blended with
    the rebuilt one's by the share ``λ`` the increments' dispersion φ against ``T_V`` gives (:data:`REBUILT_FROM`;
    see :func:`_variance_components`), and ``λ``."""
    rebuilt = _rebuilt_covariance(profile_var)
    share, weigh, expected = _rebuilt_share(centre, resid, rebuilt, columns)
    var, var_estimated, cov, estimated, excess = _beyond_known(centre, shapes, target, resid, rebuilt, weigh, expected)
    var_c, var_estimated_c, cov_c, estimated_c, excess_c = carried

    def blend_sd(a, b):  # estimated parts' standard deviations add (their errors go together: the same residuals)
        return ((1 - share) * np.sqrt(np.clip(a, 0.0, None)) + share * np.sqrt(np.clip(b, 0.0, None))) ** 2

    return (
        (1 - share) * var_c + share * var,
        blend_sd(var_estimated_c, var_estimated),
        (1 - share)[:, None, None] * cov_c + share[:, None, None] * cov,
        (1 - share) * estimated_c + share * estimated,
        np.stack([(1 - share) * excess_c[0] + share * excess[0], blend_sd(excess_c[1], excess[1])]),
        share,
    )


def _rebuilt_covariance(profile_var: np.ndarray) -> np.ndarray:
    """``T_V`` (series x m x m) of a chain of ``m`` increments whose profiles' sampling variances are
    ``profile_var`` (series x m + 1), sampled afresh at every profile: ``V_i + V_(i-1)`` on the diagonal,
    ``-V_i`` beside it."""
    n, m = profile_var.shape[0], profile_var.shape[1] - 1
    i = np.arange(m)
    rebuilt = np.zeros((n, m, m))
    rebuilt[:, i, i] = profile_var[:, :m] + profile_var[:, 1 : m + 1]
    rebuilt[:, i[:-1], i[1:]] = rebuilt[:, i[1:], i[:-1]] = -profile_var[:, 1:m]
    return rebuilt


def _weighing(centre: np.ndarray, known: np.ndarray):
    """The residual increments' covariance if nothing but ``known`` varied, and its pseudo-inverse (the
    quadratic forms' weight)."""
    m = known.shape[1]
    expected = centre @ known @ centre.T
    scale = np.trace(expected, axis1=1, axis2=2)[:, None, None] / m
    scale = np.where(scale > 0, scale, 1.0)
    return _pinv_within(expected / scale, centre) / scale, expected


def _rebuilt_share(centre, resid, rebuilt, columns):
    """The share ``λ`` of a chain's variance that is the rebuilt reading's (:data:`REBUILT_FROM`), from the
    residual increments' dispersion φ weighed by ``T_V`` (``rebuilt``); and that weight and the residuals'
    covariance under ``T_V`` alone."""
    m = resid.shape[1]
    weigh, expected = _weighing(centre, rebuilt)
    phi = np.einsum("ni,nij,nj->n", resid, weigh, resid) / (m - columns)
    from scipy.special import chdtr  # lazy: ~0.3 s of CPU, for a chain with known sampling only (t_quantile)

    # φ's place in the χ² it would follow if the sampling were rebuilt: λ ramps between two of its quantiles.
    level = chdtr(m - columns, np.nan_to_num(phi, nan=0.0, posinf=1e300) * (m - columns))
    with np.errstate(invalid="ignore"):
        share = np.clip((level - REBUILT_FROM) / (REBUILT_FULL - REBUILT_FROM), 0.0, 1.0)
    return np.where(np.isfinite(share), share, 0.0), weigh, expected


def _beyond_known(centre, shapes, target, resid, known, weigh, expected):
    """``(var, var_estimated, cov, estimated, excess)`` of a chain's growth: a known covariance of its increments
    (series x m x m) plus ``σ²`` and ``τ²`` beyond it, from quadratic forms weighed by ``weigh`` (the
    pseudo-inverse of ``expected``, the residuals' covariance under ``known`` alone: REML's score at no
    other noise)."""
    m = resid.shape[1]
    c = np.ones(m)
    # E[q] = tr(F_j E) + coef θ.
    parts = [centre @ shape @ centre.T for shape in shapes]
    forms = [weigh @ part @ weigh for part in parts]
    q = np.stack([np.einsum("ni,nij,nj->n", resid, f, resid) for f in forms], axis=1)
    rhs = q - np.stack([np.einsum("nij,nji->n", f, expected) for f in forms], axis=1)
    coef = np.stack([np.stack([np.einsum("nij,ji->n", f, part) for part in parts], axis=1) for f in forms], axis=1)
    norm = np.sqrt((coef**2).sum(axis=(1, 2)))[:, None]  # the forms' scale is the known's: make it 1 for the fits
    norm = np.where(norm > 0, norm, 1.0)
    solved, per_form, unconstrained = _nonnegative(coef / norm[:, :, None], rhs / norm)
    per_form = per_form / norm[:, None, :]
    estimated = (solved * target).sum(axis=1)
    var = np.clip(np.einsum("i,nij,j->n", c, known, c), 0.0, None) + estimated
    cov = known + sum(solved[:, j, None, None] * shape for j, shape in enumerate(shapes))
    residual_cov = centre @ cov @ centre.T
    var_estimated = _satterthwaite(np.einsum("nj,njf->nf", target, per_form), forms, residual_cov)
    excess = _excess(unconstrained, rhs / norm, target, [f / norm[:, :, None] for f in forms], residual_cov)
    return var, var_estimated, cov, estimated, excess


def known_covariance(sampling_var: np.ndarray, first_var: np.ndarray, share: np.ndarray) -> np.ndarray:
    """The known covariance of a chain's increments (series x m x m) from one cause's heap sampling: what each
    increment added to it (``sampling_var``, series x m) and its first profile's (``first_var``), read as
    carried over (``diag``) by ``1 - share`` and as rebuilt at every profile (``T_V``) by ``share`` (the
    cause's own fit's λ, :attr:`Growths.rebuilt`). A total's is the sum of its causes' (their samplings
    are independent): see :func:`increments_batch`'s ``parts``."""
    sampling_var = np.nan_to_num(np.asarray(sampling_var, dtype=float))
    n, m = sampling_var.shape
    share = np.broadcast_to(np.asarray(share, dtype=float), (n,))[:, None, None]
    i = np.arange(m)
    carried = np.zeros((n, m, m))
    carried[:, i, i] = sampling_var
    return (1 - share) * carried + share * _rebuilt_covariance(_profile_variances(sampling_var, first_var))


def _profile_variances(sampling_var: np.ndarray, first_var) -> np.ndarray:
    """Each profile's own heap sampling variance (series x m + 1) in a chain of ``m`` increments: the first's
    (``first_var``, per series), plus what every increment added (``sampling_var``, series x m); never below 0."""
    n = sampling_var.shape[0]
    start = np.clip(np.nan_to_num(np.broadcast_to(np.asarray(first_var, float), (n,))), 0.0, None)
    profile_var = np.clip(start[:, None] + np.cumsum(sampling_var, axis=1), 0.0, None)
    return np.concatenate([start[:, None], profile_var], axis=1)


def difference(a: Estimate, b: Estimate, confidence: float = 0.95) -> Estimate:
    """``a - b`` for independent estimates, with Welch–Satterthwaite degrees of freedom.

    Each side keeps its own variance: pooling one residual variance across
    runs lends a noiseless run's degrees of freedom to a noisy one (a "95 %"
    interval that holds ~91 %). An exact side (se 0, e.g. a cause absent
    from every profile) leaves the other side's degrees of freedom; a side
    known only by bounds (se 0 with a width: no heap sample came or went) is
    combined by its margins below and above its value, each side's added in
    quadrature (MOVER: from ``a - b - hypot(a - a.low, b.high - b)`` to
    ``a - b + hypot(a.high - a, b - b.low)``). Growths
    of heap samples carry the rule of three's allowance for a count of a few
    (:func:`unseen_allowance`); a difference of two such growths leaves it out.
    """

    def one(e: Estimate) -> tuple:
        fields = (e.value, e.se, e.dof, e.low, e.high, e.allowance)
        return tuple(np.array([v], dtype=float) for v in fields)

    batch = difference_batch(one(a), one(b), confidence)
    return Estimate(*(float(v[0]) for v in batch))


def difference_batch(a: tuple, b: tuple, confidence: float = 0.95):
    """:func:`difference` for arrays: ``a`` and ``b`` are ``(value, se, dof, low, high)`` arrays, or
    :class:`Growths` (what :func:`increments_batch` returns); returns the same five for ``a - b``."""
    value_a, se_a, dof_a, low_a, high_a = (np.asarray(v, dtype=float) for v in a[:5])
    value_b, se_b, dof_b, low_b, high_b = (np.asarray(v, dtype=float) for v in b[:5])
    value = value_a - value_b
    va, vb = se_a**2, se_b**2
    var = va + vb
    if len(a) > 5 and len(b) > 5:
        # Two growths of heap samples: their difference is near symmetric (its skewness is the difference
        # of theirs), so neither count's allowance for a low tail is needed. Kept, differences of causes
        # of 11-21 samples a side covered 0.97-0.98; left out, the lowest difference of any cause covers
        # 0.942 (metrics, 10 steps) and goroutines' (8 samples) 0.948 (benchmarks/coverage.py, 2,000 runs).
        allowance_a, allowance_b = (np.asarray(side[5], dtype=float) for side in (a, b))
        # (Only where each side holds more than its allowance: a side of no sampling variance has no count.)
        both = (allowance_a > 0) & (allowance_b > 0) & (va > 1.000001 * allowance_a) & (vb > 1.000001 * allowance_b)
        var = np.where(both & np.isfinite(var), np.maximum(var - allowance_a - allowance_b, 0.0), var)
    with np.errstate(divide="ignore", invalid="ignore"):
        term_a = np.where(va > 0, va**2 / dof_a, 0.0)
        term_b = np.where(vb > 0, vb**2 / dof_b, 0.0)
        dof = np.where(var > 0, var**2 / (term_a + term_b), math.inf)
    se = np.sqrt(var)
    from scipy.special import stdtrit  # lazy: ~0.3 s of CPU, for Welch's comparison only (t_quantile)

    # t with infinite degrees of freedom is the normal distribution (a known variance).
    quantile = stdtrit(np.where(dof > 0, dof, np.nan), 0.5 + confidence / 2)
    half = quantile * se
    undefined = ~np.isfinite(var)
    half = np.where(undefined, math.nan, half)
    low, high = value - half, value + half
    bounded = ((se_a == 0) & (high_a > low_a)) | ((se_b == 0) & (high_b > low_b))
    # A side known by its bounds: each side's margins below and above its value added in quadrature (MOVER,
    # Zou & Donner 2008), not end to end: adding the bounds of the side no sample touched to the other's made
    # the zap counters' difference (v1.37.1 has none) cover 0.974 at 1.10 times the ideal width.
    low = np.where(bounded, value - np.hypot(value_a - low_a, high_b - value_b), low)
    high = np.where(bounded, value + np.hypot(high_a - value_a, value_b - low_b), high)
    return value, np.where(undefined, math.nan, se), np.where(undefined, 0.0, dof), low, high


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


def pooled_estimate(estimates: Sequence[Estimate], confidence: float = 0.95) -> Estimate:
    """One configuration's estimate from its runs': the one run's own, or the mean of its repeats
    with the interval from their spread (:func:`replicate_mean`)."""
    if len(estimates) == 1:
        return estimates[0]
    return replicate_mean([e.value for e in estimates], confidence)


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


def sampled_object_sizes(space: np.ndarray, objects: np.ndarray, rate: float = GO_HEAP_SAMPLING_RATE) -> np.ndarray:
    """The object size behind each heap-profile sample, undoing Go's rounding of the scaled count.

    Go reports ``n`` sampled objects of ``s`` bytes as ``int(n/p)`` objects and
    ``n·s/p`` bytes. For large objects the truncated count misleads:
    kube-apiserver's zap counter arrays (448 KiB, p = 0.58) read as 1 object
    of 786,695 B. For counts below 64 this finds the raw count ``n`` and size
    ``s`` that reproduce both numbers; above, ``space / objects`` is within 2 %.
    """
    space = np.asarray(space, dtype=float)
    objects = np.asarray(objects, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        size = np.where(objects > 0, space / objects, 0.0)
    small = np.flatnonzero((objects > 0) & (objects < 64) & (space > 0))
    if len(small) == 0:
        return size
    n = np.arange(1, 65, dtype=float)[None, :]
    per_object = space[small, None] / n  # s / p(s) for each candidate n
    # s / p(s) grows with s from `rate` (s -> 0): bisect for s in [0, per_object].
    low, high = np.zeros_like(per_object), per_object.copy()
    for _ in range(60):
        mid = (low + high) / 2
        with np.errstate(divide="ignore", invalid="ignore"):
            value = np.where(mid > 0, mid / -np.expm1(-mid / rate), rate)
        too_big = value > per_object
        high = np.where(too_big, mid, high)
        low = np.where(too_big, low, mid)
    s = (low + high) / 2
    p = -np.expm1(-s / rate)
    feasible = (per_object >= rate) & (np.floor(n / p + 1e-9) == objects[small, None])
    # The first n that reproduces Go's integer count (several can for tiny objects: any is within rounding).
    first = np.where(feasible.any(axis=1), feasible.argmax(axis=1), -1)
    found = first >= 0
    size[small[found]] = s[found, first[found]]
    return size


def heap_sampling_variance(
    space: np.ndarray, objects: np.ndarray, rate: float = GO_HEAP_SAMPLING_RATE
) -> tuple[np.ndarray, np.ndarray]:
    """Sampling variance of each heap-profile sample's scaled ``inuse_space`` and ``inuse_objects``.

    Go reports a sampled allocation of average size ``s`` scaled by ``1/p``,
    ``p = 1 - exp(-s/rate)``: each live object of that size is counted with
    probability p as ``s/p`` bytes, so the estimate of N objects' bytes has
    variance ``N s² (1-p)/p``, which with ``N ≈ objects`` (already scaled) is
    ``space · s · (1-p)/p``; for the object count ``objects · (1-p)/p``
    (``s`` from :func:`sampled_object_sizes`).
    Returns ``(bytes², objects²)`` per sample (0 where nothing is in use).
    """
    space = np.asarray(space, dtype=float)
    objects = np.asarray(objects, dtype=float)
    size = sampled_object_sizes(space, objects, rate)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = -np.expm1(-size / rate)
        ratio = np.where(p > 0, (1.0 - p) / p, 0.0)
    return space * size * ratio, objects * ratio
