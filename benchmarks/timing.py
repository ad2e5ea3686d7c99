"""Timing and synthetic problems shared by the benchmarks (``bench``, ``bench_block``, ``bench_e2e``).

Timings are best-of-repeats with a time budget: on a shared, noisy machine
only ratios taken in one run mean anything (docs/performance.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

__all__ = ["best_time", "make_points", "euclidean", "landmark_matrix"]


def best_time(fn: Callable[[], object], repeat: int, min_seconds: float = 0.02, budget_seconds: float = 10.0) -> float:
    """Seconds per call of ``fn``: best of up to ``repeat`` runs of enough calls to last ``min_seconds``.

    Repeats stop early once ``budget_seconds`` have been spent (a loaded machine
    must not stretch a run without bound).
    """
    start = time.perf_counter()
    fn()  # warm-up (thread pools, kernels, caches)
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - t0
        if elapsed >= min_seconds or number >= 1 << 16:
            break
        number = min(number * max(2, int(min_seconds / max(elapsed, 1e-6))), 1 << 16)
    best = elapsed / number
    for _ in range(repeat - 1):
        if time.perf_counter() - start > budget_seconds:
            break
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def make_points(n: int, m: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Landmarks (n, 2d) and objects (m, 2d) from N(0, I) in R^(2d): objects lie off the d-dim map."""
    rng = np.random.default_rng(seed)
    p = max(2 * d, 2)
    return rng.standard_normal((n, p)), rng.standard_normal((m, p))


def euclidean(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """(a, b) Euclidean distances between rows of P (a, p) and Q (b, p), float64."""
    sq = (P * P).sum(1)[:, None] + (Q * Q).sum(1)[None, :] - 2.0 * (P @ Q.T)
    return np.sqrt(np.maximum(sq, 0.0))


def landmark_matrix(Lm: np.ndarray) -> np.ndarray:
    """(n, n) exactly symmetric Euclidean distances with a zero diagonal."""
    D = euclidean(Lm, Lm)
    D = 0.5 * (D + D.T)
    np.fill_diagonal(D, 0.0)
    return D
