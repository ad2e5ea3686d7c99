"""Trust-region Newton for a stack of equal-size block RR problems (docs/math.md §3).

For s independent problems with the same k and d,

    F(Y) = 2‖Y Λ^{1/2} - C‖²_F + ‖Y Yᵀ - β‖²_F + f0,      Y ∈ R^{k×d},

with residuals E = Y Λ^{1/2} - C (k×d) and R = Y Yᵀ - β (k×k), gradient and
Hessian action are

    ∇F    = 4 E Λ^{1/2} + 4 R Y
    H[V]  = 4 (V Λ + R V + V G + Y Vᵀ Y),      G = Yᵀ Y (d×d),

so a Hessian-vector product costs O(k²d + kd²) and no kd×kd matrix is formed.
Each step minimises the quadratic model inside a trust region with
Steihaug's truncated conjugate gradients (Nocedal & Wright 2006, Alg. 7.2),
preconditioned by the diagonal of 4 (Λ + diag G) and measured in that
preconditioner's norm: negative curvature sends the step to the region's
edge, so saddle points and indefinite Hessians need no special case. The
exact change of F along a step S is evaluated without forming F twice
(F is a quartic polynomial):

    ΔF = 4⟨E, S Λ^{1/2}⟩ + 2‖S Λ^{1/2}‖² + 2⟨R, Q⟩ + ‖Q‖²,   Q = Y Sᵀ + S Yᵀ + S Sᵀ,

so the acceptance ratio stays meaningful down to round-off, where the
difference of two values of F would cancel.

Everything is vectorised over the stack; a problem leaves the active set
when it converges, and every operation acts on each problem separately, so
a problem's iterates do not depend on the other problems in the stack.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import runtime
from .certificate import CHOLESKY_SHARE, GRID_HI, GRID_LO

try:
    from ... import _native
except ImportError:  # built without a C compiler (or off x86): the numpy path
    _native = None  # type: ignore[assignment]

#: The implementations of the first start's solve (``first_start``), best first.
BACKENDS = ("compiled", "numpy")

#: Stop when ‖∇F‖_F ≤ GRAD_RTOL · (the size of the terms summed in ∇F):
#: a few hundred ulps of float64, where the computed gradient is round-off.
GRAD_RTOL = 1e-13
#: ... or when an accepted step changed Y by at most this share of ‖Y‖.
STEP_RTOL = 1e-12
#: Truncated CG stops at ‖r‖ ≤ η ‖∇F‖, η = min(CG_FORCING, max(√ρ, CG_FLOOR · GRAD_RTOL / ρ)), ρ = ‖∇F‖/scale:
#: superlinear, and never tighter than CG_FLOOR × the stopping test needs (the last step then takes about half
#: the CG iterations; the point it reaches meets GRAD_RTOL all the same).
CG_FORCING = 0.1
CG_FLOOR = 0.1
#: Steps whose actual decrease is below this share of the predicted one are rejected.
ACCEPT_RATIO = 1e-4


@dataclass
class NewtonResult:
    """Local minimisers of a stack of s block RR problems.

    Attributes:
        y: (s, k, d) coordinates.
        objective: (s,) F(Y), squared-dissimilarity² units, including f0.
        grad_norm: (s,) ‖∇F(Y)‖_F at the returned point.
        iterations: (s,) trust-region iterations used.
        cg_iterations: (s,) conjugate-gradient iterations used in total.
        converged: (s,) bool, a stopping test was met before the iteration limit.
    """

    y: np.ndarray
    objective: np.ndarray
    grad_norm: np.ndarray
    iterations: np.ndarray
    cg_iterations: np.ndarray
    converged: np.ndarray


def _bdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """⟨a_i, b_i⟩ for each problem i of stacked (s, ...) arrays."""
    s = a.shape[0]
    return np.einsum("ij,ij->i", a.reshape(s, -1), b.reshape(s, -1))


def _t(a: np.ndarray) -> np.ndarray:
    return a.transpose(0, 2, 1)


class _Problems:
    """Data of the active problems: C (s, k, d), β (s, k, k), Λ (d,), f0 (s,)."""

    def __init__(self, C: np.ndarray, Beta: np.ndarray, lam: np.ndarray, f0: np.ndarray):
        self.C, self.Beta, self.f0 = C, Beta, f0
        self.lam = lam
        self.sl = np.sqrt(lam)
        self.c_scale = np.sqrt(_bdot(C, C)) * self.sl[0]
        self.beta_norm = np.sqrt(_bdot(Beta, Beta))

    def take(self, idx: np.ndarray) -> _Problems:
        out = object.__new__(_Problems)
        out.C, out.Beta, out.f0 = self.C[idx], self.Beta[idx], self.f0[idx]
        out.lam, out.sl = self.lam, self.sl
        out.c_scale, out.beta_norm = self.c_scale[idx], self.beta_norm[idx]
        return out


class _State:
    """Residuals, objective and gradient at Y for the active problems."""

    def __init__(self, P: _Problems, Y: np.ndarray):
        self.Y = Y
        self.E = Y * P.sl - P.C
        self.R = Y @ _t(Y) - P.Beta
        self.G = _t(Y) @ Y
        self.f = 2.0 * _bdot(self.E, self.E) + _bdot(self.R, self.R) + P.f0
        self.g = 4.0 * (self.E * P.sl + self.R @ Y)
        self.g_norm = np.sqrt(_bdot(self.g, self.g))
        y_norm = np.sqrt(_bdot(Y, Y))
        # size of the terms summed in ∇F: its round-off is a few ulps of this
        self.g_scale = 4.0 * (P.lam[0] * y_norm + P.c_scale + (y_norm * y_norm + P.beta_norm) * y_norm)
        self.y_norm = y_norm

    def hess(self, P: _Problems, V: np.ndarray) -> np.ndarray:
        return _hess(P.lam, self.Y, self.R, self.G, V)

    def change(self, P: _Problems, S: np.ndarray) -> np.ndarray:
        """F(Y + S) - F(Y), exactly (no cancellation between two values of F)."""
        Ss = S * P.sl
        YS = self.Y @ _t(S)
        SS = S @ _t(S)
        Q = YS + _t(YS) + SS
        return 4.0 * _bdot(self.E, Ss) + 2.0 * _bdot(Ss, Ss) + 2.0 * _bdot(self.R, Q) + _bdot(Q, Q)

    def take(self, idx: np.ndarray) -> _State:
        out = object.__new__(_State)
        for name in ("Y", "E", "R", "G", "f", "g", "g_norm", "g_scale", "y_norm"):
            setattr(out, name, getattr(self, name)[idx])
        return out


def _hess(lam: np.ndarray, Y: np.ndarray, R: np.ndarray, G: np.ndarray, V: np.ndarray) -> np.ndarray:
    """H[V] = 4 (V Λ + R V + V G + Y Vᵀ Y) for stacked (s, k, d) arrays."""
    return 4.0 * (V * lam + R @ V + V @ G + Y @ (_t(V) @ Y))


def gradient(Y: np.ndarray, C: np.ndarray, Beta: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(∇F (s, k, d), the size of the terms summed in it (s,)) at Y for a stack of problems."""
    st = _State(_Problems(C, Beta, lam, np.zeros(Y.shape[0])), Y)
    return st.g, st.g_scale


