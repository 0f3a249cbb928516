"""The settle's wait for kube-apiserver's CRD work queues (crdscale.collect.workqueues), on recorded /metrics."""

from pathlib import Path

import pytest

from crdscale.collect.workqueues import CRD_QUEUES, busy, queue_states, wait_drained
from crdscale.errors import ClusterError

DATA = Path(__file__).parent.parent / "data" / "metrics"
# Recorded from a local v1.24.0 kube-apiserver 1 s and 6 s after `kubectl apply` of 30 generated CRDs.
BUSY = (DATA / "workqueues-v1.24.0-busy.txt").read_text()
IDLE = (DATA / "workqueues-v1.24.0-idle.txt").read_text()
V137 = (DATA / "kube-apiserver-v1.37.1.txt").read_text()


def test_busy_v124_scrape_names_the_openapi_merge_in_flight():
    states = queue_states(BUSY)
    assert "open_api_aggregation_controller" in states  # the whole-spec merge of v1.24.0
    b = busy(states)
    assert b["crd_openapi_controller"].depth == 3
    assert b["open_api_aggregation_controller"].unfinished_s > 0


def test_idle_v124_and_settled_v137_scrapes_have_no_busy_queue():
    assert busy(queue_states(IDLE)) == {}
    states = queue_states(V137)
    assert {"crd_openapi_v3_controller", "discovery-manager", "open_api_v3_aggregation_controller"} <= set(states)
    assert busy(states) == {}


def test_only_crd_queues_are_watched():
    states = queue_states(BUSY)
    assert set(states) <= set(CRD_QUEUES)
    assert "DynamicServingCertificateController" not in states


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


def test_wait_ends_after_two_idle_scrapes_in_a_row():
    clock, bodies = FakeClock(), iter([BUSY, IDLE, BUSY, IDLE, IDLE, BUSY])
    result = wait_drained(lambda: next(bodies), timeout_s=60, poll_s=2, clock=clock, sleep=clock.sleep)
    assert result.drained and result.scrapes == 5 and result.waited_s == 8
    assert "open_api_aggregation_controller" in result.queues
    assert "drained after 8.0 s" in result.describe()


def test_wait_times_out_and_names_the_busy_queues():
    clock = FakeClock()
    result = wait_drained(lambda: BUSY, timeout_s=10, poll_s=2, clock=clock, sleep=clock.sleep)
    assert not result.drained and result.waited_s <= 10
    assert result.busy["crd_openapi_controller"]["depth"] == 3
    assert "timeout" in result.describe() and "crd_openapi_controller" in result.describe()


def test_a_slow_scrape_spaces_the_next_one():
    clock, pauses = FakeClock(), []

    def scrape():
        clock.now += 15  # a 43 MB /metrics of v1.24.0 at provider scale
        return IDLE

    def sleep(s):
        pauses.append(s)
        clock.sleep(s)

    result = wait_drained(scrape, timeout_s=600, poll_s=2, clock=clock, sleep=sleep)
    assert result.drained and pauses == [15] and result.waited_s == 45


def test_unreadable_metrics_end_the_wait_after_three_failures_in_a_row():
    calls = []

    def fail():
        calls.append(1)
        raise ClusterError("403 Forbidden")

    clock = FakeClock()
    result = wait_drained(fail, timeout_s=60, poll_s=2, clock=clock, sleep=clock.sleep)
    assert not result.drained and result.scrapes == 0 and "403" in result.error and len(calls) == 3


def test_a_slow_scrape_is_retried():
    bodies = iter([ClusterError("read timed out"), BUSY, ClusterError("read timed out"), IDLE, IDLE])

    def scrape():
        body = next(bodies)
        if isinstance(body, Exception):
            raise body
        return body

    clock = FakeClock()
    result = wait_drained(scrape, timeout_s=60, poll_s=2, clock=clock, sleep=clock.sleep)
    assert result.drained and result.scrapes == 3 and result.error is None


def test_a_body_without_work_queues_is_not_taken_for_drained():
    result = wait_drained(lambda: "go_goroutines 12\n", timeout_s=60, sleep=pytest.fail)
    assert not result.drained and "no CRD work queue" in result.error
