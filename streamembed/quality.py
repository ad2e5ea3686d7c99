"""Quality measures of an embedding: stress, neighbourhood preservation, fidelity.

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
  on the landmarks, measure the held-out objects.
* Agreement of a whole map with the classical MDS of all its objects
  (docs/landmarks.md): ``classical_mds`` (the reference), ``procrustes_share``
  (RMS distance after the best rigid motion, as a share of the reference's RMS
  radius), ``trustworthiness`` against precomputed ``NeighbourRanks`` (one
  rank matrix serves many maps), ``spearman_agreement`` (rank correlation of
  map distances with the input dissimilarities) and ``subspace_distance``
  (sine of the largest principal angle between two maps' column spaces).
* Roy's (2021) trustability index, its relative form and the reconstruction behind the consistency index
  (``streamembed.trustability``), and the tractable consistency index with the indices block of ``evaluate``
  (``streamembed.consistency_index``), re-exported here (docs/math.md §8.1–8.3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import scipy.linalg
import scipy.spatial
import scipy.sparse.linalg
import scipy.spatial.distance
import scipy.stats

from .consistency_index import ConsistencyIndex, consistency_index, evaluate_indices
from .core.errors import InputError
from .core.refit.procrustes import apply_alignment, orthogonal_procrustes_align
from .trustability import Reconstruction, reconstruction, relative_trustability, trustability_index

__all__ = [
    "Stress",
    "stress_to_reference",
    "pairwise_stress",
    "neighbour_ranks",
    "trustworthiness_continuity",
    "Fidelity",
    "procrustes_fidelity",
    "FullMDS",
    "classical_mds",
    "procrustes_share",
    "NeighbourRanks",
    "trustworthiness",
    "PairRanks",
    "spearman_agreement",
    "subspace_distance",
    "trustability_index",
    "relative_trustability",
    "Reconstruction",
    "reconstruction",
    "ConsistencyIndex",
    "consistency_index",
    "evaluate_indices",
    "cmds_pipeline",
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


class FullMDS(NamedTuple):
    """Classical MDS of every object: the reference a landmark map is measured against.

    Attributes:
        Y: (N, d) configuration (docs/math.md §1: top-d eigenpairs of B = −½ J Δ² J).
        eigenvalues: the top min(d + 2, N − 1) eigenvalues of B, descending (squared distance units).
        trace: trace of B = Σ of all its eigenvalues (negative ones included).
    """

    Y: np.ndarray
    eigenvalues: np.ndarray
    trace: float


def classical_mds(D: np.ndarray, n_components: int) -> FullMDS:
    """Classical (Torgerson) MDS of an (N, N) dissimilarity matrix: O(N²) memory.

    The top d + 2 eigenpairs come from Lanczos iteration (``scipy.sparse.linalg.eigsh``, O(N²) per
    iteration), or from a dense solver for N ≤ 200. Eigenvalues below zero (non-Euclidean Δ) give
    zero-length axes.
    """
    D = np.asarray(D, dtype=np.float64)
    N = D.shape[0]
    if D.ndim != 2 or D.shape != (N, N) or N < 2:
        raise InputError(f"classical MDS needs an (N, N) matrix with N ≥ 2, got {D.shape}")
    B = np.square(D)
    B -= B.mean(axis=0, keepdims=True)
    B -= B.mean(axis=1, keepdims=True)
    B *= -0.5
    k = min(n_components + 2, N - 1)
    if N <= 200:
        w, V = scipy.linalg.eigh(B, subset_by_index=[N - k, N - 1], check_finite=False)
    else:
        v0 = np.random.default_rng(0).normal(size=N)  # a fixed start: the same map on every call
        w, V = scipy.sparse.linalg.eigsh(B, k=k, which="LA", v0=v0, tol=1e-10)
    order = np.argsort(w)[::-1]
    w, V = w[order], V[:, order]
    d = min(n_components, k)
    Y = V[:, :d] * np.sqrt(np.maximum(w[:d], 0.0))
    return FullMDS(Y=Y, eigenvalues=w, trace=float(np.trace(B)))


def cmds_pipeline(metric: str = "euclidean") -> Callable[[np.ndarray, int], np.ndarray]:
    """``classical_mds`` of the ``metric`` distances between feature rows X (N, p), as a pipeline (X, d) -> (N, d) for
    the indices of ``consistency_index`` (the full map ``evaluate`` compares landmark maps with)."""
    def run(X: np.ndarray, d: int) -> np.ndarray:
        D = scipy.spatial.distance.squareform(scipy.spatial.distance.pdist(np.asarray(X, dtype=np.float64), metric))
        return classical_mds(D, d).Y

    return run


def procrustes_share(Y: np.ndarray, Y_ref: np.ndarray) -> float:
    """RMS distance of Y (N, d) to Y_ref (N, d) after the best rotation/reflection and translation of Y,
    divided by Y_ref's RMS radius about its centroid (unitless; 0: the same map up to a rigid motion).

    No scaling: a landmark map and the full map share the units of the dissimilarities.
    """
    fit = orthogonal_procrustes_align(Y, Y_ref)
    R = np.asarray(Y_ref, dtype=np.float64)
    radius = float(np.sqrt(np.square(R - R.mean(axis=0)).sum(axis=1).mean()))
    return fit.residual / radius if radius > 0 else float("nan")


class NeighbourRanks:
    """Ranks of every object among each object's neighbours in the input space, computed once.

    ``ranks[i, j]`` = p when j is i's p-th nearest object (ties by index; ranks[i, i] = 0):
    (N, N) int32, 4 N² bytes.
    """

    def __init__(self, D: np.ndarray):
        self.ranks = neighbour_ranks(D)[1]
        self.N = int(self.ranks.shape[0])


def trustworthiness(ranks: NeighbourRanks, Y: np.ndarray, k: int = 10) -> float:
    """Trustworthiness (module docstring) of the map Y (N, d) against input-space ``ranks``.

    Equals ``trustworthiness_continuity(D, Y, k)[0]`` (up to ties among map distances), with the
    map's k nearest neighbours found by a k-d tree instead of a full sort.
    """
    Y = np.asarray(Y, dtype=np.float64)
    N = ranks.N
    if Y.shape[0] != N:
        raise InputError(f"Y has {Y.shape[0]} rows, the ranks describe {N} points")
    if k < 1 or 2 * N - 3 * k - 1 <= 0:
        raise InputError(f"k must satisfy 1 <= k < (2N - 1)/3 = {(2 * N - 1) / 3:.1f}, got {k}")
    _, nn = scipy.spatial.cKDTree(Y).query(Y, k=k + 1)
    rows = np.arange(N)[:, None]
    nn = nn[:, 1:] if (nn[:, 0] == np.arange(N)).all() else _drop_self(nn, k)
    penalty = np.maximum(ranks.ranks[rows, nn] - k, 0).sum(dtype=np.int64)
    return 1.0 - 2.0 / (N * k * (2 * N - 3 * k - 1)) * float(penalty)


def _drop_self(nn: np.ndarray, k: int) -> np.ndarray:
    """The k neighbours other than the point itself (a duplicate map point may come first)."""
    self_ = nn == np.arange(nn.shape[0])[:, None]
    no_self = ~self_.any(axis=1)
    self_[no_self, -1] = True  # the self was beyond k + 1: drop the farthest instead
    return nn[~self_].reshape(nn.shape[0], k)


class PairRanks:
    """Pairs i < j of N objects (all, or a seeded uniform sample of ``max_pairs``) and the ranks of their
    input dissimilarities, computed once so that many maps can be scored (``spearman_agreement``)."""

    def __init__(self, D: np.ndarray, max_pairs: int = 100_000, seed: int = 0):
        D = np.asarray(D, dtype=np.float64)
        N = D.shape[0]
        if D.ndim != 2 or D.shape != (N, N) or N < 2:
            raise InputError(f"D must be an (N, N) matrix with N ≥ 2, got {D.shape}")
        if max_pairs >= N * (N - 1) // 2:
            i, j = np.triu_indices(N, 1)
        else:
            i, j = np.random.default_rng(seed).integers(N, size=(2, max_pairs))
            keep = i != j
            i, j = i[keep], j[keep]
        self.N, self.i, self.j = N, i, j
        self.ranks = _centred_unit(scipy.stats.rankdata(D[i, j]))


def _centred_unit(r: np.ndarray) -> np.ndarray:
    r = r - r.mean()
    norm = float(np.sqrt(r @ r))
    return r / norm if norm > 0 else r


def spearman_agreement(D: np.ndarray | PairRanks, Y: np.ndarray, max_pairs: int = 100_000, seed: int = 0) -> float:
    """Spearman ρ between map distances ‖y_i − y_j‖ and input dissimilarities δ(i, j) over pairs i < j.

    Args:
        D: (N, N) input dissimilarities, or their ``PairRanks`` (reused across maps).
        Y: (N, d) map.
        max_pairs: above this many pairs, a seeded uniform sample of pairs is used (ignored for PairRanks).
    Ties get average ranks; ρ is the Pearson correlation of the ranks (NaN when either side is constant).
    """
    pr = D if isinstance(D, PairRanks) else PairRanks(D, max_pairs, seed)
    Y = np.asarray(Y, dtype=np.float64)
    if Y.shape[0] != pr.N:
        raise InputError(f"Y has {Y.shape[0]} rows, the dissimilarities describe {pr.N} objects")
    e = np.sqrt(np.square(Y[pr.i] - Y[pr.j]).sum(axis=1))
    r = _centred_unit(scipy.stats.rankdata(e))
    if not (r.any() and pr.ranks.any()):
        return float("nan")
    return float(r @ pr.ranks)


def subspace_distance(Y: np.ndarray, Y_ref: np.ndarray) -> float:
    """sin of the largest principal angle between the column spaces of the centred Y and Y_ref (N, d) in R^N.

    0: the two maps lie in one d-dimensional subspace of the objects (equal up to a linear map);
    1: some direction of one is orthogonal to the other. The full classical MDS's plane is unstable
    to small changes when its λ_d and λ_{d+1} are close (Davis–Kahan), and so is this distance.
    """
    Qa = np.linalg.qr(np.asarray(Y, dtype=np.float64) - np.mean(Y, axis=0))[0]
    Qb = np.linalg.qr(np.asarray(Y_ref, dtype=np.float64) - np.mean(Y_ref, axis=0))[0]
    if Qa.shape != Qb.shape:
        raise InputError(f"Y and Y_ref must have one shape, got {np.shape(Y)} and {np.shape(Y_ref)}")
    # ‖(I − Qb Qbᵀ) Qa‖₂ = sin θ_max, accurate for small angles (1 − cos² is not)
    return float(np.linalg.norm(Qa - Qb @ (Qb.T @ Qa), 2))
