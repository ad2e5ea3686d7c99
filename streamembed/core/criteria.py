"""Other out-of-sample criteria: raw stress and squared-distance L1 (MATH.md §3 "Other criteria").

With the landmark configuration X (n, d) held fixed, an object with
dissimilarities δ (n,) to the landmarks is placed at a minimiser of

    stress  σ(y) = Σ_i (‖y - x_i‖ - δ_i)²        seed 000 end of §4 (σ_out): restricted
                                                 reconstruction for a stress-built map
    L1      ℓ(y) = Σ_i |δ_i² - ‖y - x_i‖²|       seed 003 §1 (criterion 1) and §3

started from the projection ŷ (MATH.md §3). Units: y and X in distance
units, σ in squared distance units, ℓ in squared distance units.

Stress: Guttman-transform majorisation (SMACOF with one free point, seed 001
§2.2): y ← x̄ + (1/n) Σ_i δ_i (y - x_i)/‖y - x_i‖ never increases σ; after it
has settled, damped Newton steps (analytic Hessian, eigenvalues replaced by
their absolute values, backtracking) polish to full precision. σ is not
convex: the result is the local minimum the descent from ŷ reaches, never
worse than ŷ.

L1: ℓ is piecewise quadratic with kinks on the circles ‖y - x_i‖ = δ_i, and
its minima sit at kinks where several residuals vanish at once: that is why
L1 "snaps" objects onto a few points (seed 003 §3, the LASSO analogy). It is
minimised through the smooth surrogate Σ_i √(e_i² + ε²), e_i = ‖y - x_i‖² - δ_i²,
by damped Newton with continuation ε → 10⁻¹²·scale (each stage starts where
the previous ended; large ε first smooths away the shallow kinks). The
result is never worse than ŷ (the start is kept when it is better).

Everything is vectorised over the m objects of a batch (rows processed in
chunks that bound the (m, n, d) work arrays); no per-object Python loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

#: (rows × landmarks × d) elements per chunk of work arrays (16 MB of float64).
CHUNK_ELEMENTS = 2_000_000
#: Majorisation sweeps before the Newton polish (stress).
MAJORIZATION_ITER = 60
#: Newton iterations per stage (stress polish, each L1 continuation stage).
NEWTON_ITER = 40
#: Relative step size at which a row counts as converged.
STEP_RTOL = 1e-12
#: Backtracking halvings before a row counts as converged (no decrease found).
MAX_HALVINGS = 30
#: Final smoothing of the L1 surrogate, relative to the row's squared-distance scale.
L1_EPS_FINAL = 1e-12
#: Factor between successive smoothing levels.
L1_EPS_FACTOR = 0.1


@dataclass
class CriterionSolution:
    """Placements of m objects under one criterion.

    Attributes:
        y: (m, d) coordinates (distance units), in X's frame.
        objective: (m,) criterion value at y.
        start_objective: (m,) criterion value at the start (the projection).
        converged: (m,) bool; False where the iteration limit was reached.
    """

    y: np.ndarray
    objective: np.ndarray
    start_objective: np.ndarray
    converged: np.ndarray


# ------------------------------------------------------------------ objectives


def _diff(Y: np.ndarray, X: np.ndarray) -> np.ndarray:
    """(m, n, d) differences y - x_i (exact, no ‖y‖² - 2y·x + ‖x‖² cancellation)."""
    return Y[:, None, :] - X[None, :, :]


def _sq(D: np.ndarray) -> np.ndarray:
    """(m, n) squared lengths of the (m, n, d) differences."""
    return np.einsum("mnd,mnd->mn", D, D)


def _wsum(w: np.ndarray, D: np.ndarray) -> np.ndarray:
    """Σ_i w_i (y - x_i) per object: (m, d) from weights (m, n) and differences (m, n, d)."""
    return np.matmul(w[:, None, :], D)[:, 0, :]


def _wouter(w: np.ndarray, D: np.ndarray) -> np.ndarray:
    """Σ_i w_i (y - x_i)(y - x_i)ᵀ per object: (m, d, d)."""
    return np.matmul((w[:, :, None] * D).transpose(0, 2, 1), D)


def stress_objective(Y: np.ndarray, X: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """σ(y) per object: Y (m, d), X (n, d), delta (m, n) -> (m,)."""
    out = np.empty(Y.shape[0])
    for s in _chunks(Y.shape[0], X.shape):
        r = np.sqrt(_sq(_diff(Y[s], X)))
        out[s] = np.square(r - delta[s]).sum(axis=1)
    return out


def l1_objective(Y: np.ndarray, X: np.ndarray, delta2: np.ndarray) -> np.ndarray:
    """ℓ(y) per object: Y (m, d), X (n, d), delta2 (m, n) squared dissimilarities -> (m,)."""
    out = np.empty(Y.shape[0])
    for s in _chunks(Y.shape[0], X.shape):
        out[s] = np.abs(delta2[s] - _sq(_diff(Y[s], X))).sum(axis=1)
    return out


def _chunks(m: int, xshape: tuple[int, int]) -> list[slice]:
    rows = max(1, CHUNK_ELEMENTS // max(1, xshape[0] * xshape[1]))
    return [slice(i, min(i + rows, m)) for i in range(0, m, rows)]


def _solve_by_chunks(chunk_solver, objective, Y0: np.ndarray, X: np.ndarray, data: np.ndarray) -> CriterionSolution:
    """Run ``chunk_solver`` over cache-sized row chunks; never return worse than the start."""
    Y0 = np.asarray(Y0, dtype=np.float64)
    data = np.asarray(data, dtype=np.float64)
    Y = np.empty_like(Y0)
    conv = np.empty(Y0.shape[0], dtype=bool)
    for s in _chunks(Y0.shape[0], X.shape):
        Y[s], conv[s] = chunk_solver(Y0[s], X, data[s])
    obj = objective(Y, X, data)
    start = objective(Y0, X, data)
    worse = ~(obj <= start)  # descent cannot be worse; NaN-safe guard
    Y[worse], obj[worse] = Y0[worse], start[worse]
    return CriterionSolution(y=Y, objective=obj, start_objective=start, converged=conv)


# ------------------------------------------------------------------ stress


def solve_stress(Y0: np.ndarray, X: np.ndarray, delta: np.ndarray) -> CriterionSolution:
    """Minimise σ for m objects from the starts Y0 (m, d); X (n, d); delta (m, n) ≥ 0."""
    return _solve_by_chunks(_stress_chunk, stress_objective, Y0, X, delta)


def _stress_chunk(Y0: np.ndarray, X: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = X.shape[0]
    xbar = X.mean(axis=0)
    settle = 1e-4 * _length(X)
    Y = Y0.copy()
    active = np.arange(Y.shape[0])
    for _ in range(MAJORIZATION_ITER):  # Guttman transforms until the steps are small
        if active.size == 0:
            break
        D = _diff(Y[active], X)
        r = np.sqrt(_sq(D))
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(r > 0, delta[active] / r, 0.0)
        new = xbar + _wsum(w, D) / n
        moved = np.sqrt(np.square(new - Y[active]).sum(axis=1))
        Y[active] = new
        active = active[moved > settle]

    sumX = X.sum(axis=0)
    eye = np.eye(X.shape[1])

    def fun(Yr: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.square(np.sqrt(_sq(_diff(Yr, X))) - delta[rows]).sum(axis=1)

    def derivs(Yr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        D = _diff(Yr, X)
        r = np.sqrt(_sq(D))
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(r > 0, delta[rows] / r, 0.0)
            w3 = np.where(r > 0, w / np.square(r), 0.0)
        g = 2.0 * (n * Yr - sumX - _wsum(w, D))
        H = 2.0 * ((n - w.sum(axis=1))[:, None, None] * eye + _wouter(w3, D))
        return g, H

    return _damped_newton(Y, fun, derivs, NEWTON_ITER, _length(X))


# ------------------------------------------------------------------ L1


def solve_l1(Y0: np.ndarray, X: np.ndarray, delta2: np.ndarray) -> CriterionSolution:
    """Minimise ℓ for m objects from the starts Y0 (m, d); X (n, d); delta2 (m, n) squared dissimilarities."""
    return _solve_by_chunks(_l1_chunk, l1_objective, Y0, X, delta2)


def _l1_chunk(Y0: np.ndarray, X: np.ndarray, delta2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    eye = np.eye(X.shape[1])
    length = _length(X)
    scale = np.maximum(np.abs(delta2).mean(axis=1) + np.square(X).sum(axis=1).mean(), 1e-300)
    e0 = np.abs(_sq(_diff(Y0, X)) - delta2)
    eps_final = L1_EPS_FINAL * scale
    eps = np.maximum(np.median(e0, axis=1), 1e-3 * scale)
    Y = Y0.copy()
    conv = np.ones(Y.shape[0], dtype=bool)
    todo = np.arange(Y.shape[0])
    while todo.size:  # each row runs its own sequence of smoothing levels
        d2, e2 = delta2[todo], np.square(eps[todo])

        def fun(Yr: np.ndarray, rows: np.ndarray) -> np.ndarray:
            e = _sq(_diff(Yr, X)) - d2[rows]
            return np.sqrt(np.square(e) + e2[rows, None]).sum(axis=1)

        def derivs(Yr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            D = _diff(Yr, X)
            e = _sq(D) - d2[rows]
            rho = np.sqrt(np.square(e) + e2[rows, None])
            g = 2.0 * _wsum(e / rho, D)
            H = _wouter(4.0 * e2[rows, None] / rho**3, D) + (2.0 * (e / rho).sum(axis=1))[:, None, None] * eye
            return g, H

        Y[todo], conv[todo] = _damped_newton(Y[todo], fun, derivs, NEWTON_ITER, length)
        todo = todo[eps[todo] > eps_final[todo]]
        eps[todo] = np.maximum(eps[todo] * L1_EPS_FACTOR, eps_final[todo])
    return Y, conv


def _length(X: np.ndarray) -> float:
    """RMS radius of the landmark map: the length scale of convergence tests."""
    return max(float(np.sqrt(np.square(X - X.mean(axis=0)).sum(axis=1).mean())), 1e-300)


# ------------------------------------------------------------------ Newton


def _damped_newton(
    Y: np.ndarray,
    fun: Callable[[np.ndarray, np.ndarray], np.ndarray],
    derivs: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    max_iter: int,
    length: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Newton with |eigenvalue| modification and backtracking, rows independent.

    ``fun(Y_rows, rows)`` and ``derivs(Y_rows, rows)`` evaluate the criterion
    (and gradient (k, d), Hessian (k, d, d)) for the rows ``rows`` of the chunk.
    A row stops when its step is below ``STEP_RTOL`` relative to max(‖y‖,
    ``length``) (a scale of the landmark map, the same for every row, so a
    row's result does not depend on the rest of the batch) or no step
    decreases it. Returns (Y, converged).
    """
    Y = Y.copy()
    active = np.arange(Y.shape[0])
    f = fun(Y, active)
    t_last = np.ones(Y.shape[0])  # each row starts its line search near its last accepted step length
    for _ in range(max_iter):
        if active.size == 0:
            return Y, np.ones(Y.shape[0], dtype=bool)
        Ya = Y[active]
        g, H = derivs(Ya, active)
        w, V = np.linalg.eigh(H)
        wabs = np.abs(w)
        floor = 1e-12 * wabs.max(axis=1, keepdims=True) + 1e-300
        step = -np.einsum("mde,me->md", V, np.einsum("mde,md->me", V, g) / np.maximum(wabs, floor))
        size = np.maximum(np.linalg.norm(Ya, axis=1), length)
        tiny = np.linalg.norm(step, axis=1) <= STEP_RTOL * size
        if tiny.any():  # at a stationary point already: no line search
            active, Ya, step, g = active[~tiny], Ya[~tiny], step[~tiny], g[~tiny]
            if active.size == 0:
                continue
        fa = f[active]
        t = np.minimum(1.0, 4.0 * t_last[active])
        accepted = np.zeros(active.size, dtype=bool)
        todo = np.arange(active.size)
        for _ls in range(MAX_HALVINGS):
            Yt = Ya[todo] + t[todo, None] * step[todo]
            ft = fun(Yt, active[todo])
            ok = ft <= fa[todo]
            acc = todo[ok]
            Ya[acc] = Yt[ok]
            fa[acc] = ft[ok]
            accepted[acc] = True
            todo = todo[~ok]
            if todo.size == 0:
                break
            t[todo] *= 0.5
        moved = t * np.linalg.norm(step, axis=1)
        t_last[active] = np.where(accepted, t, 1.0)
        Y[active] = Ya
        f[active] = fa
        size = np.maximum(np.linalg.norm(Ya, axis=1), length)
        done = ~accepted | (moved <= STEP_RTOL * size)
        active = active[~done]
    converged = np.ones(Y.shape[0], dtype=bool)
    converged[active] = False
    return Y, converged

