"""The one retry helper: Retry-After first, backoff otherwise, no answer retried too."""

from __future__ import annotations

from email.utils import formatdate

import pytest
import requests

from crdscale.cluster.retry import RetryPolicy, retry_after_s, send_with_retry
from crdscale.errors import ClusterError


def _answer(status: int, **headers: str) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response.headers.update(headers)
    return response


@pytest.mark.parametrize(
    "header,expected",
    [
        ({"Retry-After": "3"}, 3.0),
        ({"Retry-After": " 1.5 "}, 1.5),
        ({"Retry-After": "-2"}, 0.0),
        ({"Retry-After": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_seconds(header, expected):
    assert retry_after_s(header) == expected


def test_retry_after_http_date():
    assert retry_after_s({"Retry-After": formatdate(1_000_010, usegmt=True)}, now=1_000_000) == pytest.approx(10)


def test_waits_what_the_server_asks_capped():
    slept = []
    policy = RetryPolicy(sleep=slept.append, max_retry_after_s=30)
    answers = iter([_answer(429, **{"Retry-After": "2"}), _answer(503, **{"Retry-After": "3600"}), _answer(200)])
    assert send_with_retry(lambda: next(answers), policy).status_code == 200
    assert slept == [2.0, 30.0]


def test_backs_off_exponentially_without_retry_after_and_returns_the_last_answer():
    slept = []
    policy = RetryPolicy(attempts=4, backoff_s=0.5, max_backoff_s=1.5, sleep=slept.append)
    assert send_with_retry(lambda: _answer(500), policy).status_code == 500
    assert slept == [0.5, 1.0, 1.5]


def test_final_answers_are_not_retried():
    calls = []
    policy = RetryPolicy(sleep=lambda s: pytest.fail("slept"))
    for status in (200, 201, 404, 409, 422):
        calls.append(send_with_retry(lambda s=status: _answer(s), policy).status_code)
    assert calls == [200, 201, 404, 409, 422]


def test_no_answer_is_retried_then_raised():
    slept, calls = [], []

    def send():
        calls.append(1)
        raise ClusterError("cannot reach API server")

    with pytest.raises(ClusterError):
        send_with_retry(send, RetryPolicy(attempts=3, sleep=slept.append))
    assert len(calls) == 3 and slept == [0.1, 0.2]
