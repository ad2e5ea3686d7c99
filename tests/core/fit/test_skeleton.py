"""LSDR (Roy 2021, Algorithm 1 as corrected in docs/math.md §8.4–8.5): each step on hand-checkable cases, then the
sphere and the swiss roll of Roy's S3 and S4 at n = 200, then the refusals."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from scipy.optimize import nnls

from streamembed.core.errors import InputError
from streamembed.core.fit.manifold_graph import MAX_SKELETON_DIM, geodesics, manifold_graph
from streamembed.core.fit.skeleton import boundary_points, fit_skeleton, lsdr_embedding
from streamembed.trustability import relative_trustability


def _wheel(n: int) -> np.ndarray:
    """n points on the unit circle and its centre (index n): the Delaunay tessellation is the fan of n spokes."""
    t = 2 * np.pi * np.arange(n) / n
    return np.vstack([np.c_[np.cos(t), np.sin(t)], [0.0, 0.0]])


def test_a_wheel_of_12_keeps_every_edge_and_its_centre_is_the_skeleton() -> None:
    """Rim vertex: degree 3, a spoke's T = 1/(1 + 2·(2 sin 15°)²) = 0.651 < 0.776 = 0.95-quantile of Beta(1, 2);
    centre: degree 12, T = 1/12 < 1 − 0.05^(1/11) = 0.238. Nothing goes, the 12 triangles survive, the rim edges
    lie in one triangle each: the 12 rim points are the boundary, d_B(centre) = 1, and the centre's d_B beats its
    neighbours' while each rim point has the centre among its 3 geodesic neighbours: the skeleton is the centre."""
    sk = fit_skeleton(_wheel(12))
    g = sk.graph
    assert g.edges.shape[0] == 24 and g.n_removed == 0
    assert g.thresholds[:12] == pytest.approx(1 - np.sqrt(0.05)) and g.thresholds[12] == pytest.approx(
        1 - 0.05 ** (1 / 11))
    assert sk.boundary.tolist() == [True] * 12 + [False]
    assert sk.boundary_distance == pytest.approx([0.0] * 12 + [1.0])
    assert sk.indices.tolist() == [12]


def test_a_wheel_of_24_loses_every_spoke_but_the_trees_and_every_point_is_boundary_and_skeleton() -> None:
    """Rim spoke T = 1/(1 + 2·(2 sin 7.5°)²) = 0.880 > 0.776: the 23 spokes outside the spanning tree go (the tree
    is 23 rim edges and one spoke). No triangle keeps both spokes, so none survives and all 25 points are
    boundary points (d_B = 0), hence all skeletal (equal d_B counts)."""
    sk = fit_skeleton(_wheel(24))
    g = sk.graph
    spoke = (g.edges == 24).any(axis=1)
    assert g.edges.shape[0] == 48 and g.n_removed == 23
    assert (~g.kept == spoke & ~g.in_tree).all() and (g.kept & spoke).sum() == 1
    assert sk.n_boundary == 25 and sk.size == 25 and (sk.boundary_distance == 0).all()


def test_two_clusters_are_joined_by_one_tree_edge_and_lose_the_bridges_from_single_bridge_vertices() -> None:
    """Two wheels of 12, 100 apart (one turned by 0.1 rad). Theorem 6: one spanning-tree edge joins them, and it
    stays. A bridge (an edge between the wheels) goes when an end point has no other bridge: there T ≈ 1 above
    every quantile; where a vertex has two bridges each has T ≈ 1/2 < 0.527 = the 0.95-quantile of Beta(1, 4),
    so both stay: the tests do not cut the clusters apart, the tree's edge only guarantees they stay joined.
    Nothing inside a wheel goes; the boundary is the 16 rim points that face away from the other wheel."""
    A, B = _wheel(12), _wheel(12)
    c, s = np.cos(0.1), np.sin(0.1)
    X = np.vstack([A, B @ np.array([[c, -s], [s, c]]) + [100.0, 0.3]])
    sk = fit_skeleton(X)
    g = sk.graph
    bridge = (g.edges[:, 0] < 13) != (g.edges[:, 1] < 13)
    assert (bridge & g.in_tree).sum() == 1 and g.kept[bridge & g.in_tree].all()
    per_vertex = np.bincount(g.edges[bridge].ravel(), minlength=26)
    lone = (per_vertex[g.edges[:, 0]] == 1) | (per_vertex[g.edges[:, 1]] == 1)
    assert bridge.sum() == 13 and g.n_removed == 2
    assert (~g.kept).tolist() == (bridge & lone & ~g.in_tree).tolist()
    assert np.flatnonzero(sk.boundary).tolist() == [*range(3, 11), 13, 14, 15, 16, 17, 22, 23, 24]
    assert np.isfinite(geodesics(g, np.array([0]))).all()
    assert (sk.boundary_distance[sk.indices] > 0).all() and not sk.boundary[sk.indices].any()


def test_the_prose_beta_law_is_the_law_of_the_edge_statistic_and_the_boxs_is_not() -> None:
    """For k Gaussian edges in R^p, T = ‖e_1‖²/Σ‖e‖² ~ Beta(p/2, (k − 1)p/2) (§3.1): the threshold G_α uses is the
    empirical 95 % quantile of simulated T; Algorithm 1's box, Beta(p/2, (k − 1)/2), is far above it."""
    rng = np.random.default_rng(1)
    p, k = 3, 12
    E = rng.normal(size=(200_000, k, p))
    sq = (E ** 2).sum(axis=2)
    T = sq[:, 0] / sq.sum(axis=1)
    X = rng.normal(size=(60, p))
    g = manifold_graph(X)
    at_k = np.flatnonzero(g.degree == k)
    assert at_k.size
    assert g.thresholds[at_k[0]] == pytest.approx(np.quantile(T, 0.95), rel=0.01)
    assert scipy.stats.beta.ppf(0.95, p / 2, (k - 1) / 2) > 2 * np.quantile(T, 0.95)


