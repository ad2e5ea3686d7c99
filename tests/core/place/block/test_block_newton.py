"""The trust-region Newton kernel of block RR (core/place/block/newton.py, docs/math.md §3)."""

from __future__ import annotations

import numpy as np

from streamembed.core.place.block.solve import _objective
from streamembed.core.place.block.newton import _Problems, _State, gradient, trust_region_newton


def _random_stack(rng, s=5, k=4, d=3):
    C = rng.normal(size=(s, k, d))
    G = rng.normal(size=(s, k, k + 2))
    Beta = G @ G.transpose(0, 2, 1)
    lam = np.sort(rng.uniform(0.5, 5.0, size=d))[::-1]
    return C, Beta, lam


def test_gradient_and_hessian_action_match_finite_differences():
    rng = np.random.default_rng(0)
    C, Beta, lam = _random_stack(rng)
    Y = rng.normal(size=C.shape)
    V = rng.normal(size=C.shape)
    P = _Problems(C, Beta, lam, np.zeros(C.shape[0]))
    h = 1e-6
    f = lambda Z: _objective(Z, C, Beta, np.sqrt(lam), np.zeros(C.shape[0]))  # noqa: E731
    g, _ = gradient(Y, C, Beta, lam)
    fd = (f(Y + h * V) - f(Y - h * V)) / (2 * h)
    np.testing.assert_allclose((g * V).sum(axis=(1, 2)), fd, rtol=1e-7)
    Hv = _State(P, Y).hess(P, V)
    gp, _ = gradient(Y + h * V, C, Beta, lam)
    gm, _ = gradient(Y - h * V, C, Beta, lam)
    np.testing.assert_allclose(Hv, (gp - gm) / (2 * h), rtol=1e-6, atol=1e-6 * np.abs(Hv).max())


def test_exact_change_equals_the_difference_of_objectives():
    rng = np.random.default_rng(1)
    C, Beta, lam = _random_stack(rng)
    Y, S = rng.normal(size=C.shape), rng.normal(size=C.shape)
    f0 = rng.uniform(0, 3, size=C.shape[0])
    P = _Problems(C, Beta, lam, f0)
    f = lambda Z: _objective(Z, C, Beta, np.sqrt(lam), f0)  # noqa: E731
    np.testing.assert_allclose(_State(P, Y).change(P, S), f(Y + S) - f(Y), rtol=1e-10)


def test_converges_to_stationary_points_with_positive_semidefinite_hessian():
    rng = np.random.default_rng(2)
    C, Beta, lam = _random_stack(rng, s=20, k=5, d=3)
    res = trust_region_newton(rng.normal(size=C.shape) * 3, C, Beta, lam, np.zeros(20))
    assert res.converged.all() and (res.iterations < 60).all()
    g, scale = gradient(res.y, C, Beta, lam)
    assert (np.sqrt((g * g).sum(axis=(1, 2))) <= 1e-10 * scale).all()
    # second-order: the Hessian at each limit point has no direction of negative curvature
    P = _Problems(C, Beta, lam, np.zeros(20))
    st = _State(P, res.y)
    n = 5 * 3
    for i in range(20):
        H = np.empty((n, n))
        for j in range(n):
            E = np.zeros((20, 5, 3))
            E[i].flat[j] = 1.0
            H[:, j] = st.hess(P, E)[i].ravel()
        assert np.linalg.eigvalsh(0.5 * (H + H.T))[0] >= -1e-8 * np.abs(H).max()


def test_a_start_next_to_a_saddle_point_leaves_it_along_negative_curvature():
    # C = 0 and Y = 0: the gradient vanishes but Y = 0 is not a minimum when β has
    # an eigenvalue above λ_d; next to it the model is indefinite and the step must
    # follow the negative curvature to the region's edge (Steihaug), not stop.
    lam = np.array([2.0])
    Beta = np.array([[[81.0, -81.0], [-81.0, 81.0]]])
    res = trust_region_newton(np.full((1, 2, 1), 1e-3), np.zeros((1, 2, 1)), Beta, lam, np.zeros(1))
    assert res.objective[0] < 644.0 + 1e-9  # the global value (Trosset et al. 2025, §6)
