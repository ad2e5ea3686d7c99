"""Arrow <-> numpy codecs for input batches, results and dead letters.

Decoding is vectorised over the whole batch: validity is established on
whole columns (null slots, list lengths from offsets, versions) and
the happy path is ``list column -> .flatten() -> to_numpy`` (zero-copy) ->
``reshape(m, n)``. Python loops run only over *rejected* rows, to write their
reasons. The float dtype of the input is kept (float32 stays float32).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamembed.stream.records import (
    INPUT_CROSS,
    INPUT_DISSIMILARITIES,
    INPUT_EVENT_TIME,
    INPUT_FEATURES,
    INPUT_ID,
    INPUT_LANDMARK_VERSION,
    TIMESTAMP_TYPE,
    REASONS,
    Reason,
    dead_letter_schema,
    output_schema,
)

__all__ = [
    "DeadRecord",
    "DecodedBatch",
    "decode_batch",
    "encode_result",
    "encode_dead_letters",
    "flags_to_lists",
    "row_as_json",
    "list_column_to_matrix",
    "split_valid",
]

#: Reason codes as small integers while a batch is validated (0 = row ok).
_CODES: tuple[str, ...] = (
    "",
    Reason.MISSING_ID,
    Reason.WRONG_LENGTH,
    Reason.NON_NUMERIC,
    Reason.UNDECODABLE,
    Reason.UNKNOWN_LANDMARK_VERSION,
    Reason.BAD_BLOCK,
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


@dataclass
class DecodedBatch:
    """A validated batch, ready for the estimator.

    ``matrix`` is (m, w) for the m accepted rows: dissimilarities (w = n
    landmarks) when ``kind == "dissimilarities"``, feature vectors (w = p)
    when ``kind == "features"``. ``cross`` is the (m, m) block matrix or None.
    ``ids``/``event_time`` are Arrow arrays aligned with ``matrix``;
    ``index`` (m,) gives each accepted row's index in the input batch.
    """

    ids: pa.Array
    matrix: np.ndarray
    kind: str
    cross: np.ndarray | None
    event_time: pa.Array
    index: np.ndarray
    dead: list[DeadRecord] = field(default_factory=list)
    n_rows: int = 0
    #: landmark version of each accepted row, or None when every row follows the current model
    versions: np.ndarray | None = None


def row_as_json(table: pa.Table | pa.RecordBatch, i: int) -> str:
    """Row ``i`` of ``table`` as JSON text (non-finite floats as NaN/Infinity)."""
    row = table.slice(i, 1).to_pylist()[0]
    return json.dumps(row, default=str, allow_nan=True)


def _single_array(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return col.chunk(0)
        if col.num_chunks == 0:
            return pa.array([], type=col.type)
        return col.combine_chunks()
    return col


def _column(table: pa.Table | pa.RecordBatch, name: str) -> pa.Array | None:
    if name not in table.schema.names:
        return None
    return _single_array(table.column(name))


def _null_mask(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.zeros(len(arr), dtype=bool)
    return arr.is_null().to_numpy(zero_copy_only=False)


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _numeric_values_type(t: pa.DataType) -> bool:
    v = t.value_type
    return pa.types.is_floating(v) or pa.types.is_integer(v) or pa.types.is_null(v)


def _list_lengths(col: pa.Array) -> np.ndarray:
    """Length of every list slot (-1 for a null slot), int64, vectorised."""
    if pa.types.is_fixed_size_list(col.type):
        out = np.full(len(col), col.type.list_size, dtype=np.int64)
    else:
        out = pc.list_value_length(col).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    if col.null_count:
        out[_null_mask(col)] = -1
    return out


def _to_matrix(col: pa.Array, width: int) -> np.ndarray:
    """(m, width) view of a list column with no null slots and equal lengths.

    Zero-copy for float32/float64 values without null elements; integer or
    float16 values are converted to float64; null elements become NaN.
    """
    values = col.flatten()
    vt = values.type
    if pa.types.is_integer(vt) or pa.types.is_float16(vt) or pa.types.is_null(vt):
        values = values.cast(pa.float64())
    arr = values.to_numpy(zero_copy_only=False)
    return arr.reshape(len(col), width)


def list_column_to_matrix(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """(N, w) matrix of a list column whose rows are all non-null and of one length w.

    Raises ValueError otherwise (for whole-file inputs such as ``streamembed fit``).
    """
    arr = _single_array(col)
    if not _is_list(arr.type) or not _numeric_values_type(arr.type):
        raise ValueError(f"expected a list of numbers, got {arr.type}")
    lengths = _list_lengths(arr)
    if len(arr) == 0 or arr.null_count or (lengths != lengths[0]).any():
        raise ValueError("every row must be a non-null list of the same length")
    return _to_matrix(arr, int(lengths[0]))


def _event_times(table: pa.Table | pa.RecordBatch, m: int) -> tuple[pa.Array, str | None]:
    col = _column(table, INPUT_EVENT_TIME)
    if col is None:
        return pa.nulls(m, type=TIMESTAMP_TYPE), None
    try:
        t = col.type
        if pa.types.is_timestamp(t):
            if t.tz is None:
                col = col.cast(pa.timestamp(t.unit)).cast(TIMESTAMP_TYPE)
            return col.cast(TIMESTAMP_TYPE), None
        if pa.types.is_null(t):
            return pa.nulls(m, type=TIMESTAMP_TYPE), None
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            # ISO 8601; a string without a zone is UTC (vectorised: append "Z")
            zoned = pc.match_substring_regex(col, r"(Z|z|[+-]\d\d:?\d\d)$")
            col = pc.if_else(zoned, col, pc.binary_join_element_wise(col, pa.scalar("Z"), ""))
            return pc.cast(col, TIMESTAMP_TYPE), None
        return pa.nulls(m, type=TIMESTAMP_TYPE), f"event_time has type {t}, expected a timestamp"
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        return pa.nulls(m, type=TIMESTAMP_TYPE), f"event_time could not be read: {exc}"


def _ids(table: pa.Table | pa.RecordBatch, m: int) -> tuple[pa.Array, np.ndarray, str | None]:
    """(ids as string array, bad mask, column-level problem)."""
    col = _column(table, INPUT_ID)
    if col is None:
        return pa.nulls(m, type=pa.string()), np.ones(m, dtype=bool), "no id column"
    t = col.type
    if pa.types.is_dictionary(t) and pa.types.is_string(t.value_type):
        col = col.cast(pa.string())
        t = col.type
    if pa.types.is_large_string(t):
        col = col.cast(pa.string())
    elif not pa.types.is_string(t):
        return pa.nulls(m, type=pa.string()), np.ones(m, dtype=bool), f"id has type {t}, expected string"
    bad = _null_mask(col)
    if m:
        bad |= pc.equal(pc.binary_length(col), 0).fill_null(True).to_numpy(zero_copy_only=False)
    return col, bad, None


def decode_batch(
    table: pa.Table | pa.RecordBatch,
    *,
    n_landmarks: int,
    n_features: int | None = None,
    model_version: int = 1,
    accepted_versions: Sequence[int] | None = None,
    file: str | None = None,
    rows: np.ndarray | None = None,
    row_base: int = 0,
    max_block_rows: int = 4096,
) -> DecodedBatch:
    """Validate and decode one input batch.

    Parameters
    ----------
    table : the batch (any of the input record formats).
    n_landmarks : n, the required length of ``dissimilarities`` rows.
    n_features : p for a feature-mode model (``features`` accepted), else None.
    model_version : the model version rows without ``landmark_version`` follow.
    accepted_versions : landmark versions accepted (default: ``model_version`` only).
    file, rows, row_base : provenance for dead letters; row i of the batch is
        row ``rows[i]`` (or ``row_base + i``) of ``file``.
    max_block_rows : largest block (batch with ``cross``) accepted.
    """
    m = table.num_rows
    accepted = set(accepted_versions) if accepted_versions is not None else {model_version}
    code = np.zeros(m, dtype=np.uint8)
    column_detail: dict[int, str] = {}

    def mark(mask: np.ndarray, reason: str, detail: str | None = None) -> None:
        c = _CODE[reason]
        sel = mask & (code == 0)
        code[sel] = c
        if detail is not None and c not in column_detail:
            column_detail[c] = detail

    ids, bad_id, id_problem = _ids(table, m)
    mark(bad_id, Reason.MISSING_ID, id_problem)

    # which vector column, and its required width
    kind = INPUT_DISSIMILARITIES
    width = n_landmarks
    col = _column(table, INPUT_DISSIMILARITIES)
    if col is not None and pa.types.is_null(col.type):
        col = None  # an all-null column from JSON lines that did not use it
    if col is None:
        fcol = _column(table, INPUT_FEATURES)
        if fcol is not None and not pa.types.is_null(fcol.type):
            if n_features is None:
                mark(np.ones(m, bool), Reason.UNDECODABLE,
                     "rows carry 'features' but the model was not fitted on feature vectors")
            else:
                kind, width, col = INPUT_FEATURES, n_features, fcol
    all_rows = np.ones(m, dtype=bool)
    lengths = np.full(m, -1, dtype=np.int64)
    if col is None:
        mark(all_rows, Reason.WRONG_LENGTH, f"no '{INPUT_DISSIMILARITIES}' column")
    elif not _is_list(col.type):
        mark(all_rows, Reason.UNDECODABLE, f"'{kind}' has type {col.type}, expected a list of floats")
        col = None
    elif not _numeric_values_type(col.type):
        mark(all_rows, Reason.NON_NUMERIC, f"'{kind}' holds {col.type.value_type}, expected float32/float64")
        col = None
    else:
        lengths = _list_lengths(col)
        mark(lengths != width, Reason.WRONG_LENGTH)

    # landmark version
    lv = _column(table, INPUT_LANDMARK_VERSION)
    versions: np.ndarray | None = None
    if lv is not None and not pa.types.is_null(lv.type):
        if not pa.types.is_integer(lv.type):
            mark(all_rows, Reason.UNKNOWN_LANDMARK_VERSION, f"landmark_version has type {lv.type}, expected int64")
        else:
            versions = lv.cast(pa.int64()).fill_null(model_version).to_numpy(zero_copy_only=False)
            mark(~np.isin(versions, list(accepted)), Reason.UNKNOWN_LANDMARK_VERSION)

    event_time, et_problem = _event_times(table, m)
    if et_problem is not None:
        mark(all_rows, Reason.UNDECODABLE, et_problem)

    # vectors of the rows still ok: zero-copy when every row is ok so far
    matrix: np.ndarray | None = None
    keep = code == 0
    if col is not None and keep.any():
        sub = col if keep.all() else col.filter(pa.array(keep))
        matrix = _to_matrix(sub, width)
        # NaN/inf/negative values are left to the core (errors="mask"): its
        # fused kernel finds them in the same pass that embeds the batch

    # a block: the batch carries its k x k mutual dissimilarities
    cross: np.ndarray | None = None
    ccol = _column(table, INPUT_CROSS)
    if ccol is not None and not pa.types.is_null(ccol.type) and m:
        cross, block_problem = _decode_cross(ccol, m, max_block_rows)
        if block_problem is None and (code != 0).any():
            first = int(np.flatnonzero(code != 0)[0])
            block_problem = f"block member at row {_row_no(rows, row_base, first)} failed ({_CODES[code[first]]})"
        if block_problem is not None:
            cross = None
            mark(all_rows, Reason.BAD_BLOCK, block_problem)

    ok = code == 0
    dead = _dead_records(table, code, column_detail, lengths, width, kind, versions, ids, file, rows, row_base)
    if matrix is None or not ok.any():
        # nothing to embed (a failed block marks rows after the matrix was cut)
        ok[:] = False
        matrix = np.empty((0, width), dtype=np.float64 if matrix is None else matrix.dtype)
    if ok.all():
        out_ids, out_et = ids, event_time
    else:
        mask = pa.array(ok)
        out_ids, out_et = ids.filter(mask), event_time.filter(mask)
    row_versions = None
    if versions is not None and ok.any() and (versions[ok] != model_version).any():
        row_versions = versions[ok]
    return DecodedBatch(ids=out_ids, matrix=matrix, kind=kind, cross=cross,
                        event_time=out_et, index=np.flatnonzero(ok), dead=dead, n_rows=m, versions=row_versions)


def _row_no(rows: np.ndarray | None, row_base: int, i: int) -> int:
    return int(rows[i]) if rows is not None else row_base + i


def _decode_cross(ccol: pa.Array, k: int, max_block_rows: int) -> tuple[np.ndarray | None, str | None]:
    """(C, None) for a valid k x k block matrix, else (None, problem)."""
    if k > max_block_rows:
        return None, f"block of {k} rows exceeds max_block_rows = {max_block_rows}"
    if not _is_list(ccol.type) or not _numeric_values_type(ccol.type):
        return None, f"cross has type {ccol.type}, expected a list of floats"
    if ccol.null_count:
        return None, "cross is null for some rows of the block"
    lengths = _list_lengths(ccol)
    if (lengths != k).any():
        return None, f"cross rows must have length k = {k} (rows in the block)"
    # finiteness, symmetry and the zero diagonal are checked by the core
    return _to_matrix(ccol, k), None


def _dead_records(
    table: pa.Table | pa.RecordBatch,
    code: np.ndarray,
    column_detail: dict[int, str],
    lengths: np.ndarray,
    width: int,
    kind: str,
    versions: np.ndarray | None,
    ids: pa.Array,
    file: str | None,
    rows: np.ndarray | None,
    row_base: int,
) -> list[DeadRecord]:
    """Dead letters for the rejected rows (the only per-row loop: bad rows only)."""
    bad = np.flatnonzero(code)
    if bad.size == 0:
        return []
    id_list = ids.take(pa.array(bad)).to_pylist()
    out: list[DeadRecord] = []
    for j, i in enumerate(bad.tolist()):
        c = int(code[i])
        reason = _CODES[c]
        detail = column_detail.get(c)
        if detail is None:
            if reason == Reason.WRONG_LENGTH:
                detail = (f"'{kind}' is null" if lengths[i] < 0
                          else f"'{kind}' has {lengths[i]} values, expected {width}")
            elif reason == Reason.UNKNOWN_LANDMARK_VERSION and versions is not None:
                detail = f"landmark_version {int(versions[i])} is not served"
            elif reason == Reason.MISSING_ID:
                detail = "id is null or empty"
        out.append(DeadRecord(reason=reason, detail=detail, id=id_list[j], file=file,
                              row=_row_no(rows, row_base, i), record=row_as_json(table, i)))
    return out


# --------------------------------------------------------------------------- encode


_FLAG_BITS = np.array([1 << b for b in range(32)], dtype=np.uint32)


def flags_to_lists(flags: np.ndarray, bit_names: Sequence[str]) -> pa.ListArray:
    """uint32 bitmasks (m,) -> list<string> of flag names, vectorised.

    ``bit_names[b]`` names bit b (32 entries). Names appear in bit order.
    """
    flags = np.asarray(flags, dtype=np.uint32)
    m = flags.shape[0]
    names = pa.array(list(bit_names), type=pa.string())
    if not flags.any():
        return pa.ListArray.from_arrays(pa.array(np.zeros(m + 1, np.int32)), pa.array([], pa.string()))
    bits = (flags[:, None] & _FLAG_BITS[None, :]) != 0  # (m, 32)
    offsets = np.zeros(m + 1, dtype=np.int32)
    np.cumsum(bits.sum(axis=1), out=offsets[1:])
    _, which = np.nonzero(bits)  # row-major: per row, bits in increasing order
    return pa.ListArray.from_arrays(pa.array(offsets), names.take(pa.array(which)))


def _nullable(x: np.ndarray) -> pa.Array:
    x = np.asarray(x, dtype=np.float64)
    nan = np.isnan(x)
    return pa.array(x, mask=nan) if nan.any() else pa.array(x)


def encode_result(
    ids: pa.Array,
    result: Any,
    *,
    model_version: int,
    event_time: pa.Array,
    processed_at_us: int,
    bit_names: Sequence[str],
) -> pa.RecordBatch:
    """An :class:`EmbeddingResult` for the accepted rows -> output RecordBatch.

    Rows the core marked invalid (``result.valid`` False) must already have
    been removed by the caller (see :func:`split_valid`). ``processed_at_us``
    is microseconds since the epoch (UTC), shared by the batch.
    """
    y = np.ascontiguousarray(result.y, dtype=np.float64)
    m, d = y.shape
    y_arr = pa.FixedSizeListArray.from_arrays(pa.array(y.reshape(-1)), d)
    processed = pa.array(np.full(m, processed_at_us, dtype="datetime64[us]")).cast(TIMESTAMP_TYPE)
    method = pa.DictionaryArray.from_arrays(pa.array(np.zeros(m, np.int32)),
                                            pa.array([str(result.method)])).cast(pa.string())
    cols = [
        ids,
        pa.array(np.full(m, model_version, dtype=np.int64)),
        method,
        y_arr,
        pa.array(np.asarray(result.beta, dtype=np.float64)),
        pa.array(np.asarray(result.unexplained, dtype=np.float64)),
        _nullable(result.k0),
        _nullable(result.t),
        flags_to_lists(result.flags, bit_names),
        event_time,
        processed,
    ]
    return pa.RecordBatch.from_arrays(cols, schema=output_schema(d))


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
