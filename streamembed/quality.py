"""Quality measures of an embedding: stress, neighbourhood preservation, fidelity, agreement with a full MDS.

All functions are pure numpy/scipy, vectorised, with no I/O.

* Stress (criterion 2 of the five-criteria note, Ghojogh et al. 2020): embedded distances against the given
  dissimilarities, raw Σ (‖y - x‖ - δ)² and normalised Σ (‖y - x‖ - δ)² / Σ δ².
* Trustworthiness and continuity (Kaski et al. 2003, as quoted in Roy 2021, §1.3):
  with r(i, j) the rank of j among i's neighbours in the original space
  (1 = nearest), r̃(i, j) the rank in the embedding, A_k(i) / B_k(i) the k
  nearest neighbours of i in the original space / embedding, N points,

      T = 1 - 2/(N k (2N - 3k - 1)) Σ_i Σ_{j ∈ B_k(i) \\ A_k(i)} (r(i, j) - k)
      C = 1 - 2/(N k (2N - 3k - 1)) Σ_i Σ_{j ∈ A_k(i) \\ B_k(i)} (r̃(i, j) - k)

  (Roy 2021 writes the ranks with subscripts that read as the wrong space; the
  definitions above are Kaski's and Venna's: trustworthiness penalises false
  embedded neighbours by their *original* rank, continuity penalises lost
  original neighbours by their *embedded* rank). Both are 1 for a perfect
  neighbourhood preservation; the normalisation needs k < (2N - 1)/3. Ties in
  distances are broken by index order (stable sort).
* Procrustes fidelity (docs/math.md §5): align a map to a reference configuration
  on the landmarks, measure the held-out objects; ``procrustes_share``: align a
  whole map to a reference map of the same objects (rotation or reflection
  plus translation), the RMS distance left as a share of the reference's RMS
  radius (0 = the same map).
* ``classical_mds``: the classical MDS of all objects (docs/math.md §1), the
  reference a landmark map approximates; ``spearman_agreement``: Spearman's
  rank correlation of map distances with the input dissimilarities over a
  seeded sample of pairs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.linalg
import scipy.spatial.distance

from .core.errors import InputError
from .core.procrustes import apply_alignment, orthogonal_procrustes_align

__all__ = [
    "Stress",
    "stress_to_reference",
    "pairwise_stress",
    "neighbour_ranks",
    "trustworthiness_continuity",
    "Fidelity",
    "procrustes_fidelity",
    "procrustes_share",
    "classical_mds",
    "spearman_agreement",
]


class Stress(NamedTuple):
    """raw = Σ (e - δ)² (squared distance units); normalised = raw / Σ δ² (unitless); n_pairs."""

    raw: float
    normalised: float
    n_pairs: int


def _stress(E: np.ndarray, Delta: np.ndarray) -> Stress:
    diff = (E - Delta).ravel()
    raw = float(diff @ diff)
    denom = float(Delta.ravel() @ Delta.ravel())
    return Stress(raw=raw, normalised=raw / denom if denom > 0 else float("nan"), n_pairs=int(Delta.size))


def stress_to_reference(Y: np.ndarray, X: np.ndarray, Delta: np.ndarray) -> Stress:
    """Stress of m embedded objects against n fixed reference points.

    Args:
        Y: (m, d) embedded objects.
        X: (n, d) reference points in the same map (e.g. the landmarks).
        Delta: (m, n) given dissimilarities between the objects and the references.
    """
    Y = np.asarray(Y, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    Delta = np.asarray(Delta, dtype=np.float64)
    if Delta.shape != (Y.shape[0], X.shape[0]) or Y.shape[1] != X.shape[1]:
        raise InputError(f"stress needs Y (m, d), X (n, d), Delta (m, n); got {Y.shape}, {X.shape}, {Delta.shape}")
    return _stress(scipy.spatial.distance.cdist(Y, X), Delta)


def pairwise_stress(Y: np.ndarray, Delta: np.ndarray) -> Stress:
    """Stress over the m(m-1)/2 pairs of m embedded objects Y (m, d) against Delta (m, m)."""
    Y = np.asarray(Y, dtype=np.float64)
    Delta = np.asarray(Delta, dtype=np.float64)
    m = Y.shape[0]
    if Delta.shape != (m, m):
        raise InputError(f"pairwise stress needs Delta ({m}, {m}), got {Delta.shape}")
    iu = np.triu_indices(m, 1)
    return _stress(scipy.spatial.distance.pdist(Y), Delta[iu])


def neighbour_ranks(D: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Neighbour order and rank matrix of an (N, N) distance matrix.

    Returns:
        order: (N, N) int32; order[i, p] is i's p-th nearest point (order[i, 0] = i).
        ranks: (N, N) int32; ranks[i, j] = p where order[i, p] = j (ranks[i, i] = 0).
    Ties are broken by index (stable sort).
    """
    D = np.array(D, dtype=np.float64, copy=True)
    N = D.shape[0]
    if D.shape != (N, N):
        raise InputError(f"neighbour ranks need a square distance matrix, got {D.shape}")
    np.fill_diagonal(D, -np.inf)
    order = np.argsort(D, axis=1, kind="stable").astype(np.int32)
    ranks = np.empty((N, N), dtype=np.int32)
    rows = np.arange(N)[:, None]
    ranks[rows, order] = np.arange(N, dtype=np.int32)[None, :]
    return order, ranks


