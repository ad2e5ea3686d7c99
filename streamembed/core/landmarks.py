"""Choosing landmarks: max–min (farthest-point) selection (MATH.md §5)."""

from __future__ import annotations

import numpy as np
import scipy.spatial.distance

from .errors import InputError


def maxmin_select(
    n_select: int,
    D: np.ndarray | None = None,
    X: np.ndarray | None = None,
    metric: str = "euclidean",
    first: int = 0,
    required: np.ndarray | None = None,
) -> np.ndarray:
    """Indices of ``n_select`` objects chosen by max–min selection.

    Each new pick is the object farthest from all picks so far, which spreads
    landmarks over the data and keeps outliers of the current stream in view.
    Give either a full dissimilarity matrix D (N, N) or features X (N, p) with
    a scipy metric (distances are then computed one row at a time, O(N·p) memory).

    Args:
        n_select: how many to choose (≤ N).
        first: the first pick when ``required`` is empty.
        required: indices that must be kept (e.g. old landmarks); picked first.
    """
    if (D is None) == (X is None):
        raise InputError("maxmin_select needs exactly one of D or X")
    N = D.shape[0] if D is not None else X.shape[0]
    if not 1 <= n_select <= N:
        raise InputError(f"n_select must be between 1 and {N}, got {n_select}")

    def row(i: int) -> np.ndarray:
        if D is not None:
            return np.asarray(D[i], dtype=np.float64)
        return scipy.spatial.distance.cdist(X[i : i + 1], X, metric=metric)[0]

    picks = [int(i) for i in (required if required is not None else [])][:n_select]
    if not picks:
        picks = [int(first)]
    mind = np.full(N, np.inf)
    for i in picks:
        mind = np.minimum(mind, row(i))
    mind[picks] = -1.0
    while len(picks) < n_select:
        i = int(np.argmax(mind))
        picks.append(i)
        mind = np.minimum(mind, row(i))
        mind[i] = -1.0
    return np.asarray(picks, dtype=np.int64)
