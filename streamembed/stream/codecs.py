"""Arrow <-> numpy codecs for input batches, results and dead letters.

Decoding is vectorised over the whole batch: validity is established on
whole columns (null slots, list lengths from offsets, versions, named
landmark orders: ``stream.landmark_order``, one gather per distinct order) and
the happy path is ``list column -> .flatten() -> to_numpy`` (zero-copy) ->
``reshape(m, n)``. The fast layout (:func:`~streamembed.stream.packed.packed_column`): the vector
column as ``fixed_size_binary(n * itemsize)``, each row the little-endian
float32 (or, with field metadata ``streamembed.dtype = float64``, float64)
values; it is viewed as ``(m, n)`` zero-copy and validated the same way
(null rows, width). Python loops run only over *rejected* rows, to write their
reasons. The float dtype of the input is kept (float32 stays float32).
The column checks are in ``stream.column_checks``, the packed layout in ``stream.packed``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from streamembed.core.options import MAX_BLOCK_ROWS
from streamembed.stream.arrow_build import (booleans, numeric, optional_ints, optional_texts, pylist, rows, strings,
                                            timestamps)
from streamembed.stream.blocks import Blocks, find_blocks
from streamembed.stream.column_checks import (REASON_CODES, RowMarks, batch_blocks, duplicated_column, event_times,
                                              id_column, landmark_versions, named_orders, null_invalid_utf8,
                                              vector_column, vector_lengths)
from streamembed.stream.columns import column, to_matrix
from streamembed.stream.landmark_order import apply_orders
from streamembed.stream.objects import ObjectSpec, carries_objects, object_rows
from streamembed.stream.unversioned import UnversionedRule, apply_unversioned_rule
from streamembed.stream.origin import NO_ORIGIN, RowOrigin
from streamembed.stream.packed import packed_matrix
from streamembed.stream.records import (
    INPUT_BLOCK,
    INPUT_CROSS,
    INPUT_DISSIMILARITIES,
    INPUT_ID,
    INPUT_OBJECT,
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
    "split_valid",
    "writable_text",
]


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
    when ``kind == "features"``, (m, 0) when ``kind == "object"`` (rows placed
    from their ``objects``, whose dissimilarities the embedder computes).
    ``objects`` (m,) are the accepted rows' objects (``stream.objects``) when
    they are placed from them or were asked for beside their dissimilarities.
    ``blocks`` says which accepted rows form blocks (``stream.blocks.Blocks``),
    None when the batch has none.
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
    #: the accepted rows' objects ((m,) object array, or (m, p) for a metric of vectors)
    objects: Any = None


def row_as_json(table: pa.Table | pa.RecordBatch, i: int) -> str:
    """Row ``i`` of ``table`` as JSON text (non-finite floats as NaN/Infinity; never raises)."""
    try:
        row = rows(table.slice(i, 1))[0]  # not to_pylist(): zoned timestamps would import pandas
        if len(row) == table.num_columns:
            return json.dumps(row, default=str, allow_nan=True)
        # duplicate column names: keep every column, as [name, value] pairs
        return json.dumps([[n, pylist(table.column(k).slice(i, 1))[0]] for k, n in enumerate(table.schema.names)],
                          default=str, allow_nan=True)
    except Exception as exc:  # a dead letter must still be written
        return json.dumps({"unprintable_row": f"{type(exc).__name__}: {exc}"})


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
    objects: ObjectSpec | None = None,
    keep_objects: bool = False,
    unversioned: UnversionedRule | None = None,
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
    objects : what the model's metric takes, when rows may carry an ``object``
        (``stream.objects``; None: an ``object`` column is refused unless the
        rows carry dissimilarities too).
    keep_objects : decode the objects of rows that carry dissimilarities too (the refit reservoir's).
    unversioned : after a refit, what a dissimilarity row that states no version and names no landmarks is
        read as (``stream.unversioned``); None: the current version.
    """
    m = table.num_rows
    accepted = set(accepted_versions) if accepted_versions is not None else {model_version}
    marks = RowMarks(m)
    all_rows = np.ones(m, dtype=bool)
    mark = marks.mark

    table, bad_text = null_invalid_utf8(table)
    mark(bad_text, Reason.UNDECODABLE, "a string column holds bytes that are not valid UTF-8")
    dup = duplicated_column(table)
    if dup is not None:
        mark(all_rows, Reason.UNDECODABLE, dup)
        empty = np.empty((0, n_landmarks), dtype=np.float64)
        dead = _dead_records(table, marks.code, marks.column_detail, marks.row_detail, np.full(m, -1), n_landmarks,
                             INPUT_DISSIMILARITIES, None, pa.nulls(m, pa.string()), origin)
        return DecodedBatch(ids=strings(()), matrix=empty, kind=INPUT_DISSIMILARITIES, blocks=None,
                            event_time=pa.nulls(0, TIMESTAMP_TYPE), index=np.empty(0, np.int64), dead=dead)

    ids, bad_id, id_problem = id_column(table, m)
    if id_problem is not None:
        mark(bad_id, Reason.BAD_ID, id_problem)
    mark(bad_id, Reason.MISSING_ID, "no id column" if column(table, INPUT_ID) is None else None)

    obj = _object_rows(table, marks, objects, n_features, keep_objects)
    if obj is not None and obj.placed:  # rows placed from their objects: no vector column
        kind, width, col, lengths, packed = INPUT_OBJECT, 0, None, np.full(m, -1, dtype=np.int64), None
    else:
        kind, width, col = vector_column(table, marks, n_landmarks, n_features)
        col, lengths, packed = vector_lengths(table, marks, kind, width, col)
    versions = landmark_versions(table, marks, model_version, accepted)
    if unversioned is not None and kind == INPUT_DISSIMILARITIES:
        versions = apply_unversioned_rule(table, mark, versions, unversioned, accepted, kind)

    event_time, bad_time, time_details = event_times(table, m)
    mark(bad_time, Reason.UNDECODABLE, time_details.get(-1), time_details)

    # rows that name their landmark order: checked against the ids of the version they follow
    order_group, perms = named_orders(table, kind, marks.code, mark, versions, model_version, landmark_ids)

    # blocks: rows placed jointly from their mutual dissimilarities (stream.blocks)
    row_no = origin.numbers(m)
    found = find_blocks(column(table, INPUT_CROSS), column(table, INPUT_BLOCK), marks.code, REASON_CODES, row_no,
                        max_block_rows)
    if found is not None:
        mark(found.bad, Reason.BAD_BLOCK, None, found.details)

    # vectors of the rows still ok: zero-copy when every row is ok
    ok = marks.code == 0
    matrix: np.ndarray | None = None
    if col is not None and ok.any():
        sub = col if ok.all() else col.filter(booleans(ok))
        matrix = packed_matrix(sub, width, packed) if packed is not None else to_matrix(sub, width)
        matrix = apply_orders(matrix, order_group[ok], perms)
        # NaN/inf/negative values are left to the core (errors="mask"): its
        # fused kernel finds them in the same pass that embeds the batch
    dead = _dead_records(table, marks.code, marks.column_detail, marks.row_detail, lengths, width, kind, versions,
                         ids, origin)
    if kind == INPUT_OBJECT and ok.any():
        matrix = np.empty((int(ok.sum()), 0), dtype=np.float64)
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
    blocks = batch_blocks(found, index) if ok.any() else None
    kept = None if obj is None or not ok.any() else obj.objects[ok]
    return DecodedBatch(ids=out_ids, matrix=matrix, kind=kind, blocks=blocks,
                        event_time=out_et, index=index, dead=dead, versions=row_versions, objects=kept)