def trustworthiness_continuity(D_original: np.ndarray, Y: np.ndarray, k: int = 10) -> tuple[float, float]:
    """(trustworthiness, continuity) of an embedding (module docstring formulas).

    Args:
        D_original: (N, N) dissimilarities among the N points in the original space.
        Y: (N, d) their embedded coordinates (Euclidean distances are used).
        k: neighbourhood size, 1 ≤ k < (2N - 1)/3.
    """
    D_original = np.asarray(D_original, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    N = D_original.shape[0]
    if Y.shape[0] != N:
        raise InputError(f"Y has {Y.shape[0]} rows, the dissimilarities describe {N} points")
    if k < 1 or 2 * N - 3 * k - 1 <= 0:
        raise InputError(f"k must satisfy 1 <= k < (2N - 1)/3 = {(2 * N - 1) / 3:.1f}, got {k}")
    order_o, ranks_o = neighbour_ranks(D_original)
    order_e, ranks_e = neighbour_ranks(scipy.spatial.distance.squareform(scipy.spatial.distance.pdist(Y)))
    rows = np.arange(N)[:, None]
    # Neighbours already inside the other k-neighbourhood have rank ≤ k: max(·, 0) drops them.
    t_pen = np.maximum(ranks_o[rows, order_e[:, 1 : k + 1]] - k, 0).sum(dtype=np.int64)
    c_pen = np.maximum(ranks_e[rows, order_o[:, 1 : k + 1]] - k, 0).sum(dtype=np.int64)
    scale = 2.0 / (N * k * (2 * N - 3 * k - 1))
    return 1.0 - scale * float(t_pen), 1.0 - scale * float(c_pen)


class Fidelity(NamedTuple):
    """Agreement of held-out objects with a reference configuration after alignment.

    Attributes:
        rmse: RMS distance between the aligned held-out objects and their
            reference positions (distance units).
        relative: rmse / RMS radius of the reference configuration about its
            centroid (unitless; 0 = identical).
        landmark_residual: RMS residual of the alignment on the landmarks.
    """

    rmse: float
    relative: float
    landmark_residual: float


def procrustes_fidelity(
    landmarks: np.ndarray, landmarks_ref: np.ndarray, objects: np.ndarray, objects_ref: np.ndarray
) -> Fidelity:
    """Fit the rigid motion on the landmarks, evaluate it on the held-out objects.

    Args:
        landmarks: (n, d) landmark coordinates in the map being judged.
        landmarks_ref: (n, d) the same landmarks in the reference (e.g. a full refit).
        objects: (m, d) held-out objects in the map being judged.
        objects_ref: (m, d) the same objects in the reference.
    """
    fit = orthogonal_procrustes_align(landmarks, landmarks_ref)
    diff = apply_alignment(objects, fit) - np.asarray(objects_ref, dtype=np.float64)
    rmse = float(np.sqrt(np.einsum("ij,ij->", diff, diff) / max(diff.shape[0], 1)))
    ref = np.vstack([landmarks_ref, objects_ref]).astype(np.float64)
    radius = float(np.sqrt(((ref - ref.mean(axis=0)) ** 2).sum(axis=1).mean()))
    return Fidelity(rmse=rmse, relative=rmse / radius if radius > 0 else float("nan"), landmark_residual=fit.residual)


def procrustes_share(Y: np.ndarray, Y_ref: np.ndarray) -> float:
    """RMS distance between Y (N, d) aligned to Y_ref (N, d) and Y_ref, over Y_ref's RMS radius (unitless)."""
    _, _, rms = orthogonal_procrustes_align(np.asarray(Y, dtype=np.float64), np.asarray(Y_ref, dtype=np.float64))
    ref = np.asarray(Y_ref, dtype=np.float64)
    radius = float(np.sqrt(np.square(ref - ref.mean(axis=0)).sum(axis=1).mean()))
    return rms / radius if radius > 0 else float("nan")


def classical_mds(D: np.ndarray, n_components: int) -> np.ndarray:
    """(N, d) classical MDS configuration of all N objects from their (N, N) dissimilarities (docs/math.md §1).

    Only positive eigenvalues are kept (fewer columns are zero); cost O(N²) memory, the top d eigenpairs.
    """
    D2 = np.square(np.asarray(D, dtype=np.float64))
    N = D2.shape[0]
    if D2.shape != (N, N):
        raise InputError(f"classical_mds needs a square matrix, got {D2.shape}")
    r = D2.mean(axis=1)
    K = -0.5 * (D2 - r[:, None] - r[None, :] + r.mean())
    k = min(int(n_components), N)
    w, V = scipy.linalg.eigh(K, subset_by_index=[N - k, N - 1], check_finite=False)
    w, V = w[::-1], V[:, ::-1]
    Y = np.zeros((N, int(n_components)))
    Y[:, :k] = V * np.sqrt(np.maximum(w, 0.0))
    return Y


def spearman_agreement(D: np.ndarray, Y: np.ndarray, pairs: int = 50_000, seed: int = 0) -> float:
    """Spearman's ρ of ‖y_i − y_j‖ against δ(i, j) over ``pairs`` random pairs i < j (all when fewer)."""
    import scipy.stats

    D = np.asarray(D, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    N = D.shape[0]
    total = N * (N - 1) // 2
    if total == 0:
        return float("nan")
    rng = np.random.default_rng(seed)
    if total <= pairs:
        i, j = np.triu_indices(N, 1)
    else:
        i = rng.integers(0, N, size=pairs)
        j = rng.integers(0, N - 1, size=pairs)
        j = j + (j >= i)
    e = np.sqrt(np.square(Y[i] - Y[j]).sum(axis=1))
    return float(scipy.stats.spearmanr(e, D[i, j]).statistic)