def _steihaug(P: _Problems, st: _State, M: np.ndarray, radius: np.ndarray,
              max_cg: int) -> tuple[np.ndarray, np.ndarray]:
    """Truncated preconditioned CG on the model g·s + ½ s·Hs within ‖s‖_M ≤ radius.

    M: (s, k, d) positive diagonal preconditioner. Returns (step (s, k, d), CG iterations (s,)).
    """
    s = st.Y.shape[0]
    rel = st.g_norm / np.maximum(st.g_scale, np.finfo(float).tiny)
    eta = np.minimum(CG_FORCING, np.maximum(np.sqrt(rel), CG_FLOOR * GRAD_RTOL / np.maximum(rel, np.finfo(float).tiny)))
    r_stop = eta * st.g_norm
    z_out = np.zeros_like(st.Y)
    its = np.zeros(s, dtype=np.int64)
    idx = np.arange(s)
    z = np.zeros_like(st.Y)
    r = st.g.copy()
    y = r / M
    p = -y
    ry = _bdot(r, y)
    zMz = np.zeros(s)
    zMp = np.zeros(s)
    pMp = ry.copy()
    rad2 = radius * radius
    lam, Y, R, G = P.lam, st.Y, st.R, st.G
    for _ in range(max_cg):
        Hp = _hess(lam, Y, R, G, p)
        kappa = _bdot(p, Hp)
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha = ry / kappa
        zMz_new = zMz + 2.0 * alpha * zMp + alpha * alpha * pMp
        edge = ~(kappa > 0) | (zMz_new >= rad2)
        its[idx] += 1
        if edge.any():
            # τ ≥ 0 with ‖z + τ p‖_M = radius
            e = np.flatnonzero(edge)
            disc = np.sqrt(np.maximum(zMp[e] ** 2 + pMp[e] * (rad2[e] - zMz[e]), 0.0))
            tau = (disc - zMp[e]) / pMp[e]
            z_out[idx[e]] = z[e] + tau[:, None, None] * p[e]
        inner = ~edge
        step = np.where(inner, alpha, 0.0)[:, None, None]
        z = z + step * p
        r = r + step * Hp
        r_norm = np.sqrt(_bdot(r, r))
        small = inner & (r_norm <= r_stop)
        if small.any():
            z_out[idx[small]] = z[small]
        done = edge | small
        if done.all():
            return z_out, its
        if done.any():
            keep = np.flatnonzero(~done)
            idx, z, r, p, zMz_new, zMp, pMp, ry, alpha, r_stop, rad2, M, Y, R, G = (
                idx[keep], z[keep], r[keep], p[keep], zMz_new[keep], zMp[keep], pMp[keep], ry[keep], alpha[keep],
                r_stop[keep], rad2[keep], M[keep], Y[keep], R[keep], G[keep],
            )
        y = r / M
        ry_new = _bdot(r, y)
        beta = ry_new / ry
        zMp = beta * (zMp + alpha * pMp)
        pMp = ry_new + beta * beta * pMp
        zMz = zMz_new
        ry = ry_new
        p = -y + beta[:, None, None] * p
    z_out[idx] = z  # iteration limit: the last iterate (a descent step, inside the region)
    return z_out, its


