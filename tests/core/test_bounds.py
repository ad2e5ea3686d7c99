"""Window bounds checked against a full refit computed by brute force (docs/math.md §4)."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import LandmarkMDS

from .conftest import euclidean


def _kernels(L: np.ndarray, Z: np.ndarray):
    """Landmark-centred linear kernel k over X = L ∪ Z and its Nyström extension k̂."""
    mu = L.mean(axis=0)
    Xall = np.vstack([L, Z]) - mu
    K = Xall @ Xall.T
    n = L.shape[0]
    KL = K[:n, :n]
    Khat = K[:, :n] @ np.linalg.pinv(KL, rcond=1e-10) @ K[:n, :]
    return K, Khat


def _whole_set_error(K: np.ndarray, Khat: np.ndarray) -> float:
    def dist2(M):
        dg = np.diagonal(M)
        return dg[:, None] + dg[None, :] - 2 * M

    return float(np.sqrt(np.abs(dist2(K) - dist2(Khat)).sum())) / K.shape[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kernel_distance_error_and_eigenvalue_bounds(seed):
    rng = np.random.default_rng(seed)
    n, p, nz = 6, 2, 40
    L = np.hstack([rng.normal(size=(n, p)) * 3, np.zeros((n, 1))])
    Z = np.hstack([rng.normal(size=(nz, p)) * 3, rng.normal(size=(nz, 1)) * 1.5])
    K, Khat = _kernels(L, Z)
    est = LandmarkMDS(n_components=2).fit(euclidean(L, L))
    res, bounds = est.residuals(euclidean(Z, L), euclidean(Z, Z), k0_rows="all")

    K0 = (K - Khat)[n:, n:]
    np.testing.assert_allclose(res.k0, np.diagonal(K0), atol=1e-9)
    assert bounds.trace_k0 == pytest.approx(np.trace(K0), rel=1e-9)
    assert bounds.norm_exact and bounds.norm_k0 == pytest.approx(np.linalg.eigvalsh(K0)[-1], rel=1e-9)

    error = _whole_set_error(K, Khat)
    assert bounds.kernel_distance_exact == pytest.approx(error, rel=1e-9)
    assert error <= bounds.kernel_distance_bound * (1 + 1e-12)
    # Wang's Theorem 18 sums over Z×Z only and can undercut the whole-set error
    theorem18 = np.sqrt(2 * nz) * np.sqrt(np.trace(K0)) / (n + nz)
    assert theorem18 < bounds.kernel_distance_bound

    # Corollary 16: 0 ≤ λ_j(refit) - γ_j ≤ ‖k0‖₂ for j ≤ r, λ_j(refit) ≤ ‖k0‖₂ beyond
    refit = np.linalg.eigvalsh(K)[::-1]
    r = bounds.gamma.size
    np.testing.assert_allclose(bounds.gamma, np.linalg.eigvalsh(Khat)[::-1][:r], rtol=1e-8)
    diff = refit[:r] - bounds.gamma
    assert (diff >= -1e-8).all() and (diff <= bounds.norm_k0 + 1e-8).all()
    assert (refit[r:] <= bounds.norm_k0 + 1e-8).all()


def test_without_mutual_dissimilarities_the_trace_bounds_the_norm():
    rng = np.random.default_rng(3)
    L = np.hstack([rng.normal(size=(8, 2)), np.zeros((8, 1))])
    Z = np.hstack([rng.normal(size=(20, 2)), rng.normal(size=(20, 1))])
    est = LandmarkMDS(n_components=2).fit(euclidean(L, L))
    _, exact = est.residuals(euclidean(Z, L), euclidean(Z, Z))
    _, bound = est.residuals(euclidean(Z, L))
    assert not bound.norm_exact
    assert bound.norm_k0 == pytest.approx(exact.trace_k0)
    assert exact.norm_k0 <= bound.norm_k0 + 1e-12


def test_sampled_k0_estimates_the_window(rng):
    L = np.hstack([rng.normal(size=(10, 2)), np.zeros((10, 1))])
    Z = np.hstack([rng.normal(size=(400, 2)), 0.5 * rng.normal(size=(400, 1))])
    est = LandmarkMDS(n_components=2).fit(euclidean(L, L))
    _, full = est.residuals(euclidean(Z, L), k0_rows="all")
    res, sampled = est.residuals(euclidean(Z, L), k0_rows=100)
    assert np.isfinite(res.k0).sum() == 100 and sampled.n_sampled == 100 and sampled.n_window == 400
    assert sampled.trace_k0 == pytest.approx(full.trace_k0, rel=0.25)
