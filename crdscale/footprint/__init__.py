"""What a CRD set adds to kube-apiserver's heap and RSS, predicted from its shape, without a server.

``crdscale footprint`` is a thin command over this package, and a notebook gets the same prediction::

    from crdscale.footprint import predict_footprint

    prediction = predict_footprint("crds/", kube_version="1.37.1", objects=10)
    prediction.rows["total"]          # {"value": ..., "low": ..., "high": ...}: bytes, 95 % interval
    print(prediction.to_text())       # the command's table; prediction.to_json() is its -o json

The modules, from the CRDs to the model's files:

* :mod:`~crdscale.footprint.features`: a CRD set's shape (CRDs, served versions, schema properties, bytes);
* :mod:`~crdscale.footprint.model`: the linear model per cause and for RSS, its intervals, costliest CRDs,
  budgets and upgrades;
* :mod:`~crdscale.footprint.states`: the states besides served (installed, watched, openapi-v2);
* :mod:`~crdscale.footprint.objects`: the per-object term (what each custom resource adds);
* :mod:`~crdscale.footprint.store`: the shipped and calibrated models and terms (``models/``), and which applies;
* :mod:`~crdscale.footprint.prediction`: :func:`predict_footprint` and its result;
* :mod:`~crdscale.footprint.activation`: what activating part of a set costs (Crossplane's activation
  patterns and policies, :func:`predict_activation`);
* fitting: :mod:`~crdscale.footprint.fit` (the model, pure), :mod:`~crdscale.footprint.calibrate` (from
  runs, and the sweep), :mod:`~crdscale.footprint.terms` (state terms and the per-object term from runs),
  behind ``crdscale footprint --calibrate`` and ``crdscale footprint fit``.
"""

from __future__ import annotations

from crdscale.footprint.activation import ActivationPrediction, predict_activation
from crdscale.footprint.prediction import (
    CrdSet,
    FootprintDifference,
    FootprintPrediction,
    ModelExplanation,
    ObjectSpec,
    explain_model,
    object_spec,
    parse_size,
    predict_footprint,
    predict_upgrade,
    read_crd_set,
)

__all__ = [
    "ActivationPrediction",
    "CrdSet",
    "FootprintDifference",
    "FootprintPrediction",
    "ModelExplanation",
    "ObjectSpec",
    "explain_model",
    "object_spec",
    "parse_size",
    "predict_activation",
    "predict_footprint",
    "predict_upgrade",
    "read_crd_set",
]
