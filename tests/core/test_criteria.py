"""The stress and L1 out-of-sample criteria (MATH.md §3 "Other criteria", seed 003, ``core.criteria``).

References: scipy.optimize on the same objective from the same start (BFGS
for the smooth stress, Nelder–Mead for the non-smooth L1), exact recovery in
the span, and seed 003 §3's observation that L1 placements sit where d of
the residuals |δ_i² - ‖y - x_i‖²| vanish at once.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamembed import LandmarkMDS
from streamembed.core.criteria import l1_objective, solve_l1, solve_stress, stress_objective
from streamembed.core.flags import FLAG_NOT_CONVERGED

from .conftest import euclidean, landmark_problem


def _problem(rng, n=25, p=4, m=30, off=1.0):
    D, A, _ = landmark_problem(rng, n, p, m, off_span=off)
    est = LandmarkMDS(2).fit(D)
    return est, est.embedding_, A, est.transform(A)


def test_stress_matches_scipy_from_the_projection(rng) -> None:
    est, X, A, y0 = _problem(rng)
    sol = solve_stress(y0, X, A)
    assert sol.converged.all()
    for i in range(A.shape[0]):
        ref = scipy.optimize.minimize(lambda y: ((np.linalg.norm(y - X, axis=1) - A[i]) ** 2).sum(), y0[i],
                                      method="BFGS", options={"gtol": 1e-10})
        assert sol.objective[i] <= ref.fun * (1 + 1e-9) + 1e-12
    np.testing.assert_allclose(sol.objective, stress_objective(sol.y, X, A))
    assert (sol.objective <= sol.start_objective).all()


def test_l1_is_a_local_minimum_never_worse_than_the_projection(rng) -> None:
    est, X, A, y0 = _problem(rng, m=20)
    sol = solve_l1(y0, X, A**2)
    assert (sol.objective <= sol.start_objective).all()
    for i in range(A.shape[0]):
        f = lambda y: np.abs(A[i] ** 2 - ((y - X) ** 2).sum(axis=1)).sum()  # noqa: E731
        polish = scipy.optimize.minimize(f, sol.y[i], method="Nelder-Mead",
                                         options={"xatol": 1e-12, "fatol": 1e-14, "maxiter": 4000})
        assert polish.fun >= sol.objective[i] * (1 - 1e-8)
    np.testing.assert_allclose(sol.objective, l1_objective(sol.y, X, A**2))


def test_l1_placements_zero_d_residuals_at_once(rng) -> None:
    # seed 003 §3: "the absolute cost function is embedding points so that |d²(w, z_i) - d²(y, x_i)| = 0
    # for some i" — d of them (a vertex of the arrangement of circles), like LASSO's zero coefficients
    est, X, A, y0 = _problem(rng, n=30, p=6, m=60, off=2.0)
    scale = (A**2).mean()

    def zeros(Y):
        e = np.abs(((Y[:, None, :] - X[None]) ** 2).sum(axis=2) - A**2)
        return (e <= 1e-7 * scale).sum(axis=1)

    assert (zeros(est.embed(A, method="l1").y) >= 2).mean() > 0.9
    assert (zeros(y0) == 0).all() and (zeros(est.embed(A, method="stress").y) == 0).all()


def test_in_span_objects_are_recovered_exactly(rng) -> None:
    D, A, _ = landmark_problem(rng, 20, 2, 10)  # objects in the landmarks' plane
    est = LandmarkMDS(2).fit(D)
    exact = est.transform(A)
    for method in ("stress", "l1"):
        np.testing.assert_allclose(est.embed(A, method=method).y, exact, atol=1e-9)


def test_batch_independence_and_estimator_wiring(rng) -> None:
    est, X, A, y0 = _problem(rng, m=12)
    for method, solve, target in (("stress", solve_stress, A), ("l1", solve_l1, A**2)):
        res = est.embed(A, method=method)
        assert res.method == method and np.isnan(res.t).all()
        assert not (res.flags & FLAG_NOT_CONVERGED).any()
        np.testing.assert_allclose(res.y, solve(y0, X, target).y, atol=1e-12)
        one_by_one = np.vstack([est.embed(A[i : i + 1], method=method).y for i in range(A.shape[0])])
        np.testing.assert_allclose(one_by_one, res.y, atol=1e-9)


def test_masked_rows_do_not_disturb_the_others(rng) -> None:
    est, X, A, _ = _problem(rng, m=6)
    bad = A.copy()
    bad[2, 3] = np.nan
    res = est.embed(bad, method="stress", errors="mask")
    assert res.valid.tolist() == [True, True, False, True, True, True]
    good = np.delete(np.arange(6), 2)
    np.testing.assert_allclose(res.y[good], est.embed(A[good], method="stress").y, atol=1e-12)
    assert np.isnan(res.y[2]).all()


@pytest.mark.parametrize("method", ["stress", "l1"])
def test_aligned_model_outputs_are_moved_with_the_map(rng, method: str) -> None:
    est, X, A, _ = _problem(rng, m=5)
    before = est.embed(A, method=method).y
    R = np.array([[0.0, -1.0], [1.0, 0.0]])
    est.set_alignment(R, np.array([3.0, -1.0]))
    np.testing.assert_allclose(est.embed(A, method=method).y, before @ R + [3.0, -1.0], atol=1e-12)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 3), spread=st.floats(0.1, 100.0))
def test_in_span_exactness_at_any_scale(seed: int, p: int, spread: float) -> None:
    rng = np.random.default_rng(seed)
    L, Z = rng.normal(size=(p + 6, p)) * spread, rng.normal(size=(4, p)) * spread
    est = LandmarkMDS(p).fit(euclidean(L, L))
    lam = est.spectrum_.eigenvalues
    if lam.size < p or lam[p - 1] < 1e-6 * lam[0]:
        return
    A = euclidean(Z, L)
    exact = est.transform(A)
    for method in ("stress", "l1"):
        np.testing.assert_allclose(est.embed(A, method=method).y, exact, atol=1e-6 * spread)
