"""Checking and packing many blocks for ``block.solve_blocks`` (docs/math.md §2–3).

A batch of blocks arrives as rows A (m, n) of dissimilarities to the
landmarks, blocks consecutive, the row count of each block, and one k×k
matrix of mutual dissimilarities ("cross") per block. ``check_blocks``
finds what is wrong with each block without raising, so that the other
blocks of the batch proceed; ``pack_blocks`` centres the valid ones (§2)
and packs them; ``prepare_blocks`` does both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .validation import row_problems

#: Symmetry and the zero diagonal are checked to this share of the block's largest entry
#: (as ``validation.check_dissimilarity_matrix``: float32 text round trips).
CROSS_RTOL = 1e-7
#: Rows centred per step in ``pack_blocks`` (bounds the float64 temporaries).
PACK_CHUNK_ROWS = 2048

BAD_BLOCK = "bad_block"


@dataclass(frozen=True)
class BlockProblem:
    """Why one block cannot be embedded: ``code`` is always "bad_block"."""

    code: str
    detail: str

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"


@dataclass
class BlockBatch:
    """Packed input of ``solve_blocks`` (see ``block`` for the packing).

    Attributes:
        c: (m, d) C = B U_d per row, float64.
        beta: (Σ k_i²,) the blocks' β matrices, flat, row-major.
        sizes: (nb,) rows per block.
        b_norm2: (nb,) ‖B‖²_F per block.
        beta_self: (m,) β_pp per row (the single-object centred self-similarity).
    """

    c: np.ndarray
    beta: np.ndarray
    sizes: np.ndarray
    b_norm2: np.ndarray
    beta_self: np.ndarray


@dataclass
class PreparedBlocks:
    """Result of ``prepare_blocks``.

    Attributes:
        batch: the valid blocks, packed, in input order.
        valid: (nb,) bool per input block.
        problems: one entry per input block, None when valid.
        rows: (m_valid,) indices into A of the rows in ``batch``.
    """

    batch: BlockBatch
    valid: np.ndarray
    problems: list[BlockProblem | None]
    rows: np.ndarray


def _fmt(x: float) -> str:
    return repr(float(x))


def check_blocks(
    cross: Sequence[object], sizes: Sequence[int], max_block_rows: int | None = None, rtol: float = CROSS_RTOL,
    name: str = "cross",
) -> list[BlockProblem | None]:
    """Per-block problems of the mutual dissimilarity matrices (None = valid); never raises.

    A block is bad when it is empty or larger than ``max_block_rows``, or its
    matrix is not a 2-D square numeric array matching the block's row count,
    or has a NaN/inf or negative entry, a non-zero diagonal or is not
    symmetric (both beyond ``rtol`` times its largest entry). The detail names
    the first offending entry, e.g. ``cross[2, 5] = -1.0 is negative``.

    Args:
        cross: nb matrices, block i's expected to be sizes[i]×sizes[i].
        sizes: rows of each block.
    """
    nb = len(cross)
    if len(sizes) != nb:
        raise ValueError(f"{nb} cross matrices but {len(sizes)} block sizes")
    problems: list[BlockProblem | None] = [None] * nb
    arrays: list[np.ndarray] = []
    shaped: list[int] = []
    for i, (x, k) in enumerate(zip(cross, sizes)):
        k = int(k)
        why = None
        arr = None
        if k < 1:
            why = "empty block (0 rows)"
        elif max_block_rows is not None and k > max_block_rows:
            why = f"block of {k} rows exceeds max_block_rows = {max_block_rows}"
        else:
            try:
                arr = np.asarray(x)
            except Exception as exc:  # ragged nested lists and the like
                why = f"{name} is not an array: {exc}"
            if arr is not None and why is None:
                if arr.dtype.kind not in "biuf":
                    why = f"{name} must be numeric, got dtype {arr.dtype}"
                elif arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
                    why = f"{name} is not square: shape {arr.shape}"
                elif arr.shape[0] != k:
                    why = f"{name} has shape {arr.shape} but the block has {k} rows"
        if why is not None:
            problems[i] = BlockProblem(BAD_BLOCK, why)
        else:
            arrays.append(np.asarray(arr, dtype=np.float64).ravel())
            shaped.append(i)
    if not shaped:
        return problems
    ks = np.array([int(sizes[i]) for i in shaped], dtype=np.int64)
    flat = np.concatenate(arrays)
    off = np.concatenate([[0], np.cumsum(ks * ks)])
    starts = off[:-1]
    with np.errstate(invalid="ignore"):
        nonfinite = np.add.reduceat(~np.isfinite(flat), starts) > 0
        negative = np.add.reduceat(flat < 0, starts) > 0
        finite = np.where(np.isfinite(flat), np.abs(flat), 0.0)
        tol = rtol * np.maximum.reduceat(finite, starts)
        local = np.arange(flat.size) - np.repeat(starts, ks * ks)
        kk = np.repeat(ks, ks * ks)
        p, q = local // kk, local % kk
        tol_e = np.repeat(tol, ks * ks)
        on_diag = p == q
        diag_bad = np.add.reduceat(on_diag & (np.abs(flat) > tol_e), starts) > 0
        mirror = np.repeat(starts, ks * ks) + q * kk + p
        asym = np.add.reduceat(np.abs(flat - flat[mirror]) > tol_e, starts) > 0
    bad = nonfinite | negative | diag_bad | asym
    for j in np.flatnonzero(bad).tolist():
        i = shaped[j]
        M = arrays[j].reshape(ks[j], ks[j])
        problems[i] = BlockProblem(BAD_BLOCK, _describe(M, float(tol[j]), name))
    return problems


def _describe(M: np.ndarray, tol: float, name: str) -> str:
    """The first problem of one bad matrix, naming the entry."""
    def at(mask: np.ndarray) -> tuple[int, int]:
        i, j = np.unravel_index(int(np.argmax(mask)), mask.shape)
        return int(i), int(j)

    nonfinite = ~np.isfinite(M)
    if nonfinite.any():
        i, j = at(nonfinite)
        return f"{name}[{i}, {j}] = {_fmt(M[i, j])} is not finite"
    if (M < 0).any():
        i, j = at(M < 0)
        return f"{name}[{i}, {j}] = {_fmt(M[i, j])} is negative"
    d = np.abs(np.diagonal(M)) > tol
    if d.any():
        i = int(np.argmax(d))
        return f"{name}[{i}, {i}] = {_fmt(M[i, i])}: the diagonal must be zero"
    i, j = at(np.abs(M - M.T) > tol)
    return f"{name} is not symmetric: {name}[{i}, {j}] = {_fmt(M[i, j])} but {name}[{j}, {i}] = {_fmt(M[j, i])}"


def pack_blocks(
    A: np.ndarray, cross: Sequence[object], sizes: np.ndarray, row_means: np.ndarray, grand_mean: float,
    eigenvectors: np.ndarray,
) -> BlockBatch:
    """Centre (docs/math.md §2) and pack valid blocks.

    Args:
        A: (m, n) dissimilarities to the landmarks (float32 or float64), blocks consecutive.
        cross: nb matrices of mutual dissimilarities, already checked.
        sizes: (nb,) rows per block.
        row_means, grand_mean: the landmark spectrum's m_Δ (n,) and g.
        eigenvectors: (n, d) U_d.

    Everything is computed in float64: B per chunk of rows (C = B U_d and
    ‖B_p‖² from it), β from the squared cross matrices with index arithmetic
    over the flat packing.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    m, n = A.shape
    d = eigenvectors.shape[1]
    c = np.empty((m, d))
    row_b2 = np.empty(m)
    abar = np.empty(m)
    for s in range(0, m, PACK_CHUNK_ROWS):
        a2 = np.square(A[s : s + PACK_CHUNK_ROWS], dtype=np.float64)
        ab = a2.mean(axis=1)
        a2 -= ab[:, None]
        a2 -= row_means
        a2 += grand_mean
        a2 *= -0.5  # B (docs/math.md §2)
        c[s : s + PACK_CHUNK_ROWS] = a2 @ eigenvectors
        row_b2[s : s + PACK_CHUNK_ROWS] = np.einsum("ij,ij->i", a2, a2)
        abar[s : s + PACK_CHUNK_ROWS] = ab
    row_off = np.concatenate([[0], np.cumsum(sizes)])
    b_norm2 = np.add.reduceat(row_b2, row_off[:-1]) if sizes.size else np.empty(0)
    sq = sizes * sizes
    flat = np.concatenate([np.asarray(x, dtype=np.float64).ravel() for x in cross]) if len(cross) else np.empty(0)
    starts = np.concatenate([[0], np.cumsum(sq)])[:-1]
    local = np.arange(flat.size) - np.repeat(starts, sq)
    kk = np.repeat(sizes, sq)
    base = np.repeat(row_off[:-1], sq)
    p, q = base + local // kk, base + local % kk
    beta = -0.5 * (flat * flat - abar[p] - abar[q] + grand_mean)
    return BlockBatch(c=c, beta=beta, sizes=sizes, b_norm2=b_norm2, beta_self=abar - 0.5 * grand_mean)


