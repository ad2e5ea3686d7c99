"""Metric-MDS landmark maps: SMACOF stress and Sammon mapping (Ghojogh et al. tutorial §2.2 eq. 17, §3 eq. 22–25).

Classical MDS fits inner products; metric MDS fits the distances themselves.
Starting from the CMDS configuration X0 (n, d) (the tutorial's §3: "the
classical MDS or PCA is used for initialization"), the landmark configuration
is refined by minimising

    smacof  σ(X) = Σ_{i<j} (‖x_i - x_j‖ - δ_ij)²                   (raw stress, eq. 17 squared)
    sammon  S(X) = (1/Σ_{i<j} δ_ij) Σ_{i<j} (‖x_i - x_j‖ - δ_ij)² / δ_ij   (eq. 25)

Both are solved by majorisation (de Leeuw's SMACOF: the Guttman transform
X ← V⁺ B(X) X with weights w_ij = 1 for stress and 1/δ_ij for Sammon),
which never increases the criterion, instead of Sammon's diagonal
quasi-Newton with a "magic factor" (eq. 18): same criterion, monotone and
without a step size to tune.

Convergence. Plain majorisation converges linearly and, on non-Euclidean
data, slowly: on 150 random words (edit distance, d = 3) it needs about
3,600 (SMACOF) and 2,250 (Sammon) sweeps to a relative change of 10⁻¹⁰, on
150 docstring lines (normalised edit distance) 6,000 to 20,000, and a fixed
cap of 1,000 stopped it visibly short (a higher criterion and a map up to
half its RMS radius away after Procrustes). Here the sweeps are accelerated by
SQUAREM (Varadhan & Roland 2008, scheme S3): from X, two Guttman sweeps give
X1, X2; with r = X1 - X, v = X2 - 2 X1 + X and α = -‖r‖/‖v‖ (at most -1),
the extrapolated X - 2αr + α²v is stabilised by one more sweep and kept
only if its criterion is not above X2's, else X2 is kept. The criterion
never increases, and a fixed point is a fixed point of the Guttman
transform. ``accelerate=False`` runs plain sweeps, the textbook SMACOF
iteration (scikit-learn's ``smacof``). Where the criterion has several
nearby local minima, the accelerated and the plain iteration from the same
start may end in different ones (on the docstring corpus their criteria
differ by up to 2·10⁻⁴ relative, in either direction; both are local
minima); on the random words both reach the same map, the accelerated one
in about 450 sweeps.

The iteration stops when one step lowers the criterion by at most ``rtol``
of its value (default ``MAP_RTOL``, relative criterion change): then
``converged`` is True. When ``max_iter`` Guttman sweeps (default
``MAP_MAX_ITER``) are spent first, the result records it (``converged``
False) for the caller to report.

The result is centred (mean zero), so the landmark centring of
docs/math.md §2 still places the origin at the landmarks' centroid. Units: X
in distance units; σ in squared distance units; S in distance units.

A refined map is no longer X = U Λ^{1/2}: projection and kernel restricted
reconstruction (docs/math.md §3) belong to the CMDS map. Arrivals are placed
on it by the criterion it was built with, raw stress on a SMACOF map
(restricted reconstruction for a stress-built map, Trosset, Tan, Tang &
Priebe 2025, end of §4) and Sammon's criterion on a Sammon map, or by the
L1 criterion (``criteria``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..runtime import single_blas_thread
from .ordinal_map import MonotoneTransform, OrdinalProblem, kruskal_stress1

#: "nonmetric": ordinal MDS, Kruskal's stress-1 with monotone regression (``core.fit.ordinal_map``, docs/math.md §3.6).
LANDMARK_MAPS = ("cmds", "smacof", "sammon", "nonmetric")
#: An iteration that lowers the criterion by at most this share of it ends the refinement (converged).
MAP_RTOL = 1e-10
#: Budget of Guttman sweeps. The slowest case measured, SMACOF on 150
#: docstring lines (edit distance, d = 3), converges in under 2,000
#: accelerated sweeps; plain majorisation needs up to about 17,000. A sweep
#: costs O(n² d): about 0.25 ms at n = 150 and 30 ms at n = 1000.
MAP_MAX_ITER = 20_000


@dataclass(frozen=True)
class MapRefinement:
    """A refined landmark map and how its iteration ended.

    Attributes:
        X: (n, d) centred configuration (distance units).
        criterion: its criterion (``map_stress``).
        iterations: Guttman sweeps done.
        converged: True if the last iteration lowered the criterion by at most
            ``tolerance`` of its value; False if the sweep budget ended first.
        tolerance: the relative criterion change used as the stopping rule.
        transform: "nonmetric": the fitted monotone transformation δ ↦ d̂ (else None).
    """

    X: np.ndarray
    criterion: float
    iterations: int
    converged: bool
    tolerance: float
    transform: MonotoneTransform | None = None


def map_start(X: np.ndarray, A_rows: np.ndarray, m_delta: np.ndarray | None = None) -> np.ndarray:
    """Least-squares start on a refined map: y0 = (XᵀX)⁻¹ Xᵀ b (m, d) (docs/math.md §3 with X the map).

    X (n, d) is centred, so b's constant terms vanish: y0 = -½ (a2 - m_Δ) X (XᵀX)⁻¹,
    with a2 the squared rows A_rows (m, n). For the CMDS map this is the
    projection ŷ. m_Δ (n,) are the landmarks' mean squared dissimilarities;
    on a non-metric map (None) A_rows are disparities f(δ) and m_Δ the map's
    own ‖x_i‖² (its disparities' row means up to a constant, which cancels).
    """
    a2 = np.square(A_rows.astype(np.float64))
    if m_delta is None:
        m_delta = np.einsum("ij,ij->i", X, X)
    return -0.5 * (a2 - m_delta) @ (X @ np.linalg.inv(X.T @ X))


def _distances(X: np.ndarray) -> np.ndarray:
    G = X @ X.T
    sq = np.diagonal(G)
    return np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * G, 0.0))


def map_stress(X: np.ndarray, D: np.ndarray, kind: str) -> float:
    """The criterion of ``kind`` of X (n, d) against D (n, n).

    ``kind``: "smacof" (raw stress), "sammon", "nonmetric" (Kruskal's stress-1).
    """
    if kind == "nonmetric":
        return kruskal_stress1(X, D)
    iu = np.triu_indices(D.shape[0], 1)
    diff = _distances(X)[iu] - D[iu]
    if kind == "sammon":
        return float((np.square(diff) / D[iu]).sum() / D[iu].sum())
    return float(np.square(diff).sum())


class _Majorizer:
    """Guttman transform and criterion of one (D, kind) problem, sharing the distance matrices."""

    def __init__(self, D: np.ndarray, kind: str):
        n = D.shape[0]
        self.n = n
        off = ~np.eye(n, dtype=bool)
        self.Vplus: np.ndarray | None
        self.W: np.ndarray | None
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
            self.Vplus = np.linalg.inv(V + J) - J
            self.W = W
            self.norm = 0.5 * D[off].sum()  # Σ_{i<j} δ_ij
        else:
            self.Vplus = None
            self.W = None
            self.norm = 1.0
        self.D = D
        self.WD = D if self.W is None else self.W * D  # = 1 off the diagonal for Sammon

    def criterion(self, dist: np.ndarray) -> float:
        """``map_stress`` from the configuration's distance matrix (n, n)."""
        sq = np.square(dist - self.D)
        if self.W is not None:
            sq = sq * self.W
        return float(0.5 * sq.sum() / self.norm)

    def sweep(self, X: np.ndarray, dist: np.ndarray) -> np.ndarray:
        """One Guttman transform of X (n, d) with distances ``dist`` (n, n); centred."""
        with np.errstate(divide="ignore", invalid="ignore"):
            Bm = np.where(dist > 0, -self.WD / dist, 0.0)
        np.fill_diagonal(Bm, 0.0)
        np.fill_diagonal(Bm, -Bm.sum(axis=1))
        Y = (Bm @ X) / self.n if self.Vplus is None else self.Vplus @ (Bm @ X)
        return Y - Y.mean(axis=0)


def refine_map(X0: np.ndarray, D: np.ndarray, kind: str, max_iter: int | None = None,
               rtol: float | None = None, accelerate: bool = True) -> MapRefinement:
    """Refine the landmark configuration X0 (n, d) against dissimilarities D (n, n).

    Args:
        kind: "smacof", "sammon" or "nonmetric" (``core.fit.ordinal_map``: the criterion the
            iteration compares is the raw stress against normalised disparities).
        max_iter: budget of Guttman sweeps (default ``MAP_MAX_ITER``, read at call time).
        rtol: relative criterion change that ends the iteration (default ``MAP_RTOL``).
        accelerate: SQUAREM steps (default) or plain Guttman sweeps.
    Returns:
        ``MapRefinement``: the centred map, its criterion, the sweeps done and
        whether the tolerance was reached within the budget.
    """
    if kind not in LANDMARK_MAPS[1:]:
        raise InputError(f"landmark_map must be one of {LANDMARK_MAPS}, got {kind!r}")
    with single_blas_thread():  # sweeps of (n, n) products: extra BLAS threads only contend
        return _refine(X0, D, kind, MAP_MAX_ITER if max_iter is None else int(max_iter),
                       MAP_RTOL if rtol is None else float(rtol), accelerate)


def _refine(X0: np.ndarray, D: np.ndarray, kind: str, budget: int, tol: float, accelerate: bool) -> MapRefinement:
    """The body of ``refine_map``."""
    D = np.asarray(D, dtype=np.float64)
    maj: _Majorizer | OrdinalProblem = OrdinalProblem(D) if kind == "nonmetric" else _Majorizer(D, kind)
    X = np.asarray(X0, dtype=np.float64) - np.asarray(X0, dtype=np.float64).mean(axis=0)
    dist = _distances(X)
    f = maj.criterion(dist)
    sweeps = 0
    converged = f == 0.0
    while not converged and sweeps < budget:
        X1 = maj.sweep(X, dist)
        d1 = _distances(X1)
        if not accelerate or budget - sweeps < 3:  # plain sweep (also when too little budget is left)
            Xn, dn, sweeps = X1, d1, sweeps + 1
            fn = maj.criterion(dn)
        else:
            X2 = maj.sweep(X1, d1)
            d2 = _distances(X2)
            f2 = maj.criterion(d2)
            Xn, dn, fn = X2, d2, f2
            r, v = X1 - X, X2 - 2.0 * X1 + X
            nv = np.linalg.norm(v)
            sweeps += 2
            if nv > 0:
                alpha = min(float(-np.linalg.norm(r) / nv), -1.0)
                Xa = X - 2.0 * alpha * r + alpha**2 * v
                X3 = maj.sweep(Xa, _distances(Xa))
                d3 = _distances(X3)
                f3 = maj.criterion(d3)
                sweeps += 1
                if f3 <= f2:  # monotone safeguard: never above two plain sweeps
                    Xn, dn, fn = X3, d3, f3
        converged = f - fn <= tol * f
        X, dist, f = Xn, dn, fn
    transform = maj.transform(dist) if isinstance(maj, OrdinalProblem) else None
    return MapRefinement(X=X, criterion=map_stress(X, D, kind), iterations=sweeps, converged=bool(converged),
                         tolerance=tol, transform=transform)
