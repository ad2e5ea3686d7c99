"""The fast input layout: a vector column as ``fixed_size_binary(n * itemsize)``, each row n little-endian float32
(or, with field metadata ``streamembed.dtype = float64``, float64) values, viewed as an (m, n) matrix zero-copy;
and list columns to matrices (``stream.codecs.decode_batch`` reads both).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from streamembed.stream.columns import is_list, list_lengths, numeric_values_type, single_array, to_matrix
from streamembed.stream.records import INPUT_DISSIMILARITIES

__all__ = ["PACKED_DTYPE_KEY", "packed_column", "list_column_to_matrix", "packed_dtype", "packed_matrix"]


#: Field metadata key naming the element type of a fixed_size_binary vector column (the fast layout).
PACKED_DTYPE_KEY = b"streamembed.dtype"


_PACKED: dict[bytes, np.dtype[Any]] = {b"float32": np.dtype("<f4"), b"float64": np.dtype("<f8")}


def packed_dtype(field: pa.Field) -> tuple[np.dtype, None] | tuple[None, str]:
    """(element dtype, None) of a fixed_size_binary vector column, or (None, problem)."""
    name = (field.metadata or {}).get(PACKED_DTYPE_KEY, b"float32")
    dt = _PACKED.get(name)
    if dt is None:
        return None, (f"'{field.name}' is fixed_size_binary with {PACKED_DTYPE_KEY.decode()} = "
                      f"{name.decode('utf-8', 'replace')!r}, expected float32 or float64")
    return dt, None


def packed_matrix(col: pa.Array, width: int, dtype: np.dtype) -> np.ndarray:
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
