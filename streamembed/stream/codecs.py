"""Arrow <-> numpy codecs for input batches, results and dead letters.

Decoding is vectorised over the whole batch: validity is established on
whole columns (null slots, list lengths from offsets, versions, named
landmark orders: ``stream.landmark_order``, one gather per distinct order) and
the happy path is ``list column -> .flatten() -> to_numpy`` (zero-copy) ->
``reshape(m, n)``. The fast layout (:func:`packed_column`): the vector
column as ``fixed_size_binary(n * itemsize)``, each row the little-endian
float32 (or, with field metadata ``streamembed.dtype = float64``, float64)
values; it is viewed as ``(m, n)`` zero-copy and validated the same way
(null rows, width). Python loops run only over *rejected* rows, to write their
reasons. The float dtype of the input is kept (float32 stays float32).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamembed.core.options import MAX_BLOCK_ROWS
from streamembed.stream.arrow_build import booleans, numeric, scalar, strings, to_numpy
from streamembed.stream.blocks import BlockRows, Blocks, find_blocks
from streamembed.stream.columns import (column, is_list, list_lengths, null_mask, numeric_values_type, single_array,
                                        to_matrix)
from streamembed.stream.landmark_order import apply_orders, permutation, row_orders
from streamembed.stream.origin import NO_ORIGIN, RowOrigin
from streamembed.stream.records import (
    INPUT_BLOCK,
    INPUT_CROSS,
    INPUT_DISSIMILARITIES,
    INPUT_EVENT_TIME,
    INPUT_FEATURES,
    INPUT_ID,
    INPUT_LANDMARK_VERSION,
    INPUT_LANDMARKS,
    TIMESTAMP_TYPE,
    Reason,
    dead_letter_schema,
)
from streamembed.stream.output import DEFAULT_OUTPUT_VERSION, encode_output, flag_lists

__all__ = [
    "DeadRecord",
    "DecodedBatch",
    "decode_batch",
    "encode_result",
    "encode_dead_letters",
    "flags_to_lists",
    "row_as_json",
    "list_column_to_matrix",
    "packed_column",
    "PACKED_DTYPE_KEY",
    "split_valid",
    "writable_text",
]

#: Reason codes as small integers while a batch is validated (0 = row ok).
_CODES: tuple[str, ...] = (
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
)
_CODE = {name: i for i, name in enumerate(_CODES) if name}


@dataclass
class DeadRecord:
    """One refused record: what it was, where it came from and why it failed.

    ``record`` is the row as JSON text when it was decoded into columns,
    ``raw`` the original bytes when it was not (e.g. a non-UTF-8 line).
    ``row`` is the 0-based row (line) index within ``file``.
    """

    reason: str
    detail: str | None = None
    id: str | None = None
    file: str | None = None
    row: int | None = None
    record: str | None = None
    raw: bytes | None = None

    def __post_init__(self) -> None:
        # a dead letter must be writable whatever it holds: a lone surrogate (valid JSON "\ud800") cannot
        # be encoded as UTF-8, so text fields keep it as an escape
        self.detail, self.id, self.file, self.record = (
            writable_text(self.detail), writable_text(self.id), writable_text(self.file), writable_text(self.record))


def writable_text(s: str | None) -> str | None:
    """``s`` itself when it encodes as UTF-8, else with the characters that do not as backslash escapes."""
    if s is None or not isinstance(s, str):
        return s
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass
class DecodedBatch:
    """A validated batch, ready for the estimator.

    ``matrix`` is (m, w) for the m accepted rows: dissimilarities (w = n
    landmarks) when ``kind == "dissimilarities"``, feature vectors (w = p)
    when ``kind == "features"``. ``blocks`` says which accepted rows form blocks
    (``stream.blocks.Blocks``), None when the batch has none.
    ``ids``/``event_time`` are Arrow arrays aligned with ``matrix``;
    ``index`` (m,) gives each accepted row's index in the input batch.
    """

    ids: pa.Array
    matrix: np.ndarray
    kind: str
    blocks: Blocks | None
    event_time: pa.Array
    index: np.ndarray
    dead: list[DeadRecord] = field(default_factory=list)
    #: landmark version of each accepted row, or None when every row follows the current model
    versions: np.ndarray | None = None


def row_as_json(table: pa.Table | pa.RecordBatch, i: int) -> str:
    """Row ``i`` of ``table`` as JSON text (non-finite floats as NaN/Infinity; never raises)."""
    try:
        row = table.slice(i, 1).to_pylist()[0]
        if len(row) == table.num_columns:
            return json.dumps(row, default=str, allow_nan=True)
        # duplicate column names: keep every column, as [name, value] pairs
        return json.dumps([[n, table.column(k)[i].as_py()] for k, n in enumerate(table.schema.names)],
                          default=str, allow_nan=True)
    except Exception as exc:  # noqa: BLE001 - a dead letter must still be written
        return json.dumps({"unprintable_row": f"{type(exc).__name__}: {exc}"})


_KNOWN = (INPUT_ID, INPUT_DISSIMILARITIES, INPUT_FEATURES, INPUT_LANDMARK_VERSION, INPUT_EVENT_TIME, INPUT_CROSS,
          INPUT_BLOCK, INPUT_LANDMARKS)


def _duplicated(table: pa.Table | pa.RecordBatch) -> str | None:
    names = table.schema.names
    for name in _KNOWN:
        k = names.count(name)
        if k > 1:
            return f"column {name!r} appears {k} times in the input schema"
    return None


def _valid_utf8(table: pa.Table | pa.RecordBatch) -> tuple[pa.Table | pa.RecordBatch, np.ndarray]:
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


#: Field metadata key naming the element type of a fixed_size_binary vector column (the fast layout).
PACKED_DTYPE_KEY = b"streamembed.dtype"
_PACKED: dict[bytes, np.dtype[Any]] = {b"float32": np.dtype("<f4"), b"float64": np.dtype("<f8")}


def _packed_dtype(field: pa.Field) -> tuple[np.dtype, None] | tuple[None, str]:
    """(element dtype, None) of a fixed_size_binary vector column, or (None, problem)."""
    name = (field.metadata or {}).get(PACKED_DTYPE_KEY, b"float32")
    dt = _PACKED.get(name)
    if dt is None:
        return None, (f"'{field.name}' is fixed_size_binary with {PACKED_DTYPE_KEY.decode()} = "
                      f"{name.decode('utf-8', 'replace')!r}, expected float32 or float64")
    return dt, None


def _packed_matrix(col: pa.Array, width: int, dtype: np.dtype) -> np.ndarray:
    """(m, width) zero-copy view of a fixed_size_binary column without nulls (little-endian rows)."""
    data = col.buffers()[1]
    m = len(col)
    if data is None or m == 0:
        return np.empty((0, width), dtype=dtype.newbyteorder("="))
    arr = np.frombuffer(data, dtype=dtype, count=m * width, offset=col.offset * col.type.byte_width)
    return arr.reshape(m, width)


def packed_column(matrix: np.ndarray) -> tuple[pa.Array, pa.Field]:
    """The fast input layout of an (m, n) float32/float64 matrix: a ``fixed_size_binary(n * itemsize)`` column.

    Returns the column (zero-copy over a C-contiguous little-endian matrix)
    and its field ``dissimilarities`` carrying the element type in the field
    metadata (``streamembed.dtype``); Parquet decodes such a column several
    times faster than a list column (docs/throughput.md).
    """
    a = np.asarray(matrix)
    if a.ndim != 2 or a.dtype not in (np.float32, np.float64):
        raise ValueError(f"expected an (m, n) float32 or float64 matrix, got {a.dtype} of shape {a.shape}")
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
    m, n = a.shape
    col = pa.FixedSizeBinaryArray.from_buffers(pa.binary(n * a.itemsize), m, [None, pa.py_buffer(a)])
    field = pa.field(INPUT_DISSIMILARITIES, col.type, nullable=False,
                     metadata={PACKED_DTYPE_KEY: str(a.dtype.newbyteorder("=").name).encode()})
    return col, field


def list_column_to_matrix(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """(N, w) matrix of a list column whose rows are all non-null and of one length w.

    Raises ValueError otherwise (for whole-file inputs such as ``streamembed fit``).
    """
    arr = single_array(col)
    if not is_list(arr.type) or not numeric_values_type(arr.type):
        raise ValueError(f"expected a list of numbers, got {arr.type}")
    lengths = list_lengths(arr)
    if len(arr) == 0 or arr.null_count or (lengths != lengths[0]).any():
        raise ValueError("every row must be a non-null list of the same length")
    return to_matrix(arr, int(lengths[0]))


_ZONED = r"(Z|z|[+-]\d\d:?\d\d)$"


def _parse_times(col: pa.Array) -> pa.Array:
    """ISO 8601 strings -> timestamps; a string without a zone is UTC (vectorised: append "Z")."""
    zoned = pc.match_substring_regex(col, _ZONED)
    return pc.cast(pc.if_else(zoned, col, pc.binary_join_element_wise(col, pa.scalar("Z"), "")), TIMESTAMP_TYPE)


def _event_times(table: pa.Table | pa.RecordBatch, m: int) -> tuple[pa.Array, np.ndarray, dict[int, str]]:
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


def _ids(table: pa.Table | pa.RecordBatch, m: int) -> tuple[pa.Array, np.ndarray, str | None]:
    """(ids as string array, bad mask, column-level problem: a non-string id column)."""
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
    if m:
        bad |= to_numpy(pc.binary_length(col).fill_null(scalar(0, pa.int32()))) == 0
    return col, bad, None


def _near_miss(table: pa.Table | pa.RecordBatch, name: str) -> str:
    """' (the input has a column 'x': did you mean 'name'?)' for a misspelt column, else ''."""
    others = [n for n in table.schema.names if n not in _KNOWN]
    near = difflib.get_close_matches(name, others, n=1, cutoff=0.6)
    return f" (the input has a column {near[0]!r}: did you mean {name!r}?)" if near else ""


def decode_batch(
    table: pa.Table | pa.RecordBatch,
    *,
    n_landmarks: int,
    n_features: int | None = None,
    model_version: int = 1,
    accepted_versions: Sequence[int] | None = None,
    origin: RowOrigin = NO_ORIGIN,
    max_block_rows: int = MAX_BLOCK_ROWS,
    landmark_ids: Mapping[int, np.ndarray] | None = None,
) -> DecodedBatch:
    """Validate and decode one input batch; every problem is a row's own (a dead letter), never an exception.

    Parameters
    ----------
    table : the batch (any of the input record formats).
    n_landmarks : n, the required length of ``dissimilarities`` rows.
    n_features : p for a feature-mode model (``features`` accepted), else None.
    model_version : the model version rows without ``landmark_version`` follow.
    accepted_versions : landmark versions accepted (default: ``model_version`` only).
    origin : provenance for dead letters (:class:`~streamembed.stream.origin.RowOrigin`).
    max_block_rows : largest block accepted (rows).
    landmark_ids : the landmark ids (in model order) of each accepted model
        version: rows that name their landmark order (``stream.landmark_order``)
        are checked against them and gathered into model order.
    """
    m = table.num_rows
    accepted = set(accepted_versions) if accepted_versions is not None else {model_version}
    marks = _Marks(m)
    all_rows = np.ones(m, dtype=bool)
    mark = marks.mark

    table, bad_text = _valid_utf8(table)
    mark(bad_text, Reason.UNDECODABLE, "a string column holds bytes that are not valid UTF-8")
    dup = _duplicated(table)
    if dup is not None:
        mark(all_rows, Reason.UNDECODABLE, dup)
        empty = np.empty((0, n_landmarks), dtype=np.float64)
        dead = _dead_records(table, marks.code, marks.column_detail, marks.row_detail, np.full(m, -1), n_landmarks,
                             INPUT_DISSIMILARITIES, None, pa.nulls(m, pa.string()), origin)
        return DecodedBatch(ids=strings(()), matrix=empty, kind=INPUT_DISSIMILARITIES, blocks=None,
                            event_time=pa.nulls(0, TIMESTAMP_TYPE), index=np.empty(0, np.int64), dead=dead)

    ids, bad_id, id_problem = _ids(table, m)
    if id_problem is not None:
        mark(bad_id, Reason.BAD_ID, id_problem)
    mark(bad_id, Reason.MISSING_ID, "no id column" if column(table, INPUT_ID) is None else None)

    kind, width, col = _vector_column(table, marks, n_landmarks, n_features)
    col, lengths, packed = _vector_lengths(table, marks, kind, width, col)
    versions = _landmark_versions(table, marks, model_version, accepted)

    event_time, bad_time, time_details = _event_times(table, m)
    mark(bad_time, Reason.UNDECODABLE, time_details.get(-1), time_details)

    # rows that name their landmark order: checked against the ids of the version they follow
    order_group, perms = _named_orders(table, kind, marks.code, mark, versions, model_version, landmark_ids)

    # blocks: rows placed jointly from their mutual dissimilarities (stream.blocks)
    row_no = origin.numbers(m)
    found = find_blocks(column(table, INPUT_CROSS), column(table, INPUT_BLOCK), marks.code, _CODES, row_no,
                        max_block_rows)
    if found is not None:
        mark(found.bad, Reason.BAD_BLOCK, None, found.details)

    # vectors of the rows still ok: zero-copy when every row is ok
    ok = marks.code == 0
    matrix: np.ndarray | None = None
    if col is not None and ok.any():
        sub = col if ok.all() else col.filter(booleans(ok))
        matrix = _packed_matrix(sub, width, packed) if packed is not None else to_matrix(sub, width)
        matrix = apply_orders(matrix, order_group[ok], perms)
        # NaN/inf/negative values are left to the core (errors="mask"): its
        # fused kernel finds them in the same pass that embeds the batch
    dead = _dead_records(table, marks.code, marks.column_detail, marks.row_detail, lengths, width, kind, versions,
                         ids, origin)
    if matrix is None:
        ok[:] = False
        matrix = np.empty((0, width), dtype=np.float64)
    if ok.all():
        out_ids, out_et = ids, event_time
    else:
        mask = booleans(ok)
        out_ids, out_et = ids.filter(mask), event_time.filter(mask)
    row_versions = None
    if versions is not None and ok.any() and (versions[ok] != model_version).any():
        row_versions = versions[ok]
    index = np.flatnonzero(ok)
    blocks = _batch_blocks(found, index) if ok.any() else None
    return DecodedBatch(ids=out_ids, matrix=matrix, kind=kind, blocks=blocks,
                        event_time=out_et, index=index, dead=dead, versions=row_versions)


class _Marks:
    """The reason code of each row of a batch (0: ok) and the texts that explain them; the first reason wins."""

    def __init__(self, m: int) -> None:
        self.code = np.zeros(m, dtype=np.uint8)
        self.column_detail: dict[int, str] = {}
        self.row_detail: dict[int, str] = {}

    def mark(self, mask: np.ndarray, reason: str, detail: str | None = None,
             per_row: dict[int, str] | None = None) -> None:
        """Give the rows of ``mask`` (bool, (m,)) not yet refused ``reason``; ``detail`` for the column, per row."""
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


def _vector_column(table: pa.Table | pa.RecordBatch, marks: _Marks, n_landmarks: int,
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


def _vector_lengths(table: pa.Table | pa.RecordBatch, marks: _Marks, kind: str, width: int,
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
        packed, problem = _packed_dtype(table.schema.field(kind))
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
        marks.mark(lengths < 0, Reason.MISSING_VECTOR, f"'{kind}' is null" + _near_miss(table, kind))
        marks.mark(lengths != width, Reason.WRONG_LENGTH)
    return col, lengths, packed


def _packed_lengths(table: pa.Table | pa.RecordBatch, marks: _Marks, kind: str, width: int, col: pa.Array,
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


def _landmark_versions(table: pa.Table | pa.RecordBatch, marks: _Marks, model_version: int,
                       accepted: set[int]) -> np.ndarray | None:
    """The landmark version of each row (m,) int64 (null: ``model_version``), or None without the column."""
    lv = column(table, INPUT_LANDMARK_VERSION)
    if lv is None or pa.types.is_null(lv.type):
        return None
    if not pa.types.is_integer(lv.type):
        marks.mark(np.ones(table.num_rows, dtype=bool), Reason.UNKNOWN_LANDMARK_VERSION,
                   f"landmark_version has type {lv.type}, expected int64")
        return None
    versions: np.ndarray = to_numpy(lv.cast(pa.int64()).fill_null(model_version))
    marks.mark(~np.isin(versions, list(accepted)), Reason.UNKNOWN_LANDMARK_VERSION)
    return versions


def _batch_blocks(found: BlockRows | None, index: np.ndarray) -> Blocks | None:
    """The blocks of the kept rows, their rows counted among the kept (``index``: kept rows of the batch)."""
    if found is None or not found.sizes.size:
        return None
    first = np.concatenate([[0], np.cumsum(found.sizes)[:-1]])
    members = np.arange(int(found.sizes.sum())) + np.repeat(found.starts - first, found.sizes)
    return Blocks(rows=np.searchsorted(index, members), sizes=found.sizes, cross=found.cross)


def _named_orders(table: pa.Table | pa.RecordBatch, kind: str, code: np.ndarray, mark: Any,
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
        if kind == INPUT_FEATURES:
            perm, problem = None, (f"'{INPUT_LANDMARKS}' names the order of '{INPUT_DISSIMILARITIES}'; these rows "
                                   f"carry '{INPUT_FEATURES}'")
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


def _dead_records(
    table: pa.Table | pa.RecordBatch,
    code: np.ndarray,
    column_detail: dict[int, str],
    row_detail: dict[int, str],
    lengths: np.ndarray,
    width: int,
    kind: str,
    versions: np.ndarray | None,
    ids: pa.Array,
    origin: RowOrigin,
) -> list[DeadRecord]:
    """Dead letters for the rejected rows (the only per-row loop: bad rows only)."""
    bad = np.flatnonzero(code)
    if bad.size == 0:
        return []
    id_list = ids.take(numeric(bad)).to_pylist()
    out: list[DeadRecord] = []
    for j, i in enumerate(bad.tolist()):
        c = int(code[i])
        reason = _CODES[c]
        detail = row_detail.get(i, column_detail.get(c))
        if detail is None:
            if reason == Reason.WRONG_LENGTH:
                detail = f"'{kind}' has {lengths[i]} values, expected {width}"
            elif reason == Reason.UNKNOWN_LANDMARK_VERSION and versions is not None:
                detail = f"landmark_version {int(versions[i])} is not served"
            elif reason == Reason.MISSING_ID:
                detail = "id is null or empty"
        out.append(DeadRecord(reason=reason, detail=detail, id=id_list[j], file=origin.file,
                              row=origin.row(i), record=row_as_json(table, i)))
    return out


# --------------------------------------------------------------------------- encode


def flags_to_lists(flags: np.ndarray, bit_names: Sequence[str]) -> pa.ListArray:
    """uint32 bitmasks (m,) -> list<string> of flag names (``bit_names[b]`` names bit b), as version 1 writes them."""
    return flag_lists(flags, bit_names)


def encode_result(
    ids: pa.Array,
    result: Any,
    *,
    model_version: int,
    event_time: pa.Array,
    processed_at_us: int,
    bit_names: Sequence[str],
    version: int = DEFAULT_OUTPUT_VERSION,
    dtype: Any = np.float64,
    lineage: str | None = None,
) -> pa.RecordBatch:
    """An :class:`EmbeddingResult` for the accepted rows -> output RecordBatch in output ``version``
    (:mod:`streamembed.stream.output`; ``dtype`` and ``lineage`` matter for version 2).

    Rows the core marked invalid (``result.valid`` False) must already have
    been removed by the caller (see :func:`split_valid`). ``processed_at_us``
    is microseconds since the epoch (UTC), shared by the batch.
    """
    return encode_output(ids, result, model_version=model_version, event_time=event_time,
                         processed_at_us=processed_at_us, version=version, dtype=dtype, lineage=lineage,
                         bit_names=bit_names)


def encode_dead_letters(
    dead: Sequence[DeadRecord], *, source: str, model_version: int | None, failed_at_us: int
) -> pa.Table:
    """Dead records -> a table in :func:`dead_letter_schema`."""
    schema = dead_letter_schema()
    cols: dict[str, list[Any]] = {name: [] for name in schema.names}
    for r in dead:
        cols["id"].append(r.id)
        cols["reason"].append(r.reason)
        cols["detail"].append(r.detail)
        cols["source"].append(source)
        cols["file"].append(r.file)
        cols["row"].append(r.row)
        cols["record"].append(r.record)
        cols["raw"].append(r.raw)
        cols["model_version"].append(model_version)
    n = len(dead)
    arrays = [pa.array(cols[name], type=schema.field(name).type) for name in schema.names[:-1]]
    arrays.append(pa.array(np.full(n, failed_at_us, dtype="datetime64[us]")).cast(TIMESTAMP_TYPE))
    return pa.Table.from_arrays(arrays, schema=schema)


def split_valid(valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices of valid rows, indices of invalid rows) of a core result."""
    valid = np.asarray(valid, dtype=bool)
    return np.flatnonzero(valid), np.flatnonzero(~valid)
