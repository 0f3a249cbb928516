"""The states besides served: what a CRD set costs when nothing watches it, when only
kube-controller-manager does, and once a client fetched /openapi/v2.

The models are fitted on the served state; :class:`StateTerms` (measured per kube-apiserver version,
``states-v<version>.json`` in :mod:`crdscale.footprint.store`) turn a served prediction into the
others (:func:`predict_state`). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from crdscale.analysis.lstsq import least_squares
from crdscale.analysis.targets import TOTAL
from crdscale.footprint.model import (
    RSS,
    RSS_PEAK,
    FootprintModel,
    LinearModel,
    _ordered,
    lognormal_interval,
    predict,
)

if TYPE_CHECKING:
    import pandas as pd

SERVED = "served"
STATES = ("installed", "watched", SERVED, "openapi-v2")
STATE_DEFINITIONS = {
    "installed": (
        "the CRDs are Established and nothing watches them: no kube-controller-manager (envtest, a bare "
        "kube-apiserver); OpenAPI, the CRD objects and their JSONSchemaProps, no storage per resource"
    ),
    "watched": (
        "installed, and kube-controller-manager's garbage collector and quota controller watch every CRD "
        "(every real cluster, before any provider runs): each resource gets its storage, etcd client and "
        "handler; at most served"
    ),
    SERVED: (
        "installed, and a provider's informers LIST and watch every served version: what the model is fitted on "
        "(sweep runs without kube-controller-manager, whose watches add no storage a provider's did not)"
    ),
    "openapi-v2": (
        "served, and a client (kubectl apply/explain, Helm, client-go's OpenAPISchema) fetched /openapi/v2: "
        "the server keeps the spec it built until a CRD changes and the next client asks again"
    ),
}
OPENAPI_V2_CAUSE = "openapi-v2-spec"  # the prediction's row for what the v2 fetch holds
WATCH_CAUSE = "controller-manager-watch"  # the watched state's row for what kube-controller-manager's watches add


@dataclass
class StateTerms:
    """How the states other than served follow from a served prediction, measured per kube-apiserver version.

    ``installed_shares``: per cause, the share of its served cost already there once installed (causes not
    named: 0, they come with serving); ``watch_per_crd``: ``(value, low, high)`` bytes per CRD that
    kube-controller-manager's watches add to an installed set; ``openapi_v2``: a :class:`LinearModel`
    over ``openapi_v2_features`` (per CRD features) for what a fetched /openapi/v2 spec holds;
    ``provenance``: which runs gave each term (``uses``: term -> lines)."""

    kube_version: str
    installed_shares: dict[str, float]
    watch_per_crd: tuple[float, float, float]
    openapi_v2_features: list[str]
    openapi_v2: LinearModel
    provenance: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        m = self.openapi_v2
        return {
            "format": 1,
            "kube_version": self.kube_version,
            "definitions": STATE_DEFINITIONS,
            "installed_shares": self.installed_shares,
            "watch_per_crd": list(self.watch_per_crd),
            "openapi_v2": {
                "features": self.openapi_v2_features,
                "coef": m.coef,
                "cov": m.cov,
                "sigma2": None if math.isnan(m.sigma2) else m.sigma2,
                "dof": m.dof,
            },
            "provenance": self.provenance,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StateTerms:
        v2 = data["openapi_v2"]
        return cls(
            str(data["kube_version"]),
            {k: float(v) for k, v in data["installed_shares"].items()},
            tuple(float(v) for v in data["watch_per_crd"]),
            list(v2["features"]),
            LinearModel(
                [float(c) for c in v2["coef"]],
                [[float(v) for v in row] for row in v2["cov"]],
                math.nan if v2.get("sigma2") is None else float(v2["sigma2"]),
                int(v2["dof"]),
            ),
            dict(data.get("provenance") or {}),
        )


def fit_openapi_v2_term(
    observations: Sequence[tuple[Mapping[str, float], float, float]], features: Sequence[str], dof: int
) -> LinearModel:
    """What a fetched v2 spec holds per CRD, linear in ``features`` (per CRD: e.g. served versions and
    properties), from runs' ``(features per CRD, bytes per CRD, its standard error)``: solved exactly
    when there are as many runs as features (two schema sizes for two features), by weighted least
    squares otherwise; the coefficients' covariance from the runs' standard errors, ``dof`` the fewest
    degrees of freedom of the runs' estimates. No run scatter beyond those errors (``sigma2`` 0)."""
    x = np.array([[float(f[n]) for n in features] for f, _, _ in observations], dtype=float)
    y = np.array([v for _, v, _ in observations], dtype=float)
    se = np.array([s for _, _, s in observations], dtype=float)
    if np.linalg.matrix_rank(x) < len(features):
        raise ValueError(f"features {list(features)} cannot be told apart on these {len(y)} runs")
    fit = least_squares(x, y, weights=1.0 / se**2)
    coef, cov = fit.coef, fit.normal_inverse
    return LinearModel([float(c) for c in coef], [[float(v) for v in row] for row in cov], 0.0, int(dof))


