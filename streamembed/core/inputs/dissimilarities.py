"""Dissimilarities for landmark selection: a full (N, N) matrix, or features (N, p) with a scipy metric
computed a few rows at a time (docs/math.md §5; ``core.refit.landmarks`` and ``core.refit.strategies`` read them).
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError

__all__ = ["CHUNK", "Dissimilarities"]


#: Rows of a feature-mode dissimilarity matrix computed at once (memory ≈ CHUNK · N floats).
CHUNK = 256


class Dissimilarities:
    """Rows of an (N, N) dissimilarity matrix: given whole, or computed from features on demand.

    Args:
        D: (N, N) dissimilarities, or None.
        X: (N, p) features, or None (exactly one of D, X).
        metric: scipy ``cdist`` metric for X.
    """

    def __init__(self, D: np.ndarray | None = None, X: np.ndarray | None = None, metric: str = "euclidean"):
        if (D is None) == (X is None):
            raise InputError("landmark selection needs exactly one of D (dissimilarities) or X (features)")
        self.D = None if D is None else np.asarray(D)
        self.X = None if X is None else np.asarray(X, dtype=np.float64)
        self.metric = metric
        self.N = int(self.D.shape[0] if self.D is not None else self._features().shape[0])
        self._sq_means: np.ndarray | None = None

    def rows(self, idx: np.ndarray | list[int]) -> np.ndarray:
        """(len(idx), N) float64: the dissimilarities of objects ``idx`` to every object."""
        idx = np.asarray(idx, dtype=np.int64)
        if self.D is not None:
            return np.asarray(self.D[idx], dtype=np.float64)
        import scipy.spatial.distance  # lazily: keeps `streamembed embed`'s start-up short

        X = self._features()
        return scipy.spatial.distance.cdist(X[idx], X, metric=self.metric)

    def block(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """(len(rows), len(cols)) float64 dissimilarities."""
        if self.D is not None:
            return np.asarray(self.D[np.ix_(rows, cols)], dtype=np.float64)
        import scipy.spatial.distance  # lazily: keeps `streamembed embed`'s start-up short

        X = self._features()
        return scipy.spatial.distance.cdist(X[rows], X[cols], metric=self.metric)

    def _features(self) -> np.ndarray:
        """X (N, p), for dissimilarities given by features."""
        assert self.X is not None  # one of D and X (__init__)
        return self.X

    def squared_row_means(self) -> np.ndarray:
        """(N,) mean over j of δ²(i, j): in chunks of ``CHUNK`` rows, or in O(N p) for Euclidean features
        (mean_j ‖x_i − x_j‖² = ‖x_i − x̄‖² + mean_j ‖x_j − x̄‖²)."""
        if self._sq_means is None and self.X is not None and self.metric == "euclidean":
            sq = np.square(self.X - self.X.mean(axis=0)).sum(axis=1)
            self._sq_means = sq + sq.mean()
        if self._sq_means is None:
            out = np.empty(self.N)
            for start in range(0, self.N, CHUNK):
                stop = min(start + CHUNK, self.N)
                out[start:stop] = np.square(self.rows(np.arange(start, stop))).mean(axis=1)
            self._sq_means = out
        return self._sq_means


def _as_dissimilarities(D: np.ndarray | Dissimilarities | None, X: np.ndarray | None, metric: str) -> Dissimilarities:
    return D if isinstance(D, Dissimilarities) else Dissimilarities(D, X, metric)
