"""The column checks of ``stream.codecs.decode_batch``: each input column validated whole, each refused row given
its reason code (``RowMarks``: the first reason wins) and the text that explains it.

Vectorised over the batch: Python loops run only over rejected rows (to find the rows at fault and write their
reasons). Shapes: m rows of the batch, n landmarks (or p features) per vector.
"""

from __future__ import annotations

import difflib
from typing import Any
from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from streamembed.stream.arrow_build import scalar, to_numpy
from streamembed.stream.blocks import BlockRows, Blocks
from streamembed.stream.columns import column, is_list, list_lengths, null_mask, numeric_values_type, single_array
from streamembed.stream.landmark_order import permutation, row_orders
from streamembed.stream.packed import packed_dtype
from streamembed.stream.records import (
    INPUT_BLOCK,
    INPUT_CROSS,
    INPUT_DISSIMILARITIES,
    INPUT_EVENT_TIME,
    INPUT_FEATURES,
    INPUT_ID,
    INPUT_LANDMARK_VERSION,
    INPUT_LANDMARKS,
    INPUT_OBJECT,
    TIMESTAMP_TYPE,
    Reason,
)


#: Reason codes as small integers while a batch is validated (0 = row ok).
REASON_CODES: tuple[str, ...] = (
    "",
    Reason.MISSING_ID,
    Reason.BAD_ID,
    Reason.MISSING_VECTOR,
    Reason.WRONG_LENGTH,
    Reason.NON_NUMERIC,
    Reason.UNDECODABLE,
    Reason.UNKNOWN_LANDMARK_VERSION,
    Reason.BAD_BLOCK,
    Reason.LANDMARK_MISMATCH,
    Reason.BAD_OBJECT,
    Reason.AMBIGUOUS_LANDMARKS,
)


_CODE = {name: i for i, name in enumerate(REASON_CODES) if name}


_KNOWN = (INPUT_ID, INPUT_DISSIMILARITIES, INPUT_FEATURES, INPUT_LANDMARK_VERSION, INPUT_EVENT_TIME, INPUT_CROSS,
          INPUT_BLOCK, INPUT_LANDMARKS, INPUT_OBJECT)


def duplicated_column(table: pa.Table | pa.RecordBatch) -> str | None:
    """The problem of a batch that names a known input column twice (the whole batch is refused), or None."""
    names = table.schema.names
    for name in _KNOWN:
        k = names.count(name)
        if k > 1:
            return f"column {name!r} appears {k} times in the input schema"
    return None


def null_invalid_utf8(table: pa.Table | pa.RecordBatch) -> tuple[pa.Table | pa.RecordBatch, np.ndarray]:
    """(table with invalid UTF-8 strings in the known string columns nulled, rows that had one).

    Arrow IPC does not promise valid UTF-8 in string columns; such a value would
    fail later, far from its row (encoding the output, writing Parquet).
    """
    bad = np.zeros(table.num_rows, dtype=bool)
    for name in (INPUT_ID, INPUT_EVENT_TIME):
        if table.schema.names.count(name) != 1:
            continue
        k = table.schema.get_field_index(name)
        col = single_array(table.column(k))
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            continue
        try:
            col.validate(full=True)
            continue
        except pa.ArrowInvalid:
            pass
        import pyarrow.compute as pc  # (0.1 s to import: the bad path only)

        here = np.zeros(table.num_rows, dtype=bool)
        for i in range(len(col)):  # the bad path only
            try:
                col[i].as_py()
            except UnicodeDecodeError:
                here[i] = True
        fixed = pc.if_else(pa.array(here), pa.scalar(None, col.type), col.cast(pa.binary()).cast(col.type,
                                                                                                safe=False))
        table = table.set_column(k, name, fixed) if isinstance(table, pa.Table) else \
            pa.RecordBatch.from_arrays([fixed if j == k else table.column(j) for j in range(table.num_columns)],
                                       schema=table.schema)
        bad |= here
    return table, bad


_ZONED = r"(Z|z|[+-]\d\d:?\d\d)$"