def trust_region_newton(
    Y0: np.ndarray,
    C: np.ndarray,
    Beta: np.ndarray,
    lam: np.ndarray,
    f0: np.ndarray,
    max_iter: int = 200,
    max_cg: int | None = None,
) -> NewtonResult:
    """Minimise F from Y0 for each problem of the stack.

    Args:
        Y0: (s, k, d) starting points (distance units).
        C: (s, k, d) = B U_d per problem.
        Beta: (s, k, k) centred mutual similarities β.
        lam: (d,) kept eigenvalues, descending, positive.
        f0: (s,) constant part of F, 2 × the out-of-span energy of B (≥ 0).
        max_iter: trust-region iterations per problem.
        max_cg: CG iterations per step (default k·d, exact in exact arithmetic).
    """
    Y0 = np.asarray(Y0, dtype=np.float64)
    s, k, d = Y0.shape
    max_cg = k * d if max_cg is None else max_cg
    P_all = _Problems(np.asarray(C, dtype=np.float64), np.asarray(Beta, dtype=np.float64),
                      np.asarray(lam, dtype=np.float64),
                      np.asarray(f0, dtype=np.float64))
    y_out = Y0.copy()
    f_out = np.empty(s)
    g_out = np.empty(s)
    it_out = np.zeros(s, dtype=np.int64)
    cg_out = np.zeros(s, dtype=np.int64)
    conv_out = np.zeros(s, dtype=bool)
    idx = np.arange(s)
    P = P_all
    st = _State(P, Y0.copy())
    lam = P.lam
    # initial radius: the M-norm of a configuration of the block's own size
    size2 = np.maximum(np.einsum("ijj->i", np.abs(P.Beta)), st.y_norm**2)
    radius = 2.0 * np.sqrt(4.0 * (lam[0] + size2) * np.maximum(size2, np.finfo(float).tiny))
    for it in range(max_iter + 1):
        done = st.g_norm <= GRAD_RTOL * st.g_scale
        out_of_budget = it == max_iter or (it and runtime.spent())  # out of iterations or of the batch's time
        finished = np.ones(idx.size, dtype=bool) if out_of_budget else done
        if finished.any():
            f_idx = idx[finished]
            y_out[f_idx] = st.Y[finished]
            f_out[f_idx] = st.f[finished]
            g_out[f_idx] = st.g_norm[finished]
            conv_out[f_idx] = done[finished]
            keep = np.flatnonzero(~finished)
            if keep.size == 0:
                break
            idx, radius = idx[keep], radius[keep]
            P, st = P.take(keep), st.take(keep)
        it_out[idx] += 1
        M = 4.0 * (lam + np.diagonal(st.G, axis1=1, axis2=2))[:, None, :] + np.zeros_like(st.Y)
        S, its = _steihaug(P, st, M, radius, max_cg)
        cg_out[idx] += its
        HS = st.hess(P, S)
        pred = -(_bdot(st.g, S) + 0.5 * _bdot(S, HS))
        actual = -st.change(P, S)
        with np.errstate(divide="ignore", invalid="ignore"):
            rho = np.where(pred > 0, actual / pred, -1.0)
        s_norm_M = np.sqrt(_bdot(S * M, S))
        accept = (rho > ACCEPT_RATIO) & (actual > 0)
        grow = (rho > 0.75) & (s_norm_M >= 0.99 * radius)
        radius = np.where(rho < 0.25, 0.25 * s_norm_M, np.where(grow, 2.0 * radius, radius))
        s_norm = np.sqrt(_bdot(S, S))
        tiny_step = accept & (s_norm <= STEP_RTOL * st.y_norm)
        stuck = ~accept & (pred <= 0)  # no model decrease left: round-off level
        Y_new = np.where(accept[:, None, None], st.Y + S, st.Y)
        st = _State(P, Y_new)
        if (tiny_step | stuck).any():
            fin = np.flatnonzero(tiny_step | stuck)
            f_idx = idx[fin]
            y_out[f_idx] = st.Y[fin]
            f_out[f_idx] = st.f[fin]
            g_out[f_idx] = st.g_norm[fin]
            conv_out[f_idx] = True
            keep = np.flatnonzero(~(tiny_step | stuck))
            if keep.size == 0:
                break
            idx, radius = idx[keep], radius[keep]
            P, st = P.take(keep), st.take(keep)
    return NewtonResult(y=y_out, objective=f_out, grad_norm=g_out, iterations=it_out, cg_iterations=cg_out,
                        converged=conv_out)


