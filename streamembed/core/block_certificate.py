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

_EPS = np.finfo(np.float64).eps
#: ε is searched at m_ref · 2^j for j in this range, m_ref = max(λ_d, |m|).
_GRID = 2.0 ** np.arange(-80, 12, 2)


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
        margin: (s,) m = λ_d + λ_min(Y Yᵀ - β), reduced by its round-off.
    """
    s, k, _ = Y.shape
    R = Y @ Y.transpose(0, 2, 1) - Beta
    y2 = (Y * Y).reshape(s, -1).sum(axis=1)
    beta_norm = np.sqrt((Beta * Beta).reshape(s, -1).sum(axis=1))
    margin = lam_min + np.linalg.eigvalsh(R)[:, 0] - 64 * _EPS * (k * y2 + beta_norm + lam_min)
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
