"""Which rows of an input batch form blocks, and each block's mutual dissimilarities.

A *block* is a set of objects placed jointly by block restricted
reconstruction (docs/math.md §3.3) from their dissimilarities to the
landmarks and to each other. In the record format (``stream.records``):

* with a ``block`` column (string or integer), the rows sharing a value form
  one block; they must be consecutive, and each carries in ``cross`` its k
  dissimilarities to the block's k rows, in row order. A row with a null
  ``block`` (and no ``cross``) is a single object. One batch may hold any
  number of blocks and single objects;
* without it, a batch whose rows carry ``cross`` is one block (a file or a
  message of its own).

:func:`find_blocks` works on whole columns: run boundaries, lengths and the
per-block checks are vectorised; Python touches each *block* once, only to
slice its k×k matrix out of the column's values. Finiteness, symmetry and
the zero diagonal are the core's checks (``core.place.block.prepare``), so that a
bad block is refused with the same words from every entry point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from streamembed.stream.arrow_build import scalar, to_numpy
from streamembed.stream.columns import is_list, list_lengths, null_mask, numeric_values_type

__all__ = ["Blocks", "BlockRows", "find_blocks", "block_units"]


@dataclass
class Blocks:
    """The blocks among a batch's accepted rows.

    Attributes:
        rows: (r,) positions, in the accepted rows, of every block member, block after block.
        sizes: (nb,) members per block; ``rows`` is cut by ``cumsum(sizes)``.
        cross: nb matrices (k_b, k_b) of mutual dissimilarities, float64 or float32.
    """

    rows: np.ndarray
    sizes: np.ndarray
    cross: list[np.ndarray]

    def within(self, positions: np.ndarray) -> Blocks:
        """The blocks whose first member is one of ``positions`` (sorted accepted-row positions), re-indexed
        into ``positions``; a block lies wholly in one group (the caller refuses blocks that straddle)."""
        starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        keep = np.isin(self.rows[starts], positions)
        members = np.repeat(keep, self.sizes)
        return Blocks(rows=np.searchsorted(positions, self.rows[members]), sizes=self.sizes[keep],
                      cross=[c for c, k in zip(self.cross, keep.tolist(), strict=True) if k])

    def member_mask(self, m: int) -> np.ndarray:
        """(m,) bool over the accepted rows: True for block members."""
        out = np.zeros(m, dtype=bool)
        out[self.rows] = True
        return out


@dataclass
class BlockRows:
    """What :func:`find_blocks` found in one input batch (positions are input-batch rows).

    Attributes:
        starts, sizes: (nb,) first row and row count of each block that passed the stream-level checks.
        cross: nb (k_b, k_b) matrices for those blocks.
        bad: (m,) bool, rows refused as ``bad_block``; ``details`` maps each such row to its reason.
    """

    starts: np.ndarray
    sizes: np.ndarray
    cross: list[np.ndarray]
    bad: np.ndarray
    details: dict[int, str]


def _keys(bcol: pa.Array) -> tuple[np.ndarray | None, np.ndarray, str | None]:
    """(integer key per row or None, null mask, column-level problem)."""
    import pyarrow.compute as pc  # (0.1 s to import: only where it is used)

    t = bcol.type
    nulls = null_mask(bcol)
    if pa.types.is_dictionary(t):
        bcol, t = bcol.cast(t.value_type), t.value_type
    if pa.types.is_integer(t):
        return to_numpy(bcol.cast(pa.int64()).fill_null(scalar(0, pa.int64()))), nulls, None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        codes = pc.dictionary_encode(bcol).indices.cast(pa.int64()).fill_null(scalar(-1, pa.int64()))
        return to_numpy(codes), nulls, None
    if pa.types.is_null(t):
        return None, nulls, None
    return None, nulls, f"'block' has type {t}, expected a string or an integer"


def _label(bcol: pa.Array | None, row: int) -> str:
    if bcol is None:
        return "the batch's block"
    try:
        return f"block {bcol[row].as_py()!r}"
    except Exception:  # a label for a message only
        return f"the block at row {row}"


def find_blocks(ccol: pa.Array | None, bcol: pa.Array | None, code: np.ndarray, code_names: Sequence[str],
                row_no: np.ndarray, max_block_rows: int) -> BlockRows | None:
    """Blocks of one batch: ``ccol`` the ``cross`` column, ``bcol`` the ``block`` column (None if absent).

    ``code`` (m,) is each row's problem so far (0: none; ``code_names[c]``
    names it): a block with a failed member is refused whole, naming the
    member. ``row_no`` (m,) numbers rows for messages (file rows). Returns
    None when the batch has no blocks.
    """
    m = int(code.size)
    ok = code == 0
    has_cross = np.zeros(m, dtype=bool) if ccol is None or pa.types.is_null(ccol.type) else ~null_mask(ccol)
    keys: np.ndarray | None
    if bcol is None or pa.types.is_null(bcol.type):
        if not has_cross.any():
            return None
        if not has_cross[0]:
            # stray rows with `cross` in a batch of single objects: each is refused on its own
            bad = has_cross.copy()
            return BlockRows(np.empty(0, np.int64), np.empty(0, np.int64), [], bad,
                             dict.fromkeys(np.flatnonzero(bad).tolist(),
                                           "this row carries 'cross' but no 'block', and its batch is not one block "
                                           "(give rows a 'block' key, or send a block as a file or message of its "
                                           "own whose every row carries 'cross')"))
        keys, in_block, problem = np.zeros(m, np.int64), np.ones(m, dtype=bool), None
    else:
        keys, nulls, problem = _keys(bcol)
        in_block = ~nulls
    bad = np.zeros(m, dtype=bool)
    details: dict[int, str] = {}

    def refuse(rows: np.ndarray, detail: str) -> None:
        new = rows[~bad[rows]]
        bad[new] = True
        details.update(dict.fromkeys(new.tolist(), detail))

    if problem is not None or keys is None:
        refuse(np.flatnonzero(in_block | has_cross), problem or "'block' is null")
        return BlockRows(np.empty(0, np.int64), np.empty(0, np.int64), [], bad, details)
    stray = np.flatnonzero(has_cross & ~in_block)
    refuse(stray, "this row carries 'cross' but its 'block' is null")

    # runs of equal consecutive keys are the blocks
    idx = np.flatnonzero(in_block)
    if idx.size == 0:
        return BlockRows(np.empty(0, np.int64), np.empty(0, np.int64), [], bad, details)
    new_run = np.ones(idx.size, dtype=bool)
    new_run[1:] = (np.diff(idx) != 1) | (keys[idx[1:]] != keys[idx[:-1]])
    starts = idx[new_run]
    sizes = np.diff(np.append(np.flatnonzero(new_run), idx.size))
    run_key = keys[starts]
    order = np.argsort(run_key, kind="stable")
    split = np.zeros(starts.size, dtype=bool)
    same = run_key[order][1:] == run_key[order][:-1]
    split[order[1:][same]] = True
    split[order[:-1][same]] = True

    cross_ok = ccol is not None and not pa.types.is_null(ccol.type) and is_list(ccol.type) \
        and numeric_values_type(ccol.type)
    lengths = list_lengths(ccol) if cross_ok else np.full(m, -1, dtype=np.int64)
    run_of = np.repeat(np.arange(starts.size), sizes)
    member_rows = idx
    k_of_row = np.repeat(sizes, sizes)
    wrong = np.zeros(starts.size, dtype=bool)
    np.logical_or.at(wrong, run_of, lengths[member_rows] != k_of_row)
    failed = np.zeros(starts.size, dtype=bool)
    np.logical_or.at(failed, run_of, ~ok[member_rows])

    for b in np.flatnonzero(split | wrong | failed | (sizes > max_block_rows)).tolist():  # bad blocks only
        s, k = int(starts[b]), int(sizes[b])
        rows = np.arange(s, s + k)
        name = _label(bcol, s)
        if split[b]:
            detail = f"{name} is split: its rows must be consecutive (this part starts at row {int(row_no[s])})"
        elif k > max_block_rows:
            detail = f"{name} has {k} rows, more than source.max_block_rows = {max_block_rows}"
        elif failed[b]:
            first = int(rows[~ok[rows]][0])
            detail = f"{name}: member at row {int(row_no[first])} failed ({code_names[int(code[first])]})"
        elif not cross_ok:
            detail = (f"{name}: no 'cross' column" if ccol is None or pa.types.is_null(ccol.type)
                      else f"{name}: cross has type {ccol.type}, expected a list of floats")
        else:
            first = int(rows[lengths[rows] != k][0])
            got = int(lengths[first])
            detail = (f"{name}: cross is null at row {int(row_no[first])}" if got < 0 else
                      f"{name}: cross at row {int(row_no[first])} has {got} values, expected k = {k} "
                      f"(the block's rows)")
        refuse(rows, detail)

    good = ~np.isin(np.arange(starts.size), np.flatnonzero(split | wrong | failed | (sizes > max_block_rows)))
    starts, sizes = starts[good], sizes[good]
    return BlockRows(starts, sizes, _matrices(ccol, starts, sizes) if starts.size else [], bad, details)


def _matrices(ccol: pa.Array, starts: np.ndarray, sizes: np.ndarray) -> list[np.ndarray]:
    """The k×k matrix of each block from the ``cross`` column (every member's list has length k)."""
    values = ccol.flatten()  # the values of the non-null slots, in row order
    vt = values.type
    if pa.types.is_integer(vt) or pa.types.is_float16(vt) or pa.types.is_null(vt):
        values = values.cast(pa.float64())
    flat = to_numpy(values)
    lengths = np.maximum(list_lengths(ccol), 0)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return [flat[offsets[s]:offsets[s] + k * k].reshape(k, k)
            for s, k in zip(starts.tolist(), sizes.tolist(), strict=True)]


def block_units(table: pa.Table | pa.RecordBatch) -> np.ndarray:
    """Row indices where a unit that cannot be split begins: every row, except inside a block.

    Used to bisect a batch that failed at block boundaries only. Never raises:
    when the layout cannot be read, the whole batch is one unit.
    """
    m = table.num_rows
    try:
        names = table.schema.names
        if "block" in names and names.count("block") == 1:
            bcol = table.column(names.index("block"))
            bcol = bcol.combine_chunks() if isinstance(bcol, pa.ChunkedArray) else bcol
            keys, nulls, problem = _keys(bcol)
            if keys is None:
                return np.arange(m)
            start = np.ones(m, dtype=bool)
            start[1:] = nulls[1:] | nulls[:-1] | (keys[1:] != keys[:-1])
            return np.flatnonzero(start)
        if "cross" in names and m > 1:
            return np.zeros(1, dtype=np.int64)
    except Exception:  # bisection must go on
        return np.zeros(1, dtype=np.int64)
    return np.arange(m)
