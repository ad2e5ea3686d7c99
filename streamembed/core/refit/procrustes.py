"""Orthogonal Procrustes alignment with translation, no scaling (docs/math.md §5).

Two configurations of the same points, ``source`` and ``target`` (k, d), are
brought into one frame by the rigid motion (rotation or reflection R, then
translation) that minimises the summed squared distance

    min_{R ᵀR = I, s}  Σ_i ‖source_i R + s - target_i‖²

Solution (Schönemann 1966; Roy 2021 Appendix A.3 without the scale factor):
centre both, take the SVD  S̃ᵀ T̃ = U Σ Vᵀ  of the d×d cross-product, then

    R = U Vᵀ,     s = mean(target) - mean(source) R.

Scaling is deliberately excluded: MDS coordinates are in the units of the
dissimilarities, and a refit must not rescale downstream coordinates. The
landmark refit (docs/math.md §5) fits on the landmarks both models share and
applies (R, s) to the new model; the evaluation fits on the landmarks and
measures the held-out objects.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import InputError

__all__ = ["ProcrustesFit", "orthogonal_procrustes_align", "apply_alignment"]


class ProcrustesFit(NamedTuple):
    """A rigid motion y ↦ y R + shift and how well it fits.

    Attributes:
        R: (d, d) orthogonal matrix (det ±1; -1 means a reflection was needed).
        shift: (d,) translation, in the configurations' distance units.
        residual: root-mean-square distance between the aligned source and the
            target over the fitted points, √(Σ_i ‖source_i R + s - target_i‖² / k)
            (distance units; 0 for configurations equal up to a rigid motion).
    """

    R: np.ndarray
    shift: np.ndarray
    residual: float


def orthogonal_procrustes_align(
    source: np.ndarray,
    target: np.ndarray,
    *,
    allow_reflection: bool = True,
    weights: np.ndarray | None = None,
) -> ProcrustesFit:
    """The rigid motion mapping ``source`` (k, d) onto ``target`` (k, d) in least squares.

    Args:
        source: (k, d) coordinates to move (e.g. a new model's landmarks).
        target: (k, d) coordinates of the same k points in the reference frame.
        allow_reflection: True (default) searches all orthogonal R, as MDS
            configurations are defined only up to reflections; False restricts
            R to rotations (det R = +1, Kabsch's correction).
        weights: optional (k,) non-negative point weights (weighted least squares).

    Returns:
        ProcrustesFit(R (d, d), shift (d,), residual (RMS distance over the k
        points, weighted RMS when weights are given)).

    Raises:
        InputError: shapes differ, fewer than one point, or non-finite values.
    """
    S = np.asarray(source, dtype=np.float64)
    T = np.asarray(target, dtype=np.float64)
    if S.ndim != 2 or S.shape != T.shape:
        raise InputError(f"source and target must be (k, d) arrays of one shape, got {S.shape} and {T.shape}")
    if S.shape[0] < 1:
        raise InputError("Procrustes alignment needs at least one point")
    if not (np.isfinite(S).all() and np.isfinite(T).all()):
        raise InputError("source and target must be finite")
    if weights is None:
        w = np.full(S.shape[0], 1.0 / S.shape[0])
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (S.shape[0],) or (w < 0).any() or w.sum() <= 0:
            raise InputError(f"weights must be ({S.shape[0]},) non-negative with a positive sum")
        w = w / w.sum()
    mu_s = w @ S
    mu_t = w @ T
    Sc = S - mu_s
    Tc = T - mu_t
    M = (Sc * w[:, None]).T @ Tc  # (d, d) weighted cross-product
    U, _, Vt = np.linalg.svd(M)
    if not allow_reflection and np.linalg.det(U @ Vt) < 0:
        U[:, -1] = -U[:, -1]
    R = U @ Vt
    shift = mu_t - mu_s @ R
    diff = S @ R + shift - T
    residual = float(np.sqrt(max(float(w @ np.einsum("ij,ij->i", diff, diff)), 0.0)))
    return ProcrustesFit(R=R, shift=shift, residual=residual)


def apply_alignment(Y: np.ndarray, fit: ProcrustesFit) -> np.ndarray:
    """Y (m, d) moved by a fitted rigid motion: Y R + shift, (m, d) float64."""
    Y = np.asarray(Y, dtype=np.float64)
    return Y @ fit.R + fit.shift
