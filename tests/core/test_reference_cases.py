"""docs/math.md §6: the exact reference cases, to 1e-6."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.inputs.centering import center_cross
from streamembed.core.flags import FLAG_AMBIGUOUS, FLAG_BLOCK
from streamembed.core.place.restricted import restricted_objective

EX2_D2 = np.array([[0, 100, 45, 45], [100, 0, 45, 45], [45, 45, 0, 64], [45, 45, 64, 0]], dtype=float)
EX2_A2 = np.array([[386, 386, 457, 457]], dtype=float)


def test_example2_landmark_configuration_and_eigenvalues():
    est = LandmarkMDS(n_components=2).fit(np.sqrt(EX2_D2))
    np.testing.assert_allclose(est.eigenvalues_, [50, 32], atol=1e-9)
    X = np.abs(est.embedding_)
    np.testing.assert_allclose(X, [[5, 0], [5, 0], [0, 4], [0, 4]], atol=1e-9)
    # the pairs are opposite: X = [[±5,0],[∓5,0],[0,±4],[0,∓4]]
    np.testing.assert_allclose(est.embedding_[0], -est.embedding_[1], atol=1e-9)
    np.testing.assert_allclose(est.embedding_[2], -est.embedding_[3], atol=1e-9)


def test_example2_centering_gives_beta_400_and_b():
    est = LandmarkMDS(n_components=2).fit(np.sqrt(EX2_D2))
    B, beta = center_cross(EX2_A2, est.spectrum_.row_means, est.spectrum_.grand_mean)
    np.testing.assert_allclose(beta, [400.0], atol=1e-9)
    np.testing.assert_allclose(B, [[20, 20, -20, -20]], atol=1e-9)
    np.testing.assert_allclose(B @ est.embedding_, [[0, 0]], atol=1e-9)  # Xᵀb = 0


def test_example2_projection_is_origin():
    est = LandmarkMDS(n_components=2).fit(np.sqrt(EX2_D2))
    np.testing.assert_allclose(est.transform(np.sqrt(EX2_A2)), [[0, 0]], atol=1e-6)


def test_example2_restricted_is_hard_case():
    est = LandmarkMDS(n_components=2, method="restricted").fit(np.sqrt(EX2_D2))
    res = est.embed(np.sqrt(EX2_A2))
    np.testing.assert_allclose(np.abs(res.y), [[0, np.sqrt(368)]], atol=1e-6)
    np.testing.assert_allclose(np.abs(res.y[0, 1]), 19.1833, atol=1e-4)
    np.testing.assert_allclose(res.t, [-32.0], atol=1e-9)
    assert res.flags[0] & FLAG_AMBIGUOUS
    B, beta = center_cross(EX2_A2, est.spectrum_.row_means, est.spectrum_.grand_mean)
    c = B @ est.spectrum_.eigenvectors[:, :2]
    F = restricted_objective(res.y, c, beta, est.eigenvalues_, (B**2).sum(1) - (c**2).sum(1))
    np.testing.assert_allclose(F, [27776.0], rtol=1e-9)


def _two_landmarks():
    L = np.array([[-1.0, 0.0], [1.0, 0.0]])
    return np.sqrt(((L[:, None] - L[None]) ** 2).sum(-1)), L


def test_example1_cmds_form():
    D, L = _two_landmarks()
    est = LandmarkMDS(n_components=1, method="restricted").fit(D)
    A = np.sqrt(((np.array([[0.0, 9.0]])[:, None] - L[None]) ** 2).sum(-1))
    np.testing.assert_allclose(est.embed(A, method="projection").y, [[0.0]], atol=1e-9)
    res = est.embed(A)
    np.testing.assert_allclose(np.abs(res.y), [[np.sqrt(79)]], atol=1e-6)
    np.testing.assert_allclose(np.abs(res.y[0, 0]), 8.8882, atol=1e-4)
    assert res.flags[0] & FLAG_AMBIGUOUS


def test_two_objects_block_restricted_reconstruction():
    D, L = _two_landmarks()
    Z = np.array([[0.0, 9.0], [0.0, -9.0]])
    A = np.sqrt(((Z[:, None] - L[None]) ** 2).sum(-1))
    C = np.sqrt(((Z[:, None] - Z[None]) ** 2).sum(-1))
    assert C[0, 1] ** 2 == pytest.approx(324.0)
    est = LandmarkMDS(n_components=1, method="restricted").fit(D)
    np.testing.assert_allclose(est.embed(A, method="projection").y, [[0.0], [0.0]], atol=1e-9)
    single = est.embed(A)
    np.testing.assert_allclose(np.abs(single.y), [[np.sqrt(79)], [np.sqrt(79)]], atol=1e-6)
    block = est.embed(A, C)
    assert block.method == "block"
    assert (block.flags & FLAG_BLOCK).all()
    np.testing.assert_allclose(np.abs(block.y), [[np.sqrt(80)], [np.sqrt(80)]], atol=1e-6)
    assert block.y[0, 0] == pytest.approx(-block.y[1, 0], abs=1e-6)
    np.testing.assert_allclose(np.abs(block.y[0, 0]), 8.9443, atol=1e-4)
    assert block.objective == pytest.approx(644.0, rel=1e-9)
    np.testing.assert_allclose(est.transform_block(A, C), block.y)


def test_in_span_object_recovered_exactly_by_every_method(rng):
    P = rng.normal(size=(8, 3))
    D = np.sqrt(((P[:, None] - P[None]) ** 2).sum(-1))
    z = rng.normal(size=(5, 3))
    A = np.sqrt(((z[:, None] - P[None]) ** 2).sum(-1))
    C = np.sqrt(((z[:, None] - z[None]) ** 2).sum(-1))
    est = LandmarkMDS(n_components=3).fit(D)
    proj = est.embed(A, k0_rows="all")
    rr = est.embed(A, method="restricted")
    blk = est.embed(A, C, k0_rows="all")
    # distances from the embedded objects to the embedded landmarks reproduce A
    for Y in (proj.y, rr.y, blk.y):
        Dz = np.sqrt(((Y[:, None] - est.embedding_[None]) ** 2).sum(-1))
        np.testing.assert_allclose(Dz, A, atol=1e-6)
    np.testing.assert_allclose(rr.y, proj.y, atol=1e-6)
    np.testing.assert_allclose(blk.y, proj.y, atol=1e-6)
    np.testing.assert_allclose(proj.k0, 0.0, atol=1e-6)
    np.testing.assert_allclose(blk.k0, 0.0, atol=1e-6)
    np.testing.assert_allclose(rr.t, 0.0, atol=1e-6)


def test_projection_equals_kernel_pca_out_of_sample(rng):
    """docs/math.md §3.1: projection is kernel PCA's transform on the centred kernel."""
    P = rng.normal(size=(12, 4))
    z = rng.normal(size=(6, 4)) + 0.5 * rng.normal(size=(6, 4))
    D2 = ((P[:, None] - P[None]) ** 2).sum(-1)
    est = LandmarkMDS(n_components=3).fit(np.sqrt(D2))
    # kernel PCA with the landmark-centred linear kernel, written independently
    n = P.shape[0]
    K = P @ P.T
    one = np.full((n, n), 1.0 / n)
    Kc = K - one @ K - K @ one + one @ K @ one
    w, V = np.linalg.eigh(Kc)
    w, V = w[::-1][:3], V[:, ::-1][:, :3]
    Knew = z @ P.T
    onem = np.full((z.shape[0], n), 1.0 / n)
    Knew_c = Knew - onem @ K - Knew @ one + onem @ K @ one
    expected = Knew_c @ V / np.sqrt(w)
    got = est.transform(np.sqrt(((z[:, None] - P[None]) ** 2).sum(-1)))
    signs = np.sign((expected * got).sum(0))
    np.testing.assert_allclose(got, expected * signs, atol=1e-9)