def _scaled(row: pd.Series, factor: float) -> tuple[float, float, float]:
    return tuple(float(row[k]) * factor for k in ("value", "low", "high"))


def predict_state(
    model: FootprintModel,
    terms: StateTerms | None,
    features: Mapping[str, float],
    state: str = SERVED,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """:func:`predict` for one of :data:`STATES` (:data:`STATE_DEFINITIONS`), from the served
    prediction and the version's :class:`StateTerms`:

    * installed: each cause times its installed share; total and RSS scaled by installed/served total;
    * watched: installed plus kube-controller-manager's per-CRD term (its own row), at most served;
    * openapi-v2: served plus the fetched spec's term (its own row, lognormal interval);

    total and RSS bounds: the served prediction's, scaled by the state's total over the served total,
    plus the added term's bounds (bounds added: wider than a joint interval). ValueError for an unknown
    state, or a state other than served without ``terms``."""
    import pandas as pd  # lazy: a prediction needs no DataFrame (pandas and pyarrow, ~0.4 CPU-s)

    if state not in STATES:
        raise ValueError(f"unknown state {state!r}; one of {', '.join(STATES)}")
    served = predict(model, features, confidence)
    if state == SERVED:
        return served
    if terms is None:
        raise ValueError(f"no state terms for kube-apiserver v{model.kube_version}: only 'served' can be predicted")
    rows = served.set_index("target")
    causes = [t for t in rows.index if t not in (TOTAL, RSS, RSS_PEAK)]
    total = rows.loc[TOTAL]
    served_total = float(total["value"])
    out = {}
    if state in ("installed", "watched"):
        shares = {c: min(max(terms.installed_shares.get(c, 0.0), 0.0), 1.0) for c in causes}
        for c in causes:
            out[c] = _scaled(rows.loc[c], shares[c])
        installed = sum(out[c][0] for c in causes)
        ratio = installed / served_total if served_total > 0 else 0.0
        added = (0.0, 0.0, 0.0)
        if state == "watched":
            n = float(features["crds"])
            room = max(served_total - installed, 0.0)
            added = tuple(min(v * n, room) if not math.isnan(v) else math.nan for v in terms.watch_per_crd)
            out[WATCH_CAUSE] = added
    else:
        x = [float(features[f]) for f in terms.openapi_v2_features]
        mean, var = terms.openapi_v2.moments(x, 0.0)
        added = lognormal_interval(mean, var, terms.openapi_v2.quantile(confidence))
        out = {c: _scaled(rows.loc[c], 1.0) for c in causes}
        out[OPENAPI_V2_CAUSE] = added
        ratio = 1.0
    state_total = served_total * ratio + added[0]
    total_row = (state_total, float(total["low"]) * ratio + added[1], float(total["high"]) * ratio + added[2])
    out[TOTAL] = total_row
    # RSS in these states was not fitted: it moves with the heap, by the state's total over the served total.
    factor = state_total / served_total if served_total > 0 else math.nan
    for target in (RSS, RSS_PEAK):
        if target in rows.index:
            out[target] = _scaled(rows.loc[target], factor)
    table = pd.DataFrame([(t, *v) for t, v in out.items()], columns=["target", "value", "low", "high"])
    return _ordered(table)
