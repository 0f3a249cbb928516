"""Client-side throttling as client-go does it: a pure token-bucket model.

client-go's ``flowcontrol.NewTokenBucketRateLimiter(qps, burst)`` wraps
``golang.org/x/time/rate.NewLimiter(rate.Limit(qps), burst)`` and every request
calls ``limiter.Wait(ctx)`` before it is sent. The limiter semantics this module
reproduces (``rate.Limiter.reserveN`` and ``advance``):

* the bucket starts **full** with ``burst`` tokens;
* it refills continuously at ``qps`` tokens per second, never above ``burst``;
* each request takes one token *at the moment it asks*, even if that drives
  the balance negative; a negative balance ``-k`` means the request may go
  ``k / qps`` seconds later. Reservations are therefore served first come,
  first served, and later askers queue behind earlier ones.

Legacy discovery (``GET /api``, ``GET /apis``, then one goroutine per
group-version, all at once) is the case the Crossplane one-pager measured: with
``N`` requests issued together, request ``i`` (1-based) waits
``max(0, (i - burst) / qps)``; for 192 requests at (burst 100, 5 QPS) the last
one waits 18.4 s.

A ``qps`` of zero or below means "no rate limiter", as with kubectl's
``--discovery-avg-rate=-1`` or a ``rest.Config`` with ``QPS < 0``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class RateLimit:
    """One (burst, qps) setting of a client's discovery rate limiter.

    Attributes:
        name: short label used in tables and on the command line.
        burst: bucket size in requests.
        qps: refill rate in requests per second; ``<= 0`` disables the limiter.
        note: where the setting comes from.
    """

    name: str
    burst: int
    qps: float
    note: str = ""

    @property
    def enabled(self) -> bool:
        return self.qps > 0

    def label(self) -> str:
        """``(100, 5)`` or ``disabled``, the way the one-pager's table writes it."""
        if not self.enabled:
            return "disabled"
        return f"({self.burst}, {self.qps:g})"


# The discovery client settings the one-pager compared; the generation is the
# key so a reader can tell which kubectl/client-go behaves like which row.
PRESETS: dict[str, RateLimit] = {
    "legacy": RateLimit("legacy", 100, 5.0, "kubectl <= 1.23 and client-go's default discovery client"),
    "kubectl-1.24": RateLimit("kubectl-1.24", 300, 50.0, "kubectl >= 1.23.5 / 1.24 discovery burst fix"),
    "burst-400": RateLimit("burst-400", 400, 50.0, "the one-pager's (400, 50) row: burst above 368 group-versions"),
    "disabled": RateLimit("disabled", 0, -1.0, "no client-side limiter (--discovery-avg-rate=-1)"),
}

# The (burst, qps) rows of the one-pager's table that the sweep reproduces.
SWEEP_PRESETS = ("legacy", "kubectl-1.24", "burst-400", "disabled")
SWEEP_GROUP_VERSIONS = (192, 368)


def parse_rate_limit(text: str) -> RateLimit:
    """A preset name (``legacy``), ``disabled``, or ``BURST,QPS`` such as ``300,50``."""
    text = text.strip()
    if text in PRESETS:
        return PRESETS[text]
    parts = text.replace("(", "").replace(")", "").replace("/", ",").split(",")
    if len(parts) != 2:
        raise ValueError(f"rate limit {text!r}: expected a preset ({', '.join(PRESETS)}) or BURST,QPS")
    burst, qps = int(parts[0]), float(parts[1])
    if burst < 0:
        raise ValueError(f"rate limit {text!r}: burst must be >= 0")
    return RateLimit(f"b{burst}-q{qps:g}" if qps > 0 else "disabled", burst, qps)


class TokenBucket:
    """``rate.Limiter`` arithmetic on an explicit clock (seconds as floats).

    The live discovery probe drives it with ``time.monotonic()``; the model
    drives it with planned issue times. Not thread-safe: callers hold a lock.
    """

    def __init__(self, burst: int, qps: float, *, now: float = 0.0):
        self.burst = int(burst)
        self.qps = float(qps)
        self.tokens = float(burst)  # starts full
        self.last = float(now)

    @property
    def enabled(self) -> bool:
        return self.qps > 0

    def _advance(self, now: float) -> float:
        # rate.Limiter.advance: time never runs backwards for the bucket.
        last = min(self.last, now)
        return min(float(self.burst), self.tokens + (now - last) * self.qps)

    def reserve(self, now: float) -> float:
        """Take one token at time ``now``; returns the wait in seconds before the request may go."""
        if not self.enabled:
            return 0.0
        tokens = self._advance(now) - 1.0
        self.tokens = tokens
        self.last = now
        return -tokens / self.qps if tokens < 0 else 0.0


