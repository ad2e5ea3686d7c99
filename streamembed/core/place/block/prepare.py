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
from typing import NamedTuple

import numpy as np

from ...inputs.validation import Problem, ProblemCode, describe_bad_row
from ...runtime import in_worker, resolve_threads, single_blas_thread, worker_pool
from ..range_guard import range_detail

try:
    from ... import _native
except ImportError:  # built without a C compiler (or off x86): the numpy path
    _native = None  # type: ignore[assignment]

#: How ``centre_rows`` runs: compiled (``csrc/block.c``) or numpy, which compute the same numbers.
BACKENDS = ("compiled", "numpy")
#: Rows of at least this many entries in all are split over the worker threads.
PARALLEL_ELEMENTS = 1 << 21

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
        coords: (m_valid, r) B U_r of those rows when asked for (``prepare_blocks``' n_components), else None.
        row_reasons: each row's own problem (None: valid).
    """

    batch: BlockBatch
    valid: np.ndarray
    problems: list[BlockProblem | None]
    rows: np.ndarray
    coords: np.ndarray | None = None
    row_reasons: list[Problem | None] | None = None


class CrossGroup(NamedTuple):
    """The blocks of one size k with a usable matrix: their indices (s,), their matrices stacked (s, k, k) float64
    (entries checked by ``stack_blocks``, not corrected), and each one's largest finite |entry| when known."""

    k: int
    idx: np.ndarray
    M: np.ndarray
    largest: np.ndarray | None


def _fmt(x: float) -> str:
    return repr(float(x))


def available_backends() -> tuple[str, ...]:
    """The ``centre_rows`` backends this installation can run."""
    return BACKENDS if _native is not None else ("numpy",)


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
    return stack_blocks(cross, sizes, max_block_rows, rtol, name)[0]


def stack_blocks(
    cross: Sequence[object], sizes: Sequence[int] | np.ndarray, max_block_rows: int | None = None,
    rtol: float = CROSS_RTOL, name: str = "cross",
) -> tuple[list[BlockProblem | None], list[CrossGroup]]:
    """(``check_blocks``' problems, and per block size k the blocks of a usable shape (``CrossGroup``)); never
    raises."""
    nb = len(cross)
    if len(sizes) != nb:
        raise ValueError(f"{nb} cross matrices but {len(sizes)} block sizes")
    problems: list[BlockProblem | None] = [None] * nb
    arrays: dict[int, np.ndarray] = {}  # the blocks of a usable shape
    for i, (x, k) in enumerate(zip(cross, sizes, strict=True)):
        k = int(k)
        if (type(x) is np.ndarray and x.shape == (k, k) and x.dtype.kind in "biuf" and k >= 1  # the usual case
                and (max_block_rows is None or k <= max_block_rows)):
            arrays[i] = x
            continue
        why = _shape_problem(x, k, max_block_rows, name)
        if why is None:
            arrays[i] = np.asarray(x)
        else:
            problems[i] = BlockProblem(BAD_BLOCK, why)
    ks = np.array([int(k) if i in arrays else 0 for i, k in enumerate(sizes)], dtype=np.int64)
    groups = []
    for k in np.unique(ks[ks > 0]).tolist():
        idx = np.flatnonzero(ks == k)
        M = np.stack([arrays[i] for i in idx.tolist()], dtype=np.float64)  # (s, k, k)
        if _native is not None:  # one pass per matrix (csrc/block.c); the details from numpy, for the bad ones
            bad = np.zeros(idx.size, dtype=np.uint8)
            largest = np.empty(idx.size)
            _native.block_cross(M, float(rtol), bad, largest)
            found = [(int(j), _describe(M[j], float(rtol * largest[j]), name)) for j in np.flatnonzero(bad).tolist()]
        else:
            found, largest = _entry_problems(M, rtol, name), None
        for j, why in found:
            problems[int(idx[j])] = BlockProblem(BAD_BLOCK, why)
        groups.append(CrossGroup(k, idx, M, largest))
    return problems, groups


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


def centre_rows(A: np.ndarray, row_means: np.ndarray, grand_mean: float, U: np.ndarray, n_threads: int | None = None,
                backend: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each row of A centred (docs/math.md §2) and projected: (c = B U (m, r), ‖B_p‖² (m,), ā (m,), bad (m,) bool).

    B_p = −½ (a_p² − ā_p − m_Δ + g) in float64, ā_p = mean a_p² (also the row's energy for the range guard),
    ``bad``: the row has a negative, NaN or infinite entry (its c is 0 and ‖B_p‖² NaN). One pass over A
    (``compiled``, ``csrc/block.c``: each row squared and centred in L1, a cache-sized chunk of rows at a
    time, then multiplied by U by BLAS) or cache-sized chunks of numpy; both compute the same numbers to
    round-off. Rows are split over the worker threads when there are enough.
    """
    backend = available_backends()[0] if backend is None else backend
    if backend not in available_backends():
        raise ValueError(f"backend {backend!r} is not available here; choose from {available_backends()}")
    A = np.ascontiguousarray(A)
    m, n = A.shape
    U = np.ascontiguousarray(U, dtype=np.float64)
    r = U.shape[1]
    c = np.empty((m, r))
    b2 = np.empty(m)
    abar = np.empty(m)
    bad = np.zeros(m, dtype=np.uint8)
    shift = np.ascontiguousarray(row_means - grand_mean, dtype=np.float64)
    if backend == "compiled" and A.dtype in (np.float32, np.float64) and A.dtype.isnative:
        def centre_range(lo: int, hi: int) -> None:
            step = max(16, PACK_CHUNK_ELEMENTS // max(n, 1))
            buf = np.empty((min(step, max(hi - lo, 1)), n))
            for s in range(lo, hi, step):
                e = min(s + step, hi)
                _native.block_rows(A, shift, buf, b2, abar, bad, s, e)
                np.matmul(buf[: e - s], U, out=c[s:e])
    else:
        def centre_range(lo: int, hi: int) -> None:
            _centre_chunks(A, U, shift, c, b2, abar, bad, lo, hi)
    threads = resolve_threads(n_threads)
    if threads == 1 or m * n < PARALLEL_ELEMENTS or m < 2 * threads or in_worker():
        with single_blas_thread():
            centre_range(0, m)
    else:
        bounds = [m * w // threads for w in range(threads + 1)]
        with single_blas_thread():  # a product per chunk on every worker: one BLAS thread each
            futures = [worker_pool(threads).submit(centre_range, bounds[w], bounds[w + 1]) for w in range(1, threads)]
            centre_range(bounds[0], bounds[1])
            for f in futures:
                f.result()
    return c, b2, abar, bad.view(bool)


def _centre_chunks(A: np.ndarray, U: np.ndarray, shift: np.ndarray, c: np.ndarray, b2: np.ndarray, abar: np.ndarray,
                   bad: np.ndarray, lo: int, hi: int) -> None:
    """``centre_rows``' numpy path for rows lo:hi: a cache-sized chunk of rows at a time."""
    n = A.shape[1]
    step = max(16, PACK_CHUNK_ELEMENTS // max(n, 1))
    buf = np.empty((min(step, max(hi - lo, 1)), n))
    for s in range(lo, hi, step):
        e = min(s + step, hi)
        B = buf[: e - s]
        with np.errstate(invalid="ignore", over="ignore"):
            np.square(A[s:e], out=B, dtype=np.float64)
            rows_bad = ~(A[s:e].min(axis=1) >= 0) | (A[s:e].max(axis=1) == np.inf)
            ab = B.mean(axis=1)
            B -= ab[:, None]
            B -= shift
            B *= -0.5  # B (docs/math.md §2)
            np.matmul(B, U, out=c[s:e])
            b2[s:e] = np.einsum("ij,ij->i", B, B)
        abar[s:e] = ab
        bad[s:e] = rows_bad
        c[s:e][rows_bad] = 0.0
        b2[s:e][rows_bad] = np.nan


def _betas(groups: list[CrossGroup], keep: np.ndarray, sizes: np.ndarray, abar: np.ndarray,
           grand_mean: float) -> np.ndarray:
    """The β matrices (Σ k², flat) of the blocks ``keep`` (sorted block indices), in that order, from the stacks of
    ``stack_blocks``; ``abar`` (m,) the mean squared dissimilarity of every row of every block."""
    pos_of = np.full(sizes.size, -1, dtype=np.int64)
    pos_of[keep] = np.arange(keep.size)
    row_off = np.concatenate([[0], np.cumsum(sizes)])
    ks = sizes[keep]
    beta_off = np.concatenate([[0], np.cumsum(ks * ks)])
    beta = np.empty(int(beta_off[-1]))
    for k, idx, X, _ in groups:
        pos = pos_of[idx]
        sel = pos >= 0
        if not sel.any():
            continue
        every = bool(sel.all())
        chosen = idx if every else idx[sel]
        p = pos if every else pos[sel]
        n_sel = chosen.size
        if int(chosen[-1]) - int(chosen[0]) == n_sel - 1:  # consecutive blocks: their rows are a slice of abar
            r0 = int(row_off[chosen[0]])
            ab = abar[r0 : r0 + n_sel * k].reshape(n_sel, k)
        else:
            ab = abar[row_off[chosen][:, None] + np.arange(k)]  # (s, k)
        contiguous = int(p[-1]) - int(p[0]) == n_sel - 1
        b0 = int(beta_off[p[0]])
        Bk = beta[b0 : b0 + n_sel * k * k].reshape(n_sel, k, k) if contiguous else np.empty((n_sel, k, k))
        # B = −½ (X² − ā_p − ā_q + g), in place
        np.square(X if every else X[sel], out=Bk)
        Bk -= ab[:, :, None]
        Bk -= ab[:, None, :]
        Bk += grand_mean
        Bk *= -0.5
        if not contiguous:
            beta[beta_off[p][:, None] + np.arange(k * k)] = Bk.reshape(-1, k * k)
    return beta


def pack_blocks(
    A: np.ndarray, cross: Sequence[object], sizes: np.ndarray, row_means: np.ndarray, grand_mean: float,
    eigenvectors: np.ndarray, backend: str | None = None,
) -> BlockBatch:
    """Centre (docs/math.md §2) and pack valid blocks.

    Args:
        A: (m, n) dissimilarities to the landmarks (float32 or float64), blocks consecutive.
        cross: nb matrices of mutual dissimilarities, already checked.
        sizes: (nb,) rows per block.
        row_means, grand_mean: the landmark spectrum's m_Δ (n,) and g.
        eigenvectors: (n, d) U_d.
        backend: ``centre_rows``' (None: the best available).

    Everything is computed in float64: B one row (or cache-sized chunk of rows) at a time, C = B U_d and
    ‖B_p‖² from it while it is in cache (``centre_rows``), β of all blocks of one size at once.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    c, row_b2, abar, _ = centre_rows(A, row_means, grand_mean, eigenvectors, n_threads=1, backend=backend)
    _, groups = stack_blocks(cross, sizes)
    row_off = np.concatenate([[0], np.cumsum(sizes)])
    b_norm2 = np.add.reduceat(row_b2, row_off[:-1]) if sizes.size else np.empty(0)
    beta = _betas(groups, np.arange(sizes.size), sizes, abar, grand_mean)
    return BlockBatch(c=c, beta=beta, sizes=sizes, b_norm2=b_norm2, beta_self=abar - 0.5 * grand_mean)


def prepare_blocks(
    A: np.ndarray, cross: Sequence[object], sizes: Sequence[int] | np.ndarray, row_means: np.ndarray, grand_mean: float,
    eigenvectors: np.ndarray, max_block_rows: int | None = None, rtol: float = CROSS_RTOL, name: str = "cross",
    n_threads: int | None = 1, backend: str | None = None, limit: tuple[float, str] | None = None,
    n_components: int | None = None,
) -> PreparedBlocks:
    """Check every block and pack the valid ones: one call from raw rows to ``solve_blocks`` input.

    A block is invalid if ``check_blocks`` finds a problem with its matrix or
    any of its rows of A has a NaN/inf or negative entry (the detail then
    names the member: ``member 2 (row 9 of A) is invalid: negative: row[17] = -1.0``),
    or, with ``limit`` (``range_guard.range_limit`` of A's dtype), when a member's mean squared
    dissimilarity or a squared mutual one exceeds it (``out of range: …``). The other blocks are packed in
    input order; ``rows`` says which rows of A they occupy. With ``n_components`` d < the columns of
    ``eigenvectors`` (U_r: every monitored eigenpair), ``batch.c`` keeps the first d and ``coords`` holds
    B U_r of the packed rows (their projections times Λ_r^{1/2}); ``row_reasons`` is each row's own
    problem (None: valid), as ``validation.row_problems(A, "A")`` says it.
    """
    sizes_arr = np.asarray(sizes, dtype=np.int64)
    if int(sizes_arr.sum()) != A.shape[0]:
        raise ValueError(f"block sizes sum to {int(sizes_arr.sum())} but A has {A.shape[0]} rows")
    problems, groups = stack_blocks(cross, sizes_arr, max_block_rows, rtol, name)
    c, row_b2, abar, bad = centre_rows(A, row_means, grand_mean, eigenvectors, n_threads=n_threads, backend=backend)
    row_off = np.concatenate([[0], np.cumsum(sizes_arr)])
    owner = np.repeat(np.arange(sizes_arr.size), sizes_arr)
    row_reasons: list[Problem | None] = [None] * A.shape[0]
    for r in np.flatnonzero(bad).tolist():
        why = describe_bad_row(A[r], "row")
        row_reasons[r] = describe_bad_row(A[r], "A")
        b = int(owner[r])
        if problems[b] is None and why is not None:
            problems[b] = BlockProblem(BAD_BLOCK, f"member {r - row_off[b]} (row {r} of A) is invalid: {why}")
    if limit is not None:
        _out_of_range(problems, groups, abar, row_off, sizes_arr, limit, A.dtype, grand_mean)
    valid = np.array([why is None for why in problems], dtype=bool)
    good = np.flatnonzero(valid)
    rows = np.flatnonzero(np.repeat(valid, sizes_arr))
    whole = good.size == len(problems)
    ks = sizes_arr[good]
    c_good, b2_good, abar_good = (c, row_b2, abar) if whole else (c[rows], row_b2[rows], abar[rows])
    b_norm2 = np.add.reduceat(b2_good, np.concatenate([[0], np.cumsum(ks)])[:-1]) if ks.size else np.empty(0)
    beta = _betas(groups, good, sizes_arr, abar, grand_mean) if good.size else np.empty(0)
    d = c.shape[1] if n_components is None else int(n_components)
    coords = c_good if d < c.shape[1] else None
    batch = BlockBatch(c=np.ascontiguousarray(c_good[:, :d]), beta=beta, sizes=ks, b_norm2=b_norm2,
                       beta_self=abar_good - 0.5 * grand_mean)
    return PreparedBlocks(batch=batch, valid=valid, problems=problems, rows=rows, coords=coords,
                          row_reasons=row_reasons)


def _out_of_range(problems: list[BlockProblem | None], groups: list[CrossGroup],
                  abar: np.ndarray, row_off: np.ndarray, sizes: np.ndarray, limit: tuple[float, str], dtype: np.dtype,
                  grand_mean: float) -> None:
    """Refuse (in ``problems``) the blocks with a member row, or a mutual dissimilarity, beyond the placeable range:
    ``range_guard``'s words, in place of any other problem the block has."""
    worst = np.zeros(sizes.size)
    nonempty = sizes > 0
    if nonempty.any():
        with np.errstate(invalid="ignore"):
            worst[nonempty] = np.fmax.reduceat(abar, row_off[:-1][nonempty])
    for _, idx, X, largest in groups:
        with np.errstate(over="ignore", invalid="ignore"):
            if largest is not None:
                big = np.square(largest)
            else:
                big = np.where(np.isfinite(X), np.square(X), 0.0).reshape(idx.size, -1).max(axis=1)
        worst[idx] = np.fmax(worst[idx], big)
    bound, why = limit
    for b in np.flatnonzero(worst > bound).tolist():
        problems[b] = BlockProblem(BAD_BLOCK, "out of range: " + range_detail(float(worst[b]), bound, why, dtype,
                                                                               grand_mean).replace(
            "the mean squared dissimilarity", "a squared dissimilarity of the block (or a member's mean)"))
