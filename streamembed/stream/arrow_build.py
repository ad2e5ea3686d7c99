"""Arrow arrays from NumPy and back, without importing pandas.

pyarrow imports pandas (about 0.25 CPU-s, a quarter of a short ``embed``
process) the first time ``pa.array`` or ``pa.scalar`` is given values, and
the first time an array is converted with ``Array.to_numpy`` (its C++
converter is pandas'). ``pa.Array.from_buffers`` does not: the builders here
lay the buffers out as the Arrow columnar format specifies them (validity
bitmaps least-significant bit first, ``np.packbits(bitorder="little")``;
strings as int32 offsets + UTF-8 data) and give arrays equal to what
``pa.array`` builds from the same values (tests/stream/test_arrow_build.py).
docs/throughput.md, "Start-up, and the file path against its ceiling".
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["booleans", "numeric", "optional_ints", "optional_texts", "pylist", "rows", "scalar", "strings",
           "timestamps", "to_numpy"]


def numeric(x: Any, type: pa.DataType | None = None) -> pa.Array:
    """A null-free Arrow array of the 1-D numeric (int, uint, float) array ``x`` (m,), as ``pa.array(x)``.

    A non-contiguous ``x`` is copied; a contiguous one is shared (Arrow keeps
    a reference). ``type``: the Arrow type when it differs from ``x``'s (a
    timestamp over int64 microseconds), of the same width.
    """
    x = np.ascontiguousarray(x)
    if x.ndim != 1:
        raise ValueError(f"numeric() takes a 1-D array, got shape {x.shape}")
    if x.dtype == np.bool_:
        return booleans(x)
    t = pa.from_numpy_dtype(x.dtype) if type is None else type
    return pa.Array.from_buffers(t, x.shape[0], [None, pa.py_buffer(x)], null_count=0)


def booleans(mask: Any) -> pa.Array:
    """A null-free Arrow boolean array of the 1-D ``mask`` (m,), as ``pa.array(mask)``."""
    mask = np.asarray(mask, dtype=np.bool_).reshape(-1)
    bits = np.packbits(mask, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), mask.shape[0], [None, pa.py_buffer(bits)], null_count=0)


def strings(values: Sequence[str]) -> pa.Array:
    """A null-free Arrow string array of ``values``, as ``pa.array(values, pa.string())``.

    A Python loop over the values: for short lists (dictionaries, names), not for rows.
    """
    encoded = [str(v).encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    data = b"".join(encoded)
    return pa.Array.from_buffers(pa.string(), len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=0)


def optional_texts(values: Sequence[str | bytes | None], type: pa.DataType) -> pa.Array:
    """A string or binary array (``type``: ``pa.string()`` or ``pa.binary()``) of ``values`` with None as null,
    as ``pa.array(values, type)``. A Python loop: for dead letters and other short lists, not for rows."""
    encoded = [b"" if v is None else v if isinstance(v, bytes) else str(v).encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise ValueError(f"{offsets[-1]} bytes do not fit an Arrow {type} array (int32 offsets)")
    valid = np.fromiter((v is not None for v in values), dtype=np.bool_, count=len(values))
    return pa.Array.from_buffers(type, len(encoded), [_validity(valid), pa.py_buffer(offsets.astype(np.int32)),
                                                      pa.py_buffer(b"".join(encoded))],
                                 null_count=int(len(values) - valid.sum()))


def optional_ints(values: Sequence[int | None]) -> pa.Array:
    """An int64 array of ``values`` with None as null, as ``pa.array(values, pa.int64())``."""
    valid = np.fromiter((v is not None for v in values), dtype=np.bool_, count=len(values))
    data = np.fromiter((0 if v is None else v for v in values), dtype=np.int64, count=len(values))
    return pa.Array.from_buffers(pa.int64(), len(values), [_validity(valid), pa.py_buffer(data)],
                                 null_count=int(len(values) - valid.sum()))


def _validity(valid: np.ndarray) -> pa.Buffer | None:
    """The validity bitmap of ``valid`` (least-significant bit first), None when every value is there."""
    return None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


def scalar(value: Any, type: pa.DataType) -> pa.Scalar:
    """A non-null Arrow scalar of a numeric ``type``, as ``pa.scalar(value, type)``.

    ``pyarrow.compute`` turns Python arguments into scalars with ``pa.scalar``:
    pass it one of these instead.
    """
    return numeric(np.array([value], dtype=type.to_pandas_dtype()), type)[0]


def timestamps(us: Any, type: pa.DataType) -> pa.Array:
    """A null-free timestamp array of ``type`` from int64 ``us`` (m,), in ``type``'s unit since the epoch."""
    return numeric(np.asarray(us, dtype=np.int64), type)


