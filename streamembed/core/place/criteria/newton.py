"""Shared arithmetic of the stress and L1 descents (docs/math.md §3 "Other criteria"; ``core.place.criteria.solve`` drives them).

Differences y - x_i and their weighted sums over (m, n, d) work arrays, the row chunks that bound those arrays,
the landmark map's length scale, and damped Newton with |eigenvalue| modification and backtracking, rows
independent. Units: y and X in distance units.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ... import runtime

#: (rows × landmarks × d) elements per chunk of work arrays (16 MB of float64).
CHUNK_ELEMENTS = 2_000_000


#: Newton iterations per stage (stress polish, each L1 continuation stage).
NEWTON_ITER = 40


#: Relative step size at which a row counts as converged.
STEP_RTOL = 1e-12


#: Backtracking halvings before a row counts as converged (no decrease found).
MAX_HALVINGS = 30


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


def _split(data: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(δ (m, n), weights (m, n) or None) of stress data: (m, n) unweighted, (m, n, 2) with weights."""
    return (data[..., 0], data[..., 1]) if data.ndim == 3 else (data, None)


def _chunks(m: int, xshape: tuple[int, int]) -> list[slice]:
    rows = max(1, CHUNK_ELEMENTS // max(1, xshape[0] * xshape[1]))
    return [slice(i, min(i + rows, m)) for i in range(0, m, rows)]


def _length(X: np.ndarray) -> float:
    """RMS radius of the landmark map: the length scale of convergence tests."""
    return max(float(np.sqrt(np.square(X - X.mean(axis=0)).sum(axis=1).mean())), 1e-300)


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
        if runtime.spent():
            break
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
