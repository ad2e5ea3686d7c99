"""Split conformal quantiles of calibration scores (docs/math.md §9.2).

Given n calibration scores s_1..s_n exchangeable with a new object's score
s, the ⌈(n + 1)·c⌉-th smallest of them, q̂, satisfies P(s ≤ q̂) ≥ c (Vovk,
Gammerman and Shafer 2005; Lei et al. 2018): the rank counts the new object
as one more draw. When ⌈(n + 1)·c⌉ > n no finite q̂ has that guarantee: the
calibration needs n ≥ c/(1 − c) = 1/(1 − c) − 1 objects (9 for c = 0.9).
The convention is crepes' ``ConformalRegressor`` (the scores in descending
order at index int((1 − c)(n + 1)) − 1: the same order statistic, no
interpolation); ``np.quantile(s, k/n, method="higher")`` would take the one
above it.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InputError

__all__ = ["DEFAULT_COVERAGE", "check_coverage", "conformal_rank", "conformal_quantile", "min_calibration_objects"]

#: The stated probability that an object's full-MDS position lies within its radius.
DEFAULT_COVERAGE = 0.9


def check_coverage(coverage: object) -> float:
    """``coverage`` as a float in (0, 1); InputError otherwise (a probability of 0 or 1 states nothing)."""
    if isinstance(coverage, bool) or not isinstance(coverage, (int, float, np.floating, np.integer)):
        raise InputError(f"coverage must be a number in (0, 1), got {coverage!r}")
    c = float(coverage)
    if not 0.0 < c < 1.0:
        raise InputError(f"coverage must lie strictly between 0 and 1, got {c!r}")
    return c


def conformal_rank(n: int, coverage: float) -> int:
    """The 1-based rank ⌈(n + 1)·c⌉ of the calibration score that is the conformal quantile (may exceed n).

    Computed with a relative guard so that (n + 1)·c landing on an integer up to round-off (e.g. 10 × 0.9)
    is not pushed one rank up.
    """
    x = (int(n) + 1) * float(coverage)
    return int(math.ceil(x - 1e-9 * max(1.0, x)))


def min_calibration_objects(coverage: float) -> int:
    """The fewest calibration objects for which ``conformal_rank(n, c) ≤ n``: ⌈c/(1 − c)⌉ up to round-off."""
    c = check_coverage(coverage)
    n = max(1, int(math.floor(c / (1.0 - c))) - 1)
    while conformal_rank(n, c) > n:
        n += 1
    return n


def conformal_quantile(scores: np.ndarray, coverage: float) -> float:
    """q̂: the ``conformal_rank(n, c)``-th smallest of the n finite-or-infinite ``scores`` (inf when the rank
    exceeds n: too few scores for the coverage). NaN scores are refused: a score must be defined."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    if np.isnan(s).any():
        raise InputError("conformal scores must not be NaN")
    k = conformal_rank(s.size, check_coverage(coverage))
    if k > s.size:
        return float("inf")
    return float(np.partition(s, k - 1)[k - 1])
