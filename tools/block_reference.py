"""The reference block RR solver: multi-start L-BFGS, one block at a time (docs/math.md §3).

This was streamembed's block solver before the batched trust-region solver
(``block.solve_blocks``); it stays as an independent implementation the
tests compare against. It is slow (SciPy call overhead per block and start)
and must not be used on a stream.

    Y* = argmin_Y  F(Y) = 2‖Y Xᵀ - B‖²_F + ‖Y Yᵀ - β‖²_F,    Y ∈ R^{k×d}

With X = U_d Λ^{1/2} and C = B U_d (k×d) the first term is

    2 (Σ_j λ_j ‖Y_:j‖² - 2 Σ_j √λ_j Y_:j·C_:j + ‖B‖²_F)

so objective and gradient ∇ = 4 (Y Λ - C Λ^{1/2}) + 4 (Y Yᵀ - β) Y need only
d-dimensional quantities. F is a quartic with local minima: it is minimised
by L-BFGS from several starts (projections, single-object RR solutions, sign
choices for ambiguous members, seeded perturbations) and the best is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamembed.core.runtime import single_blas_thread
from streamembed.core.place.block.solve import block_objective
from streamembed.core.flags import FLAG_AMBIGUOUS
from streamembed.core.place.restricted import solve_restricted


@dataclass
class ReferenceBlockSolution:
    """Best block RR configuration found.

    Attributes:
        y: (k, d) coordinates.
        objective: F(Y) (squared-distance² units), including the constant ‖B‖²_F.
        n_starts: how many starts were tried.
        single: (k, d) the single-object RR solutions (one of the starts).
        single_flags: (k,) flags of the single-object solutions.
    """

    y: np.ndarray
    objective: float
    n_starts: int
    single: np.ndarray
    single_flags: np.ndarray


def _objective_and_gradient(flat: np.ndarray, C: np.ndarray, Beta: np.ndarray, lam: np.ndarray, sl: np.ndarray,
                            B_norm2: float) -> tuple[float, np.ndarray]:
    Y = flat.reshape(C.shape)
    R = Y @ Y.T - Beta
    fit = (lam * Y * Y).sum() - 2.0 * (sl * Y * C).sum() + B_norm2
    f = 2.0 * fit + (R * R).sum()
    g = 4.0 * (Y * lam - C * sl) + 4.0 * (R @ Y)
    return float(f), g.ravel()


def solve_block_reference(
    C: np.ndarray,
    Beta: np.ndarray,
    lam: np.ndarray,
    B_norm2: float,
    n_random_starts: int = 4,
    random_state: int = 0,
    max_sign_starts: int = 8,
) -> ReferenceBlockSolution:
    """Multi-start L-BFGS minimisation of the block RR objective.

    Args:
        C: (k, d) = B U_d, the block's centred cross-similarities in the eigenbasis.
        Beta: (k, k) centred mutual similarities β_pq.
        lam: (d,) kept eigenvalues, descending.
        B_norm2: ‖B‖²_F (only shifts the reported objective).
        n_random_starts: seeded perturbations of the single-object RR solution.
        random_state: seed for those perturbations (results are deterministic).
        max_sign_starts: at most this many single-member sign flips are tried.
    """
    C = np.asarray(C, dtype=np.float64)
    Beta = np.asarray(Beta, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    k, d = C.shape
    sl = np.sqrt(lam)
    single = solve_restricted(C, np.diagonal(Beta).copy(), lam)
    starts = [C / sl, single.y]
    # Reflections along the smallest eigen-direction: the hard case's free sign,
    # and the usual way the mutual term prefers a different local minimum.
    candidates = np.flatnonzero(single.flags & FLAG_AMBIGUOUS)
    if candidates.size == 0:
        candidates = np.arange(k)
    for p in candidates[:max_sign_starts]:
        Y = single.y.copy()
        Y[p, -1] = -Y[p, -1]
        starts.append(Y)
    if k > 1:
        Y = single.y.copy()
        Y[candidates, -1] = -Y[candidates, -1]
        starts.append(Y)
    rng = np.random.default_rng(random_state)
    scale = np.sqrt(np.maximum(np.abs(np.diagonal(Beta)), 1e-300)).mean()
    for _ in range(n_random_starts):
        starts.append(single.y + 0.3 * scale * rng.standard_normal(single.y.shape))
    best_f, best_y = np.inf, single.y
    import scipy.optimize  # lazily: a test reference, never on the embed path

    with single_blas_thread():
        for Y0 in starts:
            res = scipy.optimize.minimize(
                _objective_and_gradient,
                Y0.ravel(),
                args=(C, Beta, lam, sl, B_norm2),
                jac=True,
                method="L-BFGS-B",
                options={"maxiter": 5000, "gtol": 1e-12, "ftol": 1e-15},
            )
            f = block_objective(res.x.reshape(k, d), C, Beta, lam, B_norm2)
            if f < best_f:
                best_f, best_y = f, res.x.reshape(k, d)
    return ReferenceBlockSolution(y=best_y, objective=best_f, n_starts=len(starts), single=single.y,
                                  single_flags=single.flags)
