"""Restricted reconstruction of blocks of objects (multi-point RR, docs/math.md §3).

A block of k objects carries its dissimilarities to the landmarks and to
each other. With C = B U_d (k×d), β (k×k) and Λ the kept eigenvalues, block
RR (Trosset et al. 2025, §6) places it at

    Y* = argmin_Y F(Y),   F(Y) = 2‖Y Λ^{1/2} - C‖²_F + 2 ‖B_⊥‖²_F + ‖Y Yᵀ - β‖²_F,

where ‖B_⊥‖² = ‖B‖²_F - ‖C‖²_F is the block's energy outside the span of
U_d (the fit term 2‖Y Xᵀ - B‖² split into its in-span and out-of-span
parts). Written this way F is a sum of squares and cannot come out
negative, as the expanded form 2 (Σ λ_j ‖Y_:j‖² - 2 Σ √λ_j Y_:j·C_:j + ‖B‖²)
did for blocks that fit exactly (-1e-13 from cancellation); the out-of-span
energy, a difference, is clamped at 0 against its own round-off.

Many blocks are solved in one call, vectorised across blocks of equal size:

1. every block starts from its members' single-object RR solutions
   (``restricted.solve_restricted``) and is minimised by a trust-region
   Newton method with the exact Hessian (``block_newton``);
2. a duality bound (``block_certificate``) then tells, per block, how far
   the result can be from the global minimum. When it closes (the usual
   case: it does whenever Y Yᵀ - β + λ_d I ⪰ 0 at the minimiser), the block
   is done, certified globally optimal;
3. blocks without a certificate are restarted from the projection, a
   spectral start, two eigen starts (exact when C = 0) and 2 seeded random
   configurations (``block_starts``); where these 7 results do not all agree,
   from 6 more random ones, and where the best value is then reached by
   fewer than 3 starts, from 16 more. A result with ⟨C_:j, Y_:j⟩ < 0 for
   some column j cannot be the global minimum (flipping that column lowers
   F) and is flipped and minimised again. The best is kept; such blocks
   carry ``FLAG_UNCERTIFIED``.

Degenerate symmetry: if a column C_:j of a block is zero (relative to
``ambiguity_rtol``), flipping the sign of Y_:j leaves F unchanged (docs/math.md
§6, the two-object case). Such blocks carry ``FLAG_AMBIGUOUS``; when C_:j is
exactly zero the sign is fixed by a rule (the entry of largest magnitude in
Y_:j, first in row order, is positive), elsewhere the computed sign, which
follows C_:j, is kept.

Packing: the rows of all blocks are consecutive in ``c`` (m, d); block i
has ``sizes[i]`` rows; its β is the ``sizes[i]²`` entries of ``beta`` (flat)
starting at Σ_{j<i} sizes[j]², row-major.
"""

from __future__ import annotations

import contextvars
import functools
from dataclasses import dataclass

import numpy as np

from ...flags import FLAG_AMBIGUOUS, FLAG_NOT_CONVERGED, FLAG_UNCERTIFIED
from ...runtime import in_worker, resolve_threads, single_blas_thread, worker_pool
from ..restricted import AMBIGUITY_RTOL, RestrictedSolution, solve_restricted
from .certificate import optimality_gap
from .newton import NewtonResult, available_backends, first_start, gradient, trust_region_newton
from .starts import eigen_starts, projection_starts, random_starts, spectral_starts