def available_backends() -> tuple[str, ...]:
    """The block solver backends this installation can run."""
    return BACKENDS if _native is not None else ("numpy",)


def first_start(Y0: np.ndarray, C: np.ndarray, Beta: np.ndarray, lam: np.ndarray, f0: np.ndarray, max_iter: int,
                backend: str) -> tuple[NewtonResult, np.ndarray | None]:
    """``trust_region_newton`` from Y0 and, compiled, the certificate's gap of each result (else None).

    ``compiled`` (``csrc/block.c``): the same iteration one block at a time in L1, the duality bound of
    ``certificate.optimality_gap`` with it, λ_min(R) computed in the kernel where the Cholesky test fails
    (NaN only where R is not finite: the caller's numpy decides those); the batch's time budget
    (``runtime.spent``) is not looked at inside a call, only between the
    calls of a batch's chunks. ``numpy``: ``trust_region_newton``.
    """
    if backend == "numpy" or lam.size > 256:
        return trust_region_newton(Y0, C, Beta, lam, f0, max_iter=max_iter), None
    Y = np.array(Y0, dtype=np.float64, order="C")
    s = Y.shape[0]
    f, g_norm, gap = np.empty(s), np.empty(s), np.empty(s)
    its, cg = np.zeros(s, dtype=np.int64), np.zeros(s, dtype=np.int64)
    conv = np.zeros(s, dtype=np.uint8)
    constants = np.array([GRAD_RTOL, STEP_RTOL, CG_FORCING, ACCEPT_RATIO, CHOLESKY_SHARE, GRID_LO, GRID_HI, CG_FLOOR],
                         dtype=np.float64)
    _native.block_newton(Y, np.ascontiguousarray(C, dtype=np.float64), np.ascontiguousarray(Beta, dtype=np.float64),
                         np.ascontiguousarray(lam, dtype=np.float64), np.ascontiguousarray(f0, dtype=np.float64),
                         int(max_iter), constants, f, g_norm, its, cg, conv, gap, 0, s)
    return NewtonResult(y=Y, objective=f, grad_norm=g_norm, iterations=its, cg_iterations=cg,
                        converged=conv.view(bool)), gap
