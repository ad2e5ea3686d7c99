"""The Nyström residual kernel k0 = k - k̂ per object and per block (docs/math.md §4).

With c_j the coordinates of an object's centred cross-similarities on the
landmark eigenvectors and r the positive eigenpairs kept for monitoring
(r ≥ d):

    k̂(z,z)  = Σ_{j≤r} c_j²/λ_j = ‖ŷ_r‖²       (Nyström extension, Wang, eq. 20)
    k0(z,z)  = β - ‖ŷ_r‖²                       (out-of-span residual)
    τ(z)     = ‖ŷ_r‖² - ‖ŷ_d‖²                  (energy in the dropped dimensions)
    β - ‖ŷ_d‖² = k0(z,z) + τ(z)                  (total unexplained, O(d))

ŷ_r are the r-dimensional projections (``projection.ProjectionKernel`` with
r coordinates). If the spectrum is truncated (partial eigensolver), the k0
computed here is k0 + Σ_{j>r} c_j²/λ_j: an upper bound of the true k0.
"""

from __future__ import annotations

import numpy as np


def unexplained(beta: np.ndarray, y_proj: np.ndarray) -> np.ndarray:
    """Total unexplained energy β - ‖ŷ‖² per object, (m,), from d-dim projections (m, d)."""
    return beta - np.einsum("ij,ij->i", y_proj, y_proj)


def k0_diagonal(beta: np.ndarray, y_r: np.ndarray) -> np.ndarray:
    """k0(z,z) = β - ‖ŷ_r‖² per object: (m,), from r-dim projections y_r (m, r)."""
    return beta - np.einsum("ij,ij->i", y_r, y_r)


def dropped_energy(y_r: np.ndarray, n_components: int) -> np.ndarray:
    """τ(z) = Σ_{d<j≤r} ŷ_j² per object."""
    tail = y_r[:, n_components:]
    return np.einsum("ij,ij->i", tail, tail)


def block_k0(Beta: np.ndarray, y_r: np.ndarray) -> np.ndarray:
    """K0 = β - Ŷ_r Ŷ_rᵀ for a block: (k, k) from Beta (k, k) and y_r (k, r)."""
    return Beta - y_r @ y_r.T


def operator_norm(K0: np.ndarray) -> float:
    """‖k0‖₂ over a block: the largest eigenvalue of the symmetric K0 (0 if all are negative)."""
    if K0.size == 0:
        return 0.0
    w = np.linalg.eigvalsh(0.5 * (K0 + K0.T))
    return float(max(w[-1], 0.0))
