"""The token-bucket model against hand-computed cases (client-go / x/time/rate semantics)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from crdscale.models import tokenbucket


def test_one_pager_case_192_requests_burst_100_at_5_qps():
    # 92 requests beyond the burst, one token every 0.2 s: the last waits 92 / 5 = 18.4 s.
    waits = tokenbucket.parallel_waits(192, 100, 5.0)
    assert waits[-1] == pytest.approx(18.4)
    assert tokenbucket.max_throttling_delay(192, 100, 5.0) == pytest.approx(18.4)
    assert tokenbucket.requests_throttled(192, 100, 5.0) == 92


@pytest.mark.parametrize(
    "n, burst, qps, expected_last_wait",
    [
        (192, 100, 50.0, 1.84),  # the one-pager's (100, 50): "drops to ~1.8 s"
        (192, 300, 50.0, 0.0),  # 192 < 300: no throttling
        (368, 100, 5.0, 53.6),
        (368, 300, 50.0, 1.36),
        (368, 400, 50.0, 0.0),
        (368, 0, -1.0, 0.0),  # disabled
        (1, 0, 10.0, 0.1),  # burst 0: even the first request waits a token
        (100, 100, 5.0, 0.0),  # exactly the burst
        (101, 100, 5.0, 0.2),
    ],
)
def test_last_wait_of_parallel_requests(n, burst, qps, expected_last_wait):
    assert tokenbucket.max_throttling_delay(n, burst, qps) == pytest.approx(expected_last_wait)
    assert tokenbucket.parallel_waits(n, burst, qps)[-1] == pytest.approx(expected_last_wait)


def test_simulated_bucket_matches_closed_form_for_simultaneous_requests():
    waits = tokenbucket.predict_waits(np.zeros(250), 100, 5.0)
    np.testing.assert_allclose(waits, tokenbucket.parallel_waits(250, 100, 5.0))


def test_bucket_refills_between_requests_but_not_above_burst():
    bucket = tokenbucket.TokenBucket(burst=2, qps=1.0, now=0.0)
    assert bucket.reserve(0.0) == 0.0  # 2 -> 1
    assert bucket.reserve(0.0) == 0.0  # 1 -> 0
    assert bucket.reserve(0.0) == pytest.approx(1.0)  # 0 -> -1
    # After 10 s idle the balance is back to 2, not 11.
    assert bucket.reserve(10.0) == 0.0
    assert bucket.reserve(10.0) == 0.0
    assert bucket.reserve(10.0) == pytest.approx(1.0)


def test_partial_refill_shortens_the_wait():
    # burst 1 at 2 QPS: first free, second asks 0.25 s later and waits the remaining 0.25 s.
    waits = tokenbucket.predict_waits([0.0, 0.25], 1, 2.0)
    np.testing.assert_allclose(waits, [0.0, 0.25])


def test_discovery_preamble_takes_two_tokens():
    # /api and /apis first, then 192 group-versions at once: 194 tokens, last waits 94 / 5.
    waits = tokenbucket.discovery_waits(192, 100, 5.0)
    assert len(waits) == 194
    assert waits[-1] == pytest.approx(18.8)
    # If /api and /apis took 1 s, the bucket refilled the two tokens (5 QPS): back to 192 / 100 / 5.
    assert tokenbucket.discovery_waits(192, 100, 5.0, preamble_duration_s=1.0)[-1] == pytest.approx(18.4)
    # A 0.2 s preamble refills one token: 18.6 s.
    assert tokenbucket.discovery_waits(192, 100, 5.0, preamble_duration_s=0.2)[-1] == pytest.approx(18.6)


def test_prediction_table_shape_matches_the_one_pager_rows():
    table = tokenbucket.prediction_table()
    assert list(table["group_versions"].unique()) == [192, 368]
    assert list(table["limit"].unique()) == ["(100, 5)", "(300, 50)", "(400, 50)", "disabled"]
    by = table.set_index(["group_versions", "limit"])["predicted_delay_s"]
    assert by[(192, "(100, 5)")] == pytest.approx(18.8)
    assert by[(368, "(100, 5)")] == pytest.approx(54.0)
    assert by[(368, "(300, 50)")] == pytest.approx(1.4)
    assert by[(368, "(400, 50)")] == 0.0
    assert by[(192, "disabled")] == 0.0


@pytest.mark.parametrize(
    "text, burst, qps",
    [("legacy", 100, 5.0), ("kubectl-1.24", 300, 50.0), ("300,50", 300, 50.0), ("(400, 50)", 400, 50.0)],
)
def test_parse_rate_limit(text, burst, qps):
    limit = tokenbucket.parse_rate_limit(text)
    assert (limit.burst, limit.qps) == (burst, qps)


def test_parse_rate_limit_disabled_and_errors():
    assert not tokenbucket.parse_rate_limit("disabled").enabled
    assert not tokenbucket.parse_rate_limit("0,-1").enabled
    with pytest.raises(ValueError):
        tokenbucket.parse_rate_limit("fast")


def test_relative_error():
    assert tokenbucket.relative_error(19.0, 18.4) == pytest.approx(0.6 / 18.4)
    assert math.isnan(tokenbucket.relative_error(1.0, 0.0))


def test_predicted_extra_wall_overlaps_short_waits():
    # (300, 50) at 368 GVs: 1.38 s wait, but 0.83 s of unthrottled transfer overlaps it.
    assert tokenbucket.predicted_extra_wall(0.05, 1.38, 0.005, 0.83) == pytest.approx(0.605)
    # (100, 5) at 368 GVs: nearly the whole wait shows end to end.
    assert tokenbucket.predicted_extra_wall(0.05, 53.96, 0.005, 0.83) == pytest.approx(53.185)
    # No throttling: never negative.
    assert tokenbucket.predicted_extra_wall(0.05, 0.0, 0.005, 0.83) == 0.0


def test_limiter_spaces_requests_after_the_burst_on_its_clock():
    now = [0.0]
    slept = []
    limiter = tokenbucket.Limiter(burst=5, qps=50, clock=lambda: now[0], sleep=slept.append)
    waits = [limiter.wait() for _ in range(15)]
    # 5 go at once, the other 10 queue at 50/s: the 15th waits 10 / 50 = 0.2 s
    assert waits[:5] == [0.0] * 5
    assert waits[-1] == pytest.approx(0.2)
    assert slept == waits[5:]
    now[0] = 10.0  # a long pause refills the bucket to its burst, no more
    assert [limiter.wait() for _ in range(5)] == [0.0] * 5
    assert limiter.wait() > 0


def test_disabled_limiter_never_waits():
    limiter = tokenbucket.Limiter(burst=0, qps=0, sleep=lambda s: pytest.fail("slept"))
    assert sum(limiter.wait() for _ in range(1000)) == 0.0
