"""The residual quantities of a placement, each defined once (docs/math.md §4).

With c_j the coordinates of an object's centred cross-similarities on the
landmark eigenvectors and r the eigenpairs kept for monitoring (r ≥ d; for
non-Euclidean landmarks only those above the spectrum's floor, §4.3):

    k̂(z,z)  = Σ_{j≤r} c_j²/λ_j = ‖ŷ_r‖²       (Nyström extension, Wang, eq. 20)
    k0(z,z)  = β - ‖ŷ_r‖²                       (out-of-span residual)
    τ(z)     = ‖ŷ_r‖² - ‖ŷ_d‖²                  (energy in the dropped dimensions, ≥ 0)
    u(z)     = β - ‖ŷ_d‖² = k0(z,z) + τ(z)      (total unexplained, O(d), free)

ŷ_r are the r-dimensional projections (``projection.ProjectionKernel`` with
r coordinates). When the spectrum is truncated (partial eigensolver, or the
floor), the k0 computed here is k0 + Σ_{j>r} c_j²/λ_j: for Euclidean data an
upper bound of the true k0. Over a block, K0 = Beta − Ŷ_r Ŷ_rᵀ and its
spectral norm ‖K0‖₂ = max_j |λ_j(K0)| (= λ_max for a PSD K0) is the norm in
Corollary 16's two-sided bounds |λ_j(refit) − γ_j| ≤ ‖K0‖₂.
"""

from __future__ import annotations

import numpy as np

from ..runtime import single_blas_thread

__all__ = ["K0_RTOL", "LANDMARK_TRACE_RTOL", "unexplained", "k0_diagonal", "dropped_energy", "block_k0",
           "spectral_norm", "largest_block_norm", "landmark_trace", "round_off", "negative_beyond_round_off"]

#: k0 below −K0_RTOL·(|β| + ‖ŷ_r‖²) counts as negative: the round-off of the difference
#: β − ‖ŷ_r‖² is far below this in float64; float32 inputs use the second.
K0_RTOL = {np.dtype(np.float64): 1e-7, np.dtype(np.float32): 1e-3}
#: |Tr(B) − Σλ_r| below this share of Tr(B) is round-off (every positive eigenvalue kept).
LANDMARK_TRACE_RTOL = 1e-9


def unexplained(beta: np.ndarray, y: np.ndarray) -> np.ndarray:
    """β − ‖y‖² per object, (m,): u from the d-dim projections y (m, d), or k0 from the r-dim ones."""
    return beta - np.einsum("ij,ij->i", y, y)


def k0_diagonal(beta: np.ndarray, y_r: np.ndarray) -> np.ndarray:
    """k0(z,z) = β − ‖ŷ_r‖² per object: (m,), from the r-dim projections y_r (m, r)."""
    return unexplained(beta, y_r)


def dropped_energy(y_r: np.ndarray, n_components: int) -> np.ndarray:
    """τ(z) = Σ_{d<j≤r} ŷ_j² = u − k0 per object, (m,), from y_r (m, r)."""
    tail = y_r[:, n_components:]
    return np.einsum("ij,ij->i", tail, tail)


def block_k0(Beta: np.ndarray, y_r: np.ndarray) -> np.ndarray:
    """K0 = Beta − Ŷ_r Ŷ_rᵀ: (..., k, k) from Beta (..., k, k) and y_r (..., k, r)."""
    return Beta - y_r @ np.swapaxes(y_r, -1, -2)


def spectral_norm(K0: np.ndarray) -> np.ndarray | float:
    """‖K0‖₂ = max |λ(K0)| of symmetric K0 (k, k) -> float, or of a stack (s, k, k) -> (s,); 0 for an empty K0."""
    if K0.shape[-1] == 0:
        return 0.0 if K0.ndim == 2 else np.zeros(K0.shape[:-2])
    w = np.linalg.eigvalsh(0.5 * (K0 + np.swapaxes(K0, -1, -2)))
    norm = np.maximum(np.abs(w[..., 0]), np.abs(w[..., -1]))
    return float(norm) if K0.ndim == 2 else norm


def landmark_trace(row_means: np.ndarray, grand_mean: float, eigenvalues: np.ndarray) -> float:
    """Σ_l k0(l,l) over the landmarks: Tr(B) − Σ_{j≤r} λ_j = n·g/2 − Σ_{j≤r} λ_j (squared units).

    Zero (to round-off) when r holds every positive eigenvalue of Euclidean
    landmarks; the dropped positive eigenvalues when the spectrum is truncated;
    minus the negative eigen-energy (and more) for non-Euclidean landmarks.
    A value within ``LANDMARK_TRACE_RTOL``·Tr(B) of 0 is round-off and returned as 0.
    """
    n = row_means.shape[0]
    trace_b = n * (float(np.mean(row_means)) - 0.5 * grand_mean)
    rest = trace_b - float(np.sum(eigenvalues))
    return 0.0 if abs(rest) <= LANDMARK_TRACE_RTOL * abs(trace_b) else rest


def round_off(beta: np.ndarray, k0: np.ndarray, rtol: float) -> np.ndarray:
    """The round-off scale of k0 = β − k̂: rtol·(|β| + |k̂|), (m,)."""
    return rtol * (np.abs(beta) + np.abs(beta - k0))


def negative_beyond_round_off(k0: np.ndarray, beta: np.ndarray,
                              rtol: float = K0_RTOL[np.dtype(np.float64)]) -> np.ndarray:
    """k0 < −rtol·(|β| + |k̂|): negative beyond round-off (k0 cannot be a PSD kernel's diagonal), (m,) bool."""
    return k0 < -round_off(beta, k0, rtol)


def largest_block_norm(sizes: np.ndarray, beta: np.ndarray, y_r: np.ndarray) -> float:
    """max over blocks of ‖K0‖₂ = max|λ(K0)|, K0 = Beta − Ŷ_r Ŷ_rᵀ per block; one eigvalsh per block size.

    Args:
        sizes: (nb,) rows per block, blocks consecutive.
        beta: (Σ k_b²,) every block's centred Beta (k_b, k_b), flattened row-major, one after the other.
        y_r: (Σ k_b, r) the blocks' rows projected on every monitored eigenpair.
    """
    row_off = np.concatenate([[0], np.cumsum(sizes)])
    beta_off = np.concatenate([[0], np.cumsum(sizes * sizes)])
    best = 0.0
    with single_blas_thread():  # one stacked product and eigvalsh per block size
        for k in np.unique(sizes).tolist():
            idx = np.flatnonzero(sizes == k)
            Y = y_r[row_off[idx][:, None] + np.arange(k)]  # (s, k, r)
            Beta = beta[beta_off[idx][:, None] + np.arange(k * k)].reshape(-1, k, k)
            best = max(best, float(np.max(spectral_norm(block_k0(Beta, Y)))))
    return best