def _parse_times(col: pa.Array) -> pa.Array:
    """ISO 8601 strings -> timestamps; a string without a zone is UTC (vectorised: append "Z")."""
    import pyarrow.compute as pc  # (0.1 s to import: only where it is used)

    zoned = pc.match_substring_regex(col, _ZONED)
    return pc.cast(pc.if_else(zoned, col, pc.binary_join_element_wise(col, pa.scalar("Z"), "")), TIMESTAMP_TYPE)


def event_times(table: pa.Table | pa.RecordBatch, m: int) -> tuple[pa.Array, np.ndarray, dict[int, str]]:
    """(event times, rows whose event_time is unusable, their details); row-level: one bad value costs one row."""
    none = np.zeros(m, dtype=bool)
    col = column(table, INPUT_EVENT_TIME)
    if col is None or pa.types.is_null(col.type):
        return pa.nulls(m, type=TIMESTAMP_TYPE), none, {}
    t = col.type
    try:
        if pa.types.is_timestamp(t):
            if t.tz is None:
                col = col.cast(pa.timestamp(t.unit)).cast(TIMESTAMP_TYPE)
            return col.cast(TIMESTAMP_TYPE), none, {}
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return _parse_times(col), none, {}
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            return pa.nulls(m, type=TIMESTAMP_TYPE), np.ones(m, dtype=bool), {-1: f"event_time of type {t} cannot be "
                                                                             f"read as a timestamp"}
        # the bad path: parse value by value to find the rows at fault
        values = col.to_pylist()
        bad = np.zeros(m, dtype=bool)
        details: dict[int, str] = {}
        for i, v in enumerate(values):
            if v is None:
                continue
            try:
                _parse_times(pa.array([v], pa.string()))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                bad[i] = True
                details[i] = f"event_time {v!r:.60} is not an ISO 8601 time"
        kept = np.array(values, dtype=object)
        kept[bad] = None
        good = pa.array(kept.tolist(), pa.string())
        return _parse_times(good), bad, details
    return pa.nulls(m, type=TIMESTAMP_TYPE), np.ones(m, dtype=bool), {-1: f"event_time has type {t}, expected a "
                                                                        f"timestamp or an ISO 8601 string"}


def id_column(table: pa.Table | pa.RecordBatch, m: int) -> tuple[pa.Array, np.ndarray, str | None]:
    """(ids as string array, bad mask, column-level problem: a non-string id column: null and empty ids are bad)."""
    col = column(table, INPUT_ID)
    if col is None:
        return pa.nulls(m, type=pa.string()), np.ones(m, dtype=bool), None
    t = col.type
    if pa.types.is_dictionary(t) and pa.types.is_string(t.value_type):
        col = col.cast(pa.string())
        t = col.type
    if pa.types.is_large_string(t):
        col = col.cast(pa.string())
    elif not pa.types.is_string(t):
        return pa.nulls(m, type=pa.string()), np.ones(m, dtype=bool), f"id has type {t}, expected a string"
    bad = null_mask(col)
    if m:  # an empty id: its offsets are equal (read from the buffer: pyarrow.compute costs 0.1 s to import)
        offsets = np.frombuffer(col.buffers()[1], dtype=np.int32, count=m + 1, offset=4 * col.offset)
        bad |= offsets[1:] == offsets[:-1]
    return col, bad, None


def _near_miss(table: pa.Table | pa.RecordBatch, name: str) -> str:
    """' (the input has a column 'x': did you mean 'name'?)' for a misspelt column, else ''."""
    others = [n for n in table.schema.names if n not in _KNOWN]
    near = difflib.get_close_matches(name, others, n=1, cutoff=0.6)
    return f" (the input has a column {near[0]!r}: did you mean {name!r}?)" if near else ""


