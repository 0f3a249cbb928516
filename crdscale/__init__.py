"""crdscale: profile the Kubernetes API server as CustomResourceDefinitions pile up.

The package is laid out in the order an experiment flows:
``cluster`` (binaries, local control plane, clients) -> ``crds`` (generate, load,
install) -> ``collect`` (pprof, Prometheus, probes) -> ``analysis`` (pure pandas)
-> ``report`` (plots, notebooks), with a thin ``cli`` on top.
"""

import logging

__version__ = "0.1.0"

# Library code logs under "crdscale" (logging.getLogger(__name__)); the CLI attaches the handler that
# prints it. Without one, notebooks and library users see nothing, not Python's last-resort stderr.
logging.getLogger(__name__).addHandler(logging.NullHandler())
