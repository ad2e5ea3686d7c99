"""Similarity (kernel) input (Trosset et al. 2025, §3, ``core.inputs.kernel``).

The reference: a linear kernel of coordinates about an arbitrary origin is the
same data as their Euclidean distances, so every method must place objects
exactly where the dissimilarity path does (Trosset et al. 2025, eq. 23–26: the kernel's
double centring and the dissimilarities' give the same B, b and β).
"""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.errors import InputError
from streamembed.core.inputs.kernel import landmark_dissimilarities

from ..conftest import euclidean


def _pair(rng: np.random.Generator, n: int = 25, m: int = 15, p: int = 4):
    L, Z = rng.normal(size=(n, p)), rng.normal(size=(m, p)) + 0.5
    o = rng.normal(size=p) * 3.0  # the kernel's origin is arbitrary: centring removes it
    Lc, Zc = L - o, Z - o
    diss = (euclidean(L, L), euclidean(Z, L), euclidean(Z, Z))
    sim = (Lc @ Lc.T, Zc @ Lc.T, Zc @ Zc.T)
    return diss, sim


@pytest.mark.parametrize("method", ["projection", "restricted", "stress", "l1"])
def test_linear_kernel_equals_the_dissimilarity_path(rng, method: str) -> None:
    (D, A, _), (K, KA, KZ) = _pair(rng)
    by_d = LandmarkMDS(2, method=method).fit(D).embed(A, k0_rows="all")
    by_k = LandmarkMDS(2, method=method, input="similarity").fit(K).embed(KA, self_similarity=np.diagonal(KZ),
                                                                          k0_rows="all")
    np.testing.assert_allclose(by_k.y, by_d.y, atol=1e-6)
    np.testing.assert_allclose(by_k.beta, by_d.beta, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(by_k.k0, by_d.k0, atol=1e-8)


def test_block_rr_and_residuals_from_similarities(rng) -> None:
    (D, A, C), (K, KA, KZ) = _pair(rng, m=6)
    est_d, est_k = LandmarkMDS(2).fit(D), LandmarkMDS(2, input="similarity").fit(K)
    # the block's mutual similarities carry k(z, z) on their diagonal
    np.testing.assert_allclose(est_k.embed(KA, KZ).y, est_d.embed(A, C).y, atol=1e-6)
    _, b_d = est_d.residuals(A, C)
    _, b_k = est_k.residuals(KA, KZ, self_similarity=np.diagonal(KZ))
    assert b_k.trace_k0 == pytest.approx(b_d.trace_k0, abs=1e-8)
    assert b_k.norm_k0 == pytest.approx(b_d.norm_k0, abs=1e-8)


def test_self_similarity_as_last_column_and_projection_without_it(rng) -> None:
    (D, A, _), (K, KA, KZ) = _pair(rng)
    est = LandmarkMDS(2, method="restricted", input="similarity").fit(K)
    kz = np.diagonal(KZ)
    np.testing.assert_array_equal(est.embed(np.hstack([KA, kz[:, None]])).y, est.embed(KA, self_similarity=kz).y)
    assert est.input_width_ == K.shape[0] + 1
    # projection does not need k(z, z) (b does not depend on it); β and k0 are then unknown
    res = est.embed(KA, method="projection", k0_rows="all")
    np.testing.assert_allclose(res.y, LandmarkMDS(2).fit(D).transform(A), atol=1e-9)
    assert np.isnan(res.beta).all() and np.isnan(res.k0).all()
    with pytest.raises(InputError, match="self_similarity"):
        est.embed(KA)  # restricted reconstruction needs β


def test_non_psd_similarities_keep_the_positive_eigenvalues(rng) -> None:
    # a similarity matrix in Trosset et al. 2025's sense (0 <= γ_ij <= γ_ii) that is not PSD (eq. 25)
    n = 20
    G = rng.uniform(0.0, 1.0, size=(n, n))
    K = np.minimum(0.5 * (G + G.T), 0.9)
    np.fill_diagonal(K, 1.0)
    P = np.eye(n) - 1.0 / n
    w = np.linalg.eigvalsh(P @ K @ P)[::-1]
    assert w[-1] < -1e-3  # really not PSD
    est = LandmarkMDS(3, input="similarity").fit(K)
    np.testing.assert_allclose(est.spectrum_.eigenvalues, w[w > 1e-9], rtol=1e-9)
    assert est.negative_share_ > 0.01


def test_similarities_no_inner_product_space_can_hold_are_refused() -> None:
    K = np.array([[1.0, 2.0], [2.0, 1.0]])  # k(x, y) > (k(x, x) + k(y, y)) / 2
    with pytest.raises(InputError, match="negative squared dissimilarity"):
        landmark_dissimilarities(K)
    est = LandmarkMDS(1, input="similarity").fit(np.array([[1.0, 0.2, 0.1], [0.2, 1.0, 0.3], [0.1, 0.3, 1.0]]))
    res = est.embed(np.array([[0.5, 0.5, 0.5], [3.0, 0.0, 0.0]]), self_similarity=np.ones(2), errors="mask")
    assert res.valid.tolist() == [True, False] and res.reasons[1].code == "negative"
    with pytest.raises(InputError, match="symmetric"):
        LandmarkMDS(1, input="similarity").fit(np.array([[1.0, 0.5], [0.2, 1.0]]))


def test_feature_kernels_and_persistence(rng, tmp_path) -> None:
    X, F = rng.normal(size=(30, 5)), rng.normal(size=(10, 5))
    lin = LandmarkMDS(2, input="similarity").fit_features(X, metric="linear")
    rows = lin.dissimilarities_to_landmarks(F)
    assert rows.shape == (10, 31)
    euc = LandmarkMDS(2).fit_features(X)
    np.testing.assert_allclose(lin.transform(rows), euc.transform(euc.dissimilarities_to_landmarks(F)), atol=1e-8)
    cos = LandmarkMDS(2, method="restricted", input="similarity").fit_features(X, metric="cosine")
    cos.save(tmp_path / "cos.npz")
    back = LandmarkMDS.load(tmp_path / "cos.npz")
    assert back.get_params() == cos.get_params() and back.metric_ == "cosine"
    np.testing.assert_array_equal(back.embed(back.dissimilarities_to_landmarks(F)).y,
                                  cos.embed(cos.dissimilarities_to_landmarks(F)).y)
    with pytest.raises(InputError, match="kernel"):
        LandmarkMDS(2, input="similarity").fit_features(X, metric="euclidean")
