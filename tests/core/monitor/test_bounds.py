"""Window bounds checked against a full refit computed by brute force (docs/math.md §4)."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.monitor import residuals
from streamembed.core.monitor.drift import DriftWindow

from ..conftest import euclidean


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


# --------------------------------------------------------------------------- bound, estimate, exact


def _off_span_world(seed: int, share: float, n: int = 40, m: int = 512, p: int = 20):
    """Landmarks from a 3-D Gaussian mixture in R^p (d = 2 drops the third axis); m arrivals, a share off the span.

    Returns (landmark dissimilarities (n, n), rows (m, n), mutual (m, m)).
    """
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(p, p)))[0]
    span, off = basis[:, :3], basis[:, 3:]
    means = rng.normal(size=(4, 3)) * 5.0 * np.array([1.0, 0.7, 0.3])

    def draw(k: int, s: float) -> np.ndarray:
        Z = (means[rng.integers(4, size=k)] + 0.5 * rng.normal(size=(k, 3)) * np.array([3.0, 2.0, 1.0])) @ span.T
        far = rng.random(k) < s
        Z[far] += 5.0 * off[:, 0] + 0.5 * rng.normal(size=(int(far.sum()), p - 3)) @ off.T
        return Z

    L, Z = draw(n, 0.0), draw(m, share)
    return euclidean(L, L), euclidean(Z, L), euclidean(Z, Z)


@pytest.mark.slow  # about 8 s: ten 512-object windows, each with its exact block residual
def test_sampled_norm_is_a_bound_and_the_trace_estimate_is_accurate():
    """5 % of the arrivals off the span, 64 of 512 rows sampled, 10 windows: norm_k0 is never below the true
    ‖k0‖₂ (a scaled sample trace is, in 4 of them) and the trace estimate is within ±25 % of Tr(k0) in at least 9
    (a scaled sample trace: in 3)."""
    below, within = 0, 0
    for seed in range(10):
        DL, A, C = _off_span_world(seed, 0.05)
        est = LandmarkMDS(n_components=2).fit(DL)
        _, sampled = est.residuals(A, k0_rows=64)
        K0 = est.model_.block_residual(A, C)
        true_norm, true_trace = np.linalg.eigvalsh(K0)[-1], np.trace(K0)
        below += sampled.norm_k0 < true_norm
        within += abs(sampled.trace_k0 / true_trace - 1) <= 0.25
    assert below == 0
    assert within >= 9
    assert not sampled.norm_exact and sampled.psd
    assert sampled.trace_k0_bound >= true_trace  # Σu ≥ Tr(k0): any sample
    assert sampled.new_axis_possible is not None and np.isfinite(sampled.gap_ratio)


def test_the_window_statistics_bound_and_estimate_like_residuals():
    """The daemon's window (batches of 128, 16 sampled rows each) reports the same kinds of numbers."""
    DL, A, C = _off_span_world(3, 0.1)
    est = LandmarkMDS(n_components=2).fit(DL)
    win = DriftWindow.for_model(est.model_)
    for b in range(4):
        res = est.embed(A[128 * b:128 * (b + 1)], k0_rows=16)
        rows = res.residual_rows
        win.add(float(b), res.relative_unexplained, res.k0[rows], res.residual_coords, res.beta[rows],
                unexplained=res.unexplained)
    stats = win.statistics()
    K0 = est.model_.block_residual(A, C)
    assert stats.norm_k0 >= np.linalg.eigvalsh(K0)[-1] and not stats.norm_exact
    assert stats.trace_k0_bound >= np.trace(K0)
    assert abs(stats.trace_k0 - np.trace(K0)) <= 3 * stats.trace_k0_stderr + 1e-9


def test_a_window_that_is_one_block_has_the_exact_norm():
    """A window that is one block placed whole reports its exact ‖K0‖₂ (norm_exact True), the block's own."""
    DL, A, C = _off_span_world(4, 0.1, m=24)
    est = LandmarkMDS(n_components=2).fit(DL)
    res = est.embed_blocks(A, [C], k0_rows="all")
    K0 = est.model_.block_residual(A, C)
    exact = float(np.abs(np.linalg.eigvalsh(K0)).max())
    assert res.block_norm_k0 == pytest.approx(exact, rel=1e-9)
    win = DriftWindow.for_model(est.model_)
    rows = res.residual_rows
    win.add(0.0, res.relative_unexplained, res.k0[rows], res.residual_coords, res.beta[rows], res.block_norm_k0,
            unexplained=res.unexplained)
    stats = win.statistics()
    assert stats.norm_exact and stats.norm_k0 == pytest.approx(exact, rel=1e-9)
    assert stats.trace_k0 == pytest.approx(np.trace(K0), rel=1e-9) and stats.trace_k0_stderr == 0.0
    win.add(1.0, res.relative_unexplained, res.k0[rows], res.residual_coords, res.beta[rows], res.block_norm_k0,
            unexplained=res.unexplained)
    two = win.statistics()  # two blocks: no longer one K0, so a bound again
    assert not two.norm_exact and two.norm_k0 >= stats.norm_k0


