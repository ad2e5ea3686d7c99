"""The manifold approximation graph G_α of LSDR, step 1 (Roy 2021, §3.1 and Algorithm 1; docs/math.md §8.4).

From n points in R^p: the Delaunay tessellation (``scipy.spatial.Delaunay``), its
edges, the Euclidean minimum spanning tree (a subgraph of the tessellation,
``scipy.sparse.csgraph.minimum_spanning_tree``), and the edge tests: at every
vertex v of Delaunay degree k_v, each incident edge e outside the tree gets

    T = ‖e‖² / Σ_{e′ ∋ v} ‖e′‖²,

compared with q_v, the α-quantile of Beta(p/2, (k_v − 1)p/2). All tests are made
on the unmodified tessellation; an edge is removed when its test fires at either
end point, and tree edges are always kept. Geodesics D_G are shortest paths
through the kept edges (``scipy.sparse.csgraph.dijkstra``); G_α contains the
tree, so it is connected and every D_G is finite.

The tessellation grows fast with p (at n = 200: about 1.2 thousand simplices at
p = 3, 66 thousand at p = 6, 260 thousand at p = 7), so p is limited to
``MAX_SKELETON_DIM``. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from ..errors import InputError

__all__ = ["MAX_SKELETON_DIM", "ManifoldGraph", "manifold_graph", "check_points", "delaunay_simplices",
           "simplex_edges", "geodesics"]

#: The largest number of features LSDR accepts (docs/math.md §8.4 gives the tessellation's growth).
MAX_SKELETON_DIM = 6


@dataclass(frozen=True)
class ManifoldGraph:
    """The tessellation, its edges and which of them survive in G_α.

    Attributes:
        simplices: (m, p + 1) int64 vertex indices of the Delaunay simplices, each row sorted.
        edges: (E, 2) int64 the tessellation's edges (i < j), sorted lexicographically.
        simplex_edges: (m, C(p + 1, 2)) int64 each simplex's edges as rows of ``edges``, pairs of its
            (sorted) vertices in ``itertools.combinations`` order.
        lengths: (E,) Euclidean edge lengths (feature units).
        in_tree: (E,) bool: the edge belongs to the minimum spanning tree.
        kept: (E,) bool: the edge survives in G_α (every tree edge does).
        degree: (n,) Delaunay degree k_v of every vertex.
        thresholds: (n,) the α-quantile q_v of Beta(p/2, (k_v − 1)p/2) at every vertex.
    """

    simplices: np.ndarray
    edges: np.ndarray
    simplex_edges: np.ndarray
    lengths: np.ndarray
    in_tree: np.ndarray
    kept: np.ndarray
    degree: np.ndarray
    thresholds: np.ndarray

    @property
    def n_points(self) -> int:
        return int(self.degree.shape[0])

    @property
    def n_removed(self) -> int:
        """Edges of the tessellation removed by the tests."""
        return int((~self.kept).sum())

    def adjacency(self) -> object:
        """G_α as a symmetric (n, n) ``scipy.sparse`` CSR matrix of edge lengths."""
        import scipy.sparse

        e, w = self.edges[self.kept], self.lengths[self.kept]
        n = self.n_points
        return scipy.sparse.csr_matrix((np.concatenate([w, w]), (np.concatenate([e[:, 0], e[:, 1]]),
                                                                 np.concatenate([e[:, 1], e[:, 0]]))), shape=(n, n))


def check_points(X: object, what: str = "X") -> np.ndarray:
    """X as (n, p) float64 points LSDR can tessellate, or an InputError naming the problem.

    Refused: not 2-D, NaN or infinite entries, p < 2 or p > ``MAX_SKELETON_DIM``, fewer than p + 2 points,
    two equal points (the first pair is named), or points in a lower-dimensional affine subspace (collinear in
    the plane, coplanar in space, ...), whose tessellation is degenerate.
    """
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise InputError(f"{what} must be an (n, p) matrix of points, got shape {A.shape}")
    n, p = A.shape
    if not np.isfinite(A).all():
        i, j = (int(v) for v in np.argwhere(~np.isfinite(A))[0])
        raise InputError(f"{what}[{i}, {j}] = {A[i, j]} is not finite: the skeleton needs finite points")
    if p < 2:
        raise InputError(f"the skeleton needs at least 2 features for a Delaunay tessellation, {what} has {p}")
    if p > MAX_SKELETON_DIM:
        raise InputError(f"the skeleton (LSDR) needs a Delaunay tessellation of the points, which grows "
                         f"exponentially with the dimension: {what} has p = {p} features, at most "
                         f"{MAX_SKELETON_DIM} are accepted (docs/math.md §8.4); reduce the features first "
                         f"(e.g. PCA to {MAX_SKELETON_DIM} or fewer)")
    if n < p + 2:
        raise InputError(f"the skeleton needs at least p + 2 = {p + 2} points in {p} dimensions, {what} has {n}")
    order = np.lexsort(A.T[::-1])
    same = np.flatnonzero((A[order[1:]] == A[order[:-1]]).all(axis=1))
    if same.size:
        i, j = sorted((int(order[same[0]]), int(order[same[0] + 1])))
        raise InputError(f"{what} rows {i} and {j} are the same point: the Delaunay tessellation of duplicate "
                         f"points is degenerate; remove duplicates before fitting the skeleton")
    s = np.linalg.svd(A - A.mean(axis=0), compute_uv=False)
    rank = int((s > s[0] * 1e-10).sum()) if s[0] > 0 else 0
    if rank < p:
        raise InputError(f"the {n} points of {what} span an affine subspace of dimension {rank} < p = {p} "
                         f"(collinear or coplanar points): their Delaunay tessellation is degenerate; drop the "
                         f"redundant features (e.g. PCA to {rank})")
    return A


def delaunay_simplices(X: np.ndarray) -> np.ndarray:
    """(m, p + 1) int64 sorted vertex indices of the Delaunay simplices of checked points X (n, p).

    Raises InputError when Qhull fails or leaves a point out of every simplex (a degenerate configuration).
    """
    import scipy.spatial

    try:
        tri = scipy.spatial.Delaunay(X)
    except scipy.spatial.QhullError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"the Delaunay tessellation of the points failed (degenerate configuration): {first}"
                         ) from None
    simplices = np.sort(np.asarray(tri.simplices, dtype=np.int64), axis=1)
    used = np.zeros(X.shape[0], dtype=bool)
    used[simplices.ravel()] = True
    if not used.all():
        i = int(np.flatnonzero(~used)[0])
        raise InputError(f"point {i} lies in no Delaunay simplex (a degenerate configuration: nearly equal or "
                         f"nearly coplanar points)")
    return simplices


def simplex_edges(simplices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(edges (E, 2) unique sorted vertex pairs, ids (m, C(p + 1, 2)) each simplex's edges as rows of edges)."""
    m, k = simplices.shape
    pairs = np.array(list(combinations(range(k), 2)), dtype=np.int64)
    ends = simplices[:, pairs]  # (m, C, 2), i < j because each simplex row is sorted
    flat = ends.reshape(-1, 2)
    edges, inverse = np.unique(flat, axis=0, return_inverse=True)
    return edges, inverse.reshape(m, pairs.shape[0])


