"""Dynamic time warping between series, in numpy (no DTW package): the non-metric dissimilarity of the input hints.

``dtw_matrix(S)`` is the classic DTW (absolute-difference cost, steps (1, 0), (0, 1), (1, 1), no window) between
every pair of rows of S (m, L), vectorised over the pairs: L² steps of numpy work on m(m - 1)/2 pairs. DTW is
symmetric and zero on the diagonal but violates the triangle inequality (warping lets a middle series match both
ends cheaply), so it is a dissimilarity that is neither a metric nor squared.

``eeg_series()`` is a UCR-like set of real series: windows of the EEG recording (4 channels x 800 samples) and of
the membrane-potential recording that matplotlib ships as sample data, each window z-normalised as the UCR
archive's series are.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["dtw_pairs", "dtw_matrix", "dtw_cross", "eeg_series"]


def dtw_pairs(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """(P,) DTW between row i of A (P, L) and row i of B (P, L): absolute-difference cost, steps (1, 0), (0, 1),
    (1, 1), no window; L² steps of numpy work over the P pairs at once."""
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    L = A.shape[1]
    prev = np.full((A.shape[0], L + 1), np.inf)
    prev[:, 0] = 0.0
    for a in range(1, L + 1):
        cur = np.full_like(prev, np.inf)
        cost = np.abs(A[:, a - 1:a] - B)
        for b in range(1, L + 1):
            cur[:, b] = cost[:, b - 1] + np.minimum(np.minimum(prev[:, b], cur[:, b - 1]), prev[:, b - 1])
        prev = cur
    return prev[:, L]


def dtw_matrix(S: np.ndarray) -> np.ndarray:
    """(m, m) DTW dissimilarities between the rows of S (m, L), float64."""
    S = np.asarray(S, dtype=np.float64)
    m = S.shape[0]
    i, j = np.triu_indices(m, 1)
    D = np.zeros((m, m))
    D[i, j] = D[j, i] = dtw_pairs(S[i], S[j])
    return D


def dtw_cross(S: np.ndarray, T: np.ndarray, chunk: int = 400_000) -> np.ndarray:
    """(len(S), len(T)) DTW between the rows of S (a, L) and T (b, L), ``chunk`` pairs at a time."""
    S, T = np.asarray(S, dtype=np.float64), np.asarray(T, dtype=np.float64)
    P, Q = np.meshgrid(np.arange(S.shape[0]), np.arange(T.shape[0]), indexing="ij")
    P, Q = P.ravel(), Q.ravel()
    out = np.empty(P.size)
    for s in range(0, P.size, chunk):
        out[s:s + chunk] = dtw_pairs(S[P[s:s + chunk]], T[Q[s:s + chunk]])
    return out.reshape(S.shape[0], T.shape[0])


def eeg_series(length: int = 40, eeg_step: int = 20, membrane_step: int = 120) -> np.ndarray:
    """(m, length) z-normalised windows of matplotlib's sample EEG and membrane-potential recordings."""
    import matplotlib

    data = os.path.join(os.path.dirname(matplotlib.__file__), "mpl-data", "sample_data")
    eeg = np.fromfile(os.path.join(data, "eeg.dat"), dtype=np.float64).reshape(800, 4).T
    membrane = np.fromfile(os.path.join(data, "membrane.dat"), dtype="<f4").astype(np.float64)
    windows = [ch[s:s + length] for ch in eeg for s in range(0, ch.size - length, eeg_step)]
    windows += [membrane[s:s + length] for s in range(0, membrane.size - length, membrane_step)]
    S = np.asarray(windows)
    return (S - S.mean(axis=1, keepdims=True)) / (S.std(axis=1, keepdims=True) + 1e-12)
