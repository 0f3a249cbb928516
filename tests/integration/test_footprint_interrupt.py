"""Ctrl-C during ``crdscale footprint`` on 5 MiB of real CRDs (parsed by worker processes), 50 times at
random points: exit 130 with one line (or 0 when it finished first), no traceback, no hang, no process
left behind (issue 31 part 4). About 4 minutes on 2 cores; no cluster needed, but too slow for the unit suite."""

from __future__ import annotations

import time

import pytest

from crdscale.testing import footprint_interrupt

pytestmark = [
    # Left out of make test (-m long): about 6 minutes, most of it waiting, which CI's budget has no room for.
    pytest.mark.long,
    pytest.mark.slow,
    pytest.mark.skipif(not footprint_interrupt.REAL_CRDS.is_file(), reason="no ../shared/data terrajet set"),
]

TRIES = 50


def test_fifty_interrupts_at_random_points(tmp_path):
    crds = footprint_interrupt.extract_set(tmp_path)
    env = footprint_interrupt.environment(tmp_path)
    start = time.monotonic()
    whole = footprint_interrupt.interrupt_once(crds, 600, env)  # not interrupted: how long a whole run takes
    assert whole.code == 0, whole.stderr
    full_s = time.monotonic() - start
    tries = footprint_interrupt.interrupt_many(crds, TRIES, max_delay_s=0.9 * full_s, env=env)
    problems = [t.problem() for t in tries if t.problem()]
    assert not problems, problems
    interrupted = [t for t in tries if t.code == 130 and not t.before_python]
    assert len(interrupted) >= 0.7 * TRIES, [(t.delay_s, t.code) for t in tries]
    assert max(t.stop_s for t in interrupted) < footprint_interrupt.STOP_BOUND_S