class Limiter:
    """A :class:`TokenBucket` on the monotonic clock, shared by threads: client-go's ``limiter.Wait(ctx)``.

    ``qps <= 0`` never waits. ``clock`` and ``sleep`` are injectable for tests.
    """

    def __init__(
        self,
        burst: int,
        qps: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self._clock = clock
        self._sleep = sleep
        self._bucket = TokenBucket(burst, qps, now=clock())
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self._bucket.enabled

    def reserve(self) -> float:
        """Take a token now; returns the seconds the caller must wait before sending (not slept)."""
        if not self.enabled:
            return 0.0
        with self._lock:
            return self._bucket.reserve(self._clock())

    def wait(self) -> float:
        """Take a token and sleep until it is due (outside the lock, so others queue behind); returns seconds slept."""
        wait = self.reserve()
        if wait > 0:
            self._sleep(wait)
        return wait


def predict_waits(issue_times_s: Sequence[float] | np.ndarray, burst: int, qps: float) -> np.ndarray:
    """Predicted limiter wait (seconds) of each request asking at ``issue_times_s``.

    Requests are taken in the order given (ties keep their order, as goroutines
    reach the limiter one at a time). A disabled limiter (``qps <= 0``) gives zeros.
    """
    times = np.asarray(issue_times_s, dtype=float)
    if qps <= 0:
        return np.zeros(len(times))
    bucket = TokenBucket(burst, qps, now=float(times[0]) if len(times) else 0.0)
    return np.array([bucket.reserve(float(t)) for t in times])


def parallel_waits(n_requests: int, burst: int, qps: float) -> np.ndarray:
    """Waits (seconds) of ``n_requests`` issued together at t=0: ``max(0, (i - burst) / qps)``."""
    if qps <= 0 or n_requests <= 0:
        return np.zeros(max(n_requests, 0))
    i = np.arange(1, n_requests + 1, dtype=float)
    return np.maximum(0.0, (i - burst) / qps)


def max_throttling_delay(n_requests: int, burst: int, qps: float) -> float:
    """Wait (seconds) of the last of ``n_requests`` issued together: ``max(0, (n - burst) / qps)``."""
    if qps <= 0 or n_requests <= burst:
        return 0.0
    return (n_requests - burst) / qps


def requests_throttled(n_requests: int, burst: int, qps: float) -> int:
    """How many of ``n_requests`` issued together wait at all (more than zero seconds)."""
    if qps <= 0:
        return 0
    return max(0, n_requests - burst)


def discovery_waits(
    group_versions: int,
    burst: int,
    qps: float,
    *,
    preamble_requests: int = 2,
    preamble_duration_s: float = 0.0,
) -> np.ndarray:
    """Predicted waits (seconds) of a legacy discovery: ``/api`` + ``/apis`` then all group-versions at once.

    Parameters:
        group_versions: number of group-versions whose resource lists are fetched in parallel.
        burst, qps: the limiter; ``qps <= 0`` disables it.
        preamble_requests: sequential requests before the parallel phase (2: ``/api`` and ``/apis``).
        preamble_duration_s: how long the preamble took; the bucket refills during it.

    Returns an array of ``preamble_requests + group_versions`` waits, preamble first.
    """
    if preamble_requests > 0:
        step = preamble_duration_s / preamble_requests
        preamble_times = [k * step for k in range(preamble_requests)]
    else:
        preamble_times = []
    times = preamble_times + [preamble_duration_s] * group_versions
    if not times:
        return np.zeros(0)
    return predict_waits(times, burst, qps)


def predicted_discovery_delay(
    group_versions: int,
    limit: RateLimit,
    *,
    preamble_requests: int = 2,
    preamble_duration_s: float = 0.0,
) -> float:
    """Throttling delay (seconds) added to a cold legacy discovery: the longest single wait."""
    waits = discovery_waits(
        group_versions,
        limit.burst,
        limit.qps,
        preamble_requests=preamble_requests,
        preamble_duration_s=preamble_duration_s,
    )
    return float(waits.max()) if len(waits) else 0.0


def prediction_table(
    group_versions: Iterable[int] = SWEEP_GROUP_VERSIONS,
    limits: Iterable[RateLimit] = tuple(PRESETS[name] for name in SWEEP_PRESETS),
    *,
    preamble_requests: int = 2,
) -> pd.DataFrame:
    """The one-pager's table as a prediction: one row per (group-versions, limit).

    Columns: ``group_versions``, ``limit`` (label), ``burst``, ``qps``,
    ``requests`` (preamble + group-versions), ``throttled_requests``,
    ``predicted_delay_s`` (longest wait, seconds).
    """
    rows = []
    for gv in group_versions:
        for limit in limits:
            total = preamble_requests + gv
            rows.append(
                {
                    "group_versions": gv,
                    "limit": limit.label(),
                    "burst": limit.burst,
                    "qps": limit.qps,
                    "requests": total,
                    "throttled_requests": requests_throttled(total, limit.burst, limit.qps),
                    "predicted_delay_s": predicted_discovery_delay(gv, limit, preamble_requests=preamble_requests),
                }
            )
    return pd.DataFrame(rows)


def relative_error(measured: float, predicted: float) -> float:
    """``|measured - predicted| / predicted``; NaN when nothing was predicted (no throttling)."""
    if predicted <= 0 or math.isnan(predicted):
        return math.nan
    return abs(measured - predicted) / predicted


# Below this the extra wall time is within run-to-run noise on loopback; the
# sweep reports such rows but does not hold them to the tolerance.
MIN_CHECKED_DELAY_S = 0.25


def predicted_extra_wall(
    preamble_s: float,
    predicted_delay_s: float,
    solo_latency_s: float,
    unthrottled_wall_s: float,
) -> float:
    """Extra seconds a throttled discovery should take over an unthrottled one.

    Throttled, discovery ends when the last token's request (sent alone, so at
    ``solo_latency_s``) returns: ``preamble + max wait + solo latency``.
    Unthrottled, it ends after ``unthrottled_wall_s``. The waits overlap the
    unthrottled transfer time, so a short wait (e.g. 1.4 s at (300, 50) and 368
    group-versions) costs less than itself end to end; a long one (54 s at
    (100, 5)) costs nearly all of it.
    """
    return max(0.0, preamble_s + predicted_delay_s + solo_latency_s - unthrottled_wall_s)
