"""Least squares: the one helper crdscale's linear fits go through (bytes per property, the footprint
model and its terms, the per-object term). Pure numpy, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class LeastSquares:
    """``y ~ x @ coef``: the coefficients, their covariance ``cov`` (``sigma2`` times ``normal_inverse``),
    ``sigma2`` (the weighted residuals' variance on ``dof = rows - columns`` degrees of freedom),
    ``normal_inverse`` (``(x' W x)^-1``: the covariance when the weights are known inverse variances) and
    the unweighted ``residuals``. ``cov`` and ``sigma2`` are NaN without a degree of freedom or when the
    columns cannot be told apart; ``normal_inverse`` is NaN only in the second case."""

    coef: np.ndarray
    cov: np.ndarray
    sigma2: float
    dof: int
    normal_inverse: np.ndarray
    residuals: np.ndarray = field(repr=False)


def least_squares(
    x: np.ndarray | Sequence[Sequence[float]], y: np.ndarray | Sequence[float], weights: Sequence[float] | None = None
) -> LeastSquares:
    """Least squares of ``y`` on the columns of ``x`` (no intercept unless ``x`` has a column of ones),
    each row weighted by ``weights`` (default 1: ordinary least squares).

    The columns are scaled to unit norm first: a feature ~10^4 times another (properties squared and
    properties) would otherwise lose the small coefficients' covariance to rounding in ``(x'x)^-1``.
    """
    x = np.asarray(x, dtype=float)
    x = x[:, None] if x.ndim == 1 else x
    y = np.asarray(y, dtype=float)
    xw, yw = x, y
    if weights is not None:
        root = np.sqrt(np.asarray(weights, dtype=float))
        xw, yw = x * root[:, None], y * root
    norms = np.linalg.norm(xw, axis=0)
    norms[norms == 0] = 1.0
    z = xw / norms
    coef, *_ = np.linalg.lstsq(z, yw, rcond=None)
    columns = x.shape[1]
    dof = len(y) - columns
    nan = np.full((columns, columns), math.nan)
    full_rank = np.linalg.matrix_rank(z) == columns
    inverse = np.linalg.inv(z.T @ z) if full_rank else None
    if dof > 0 and full_rank:
        sigma2 = float(((yw - z @ coef) ** 2).sum()) / dof
        cov = sigma2 * inverse / np.outer(norms, norms)
    else:
        sigma2, cov = math.nan, nan
    coef = coef / norms
    return LeastSquares(
        coef=coef,
        cov=cov,
        sigma2=sigma2,
        dof=dof,
        normal_inverse=inverse / np.outer(norms, norms) if full_rank else nan,
        residuals=y - x @ coef,
    )
