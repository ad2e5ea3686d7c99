"""Landmark Isomap (seed 001 §4, §5.1.3, §6; ``core.geodesic``).

Reference: the swiss roll is isometric to a rectangle, so geodesic distances
recover its unrolled coordinates (arc length along the spiral, height) up to
a rigid motion; the graph's zig-zag paths over-estimate lengths by a few per
cent, hence the tolerance. Euclidean distances (plain CMDS) cannot unroll it.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.errors import InputError
from streamembed.core.geodesic import block_geodesics, landmark_geodesics, object_geodesics
from streamembed.core.landmarks import maxmin_select
from streamembed.core.procrustes import orthogonal_procrustes_align

from .conftest import euclidean


def _swiss_roll(rng: np.random.Generator, N: int):
    t = 1.5 * np.pi * (1 + 2 * rng.uniform(size=N))
    h = 21.0 * rng.uniform(size=N)
    X = np.column_stack([t * np.cos(t), h, t * np.sin(t)])
    arc = 0.5 * (t * np.sqrt(1 + t * t) + np.arcsinh(t))  # ∫ √(1 + t²) dt
    return X, np.column_stack([arc, h])


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
    C = block_geodesics(A, g, 6)
    np.testing.assert_allclose(C, C.T)
    assert (np.diagonal(C) == 0).all() and (C >= euclidean(Z, Z) - 1e-12).all()


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
