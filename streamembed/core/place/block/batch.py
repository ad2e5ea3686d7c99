"""Block restricted reconstruction of a batch of core dissimilarities: check, pack, solve, flag (docs/math.md §3.3).

``place_core_blocks`` is what ``Placer.place_blocks`` runs once the input
pipeline has made core dissimilarities of the rows and mutual matrices:
blocks beyond the placeable range are refused (``core.place.range_guard``), the
rest are checked, centred and packed (``core.place.block.prepare``), solved in one
call (``core.place.block.solve.solve_blocks``), and flagged (``inconsistent_block``,
``non_euclidean``); with ``k0_rows`` the members' exact k0 and the largest
‖K0‖₂ are added. Results are in the model's own frame.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...errors import InputError
from ...fit.cmds import LandmarkSpectrum
from ...flags import FLAG_BLOCK, FLAG_INCONSISTENT_BLOCK, FLAG_NON_EUCLIDEAN
from ...inputs.validation import Problem, ProblemCode
from ...monitor.calibration import non_euclidean_flags
from ...monitor.residuals import k0_diagonal, largest_block_norm, unexplained
from ...result import EmbeddingResult
from ..restricted import AMBIGUITY_RTOL, AMBIGUITY_RTOL_F32
from .consistency import inconsistent_blocks
from .prepare import prepare_blocks
from .solve import solve_blocks

__all__ = ["place_core_blocks"]


def place_core_blocks(A: np.ndarray, cross: list[np.ndarray], sizes: np.ndarray, *, spectrum: LandmarkSpectrum,
                      n_components: int, limit: tuple[float, str],
                      project_r: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], negative_ratio: float,
                      n_threads: int | None, k0_rows: object, errors: str, max_block_rows: int | None = None,
                      name: str = "cross") -> EmbeddingResult:
    """Place blocks of core dissimilarities in the model's own frame.

    Args:
        A: (m, n) every block's rows, blocks consecutive, in the dtype the kernels run in.
        cross: one (k_b, k_b) mutual dissimilarity matrix per block.
        sizes: (nb,) int64 rows per block.
        spectrum, n_components: the landmark spectrum and d.
        limit: ``range_guard.range_limit`` for A's dtype: (largest mean squared dissimilarity, why).
        project_r: rows (s, n) -> (ŷ_r (s, r), β (s,)) on every monitored eigenpair.
        negative_ratio: the ``non_euclidean`` flag's threshold on −k0/β.
        n_threads: threads of the block solver (None: ``runtime.default_threads()``).
        k0_rows: None (no k0), else exact k0 of every member and ‖K0‖₂ (``block_norm_k0``).
        errors: "raise" or "mask" (as ``Placer.place_blocks``).
        max_block_rows: a larger block is refused (``bad_block``).
        name: what the cross matrices are called in messages.
    """
    m, d = A.shape[0], int(n_components)
    sp = spectrum
    lam = sp.eigenvalues[:d]
    off = np.concatenate([[0], np.cumsum(sizes)])
    cross = list(cross)
    # one pass over the rows: centred, projected on every monitored axis (the first d are the solver's C), checked
    prep = prepare_blocks(A, cross, sizes, sp.row_means, sp.grand_mean, sp.eigenvectors, max_block_rows, name=name,
                          n_threads=n_threads, limit=limit, n_components=d)
    if errors == "raise" and not prep.valid.all():
        b = int(np.argmin(prep.valid))
        where = "the block" if len(cross) == 1 else f"block {b} (rows {off[b]}..{off[b + 1] - 1} of A)"
        raise InputError(f"{where} is invalid: {prep.problems[b]}")
    valid = np.repeat(prep.valid, sizes)
    reasons: list[Problem | None] = [None] * m
    own = prep.row_reasons
    assert own is not None
    for b in np.flatnonzero(~prep.valid).tolist():
        problem = prep.problems[b]
        assert problem is not None  # an invalid block has its problem
        block_problem = Problem(ProblemCode.BAD_BLOCK, problem.detail)
        for r in range(int(off[b]), int(off[b + 1])):
            reasons[r] = own[r] or block_problem
    batch, rows = prep.batch, prep.rows
    y = np.full((m, d), np.nan)
    beta = np.full(m, np.nan)
    unexpl = np.full(m, np.nan)
    k0 = np.full(m, np.nan)
    flags = np.zeros(m, dtype=np.uint32)
    objective = np.full(len(cross), np.nan)
    certified = np.zeros(len(cross), dtype=bool)
    norm = None
    coords = None
    if batch.sizes.size:
        rtol = AMBIGUITY_RTOL_F32 if np.dtype(A.dtype) == np.float32 else AMBIGUITY_RTOL
        sol = solve_blocks(batch.c, batch.beta, batch.sizes, lam, batch.b_norm2, ambiguity_rtol=rtol,
                           n_threads=n_threads)
        y[rows] = sol.y
        flags[rows] = sol.flags | FLAG_BLOCK
        beta[rows] = batch.beta_self
        y_proj = batch.c / np.sqrt(lam)
        unexpl[rows] = unexplained(batch.beta_self, y_proj)
        objective[prep.valid] = sol.objective
        certified[prep.valid] = sol.certified
        # every block: the consistency check needs its K0; ŷ_r = Λ_r^{-1/2} U_rᵀ b of the rows packed above
        coords_r = prep.coords / np.sqrt(sp.eigenvalues) if prep.coords is not None else project_r(A[rows])[0]
        bad = inconsistent_blocks(batch, coords_r, negative_ratio, A.dtype)
        flags[rows[np.repeat(bad, batch.sizes)]] |= FLAG_INCONSISTENT_BLOCK
        if k0_rows is not None:
            coords = coords_r
            k0[rows] = k0_diagonal(batch.beta_self, coords)
            flags[rows] |= non_euclidean_flags(k0[rows], beta[rows], negative_ratio, A.dtype)
            norm = largest_block_norm(batch.sizes, batch.beta, coords)
        flags[rows[batch.beta_self < 0]] |= FLAG_NON_EUCLIDEAN
    return EmbeddingResult(y=y, beta=beta, unexplained=unexpl, k0=k0, t=np.full(m, np.nan), flags=flags,
                           unexplained_placed=unexplained(beta, y),
                           valid=valid, reasons=reasons, method="block",
                           objective=float(objective[0]) if len(cross) == 1 else None, block_norm_k0=norm,
                           residual_rows=rows if coords is not None else None, residual_coords=coords,
                           blocks={"sizes": sizes.copy(), "objective": objective, "certified": certified})
