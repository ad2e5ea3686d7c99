"""Ordinal (non-metric) landmark maps: Kruskal's stress-1 with monotone regression (docs/math.md §3.6).

When only the order of the dissimilarities is trusted (ranks, ratings,
alignment scores), the map fits *disparities* d̂_ij, a non-decreasing
function of δ_ij, instead of δ itself (Kruskal 1964; Ghojogh et al. tutorial
§2.3). With D(X) the configuration's distances, the criterion is Kruskal's
stress-1

    S1(X) = √( Σ_{i<j} (D_ij(X) − d̂*_ij)² / Σ_{i<j} D_ij(X)² ),   d̂* = P_K(D(X))      (3.7)

where P_K is the least-squares projection onto the cone K of vectors that
are non-decreasing in the order of δ: the isotonic (monotone) regression of
the distances on the dissimilarities, by pool-adjacent-violators.

**Ties** follow the *secondary approach* (Kruskal 1964), as scikit-learn's
``smacof(metric=False)`` does (its ``IsotonicRegression`` first averages the
values of tied x): pairs with equal δ get equal disparities. Every pair
counts, zero dissimilarities included (scikit-learn treats a zero as missing).

**Iteration** (scikit-learn's non-metric SMACOF): the disparities are the
isotonic regression of the current distances, normalised to
Σ_{i<j} d̂_ij² = n(n − 1)/2 as in scikit-learn, then one Guttman transform
X ← (1/n) B(X) X with them (``metric_map``). For a closed convex cone K the
normalised projection √c·P_K(D)/‖P_K(D)‖ minimises Σ(D − d̂)² over K ∩ {‖d̂‖² = c},
so σ(X) = min over those d̂ of Σ_{i<j}(D_ij − d̂_ij)² never increases along
the sweeps (it is the criterion the SQUAREM safeguard of ``metric_map``
compares); a fixed point is a stationary point of S1.

**Start**: the classical MDS of the *ranks* of δ (average ranks for ties),
so the map depends on the order of δ only: any strictly increasing
transform of the dissimilarities gives the same map (the monotone-invariance
test), up to round-off.

**Arrivals** are placed through the landmarks' fitted monotone
transformation ``MonotoneTransform``: the knots (each distinct landmark δ,
its disparity), linear between knots (as ``IsotonicRegression.predict``),
proportional beyond them (f(δ) = δ·y_1/x_1 below the smallest knot, so
f(0) = 0, and δ·y_K/x_K above the largest), which keeps f non-decreasing
and positive-homogeneous outside the landmarks' range; then by the stress
criterion on f(δ) (``criteria``). Units: disparities and the map are in the
normalised units above (root-mean-square landmark disparity 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError

__all__ = ["MonotoneTransform", "OrdinalProblem", "kruskal_stress1", "rank_start"]


@dataclass(frozen=True)
class MonotoneTransform:
    """The landmarks' fitted monotone transformation δ ↦ d̂ (non-decreasing), as knots.

    Attributes:
        knots_x: (k,) the distinct landmark dissimilarities, increasing (input units, ≥ 0).
        knots_y: (k,) their disparities, non-decreasing (map units, ≥ 0).
    """

    knots_x: np.ndarray
    knots_y: np.ndarray

    def __post_init__(self) -> None:
        x = np.asarray(self.knots_x, dtype=np.float64)
        y = np.asarray(self.knots_y, dtype=np.float64)
        if x.ndim != 1 or x.shape != y.shape or x.size == 0:
            raise InputError(f"a monotone transform needs knots of equal 1-D shapes, got {x.shape} and {y.shape}")
        if not (np.isfinite(x).all() and np.isfinite(y).all()) or x[0] < 0 or y[0] < 0:
            raise InputError("the monotone transform's knots must be finite and non-negative")
        if (np.diff(x) <= 0).any() or (np.diff(y) < 0).any():
            raise InputError("the monotone transform's knots must be increasing in x and non-decreasing in y")
        object.__setattr__(self, "knots_x", x)
        object.__setattr__(self, "knots_y", y)

    def __call__(self, delta: np.ndarray) -> np.ndarray:
        """f(δ) for any array of dissimilarities (float64, same shape)."""
        d = np.asarray(delta, dtype=np.float64)
        x, y = self.knots_x, self.knots_y
        out = np.interp(d, x, y)
        lo, hi = d < x[0], d > x[-1]
        if lo.any():
            out[lo] = d[lo] * (y[0] / x[0]) if x[0] > 0 else y[0]
        if hi.any():
            out[hi] = d[hi] * (y[-1] / x[-1]) if x[-1] > 0 else y[-1]
        return out


def _distances(X: np.ndarray) -> np.ndarray:
    G = X @ X.T
    sq = np.diagonal(G)
    return np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * G, 0.0))


def kruskal_stress1(X: np.ndarray, D: np.ndarray) -> float:
    """Kruskal's stress-1 (3.7) of the configuration X (n, d) against the order of D (n, n); secondary ties."""
    prob = OrdinalProblem(D)
    dist = _distances(np.asarray(X, dtype=np.float64))[prob.iu]
    fitted = prob.isotonic(dist)
    denom = float(np.square(dist).sum())
    return float(np.sqrt(np.square(dist - fitted).sum() / denom)) if denom > 0 else float("nan")


