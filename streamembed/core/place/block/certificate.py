"""A bound on how far a block RR configuration is from the global minimum (docs/math.md §3).

With R = Y Yᵀ - β, the block objective is F(Y) = 2‖Y Λ^{1/2} - C‖²_F + f0 + ‖R‖²_F.
For any symmetric k×k matrix T, ‖R‖² ≥ 2⟨T, R⟩ - ‖T‖² (equality at T = R), so

    F(Y) ≥ L_T(Y) = 2‖Y Λ^{1/2} - C‖² + f0 + 2⟨T, Y Yᵀ - β⟩ - ‖T‖²     for every Y,

and L_T is a convex quadratic in Y whenever T + λ_d I ⪰ 0 (its Hessian is
4 (Λ ⊕ T)), with strong convexity 4 (λ_d + λ_min(T)). Take T = R* + εI at a
computed point Y*, with m = λ_d + λ_min(R*) and any ε > -m. Then
L_T(Y*) = F(Y*) - k ε² and ∇L_T(Y*) = ∇F(Y*) + 4 ε Y*, so

    F(Y*) - min F ≤ F(Y*) - min L_T ≤ k ε² + ‖∇F(Y*) + 4 ε Y*‖² / (8 (m + ε)).

The bound is minimised over ε on a geometric grid. When m > 0 (the block's
analogue of the single-object condition t* ≥ -λ_d) and the gradient is at
round-off, it is round-off small: Y* is certified globally optimal. When
m < 0 the bound is at least k m², usually far above the objective's
precision: the computed point may well be the global minimiser (the
relaxation behind the bound, Lagrangian duality, is then not tight) but it
cannot be proven. For one object this is the classical argument that the
stationary point with t ≥ -λ_d is the global minimiser.
"""

from __future__ import annotations

import numpy as np

_cholesky_lo: np.ufunc | None
try:  # numpy's stacked Cholesky, which marks a failed matrix with NaN instead of raising for the stack
    from numpy.linalg import _umath_linalg

    _cholesky_lo = _umath_linalg.cholesky_lo
except (ImportError, AttributeError):  # pragma: no cover - a numpy without it: decide with eigenvalues instead
    _cholesky_lo = None

_EPS = np.finfo(np.float64).eps
#: A margin of at least this share of λ_d is accepted from a Cholesky test alone
#: (4× cheaper than eigenvalues at k = 64); below it the smallest eigenvalue is computed.
CHOLESKY_SHARE = 0.5
#: ε is searched at m_ref · 2^j for j in GRID_LO, GRID_LO + 2, … < GRID_HI, m_ref = max(λ_d, |m|).
GRID_LO, GRID_HI = -80, 12
_GRID = 2.0 ** np.arange(GRID_LO, GRID_HI, 2)


def optimality_gap(
    Y: np.ndarray, grad: np.ndarray, Beta: np.ndarray, lam_min: float, grad_scale: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Upper bounds on F(Y) - min F for a stack of blocks.

    Args:
        Y: (s, k, d) configurations.
        grad: (s, k, d) ∇F at Y.
        Beta: (s, k, k) centred mutual similarities.
        lam_min: λ_d, the smallest kept eigenvalue.
        grad_scale: (s,) size of the terms summed in ∇F; ‖∇F‖ is inflated by
            a few ulps of it to cover the gradient's own round-off.

    Returns:
        gap: (s,) the bound (squared-dissimilarity² units, ≥ 0, finite).
        margin: (s,) a lower bound on m = λ_d + λ_min(Y Yᵀ - β) (the exact value,
            or CHOLESKY_SHARE · λ_d when a Cholesky test shows it is larger), less its round-off.
    """
    s, k, _ = Y.shape
    R = Y @ Y.transpose(0, 2, 1) - Beta
    y2 = (Y * Y).reshape(s, -1).sum(axis=1)
    beta_norm = np.sqrt((Beta * Beta).reshape(s, -1).sum(axis=1))
    margin = _margin_lower_bound(R, lam_min) - 64 * _EPS * (k * y2 + beta_norm + lam_min)
    g_norm = np.sqrt((grad * grad).reshape(s, -1).sum(axis=1)) + 64 * _EPS * grad_scale
    y_norm = np.sqrt(y2)
    m_ref = np.maximum(lam_min, np.abs(margin))
    delta = m_ref[:, None] * _GRID  # m + ε
    eps = delta - margin[:, None]
    eps = np.concatenate([eps, np.where(margin > 0, 0.0, np.nan)[:, None]], axis=1)
    delta = np.concatenate([delta, margin[:, None]], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        num = g_norm[:, None] + 4.0 * np.abs(eps) * y_norm[:, None]
        bound = k * eps * eps + num * num / (8.0 * delta)
    return np.nanmin(bound, axis=1), margin


def _margin_lower_bound(R: np.ndarray, lam_min: float) -> np.ndarray:
    """(s,) a lower bound on m = λ_d + λ_min(R): CHOLESKY_SHARE · λ_d where R + (1 - share) λ_d I
    is positive definite, else the exact value. The choice depends only on the block itself."""
    margin = np.empty(R.shape[0])
    shifted = R + (1.0 - CHOLESKY_SHARE) * lam_min * np.eye(R.shape[1])
    if _cholesky_lo is not None:
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(_cholesky_lo(shifted, signature="d->d")[:, -1, -1])
    else:  # pragma: no cover
        ok = np.linalg.eigvalsh(shifted)[:, 0] > 0
    margin[ok] = CHOLESKY_SHARE * lam_min
    finite = np.isfinite(R).all(axis=(1, 2))
    margin[~ok & ~finite] = -np.inf  # no bound from a block whose numbers overflowed: not certified
    rest = np.flatnonzero(~ok & finite)
    if rest.size:
        margin[rest] = lam_min + np.linalg.eigvalsh(R[rest])[:, 0]
    return margin
