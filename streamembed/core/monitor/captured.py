"""How much of a set of objects' variance the map holds, against the best d-dimensional map of the same objects.

One measure, two users (docs/math.md §7.5, §7.7):

* the refit policy (``core.refit.policy``) scores the map in service and
  every candidate on the recent objects whose mutual dissimilarities it has
  ("the map holds 33 % of the best 2-dimensional map's variance of the
  recent objects"), the best map being their own classical MDS;
* the in-map drift statistic (``core.monitor.plane``) computes the same
  ratio over blocks of the stream, the objects represented by their
  projections on the map's leading monitored axes (the best map of a block
  is then the top-d principal plane of those projections).

``captured_variance`` is the mean squared distance of the map's coordinates
of the objects to their centroid: projections are orthogonal in the kernel's
feature space, so it is the part of the objects' variance that the map's
d-plane holds. ``best_captured_variance`` is the most any d-plane holds: the
sum of the top d eigenvalues of the objects' centred Gram matrix, over the
number of objects (docs/math.md §1). ``captured_share`` is their ratio, in
[0, 1] when the map's coordinates are part of the representation (≤ 1 by
Ky Fan's maximum principle), NaN when it cannot be measured: fewer than
d + 1 objects, or objects without variance.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..fit.eigen import top_eigenvalues

__all__ = ["captured_variance", "best_captured_variance", "captured_share", "centred_kernel", "NOT_ENOUGH"]

#: The reason a share is NaN, for logs and gauges.
NOT_ENOUGH = "not enough objects"


def captured_variance(Y: np.ndarray) -> float:
    """Mean squared distance of the rows of Y (m, d) to their centroid (NaN for m = 0)."""
    Y = np.asarray(Y, dtype=np.float64)
    if Y.shape[0] == 0:
        return math.nan
    C = Y - Y.mean(axis=0)
    return float(np.einsum("ij,ij->", C, C)) / Y.shape[0]


def centred_kernel(D: np.ndarray) -> np.ndarray:
    """The double-centred kernel K = −½ J D² J (m, m) of dissimilarities D (m, m) (docs/math.md §1)."""
    D2 = np.square(np.asarray(D, dtype=np.float64))
    r = D2.mean(axis=1)
    return -0.5 * (D2 - r[:, None] - r[None, :] + r.mean())


def best_captured_variance(d: int, *, X: np.ndarray | None = None, K: np.ndarray | None = None) -> float:
    """The variance the best d-plane holds of m objects: Σ_{j≤d} max(λ_j, 0) / m.

    Either X (m, p), the objects' coordinates in a Euclidean representation
    (centred here; the eigenvalues of the smaller of XᵀX and XXᵀ), or K (m, m),
    their centred Gram matrix (``centred_kernel``). NaN when m < 1.
    """
    if (X is None) == (K is None):
        raise ValueError("give exactly one of X and K")
    if K is None:
        assert X is not None
        A = np.asarray(X, dtype=np.float64)
        m = A.shape[0]
        if m == 0:
            return math.nan
        A = A - A.mean(axis=0)
        G = A.T @ A if A.shape[1] <= m else A @ A.T
    else:
        G = np.asarray(K, dtype=np.float64)
        m = G.shape[0]
        if m == 0:
            return math.nan
    k = min(int(d), G.shape[0])
    # small: numpy's dense solver (top_eigenvalues' subset and iterative paths would only add overhead)
    w = np.linalg.eigvalsh(0.5 * (G + G.T))[::-1][:k] if G.shape[0] <= 64 else top_eigenvalues(G, k)
    return float(np.maximum(w, 0.0).sum()) / m


def captured_share(Y: np.ndarray, d: int, *, X: np.ndarray | None = None, K: np.ndarray | None = None) -> Any:
    """``captured_variance(Y) / best_captured_variance(d, X=X, K=K)`` for the same m objects (module doc).

    Y (m, d) are the objects' map coordinates. NaN ("not enough objects") when m ≤ d or when the best
    d-plane holds no variance (all objects identical). Stacked sets — Y (G, m, d) with X (G, m, q) — give
    the (G,) shares of G sets of m objects at once (batched eigenvalues: the in-map statistic's blocks).
    """
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim == 3:
        if X is None or K is not None:
            raise ValueError("stacked sets take X (G, m, q)")
        return _stacked_shares(Y, np.asarray(X, dtype=np.float64), int(d))
    m = Y.shape[0]
    if m <= int(d):
        return math.nan
    best = best_captured_variance(d, X=X, K=K)
    cap = captured_variance(Y)
    if not (math.isfinite(best) and best > 1e-300 * max(1.0, cap)):
        return math.nan
    return cap / best


def _stacked_shares(Y: np.ndarray, X: np.ndarray, d: int) -> np.ndarray:
    G, m, q = X.shape
    if G == 0:
        return np.empty(0)
    if m <= d:
        return np.full(G, math.nan)
    Yc = Y - Y.mean(axis=1, keepdims=True)
    cap = np.einsum("gij,gij->g", Yc, Yc) / m
    Xc = X - X.mean(axis=1, keepdims=True)
    Gram = np.matmul(Xc.transpose(0, 2, 1), Xc) if q <= m else np.matmul(Xc, Xc.transpose(0, 2, 1))
    w = np.linalg.eigvalsh(Gram)[:, ::-1][:, : min(d, Gram.shape[1])]
    best = np.maximum(w, 0.0).sum(axis=1) / m
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(best > 1e-300 * np.maximum(1.0, cap), cap / best, math.nan)
