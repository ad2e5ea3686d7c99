"""Exact global minimisers of the stress and L1 criteria on a line (d = 1; docs/math.md §3 "Other criteria").

With one coordinate both criteria are piecewise quadratic in y with known
breakpoints, so their global minimum is found by visiting every piece once:

stress  σ(y) = Σ_i (|y - x_i| - δ_i)².  Between consecutive sorted landmarks
        the signs s_i = sign(y - x_i) are fixed and σ(y) = Σ_i (y - a_i)² with
        a_i = x_i + s_i δ_i: a convex parabola whose minimiser, the mean of the
        a_i, is clipped to the interval. n + 1 pieces. With weights w_i
        (Sammon's criterion) the same, with the weighted mean.
L1      ℓ(y) = Σ_i |(y - x_i)² - δ_i²|.  Between consecutive sorted breakpoints
        x_i ± δ_i the signs s_i of the residuals are fixed and
        ℓ(y) = K y² - 2 W y + C with K = Σ s_i, W = Σ s_i x_i,
        C = Σ s_i (x_i² - δ_i²); the minimum over a piece is at an end or,
        when K > 0, at W / K. 2n + 1 pieces.

The coefficients of all pieces are cumulative sums along the sorted
breakpoints: O(n log n) per object, vectorised over the batch. The winning
piece is chosen with these closed forms (coordinates are centred first to
limit cancellation) and the criterion is then re-evaluated directly at the
winner. Ties between distinct minimisers (within ``TIE_RTOL`` of the
criterion's scale) are resolved by taking the smallest y and reported.

Units: y, x in distance units; σ, ℓ in squared distance units.
"""

from __future__ import annotations

import numpy as np

#: Two candidate minima whose criteria differ by less than this share of the
#: criterion's scale (Σδ² + n·spread²) count as tied.
TIE_RTOL = 1e-10


