"""Roy's trustability index and the Theorem 3 reconstruction (docs/math.md §8.1–8.2) against direct computations."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
from scipy.spatial.distance import cdist

from streamembed import LandmarkMDS
from streamembed.core.errors import InputError
from streamembed.quality import classical_mds
from streamembed.trustability import (gaussian_gram, median_distance, procrustes_residual, reconstruction,
                                      relative_trustability, trustability_index)


def _brute_force_procrustes(A: np.ndarray, B: np.ndarray, starts: int = 3) -> float:
    """min over μ, λ, P of ‖A_pad − 1μᵀ − λBP‖² by BFGS over μ, λ and P = expm(S)·R (S skew, R = I or a
    reflection), from several random starts: no closed form used."""
    n, b = B.shape
    Ap = np.hstack([A, np.zeros((n, b - A.shape[1]))])
    iu = np.triu_indices(b, 1)
    rng = np.random.default_rng(0)
    best = np.inf
    for reflect in (False, True):
        R = np.diag([-1.0] + [1.0] * (b - 1)) if reflect else np.eye(b)
        for _ in range(starts):
            def f(v: np.ndarray, R: np.ndarray = R) -> float:
                S = np.zeros((b, b))
                S[iu] = v[:iu[0].size]
                P = scipy.linalg.expm(S - S.T) @ R
                lam, mu = v[iu[0].size], v[iu[0].size + 1:]
                r = Ap - mu - lam * (B @ P)
                return float((r * r).sum())

            v0 = rng.normal(size=iu[0].size + 1 + b)
            best = min(best, scipy.optimize.minimize(f, v0, method="BFGS", options={"gtol": 1e-10}).fun)
    return best


@pytest.mark.parametrize(("n", "p", "d", "seed"), [(12, 2, 2, 0), (15, 3, 3, 1), (15, 3, 2, 2), (10, 3, 1, 3)])
def test_trustability_equals_a_brute_force_procrustes_with_scale(n: int, p: int, d: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) * [3.0, 1.0, 0.5][:p]
    Y = np.tanh(X[:, :d] @ rng.normal(size=(d, d))) + 0.3 * rng.normal(size=(n, d))
    direct = _brute_force_procrustes(Y, X)
    assert trustability_index(X, Y) == pytest.approx(direct, rel=1e-6, abs=1e-9)
    assert procrustes_residual(Y, X) == pytest.approx(direct, rel=1e-6, abs=1e-9)


def test_pca_and_classical_mds_at_d_equal_p_are_perfectly_trustable_on_breast_cancer() -> None:
    """Roy's Example 6 and Theorem 8, on scikit-learn's breast cancer features (569 × 30): 0 to 1e-12 relative."""
    from sklearn.datasets import load_breast_cancer

    X = load_breast_cancer().data
    Xt = X - X.mean(axis=0)
    pca = Xt @ np.linalg.svd(Xt, full_matrices=False)[2].T
    cmds = classical_mds(cdist(X, X), X.shape[1]).Y
    for Y in (pca, cmds):
        assert abs(trustability_index(X, Y)) <= 1e-12 * np.square(Y - Y.mean(axis=0)).sum()
        assert relative_trustability(X, Y) <= 1e-12


def test_relative_trustability_of_pca_at_d_is_the_variance_share_it_drops() -> None:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(80, 5)) * [5.0, 3.0, 2.0, 1.0, 0.5]
    Xt = X - X.mean(axis=0)
    _, s, Vt = np.linalg.svd(Xt, full_matrices=False)
    for d in (1, 2, 4):
        share = 1.0 - (s[:d] ** 2).sum() / (s ** 2).sum()
        assert relative_trustability(X, Xt @ Vt[:d].T) == pytest.approx(share, rel=1e-10)


def test_trustability_has_the_units_of_y_squared_and_the_relative_form_has_none() -> None:
    """TI(cY) = c²·TI(Y): a shrunken output looks more trustable (the correction of docs/math.md §8.1)."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 3))
    Y = np.sin(X[:, :2]) + 0.1 * rng.normal(size=(40, 2))
    for c in (1e-3, 0.5, 7.0):
        assert trustability_index(X, c * Y) == pytest.approx(c * c * trustability_index(X, Y), rel=1e-10)
        assert relative_trustability(X, c * Y) == pytest.approx(relative_trustability(X, Y), rel=1e-10)
    assert 0.0 < relative_trustability(X, Y) < 1.0


