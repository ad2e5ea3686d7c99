"""The squared-distance L1 criterion's kernels (docs/math.md §3 "Other criteria"; ``core.place.criteria.solve`` drives them).

ℓ(y) = Σ_i |δ_i² - ‖y - x_i‖²|: the objective, the descent (damped Newton on the smooth surrogate
Σ_i √(e_i² + ε²) with continuation in ε) and the exact snap onto a vertex or a piece centre.
Units: y and X in distance units, ℓ in squared distance units.
"""

from __future__ import annotations

import numpy as np

from ... import runtime
from .newton import NEWTON_ITER, _chunks, _damped_newton, _diff, _length, _sq, _wouter, _wsum

#: Final smoothing of the L1 surrogate, relative to the row's squared-distance scale.
L1_EPS_FINAL = 1e-12


#: Factor between successive smoothing levels.
L1_EPS_FACTOR = 0.1


#: Most smoothing levels of one continuation (from the start's median residual down to L1_EPS_FINAL: ~15 suffice).
L1_MAX_STAGES = 40


#: First smoothing level of a descent from an escape start: small, so that the
#: descent stays in the basin the start was chosen in (a large ε pulls towards
#: the minimum of the smoothed criterion, possibly the point just left).
L1_EPS_LOCAL = 1e-6


#: |e_i| below this share of δ_i² + ‖y - x_i‖² marks a residual the L1 snap sets exactly to zero.
SNAP_RTOL = 1e-6


#: Newton iterations of the L1 vertex snap (it starts within ~1e-12 of the vertex).
SNAP_ITER = 3


def l1_objective(Y: np.ndarray, X: np.ndarray, delta2: np.ndarray) -> np.ndarray:
    """ℓ(y) per object: Y (m, d), X (n, d), delta2 (m, n) squared dissimilarities -> (m,)."""
    out = np.empty(Y.shape[0])
    for s in _chunks(Y.shape[0], X.shape):
        out[s] = np.abs(delta2[s] - _sq(_diff(Y[s], X))).sum(axis=1)
    return out


def _l1_chunk(Y0: np.ndarray, X: np.ndarray, delta2: np.ndarray, local: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Continuation from Y0 (k, d): smoothing from the median residual (or ``L1_EPS_LOCAL`` when ``local``) down."""
    eye = np.eye(X.shape[1])
    length = _length(X)
    scale = np.maximum(np.abs(delta2).mean(axis=1) + np.square(X).sum(axis=1).mean(), 1e-300)
    e0 = np.abs(_sq(_diff(Y0, X)) - delta2)
    eps_final = L1_EPS_FINAL * scale
    eps = L1_EPS_LOCAL * scale if local else np.maximum(np.median(e0, axis=1), 1e-3 * scale)
    Y = Y0.copy()
    conv = np.ones(Y.shape[0], dtype=bool)
    todo = np.arange(Y.shape[0])
    for _stage in range(L1_MAX_STAGES):  # each row runs its own sequence of smoothing levels
        if todo.size == 0 or runtime.spent():
            break
        d2, e2 = delta2[todo], np.square(eps[todo])

        def fun(Yr: np.ndarray, rows: np.ndarray, d2: np.ndarray = d2, e2: np.ndarray = e2) -> np.ndarray:
            e = _sq(_diff(Yr, X)) - d2[rows]
            return np.sqrt(np.square(e) + e2[rows, None]).sum(axis=1)

        def derivs(Yr: np.ndarray, rows: np.ndarray, d2: np.ndarray = d2,
                   e2: np.ndarray = e2) -> tuple[np.ndarray, np.ndarray]:
            D = _diff(Yr, X)
            e = _sq(D) - d2[rows]
            rho = np.sqrt(np.square(e) + e2[rows, None])
            g = 2.0 * _wsum(e / rho, D)
            H = _wouter(4.0 * e2[rows, None] / rho**3, D) + (2.0 * (e / rho).sum(axis=1))[:, None, None] * eye
            return g, H

        Y[todo], conv[todo] = _damped_newton(Y[todo], fun, derivs, NEWTON_ITER, length)
        todo = todo[eps[todo] > eps_final[todo]]
        eps[todo] = np.maximum(eps[todo] * L1_EPS_FACTOR, eps_final[todo])
    conv[todo] = False  # out of stages or of time before the last smoothing level
    return Y, conv


def _l1_snap(Y: np.ndarray, X: np.ndarray, delta2: np.ndarray) -> np.ndarray:
    """Snap near-exact L1 placements (m, d) onto their vertex or piece centre; keep a snap only if ℓ does not rise."""
    m, d = Y.shape
    D = _diff(Y, X)
    sq = _sq(D)
    e = sq - delta2
    near = np.abs(e) <= SNAP_RTOL * (delta2 + sq) + 1e-300
    a = near.sum(axis=1)
    new = Y.copy()
    vertex = np.flatnonzero(a == d)
    if vertex.size:
        idx = np.argsort(~near[vertex], axis=1, kind="stable")[:, :d]
        XZ, d2Z = X[idx], np.take_along_axis(delta2[vertex], idx, axis=1)  # (k, d, d), (k, d)
        Yv = Y[vertex].copy()
        for _ in range(SNAP_ITER):  # Newton on ‖y - x_i‖² = δ_i², i ∈ Z
            Dz = Yv[:, None, :] - XZ
            J = 2.0 * Dz
            ok = np.abs(np.linalg.det(J)) > 1e-300
            step = np.zeros_like(Yv)
            step[ok] = np.linalg.solve(J[ok], (np.einsum("kid,kid->ki", Dz, Dz) - d2Z)[ok][:, :, None])[:, :, 0]
            Yv -= step
        new[vertex] = Yv
    interior = np.flatnonzero(a == 0)
    if interior.size:
        s = np.sign(e[interior])
        K = s.sum(axis=1)
        pos = K > 0
        new[interior[pos]] = (s[pos] @ X) / K[pos, None]  # centre W / K of the piece K‖y‖² - 2Wᵀy + C
    changed = np.flatnonzero(np.isfinite(new).all(axis=1) & (new != Y).any(axis=1))
    if changed.size:
        f_old = l1_objective(Y[changed], X, delta2[changed])
        f_new = l1_objective(new[changed], X, delta2[changed])
        ok = f_new <= f_old * (1 + 1e-12)
        Y = Y.copy()
        Y[changed[ok]] = new[changed[ok]]
    return Y