def _tree(n: int, edges: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(E,) bool: the edges of a Euclidean minimum spanning tree (a subgraph of the tessellation)."""
    import scipy.sparse
    import scipy.sparse.csgraph

    # lengths are > 0 (no duplicate points); csgraph drops explicit zeros, so no edge is lost
    G = scipy.sparse.csr_matrix((lengths, (edges[:, 0], edges[:, 1])), shape=(n, n))
    T = scipy.sparse.csgraph.minimum_spanning_tree(G).tocoo()
    tree = np.zeros(edges.shape[0], dtype=bool)
    keys = edges[:, 0] * n + edges[:, 1]
    lo, hi = np.minimum(T.row, T.col), np.maximum(T.row, T.col)
    tree[np.searchsorted(keys, lo.astype(np.int64) * n + hi)] = True
    return tree


def manifold_graph(X: object, alpha: float = 0.95, simplices: np.ndarray | None = None) -> ManifoldGraph:
    """G_α of the points X (n, p) (module docstring), with the Beta quantile at level ``alpha`` ∈ [0, 1].

    ``simplices`` (m, p + 1) replaces the Delaunay tessellation (tests give a known one); by default
    ``delaunay_simplices`` of the checked points.
    """
    import scipy.stats

    if not (isinstance(alpha, (int, float)) and 0.0 <= float(alpha) <= 1.0):
        raise InputError(f"alpha must be a number in [0, 1], got {alpha!r}")
    P = check_points(X)
    n, p = P.shape
    S = delaunay_simplices(P) if simplices is None else np.sort(np.asarray(simplices, dtype=np.int64), axis=1)
    edges, ids = simplex_edges(S)
    lengths = np.sqrt(np.square(P[edges[:, 0]] - P[edges[:, 1]]).sum(axis=1))
    sq = lengths ** 2
    degree = np.bincount(edges.ravel(), minlength=n)
    total = np.bincount(edges[:, 0], weights=sq, minlength=n) + np.bincount(edges[:, 1], weights=sq, minlength=n)
    q = scipy.stats.beta.ppf(float(alpha), p / 2.0, np.maximum(degree - 1, 1) * p / 2.0)
    tree = _tree(n, edges, lengths)
    fires = (sq / total[edges[:, 0]] > q[edges[:, 0]]) | (sq / total[edges[:, 1]] > q[edges[:, 1]])
    kept = tree | ~fires
    return ManifoldGraph(simplices=S, edges=edges, simplex_edges=ids, lengths=lengths, in_tree=tree, kept=kept,
                         degree=degree, thresholds=np.asarray(q, dtype=np.float64))


def geodesics(graph: ManifoldGraph, sources: np.ndarray | None = None) -> np.ndarray:
    """D_G: (len(sources), n) shortest-path lengths through G_α from ``sources`` (default: every point), float64."""
    import scipy.sparse.csgraph

    D = scipy.sparse.csgraph.dijkstra(graph.adjacency(), directed=False, indices=sources)
    return np.asarray(D, dtype=np.float64)
