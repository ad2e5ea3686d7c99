"""Multi-point RR against brute-force global minimisation (MATH.md §3)."""

from __future__ import annotations

import numpy as np
import scipy.optimize

from streamembed import LandmarkMDS
from streamembed.core.block import block_objective, solve_block
from streamembed.core.centering import center_block

from .conftest import landmark_problem


def brute_force_block(C, Beta, lam, B_norm2, rng, n_starts=80):
    k, d = C.shape
    sl = np.sqrt(lam)

    def fg(flat):
        Y = flat.reshape(k, d)
        R = Y @ Y.T - Beta
        f = 2 * ((lam * Y * Y).sum() - 2 * (sl * Y * C).sum() + B_norm2) + (R * R).sum()
        g = 4 * (Y * lam - C * sl) + 4 * R @ Y
        return f, g.ravel()

    scale = np.sqrt(np.abs(np.diagonal(Beta)).mean()) + 1
    best = np.inf
    for _ in range(n_starts):
        res = scipy.optimize.minimize(fg, rng.normal(size=k * d) * scale, jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "maxiter": 5000})
        best = min(best, block_objective(res.x.reshape(k, d), C, Beta, lam, B_norm2))
    return best


def _block(rng, n, p, k, d, off_span):
    D, A, Cz = landmark_problem(rng, n, p, k, off_span)
    est = LandmarkMDS(n_components=d).fit(D)
    B, Beta = center_block(A**2, Cz**2, est.spectrum_.row_means, est.spectrum_.grand_mean)
    C = B @ est.spectrum_.eigenvectors[:, :d]
    return est, A, Cz, C, Beta, float((B**2).sum())


def test_block_solver_matches_brute_force_on_random_small_problems():
    rng = np.random.default_rng(7)
    for trial in range(12):
        k = int(rng.integers(2, 4))
        d = int(rng.integers(1, 3))
        est, A, Cz, C, Beta, Bn = _block(rng, n=6, p=3, k=k, d=d, off_span=float(rng.uniform(0, 3)))
        sol = solve_block(C, Beta, est.eigenvalues_, Bn)
        Fb = brute_force_block(C, Beta, est.eigenvalues_, Bn, rng)
        assert sol.objective <= Fb * (1 + 1e-8) + 1e-8, (trial, sol.objective, Fb)


def test_block_of_one_equals_single_restricted_reconstruction():
    rng = np.random.default_rng(11)
    for _ in range(10):
        D, A, Cz = landmark_problem(rng, 7, 3, 1, off_span=float(rng.uniform(0, 4)))
        est = LandmarkMDS(n_components=2, method="restricted").fit(D)
        single = est.embed(A)
        block = est.embed(A, Cz)
        np.testing.assert_allclose(block.y, single.y, atol=1e-6)


def test_block_objective_not_above_single_or_projection_starts():
    rng = np.random.default_rng(5)
    est, A, Cz, C, Beta, Bn = _block(rng, n=10, p=4, k=5, d=2, off_span=2.0)
    sol = solve_block(C, Beta, est.eigenvalues_, Bn)
    assert sol.objective <= block_objective(sol.single, C, Beta, est.eigenvalues_, Bn) + 1e-9
    assert sol.objective <= block_objective(C / np.sqrt(est.eigenvalues_), C, Beta, est.eigenvalues_, Bn) + 1e-9


def test_block_result_is_deterministic():
    rng = np.random.default_rng(9)
    D, A, Cz = landmark_problem(rng, 8, 3, 4, off_span=1.5)
    est = LandmarkMDS(n_components=2).fit(D)
    np.testing.assert_array_equal(est.embed(A, Cz).y, est.embed(A, Cz).y)
