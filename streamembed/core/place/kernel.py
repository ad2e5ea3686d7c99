"""Nadaraya–Watson placement on a landmark map (Roy 2021, §2.3 and §3.3; docs/math.md §8.6).

An object with dissimilarities δ_s to the n landmarks is placed at the kernel-weighted mean of their map
coordinates y_s,

    y = Σ_s w_s y_s,   w_s = K(δ_s) / Σ_s′ K(δ_s′),   K(δ) = exp(−δ² / 2σ²),

a convex combination of the landmarks' coordinates (weights ≥ 0 summing to 1) on any map: classical,
refined, ordinal or skeleton. The weights are computed as exp(−(δ_s² − min_s′ δ_s′²) / 2σ²), which leaves
them unchanged and keeps the nearest landmark's at 1, so a small σ cannot underflow every weight to 0/0:
as σ → 0 the placement tends to the nearest landmark (the mean of the nearest ones on a tie). As the method
``kernel`` (:func:`kernel_routine`), a row at dissimilarity 0 from a landmark is placed on it exactly.

The bandwidth rule of Roy's §3.3 asks that the σ-balls around the landmarks cover the data,

    σ = max_s √(b_s² + min_{s′ ≠ s} D(s, s′)²),

with D the landmarks' mutual dissimilarities (on a skeleton map the geodesics D_G) and b_s the landmark's
distance to the boundary (the skeleton's d_B; 0 for the other maps, where no boundary is known): σ is
computed from the landmarks at fit (:func:`bandwidth`) and may be overridden (:func:`check_bandwidth`).

:func:`kernel_routine` has the signature of the placement routines of ``core.place.dispatch`` (``Routine``):
a method entry is ``kernel_routine`` with a ``geometry`` that carries the map ``X`` and its ``bandwidth``.
No I/O; every function is vectorised over the rows and safe to call from many threads (no shared state).
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from ..errors import InputError

__all__ = ["KernelGeometry", "bandwidth", "check_bandwidth", "kernel_weights", "place_kernel", "kernel_routine",
           "bandwidth_problem", "NO_BANDWIDTH"]


class KernelGeometry(Protocol):
    """What kernel placement reads from a map: the (n, d) natural-frame coordinates and the bandwidth σ."""

    @property
    def X(self) -> np.ndarray: ...

    @property
    def bandwidth(self) -> float | None: ...


def check_bandwidth(sigma: object, what: str = "kernel bandwidth") -> float:
    """σ as a float, or an InputError: it must be a finite number > 0 (σ = 0 or NaN places nothing)."""
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float, np.integer, np.floating)):
        raise InputError(f"{what} must be a finite number > 0, got {sigma!r}")
    s = float(sigma)
    if not (math.isfinite(s) and s > 0.0):
        raise InputError(f"{what} must be a finite number > 0, got {s!r}: a zero bandwidth gives every "
                         f"landmark but the nearest weight 0, a non-finite one places nothing")
    return s


def bandwidth(D_landmarks: object, boundary_distance: object = None) -> float:
    """Roy's §3.3 bandwidth σ = max_s √(b_s² + min_{s′≠s} D(s, s′)²) (module docstring).

    Args:
        D_landmarks: (n, n) the landmarks' mutual dissimilarities (not squared), n ≥ 2.
        boundary_distance: (n,) b_s ≥ 0 (a skeleton's d_B), or None for 0.
    Returns:
        σ in the units of D, checked by :func:`check_bandwidth` (an InputError when all landmarks coincide).
    """
    D = np.array(D_landmarks, dtype=np.float64, copy=True)
    n = D.shape[0] if D.ndim == 2 else 0
    if D.ndim != 2 or D.shape != (n, n) or n < 2:
        raise InputError(f"the bandwidth rule needs the (n, n) landmark dissimilarities with n >= 2, got {D.shape}")
    if not np.isfinite(D).all() or (D < 0).any():
        raise InputError("the bandwidth rule needs finite non-negative landmark dissimilarities")
    np.fill_diagonal(D, np.inf)
    nearest = D.min(axis=1)
    b = np.zeros(n) if boundary_distance is None else np.asarray(boundary_distance, dtype=np.float64)
    if b.shape != (n,) or not np.isfinite(b).all() or (b < 0).any():
        raise InputError(f"boundary distances must be (n,) = ({n},) finite and non-negative, got shape {b.shape}")
    return check_bandwidth(float(np.sqrt(np.max(b ** 2 + nearest ** 2))), "the bandwidth rule's sigma")


def kernel_weights(A_rows: np.ndarray, sigma: float) -> np.ndarray:
    """(m, n) float64 Nadaraya–Watson weights of rows of dissimilarities A_rows (m, n): ≥ 0, each row sums to 1.

    Rows must be finite (callers validate them). Computed as exp(−(δ² − min δ²)/2σ²), normalised.
    """
    s = check_bandwidth(sigma)
    D2 = np.square(np.asarray(A_rows, dtype=np.float64))
    D2 -= D2.min(axis=1, keepdims=True)
    with np.errstate(over="ignore"):  # δ²/σ → inf for a tiny σ: its weight is exp(−inf) = 0, as it should be
        W = np.exp(-(D2 / s) / (2.0 * s))  # not D2 / σ²: σ² underflows to 0 for σ below 1e-154
    W /= W.sum(axis=1, keepdims=True)
    return W


def place_kernel(A_rows: np.ndarray, Y_landmarks: np.ndarray, sigma: float) -> np.ndarray:
    """(m, d) float64 placements y = Σ_s w_s y_s of rows A_rows (m, n) on the landmark map Y_landmarks (n, d)."""
    Y = np.asarray(Y_landmarks, dtype=np.float64)
    A = np.asarray(A_rows)
    if A.ndim != 2 or Y.ndim != 2 or A.shape[1] != Y.shape[0]:
        raise InputError(f"kernel placement needs rows (m, n) and a map (n, d), got {A.shape} and {Y.shape}")
    if not np.isfinite(A).all():
        raise InputError("kernel placement needs finite dissimilarities")
    return kernel_weights(A, sigma) @ Y


#: Why a map without a bandwidth cannot be placed on by kernel placement (``LandmarkModel.check_method``).
NO_BANDWIDTH = ("method 'kernel' needs the map's bandwidth sigma and this model has none: its landmark "
                "dissimilarities give none (every landmark coincides with another), or it was saved before sigma was "
                "stored and keeps no landmark dissimilarities or features to compute it from (a skeleton map needs "
                "its boundary distances); give one: kernel_bandwidth= (estimator), --kernel-bandwidth (fit), "
                "model.kernel_bandwidth (daemon), docs/math.md §8.6")


def bandwidth_problem(geometry: KernelGeometry) -> str | None:
    """Why kernel placement cannot place on ``geometry`` (no bandwidth), or None when it can."""
    return NO_BANDWIDTH if geometry.bandwidth is None else None


def kernel_routine(A_rows: np.ndarray, y: np.ndarray, beta: np.ndarray, lam: np.ndarray, valid: np.ndarray,
                   t: np.ndarray, flags: np.ndarray,
                   geometry: KernelGeometry) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A placement routine (``core.place.dispatch.Routine``): the valid rows' ŷ replaced by their kernel placement.

    ``A_rows`` (m, n) are the core dissimilarities to the landmarks, ``geometry.X`` the (n, d) natural-frame map
    and ``geometry.bandwidth`` its σ (an InputError when it is missing, zero or not finite). A row at dissimilarity
    0 from a landmark *is* that landmark: it is placed on the landmark's coordinates (on the mean of the
    landmarks it coincides with), as LSDR keeps its skeleton points' coordinates (docs/math.md §8.5); every other
    row at its Nadaraya–Watson average (8.7). β, λ and t are not used (t stays NaN, flags unchanged): the
    placement is no solution of a criterion.
    """
    sigma = geometry.bandwidth
    if sigma is None:
        raise InputError(NO_BANDWIDTH)
    rows = np.flatnonzero(valid)
    if rows.size:
        A = A_rows[rows]
        X = np.asarray(geometry.X, dtype=np.float64)
        y[rows] = place_kernel(A, X, sigma)
        at = A == 0  # (k, n): the landmarks each row coincides with
        on = np.flatnonzero(at.any(axis=1))
        if on.size:
            W = at[on].astype(np.float64)
            y[rows[on]] = (W / W.sum(axis=1, keepdims=True)) @ X
    return y, t, flags