def test_the_reconstruction_error_is_uncorrelated_with_the_output() -> None:
    """Theorem 3 with A = n⁻¹ K_y H Y and Aᵀβ = C: Cov(x − f(y), y) = 0 to round-off."""
    from sklearn.datasets import load_breast_cancer

    X = load_breast_cancer().data[:300]
    for Y in (classical_mds(cdist(X, X), 2).Y, LandmarkMDS(2, metric="euclidean", n_landmarks=40).fit_transform(X)):
        rec = reconstruction(X, Y)
        Yt = Y - Y.mean(axis=0)
        scale = np.abs(Yt.T @ (X - X.mean(axis=0))).max()
        assert np.abs(Yt.T @ (X - rec.X_hat)).max() <= 1e-12 * scale
        assert np.allclose(rec(Y), rec.X_hat, rtol=0, atol=1e-9 * np.abs(X).max())


def test_the_printed_theorem_3_coefficients_miss_the_condition_by_one_minus_one_over_n() -> None:
    """With Roy's printed A = G_y G_x α (no 1/n), Cov(f(y), y) = C/n: the violation is exactly 1 − 1/n."""
    rng = np.random.default_rng(6)
    n = 50
    X = rng.normal(size=(n, 4))
    Xt = X - X.mean(axis=0)
    Y = Xt @ np.linalg.svd(Xt)[2][:2].T
    Yt = Y - Y.mean(axis=0)
    H = np.eye(n) - 1.0 / n
    Ky = gaussian_gram(Y, Y, median_distance(Y))
    Gx = H @ gaussian_gram(X, X, median_distance(X)) @ H
    alpha = np.linalg.lstsq(Gx, Yt, rcond=None)[0]
    A = H @ Ky @ H @ Gx @ alpha
    C = Yt.T @ Xt / n
    beta = A @ np.linalg.solve(A.T @ A, C)
    X_hat = X.mean(axis=0) + (Ky - Ky.mean(axis=0)) @ beta
    violation = np.linalg.norm(Yt.T @ (X - X_hat) / n) / np.linalg.norm(C)
    assert violation == pytest.approx(1.0 - 1.0 / n, rel=1e-8)
    rec = reconstruction(X, Y)
    assert np.linalg.norm(Yt.T @ (X - rec.X_hat) / n) <= 1e-13 * np.linalg.norm(C)


def test_theorem_2s_estimator_with_the_cmds_kernel_is_the_projection() -> None:
    """φ(x) = Yᵀ K⁺ K(x) with K the landmarks' classical-MDS kernel equals this engine's projection (§3.1)."""
    rng = np.random.default_rng(7)
    L, Z = rng.normal(size=(30, 4)), rng.normal(size=(10, 4))
    est = LandmarkMDS(2).fit(cdist(L, L))
    D2 = cdist(L, L) ** 2
    H = np.eye(30) - 1.0 / 30
    K = -0.5 * H @ D2 @ H
    A2 = cdist(Z, L) ** 2
    b = -0.5 * (A2 - A2.mean(axis=1, keepdims=True) - D2.mean(axis=0) + D2.mean())  # centred K(x), docs/math.md §2
    phi = b @ np.linalg.pinv(K) @ est.model_.natural_embedding
    assert np.allclose(phi @ est.alignment_rotation_ + est.alignment_shift_, est.transform(cdist(Z, L)),
                       atol=1e-12)


@pytest.mark.parametrize(("X", "Y", "match"), [
    (np.ones((2, 3)) * [[1.0], [2.0]], np.ones((2, 1)) * [[0.0], [1.0]], "at least 3 objects"),
    (np.c_[np.arange(5.0), np.ones(5)], np.arange(5.0)[:, None], r"constant column\(s\) \[1\]"),
    (np.c_[np.arange(5.0), [1.0, 2.0, np.nan, 4.0, 5.0]], np.arange(5.0)[:, None], r"X\[2, 1\] = nan is not finite"),
    (np.c_[np.arange(5.0), np.arange(5.0) ** 2], np.c_[np.arange(5.0), [np.inf, 0, 1, 2, 3]], r"Y\[0, 1\] = inf"),
    (np.c_[np.arange(5.0), np.arange(5.0) ** 2], np.random.default_rng(0).normal(size=(5, 3)), "d = 3 columns, more "
     "than the p = 2"),
    (np.c_[np.arange(5.0), np.arange(5.0) ** 2], np.zeros((5, 1)), r"Y has constant column\(s\) \[0\]"),
    (np.c_[np.arange(5.0), np.arange(5.0) ** 2], np.arange(4.0)[:, None], "Y has 4 rows, X has 5"),
])
def test_bad_input_is_refused_naming_the_problem(X: np.ndarray, Y: np.ndarray, match: str) -> None:
    for index in (trustability_index, relative_trustability, reconstruction):
        with pytest.raises(InputError, match=match):
            index(X, Y)
