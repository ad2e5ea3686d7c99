"""The ``object`` column: rows that carry the object itself (text, bytes or a list of numbers), checked whole.

``decode_batch`` calls :func:`object_rows` only when a batch has an ``object``
column (rows of dissimilarities alone never come here). It turns the column
into the objects the model's metric takes (``core.inputs.objects``: a 1-D
object array of ``str`` / ``bytes``, or of 1-D float64 series), with one
vectorised pass per check over the column's buffers (types, nulls, lengths,
NaN values); a Python loop runs only to build the series' views and over the
refused rows. A row whose object the metric cannot take is refused with
``bad_object`` and a detail naming the metric and why ("metric
'levenshtein-normalized': the object is too long: 12,000 characters, ...").

Rows are *placed* from their objects when they carry no ``dissimilarities``
(the daemon computes them against the landmarks' objects); rows that carry
both are placed from their dissimilarities and their objects only feed the
refit reservoir (``beside``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from streamembed.core.inputs.objects import DEFAULT_MAX_LENGTH, as_object_array
from streamembed.stream.arrow_build import scalar, to_numpy
from streamembed.stream.columns import column, is_list, list_lengths, null_mask, numeric_values_type
from streamembed.stream.records import INPUT_DISSIMILARITIES, INPUT_OBJECT

__all__ = ["ObjectSpec", "ObjectRows", "object_rows", "carries_objects"]


@dataclass(frozen=True)
class ObjectSpec:
    """What the served model's metric takes: its name, its kind (``core.inputs.metrics.OBJECT_KINDS``), the
    longest object, and whether the model keeps landmark objects (rows can be placed from objects)."""

    metric: str
    takes: str
    max_length: int = DEFAULT_MAX_LENGTH
    placeable: bool = True


@dataclass
class ObjectRows:
    """The objects of a batch's m rows (None where refused), the refused rows' details, and whether the rows are
    placed from them (no ``dissimilarities`` column) or carry them beside their dissimilarities."""

    objects: np.ndarray  # (m,) object array; or (m, p) float64 for a metric of feature vectors
    problems: dict[int, str]
    placed: bool


def carries_objects(table: pa.Table | pa.RecordBatch) -> bool:
    """Whether the batch has a non-null ``object`` column (one schema lookup)."""
    if INPUT_OBJECT not in table.schema.names:
        return False
    return not pa.types.is_null(table.schema.field(INPUT_OBJECT).type)


def object_rows(table: pa.Table | pa.RecordBatch, spec: ObjectSpec, width: int | None = None) -> ObjectRows:
    """The ``object`` column of ``table`` as ``spec``'s objects (see the module doc); ``width`` is p for a metric
    of feature vectors."""
    col = column(table, INPUT_OBJECT)
    assert col is not None  # carries_objects
    dis = column(table, INPUT_DISSIMILARITIES)
    placed = dis is None or pa.types.is_null(dis.type)
    m = len(col)
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    t = col.type
    text = pa.types.is_string(t) or pa.types.is_large_string(t)
    binary = pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
    numbers = is_list(t) and numeric_values_type(t)
    if spec.takes in ("strings", "objects") and (text or binary):
        objs, problems = _strings(col, text, spec.max_length)
    elif spec.takes in ("series", "objects") and numbers:
        objs, problems = _series(col, spec.max_length)
    elif spec.takes in ("vectors", "booleans") and numbers:
        objs, problems = _vectors(col, width)
    else:
        want = {"strings": "text or bytes", "series": "a list of numbers", "vectors": "a list of numbers",
                "objects": "text, bytes or a list of numbers", "booleans": "a list of 0/1"}[spec.takes]
        objs = np.full(m, None, dtype=object)
        problems = dict.fromkeys(range(m), f"the object column has type {t}; the metric takes {want}")
    problems = {i: f"metric {spec.metric!r}: {why}" for i, why in problems.items()}
    return ObjectRows(objs, problems, placed)


def _strings(col: pa.Array, text: bool, max_length: int) -> tuple[np.ndarray, dict[int, str]]:
    """Text (str) or binary (bytes) objects; nulls and objects longer than ``max_length`` refused."""
    import pyarrow.compute as pc  # here, not at import: 0.04 s that only rows carrying text objects need

    objs = as_object_array(col.to_pylist(), len(col))  # not to_numpy(zero_copy_only=False): it imports pandas
    lengths = pc.utf8_length(col) if text else pc.binary_length(col)
    n = to_numpy(lengths.fill_null(scalar(-1, lengths.type))).astype(np.int64)
    problems: dict[int, str] = {}
    unit = "characters" if text else "bytes"
    for i in np.flatnonzero(n > max_length).tolist():
        problems[i] = f"the object is too long: {int(n[i]):,} {unit}, the metric's limit is {max_length:,}"
    for i in np.flatnonzero(null_mask(col)).tolist():
        problems[i] = "the object is null"
    return objs, dict(sorted(problems.items()))


def _series(col: pa.Array, max_length: int) -> tuple[np.ndarray, dict[int, str]]:
    """Series: 1-D float64 views of the list values; nulls, empty series, too long ones and non-finite values
    refused."""
    m = len(col)
    n = list_lengths(col)
    values = col.flatten()  # null slots contribute no values
    vt = values.type
    if not pa.types.is_float64(vt):
        values = values.cast(pa.float64())
    flat = to_numpy(values.fill_null(scalar(np.nan, pa.float64()))) if values.null_count else to_numpy(values)
    problems: dict[int, str] = {}
    sizes = np.maximum(n, 0)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    bad = np.logical_not(np.isfinite(flat))
    if bad.any():
        per = np.add.reduceat(bad, np.minimum(bounds[:-1], max(len(flat) - 1, 0))) * (sizes > 0)
        for i in np.flatnonzero(per).tolist():
            k = int(np.argmax(bad[bounds[i]:bounds[i + 1]]))
            problems[i] = f"value {k} of the series is {flat[bounds[i] + k]} (not finite)"
    for i in np.flatnonzero(n == 0).tolist():
        problems[i] = "the series is empty"
    for i in np.flatnonzero(n > max_length).tolist():
        problems[i] = f"the object is too long: {int(n[i]):,} values, the metric's limit is {max_length:,}"
    for i in np.flatnonzero(n < 0).tolist():
        problems[i] = "the object is null"
    views = np.split(flat, bounds[1:-1]) if m else []
    objs = as_object_array(views, m)
    return objs, dict(sorted(problems.items()))


def _vectors(col: pa.Array, width: int | None) -> tuple[Any, dict[int, str]]:
    """Feature vectors (m, p) float64 (NaN rows left to the core, as the ``features`` column's); wrong lengths and
    nulls refused."""
    n = list_lengths(col)
    problems: dict[int, str] = {}
    p = -1 if width is None else int(width)
    for i in np.flatnonzero((n != p) & (n >= 0)).tolist():
        problems[i] = f"the object has {int(n[i])} values, the landmarks have {p}"
    for i in np.flatnonzero(n < 0).tolist():
        problems[i] = "the object is null"
    ok = np.flatnonzero(n == p)
    X = np.full((len(col), max(p, 0)), np.nan)
    if ok.size and p > 0:
        sub = col.take(pa.array(ok))
        values = sub.flatten().cast(pa.float64())
        X[ok] = to_numpy(values.fill_null(scalar(np.nan, pa.float64()))).reshape(ok.size, p)
    return X, dict(sorted(problems.items()))