def prepare_blocks(
    A: np.ndarray, cross: Sequence[object], sizes: Sequence[int], row_means: np.ndarray, grand_mean: float,
    eigenvectors: np.ndarray, max_block_rows: int | None = None, rtol: float = CROSS_RTOL, name: str = "cross",
) -> PreparedBlocks:
    """Check every block and pack the valid ones: one call from raw rows to ``solve_blocks`` input.

    A block is invalid if ``check_blocks`` finds a problem with its matrix or
    any of its rows of A has a NaN/inf or negative entry (the detail then
    names the member: ``member 2 (row 9 of A) is invalid: negative: row[17] = -1.0``).
    The other blocks are packed in input order; ``rows`` says which rows of
    A they occupy.
    """
    sizes_arr = np.asarray(sizes, dtype=np.int64)
    if int(sizes_arr.sum()) != A.shape[0]:
        raise ValueError(f"block sizes sum to {int(sizes_arr.sum())} but A has {A.shape[0]} rows")
    problems = check_blocks(cross, sizes_arr, max_block_rows, rtol, name)
    row_off = np.concatenate([[0], np.cumsum(sizes_arr)])
    reasons = row_problems(A, "row")
    for r in [i for i, why in enumerate(reasons) if why is not None]:
        b = int(np.searchsorted(row_off, r, side="right") - 1)
        if problems[b] is None:
            problems[b] = BlockProblem(BAD_BLOCK, f"member {r - row_off[b]} (row {r} of A) is invalid: {reasons[r]}")
    valid = np.array([why is None for why in problems], dtype=bool)
    good = np.flatnonzero(valid)
    rows = np.flatnonzero(np.repeat(valid, sizes_arr))
    A_good = A if good.size == len(problems) else A[rows]
    batch = pack_blocks(A_good, [cross[int(b)] for b in good], sizes_arr[good], row_means, grand_mean, eigenvectors)
    return PreparedBlocks(batch=batch, valid=valid, problems=problems, rows=rows)