#: A block is certified when its optimality gap bound is at most
#: CERT_RTOL · F(Y*) + SCALE_RTOL · F(0), F(0) = 2‖B‖² + ‖β‖² being the block's scale.
CERT_RTOL = 1e-9
SCALE_RTOL = 1e-13
#: Starts whose objective is within BEST_RTOL · F* + SCALE_RTOL · F(0) of the best count as reaching it.
BEST_RTOL = 1e-9
#: Random starts of the second stage (the first EARLY_RANDOM_STARTS of them with the structured starts;
#: the rest only where those starts disagree), and of the third for blocks whose best is reached by
#: fewer than AGREEING_STARTS starts.
EARLY_RANDOM_STARTS = 2
RANDOM_STARTS = 8
MORE_RANDOM_STARTS = 16
AGREEING_STARTS = 3
#: Trust-region iterations per start.
MAX_ITER = 200
#: Blocks per chunk: about CHUNK_ELEMENTS float64 of (k, k + d) data, so a chunk's
#: working arrays stay in cache; chunks are shared between threads.
CHUNK_ELEMENTS = 1 << 16
#: ... and at least this many chunks per thread when there are enough blocks (5 chunks on 2 threads took 3/5 of
#: the time of one thread; 8 take about half).
TASKS_PER_THREAD = 4


@dataclass
class BlocksSolution:
    """Block RR solutions for nb blocks with m rows in total.

    Attributes:
        y: (m, d) coordinates (distance units), rows in input order.
        objective: (nb,) F(Y*) (squared-dissimilarity² units, ≥ 0).
        gap: (nb,) upper bound on F(Y*) - min F (same units; finite, ≥ 0).
        certified: (nb,) gap small enough to call Y* globally optimal
            (≤ CERT_RTOL · F(Y*) + SCALE_RTOL · F(0)).
        n_starts: (nb,) starts tried (1 for a certified first start).
        n_best_starts: (nb,) starts that reached the best objective.
        iterations: (nb,) trust-region iterations of the start that won.
        flags: (m,) uint32 per row: FLAG_UNCERTIFIED, FLAG_NOT_CONVERGED,
            FLAG_AMBIGUOUS (see the module docstring).
    """

    y: np.ndarray
    objective: np.ndarray
    gap: np.ndarray
    certified: np.ndarray
    n_starts: np.ndarray
    n_best_starts: np.ndarray
    iterations: np.ndarray
    flags: np.ndarray


@dataclass
class BlockSolution:
    """One block's solution (``solve_block``).

    Attributes:
        y: (k, d) coordinates.
        objective: F(Y*), including the out-of-span constant.
        gap, certified, n_starts, n_best_starts: as in :class:`BlocksSolution`.
        flags: (k,) uint32.
        single: (k, d) the single-object RR solutions (the first start).
        single_flags: (k,) their flags.
    """

    y: np.ndarray
    objective: float
    gap: float
    certified: bool
    n_starts: int
    n_best_starts: int
    flags: np.ndarray
    single: np.ndarray
    single_flags: np.ndarray


def block_objective(Y: np.ndarray, C: np.ndarray, Beta: np.ndarray, lam: np.ndarray, B_norm2: float) -> float:
    """F(Y) ≥ 0 for one block: Y, C (k, d), Beta (k, k), lam (d,), B_norm2 = ‖B‖²_F."""
    return float(_objective(Y[None], C[None], Beta[None], np.sqrt(lam), _out_of_span(np.array([B_norm2]), C[None]))[0])


def _out_of_span(b_norm2: np.ndarray, C: np.ndarray) -> np.ndarray:
    """(s,) f0 = 2 ‖B_⊥‖², the out-of-span energy clamped at 0 against round-off."""
    return 2.0 * np.maximum(b_norm2 - (C * C).reshape(C.shape[0], -1).sum(axis=1), 0.0)


def _objective(Y: np.ndarray, C: np.ndarray, Beta: np.ndarray, sl: np.ndarray, f0: np.ndarray) -> np.ndarray:
    s = Y.shape[0]
    E = Y * sl - C
    R = Y @ Y.transpose(0, 2, 1) - Beta
    return 2.0 * (E * E).reshape(s, -1).sum(axis=1) + (R * R).reshape(s, -1).sum(axis=1) + f0


