"""The stress criterion's kernels (docs/math.md §3 "Other criteria", §3.4; ``core.place.criteria.solve`` drives them).

σ(y) = Σ_i (‖y - x_i‖ - δ_i)², optionally weighted (Sammon's criterion): the objective, the descent
(Guttman-transform majorisation, then a damped Newton polish) and the further starts on a ring around the
landmarks' centroid. Units: y and X in distance units, σ in squared distance units.
"""

from __future__ import annotations

import numpy as np

from ... import runtime
from .newton import NEWTON_ITER, _chunks, _damped_newton, _diff, _length, _split, _sq, _wouter, _wsum

#: Majorisation sweeps before the Newton polish (stress).
MAJORIZATION_ITER = 60


def stress_objective(Y: np.ndarray, X: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """σ(y) per object: Y (m, d), X (n, d), delta (m, n) -> (m,).

    ``delta`` (m, n, 2) holds (δ_i, w_i) pairs instead: the weighted σ_w(y) = Σ_i w_i (‖y - x_i‖ - δ_i)²
    (Sammon's criterion for w_i = 1/δ_i, ``solve_stress``).
    """
    delta, w = _split(delta)
    out = np.empty(Y.shape[0])
    for s in _chunks(Y.shape[0], X.shape):
        r = np.sqrt(_sq(_diff(Y[s], X)))
        sq = np.square(r - delta[s])
        out[s] = (sq if w is None else sq * w[s]).sum(axis=1)
    return out


#: Radius of the ring starts where an object's distances put it at the centre, in map radii.
RING_MIN_RADIUS = 0.5


#: Directions of the dense ring (d = 2: evenly spaced; d ≥ 3: fixed, seeded), each at radii ρ and ρ/2.
DENSE_DIRECTIONS = 16


def ring_starts(X: np.ndarray, delta: np.ndarray, dense: bool = False,
                rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Further stress starts on a ring of radius ρ around the landmarks' centroid x̄ (docs/math.md §3.4).

    ρ² = mean_i δ_i² - mean_i ‖x_i - x̄‖² is the squared distance from the centroid that the
    object's dissimilarities imply (exact for a Euclidean object in the map's space; β for a
    classical map), at least ``RING_MIN_RADIUS`` map radii. The ring: x̄ ± ρ v_j along the map's
    d principal axes (2d starts); dense: ``DENSE_DIRECTIONS`` directions at ρ and ρ/2.

    Args:
        X: (n, d) landmark map; delta: (k, n) the objects' dissimilarities.
        rows: the objects' row numbers (default 0..k-1), returned as owners.
    Returns: (owner rows (q,), starts (q, d)).
    """
    k, d = delta.shape[0], X.shape[1]
    centre = X.mean(axis=0)
    Xc = X - centre
    rho2 = np.square(delta).mean(axis=1) - np.square(Xc).sum(axis=1).mean()
    rho = np.maximum(np.sqrt(np.maximum(rho2, 0.0)), RING_MIN_RADIUS * _length(X))
    if not dense:
        _, _, Vt = np.linalg.svd(Xc, full_matrices=False)  # rows: principal axes
        U, radii = np.concatenate([Vt, -Vt]), np.ones(1)
    elif d == 2:
        th = 2.0 * np.pi * (np.arange(DENSE_DIRECTIONS) + 0.5) / DENSE_DIRECTIONS  # between the axes
        U, radii = np.column_stack([np.cos(th), np.sin(th)]), np.array([1.0, 0.5])
    else:
        U = np.random.default_rng(0).normal(size=(DENSE_DIRECTIONS, d))
        U, radii = U / np.linalg.norm(U, axis=1, keepdims=True), np.array([1.0, 0.5])
    S = centre + (rho[:, None, None, None] * radii[None, :, None, None]) * U[None, None]  # (k, radii, dirs, d)
    owners = np.arange(k) if rows is None else np.asarray(rows)
    return np.repeat(owners, radii.size * U.shape[0]), S.reshape(-1, d)


def _stress_chunk(Y0: np.ndarray, X: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    delta, wt = _split(data)
    n = X.shape[0]
    xbar = X.mean(axis=0)
    if wt is not None:
        wsum = wt.sum(axis=1)  # Σ w_i, (k,)
        wx = wt @ X  # Σ w_i x_i, (k, d)
        wdelta = wt * delta
    settle = 1e-4 * _length(X)
    Y = Y0.copy()
    active = np.arange(Y.shape[0])
    for _ in range(MAJORIZATION_ITER):  # Guttman transforms until the steps are small
        if runtime.spent():
            break
        if active.size == 0:
            break
        D = _diff(Y[active], X)
        r = np.sqrt(_sq(D))
        with np.errstate(divide="ignore", invalid="ignore"):
            if wt is None:
                w = np.where(r > 0, delta[active] / r, 0.0)
                new = xbar + _wsum(w, D) / n
            else:  # weighted Guttman transform: (Σ w_i x_i + Σ w_i δ_i (y - x_i)/r_i) / Σ w_i
                w = np.where(r > 0, wdelta[active] / r, 0.0)
                new = (wx[active] + _wsum(w, D)) / wsum[active, None]
        moved = np.sqrt(np.square(new - Y[active]).sum(axis=1))
        Y[active] = new
        active = active[moved > settle]

    sumX = X.sum(axis=0)
    eye = np.eye(X.shape[1])

    def fun(Yr: np.ndarray, rows: np.ndarray) -> np.ndarray:
        sq = np.square(np.sqrt(_sq(_diff(Yr, X))) - delta[rows])
        return (sq if wt is None else sq * wt[rows]).sum(axis=1)

    def derivs(Yr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        D = _diff(Yr, X)
        r = np.sqrt(_sq(D))
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(r > 0, (delta[rows] if wt is None else wdelta[rows]) / r, 0.0)
            w3 = np.where(r > 0, w / np.square(r), 0.0)
        if wt is None:
            g = 2.0 * (n * Yr - sumX - _wsum(w, D))
            H = 2.0 * ((n - w.sum(axis=1))[:, None, None] * eye + _wouter(w3, D))
        else:
            g = 2.0 * (wsum[rows, None] * Yr - wx[rows] - _wsum(w, D))
            H = 2.0 * ((wsum[rows] - w.sum(axis=1))[:, None, None] * eye + _wouter(w3, D))
        return g, H

    return _damped_newton(Y, fun, derivs, NEWTON_ITER, _length(X))
