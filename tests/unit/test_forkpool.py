"""crdscale.crds.forkpool: results in order, the first error in order, workers gone however the loop ends,
and Ctrl-C on a real footprint (a few tries here; 50 in tests/integration/test_footprint_interrupt.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from crdscale.crds import forkpool
from crdscale.errors import CRDError
from crdscale.testing import footprint_interrupt

pytestmark = pytest.mark.skipif(not forkpool.can_fork(), reason="needs fork")


def _square(x: int, offset: int) -> int:
    time.sleep(0.01 * (x % 3))  # finish out of order
    return x * x + offset


def _fail_on(x: int, bad: tuple) -> int:
    if x in bad:
        raise CRDError(f"item {x} is bad")
    return x


def _pid(_x: int) -> int:
    return os.getpid()


def _children() -> set[int]:
    me = str(os.getpid())
    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me and fields[0] != "Z":
                out.add(int(entry))
    return out


def test_results_come_in_order():
    assert list(forkpool.ordered_map(_square, list(range(20)), (1,), workers=3)) == [x * x + 1 for x in range(20)]


def test_work_is_done_in_other_processes():
    assert os.getpid() not in set(forkpool.ordered_map(_pid, list(range(4)), workers=2))


def test_the_first_error_in_order_is_raised_and_the_workers_are_gone():
    before = _children()
    with pytest.raises(CRDError, match="item 3 is bad"):
        list(forkpool.ordered_map(_fail_on, list(range(12)), ((3, 7),), workers=3))
    assert _children() <= before


def test_stopping_early_stops_the_workers():
    before = _children()
    results = forkpool.ordered_map(_square, list(range(50)), (0,), workers=2)
    assert next(results) == 0
    results.close()
    assert _children() <= before


@pytest.mark.skipif(not footprint_interrupt.REAL_CRDS.is_file(), reason="no ../shared/data terrajet set")
def test_ctrl_c_during_footprint_is_one_line_and_leaves_nothing(tmp_path):
    # Three tries at random points (a few seconds each); the 50-try version is an integration test.
    crds = footprint_interrupt.extract_set(tmp_path)
    env = footprint_interrupt.environment(tmp_path)
    tries = footprint_interrupt.interrupt_many(crds, 3, max_delay_s=2.5, env=env)
    problems = [t.problem() for t in tries if t.problem()]
    assert not problems, problems
    assert sum(t.code == 130 for t in tries) >= 1
