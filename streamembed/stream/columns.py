"""Arrow column helpers shared by the decoders: one contiguous array per column, list lengths, null masks.

Whole-column operations only (vectorised); nothing here looks at a row's meaning.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from streamembed.stream.arrow_build import scalar, to_numpy

__all__ = ["single_array", "column", "null_mask", "is_list", "numeric_values_type", "list_lengths", "to_matrix"]


def single_array(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``col`` as one contiguous array (chunks combined only when there are several)."""
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return col.chunk(0)
        if col.num_chunks == 0:
            return pa.nulls(0, col.type)
        return col.combine_chunks()
    return col


def column(table: pa.Table | pa.RecordBatch, name: str) -> pa.Array | None:
    """The column ``name`` (None if absent; callers check duplicates first)."""
    if name not in table.schema.names:
        return None
    return single_array(table.column(table.schema.get_field_index(name)))


def null_mask(arr: pa.Array) -> np.ndarray:
    """(len,) bool: True where the slot is null."""
    if arr.null_count == 0:
        return np.zeros(len(arr), dtype=bool)
    return to_numpy(arr.is_null())


def is_list(t: pa.DataType) -> bool:
    """A list, large list or fixed-size list type."""
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def numeric_values_type(t: pa.DataType) -> bool:
    """The list type's values are numbers (or all null)."""
    v = t.value_type
    return pa.types.is_floating(v) or pa.types.is_integer(v) or pa.types.is_null(v)


def list_lengths(col: pa.Array) -> np.ndarray:
    """Length of every list slot (-1 for a null slot), int64, vectorised."""
    if pa.types.is_fixed_size_list(col.type):
        out = np.full(len(col), col.type.list_size, dtype=np.int64)
    else:
        import pyarrow.compute as pc  # (0.1 s to import: variable-length lists only)

        lengths = pc.list_value_length(col)
        out = to_numpy(lengths.fill_null(scalar(-1, lengths.type))).astype(np.int64)
    if col.null_count:
        out[null_mask(col)] = -1
    return out


def to_matrix(col: pa.Array, width: int) -> np.ndarray:
    """(m, width) view of a list column with no null slots and equal lengths.

    Zero-copy for float32/float64 values without null elements; integer or
    float16 values are converted to float64; null elements become NaN.
    """
    if pa.types.is_fixed_size_list(col.type):  # its values, without ``flatten``, which imports pyarrow.compute
        size = col.type.list_size
        values = col.values.slice(col.offset * size, len(col) * size)
    else:
        values = col.flatten()
    vt = values.type
    if pa.types.is_integer(vt) or pa.types.is_float16(vt) or pa.types.is_null(vt):
        values = values.cast(pa.float64())
    arr = to_numpy(values)
    return arr.reshape(len(col), width)
