"""Single-object RR against brute-force global minimisation (docs/math.md §3)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

from streamembed.core.flags import FLAG_AMBIGUOUS, FLAG_NOT_CONVERGED
from streamembed.core.place.restricted import available_backends, restricted_arc, restricted_objective, solve_restricted


@pytest.fixture(params=available_backends())
def backend(request) -> str:
    """Each implementation of the Newton iteration (compiled and numpy)."""
    return request.param


def brute_force(c: np.ndarray, beta: float, lam: np.ndarray, b_perp2: float, rng, n_starts: int = 60) -> float:
    """Global minimum of F over y by many L-BFGS starts (d ≤ 4)."""
    sl = np.sqrt(lam)

    def f(y):
        r = np.square(y).sum() - beta
        return 2 * (np.square(sl * y - c).sum() + b_perp2) + r * r

    def g(y):
        r = np.square(y).sum() - beta
        return 4 * sl * (sl * y - c) + 4 * r * y

    scale = np.sqrt(abs(beta) + np.square(c / sl).sum()) + 1.0
    best = np.inf
    for _ in range(n_starts):
        res = scipy.optimize.minimize(f, rng.normal(size=lam.size) * scale, jac=g, method="BFGS",
                                      options={"gtol": 1e-10})
        best = min(best, res.fun)
    return best


def random_problem(rng, d: int, kind: str):
    lam = np.sort(rng.uniform(0.5, 20.0, size=d))[::-1]
    c = rng.normal(size=d) * np.sqrt(lam) * rng.uniform(0.1, 3.0)
    if kind in ("hard", "near_hard"):
        c[-1] = 0.0 if kind == "hard" else 1e-7 * np.sqrt(lam[-1])
        beta = lam[-1] + np.square(np.sqrt(lam[:-1]) * c[:-1] / (lam[:-1] - lam[-1])).sum() + rng.uniform(0.5, 30.0)
    elif kind == "inward":
        beta = max(np.square(c / np.sqrt(lam)).sum() * rng.uniform(0.0, 0.9), 0.0)
    else:
        beta = np.square(c / np.sqrt(lam)).sum() + rng.uniform(0.0, 50.0)
    return c, beta, lam


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["easy", "inward", "hard", "near_hard"])
def test_solver_never_worse_than_brute_force(kind, backend):
    rng = np.random.default_rng({"easy": 1, "inward": 2, "hard": 3, "near_hard": 4}[kind])
    for _ in range(25):
        d = int(rng.integers(1, 4))
        c, beta, lam = random_problem(rng, d, kind)
        b_perp2 = float(rng.uniform(0, 5))
        sol = solve_restricted(c[None], np.array([beta]), lam, backend=backend)
        assert not sol.flags[0] & FLAG_NOT_CONVERGED
        F = restricted_objective(sol.y, c[None], np.array([beta]), lam, np.array([b_perp2]))[0]
        Fb = brute_force(c, beta, lam, b_perp2, rng)
        assert Fb * (1 + 1e-9) + 1e-9 >= F, (kind, c, beta, lam, F, Fb)


def test_hard_case_flags_and_multiplier(backend):
    lam = np.array([10.0, 4.0])
    c = np.array([[3.0, 0.0]])
    beta = np.array([50.0])
    sol = solve_restricted(c, beta, lam, backend=backend)
    assert sol.flags[0] & FLAG_AMBIGUOUS
    assert sol.t[0] == pytest.approx(-4.0)
    assert np.square(sol.y).sum() - beta[0] == pytest.approx(sol.t[0])


def test_multiplier_is_norm_minus_beta_and_sign_rule(rng, backend):
    m, d = 2000, 5
    lam = np.sort(rng.uniform(1, 30, d))[::-1]
    c = rng.normal(size=(m, d)) * np.sqrt(lam)
    yhat2 = np.square(c / np.sqrt(lam)).sum(1)
    beta = yhat2 * rng.uniform(0.2, 3.0, m)
    sol = solve_restricted(c, beta, lam, backend=backend)
    assert (np.abs(np.square(sol.y).sum(1) - beta - sol.t) <= 1e-8 * (1 + beta)).all()
    # t* > 0 ⇔ β < ‖ŷ‖² (docs/math.md §3)
    assert ((sol.t > 0) == (beta < yhat2)).all()
    # stationarity: (Λ + t I) y = Λ^{1/2} c
    assert (np.abs((lam + sol.t[:, None]) * sol.y - np.sqrt(lam) * c) <= 1e-7 * (1 + np.abs(c))).all()


def test_batch_independence(rng):
    lam = np.array([9.0, 4.0, 1.0])
    c = rng.normal(size=(50, 3)) * 2
    beta = rng.uniform(0, 40, 50)
    whole = solve_restricted(c, beta, lam)
    for i in (0, 17, 49):
        one = solve_restricted(c[i : i + 1], beta[i : i + 1], lam)
        np.testing.assert_allclose(one.y[0], whole.y[i], rtol=1e-12, atol=1e-12)


def test_arc_runs_from_projection_to_restricted(rng):
    lam = np.array([9.0, 4.0])
    c = rng.normal(size=(10, 2)) * 2
    beta = np.square(c / np.sqrt(lam)).sum(1) + rng.uniform(0, 5, 10)
    sol = solve_restricted(c, beta, lam)
    np.testing.assert_allclose(restricted_arc(c, lam, sol.t, 0.0), c / np.sqrt(lam))
    np.testing.assert_allclose(restricted_arc(c, lam, sol.t, 1.0), sol.y, rtol=1e-9)
    # along the arc the norm moves monotonically from ‖ŷ‖ to ‖y*‖ (ridge path)
    norms = np.array([np.linalg.norm(restricted_arc(c, lam, sol.t, s), axis=1) for s in np.linspace(0, 1, 11)])
    diffs = np.diff(norms, axis=0) * np.sign(-sol.t)
    assert (diffs >= -1e-12).all()
    with pytest.raises(ValueError, match="arc parameter"):
        restricted_arc(c, lam, sol.t, 1.5)


def test_repeated_smallest_eigenvalue_hard_case(backend):
    lam = np.array([10.0, 3.0, 3.0])
    c = np.array([[2.0, 0.0, 0.0]])
    beta = np.array([30.0])
    sol = solve_restricted(c, beta, lam, backend=backend)
    assert sol.flags[0] & FLAG_AMBIGUOUS
    assert sol.t[0] == pytest.approx(-3.0)
    assert np.square(sol.y).sum() == pytest.approx(27.0)


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="secular backend 'fortran' is not available"):
        solve_restricted(np.ones((1, 2)), np.ones(1), np.array([2.0, 1.0]), backend="fortran")
