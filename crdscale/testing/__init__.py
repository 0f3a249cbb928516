"""Harnesses shared by crdscale's test suite and its benchmarks; the library itself never imports them.

``kubeconfig_parity``: the kubeconfig/auth cases, run against crdscale's loader by
tests/unit/test_kubeconfig_parity.py and against ``kubernetes.config`` by
benchmarks/kubernetes_parity.py.

``damage``: damaged copies of the reference runs, which tests/unit/test_damaged_runs.py runs through the CLI.

``footprint_interrupt``: SIGINT ``crdscale footprint`` at random points, a few times in
tests/unit/test_forkpool.py and 50 times in tests/integration/test_footprint_interrupt.py.
"""
