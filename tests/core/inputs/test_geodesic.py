"""Landmark Isomap (Ghojogh et al. tutorial §4, §5.1.3, §6; ``core.inputs.geodesic``).

References: the swiss roll is isometric to a rectangle, so geodesic distances
recover its unrolled coordinates (arc length along the spiral, height) up to
a rigid motion; the graph's zig-zag paths over-estimate lengths by a few per
cent, hence the tolerance. Euclidean distances (plain CMDS) cannot unroll it.
On untied data scikit-learn's ``Isomap`` computes the same graph, geodesics
and placements; on tied data (integer dissimilarities) the neighbourhood keeps
every tie, so nothing depends on the order of the landmarks.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse.csgraph
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamembed import LandmarkMDS
from streamembed.core.errors import InputError
from streamembed.core.inputs.geodesic import block_geodesics, knn_graph, landmark_geodesics, object_geodesics
from streamembed.core.refit.strategies import maxmin_select
from streamembed.core.refit.procrustes import orthogonal_procrustes_align

from ..conftest import euclidean


def _swiss_roll(rng: np.random.Generator, N: int):
    t = 1.5 * np.pi * (1 + 2 * rng.uniform(size=N))
    h = 21.0 * rng.uniform(size=N)
    X = np.column_stack([t * np.cos(t), h, t * np.sin(t)])
    arc = 0.5 * (t * np.sqrt(1 + t * t) + np.arcsinh(t))  # ∫ √(1 + t²) dt
    return X, np.column_stack([arc, h])


@pytest.mark.slow  # 6-12 s: a 1,500-point swiss roll, 400 landmarks
def test_geodesics_unroll_the_swiss_roll_up_to_rigid_motion(rng) -> None:
    # landmarks dense enough that 5 neighbours never reach across a turn (gap 2π), at the edges too
    X, U = _swiss_roll(rng, 1500)
    L = maxmin_select(400, X=X, first=0)
    H = np.setdiff1d(np.arange(1500), L)[:300]
    D, A = euclidean(X[L], X[L]), euclidean(X[H], X[L])
    truth = np.vstack([U[L], U[H]])
    radius = np.sqrt(((truth - truth.mean(axis=0)) ** 2).sum(axis=1).mean())

    def residual(est: LandmarkMDS) -> float:
        placed = np.vstack([est.embedding_, est.transform(A)])
        return orthogonal_procrustes_align(placed, truth).residual / radius

    iso = LandmarkMDS(2, geodesic_neighbors=5).fit(D)
    assert residual(iso) < 0.12
    assert residual(LandmarkMDS(2).fit(D)) > 0.5  # straight-line distances cannot unroll it
    assert residual(LandmarkMDS(2, method="stress", geodesic_neighbors=5).fit(D)) < 0.12


def test_a_disconnected_graph_is_refused_naming_its_components(rng) -> None:
    P = np.vstack([rng.normal(size=(10, 2)), rng.normal(size=(12, 2)) + 100.0, rng.normal(size=(8, 2)) - 100.0])
    with pytest.raises(InputError, match="3 connected components") as err:
        LandmarkMDS(2, geodesic_neighbors=4).fit(euclidean(P, P))
    assert "geodesic_neighbors" in str(err.value)
    with pytest.raises(InputError, match="geodesic_neighbors must be"):
        LandmarkMDS(2, geodesic_neighbors=0).fit(euclidean(P, P))


def test_arrivals_reach_the_graph_through_their_nearest_landmarks(rng) -> None:
    P = rng.normal(size=(30, 3))
    D = euclidean(P, P)
    G = landmark_geodesics(D, 6)
    # a landmark's own row comes back as its row of G (its nearest landmark is itself, at 0)
    np.testing.assert_allclose(object_geodesics(D[:5], G, 6), G[:5], atol=1e-12)
    Z = rng.normal(size=(7, 3))
    A = euclidean(Z, P)
    g = object_geodesics(A, G, 6)
    # brute force of (1): min over the 6 nearest landmarks j of δ(z, l_j) + G(l_j, ·)
    for i in range(7):
        J = np.argsort(A[i])[:6]
        np.testing.assert_allclose(g[i], (A[i, J][:, None] + G[J]).min(axis=0))
    assert (g >= A - 1e-12).all()  # a path is never shorter than the straight line
    g_block, C = block_geodesics(A, euclidean(Z, Z), G, 6)
    np.testing.assert_allclose(C, C.T)
    assert (np.diagonal(C) == 0).all() and (euclidean(Z, Z) - 1e-12 <= C).all()
    assert (g_block <= g + 1e-12).all() and (g_block >= A - 1e-12).all()  # other members can only shorten paths


def _block_graph_reference(A: np.ndarray, C: np.ndarray, G: np.ndarray, k: int) -> np.ndarray:
    """Shortest paths (b, n + b) by Dijkstra on an explicit graph of the block rule (docs/math.md §2).

    Layers: members as starts (S), the n landmarks (L, joined pairwise at G, their geodesics), members
    as ends (E). Member p joins its k nearest landmarks (ties included) and member q when q is among
    p's k nearest of landmarks and members together (or p among q's), at C_pq: edges S–S, S→L, L→E,
    E–E, S_p→E_p at 0. No edge leads from L back into S, so no path crosses a member between two
    landmarks. Returns the distances from S_p to L and to E.
    """
    b, n = A.shape
    N = b + n + b
    W = np.full((N, N), np.inf)  # inf: no edge (zero-length edges are kept)
    W[b:b + n, b:b + n] = G
    for p in range(b):
        W[p, b + n + p] = 0.0
        kth = np.sort(A[p])[k - 1] * (1 + 1e-12)
        for j in np.flatnonzero(A[p] <= kth):
            W[p, b + j] = W[b + j, b + n + p] = A[p, j]
        for q in range(b):
            kth_p = np.sort(np.concatenate([A[p], np.delete(C[p], p)]))[k - 1] * (1 + 1e-12)
            kth_q = np.sort(np.concatenate([A[q], np.delete(C[q], q)]))[k - 1] * (1 + 1e-12)
            if p != q and (C[p, q] <= kth_p or C[p, q] <= kth_q):
                W[p, q] = W[b + n + p, b + n + q] = C[p, q]
    graph = scipy.sparse.csgraph.csgraph_from_dense(W, null_value=np.inf)
    S = scipy.sparse.csgraph.shortest_path(graph, method="D", directed=True)
    out = S[:b, b:]
    out[:, n:][np.eye(b, dtype=bool)] = 0.0
    return out


@pytest.mark.parametrize("scale", [1.0, 10.0, 0.0])
def test_block_geodesics_are_shortest_paths_through_the_landmarks_and_the_members(rng, scale: float) -> None:
    # Isomap blocks once ignored their mutual dissimilarities: C, 10·C and 0 gave the same geodesics
    P = rng.normal(size=(30, 3))
    Z = np.vstack([rng.normal(size=(3, 3)), [[2.5, 0, 0]] + 0.2 * np.arange(4)[:, None] * [[1, 0.3, 0]]])
    D, A, C = euclidean(P, P), euclidean(Z, P), scale * euclidean(Z, Z)
    G = landmark_geodesics(D, 4)
    g, T = block_geodesics(A, C, G, 4)
    ref = _block_graph_reference(A, C, G, 4)
    np.testing.assert_allclose(g, ref[:, :30], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(T, np.minimum(ref[:, 30:], ref[:, 30:].T), rtol=1e-13, atol=1e-13)
    single = object_geodesics(A, G, 4)
    assert (g <= single + 1e-12).all()
    if scale == 0.0:  # coincident members: one point, one row of geodesics
        np.testing.assert_allclose(g, np.broadcast_to(single.min(axis=0), g.shape))
    through_landmarks = (single[:, None, :] + A[None, :, :]).min(axis=2)  # the former rule, which ignored C
    if scale == 1.0:  # the chain of members off the landmarks is joined by its own edges
        assert (np.minimum(through_landmarks, through_landmarks.T) - 0.5 > T).sum() >= 6
    # a block of one, or members with no edge between them, are single arrivals
    np.testing.assert_array_equal(block_geodesics(A[:1], C[:1, :1], G, 4)[0], single[:1])
    far = np.where(np.eye(7, dtype=bool), 0.0, 1e6)
    np.testing.assert_array_equal(block_geodesics(A, far, G, 4)[0], single)


def test_an_isomap_block_is_placed_from_its_mutual_dissimilarities() -> None:
    # landmarks on a U (arms 4 apart, joined at x = 0); two members between the arms' ends, 1 apart:
    # their own 2 nearest landmarks are on their own arm, so alone each reaches the other arm only
    # around the U (about 25); in a block they are joined (C = 1), a path of 2.5 to the other arm's end
    x = np.arange(0.0, 10.01, 0.5)
    P = np.vstack([np.column_stack([x, 0 * x]), np.column_stack([x, 0 * x + 4]), [[0, 1], [0, 2], [0, 3]]])
    P = np.vstack([P[:-3], [[0.0, y] for y in np.arange(0.5, 3.51, 0.5)]])
    Z = np.array([[10.0, 1.5], [10.0, 2.5]])
    G = landmark_geodesics(euclidean(P, P), 2)
    A, C = euclidean(Z, P), euclidean(Z, Z)
    top_end = int(np.argmin(euclidean(np.array([[10.0, 4.0]]), P)))
    single = object_geodesics(A, G, 2)
    assert single[0, top_end] > 24
    for scale, expected in ((1.0, 2.5), (0.0, 1.5)):  # C = 0: the two coincide, at the nearer member's 1.5
        g, T = block_geodesics(A, scale * C, G, 2)
        assert g[0, top_end] == pytest.approx(expected)
    g, T = block_geodesics(A, 10 * C, G, 2)  # 10 apart: not neighbours, each alone
    np.testing.assert_array_equal(g, single)
    est = LandmarkMDS(1, method="restricted", geodesic_neighbors=2).fit(euclidean(P, P))  # the U unrolls to a line
    y = {s: est.embed(A, s * C).y for s in (1.0, 10.0, 0.0)}  # identical for all three, before
    assert np.abs(y[1.0] - y[0.0]).max() > 0.3 and np.abs(y[1.0] - y[10.0]).max() > 0.5


def test_geodesic_models_round_trip_and_embed_blocks(rng, tmp_path) -> None:
    P, Z = rng.normal(size=(40, 2)), rng.normal(size=(5, 2))
    est = LandmarkMDS(2, method="restricted", geodesic_neighbors=8).fit(euclidean(P, P))
    A, C = euclidean(Z, P), euclidean(Z, Z)
    est.save(tmp_path / "iso.npz")
    back = LandmarkMDS.load(tmp_path / "iso.npz")
    np.testing.assert_array_equal(back.geodesic_distances_, est.geodesic_distances_)
    np.testing.assert_array_equal(back.embed(A).y, est.embed(A).y)
    block = back.embed(A, C)
    assert block.method == "block" and np.isfinite(block.y).all()


# ----------------------------------------------------------------- ties


def _city_block(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    return np.abs(P[:, None, :] - Q[None, :, :]).sum(axis=-1).astype(np.float64)


def test_every_neighbour_tied_with_the_kth_is_kept() -> None:
    # five points on a line at 0, 1, 2, 3, 4 (distances |i - j|): with k = 1 an inner point has two
    # nearest neighbours at distance 1, and both are edges; no edge reaches distance 2
    x = np.arange(5.0)[:, None]
    W = knn_graph(_city_block(x, x), 1).toarray()
    assert (np.diag(np.ones(4), 1) + np.diag(np.ones(4), -1) == W).all()
    # an arrival at 2.5 has two landmarks at 0.5: its geodesics run through the nearer of them, each way
    g = object_geodesics(np.abs(2.5 - x.T), landmark_geodesics(_city_block(x, x), 1), 1)
    np.testing.assert_array_equal(g, [[2.5, 1.5, 0.5, 0.5, 1.5]])


@st.composite
def tied_problems(draw):
    """Integer points on a small grid, city-block distances (many ties), a landmark permutation."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    p = draw(st.integers(2, 3))
    n = draw(st.integers(8, 20))
    P = np.unique(rng.integers(0, 5, size=(3 * n, p)), axis=0)[:n]  # distinct landmarks
    Z = rng.integers(0, 5, size=(4, p))
    k = draw(st.integers(1, 4))
    perm = rng.permutation(P.shape[0])
    return P, Z, k, perm


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tied_problems())
def test_tied_geodesics_and_placements_do_not_depend_on_landmark_order(problem) -> None:
    P, Z, k, perm = problem
    D, A = _city_block(P, P), _city_block(Z, P)
    Dp, Ap = D[np.ix_(perm, perm)], A[:, perm]
    try:
        G = landmark_geodesics(D, k)
    except InputError:  # a disconnected graph: refused whatever the order
        with pytest.raises(InputError):
            landmark_geodesics(Dp, k)
        return
    Gp = landmark_geodesics(Dp, k)
    np.testing.assert_array_equal(Gp, G[np.ix_(perm, perm)])  # integer path lengths: exact
    g, gp = object_geodesics(A, G, k), object_geodesics(Ap, Gp, k)
    np.testing.assert_array_equal(gp, g[:, perm])
    (gb_p, T_p), (gb, T) = block_geodesics(Ap, _city_block(Z, Z), Gp, k), block_geodesics(A, _city_block(Z, Z), G, k)
    np.testing.assert_array_equal(gb_p, gb[:, perm])
    np.testing.assert_array_equal(T_p, T)
    lam = LandmarkMDS(1, geodesic_neighbors=k).fit(D).spectrum_.eigenvalues
    d = min(2, lam.size)
    if np.append(lam, 0.0)[d - 1] - np.append(lam, 0.0)[d] < 1e-6 * lam[0]:
        return  # the d-dimensional subspace is not unique: nothing to compare
    a = LandmarkMDS(d, geodesic_neighbors=k).fit(D)
    b = LandmarkMDS(d, geodesic_neighbors=k).fit(Dp)
    ya, yb = a.transform(A), b.transform(Ap)
    scale = 1.0 + np.abs(ya).max()
    # the same placements up to a rotation or reflection: compare distances to the landmarks
    np.testing.assert_allclose(euclidean(yb, b.embedding_), euclidean(ya, a.embedding_)[:, perm], atol=1e-7 * scale)


def test_untied_landmark_isomap_is_scikit_learns_isomap(rng) -> None:
    manifold = pytest.importorskip("sklearn.manifold")
    L, Z = rng.normal(size=(80, 3)), rng.normal(size=(20, 3))
    sk = manifold.Isomap(n_neighbors=7, n_components=2, eigen_solver="dense", path_method="D").fit(L)
    est = LandmarkMDS(2, geodesic_neighbors=7).fit(euclidean(L, L))
    np.testing.assert_allclose(est.geodesic_distances_, sk.dist_matrix_, rtol=1e-12, atol=1e-12)
    ours = np.vstack([est.embedding_, est.transform(euclidean(Z, L))])
    theirs = np.vstack([sk.embedding_, sk.transform(Z)])
    fit = orthogonal_procrustes_align(ours, theirs)  # eigenvector signs are arbitrary
    np.testing.assert_allclose(ours @ fit.R + fit.shift, theirs, atol=1e-8 * np.abs(theirs).max())
