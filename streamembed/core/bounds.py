"""Error and eigenvalue bounds from k0 over a window of objects (docs/math.md §4, Wang).

The set X is the n landmarks plus a window Z of new objects, with counting
measure. k0 vanishes on landmarks, so all its mass is on Z.

* Average kernel-distance error of the Nyström embedding against a full
  refit (Wang, eq. 24 and 27, corrected as docs/math.md §4 explains):

      Σ_{x,y∈X} d_k0²(x,y) = 2(n + |Z|)·Tr(k0) - 2·eᵀK0e
      d(Φ, Ψ̂) ≤ √(2·Tr(k0) / (n + |Z|))         (exact from K0 when known)

* Spectrum of a full refit without doing it (Corollary 16): with γ the
  eigenvalues of Λ_r + Σ_z ŷ_r(z) ŷ_r(z)ᵀ (the Nyström kernel over X),

      0 ≤ λ_j(refit) - γ_j ≤ ‖k0‖₂  (j ≤ r),    λ_j(refit) ≤ ‖k0‖₂  (j > r)

  so a refit may reorder the kept axes once ‖k0‖₂ reaches the gap
  γ_d - γ_{d+1}, and a new axis can beat the d-th only if ‖k0‖₂ ≥ γ_d.

‖k0‖₂ is exact only when K0 over the whole window is known; otherwise the
upper bound ‖k0‖₂ ≤ Tr(k0) (k0 is PSD for Euclidean data) is used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class WindowBounds:
    """Drift statistics of one window (squared-distance units unless stated).

    Attributes:
        n_landmarks: n.
        n_window: |Z|, objects in the window.
        n_sampled: objects whose exact k0 was computed (Tr and Σŷŷᵀ are scaled up
            from them when fewer than n_window).
        trace_k0: Tr(k0) over the window (estimated from the sample).
        norm_k0: ‖k0‖₂ (exact if ``norm_exact``, else the trace bound).
        norm_exact: whether ``norm_k0`` is exact.
        kernel_distance_bound: √(2·Tr(k0)/(n+|Z|)) (distance units).
        kernel_distance_exact: the exact average kernel-distance error when K0 is known, else None.
        gamma: (r,) eigenvalues of the Nyström kernel over X, descending.
        eigengap: γ_d - γ_{d+1} (γ_{d+1} = 0 when d = r).
        gap_ratio: ‖k0‖₂ / eigengap (≥ 1: a refit may reorder or replace kept axes).
        new_axis_possible: ‖k0‖₂ ≥ γ_d (a new axis could beat the d-th kept one).
        negative_k0_share: share of sampled objects with k0 < -tolerance (non-Euclidean input).
    """

    n_landmarks: int
    n_window: int
    n_sampled: int
    trace_k0: float
    norm_k0: float
    norm_exact: bool
    kernel_distance_bound: float
    kernel_distance_exact: float | None
    gamma: np.ndarray
    eigengap: float
    gap_ratio: float
    new_axis_possible: bool
    negative_k0_share: float


def kernel_distance_bound(trace_k0: float, n_landmarks: int, n_window: int, tolerance: float = 0.0) -> float:
    """√(2·Tr(k0)/(n + |Z|)): the corrected Theorem 18 bound (docs/math.md §4).

    NaN when Tr(k0) < -tolerance: k0 is then not positive semidefinite
    (non-Euclidean input) and the bound does not apply; a trace within the
    round-off ``tolerance`` below zero counts as 0.
    """
    total = n_landmarks + n_window
    if not total:
        return 0.0
    if trace_k0 < -tolerance:
        return float("nan")
    return float(np.sqrt(max(2.0 * trace_k0, 0.0) / total))


def kernel_distance_exact(K0: np.ndarray, n_landmarks: int) -> float:
    """(1/|X|)·√(2(n+|Z|)·Tr(K0) - 2·eᵀK0e): exact when K0 over the window is known."""
    nz = K0.shape[0]
    total = n_landmarks + nz
    s = 2.0 * total * float(np.trace(K0)) - 2.0 * float(K0.sum())
    return float(np.sqrt(max(s, 0.0))) / total


def nystrom_spectrum(lam_r: np.ndarray, y_r: np.ndarray, weight: float = 1.0) -> np.ndarray:
    """γ: eigenvalues of Λ_r + weight·Σ_z ŷ_r(z) ŷ_r(z)ᵀ, descending (Corollary 16)."""
    M = np.diag(lam_r) + weight * (y_r.T @ y_r)
    return np.linalg.eigvalsh(M)[::-1]


def window_bounds(
    k0: np.ndarray,
    y_r: np.ndarray,
    lam_r: np.ndarray,
    n_components: int,
    n_landmarks: int,
    n_window: int | None = None,
    K0: np.ndarray | None = None,
    negative_tol: float = 0.0,
    beta: np.ndarray | None = None,
) -> WindowBounds:
    """Bounds for a window from the exact k0 of (a sample of) its objects.

    Args:
        k0: (s,) exact k0(z,z) of the sampled objects.
        y_r: (s, r) their r-dimensional projections.
        lam_r: (r,) the eigenvalues used for k0.
        n_components: d, the map's dimension.
        n_landmarks: n.
        n_window: |Z| (≥ s); defaults to s. The sample is scaled up by |Z|/s.
        K0: (|Z|, |Z|) residual kernel over the whole window when known
            (a block with mutual dissimilarities): makes ‖k0‖₂ and the
            kernel-distance error exact.
        negative_tol: k0 below -negative_tol counts as non-Euclidean.
        beta: (s,) the sampled objects' β: sets the round-off tolerance
            (1e-8·Σ|β|, scaled like the trace) below which a negative Tr(k0)
            still counts as 0 rather than as non-Euclidean.
    """
    s = int(k0.shape[0])
    nz = s if n_window is None else int(n_window)
    weight = nz / s if s else 0.0
    trace = float(k0.sum()) * weight
    exact_dist = None
    if K0 is not None and K0.shape[0] == nz:
        from .residuals import operator_norm

        norm, norm_exact = operator_norm(K0), True
        exact_dist = kernel_distance_exact(K0, n_landmarks)
    else:
        norm, norm_exact = max(trace, 0.0), False
    gamma = nystrom_spectrum(lam_r, y_r, weight) if s else np.asarray(lam_r, dtype=np.float64)
    d = n_components
    gd = float(gamma[d - 1])
    gnext = float(gamma[d]) if gamma.shape[0] > d else 0.0
    gap = gd - gnext
    return WindowBounds(
        n_landmarks=n_landmarks,
        n_window=nz,
        n_sampled=s,
        trace_k0=trace,
        norm_k0=norm,
        norm_exact=norm_exact,
        kernel_distance_bound=kernel_distance_bound(
            trace, n_landmarks, nz, 0.0 if beta is None else 1e-8 * weight * float(np.abs(beta).sum())
        ),
        kernel_distance_exact=exact_dist,
        gamma=gamma,
        eigengap=gap,
        gap_ratio=norm / gap if gap > 0 else float("inf"),
        new_axis_possible=bool(norm >= gd),
        negative_k0_share=float((k0 < -negative_tol).mean()) if s else 0.0,
    )