class RowMarks:
    """The reason code of each row of a batch (0: ok) and the texts that explain them; the first reason wins."""

    def __init__(self, m: int) -> None:
        self.code = np.zeros(m, dtype=np.uint8)
        self.column_detail: dict[int, str] = {}
        self.row_detail: dict[int, str] = {}

    def mark(self, mask: np.ndarray, reason: str, detail: str | None = None,
             per_row: dict[int, str] | None = None) -> None:
        """Give the rows of ``mask`` (bool, (m,)) not yet refused ``reason``; ``detail`` for the column, per row."""
        if not mask.any():  # the common case, and a fifth of the cost of the test below
            return
        c = _CODE[reason]
        sel = mask & (self.code == 0)
        if not sel.any():
            return
        self.code[sel] = c
        if detail is not None and c not in self.column_detail:
            self.column_detail[c] = detail
        for i, text in (per_row or {}).items():
            if i >= 0 and sel[i]:
                self.row_detail[i] = text


def vector_column(table: pa.Table | pa.RecordBatch, marks: RowMarks, n_landmarks: int,
                  n_features: int | None) -> tuple[str, int, pa.Array | None]:
    """(kind, required width, column) of the vectors: ``dissimilarities``, else ``features`` of a feature model."""
    kind = INPUT_DISSIMILARITIES
    width = n_landmarks
    col = column(table, INPUT_DISSIMILARITIES)
    if col is not None and pa.types.is_null(col.type):
        col = None  # an all-null column from JSON lines that did not use it
    if col is None:
        fcol = column(table, INPUT_FEATURES)
        if fcol is not None and not pa.types.is_null(fcol.type):
            if n_features is None:
                marks.mark(np.ones(table.num_rows, dtype=bool), Reason.UNDECODABLE,
                           "rows carry 'features' but the model was not fitted on feature vectors")
            else:
                kind, width, col = INPUT_FEATURES, n_features, fcol
    return kind, width, col


def vector_lengths(table: pa.Table | pa.RecordBatch, marks: RowMarks, kind: str, width: int,
                   col: pa.Array | None) -> tuple[pa.Array | None, np.ndarray, np.dtype | None]:
    """(column, or None if unusable; row lengths (m,) int64, -1: null; the packed value dtype, or None).

    Marks missing, non-numeric and wrong-length vectors.
    """
    m = table.num_rows
    all_rows = np.ones(m, dtype=bool)
    lengths = np.full(m, -1, dtype=np.int64)
    packed: np.dtype | None = None  # the fast layout: rows packed as fixed_size_binary
    if col is None:
        marks.mark(all_rows, Reason.MISSING_VECTOR, f"no '{INPUT_DISSIMILARITIES}' column"
                   + _near_miss(table, INPUT_DISSIMILARITIES))
    elif pa.types.is_fixed_size_binary(col.type):
        packed, problem = packed_dtype(table.schema.field(kind))
        if packed is None:
            marks.mark(all_rows, Reason.NON_NUMERIC, problem)
            col = None
        else:
            lengths = _packed_lengths(table, marks, kind, width, col, packed)
    elif not is_list(col.type):
        marks.mark(all_rows, Reason.UNDECODABLE, f"'{kind}' has type {col.type}, expected a list of floats")
        col = None
    elif not numeric_values_type(col.type):
        marks.mark(all_rows, Reason.NON_NUMERIC, f"'{kind}' holds {col.type.value_type}, expected float32/float64")
        col = None
    else:
        lengths = list_lengths(col)
        null = lengths < 0
        if null.any():  # the near-miss hint (difflib) only for a batch that has null vectors
            marks.mark(null, Reason.MISSING_VECTOR, f"'{kind}' is null" + _near_miss(table, kind))
        marks.mark(lengths != width, Reason.WRONG_LENGTH)
    return col, lengths, packed


