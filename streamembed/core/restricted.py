"""Restricted reconstruction of single objects: the secular equation (MATH.md §3).

For one object with c = U_dᵀ b (length d) and β, restricted reconstruction
minimises F(y) = 2‖X y - b‖² + (yᵀy - β)². Its global minimiser is

    y(t)_j = √λ_j c_j / (λ_j + t),    t = yᵀy - β ≥ -λ_d,

with t the root of the strictly decreasing h(t) = Σ λ_j c_j²/(λ_j+t)² - β - t
on (-λ_d, ∞) (easy case), or t = -λ_d (hard case, c ≈ 0 along the smallest
eigen-direction and h(-λ_d⁺) ≤ 0).

The solver works in u = t + λ_d > 0 so that the pole distance λ_d + t is
represented without cancellation (w_j = (λ_j - λ_d) + u with the gaps
precomputed), and runs Newton's method on

    φ(u) = q(u)^{-1/2} - (β - λ_d + u)^{-1/2},    q(u) = Σ λ_j c_j² / w_j²,

which is concave and increasing (so Newton from the left of the root
converges monotonically) and nearly linear near the pole (Moré–Sorensen's
trust-region reformulation, adapted to a radius that depends on t). Each step
is safeguarded by a bracket; everything is vectorised over the batch, with
converged rows dropped from the active set.

Ambiguity rule (hard case): the component along the smallest eigenvalue's
eigen-space G has a fixed norm √ρ but a free direction. streamembed points
it along c_G when c_G ≠ 0 (the limit of the easy-case solution, hence exact
for tiny but real c_G), and along the first eigenvector of G with a positive
sign when c_G = 0 exactly; such objects carry ``FLAG_AMBIGUOUS``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .flags import FLAG_AMBIGUOUS, FLAG_NOT_CONVERGED

#: Eigenvalues within this relative distance of λ_d count as repeated (one eigen-space G).
GROUP_RTOL = 1e-9
#: ‖c_G‖ below this share of the object's scale is treated as zero (hard case).
#: Matches float64 round-off of c with margin; float32 inputs use ``AMBIGUITY_RTOL_F32``.
AMBIGUITY_RTOL = 1e-9
AMBIGUITY_RTOL_F32 = 3e-5
MAX_ITER = 100
STEP_RTOL = 1e-13


@dataclass
class RestrictedSolution:
    """Single-object RR solutions for m objects.

    Attributes:
        y: (m, d) coordinates (distance units).
        t: (m,) multiplier t* = ‖y‖² - β (squared distance units); t > 0 pulls
           the object inward relative to the projection, t < 0 outward.
        flags: (m,) uint32, FLAG_AMBIGUOUS for hard-case objects.
        iterations: the number of Newton iterations the slowest row needed.
    """

    y: np.ndarray
    t: np.ndarray
    flags: np.ndarray
    iterations: int


def solve_restricted(
    c: np.ndarray, beta: np.ndarray, lam: np.ndarray, ambiguity_rtol: float = AMBIGUITY_RTOL
) -> RestrictedSolution:
    """Global minimisers of the single-object RR problem for a batch.

    Args:
        c: (m, d) coordinates of the centred cross-similarities in the
           eigenbasis, c = U_dᵀ b (float64).
        beta: (m,) centred self-similarities β.
        lam: (d,) kept eigenvalues, descending, positive.
        ambiguity_rtol: ‖c_G‖ ≤ ambiguity_rtol · scale counts as zero.
    """
    c = np.asarray(c, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    m, d = c.shape
    lam_d = lam[-1]
    gap = lam - lam_d
    in_group = gap <= GROUP_RTOL * lam[0]
    sqrt_lam = np.sqrt(lam)
    a = lam * np.square(c)  # λ_j c_j², (m, d)
    cG2 = np.square(c[:, in_group]).sum(axis=1)
    scale2 = np.abs(beta) * lam[0] + np.square(c).sum(axis=1)
    y = np.empty((m, d))
    t = np.empty(m)
    flags = np.zeros(m, dtype=np.uint32)

    # Hard-case test: ρ = β - λ_d - Σ_{j∉G} y_j(u=0)² ≥ 0 with c_G negligible.
    outside = ~in_group
    y_out0 = sqrt_lam[outside] * c[:, outside] / gap[outside]
    rho = beta - lam_d - np.square(y_out0).sum(axis=1)
    hard = (rho >= 0) & (cG2 <= (ambiguity_rtol**2) * scale2)
    if hard.any():
        idx = np.flatnonzero(hard)
        yh = np.zeros((idx.size, d))
        yh[:, outside] = y_out0[idx]
        cG = c[np.ix_(idx, np.flatnonzero(in_group))]
        norm = np.sqrt(cG2[idx])
        direction = np.zeros_like(cG)
        nz = norm > 0
        direction[nz] = cG[nz] / norm[nz, None]
        direction[~nz, 0] = 1.0
        yh[:, in_group] = direction * np.sqrt(rho[idx])[:, None]
        y[idx] = yh
        t[idx] = -lam_d
        flags[idx] |= FLAG_AMBIGUOUS

    # c = 0 entirely and not hard: y = 0, t = -β (then β < λ_d).
    zero = ~hard & (a.sum(axis=1) == 0)
    y[zero] = 0.0
    t[zero] = -beta[zero]

    easy = np.flatnonzero(~hard & ~zero)
    iterations = 0
    if easy.size:
        u, iterations, ok = _newton_u(a[easy], beta[easy], gap, in_group, lam_d, np.square(c[easy] / sqrt_lam).sum(axis=1))
        y[easy] = sqrt_lam * c[easy] / (gap + u[:, None])
        t[easy] = u - lam_d
        flags[easy[~ok]] |= FLAG_NOT_CONVERGED
    return RestrictedSolution(y=y, t=t, flags=flags, iterations=iterations)


def _phi(a: np.ndarray, gap: np.ndarray, u: np.ndarray, bmd: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """φ(u), φ'(u) and φ's round-off scale for rows of a (k, d), u (k,), bmd = β - λ_d (k,)."""
    iw = 1.0 / (gap + u[:, None])
    term = a * iw * iw
    q = term.sum(axis=1)
    dq = -2.0 * (term * iw).sum(axis=1)
    s = bmd + u
    rq = 1.0 / np.sqrt(q)
    with np.errstate(invalid="ignore", divide="ignore"):
        rs = 1.0 / np.sqrt(s)
        phi = rq - rs
        dphi = -0.5 * rq * rq * rq * dq + 0.5 * rs * rs * rs
    return phi, dphi, 8 * np.finfo(np.float64).eps * (rq + np.abs(rs))


def _newton_u(
    a: np.ndarray, beta: np.ndarray, gap: np.ndarray, in_group: np.ndarray, lam_d: float, proj_norm2: np.ndarray
) -> tuple[np.ndarray, int, np.ndarray]:
    """Root u* of φ for each row (easy case). Returns (u, iterations, converged)."""
    k = a.shape[0]
    bmd = beta - lam_d
    hi = lam_d + np.maximum(0.0, proj_norm2 - beta)  # h(t) ≤ 0 there: φ ≥ 0
    s_hi = bmd + hi
    aG = a[:, in_group].sum(axis=1)
    lo = np.maximum(0.0, -bmd)
    with np.errstate(divide="ignore", invalid="ignore"):
        pole_lb = np.sqrt(aG / s_hi)  # u* ≥ √(a_G / s(u*)) ≥ √(a_G / s(hi))
    lo = np.maximum(lo, np.nan_to_num(pole_lb, nan=0.0, posinf=0.0))
    u = np.full(k, lam_d)
    outside = ~((u > lo) & (u < hi))
    u[outside] = 0.5 * (lo[outside] + hi[outside])
    converged = np.zeros(k, dtype=bool)
    active = np.arange(k)
    it = 0
    while active.size and it < MAX_ITER:
        it += 1
        ua, loa, hia = u[active], lo[active], hi[active]
        phi, dphi, noise = _phi(a[active], gap, ua, bmd[active])
        right = phi > 0
        hia = np.where(right, ua, hia)
        loa = np.where(right, loa, ua)
        with np.errstate(divide="ignore", invalid="ignore"):
            un = ua - phi / dphi
        small_step = (np.abs(un - ua) <= STEP_RTOL * np.abs(ua)) | (np.abs(phi) <= noise)
        bad = ~((un >= loa) & (un <= hia)) & ~small_step
        un[bad] = 0.5 * (loa[bad] + hia[bad])
        done = small_step | (hia - loa <= STEP_RTOL * hia)
        u[active], lo[active], hi[active] = un, loa, hia
        converged[active[done]] = True
        active = active[~done]
    return u, it, converged


def restricted_arc(c: np.ndarray, lam: np.ndarray, t_star: np.ndarray, s: float) -> np.ndarray:
    """Points on the arc from projection (s = 0) to RR (s = 1): y(s·t*) (seed 000 §5).

    y(t)_j = √λ_j c_j / (λ_j + t) is the ridge path; s moves t from 0 to t*.
    For hard-case objects the arc is continuous on [0, 1) and jumps to the
    hard-case solution at s = 1 (use ``solve_restricted`` there).

    Args:
        c: (m, d); lam: (d,); t_star: (m,) from ``solve_restricted``; s in [0, 1].
    """
    if not 0.0 <= s <= 1.0:
        raise ValueError(f"arc parameter s must lie in [0, 1], got {s}")
    t = s * np.asarray(t_star, dtype=np.float64)
    return np.sqrt(lam) * c / (lam + t[:, None])


def restricted_objective(y: np.ndarray, c: np.ndarray, beta: np.ndarray, lam: np.ndarray, b_perp2: np.ndarray) -> np.ndarray:
    """F(y) = 2‖Xy - b‖² + (‖y‖² - β)² per row, from d-dimensional quantities.

    ‖Xy - b‖² = Σ_j (√λ_j y_j - c_j)² + ‖b_⊥‖², with b_⊥ the part of b
    outside the span of U_d (b_perp2 = ‖b‖² - ‖c‖², shape (m,)).
    """
    fit = np.square(np.sqrt(lam) * y - c).sum(axis=1) + b_perp2
    return 2.0 * fit + np.square(np.square(y).sum(axis=1) - beta)
