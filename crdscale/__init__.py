"""crdscale: profile the Kubernetes API server as CustomResourceDefinitions pile up.

The package is laid out in the order an experiment flows:
``cluster`` (binaries, local control plane, clients) -> ``crds`` (generate, load,
install) -> ``collect`` (pprof, Prometheus, probes) -> ``analysis`` (pure pandas)
-> ``report`` (plots, notebooks), with a thin ``cli`` on top.
"""

__version__ = "0.1.0"
