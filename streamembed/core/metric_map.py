"""Metric-MDS landmark maps: SMACOF stress and Sammon mapping (seed 001 §2.2 eq. 17, §3 eq. 22–25).

Classical MDS fits inner products; metric MDS fits the distances themselves.
Starting from the CMDS configuration X0 (n, d) (seed 001 §3: "the classical
MDS or PCA is used for initialization"), the landmark configuration is refined
by minimising

    smacof  σ(X) = Σ_{i<j} (‖x_i - x_j‖ - δ_ij)²                   (raw stress, eq. 17 squared)
    sammon  S(X) = (1/Σ_{i<j} δ_ij) Σ_{i<j} (‖x_i - x_j‖ - δ_ij)² / δ_ij   (eq. 25)

Both are solved by majorisation (de Leeuw's SMACOF: the Guttman transform
X ← V⁺ B(X) X with weights w_ij = 1 for stress and 1/δ_ij for Sammon),
which never increases the criterion, instead of Sammon's diagonal
quasi-Newton with a "magic factor" (eq. 18): same criterion, monotone and
without a step size to tune. The result is centred (mean zero), so the
landmark centring of MATH.md §2 still places the origin at the landmarks'
centroid. Units: X in distance units; σ in squared distance units; S in
distance units.

A refined map is no longer X = U Λ^{1/2}: projection and kernel restricted
reconstruction (MATH.md §3) belong to the CMDS map. Arrivals are placed on
it with the stress criterion (restricted reconstruction for a stress-built
map, seed 000 end of §4) or the L1 criterion (``criteria``).
"""

from __future__ import annotations

import numpy as np

from .errors import InputError

LANDMARK_MAPS = ("cmds", "smacof", "sammon")
#: Majorisation stops when the criterion decreases by less than this share in one sweep.
MAP_RTOL = 1e-9
MAP_MAX_ITER = 1000


def _distances(X: np.ndarray) -> np.ndarray:
    G = X @ X.T
    sq = np.diagonal(G)
    return np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * G, 0.0))


def map_stress(X: np.ndarray, D: np.ndarray, kind: str) -> float:
    """The criterion of ``kind`` ("smacof" raw stress or "sammon") of X (n, d) against D (n, n)."""
    iu = np.triu_indices(D.shape[0], 1)
    diff = _distances(X)[iu] - D[iu]
    if kind == "sammon":
        return float((np.square(diff) / D[iu]).sum() / D[iu].sum())
    return float(np.square(diff).sum())


def refine_map(X0: np.ndarray, D: np.ndarray, kind: str, max_iter: int = MAP_MAX_ITER, rtol: float = MAP_RTOL) -> tuple[np.ndarray, float, int]:
    """Refine the landmark configuration X0 (n, d) against dissimilarities D (n, n).

    Args:
        kind: "smacof" or "sammon".
    Returns:
        X: (n, d) centred refined configuration.
        criterion: its final criterion value (``map_stress``).
        iterations: majorisation sweeps done.
    """
    if kind not in ("smacof", "sammon"):
        raise InputError(f"landmark_map must be one of {LANDMARK_MAPS}, got {kind!r}")
    n = D.shape[0]
    X = np.asarray(X0, dtype=np.float64) - np.asarray(X0).mean(axis=0)
    off = ~np.eye(n, dtype=bool)
    if kind == "sammon":
        if (D[off] <= 0).any():
            i, j = np.argwhere((D <= 0) & off)[0]
            raise InputError(f"Sammon mapping needs positive dissimilarities between distinct landmarks: "
                             f"D[{i}, {j}] = {D[i, j]} (duplicate landmarks?)")
        W = np.zeros_like(D)
        W[off] = 1.0 / D[off]
        V = -W
        np.fill_diagonal(V, W.sum(axis=1))
        J = np.full((n, n), 1.0 / n)
        Vplus = np.linalg.inv(V + J) - J
        WD = W * D  # = 1 off the diagonal
    else:
        Vplus = None
        WD = D
    prev = map_stress(X, D, kind)
    it = 0
    for it in range(1, max_iter + 1):
        dist = _distances(X)
        with np.errstate(divide="ignore", invalid="ignore"):
            Bm = np.where(dist > 0, -WD / dist, 0.0)
        np.fill_diagonal(Bm, 0.0)
        np.fill_diagonal(Bm, -Bm.sum(axis=1))
        X = (Bm @ X) / n if Vplus is None else Vplus @ (Bm @ X)
        X -= X.mean(axis=0)
        cur = map_stress(X, D, kind)
        if prev - cur <= rtol * max(prev, 1e-300):
            prev = cur
            break
        prev = cur
    return X, prev, it