def solve_blocks(
    c: np.ndarray,
    beta: np.ndarray,
    sizes: np.ndarray,
    lam: np.ndarray,
    b_norm2: np.ndarray,
    ambiguity_rtol: float = AMBIGUITY_RTOL,
    n_threads: int | None = None,
    backend: str | None = None,
) -> BlocksSolution:
    """Block RR for many blocks at once (packing in the module docstring).

    Args:
        c: (m, d) C = B U_d of every row, blocks consecutive (float64).
        beta: (Σ sizes²,) the blocks' β matrices, flat, row-major, concatenated.
        sizes: (nb,) rows per block, each ≥ 1, summing to m.
        lam: (d,) kept eigenvalues, descending, positive.
        b_norm2: (nb,) ‖B‖²_F per block (fixes the out-of-span part of F).
        ambiguity_rtol: relative size below which a coordinate of C counts as
            zero (the single-object hard case and the block's sign symmetry).
        n_threads: chunks are solved on up to this many threads (None: ``runtime.default_threads()``).
        backend: the first start's solver (``newton.first_start``): "compiled", "numpy", or None for the best
            available; both compute the same numbers to round-off.
    """
    backend = available_backends()[0] if backend is None else backend
    if backend not in available_backends():
        raise ValueError(f"block solver backend {backend!r} is not available here; choose from {available_backends()}")
    c = np.ascontiguousarray(c, dtype=np.float64)
    beta = np.ascontiguousarray(beta, dtype=np.float64).ravel()
    sizes = np.asarray(sizes, dtype=np.int64).ravel()
    lam = np.asarray(lam, dtype=np.float64).ravel()
    b_norm2 = np.asarray(b_norm2, dtype=np.float64).ravel()
    m, d = c.shape
    nb = sizes.size
    if lam.size != d:
        raise ValueError(f"c has {d} columns but lam has {lam.size} eigenvalues")
    if (sizes < 1).any() or int(sizes.sum()) != m:
        raise ValueError(f"sizes must be ≥ 1 and sum to the {m} rows of c, got sum {int(sizes.sum())}")
    if beta.size != int((sizes * sizes).sum()):
        raise ValueError(f"beta needs Σ sizes² = {int((sizes * sizes).sum())} entries, got {beta.size}")
    if b_norm2.size != nb:
        raise ValueError(f"b_norm2 needs one entry per block ({nb}), got {b_norm2.size}")
    row_off = np.concatenate([[0], np.cumsum(sizes)])
    beta_off = np.concatenate([[0], np.cumsum(sizes * sizes)])
    # the single-object RR solutions of every row: the first start
    pos = np.arange(m) - np.repeat(row_off[:-1], sizes)
    diag = beta[np.repeat(beta_off[:-1], sizes) + pos * (np.repeat(sizes, sizes) + 1)]
    single = solve_restricted(c, diag, lam, ambiguity_rtol)
    out = BlocksSolution(
        y=np.empty((m, d)), objective=np.empty(nb), gap=np.empty(nb), certified=np.zeros(nb, dtype=bool),
        n_starts=np.zeros(nb, dtype=np.int64), n_best_starts=np.zeros(nb, dtype=np.int64),
        iterations=np.zeros(nb, dtype=np.int64), flags=np.zeros(m, dtype=np.uint32),
    )
    threads = resolve_threads(n_threads)
    tasks = []
    for k in np.unique(sizes).tolist():
        blocks = np.flatnonzero(sizes == k)
        # cache-sized chunks, and at least TASKS_PER_THREAD per thread so that the threads finish together
        per_chunk = max(1, min(CHUNK_ELEMENTS // (k * (k + d)), -(-blocks.size // (TASKS_PER_THREAD * threads))))
        tasks += [(k, blocks[i : i + per_chunk]) for i in range(0, blocks.size, per_chunk)]
    shared = (c, beta, lam, b_norm2, row_off, beta_off, single, ambiguity_rtol, out, backend)
    if threads > 1 and len(tasks) > 1 and not in_worker():
        # each task runs in a copy of this context: the batch's time budget (core.runtime) applies there too
        for f in [worker_pool(threads).submit(contextvars.copy_context().run,
                                              functools.partial(_solve_task, k, blocks, *shared))
                  for k, blocks in tasks]:
            f.result()
    else:
        for k, blocks in tasks:
            _solve_task(k, blocks, *shared)
    return out


def _solve_task(k: int, blocks: np.ndarray, c: np.ndarray, beta: np.ndarray, lam: np.ndarray, b_norm2: np.ndarray,
                row_off: np.ndarray, beta_off: np.ndarray, single: RestrictedSolution, ambiguity_rtol: float,
                out: BlocksSolution, backend: str) -> None:
    """Solve the blocks ``blocks`` (all of size k) and write their results into ``out``."""
    s = blocks.size
    if int(blocks[-1]) - int(blocks[0]) == s - 1:  # consecutive blocks (the usual case): their rows are a slice
        r0, b0 = int(row_off[blocks[0]]), int(beta_off[blocks[0]])
        rows: np.ndarray | slice = slice(r0, r0 + s * k)
        C = c[rows].reshape(s, k, -1)
        Beta = beta[b0 : b0 + s * k * k].reshape(s, k, k)
    else:
        rows = (row_off[blocks][:, None] + np.arange(k)).ravel()
        C = c[rows].reshape(s, k, -1)
        Beta = beta[beta_off[blocks][:, None] + np.arange(k * k)].reshape(-1, k, k)
    Beta = Beta + Beta.transpose(0, 2, 1)
    Beta *= 0.5  # F sees only the symmetric part of β
    with single_blas_thread():
        g = _solve_group(C, Beta, single.y[rows].reshape(s, k, -1), lam, b_norm2[blocks], ambiguity_rtol, backend)
    y, flags = g.pop("y"), g.pop("flags")
    out.y[rows] = y.reshape(s * k, -1)
    flags = np.repeat(flags, k)
    if k == 1:
        flags |= single.flags[rows] & FLAG_AMBIGUOUS
    out.flags[rows] = flags
    for name, value in g.items():
        getattr(out, name)[blocks] = value


def _solve_group(C: np.ndarray, Beta: np.ndarray, Y1: np.ndarray, lam: np.ndarray, b_norm2: np.ndarray,
                 ambiguity_rtol: float, backend: str = "numpy") -> dict[str, np.ndarray]:
    """The staged multi-start solve of s blocks of equal size (module docstring)."""
    s, k, d = C.shape
    f0 = _out_of_span(b_norm2, C)
    scale = 2.0 * b_norm2 + (Beta * Beta).reshape(s, -1).sum(axis=1)  # F(0)
    first, first_gap = first_start(Y1, C, Beta, lam, f0, MAX_ITER, backend)
    best_y, best_f = first.y, first.objective
    iterations, converged = first.iterations, first.converged
    n_starts = np.ones(s, dtype=np.int64)
    n_best = np.ones(s, dtype=np.int64)
    if first_gap is None:
        gap = _gap(best_y, C, Beta, lam)
    else:  # the compiled bound, and numpy's where R overflowed (NaN)
        gap = first_gap
        exact = np.flatnonzero(np.isnan(gap))
        if exact.size:
            gap[exact] = _gap(best_y[exact], C[exact], Beta[exact], lam)
    certified = gap <= CERT_RTOL * best_f + SCALE_RTOL * scale
    todo = np.flatnonzero(~certified)
    if todo.size:
        Cu, Bu = C[todo], Beta[todo]
        # the first start, improved by the sign rule if it can be
        again = _run_starts(first.y[todo][:, None], Cu, Bu, lam, f0[todo])
        _keep_better(todo, again, best_y, best_f, iterations, converged)
        starts = np.concatenate(
            [projection_starts(Cu, lam)[:, None], spectral_starts(Cu, Bu, lam)[:, None],
             eigen_starts(Cu, Bu, lam)[:, None], eigen_starts(Cu, Bu, lam, projection_starts(Cu, lam))[:, None],
             random_starts(Cu, Bu, lam, 0, EARLY_RANDOM_STARTS)], axis=1)
        _merge(todo, _run_starts(starts, Cu, Bu, lam, f0[todo]), best_y, best_f, iterations, converged, n_starts,
               n_best, scale)
        # blocks on which some of these starts disagree get the remaining random starts
        split = todo[n_best[todo] < n_starts[todo]]
        if split.size:
            Cs, Bs = C[split], Beta[split]
            stage = _run_starts(random_starts(Cs, Bs, lam, EARLY_RANDOM_STARTS, RANDOM_STARTS - EARLY_RANDOM_STARTS),
                                Cs, Bs, lam, f0[split])
            _merge(split, stage, best_y, best_f, iterations, converged, n_starts, n_best, scale)
        few = todo[n_best[todo] < AGREEING_STARTS]
        if few.size:
            Cf, Bf = C[few], Beta[few]
            stage = _run_starts(random_starts(Cf, Bf, lam, RANDOM_STARTS, MORE_RANDOM_STARTS), Cf, Bf, lam, f0[few])
            _merge(few, stage, best_y, best_f, iterations, converged, n_starts, n_best, scale)
        gap[todo] = _gap(best_y[todo], C[todo], Beta[todo], lam)
        certified[todo] = gap[todo] <= CERT_RTOL * best_f[todo] + SCALE_RTOL * scale[todo]
    y, ambiguous = _fix_signs(best_y, C, ambiguity_rtol, lam)
    flags = np.where(certified, 0, FLAG_UNCERTIFIED).astype(np.uint32)
    flags[~converged] |= FLAG_NOT_CONVERGED
    flags[ambiguous] |= FLAG_AMBIGUOUS
    objective = _objective(y, C, Beta, np.sqrt(lam), f0)
    return dict(y=y, flags=flags, objective=objective, gap=gap, certified=certified, n_starts=n_starts,
                n_best_starts=n_best, iterations=iterations)


def _run_starts(starts: np.ndarray, C: np.ndarray, Beta: np.ndarray, lam: np.ndarray, f0: np.ndarray) -> NewtonResult:
    """Newton, then the sign rule, from starts (s, n, k, d) of s blocks; results shaped (s, n, ...).

    A minimiser with ⟨C_:j, Y_:j⟩ < 0 for some column j is not the global one:
    flipping those columns lowers F by 8 Σ_j √λ_j |⟨C_:j, Y_:j⟩| (Y Yᵀ is
    unchanged). Such results are flipped and minimised again (once).
    """
    s, n, k, d = starts.shape
    Cr, Br, fr = np.repeat(C, n, axis=0), np.repeat(Beta, n, axis=0), np.repeat(f0, n)
    res = trust_region_newton(starts.reshape(s * n, k, d), Cr, Br, lam, fr, max_iter=MAX_ITER)
    wrong = (res.y * Cr).sum(axis=1) < 0  # (s n, d)
    redo = np.flatnonzero(wrong.any(axis=1))
    if redo.size:
        flipped = np.where(wrong[redo][:, None, :], -res.y[redo], res.y[redo])
        again = trust_region_newton(flipped, Cr[redo], Br[redo], lam, fr[redo], max_iter=MAX_ITER)
        better = again.objective < res.objective[redo]
        i = redo[better]
        res.y[i], res.objective[i], res.grad_norm[i] = again.y[better], again.objective[better], again.grad_norm[better]
        res.iterations[i] += again.iterations[better]
        res.converged[i] = again.converged[better]
    for name in ("objective", "grad_norm", "iterations", "cg_iterations", "converged"):
        setattr(res, name, getattr(res, name).reshape(s, n))
    res.y = res.y.reshape(s, n, k, d)
    return res


def _keep_better(idx: np.ndarray, stage: NewtonResult, best_y: np.ndarray, best_f: np.ndarray, iterations: np.ndarray,
                 converged: np.ndarray) -> None:
    """Replace the result of blocks ``idx`` by the stage's single start where it is lower (in place)."""
    better = stage.objective[:, 0] < best_f[idx]
    i = idx[better]
    best_y[i], best_f[i] = stage.y[better, 0], stage.objective[better, 0]
    iterations[i], converged[i] = stage.iterations[better, 0], stage.converged[better, 0]


def _merge(idx: np.ndarray, stage: NewtonResult, best_y: np.ndarray, best_f: np.ndarray, iterations: np.ndarray,
           converged: np.ndarray, n_starts: np.ndarray, n_best: np.ndarray, scale: np.ndarray) -> None:
    """Fold a stage's starts into the running best of blocks ``idx`` (in place).

    Ties go to the earlier start, so the result does not depend on round-off
    differences between starts that found the same minimum.
    """
    f = stage.objective
    prev_f = best_f[idx]
    f_all = np.concatenate([prev_f[:, None], f], axis=1)
    win = np.argmin(f_all, axis=1)
    f_min = f_all[np.arange(idx.size), win]
    tol = BEST_RTOL * f_min + SCALE_RTOL * scale[idx]
    reached = np.abs(f - f_min[:, None]) <= tol[:, None]
    prev_reached = np.abs(prev_f - f_min) <= tol
    # the previous best counted n_best starts; they still count if it is (still) the best value
    n_best[idx] = np.where(prev_reached, n_best[idx], 0) + reached.sum(axis=1)
    n_starts[idx] += f.shape[1]
    new = win > 0
    if new.any():
        i, j = idx[new], win[new] - 1
        best_y[i] = stage.y[new, j]
        best_f[i] = f[new, j]
        iterations[i] = stage.iterations[new, j]
        converged[i] = stage.converged[new, j]


def _gap(Y: np.ndarray, C: np.ndarray, Beta: np.ndarray, lam: np.ndarray) -> np.ndarray:
    g, g_scale = gradient(Y, C, Beta, lam)
    return optimality_gap(Y, g, Beta, float(lam[-1]), g_scale)[0]


def _fix_signs(Y: np.ndarray, C: np.ndarray, ambiguity_rtol: float, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Apply the sign rule on axes where C_:j vanishes; returns (Y, ambiguous (s,))."""
    c2 = (C * C).sum(axis=1)  # (s, d) ‖C_:j‖²
    y2 = (Y * Y).sum(axis=1)
    total_c = c2.sum(axis=1, keepdims=True)
    total_y = y2.sum(axis=1, keepdims=True)
    free = (c2 <= ambiguity_rtol**2 * (total_c + lam[0] * total_y)) & (y2 > ambiguity_rtol**2 * total_y)
    ambiguous = free.any(axis=1)
    exact = free & (c2 == 0)
    if exact.any():
        lead = np.take_along_axis(Y, np.argmax(np.abs(Y), axis=1)[:, None, :], axis=1)[:, 0, :]  # (s, d)
        flip = exact & (lead < 0)
        Y = np.where(flip[:, None, :], -Y, Y)
    return Y, ambiguous


def solve_block(C: np.ndarray, Beta: np.ndarray, lam: np.ndarray, B_norm2: float, random_state: int | None = None,
                ambiguity_rtol: float = AMBIGUITY_RTOL, backend: str | None = None) -> BlockSolution:
    """Block RR of one block: ``solve_blocks`` for a single block.

    Args:
        C: (k, d) = B U_d; Beta: (k, k); lam: (d,); B_norm2: ‖B‖²_F.
        random_state: unused; the random starts are seeded from the block's
            shape alone (kept for callers of the former solver).
    """
    C = np.asarray(C, dtype=np.float64)
    k, d = C.shape
    Beta = np.asarray(Beta, dtype=np.float64)
    sol = solve_blocks(C, Beta.ravel(), np.array([k]), lam, np.array([B_norm2]), ambiguity_rtol, n_threads=1,
                       backend=backend)
    single = solve_restricted(C, np.diagonal(Beta).copy(), np.asarray(lam, dtype=np.float64), ambiguity_rtol)
    return BlockSolution(
        y=sol.y, objective=float(sol.objective[0]), gap=float(sol.gap[0]), certified=bool(sol.certified[0]),
        n_starts=int(sol.n_starts[0]), n_best_starts=int(sol.n_best_starts[0]), flags=sol.flags,
        single=single.y, single_flags=single.flags,
    )