def rank_start(D: np.ndarray, d: int) -> np.ndarray | None:
    """(n, d) classical MDS of the average ranks of D's off-diagonal entries, or None if it has < d positive axes."""
    n = D.shape[0]
    iu = np.triu_indices(n, 1)
    R = np.zeros((n, n))
    import scipy.stats  # lazily, as every scipy module here: `embed` and `run` start without them

    R[iu] = scipy.stats.rankdata(D[iu], method="average")
    R += R.T
    R2 = np.square(R)
    B = -0.5 * (R2 - R2.mean(axis=0)[None, :] - R2.mean(axis=1)[:, None] + R2.mean())
    import scipy.linalg

    w, V = scipy.linalg.eigh(B, subset_by_index=[n - d, n - 1], check_finite=False)
    w, V = w[::-1], V[:, ::-1]
    if not (w > 1e-12 * max(float(w[0]), 0.0)).all() or w[0] <= 0:
        return None
    X = V * np.sqrt(w)
    return X - X.mean(axis=0)


class OrdinalProblem:
    """The order of one landmark dissimilarity matrix D (n, n): pairs sorted once, tie groups, isotonic fits.

    ``disparities(dist)`` is the normalised isotonic regression of the upper-triangle distances
    (n(n−1)/2,) in the order of D; the majorizer interface (``criterion``, ``sweep``) is ``metric_map``'s.
    """

    def __init__(self, D: np.ndarray):
        n = D.shape[0]
        self.n = n
        self.iu = np.triu_indices(n, 1)
        delta = np.asarray(D, dtype=np.float64)[self.iu]
        self.order = np.argsort(delta, kind="stable")
        sorted_delta = delta[self.order]
        starts = np.flatnonzero(np.r_[True, sorted_delta[1:] != sorted_delta[:-1]]) if delta.size else np.empty(0, int)
        self.starts = starts
        self.counts = np.diff(np.r_[starts, delta.size]).astype(np.float64)
        self.knots_x = sorted_delta[starts] if delta.size else np.empty(0)
        self.norm = 0.5 * n * (n - 1)  # Σ_{i<j} d̂² after normalisation (scikit-learn's)
        self._cache: tuple[np.ndarray, np.ndarray] | None = None

    def group_fit(self, pair_values: np.ndarray) -> np.ndarray:
        """(k,) isotonic regression of the tie groups' means (weights: group sizes), unnormalised."""
        means = np.add.reduceat(pair_values[self.order], self.starts) / self.counts
        import scipy.optimize

        return np.asarray(scipy.optimize.isotonic_regression(means, weights=self.counts, increasing=True).x)

    def isotonic(self, pair_values: np.ndarray) -> np.ndarray:
        """P_K(v): the unnormalised isotonic regression of pair values v (n(n−1)/2,) on the order of D."""
        out = np.empty_like(pair_values)
        out[self.order] = np.repeat(self.group_fit(pair_values), self.counts.astype(np.int64))
        return out

    def disparities(self, dist: np.ndarray) -> np.ndarray:
        """(n, n) symmetric normalised disparities for the configuration distances ``dist`` (n, n)."""
        if self._cache is not None and self._cache[0] is dist:
            return self._cache[1]
        fitted = self.isotonic(dist[self.iu])
        total = float(np.square(fitted).sum())
        if total > 0:
            fitted *= np.sqrt(self.norm / total)
        H = np.zeros((self.n, self.n))
        H[self.iu] = fitted
        H += H.T
        self._cache = (dist, H)
        return H

    def transform(self, dist: np.ndarray) -> MonotoneTransform:
        """The fitted monotone transformation at the configuration distances ``dist`` (n, n)."""
        y = self.group_fit(dist[self.iu])
        total = float((np.square(y) * self.counts).sum())
        if total > 0:
            y = y * np.sqrt(self.norm / total)
        return MonotoneTransform(knots_x=self.knots_x.copy(), knots_y=np.maximum.accumulate(np.maximum(y, 0.0)))

    # ------------------------------------------------------------------ the majorizer interface of metric_map
    def criterion(self, dist: np.ndarray) -> float:
        """σ = Σ_{i<j} (D_ij − d̂_ij)² with the normalised disparities of ``dist``."""
        H = self.disparities(dist)
        return float(0.5 * np.square(dist - H).sum())

    def sweep(self, X: np.ndarray, dist: np.ndarray) -> np.ndarray:
        """One Guttman transform of X (n, d) with the disparities of its distances; centred."""
        H = self.disparities(dist)
        with np.errstate(divide="ignore", invalid="ignore"):
            Bm = np.where(dist > 0, -H / dist, 0.0)
        np.fill_diagonal(Bm, 0.0)
        np.fill_diagonal(Bm, -Bm.sum(axis=1))
        Y = (Bm @ X) / self.n
        return Y - Y.mean(axis=0)
