"""Restricted reconstruction of single objects: the secular equation (docs/math.md §3).

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

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..flags import FLAG_AMBIGUOUS, FLAG_NOT_CONVERGED
from ..runtime import in_worker, resolve_threads, single_blas_thread, worker_pool

try:
    from .. import _native
except ImportError:  # built without a C compiler: the numpy solver
    _native = None  # type: ignore[assignment]  # the numpy path: available_backends() says so

#: The implementations of the Newton iteration, best first: "compiled"
#: (``csrc/secular.c``, four objects side by side in vector lanes) and "numpy"
#: (``_newton_chunk``, vectorised over columns). They run the same algorithm.
BACKENDS = ("compiled", "numpy")


def available_backends() -> tuple[str, ...]:
    """The secular-equation backends this installation can run."""
    return BACKENDS if _native is not None else ("numpy",)

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


#: Rows per chunk: (d, chunk) float64 work arrays stay in L2 cache, and
#: numpy's per-call overhead is amortised over the chunk.
CHUNK_ROWS = 8192
#: A Newton step this small (relative to u) is the last one needed: with
#: quadratic convergence the error after applying it is ~(1e-7)² relative.
FINAL_STEP_RTOL = 1e-7

#: The compiled solver's largest d (``MAX_D`` in ``csrc/secular.c``).
NATIVE_MAX_D = 256

def solve_restricted(
    c: np.ndarray,
    beta: np.ndarray,
    lam: np.ndarray,
    ambiguity_rtol: float = AMBIGUITY_RTOL,
    n_threads: int | None = None,
    backend: str | None = None,
) -> RestrictedSolution:
    """Global minimisers of the single-object RR problem for a batch.

    Args:
        c: (m, d) coordinates of the centred cross-similarities in the
           eigenbasis, c = U_dᵀ b (float64).
        beta: (m,) centred self-similarities β.
        lam: (d,) kept eigenvalues, descending, positive.
        ambiguity_rtol: ‖c_G‖ ≤ ambiguity_rtol · scale counts as zero.
        n_threads: chunks are solved on up to this many threads (None: ``runtime.default_threads()``).
        backend: "compiled", "numpy" or None for the best available.
    """
    c = np.asarray(c, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    m, d = c.shape
    backend = available_backends()[0] if backend is None else backend
    if backend not in available_backends():
        raise ValueError(f"secular backend {backend!r} is not available here; choose from {available_backends()}")
    consts = _Constants(lam, ambiguity_rtol, _newton_chunk if backend == "numpy" else _newton_compiled)
    y = np.empty((m, d))
    t = np.empty(m)
    flags = np.zeros(m, dtype=np.uint32)
    starts = range(0, m, CHUNK_ROWS)
    threads = resolve_threads(n_threads)
    with single_blas_thread():  # a small product per chunk, on every worker: one BLAS thread each
        if threads > 1 and m > CHUNK_ROWS and not in_worker():
            its = list(worker_pool(threads).map(
                lambda s: _solve_chunk(c, beta, consts, s, min(s + CHUNK_ROWS, m), y, t, flags), starts))
        else:
            its = [_solve_chunk(c, beta, consts, s, min(s + CHUNK_ROWS, m), y, t, flags) for s in starts]
    return RestrictedSolution(y=y, t=t, flags=flags, iterations=max(its, default=0))


class _Constants:
    """Per-spectrum quantities shared by every chunk."""

    def __init__(self, lam: np.ndarray, ambiguity_rtol: float,
                 newton: Callable[..., tuple[np.ndarray, int, np.ndarray]]) -> None:
        d = lam.size
        self.newton = newton
        self.lam = lam
        self.lam_d = float(lam[-1])
        self.gap = lam - lam[-1]
        self.in_group = self.gap <= GROUP_RTOL * lam[0]
        self.sqrt_lam = np.sqrt(lam)
        self.ambiguity_rtol2 = ambiguity_rtol**2
        # One small product gives, per object, from c² (d, k):
        #   row 0: Σ_{j∉G} λ_j c_j² / gap_j²  (‖y_out(u=0)‖², the hard-case test)
        #   row 1: ‖c_G‖²;  row 2: ‖c‖²;  row 3: ‖ŷ‖² = Σ c_j² / λ_j
        M = np.zeros((4, d))
        outside = ~self.in_group
        M[0, outside] = lam[outside] / self.gap[outside] ** 2
        M[1, self.in_group] = 1.0
        M[2, :] = 1.0
        M[3, :] = 1.0 / lam
        self.M = M


def _solve_chunk(
    c: np.ndarray, beta_all: np.ndarray, k: _Constants, s: int, e: int, y: np.ndarray, t: np.ndarray, flags: np.ndarray
) -> int:
    """Solve rows s:e and write y, t, flags in place; returns the Newton iterations used."""
    cT = np.ascontiguousarray(c[s:e].T)  # (d, k)
    beta = beta_all[s:e]
    c2 = cT * cT
    y_out2, cG2, c_norm2, proj_norm2 = k.M @ c2
    lam_d = k.lam_d
    tc = t[s:e]
    fc = flags[s:e]
    # Hard case: ρ = β - λ_d - ‖y_out(u=0)‖² ≥ 0 with c_G negligible.
    rho = beta - lam_d - y_out2
    hard = (rho >= 0) & (cG2 <= k.ambiguity_rtol2 * (np.abs(beta) * k.lam[0] + c_norm2))
    zero = ~hard & (c_norm2 == 0)  # c = 0 and not hard: y = 0, t = -β
    special = hard | zero
    yT = np.empty_like(cT)
    iterations = 0
    if special.all():
        easy = np.empty(0, dtype=np.int64)
    elif special.any():
        easy = np.flatnonzero(~special)
    else:
        easy = None  # every row
    if easy is None or easy.size:
        cE = cT if easy is None else cT[:, easy]
        u, iterations, ok = k.newton(
            k.lam[:, None] * (cE * cE),
            beta if easy is None else beta[easy],
            k.gap,
            k.in_group,
            lam_d,
            proj_norm2 if easy is None else proj_norm2[easy],
        )
        yE = k.sqrt_lam[:, None] * cE / (k.gap[:, None] + u)
        if easy is None:
            yT, tc[:] = yE, u - lam_d
            fc[~ok] |= FLAG_NOT_CONVERGED
        else:
            yT[:, easy] = yE
            tc[easy] = u - lam_d
            fc[easy[~ok]] |= FLAG_NOT_CONVERGED
    if hard.any():
        idx = np.flatnonzero(hard)
        outside = ~k.in_group
        yh = np.zeros((cT.shape[0], idx.size))
        yh[outside] = k.sqrt_lam[outside, None] * cT[np.ix_(outside, idx)] / k.gap[outside, None]
        cG = cT[np.ix_(k.in_group, idx)]
        norm = np.sqrt(cG2[idx])
        direction = np.zeros_like(cG)
        nz = norm > 0
        direction[:, nz] = cG[:, nz] / norm[nz]
        direction[0, ~nz] = 1.0
        yh[k.in_group] = direction * np.sqrt(rho[idx])
        yT[:, idx] = yh
        tc[idx] = -lam_d
        fc[idx] |= FLAG_AMBIGUOUS
    if zero.any():
        yT[:, zero] = 0.0
        tc[zero] = -beta[zero]
    y[s:e] = yT.T
    return iterations


def _newton_chunk(
    aT: np.ndarray, beta: np.ndarray, gap: np.ndarray, in_group: np.ndarray, lam_d: float, proj_norm2: np.ndarray
) -> tuple[np.ndarray, int, np.ndarray]:
    """Safeguarded Newton on φ(u) for the columns of aT (d, k) = λ_j c_j².

    Bracket: hi = λ_d + max(0, ‖ŷ‖² - β) has h ≤ 0 (φ ≥ 0); lo is the largest
    of 0 (the pole), λ_d - β (where β - λ_d + u reaches 0) and the pole bound
    √(a_G / s(hi)) (u* ≥ √(a_G / s(u*)) with a_G = Σ_{j∈G} λ_j c_j²). The first
    step is taken from hi. Newton's step on the concave increasing φ and on
    the convex decreasing h(u) = q(u) - (β - λ_d + u) both land at or left
    of the root, from either side; the larger of the two is taken, so the
    iterates increase monotonically to the root after the first step. A step
    leaving the bracket restarts from lo (a point left of the root), or
    bisects when the iterate is already there. Finished rows leave the
    active set.
    """
    d, k = aT.shape
    gapc = gap[:, None]
    bmd = beta - lam_d
    hi = lam_d + np.maximum(0.0, proj_norm2 - beta)
    aG = aT[in_group].sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        pole_lb = np.sqrt(aG / (bmd + hi))
    lo = np.maximum(np.maximum(0.0, -bmd), np.nan_to_num(pole_lb, nan=0.0, posinf=0.0))
    u = hi.copy()
    u_out = np.empty(k)
    converged = np.zeros(k, dtype=bool)
    idx = np.arange(k)
    W = np.empty((d, k))
    T = np.empty((d, k))
    eps8 = 8 * np.finfo(np.float64).eps
    it = 0
    # At the pole (u = 0) an eigen-direction of G with a_j = 0 gives 0·∞ = NaN; such
    # an iterate fails the bracket test and is bisected, so the NaN is handled, not an error.
    with np.errstate(divide="ignore", invalid="ignore"):
        while idx.size and it < MAX_ITER:
            it += 1
            np.add(gapc, u, out=W)
            np.reciprocal(W, out=W)
            np.multiply(aT, W, out=T)
            np.multiply(T, W, out=T)
            q = T.sum(axis=0)  # Σ a/w²
            np.multiply(T, W, out=T)
            half_dq = T.sum(axis=0)  # Σ a/w³ = -q'/2
            su = bmd + u
            rq = 1.0 / np.sqrt(q)
            rs = 1.0 / np.sqrt(su)
            phi = rq - rs
            dphi = rq * rq * rq * half_dq + 0.5 * rs * rs * rs
            # Both Newton steps, on the concave φ and on the convex h = q - s, land
            # at or left of the root from either side, so the larger is the better:
            # φ's is nearly exact near the pole, h's near the boundary s = 0.
            un = np.fmax(u - phi / dphi, u + (q - su) / (2.0 * half_dq + 1.0))
            right = phi > 0
            hi = np.where(right, u, hi)
            lo = np.where(right, lo, u)
            small = (np.abs(un - u) <= FINAL_STEP_RTOL * u) | (np.abs(phi) <= eps8 * (rq + np.abs(rs)))
            bad = ~((un >= lo) & (un <= hi)) & ~small
            if bad.any():
                # lo is always at or left of the root: restart the monotone
                # iteration there, or bisect if the iterate already sits on it.
                at_lo = u[bad] <= lo[bad]
                un[bad] = np.where(at_lo, 0.5 * (lo[bad] + hi[bad]), lo[bad])
            done = small | (hi - lo <= STEP_RTOL * hi)
            u = un
            if done.any():
                u_out[idx[done]] = u[done]
                converged[idx[done]] = True
                keep = ~done
                idx, u, lo, hi, bmd = idx[keep], u[keep], lo[keep], hi[keep], bmd[keep]
                aT = aT[:, keep]
                W, T = W[:, : idx.size], T[:, : idx.size]
    u_out[idx] = u
    return u_out, it, converged


def _newton_compiled(
    aT: np.ndarray, beta: np.ndarray, gap: np.ndarray, in_group: np.ndarray, lam_d: float, proj_norm2: np.ndarray
) -> tuple[np.ndarray, int, np.ndarray]:
    """``_newton_chunk``'s algorithm in C (``csrc/secular.c``), with the GIL released."""
    if aT.shape[0] > NATIVE_MAX_D:
        return _newton_chunk(aT, beta, gap, in_group, lam_d, proj_norm2)
    k = aT.shape[1]
    u = np.empty(k)
    converged = np.zeros(k, dtype=np.uint8)
    it = _native.secular(
        np.ascontiguousarray(aT), np.ascontiguousarray(beta), np.ascontiguousarray(proj_norm2), gap,
        in_group.view(np.uint8), lam_d, MAX_ITER, FINAL_STEP_RTOL, STEP_RTOL, u, converged, 0, k,
    )
    return u, it, converged.view(bool)


def restricted_arc(c: np.ndarray, lam: np.ndarray, t_star: np.ndarray, s: float) -> np.ndarray:
    """Points on the arc from projection (s = 0) to RR (s = 1): y(s·t*) (Trosset et al. 2025, §5).

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


def restricted_objective(y: np.ndarray, c: np.ndarray, beta: np.ndarray, lam: np.ndarray,
                         b_perp2: np.ndarray) -> np.ndarray:
    """F(y) = 2‖Xy - b‖² + (‖y‖² - β)² per row, from d-dimensional quantities.

    ‖Xy - b‖² = Σ_j (√λ_j y_j - c_j)² + ‖b_⊥‖², with b_⊥ the part of b
    outside the span of U_d (b_perp2 = ‖b‖² - ‖c‖², shape (m,)).
    """
    fit = np.square(np.sqrt(lam) * y - c).sum(axis=1) + b_perp2
    return 2.0 * fit + np.square(np.square(y).sum(axis=1) - beta)
