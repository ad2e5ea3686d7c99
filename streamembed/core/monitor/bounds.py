"""Bounds, estimates and exact values of k0 over a window of objects (docs/math.md §4, Wang).

The set X is the n landmarks plus a window Z of new objects, with counting
measure. Every statistic below says which of three kinds it is:

* **bound** — holds for every window, whatever the sample: the unexplained
  energy u = k0 + τ of every object is free and τ ≥ 0, so Σ_Z u ≥ Tr(k0)
  over Z (any data); for a PSD k0 (Euclidean data), ‖k0‖₂ ≤ Tr(k0) over X
  = Σ_Z u + Tr over the landmarks (0 unless the spectrum is truncated);
* **estimate** — from the sample of objects whose exact k0 was computed,
  with u of every object as control variate (u carries every object's k0;
  ``trace_estimate``: the regression estimator, which generalises
  Σ_Z u − (|Z|/s)·Σ_sample τ), with its sampling standard error;
* **exact** — when every object of the window was sampled (Tr(k0)), or when
  the window is one block with mutual dissimilarities (‖k0‖₂ and the
  kernel-distance error, from K0 = Beta − Ŷ_r Ŷ_rᵀ).

Where k0 is not PSD (non-Euclidean landmarks, or a sampled k0 negative
beyond round-off) ‖k0‖₂ has no bound from the trace: ``norm_k0`` and
``gap_ratio`` are NaN and ``new_axis_possible`` None — never 0 and False.

* Average kernel-distance error of the Nyström embedding against a full
  refit (Wang, eq. 24 and 27, corrected as docs/math.md §4 explains):

      Σ_{x,y∈X} d_k0²(x,y) = 2(n + |Z|)·Tr(k0) - 2·eᵀK0e
      d(Φ, Ψ̂) ≤ √(2·Tr(k0) / (n + |Z|))         (exact from K0 when known)

* Spectrum of a full refit without doing it (Corollary 16): with γ the
  eigenvalues of Λ_r + Σ_z ŷ_r(z) ŷ_r(z)ᵀ (the Nyström kernel over X,
  estimated from the sample),

      |λ_j(refit) - γ_j| ≤ ‖k0‖₂  (j ≤ r),    λ_j(refit) ≤ ‖k0‖₂  (j > r)

  (0 ≤ λ_j(refit) − γ_j for a PSD k0), so a refit may reorder the kept axes
  once ‖k0‖₂ reaches the gap γ_d - γ_{d+1}, and a new axis can beat the
  d-th only if ‖k0‖₂ ≥ γ_d.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .residuals import K0_RTOL, dropped_energy, negative_beyond_round_off, spectral_norm

__all__ = ["WindowBounds", "window_bounds", "trace_estimate", "kernel_distance_bound", "kernel_distance_exact",
           "nystrom_spectrum"]


@dataclass(frozen=True)
class WindowBounds:
    """Drift statistics of one window (squared-distance units unless stated).

    Attributes:
        n_landmarks: n.
        n_window: |Z|, objects in the window.
        n_sampled: objects whose exact k0 was computed.
        trace_k0: ESTIMATE of Tr(k0) over the window (``trace_estimate``); exact when every object was sampled.
        trace_k0_stderr: its sampling standard error (0 when exact).
        trace_k0_bound: BOUND Σ_Z u ≥ Tr(k0) over the window (any data; NaN when u is not known for every object).
        norm_k0: ‖k0‖₂ over X: exact if ``norm_exact``, else an upper BOUND (Tr(k0) over X ≤ Σ_Z u + the
            landmarks' trace); NaN when k0 is not PSD and not known exactly.
        norm_exact: whether ``norm_k0`` is exact (the window is one block with mutual dissimilarities).
        kernel_distance_bound: √(2·Tr(k0) over X / (n+|Z|)) from the trace BOUND (distance units); NaN when not PSD.
        kernel_distance_exact: the exact average kernel-distance error when K0 is known, else None.
        gamma: (r,) eigenvalues of the Nyström kernel over X, descending (estimated from the sample).
        eigengap: γ_d - γ_{d+1} (γ_{d+1} = 0 when d = r), from ``gamma``.
        gap_ratio: ‖k0‖₂ / eigengap (≥ 1: a refit may reorder or replace kept axes); NaN with ``norm_k0``.
        new_axis_possible: ‖k0‖₂ ≥ γ_d (a new axis could beat the d-th kept one); None when ``norm_k0`` is NaN.
        negative_k0_share: share of sampled objects with k0 negative beyond round-off (non-Euclidean input).
        psd: whether k0 counts as positive semidefinite here (Euclidean landmarks, no negative sampled k0).
    """

    n_landmarks: int
    n_window: int
    n_sampled: int
    trace_k0: float
    trace_k0_stderr: float
    trace_k0_bound: float
    norm_k0: float
    norm_exact: bool
    kernel_distance_bound: float
    kernel_distance_exact: float | None
    gamma: np.ndarray
    eigengap: float
    gap_ratio: float
    new_axis_possible: bool | None
    negative_k0_share: float
    psd: bool


def trace_estimate(k0: np.ndarray, tau: np.ndarray, n_window: int, u_sum: float | None) -> tuple[float, float]:
    """(estimate of Tr(k0) over a window of ``n_window`` objects, its standard error) from a sample.

    Args:
        k0: (s,) exact k0 of the sampled objects.
        tau: (s,) their dropped-dimension energy τ = u − k0.
        n_window: N ≥ s objects in the window.
        u_sum: Σ u over all N objects (None: unknown).

    With u known for every object, the regression estimator with u as control
    variate (Cochran 1977, §7.1): (N/s)·Σk0 + b·(Σ_all u − (N/s)·Σ_s u), with
    b = cov(k0, u)/var(u) on the sample — b = 1 is the difference estimator
    Σu − (N/s)·Στ, b = 0 the scaled sample; the fitted b is never worse than
    either to first order. Without u, the scaled sample (N/s)·Σk0. The
    standard error is N·√((1 − s/N)·var(e)/s) of the residuals e = k0 − b·u
    (finite-population correction: 0 when s = N, where the value is exact).
    """
    s = int(k0.shape[0])
    N = int(n_window)
    if s == 0:
        return (math.nan, math.nan)
    if s >= N:
        return (float(k0.sum()), 0.0)
    scale = N / s
    slope, ddof = 0.0, 1
    if u_sum is not None and s >= 3:
        u = k0 + tau
        var_u = float(np.var(u))
        if var_u > 0:
            slope, ddof = float(np.mean((k0 - k0.mean()) * (u - u.mean()))) / var_u, 2
        est = scale * float(k0.sum()) + slope * (float(u_sum) - scale * float(u.sum()))
        resid = k0 - slope * u
    else:
        if u_sum is not None:  # s < 3: no slope to fit; the difference estimator
            est = float(u_sum) - scale * float(tau.sum())
            resid = tau
        else:
            est = scale * float(k0.sum())
            resid = k0
    var = float(np.var(resid, ddof=ddof)) if s > ddof else math.nan
    return (est, N * math.sqrt(max(1.0 - s / N, 0.0) * var / s))


def kernel_distance_bound(trace_k0: float, n_landmarks: int, n_window: int) -> float:
    """√(2·Tr(k0)/(n + |Z|)): the corrected Theorem 18 bound (docs/math.md §4); NaN for a NaN trace.

    ``trace_k0`` must be Tr(k0) over X or an upper bound of it, of a PSD k0.
    """
    total = n_landmarks + n_window
    if not total:
        return 0.0
    return float(np.sqrt(max(2.0 * trace_k0, 0.0) / total)) if math.isfinite(trace_k0) else math.nan


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
    *,
    u_sum: float | None = None,
    block_norm: float | None = None,
    landmark_trace: float = 0.0,
    euclidean: bool = True,
    rtol: float = K0_RTOL[np.dtype(np.float64)],
) -> WindowBounds:
    """Bound, estimate and (where known) exact value of k0's statistics over a window.

    Args:
        k0: (s,) exact k0(z,z) of the sampled objects.
        y_r: (s, r) their r-dimensional projections.
        lam_r: (r,) the eigenvalues used for k0.
        n_components: d, the map's dimension.
        n_landmarks: n.
        n_window: N = |Z| (≥ s); defaults to s.
        K0: (N, N) residual kernel over the whole window when known (a block
            with mutual dissimilarities): ‖k0‖₂ and the kernel-distance error
            become exact.
        u_sum: Σ u = Σ (β − ‖ŷ_d‖²) over all N objects (None: unknown; the
            sample's own u when s = N).
        block_norm: ‖K0‖₂ of the whole window when computed elsewhere (instead of K0).
        landmark_trace: Σ_l k0(l,l) over the landmarks (``residuals.landmark_trace``;
            0 for Euclidean landmarks with every positive eigenpair kept).
        euclidean: whether the landmark kernel is Euclidean (no negative eigenvalue beyond round-off).
        rtol: relative round-off tolerance below which a negative k0 still counts as 0.
    """
    k0 = np.asarray(k0, dtype=np.float64)
    s = int(k0.shape[0])
    nz = s if n_window is None else int(n_window)
    d = int(n_components)
    beta = k0 + np.einsum("ij,ij->i", y_r, y_r)
    tau = dropped_energy(y_r, d)
    if u_sum is None and s >= nz:
        u_sum = float((k0 + tau).sum())
    trace, stderr = trace_estimate(k0, tau, nz, u_sum)
    negative = negative_beyond_round_off(k0, beta, rtol)
    psd = bool(euclidean) and not bool(negative.any())
    lt = max(float(landmark_trace), 0.0) if euclidean else math.nan
    bound_x = float(u_sum) + lt if (psd and u_sum is not None) else math.nan
    exact_dist = None
    if K0 is not None and K0.shape[0] == nz:
        block_norm = float(spectral_norm(K0))  # of one (k, k) matrix: a float
        if euclidean and lt == 0.0:
            exact_dist = kernel_distance_exact(K0, n_landmarks)
    norm, norm_exact = bound_x, False
    if block_norm is not None and euclidean:
        if lt == 0.0:  # k0 vanishes on the landmarks: ‖K0 over X‖₂ = ‖K0 over Z‖₂
            norm, norm_exact = float(block_norm), True
        elif psd:  # PSD K0 over X: ‖K0‖₂ ≤ ‖K0_ZZ‖₂ + ‖K0_LL‖₂ ≤ ‖K0_ZZ‖₂ + Tr over the landmarks
            norm = min(norm, float(block_norm) + lt)
    gamma = nystrom_spectrum(lam_r, y_r, nz / s) if s else np.asarray(lam_r, dtype=np.float64)
    gd = float(gamma[d - 1])
    gnext = float(gamma[d]) if gamma.shape[0] > d else 0.0
    gap = gd - gnext
    if math.isnan(norm):
        ratio, new_axis = math.nan, None
    else:
        ratio, new_axis = (norm / gap if gap > 0 else math.inf), bool(norm >= gd)
    return WindowBounds(
        n_landmarks=n_landmarks,
        n_window=nz,
        n_sampled=s,
        trace_k0=trace,
        trace_k0_stderr=stderr,
        trace_k0_bound=math.nan if u_sum is None else float(u_sum),
        norm_k0=norm,
        norm_exact=norm_exact,
        kernel_distance_bound=kernel_distance_bound(bound_x, n_landmarks, nz),
        kernel_distance_exact=exact_dist,
        gamma=gamma,
        eigengap=gap,
        gap_ratio=ratio,
        new_axis_possible=new_axis,
        negative_k0_share=float(negative.mean()) if s else math.nan,
        psd=psd,
    )