def _object_rows(table: pa.Table | pa.RecordBatch, marks: RowMarks, spec: ObjectSpec | None, n_features: int | None,
                 keep: bool) -> Any:
    """The batch's objects (``stream.objects.ObjectRows``), their refused rows marked ``bad_object``; None when
    the batch carries none, or carries them beside dissimilarities that nobody asked to keep them for."""
    if not carries_objects(table):
        return None
    beside = INPUT_DISSIMILARITIES in table.schema.names
    if beside and not keep:
        return None
    if spec is None or not (beside or spec.placeable):
        if beside:
            return None
        marks.mark(np.ones(table.num_rows, dtype=bool), Reason.UNDECODABLE,
                   "rows carry 'object' but the model keeps no landmark objects and no metric: send their "
                   "'dissimilarities' to the landmarks (the producer kit computes them, docs/objects.md), or fit the "
                   "model from objects (`streamembed fit --objects`)")
        return None
    rows = object_rows(table, spec, n_features)
    if rows.problems and rows.placed:
        bad = np.zeros(table.num_rows, dtype=bool)
        bad[list(rows.problems)] = True
        marks.mark(bad, Reason.BAD_OBJECT, None, rows.problems)
    elif rows.problems and rows.objects.dtype == object:  # placed from their dissimilarities: only not kept
        rows.objects[list(rows.problems)] = None
    return rows


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
        reason = REASON_CODES[c]
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
    # built from buffers: pa.array of Python values imports pandas (0.25 CPU-s) at the first dead letter
    arrays = [optional_ints(cols[name]) if schema.field(name).type == pa.int64()
              else optional_texts(cols[name], schema.field(name).type) for name in schema.names[:-1]]
    arrays.append(timestamps(np.full(n, failed_at_us, dtype=np.int64), TIMESTAMP_TYPE))
    return pa.Table.from_arrays(arrays, schema=schema)


def split_valid(valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices of valid rows, indices of invalid rows) of a core result."""
    valid = np.asarray(valid, dtype=bool)
    return np.flatnonzero(valid), np.flatnonzero(~valid)