def test_the_boundary_is_found_on_faces_not_edges_in_three_dimensions() -> None:
    """An octahedron ±e_i with its centre, tessellated by the 8 tetrahedra (centre, ±e1, ±e2, ±e3), nothing
    removed (α = 1): the faces through the centre lie in two tetrahedra, the outer ones in one, so the boundary
    is the 6 outer vertices (Theorem 7). Counting tetrahedra per edge, as Algorithm 1's box does, finds no
    boundary: every edge lies in two or four of them."""
    X = np.vstack([np.eye(3), -np.eye(3), np.zeros((1, 3))])
    tets = np.array([[6, a, b, c] for a in (0, 3) for b in (1, 4) for c in (2, 5)])
    g = manifold_graph(X, alpha=1.0, simplices=tets)
    assert g.n_removed == 0
    assert boundary_points(g).tolist() == [True] * 6 + [False]
    per_edge = np.bincount(g.simplex_edges.ravel(), minlength=g.edges.shape[0])
    assert per_edge.min() >= 2
    sk = fit_skeleton(X, alpha=1.0, simplices=tets)
    assert sk.indices.tolist() == [6] and sk.boundary_distance[6] == pytest.approx(1.0)


def _sphere(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Roy's S3 (our choices): n directions uniform on the unit sphere, radii 1 + N(0, 0.05²)."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, 3))
    r = 1.0 + 0.05 * rng.normal(size=n)
    return Z / np.linalg.norm(Z, axis=1, keepdims=True) * r[:, None], r


def test_lsdr_on_a_noisy_sphere_finds_the_boundary_where_the_error_is_largest() -> None:
    """S3, n = 200: about 100 of 1 200 edges go; boundary points are those farthest off the sphere (Roy's §3.2:
    the error is extreme on the boundary), skeleton points closer to it than the rest; the 2-D map's relative
    TI is about 1/3, the variance share a plane leaves out of a sphere."""
    X, r = _sphere(200, 0)
    m = lsdr_embedding(X, 2)
    sk = m.skeleton
    assert 80 <= sk.graph.n_removed <= 140 and 150 <= sk.n_boundary < 200 and 100 <= sk.size < 200
    err = np.abs(r - 1.0)
    skeletal = np.isin(np.arange(200), sk.indices)
    assert err[sk.boundary].mean() > 1.5 * err[~sk.boundary].mean()
    assert err[skeletal].mean() < err[~skeletal].mean()
    assert relative_trustability(X, m.Y) == pytest.approx(1 / 3, abs=0.05)


def test_lsdr_on_a_swiss_roll_gives_a_skeleton_and_a_map_placed_from_it() -> None:
    """S4, n = 200 (scikit-learn's roll, noise 0.5): skeleton points keep their MDS coordinates and every other
    point is a convex combination of them (an NNLS fit with weights summing to 1 reproduces it)."""
    from sklearn.datasets import make_swiss_roll

    X, _ = make_swiss_roll(200, noise=0.5, random_state=0)
    m = lsdr_embedding(X, 2)
    sk = m.skeleton
    assert 140 <= sk.graph.n_removed <= 180 and 120 <= sk.size < 200
    assert 0.2 < relative_trustability(X, m.Y) < 0.5
    Ys = m.Y[sk.indices]
    assert m.bandwidth == pytest.approx(np.sqrt(np.max(sk.boundary_distance[sk.indices] ** 2 + np.min(
        sk.geodesics + np.diag(np.full(sk.size, np.inf)), axis=1) ** 2)))
    others = np.setdiff1d(np.arange(200), sk.indices)
    for i in others[:10]:
        w, res = nnls(np.vstack([Ys.T, 10.0 * np.ones(sk.size)]), np.r_[m.Y[i], 10.0])
        assert res < 1e-6


@pytest.mark.parametrize(("X", "match"), [
    (np.vstack([_wheel(8), [[1.0, 0.0]]]), "rows 0 and 9 are the same point"),
    (np.c_[np.arange(10.0), 2 * np.arange(10.0)], "affine subspace of dimension 1 < p = 2"),
    (np.c_[np.random.default_rng(0).normal(size=(20, 2)), np.zeros(20)], "dimension 2 < p = 3"),
    (np.random.default_rng(0).normal(size=(40, MAX_SKELETON_DIM + 1)), "p = 7 features, at most 6"),
    (np.arange(10.0)[:, None], "at least 2 features"),
    (np.vstack([_wheel(5)[:3], [[np.nan, 0.0]]]), r"X\[3, 0\] = nan is not finite"),
    (np.eye(3), "at least p \\+ 2 = 5 points"),
])
def test_points_that_cannot_be_tessellated_are_refused_with_the_reason(X: np.ndarray, match: str) -> None:
    with pytest.raises(InputError, match=match):
        fit_skeleton(X)


def test_bad_parameters_are_refused() -> None:
    X = _wheel(12)
    with pytest.raises(InputError, match="alpha must be a number in"):
        fit_skeleton(X, alpha=1.5)
    with pytest.raises(InputError, match="positive integer"):
        fit_skeleton(X, n_neighbors=0)
    with pytest.raises(InputError, match="1 <= k <= n - 1 = 12"):
        fit_skeleton(X, n_neighbors=13)
    with pytest.raises(InputError, match="skeleton has 1 point"):
        lsdr_embedding(X, 2)
