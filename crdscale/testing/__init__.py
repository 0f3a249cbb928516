"""Harnesses shared by crdscale's test suite and its benchmarks; the library itself never imports them.

``kubeconfig_parity``: the kubeconfig/auth cases, run against crdscale's loader by
tests/unit/test_kubeconfig_parity.py and against ``kubernetes.config`` by
benchmarks/kubernetes_parity.py.
"""
