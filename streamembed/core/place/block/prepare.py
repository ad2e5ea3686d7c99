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

from ...inputs.validation import ProblemCode, row_problems
from ...runtime import single_blas_thread

#: Symmetry and the zero diagonal are checked to this share of the block's largest entry
#: (as ``validation.check_dissimilarity_matrix``: float32 text round trips).
CROSS_RTOL = 1e-7
#: ``pack_blocks`` centres about this many float64 entries of A at a time (a chunk
#: of rows, 512 KB, that stays in the per-core L2 cache while it is used).
PACK_CHUNK_ELEMENTS = 1 << 16

BAD_BLOCK = ProblemCode.BAD_BLOCK


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
    cross: Sequence[object], sizes: Sequence[int] | np.ndarray, max_block_rows: int | None = None,
    rtol: float = CROSS_RTOL,
    name: str = "cross",
) -> list[BlockProblem | None]:
    """Per-block problems of the mutual dissimilarity matrices (None = valid); never raises.

    A block is bad when it is empty or larger than ``max_block_rows``, or its
    matrix is not a 2-D square numeric array matching the block's row count,
    or has a NaN/inf or negative entry, a non-zero diagonal or is not
    symmetric (both beyond ``rtol`` times its largest entry). The detail names
    the first offending entry, e.g. ``cross[2, 5] = -1.0 is negative``. The
    entry checks run on all blocks of one size at once.

    Args:
        cross: nb matrices, block i's expected to be sizes[i]×sizes[i].
        sizes: rows of each block.
    """
    nb = len(cross)
    if len(sizes) != nb:
        raise ValueError(f"{nb} cross matrices but {len(sizes)} block sizes")
    problems: list[BlockProblem | None] = [None] * nb
    arrays: dict[int, np.ndarray] = {}  # the blocks of a usable shape
    for i, (x, k) in enumerate(zip(cross, sizes, strict=True)):
        why = _shape_problem(x, int(k), max_block_rows, name)
        if why is None:
            arrays[i] = np.asarray(x)
        else:
            problems[i] = BlockProblem(BAD_BLOCK, why)
    ks = np.array([int(k) if i in arrays else 0 for i, k in enumerate(sizes)], dtype=np.int64)
    for k in np.unique(ks[ks > 0]).tolist():
        idx = np.flatnonzero(ks == k)
        M = np.stack([arrays[i] for i in idx.tolist()]).astype(np.float64, copy=False)  # (s, k, k)
        for j, why in _entry_problems(M, rtol, name):
            problems[int(idx[j])] = BlockProblem(BAD_BLOCK, why)
    return problems


def _shape_problem(x: object, k: int, max_block_rows: int | None, name: str) -> str | None:
    if k < 1:
        return "empty block (0 rows)"
    if max_block_rows is not None and k > max_block_rows:
        return f"block of {k} rows exceeds max_block_rows = {max_block_rows}"
    try:
        arr = np.asarray(x)
    except Exception as exc:  # ragged nested lists and the like
        return f"{name} is not an array: {exc}"
    if arr.dtype.kind not in "biuf":
        return f"{name} must be numeric, got dtype {arr.dtype}"
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        return f"{name} is not square: shape {arr.shape}"
    if arr.shape[0] != k:
        return f"{name} has shape {arr.shape} but the block has {k} rows"
    return None


def _entry_problems(M: np.ndarray, rtol: float, name: str) -> list[tuple[int, str]]:
    """(index in the stack, detail) for the bad matrices of a stack M (s, k, k)."""
    s = M.shape[0]
    flat = M.reshape(s, -1)
    with np.errstate(invalid="ignore"):
        lo = flat.min(axis=1)  # NaN if any NaN
        hi = np.abs(flat).max(axis=1)
        suspect = ~(lo >= 0) | ~np.isfinite(hi)
        tol = rtol * np.where(np.isfinite(hi), hi, 0.0)
        diag = np.abs(np.diagonal(M, axis1=1, axis2=2)).max(axis=1) > tol
        asym = np.abs(M - M.transpose(0, 2, 1)).reshape(s, -1).max(axis=1) > tol
    bad = np.flatnonzero(suspect | diag | asym)
    return [(int(j), _describe(M[j], float(tol[j]), name)) for j in bad]


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

    Everything is computed in float64: B a cache-sized chunk of rows at a
    time (C = B U_d and ‖B_p‖² from it while it is in cache), β of all blocks
    of one size at once.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    m, n = A.shape
    d = eigenvectors.shape[1]
    c = np.empty((m, d))
    row_b2 = np.empty(m)
    abar = np.empty(m)
    shift = row_means - grand_mean
    step = max(16, PACK_CHUNK_ELEMENTS // max(n, 1))
    buf = np.empty((min(step, m), n))
    with single_blas_thread():  # a product per cache-sized chunk: two BLAS threads only contend on them
        for s in range(0, m, step):
            e = min(s + step, m)
            B = buf[: e - s]
            np.square(A[s:e], out=B, dtype=np.float64)
            ab = B.mean(axis=1)
            B -= ab[:, None]
            B -= shift
            B *= -0.5  # B (docs/math.md §2)
            np.matmul(B, eigenvectors, out=c[s:e])
            row_b2[s:e] = np.einsum("ij,ij->i", B, B)
            abar[s:e] = ab
    row_off = np.concatenate([[0], np.cumsum(sizes)])
    b_norm2 = np.add.reduceat(row_b2, row_off[:-1]) if sizes.size else np.empty(0)
    beta_off = np.concatenate([[0], np.cumsum(sizes * sizes)])
    beta = np.empty(int(beta_off[-1]))
    for k in np.unique(sizes).tolist():
        idx = np.flatnonzero(sizes == k)
        X = np.stack([np.asarray(cross[i], dtype=np.float64) for i in idx.tolist()])  # (s, k, k)
        ab = abar[row_off[idx][:, None] + np.arange(k)]  # (s, k)
        Bk = -0.5 * (X * X - ab[:, :, None] - ab[:, None, :] + grand_mean)
        beta[beta_off[idx][:, None] + np.arange(k * k)] = Bk.reshape(idx.size, k * k)
    return BlockBatch(c=c, beta=beta, sizes=sizes, b_norm2=b_norm2, beta_self=abar - 0.5 * grand_mean)


def prepare_blocks(
    A: np.ndarray, cross: Sequence[object], sizes: Sequence[int] | np.ndarray, row_means: np.ndarray, grand_mean: float,
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