def test_one_spectral_norm_for_an_indefinite_block():
    """City-block data: a block's K0 is indefinite, dominated by its negative eigenvalues. ‖K0‖₂ = max|λ| is the
    one formula (Weyl's two-sided bound); the old ``residuals.operator_norm`` gave max(λ_max, 0), the block path
    max|λ| — two "exact" values for one block. A block of a non-Euclidean map does not make the window's
    ‖k0‖₂ known (k0 does not vanish on its landmarks): NaN there, never the block's number."""
    rng = np.random.default_rng(2)
    P = rng.normal(size=(80, 6)) * 3
    city = np.abs(P[:, None, :] - P[None, :, :]).sum(-1)
    est = LandmarkMDS(n_components=3).fit(city[:60, :60])
    A, C = city[60:, :60], city[60:, 60:]
    w = np.linalg.eigvalsh(est.model_.block_residual(A, C))
    assert -w[0] > max(w[-1], 0.0)
    assert residuals.spectral_norm(est.model_.block_residual(A, C)) == pytest.approx(-w[0], rel=1e-9)
    assert est.embed_blocks(A, [C], k0_rows="all").block_norm_k0 == pytest.approx(-w[0], rel=1e-9)
    _, bounds = est.residuals(A, C)
    assert not bounds.norm_exact and np.isnan(bounds.norm_k0) and bounds.new_axis_possible is None


def test_non_euclidean_windows_report_nan_and_none_never_zero():
    """City-block data: Tr(k0) < 0, so nothing bounds ‖k0‖₂ by the trace (was 0.0, 0.0 and False)."""
    rng = np.random.default_rng(0)
    P = rng.normal(size=(260, 6)) * 3
    city = np.abs(P[:, None, :] - P[None, :, :]).sum(-1)
    est = LandmarkMDS(n_components=3).fit(city[:60, :60])
    _, bounds = est.residuals(city[60:, :60], k0_rows=32)
    assert bounds.trace_k0 < 0
    assert np.isnan(bounds.norm_k0) and np.isnan(bounds.gap_ratio) and bounds.new_axis_possible is None
    assert not bounds.psd
    assert np.isnan(bounds.kernel_distance_bound)
    assert np.isfinite(bounds.trace_k0_bound)  # Σu ≥ Tr(k0) holds for any data


def test_exactly_euclidean_data_has_no_negative_k0_share():
    """Data exactly in the landmarks' span has negative_k0_share 0: k0 below zero by round-off does not count."""
    rng = np.random.default_rng(1)
    P = rng.normal(size=(300, 3)) @ rng.normal(size=(3, 6))
    D = euclidean(P, P)
    est = LandmarkMDS(n_components=2).fit(D[:50, :50])
    res, bounds = est.residuals(D[50:, :50])
    assert (res.k0 < 0).any()  # round-off below zero
    assert bounds.negative_k0_share == 0.0
    assert bounds.psd


def test_one_formula_for_each_residual():
    """u, k0 and τ of a placement are residuals.unexplained / k0_diagonal / dropped_energy of its projections."""
    DL, A, _ = _off_span_world(6, 0.2, m=50)
    est = LandmarkMDS(n_components=2).fit(DL)
    res = est.embed(A, k0_rows="all")
    y_r, beta = est.model_.residual_projection(A)
    np.testing.assert_allclose(res.unexplained, residuals.unexplained(beta, y_r[:, :2]), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(res.k0, residuals.k0_diagonal(beta, y_r), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(res.unexplained - res.k0, residuals.dropped_energy(y_r, 2), rtol=1e-7, atol=1e-7)
    assert not hasattr(residuals, "operator_norm")  # one ‖K0‖₂: residuals.spectral_norm
