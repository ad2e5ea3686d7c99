"""Geodesic dissimilarities for landmark Isomap (Ghojogh et al. tutorial §4.1 eq. 30–31, §5.1.3 eq. 41, §6.3).

Isomap replaces each dissimilarity by the length of the shortest path
through a k-nearest-neighbour graph (eq. 30) and then runs classical MDS on
the result (eq. 31). Landmark Isomap does this on the landmarks only;
an arriving object reaches the graph through its own k nearest landmarks and
only landmarks serve as intermediate points (Bengio et al. 2004, Corollary 1,
quoted in the tutorial's §5.1.3), so

    g(z, l_i) = min_{j ∈ N_k(z)} ( δ(z, l_j) + G(l_j, l_i) )              (1)

with G the (n, n) landmark geodesic matrix. A block's members also know
their mutual dissimilarities C, and the graph gains the members: each keeps
the landmark edges of (1), and member q joins member p (edge length C_pq)
when q is among p's k nearest objects, landmarks and members together, or p
among q's. The map stays fixed, so a landmark-to-landmark leg costs G and
never passes through a member: a path walks member edges, at most one leg
through the landmarks, and member edges again. With T the shortest paths
along member edges only (Floyd–Warshall over the b members),

    g_B(z_p, l_i)  = min_q T_pq + g(z_q, l_i),
    g_B(z_p, z_q)  = min( T_pq,  min_{q'} [ min_{j ∈ N_k(z_q')} g_B(z_p, l_j) + δ(z_q', l_j) ] + T_q'q ),  (2)

symmetrised by min. A member without member edges gets exactly its
single-arrival geodesics.

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

from ..errors import InputError

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
    J = np.argpartition(a, K - 1, axis=1)[:, :K] if a.shape[1] > K else np.broadcast_to(np.arange(a.shape[1]), a.shape)
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
    K = int((neighbour_threshold(A64, k)[:, None] >= A64).sum(axis=1).max())  # widest neighbourhood
    rows = max(1, CHUNK_ELEMENTS // (K * n))
    for s in range(0, m, rows):
        J, aJ = _nearest_with_ties(A64[s : s + rows], k)  # (r, K'), inf beyond a row's own neighbours
        out[s : s + rows] = (aJ[:, :, None] + G[J]).min(axis=1)
    return out


def block_geodesics(A: np.ndarray, C: np.ndarray, G: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Geodesics of a block: to the landmarks (b, n) and between its members (b, b), by (2) of the module doc.

    Each member reaches the landmarks as a single arrival does (its k nearest landmarks, ties
    included), and is joined to every other member among its k nearest objects, landmarks and
    members together, at their mutual dissimilarity (an edge when either end counts the other).
    A path walks member edges, then at most one leg through the landmarks at the cost G (so the
    block never shortens a landmark geodesic), then member edges again: a member with no member
    edge gets exactly its single-arrival geodesics.

    Args:
        A: (b, n) raw dissimilarities of the members to the landmarks.
        C: (b, b) their raw mutual dissimilarities (symmetric, zero diagonal).
        G: (n, n) landmark geodesics.
        k: neighbours per point.
    Returns: (geodesics to the landmarks (b, n), mutual geodesics (b, b)), float64.
    """
    A64 = np.asarray(A, dtype=np.float64)
    C64 = np.asarray(C, dtype=np.float64)
    b, n = A64.shape
    M0 = object_geodesics(A64, G, k)  # out through each member's own landmark neighbours
    # T: member to member along member edges only (q within p's k nearest objects, or p within q's)
    T = np.full((b, b), np.inf)
    if b > 1:
        off = ~np.eye(b, dtype=bool)
        thr = neighbour_threshold(np.hstack([A64, np.where(off, C64, np.inf)]), min(int(k), n + b - 1))
        edge = off & ((thr[:, None] >= C64) | (thr[None, :] >= C64))
        T[edge] = C64[edge]
    np.fill_diagonal(T, 0.0)
    for q in range(b):  # Floyd–Warshall over the members (b is a block's size)
        np.minimum(T, T[:, q : q + 1] + T[q : q + 1, :], out=T)
    # to the landmarks: member edges, then out through the last member's landmark neighbours and G
    geo = np.empty((b, n))
    rows = max(1, CHUNK_ELEMENTS // max(1, b * n))
    for s in range(0, b, rows):
        geo[s : s + rows] = (T[s : s + rows, :, None] + M0[None, :, :]).min(axis=1)
    # between members: member edges only, or to the landmarks, in at q''s neighbour j, member edges to q:
    # min_{q'} [min_{j ∈ N_k(z_q')} geo(z_p, l_j) + δ(z_q', l_j)] + T_q'q
    J, aJ = _nearest_with_ties(A64, min(int(k), n))  # (b, K), inf beyond a row's own neighbours
    enter = (geo[:, J] + aJ[None, :, :]).min(axis=2)  # (p, q')
    mutual = np.minimum(T, (enter[:, :, None] + T[None, :, :]).min(axis=1))
    mutual = np.minimum(mutual, mutual.T)
    np.fill_diagonal(mutual, 0.0)
    return geo, mutual