def _packed_lengths(table: pa.Table | pa.RecordBatch, marks: RowMarks, kind: str, width: int, col: pa.Array,
                    packed: np.dtype) -> np.ndarray:
    """Row lengths (m,) int64 of a fixed_size_binary vector column (-1: null, -2: not a whole number of values)."""
    m = table.num_rows
    bw = col.type.byte_width
    lengths = np.full(m, bw // packed.itemsize if bw % packed.itemsize == 0 else -2, dtype=np.int64)
    if col.null_count:
        lengths[null_mask(col)] = -1
        marks.mark(lengths == -1, Reason.MISSING_VECTOR, f"'{kind}' is null" + _near_miss(table, kind))
    if bw != width * packed.itemsize:
        marks.mark(lengths != -1, Reason.WRONG_LENGTH,
                   f"'{kind}' is fixed_size_binary({bw}): {bw / packed.itemsize:g} {packed.name} values per row, "
                   f"expected {width} ({width * packed.itemsize} bytes)")
    return lengths


def landmark_versions(table: pa.Table | pa.RecordBatch, marks: RowMarks, model_version: int,
                      accepted: set[int]) -> np.ndarray | None:
    """The landmark version of each row (m,) int64 (null: ``model_version``), or None without the column."""
    lv = column(table, INPUT_LANDMARK_VERSION)
    if lv is None or pa.types.is_null(lv.type):
        return None
    if not pa.types.is_integer(lv.type):
        marks.mark(np.ones(table.num_rows, dtype=bool), Reason.UNKNOWN_LANDMARK_VERSION,
                   f"landmark_version has type {lv.type}, expected int64")
        return None
    versions: np.ndarray = to_numpy(lv.cast(pa.int64()).fill_null(scalar(model_version, pa.int64())))
    marks.mark(~np.isin(versions, list(accepted)), Reason.UNKNOWN_LANDMARK_VERSION)
    return versions


def batch_blocks(found: BlockRows | None, index: np.ndarray) -> Blocks | None:
    """The blocks of the kept rows, their rows counted among the kept (``index``: kept rows of the batch)."""
    if found is None or not found.sizes.size:
        return None
    first = np.concatenate([[0], np.cumsum(found.sizes)[:-1]])
    members = np.arange(int(found.sizes.sum())) + np.repeat(found.starts - first, found.sizes)
    return Blocks(rows=np.searchsorted(index, members), sizes=found.sizes, cross=found.cross)


def named_orders(table: pa.Table | pa.RecordBatch, kind: str, code: np.ndarray, mark: Any,
                 versions: np.ndarray | None, model_version: int,
                 landmark_ids: Mapping[int, np.ndarray] | None) -> tuple[np.ndarray, dict[int, np.ndarray | None]]:
    """(group of each row, its permutation into model order) for rows naming their order; marks the refused.

    A group is one (named order, model version) pair, checked once; -1: the
    row names no order. Rows already refused are left as they are.
    """
    m = table.num_rows
    gid = np.full(m, -1, dtype=np.int64)
    perms: dict[int, np.ndarray | None] = {}
    orders = row_orders(table, kind)
    if orders.bad.any():
        mark(orders.bad, Reason.LANDMARK_MISMATCH, None, orders.details)
    named = (orders.group >= 0) & (code == 0)
    if not named.any():
        return gid, perms
    rows = np.flatnonzero(named)
    if versions is None:  # the usual case: one version, often one order
        keys, inv = np.unique(orders.group[rows], return_inverse=True)
        pairs = [(int(k), model_version) for k in keys.tolist()]
    else:
        stacked, inv = np.unique(np.stack([orders.group[rows], versions[rows]], axis=1), axis=0, return_inverse=True)
        pairs = [(int(g), int(v)) for g, v in stacked.tolist()]
    inv = inv.ravel()
    for j, (g, v) in enumerate(pairs):
        ids = None if landmark_ids is None else landmark_ids.get(int(v))
        problem: str | None
        if kind in (INPUT_FEATURES, INPUT_OBJECT):
            perm, problem = None, (f"'{INPUT_LANDMARKS}' names the order of '{INPUT_DISSIMILARITIES}'; these rows "
                                   f"carry '{kind}'")
        elif ids is None:
            perm, problem = None, f"the landmark ids of model version {v} are not known here"
        else:
            perm, problem = permutation(orders.orders[g], np.asarray(ids))
        members = rows[inv == j]
        if problem is not None:
            sel = np.zeros(m, dtype=bool)
            sel[members] = True
            mark(sel, Reason.LANDMARK_MISMATCH, None, dict.fromkeys(members.tolist(), problem))
        else:
            gid[members] = j
            perms[j] = perm
    return gid, perms
