"""The one retry policy for requests to an API server: back off, and honour ``Retry-After``.

kube-apiserver answers ``429 Too Many Requests`` with ``Retry-After: N`` when
API Priority and Fairness rejects a request (and on some 5xx); client-go waits
exactly that long before trying again, and so does :func:`send_with_retry`.
Without the header it backs off exponentially.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

import requests

from crdscale.errors import ClusterError

# Throttled by APF, or a server that is briefly busy.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


def retry_after_s(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds asked for by a ``Retry-After`` header (delta seconds or an HTTP date); ``None`` without one."""
    value = (headers or {}).get("Retry-After")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry.

    Attributes:
        attempts: requests sent at most (1 = no retry).
        statuses: HTTP statuses worth another attempt.
        backoff_s: first backoff in seconds, doubled per attempt up to ``max_backoff_s``.
        max_retry_after_s: ceiling on a server's ``Retry-After`` (a misbehaving proxy may ask for hours).
        sleep: how to wait (injectable for tests).
    """

    attempts: int = 5
    statuses: frozenset[int] = RETRY_STATUSES
    backoff_s: float = 0.1
    max_backoff_s: float = 2.0
    max_retry_after_s: float = 30.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)

    def delay_s(self, attempt: int, headers: Mapping[str, str] | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (0-based): ``Retry-After`` if given, else the backoff."""
        asked = retry_after_s(headers)
        if asked is not None:
            return min(asked, self.max_retry_after_s)
        return min(self.backoff_s * 2**attempt, self.max_backoff_s)


DEFAULT_RETRY = RetryPolicy()


def send_with_retry(send: Callable[[], requests.Response], policy: RetryPolicy = DEFAULT_RETRY) -> requests.Response:
    """Call ``send`` until its answer is not in ``policy.statuses`` or the attempts are used up.

    ``send`` raises :class:`ClusterError` when no answer came (as the cluster's
    methods do); that is retried too. Returns the last response, which may
    still have a retryable status; re-raises the last :class:`ClusterError`
    when the final attempt got no answer.
    """
    attempts = max(1, policy.attempts)
    for attempt in range(attempts):
        last = attempt == attempts - 1
        try:
            response = send()
        except ClusterError:
            if last:
                raise
            policy.sleep(policy.delay_s(attempt))
            continue
        if response.status_code not in policy.statuses or last:
            return response
        policy.sleep(policy.delay_s(attempt, response.headers))
    raise AssertionError("unreachable: the last attempt returns or raises")
