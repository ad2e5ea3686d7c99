"""Geodesic dissimilarities for landmark Isomap (Ghojogh et al. tutorial §4.1 eq. 30–31, §5.1.3 eq. 41, §6.3).

Isomap replaces each dissimilarity by the length of the shortest path
through a k-nearest-neighbour graph (eq. 30) and then runs classical MDS on
the result (eq. 31). Landmark Isomap does this on the landmarks only;
an arriving object reaches the graph through its own k nearest landmarks and
only landmarks serve as intermediate points (Bengio et al. 2004, Corollary 1,
quoted in the tutorial's §5.1.3), so

    g(z, l_i) = min_{j ∈ N_k(z)} ( δ(z, l_j) + G(l_j, l_i) )              (1)

with G the (n, n) landmark geodesic matrix. For a block, the mutual geodesic
of two arrivals follows the same rule through the landmarks,

    g(z_p, z_q) = min_{j ∈ N_k(z_p)} ( δ(z_p, l_j) + g(z_q, l_j) ),  symmetrised by min.

Units: those of the input dissimilarities. The graph is symmetrised (an edge
when either end counts the other among its k nearest); a graph in several
pieces has no finite geodesics between them and is refused.

Ties. "The k nearest" is ambiguous when several neighbours sit at the k-th
smallest distance, as they do for integer-valued dissimilarities (edit,
Hamming, L1 on a grid): a partial sort keeps whichever comes first, so the
graph, and every placement, would depend on the order of the landmarks.
Here N_k(p) is every point whose distance is at most the k-th smallest
distance from p (times 1 + ``TIE_RTOL``, so that round-off in computing
equal distances does not split a tie): all tied neighbours are kept, the
rule of vegan's ``isomapdist``. It depends on the dissimilarities only, so
the graph, the geodesics and the placements are invariant under permuting
the landmarks; with untied data it is the usual k-nearest-neighbour graph
(scikit-learn's ``Isomap``). The price is extra edges and, for an arrival
with many ties, a min-plus product over more than k landmarks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .errors import InputError

if TYPE_CHECKING:
    import scipy.sparse

#: (rows × neighbours × n) elements per chunk of the min-plus product (16 MB of float64).
CHUNK_ELEMENTS = 2_000_000
#: Distances within this relative amount of the k-th smallest count as tied with it.
TIE_RTOL = 1e-12


def neighbour_threshold(D: np.ndarray, k: int) -> np.ndarray:
    """Per row of D (r, c), the largest distance that is still among the k nearest, ties included (r,)."""
    kth = np.partition(D, k - 1, axis=1)[:, k - 1]
    return kth * (1.0 + TIE_RTOL)


def _nearest_with_ties(a: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices J (r, K) and distances aJ (r, K) of each row's k nearest plus all ties; inf pads shorter rows."""
    thr = neighbour_threshold(a, k)
    K = int((a <= thr[:, None]).sum(axis=1).max())
    J = np.argpartition(a, K - 1, axis=1)[:, :K] if K < a.shape[1] else np.broadcast_to(np.arange(a.shape[1]), a.shape)
    aJ = np.take_along_axis(a, J, axis=1)
    return J, np.where(aJ <= thr[:, None], aJ, np.inf)


def knn_graph(D: np.ndarray, k: int) -> scipy.sparse.csr_matrix:
    """Symmetrised k-nearest-neighbour graph of n points from D (n, n), edge weights δ.

    Every point within a row's k-th smallest distance is a neighbour (ties
    included, module docstring). Zero dissimilarities between distinct points
    are kept as edges of (numerically) zero length.
    """
    import scipy.sparse  # lazily: keeps `streamembed embed`'s start-up short

    n = D.shape[0]
    if not 1 <= k < n:
        raise InputError(f"geodesic_neighbors must be between 1 and n - 1 = {n - 1}, got {k}")
    Dm = np.asarray(D, dtype=np.float64).copy()
    np.fill_diagonal(Dm, np.inf)
    rows, cols = np.nonzero(Dm <= neighbour_threshold(Dm, k)[:, None])
    # csgraph treats explicit zeros as missing edges: keep duplicates at the smallest positive length
    w = np.maximum(D[rows, cols], np.finfo(np.float64).tiny)
    W = scipy.sparse.csr_matrix((w, (rows, cols)), shape=(n, n))
    return W.maximum(W.T).tocsr()


def landmark_geodesics(D: np.ndarray, k: int) -> np.ndarray:
    """Shortest-path (geodesic) distances G (n, n) through the k-NN graph of the landmarks.

    Raises InputError naming the number of connected components when the
    graph falls apart (increase k).
    """
    import scipy.sparse.csgraph

    W = knn_graph(D, int(k))
    n_comp, labels = scipy.sparse.csgraph.connected_components(W, directed=False)
    if n_comp > 1:
        sizes = np.bincount(labels)
        raise InputError(
            f"the {k}-nearest-neighbour graph of the {D.shape[0]} landmarks has {n_comp} connected components "
            f"(sizes {sorted(sizes.tolist(), reverse=True)[:8]}): geodesic distances between them are infinite; "
            f"increase geodesic_neighbors"
        )
    G = scipy.sparse.csgraph.shortest_path(W, method="D", directed=False)
    np.fill_diagonal(G, 0.0)
    return 0.5 * (G + G.T)


def object_geodesics(A: np.ndarray, G: np.ndarray, k: int) -> np.ndarray:
    """Geodesic distances (m, n) of m arrivals to the landmarks by (1).

    N_k(z) holds the k nearest landmarks and all landmarks tied with the k-th.

    Args:
        A: (m, n) raw dissimilarities to the landmarks (finite, non-negative).
        G: (n, n) landmark geodesics.
        k: neighbours an arrival connects to.
    Returns: (m, n) float64.
    """
    m, n = A.shape
    k = min(int(k), n)
    A64 = np.asarray(A, dtype=np.float64)
    out = np.empty((m, n))
    if m == 0:
        return out
    K = int((A64 <= neighbour_threshold(A64, k)[:, None]).sum(axis=1).max())  # widest neighbourhood
    rows = max(1, CHUNK_ELEMENTS // (K * n))
    for s in range(0, m, rows):
        J, aJ = _nearest_with_ties(A64[s : s + rows], k)  # (r, K'), inf beyond a row's own neighbours
        out[s : s + rows] = (aJ[:, :, None] + G[J]).min(axis=1)
    return out


def block_geodesics(A: np.ndarray, A_geo: np.ndarray, k: int) -> np.ndarray:
    """Mutual geodesics (b, b) of a block through the landmarks.

    Args:
        A: (b, n) raw dissimilarities of the block's members to the landmarks.
        A_geo: (b, n) their geodesic distances to the landmarks (``object_geodesics``).
        k: neighbours each member connects to.
    """
    b, n = A.shape
    k = min(int(k), n)
    J, aJ = _nearest_with_ties(np.asarray(A, dtype=np.float64), k)  # (b, K), ties included
    # g[p, q] = min_j aJ[p, j] + A_geo[q, J[p, j]]
    g = (aJ[:, None, :] + A_geo[:, J].transpose(1, 0, 2)).min(axis=2)
    g = np.minimum(g, g.T)
    np.fill_diagonal(g, 0.0)
    return g
