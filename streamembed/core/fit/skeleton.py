"""LSDR's skeleton and map, steps 2 and 3 (Roy 2021, §3.2–3.3 and Algorithm 1; docs/math.md §8.4–8.5).

On the manifold approximation graph G_α (``core.fit.manifold_graph``):

* **Boundary** (Theorem 7): a simplex of the tessellation *survives* when all its edges are in G_α. A
  (p − 1)-face (a facet: p vertices) whose edges are all in G_α and that lies in at most one surviving
  simplex is a boundary face; its vertices are boundary points, and so is every vertex in no surviving
  simplex. (Algorithm 1's box counts simplices per *edge*, which is the same thing only for p = 2.)
* **Distance to the boundary**: d_B(x) = min over boundary points b of D_G(x, b).
* **Skeleton**: the points x with d_B(x) ≥ d_B(w) for each of their k nearest other points w by D_G (ties in
  D_G broken by index; equal d_B counts as skeletal). On noise-free data nearly every point lies on the
  boundary (d_B = 0), and then nearly every point is skeletal.
* **Map**: classical MDS (``core.fit.cmds.fit_spectrum``) of D_G between skeleton points; every other point
  is placed by Nadaraya–Watson (``core.place.kernel``) on Euclidean distances to the skeleton, with Roy's
  bandwidth σ = max_s √(d_B(s)² + min_{s′≠s} D_G(s, s′)²) over skeleton points.

Memory: D_G is computed a block of rows at a time (``ROW_BLOCK`` × n), and the (r, r) geodesics between
the r skeleton points are kept. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from ..errors import InputError
from ..place.kernel import bandwidth, check_bandwidth, place_kernel
from .manifold_graph import ManifoldGraph, geodesics, manifold_graph

__all__ = ["DEFAULT_ALPHA", "DEFAULT_NEIGHBORS", "Skeleton", "boundary_points", "skeleton_points",
           "fit_skeleton", "LSDRMap", "lsdr_embedding"]

#: Level of the edge tests and neighbours of the skeleton test (Roy's defaults; core.options states them).
DEFAULT_ALPHA = 0.95
DEFAULT_NEIGHBORS = 3
#: Sources per Dijkstra call when the neighbours by D_G are found (bounds memory at ROW_BLOCK × n).
ROW_BLOCK = 256


@dataclass(frozen=True)
class Skeleton:
    """The skeleton of n points and what it was found from.

    Attributes:
        graph: G_α and the tessellation (``ManifoldGraph``).
        boundary: (n,) bool, the boundary points.
        boundary_distance: (n,) d_B, geodesic distance to the nearest boundary point (feature units).
        indices: (r,) int64 sorted indices of the skeleton points.
        geodesics: (r, r) D_G between skeleton points.
        bandwidth: Roy's σ of the skeleton (NaN with a single skeleton point: no map can be made).
        n_neighbors: k of the skeleton test.
    """

    graph: ManifoldGraph
    boundary: np.ndarray
    boundary_distance: np.ndarray
    indices: np.ndarray
    geodesics: np.ndarray
    bandwidth: float
    n_neighbors: int

    @property
    def n_boundary(self) -> int:
        return int(self.boundary.sum())

    @property
    def size(self) -> int:
        return int(self.indices.shape[0])


def boundary_points(graph: ManifoldGraph) -> np.ndarray:
    """(n,) bool: the boundary points of G_α by Theorem 7 (module docstring)."""
    S = graph.simplices
    m, k = S.shape  # k = p + 1 vertices per simplex
    kept = graph.kept[graph.simplex_edges]  # (m, C(k, 2))
    survives = kept.all(axis=1)
    pairs = list(combinations(range(k), 2))
    facets = np.empty((m, k, k - 1), dtype=np.int64)
    facet_kept = np.empty((m, k), dtype=bool)
    for r in range(k):  # the facet opposite vertex r: the other p vertices (still sorted)
        facets[:, r] = np.delete(S, r, axis=1)
        facet_kept[:, r] = kept[:, [c for c, (a, b) in enumerate(pairs) if r not in (a, b)]].all(axis=1)
    flat = facets.reshape(m * k, k - 1)
    uniq, inverse = np.unique(flat, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    count = np.bincount(inverse, weights=np.repeat(survives, k).astype(np.float64), minlength=uniq.shape[0])
    is_kept = np.zeros(uniq.shape[0], dtype=bool)
    is_kept[inverse] = facet_kept.ravel()
    boundary = np.zeros(graph.n_points, dtype=bool)
    boundary[uniq[is_kept & (count <= 1)].ravel()] = True
    in_surviving = np.zeros(graph.n_points, dtype=bool)
    in_surviving[S[survives].ravel()] = True
    return boundary | ~in_surviving


def skeleton_points(graph: ManifoldGraph, boundary_distance: np.ndarray, n_neighbors: int) -> np.ndarray:
    """(r,) sorted indices of the points whose d_B is ≥ that of each of their k nearest other points by D_G."""
    n = graph.n_points
    k = int(n_neighbors)
    if k < 1 or k > n - 1:
        raise InputError(f"the skeleton test needs 1 <= k <= n - 1 = {n - 1} neighbours, got {n_neighbors}")
    dB = np.asarray(boundary_distance, dtype=np.float64)
    keep = np.empty(n, dtype=bool)
    for s in range(0, n, ROW_BLOCK):
        rows = np.arange(s, min(n, s + ROW_BLOCK))
        D = geodesics(graph, rows)
        D[np.arange(rows.size), rows] = np.inf  # the point itself is no neighbour
        nn = np.argsort(D, axis=1, kind="stable")[:, :k]
        keep[rows] = dB[rows] >= dB[nn].max(axis=1)
    return np.flatnonzero(keep).astype(np.int64)


def fit_skeleton(X: object, alpha: float = DEFAULT_ALPHA, n_neighbors: int = DEFAULT_NEIGHBORS,
                 simplices: np.ndarray | None = None) -> Skeleton:
    """The skeleton of the points X (n, p), 2 ≤ p ≤ ``MAX_SKELETON_DIM`` (steps 1–2 of Algorithm 1).

    ``simplices`` replaces the Delaunay tessellation (``manifold_graph``). Raises InputError for points LSDR
    cannot tessellate (``manifold_graph.check_points``) or an invalid α or k.
    """
    if isinstance(n_neighbors, bool) or not isinstance(n_neighbors, (int, np.integer)) or n_neighbors < 1:
        raise InputError(f"the skeleton's neighbours k must be a positive integer, got {n_neighbors!r}")
    graph = manifold_graph(X, alpha, simplices)
    boundary = boundary_points(graph)
    dB = geodesics(graph, np.flatnonzero(boundary)).min(axis=0)
    idx = skeleton_points(graph, dB, int(n_neighbors))
    D_sk = geodesics(graph, idx)[:, idx]
    D_sk = 0.5 * (D_sk + D_sk.T)  # Dijkstra's two directions agree to round-off; make it exactly symmetric
    np.fill_diagonal(D_sk, 0.0)
    sigma = bandwidth(D_sk, dB[idx]) if idx.size >= 2 else float("nan")
    return Skeleton(graph=graph, boundary=boundary, boundary_distance=dB, indices=idx, geodesics=D_sk,
                    bandwidth=sigma, n_neighbors=int(n_neighbors))


@dataclass(frozen=True)
class LSDRMap:
    """LSDR of n points: Y (n, d) every point's coordinates (skeleton points keep their MDS coordinates),
    the skeleton, and the bandwidth σ the other points were placed with."""

    Y: np.ndarray
    skeleton: Skeleton
    bandwidth: float


def lsdr_embedding(X: object, n_components: int, alpha: float = DEFAULT_ALPHA,
                   n_neighbors: int = DEFAULT_NEIGHBORS, sigma: float | None = None) -> LSDRMap:
    """Algorithm 1 of Roy (2021) as corrected in docs/math.md §8.4–8.5: the whole LSDR map of X (n, p).

    Args:
        n_components: d, at most the number of positive eigenvalues of the skeleton geodesics' kernel.
        sigma: the Nadaraya–Watson bandwidth; None: the skeleton's own (``Skeleton.bandwidth``).
    """
    from .cmds import fit_spectrum

    P = np.asarray(X, dtype=np.float64)
    sk = fit_skeleton(P, alpha, n_neighbors)
    d = int(n_components)
    if sk.size <= d:
        raise InputError(f"the skeleton has {sk.size} point(s): a map of n_components = {d} needs at least {d + 1}")
    spec = fit_spectrum(sk.geodesics, solver="full", n_components=d)
    if spec.rank < d:
        raise InputError(f"n_components = {d} exceeds the {spec.rank} positive eigenvalues of the skeleton's "
                         f"geodesic kernel ({sk.size} skeleton points)")
    s = sk.bandwidth if sigma is None else check_bandwidth(sigma)
    Y = np.empty((P.shape[0], d))
    Y_sk = spec.eigenvectors[:, :d] * np.sqrt(spec.eigenvalues[:d])
    Y[sk.indices] = Y_sk
    others = np.setdiff1d(np.arange(P.shape[0]), sk.indices)
    if others.size:
        import scipy.spatial.distance

        A = scipy.spatial.distance.cdist(P[others], P[sk.indices])
        Y[others] = place_kernel(A, Y_sk, s)
    return LSDRMap(Y=Y, skeleton=sk, bandwidth=s)
