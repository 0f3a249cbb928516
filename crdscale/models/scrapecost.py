"""What kube-apiserver spends answering crdscale's ``/metrics`` scrapes.

The collector uses it to choose a scrape cadence the server can afford
(:mod:`crdscale.collect.sources`); :func:`crdscale.analysis.harness.harness_cost` uses it to say
afterwards what measuring cost. One number, one owner, below both.
"""

from __future__ import annotations

# kube-apiserver CPU seconds per second of a /metrics scrape's wall time (Prometheus'
# scrape_duration_seconds): the handler gathers and encodes on one core, and the garbage it leaves
# is collected on the others. Measured at 300 CRDs, name[] and Prometheus' Accept header
# (benchmarks/overhead.py prints both): 0.98 on a quiet machine, 1.15-1.3 with the other core busy.
# The high end, so that the estimate errs towards the scrapes costing more.
SCRAPE_CPU_PER_SECOND = 1.3


def scrape_cost(server_cpu_s: float, scrape_wall_s: float) -> tuple[float, float]:
    """What kube-apiserver's /metrics scrapes cost it, from their summed wall time, and the CPU
    it spent on its own work besides, out of ``server_cpu_s`` over the same span: (cost, own).
    The cost is an upper bound on a busy machine, where a scrape also waits for a CPU."""
    cost = SCRAPE_CPU_PER_SECOND * scrape_wall_s
    return cost, server_cpu_s - cost