def to_numpy(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The values (m,) of a null-free numeric or boolean Arrow array as NumPy, as ``arr.to_numpy()``.

    A read-only view of a null-free numeric array. Copied: a boolean array
    (bit-packed), a chunked array of several chunks, and numbers with nulls
    (floats, integers as float64, NaN where null). A boolean or timestamp
    array with nulls, or another type, goes through
    ``to_numpy(zero_copy_only=False)`` (which imports pandas).
    """
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks == 1:
            arr = arr.chunk(0)
        else:
            parts = [to_numpy(c) for c in arr.chunks]
            return np.concatenate(parts) if parts else np.empty(0, arr.type.to_pandas_dtype())
    t = arr.type
    if arr.null_count == 0 and pa.types.is_boolean(t):
        bits = arr.buffers()[1]
        if bits is None:
            return np.empty(0, np.bool_)
        packed = np.frombuffer(bits, dtype=np.uint8)
        return np.unpackbits(packed, count=arr.offset + len(arr), bitorder="little")[arr.offset:].view(np.bool_)
    numbers = pa.types.is_integer(t) or pa.types.is_floating(t)
    if not (numbers or (pa.types.is_timestamp(t) and arr.null_count == 0)):
        return arr.to_numpy(zero_copy_only=False)
    dtype = np.dtype("int64") if pa.types.is_timestamp(t) else np.dtype(t.to_pandas_dtype())
    buffers = arr.buffers()
    if arr.null_count:
        return _with_nan(buffers, dtype, arr.offset, len(arr))
    if buffers[1] is None:
        return np.empty(0, dtype)
    out = np.frombuffer(buffers[1], dtype=dtype, count=arr.offset + len(arr))[arr.offset:]
    return out.view(f"datetime64[{t.unit}]") if pa.types.is_timestamp(t) else out


def _with_nan(buffers: list[pa.Buffer | None], dtype: np.dtype, offset: int, m: int) -> np.ndarray:
    """Numbers with nulls as ``to_numpy`` gives them: floats of their width (integers: float64), NaN where null."""
    out_dtype = dtype if dtype.kind == "f" else np.dtype(np.float64)
    if buffers[1] is None or buffers[0] is None:  # all null
        return np.full(m, np.nan, dtype=out_dtype)
    out = np.frombuffer(buffers[1], dtype=dtype, count=offset + m)[offset:].astype(out_dtype)
    valid = np.unpackbits(np.frombuffer(buffers[0], dtype=np.uint8), count=offset + m, bitorder="little")[offset:]
    out[valid == 0] = np.nan
    return out


def pylist(arr: pa.Array | pa.ChunkedArray) -> list[Any]:
    """``arr.to_pylist()``, without pandas for time-zone-aware timestamps of unit s, ms or us.

    pyarrow asks pandas (importing it) for every timestamp scalar that has a
    time zone, then builds ``datetime(1970, 1, 1) + delta`` moved to the zone
    (``pa.lib.string_to_tzinfo``); the same is done here from the zone-less
    view of the same values. Other types are ``to_pylist``'s own (a nested
    type holding zoned timestamps, or nanoseconds, still asks pandas).
    """
    if isinstance(arr, pa.ChunkedArray):
        return [v for chunk in arr.chunks for v in pylist(chunk)]
    t = arr.type
    if not (pa.types.is_timestamp(t) and t.tz and t.unit in ("s", "ms", "us")):
        return arr.to_pylist()
    tz = pa.lib.string_to_tzinfo(t.tz)
    return [None if d is None else d.replace(tzinfo=UTC).astimezone(tz)
            for d in arr.view(pa.timestamp(t.unit)).to_pylist()]


def rows(table: pa.Table | pa.RecordBatch) -> list[dict[str, Any]]:
    """``table.to_pylist()`` (one dict per row, the columns by name) built column by column with :func:`pylist`."""
    names = table.schema.names
    if not names:
        return [{} for _ in range(table.num_rows)]
    return [dict(zip(names, values, strict=True)) for values in zip(*(pylist(c) for c in table.columns), strict=True)]
