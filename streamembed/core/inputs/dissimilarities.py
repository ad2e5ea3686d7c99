"""Dissimilarities for landmark selection: a full (N, N) matrix, or objects (N, p features) with a metric
(``core.inputs.metrics``) computed a few rows at a time (docs/math.md §5; ``core.refit.landmarks`` and
``core.refit.strategies`` read them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from .metrics import DEFAULT_METRIC, resolve_metric

__all__ = ["CHUNK", "Dissimilarities", "as_dissimilarities"]


#: Rows of a feature-mode dissimilarity matrix computed at once (memory ≈ CHUNK · N floats).
CHUNK = 256


class Dissimilarities:
    """Rows of an (N, N) dissimilarity matrix: given whole, or computed from features on demand.

    Args:
        D: (N, N) dissimilarities, or None.
        X: (N, p) features, or N objects (strings, series: ``core.inputs.objects``), or None (exactly one of
            D, X): the objects ``metric`` takes.
        metric: a metric of ``core.inputs.metrics`` (a name, ``module:function`` or a ``Metric``) for X.

    ``computed`` counts the dissimilarities the metric has computed so far (what a selection from objects cost).
    """

    def __init__(self, D: np.ndarray | None = None, X: np.ndarray | None = None, metric: Any = DEFAULT_METRIC):
        if (D is None) == (X is None):
            raise InputError("landmark selection needs exactly one of D (dissimilarities) or X (features)")
        self.D = None if D is None else np.asarray(D)
        self._metric = None if X is None else resolve_metric(metric)
        self.X = None if X is None or self._metric is None else self._metric.objects(X, "X")
        self.metric = metric
        self.N = int(self.D.shape[0] if self.D is not None else self._features().shape[0])
        self._sq_means: np.ndarray | None = None
        self.computed = 0

    def rows(self, idx: np.ndarray | list[int]) -> np.ndarray:
        """(len(idx), N) float64: the dissimilarities of objects ``idx`` to every object."""
        idx = np.asarray(idx, dtype=np.int64)
        if self.D is not None:
            return np.asarray(self.D[idx], dtype=np.float64)
        X = self._features()
        return self._between(X[idx], X)

    def block(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """(len(rows), len(cols)) float64 dissimilarities."""
        if self.D is not None:
            return np.asarray(self.D[np.ix_(rows, cols)], dtype=np.float64)
        X = self._features()
        return self._between(X[rows], X[cols])

    def _between(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        assert self._metric is not None  # objects are given (__init__)
        self.computed += len(a) * len(b)
        return self._metric(a, b)

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


def as_dissimilarities(D: np.ndarray | Dissimilarities | None, X: np.ndarray | None, metric: str) -> Dissimilarities:
    """``D`` itself if it is a ``Dissimilarities`` already, else one over the matrix D (N, N) or the features X (N, p)
    under ``metric`` (the selection strategies accept any of the three)."""
    return D if isinstance(D, Dissimilarities) else Dissimilarities(D, X, metric)
