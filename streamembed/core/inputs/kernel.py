"""Similarity (kernel) input, reduced to dissimilarities (Trosset et al. 2025, §3; docs/math.md §2).

Trosset et al. 2025, §3 centres a similarity function γ against the landmarks,

    γ̃(μ, ν) = γ(μ, ν) - mean_j γ(μ, ξ_j) - mean_i γ(ξ_i, ν) + mean_ij γ(ξ_i, ξ_j),

and embeds with B = P Γ P (eq. 23–24), keeping only its positive eigenvalues
when Γ is not positive semidefinite (eq. 25). The same centred quantities
come out of the dissimilarity formulas of docs/math.md §2 applied to

    d²(x, y) = k(x, x) + k(y, y) - 2 k(x, y)                         (1)

exactly (the k(x, x) terms cancel in the double centring): B = -½ P Δ2 P
equals P K P, an object's b equals its centred similarity row, and its β
equals γ̃(z, z). So similarity input is converted by (1) once, at the edge,
and every solver (projection, RR, block RR, stress, L1, k0) runs unchanged.

(1) is a squared distance whenever k is positive semidefinite, and also for
every similarity matrix in Trosset et al. 2025's sense (0 ≤ γ_ij ≤ γ_ii), PSD or not;
negative values mean k(x, y) > (k(x, x) + k(y, y))/2, which no embedding in
any inner-product space can honour, and are refused (values within round-off
of zero are set to zero).

The self-similarity k(z, z) of an arriving object enters (1); projection does
not need it (b does not depend on it, Trosset et al. 2025, eq. 23–24), but β, RR, block
RR, the stress and L1 criteria and k0 do. Without it, the conversion uses
the smallest k(z, z) that keeps (1) non-negative: the projection is exact and
β is reported as NaN.

Feature kernels for ``fit_features``: ``linear`` (x·y), ``cosine``
(x·y / ‖x‖‖y‖) and ``rbf`` (exp(-γ‖x - y‖²) with γ = 1/p, p features).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import InputError
from .validation import Problem, ProblemCode

#: Kernels usable between feature vectors (``LandmarkMDS.fit_features`` with input="similarity").
FEATURE_KERNELS = ("linear", "cosine", "rbf")
#: Negative squared distances from (1) within this share of the largest |k(x, x)| are round-off
#: (float64 inputs; float32 rows use ``NEGATIVE_RTOL_F32``).
NEGATIVE_RTOL = 1e-9
NEGATIVE_RTOL_F32 = 1e-5


def check_similarity_matrix(K: object, name: str = "K", rtol: float = 1e-7) -> np.ndarray:
    """Validate a square, finite, symmetric similarity matrix; returns it as float64 (n, n)."""
    arr = np.asarray(K)
    if arr.dtype.kind not in "biuf":
        raise InputError(f"{name} must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise InputError(f"{name} must be a square (n, n) similarity matrix, got shape {arr.shape}")
    if arr.shape[0] < 2:
        raise InputError(f"{name} needs at least 2 objects, got shape {arr.shape} (n_samples = {arr.shape[0]})")
    bad = ~np.isfinite(arr)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise InputError(f"{name} has a non-finite entry: {name}[{i}, {j}] = {arr[i, j]}")
    tol = rtol * max(float(np.abs(arr).max()), np.finfo(np.float64).tiny)
    asym = np.abs(arr - arr.T) > tol
    if asym.any():
        i, j = np.argwhere(asym)[0]
        raise InputError(f"{name} must be symmetric: {name}[{i}, {j}] = {arr[i, j]} but {name}[{j}, {i}] = {arr[j, i]}")
    return 0.5 * (arr + arr.T)


def _sqrt_checked(D2: np.ndarray, scale: np.ndarray | float, name: str, rtol: float = NEGATIVE_RTOL) -> np.ndarray:
    """√D2 with round-off negatives set to zero; a real negative raises, naming the entry."""
    tol = rtol * scale
    neg = -tol > D2
    if neg.any():
        idx = tuple(int(i) for i in np.argwhere(neg)[0])
        raise InputError(
            f"{name} implies a negative squared dissimilarity k(x,x) + k(y,y) - 2k(x,y) = {D2[idx]:.6g} at "
            f"{list(idx)}: the similarity exceeds the mean of the two self-similarities, which no "
            f"inner-product embedding can represent"
        )
    return np.sqrt(np.maximum(D2, 0.0))


def landmark_dissimilarities(K: np.ndarray) -> np.ndarray:
    """Landmark dissimilarities (n, n) from validated similarities K (n, n) by (1); zero diagonal."""
    diag = np.diagonal(K)
    D2 = diag[:, None] + diag[None, :] - 2.0 * K
    np.fill_diagonal(D2, 0.0)
    return _sqrt_checked(D2, float(np.abs(diag).max()) or 1.0, "K")


def row_dissimilarities(
    K_rows: np.ndarray, landmark_self: np.ndarray, self_similarity: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, list[Problem | None]]:
    """Dissimilarities (m, n) of m objects to the landmarks from their similarities by (1).

    Args:
        K_rows: (m, n) finite similarities k(z, l_i).
        landmark_self: (n,) landmark self-similarities k(l_i, l_i).
        self_similarity: (m,) k(z, z), or None: then the smallest value keeping
            (1) non-negative is used (projection stays exact, β is not known).

    Returns:
        A: (m, n) dissimilarities (not squared), in the rows' dtype.
        known: (m,) bool, False where the self-similarity was not given.
        problems: m entries, None or a ``negative`` Problem for rows whose (1)
            is negative beyond round-off (their A row is clipped at zero).
    """
    m = K_rows.shape[0]
    K64 = K_rows.astype(np.float64, copy=False)
    base = landmark_self[None, :] - 2.0 * K64
    if self_similarity is None:
        kappa = -base.min(axis=1) if base.size else np.zeros(m)
        known = np.zeros(m, dtype=bool)
    else:
        kappa = np.asarray(self_similarity, dtype=np.float64)
        known = np.ones(m, dtype=bool)
    A2 = base + kappa[:, None]
    rtol = NEGATIVE_RTOL_F32 if K_rows.dtype == np.float32 else NEGATIVE_RTOL
    scale = np.maximum(np.abs(kappa), float(np.abs(landmark_self).max()))[:, None]
    neg = -rtol * scale > A2
    reasons: list[Problem | None] = [None] * m
    for i in np.flatnonzero(neg.any(axis=1)):
        j = int(np.argmax(neg[i]))
        reasons[int(i)] = Problem(ProblemCode.NEGATIVE, f"similarity row {int(i)} implies k(z,z) + k(l,l) - 2k(z,l) = "
                                  f"{A2[i, j]:.6g} < 0 at landmark {j}", j)
    A = np.sqrt(np.maximum(A2, 0.0))
    return A.astype(K_rows.dtype, copy=False), known, reasons


def block_dissimilarities(C: np.ndarray) -> np.ndarray:
    """Mutual dissimilarities (k, k) of a block from its mutual similarities C (k, k) by (1)."""
    return landmark_dissimilarities(C)


def feature_kernel(F: np.ndarray, L: np.ndarray, kernel: str) -> np.ndarray:
    """Similarities (m, n) between feature rows F (m, p) and landmark features L (n, p)."""
    if kernel == "linear":
        return F @ L.T
    if kernel == "cosine":
        return _unit(F) @ _unit(L).T
    if kernel == "rbf":
        import scipy.spatial.distance  # lazily: keeps `streamembed embed`'s start-up short
        return np.exp(-scipy.spatial.distance.cdist(F, L, "sqeuclidean") / F.shape[1])
    raise InputError(f"kernel must be one of {FEATURE_KERNELS}, got {kernel!r}")


def _squared_norms(F: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", F, F)


def _ones(F: np.ndarray) -> np.ndarray:
    return np.ones(F.shape[0])


#: kernel -> k(z, z) (m,) of feature rows (m, p): ‖z‖² for linear, 1 for the normalised kernels.
_SELF_SIMILARITY: dict[str, Callable[[np.ndarray], np.ndarray]] = {"linear": _squared_norms, "cosine": _ones,
                                                                    "rbf": _ones}


def feature_self_similarity(F: np.ndarray, kernel: str) -> np.ndarray:
    """k(z, z) (m,) of feature rows F (m, p) under ``kernel``."""
    self_similarity = _SELF_SIMILARITY.get(kernel)
    if self_similarity is None:
        raise InputError(f"kernel must be one of {FEATURE_KERNELS}, got {kernel!r}")
    return self_similarity(F)


def _unit(F: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(F, axis=1, keepdims=True)
    if (norm == 0).any():
        raise InputError(f"the cosine kernel needs non-zero feature vectors; row {int(np.argmin(norm))} is zero")
    return F / norm
