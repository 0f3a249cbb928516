"""What a CRD costs each process of the control plane, in the table ``crdscale compare`` writes into
``findings.md``. The numbers are :mod:`crdscale.analysis.components`' (which also says them in
``crdscale analyze``'s text)."""

from __future__ import annotations

import pandas as pd

from crdscale.units import fmt_interval, fmt_per_crd, is_missing

COMPONENTS_NOTE = (
    "Each component's heap in use is fitted from its own heap profiles, taken at the same marks as "
    "kube-apiserver's, as kube-apiserver's total is (growth over the step increments, heap sampling as the "
    "floor); RSS from the same marks of its /proc samples (else its /metrics)."
)


def compare_table(differences: pd.DataFrame, reference: str) -> pd.DataFrame:
    """The per-component differences (:func:`crdscale.analysis.components.compare`) for reading: one row per
    run, component and metric, bytes per CRD of the reference and the run, the difference and its interval."""
    if differences is None or not len(differences):
        return pd.DataFrame()
    what = {"bytes": "heap", "rss_bytes": "RSS"}
    return pd.DataFrame(
        {
            "run": differences["run"].to_numpy(),
            "component": differences["component"].to_numpy(),
            "metric": differences["metric"].map(lambda m: what.get(m, m)).to_numpy(),
            f"{reference} (reference) per CRD": [fmt_per_crd(v, "bytes") for v in differences["per_crd_reference"]],
            "run per CRD": [fmt_per_crd(v, "bytes") for v in differences["per_crd"]],
            "difference": [fmt_per_crd(v, "bytes") for v in differences["difference"]],
            "95% CI": [
                fmt_interval(lo, hi, "bytes")
                for lo, hi in zip(differences["difference_low"], differences["difference_high"])
            ],
            "relative (%)": ["" if is_missing(v) else f"{100 * v:+.1f}" for v in differences["relative"]],
        }
    )
