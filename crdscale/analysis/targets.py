"""Names of the targets the analyses share, in a module that imports nothing.

A cause of :mod:`crdscale.analysis.attribution` names one share of the heap; :data:`TOTAL` names
the whole profile, in the same ``cause`` column. Per-CRD fits (:mod:`crdscale.analysis.percrd`),
per-object fits (:mod:`crdscale.analysis.perobject`) and footprint models
(:mod:`crdscale.footprint`) all spell it, so it lives here, where importing it costs
nothing: ``crdscale footprint`` predicts without pandas (importing it and pyarrow is ~0.4 CPU-s).
"""

from __future__ import annotations

# The whole heap profile, beside its causes in a ``cause`` column and among a footprint model's targets.
TOTAL = "total"