def _tied(values: np.ndarray, best: np.ndarray, where: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """(m, p) mask of candidates within the tie tolerance of the row's best."""
    return where & (values <= best[:, None] + TIE_RTOL * scale[:, None])


def _pick(values: np.ndarray, points: np.ndarray, scale: np.ndarray, length: float) -> tuple[np.ndarray, np.ndarray]:
    """Smallest candidate per row (m, p) -> (y (m,), ambiguous (m,)): leftmost among ties."""
    finite = np.isfinite(values)
    best = np.where(finite, values, np.inf).min(axis=1)
    tied = _tied(values, best, finite, scale)
    y = np.where(tied, points, np.inf).min(axis=1)
    far = np.where(tied, points, -np.inf).max(axis=1)
    return y, far - y > 1e-9 * length


def stress_line(x: np.ndarray, delta: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Global minimisers of σ on a line.

    Args:
        x: (n,) landmark coordinates.
        delta: (m, n) dissimilarities (≥ 0) of m objects to the landmarks.
        weights: (m, n) ≥ 0, or None (all 1): minimise Σ_i w_i (|y - x_i| - δ_i)², whose piece j
            is Σ_i w_i (y - a_i)², minimised at the weighted mean of the a_i.
    Returns:
        y: (m,) the leftmost global minimiser of each row.
        ambiguous: (m,) True where another, distinct point attains the same minimum.
    """
    x = np.asarray(x, dtype=np.float64)
    c = x.mean()
    order = np.argsort(x, kind="stable")
    xs = x[order] - c  # centred, sorted
    ds = np.asarray(delta, dtype=np.float64)[:, order]
    m, n = ds.shape
    ws = np.ones((m, n)) if weights is None else np.asarray(weights, dtype=np.float64)[:, order]
    zero = np.zeros((m, 1))
    wd = ws * ds
    cum_d = np.hstack([zero, np.cumsum(wd, axis=1)])  # Σ_{i<j} w_i δ_i, (m, n + 1)
    cum_xd = np.hstack([zero, np.cumsum(xs * wd, axis=1)])
    tot_d, tot_xd = cum_d[:, -1:], cum_xd[:, -1:]
    W = ws.sum(axis=1, keepdims=True)
    # piece j: landmarks 0..j-1 left of y (a_i = x_i + δ_i), the rest right (a_i = x_i - δ_i)
    mean = ((ws * xs).sum(axis=1, keepdims=True) - tot_d + 2.0 * cum_d) / W
    sum_a2 = ((ws * np.square(xs)).sum(axis=1, keepdims=True) + (wd * ds).sum(axis=1, keepdims=True)
              + 2.0 * (2.0 * cum_xd - tot_xd))
    lo = np.concatenate([[-np.inf], xs])
    hi = np.concatenate([xs, [np.inf]])
    y = np.clip(mean, lo, hi)
    values = W * np.square(y - mean) + (sum_a2 - W * np.square(mean))
    scale = (wd * ds).sum(axis=1) + W[:, 0] * (np.square(xs).mean() + 1e-300)
    best, ambiguous = _pick(values, y, scale, float(np.sqrt(np.square(xs).mean())))
    return best + c, ambiguous


def l1_line(x: np.ndarray, delta2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Global minimisers of ℓ on a line.

    Args:
        x: (n,) landmark coordinates.
        delta2: (m, n) squared dissimilarities (≥ 0).
    Returns:
        y: (m,) the leftmost global minimiser of each row.
        ambiguous: (m,) True where another, distinct point attains the same minimum.
    """
    x = np.asarray(x, dtype=np.float64)
    c = x.mean()
    xc = x - c
    d2 = np.asarray(delta2, dtype=np.float64)
    m, n = d2.shape
    dl = np.sqrt(d2)
    # breakpoints x_i - δ_i (residual turns negative: s_i + -> -) and x_i + δ_i (back to +)
    points = np.hstack([xc - dl, xc + dl])  # (m, 2n)
    sign = np.concatenate([-np.ones(n), np.ones(n)])  # change of s_i at each breakpoint, / 2
    order = np.argsort(points, axis=1, kind="stable")
    bp = np.take_along_axis(points, order, axis=1)
    ds = sign[order]
    xi = np.concatenate([xc, xc])[order]
    ci = np.take_along_axis(np.hstack([np.square(xc) - d2, np.square(xc) - d2]), order, axis=1)
    zero = np.zeros((m, 1))
    # coefficients of piece j (left of breakpoint j, for j = 0..2n): all + at -inf, then cumulative flips
    K = n + 2.0 * np.hstack([zero, np.cumsum(ds, axis=1)])
    W = xc.sum() + 2.0 * np.hstack([zero, np.cumsum(ds * xi, axis=1)])
    C = (np.square(xc) - d2).sum(axis=1, keepdims=True) + 2.0 * np.hstack([zero, np.cumsum(ds * ci, axis=1)])
    lo = np.hstack([np.full((m, 1), -np.inf), bp])
    hi = np.hstack([bp, np.full((m, 1), np.inf)])
    with np.errstate(divide="ignore", invalid="ignore"):
        inner = np.where(K > 0, W / K, np.nan)
    inner_ok = (K > 0) & (inner >= lo) & (inner <= hi)
    # candidates: every breakpoint (value from the piece to its left) and every interior vertex W/K
    at_bp = K[:, :-1] * np.square(bp) - 2.0 * W[:, :-1] * bp + C[:, :-1]
    v = np.where(inner_ok, inner, 0.0)
    at_inner = np.where(inner_ok, K * np.square(v) - 2.0 * W * v + C, np.inf)
    values = np.hstack([at_bp, at_inner])
    cand = np.hstack([bp, np.where(inner_ok, inner, np.inf)])
    scale = d2.sum(axis=1) + n * (np.square(xc).mean() + 1e-300)
    best, ambiguous = _pick(values, cand, scale, float(np.sqrt(np.square(xc).mean())))
    return best + c, ambiguous
