"""The precision of an input's vectors, from its schema alone (no row is read).

Output version 2 writes its numbers in the input's precision
(:mod:`streamembed.stream.output`). One output file must have one schema, so
a command that writes several inputs into one file (``streamembed embed``, a
Dask backfill's parts that form one data set) decides the precision up front:
float32 when every input whose schema says anything holds float32 vectors,
else float64. The decoder's rules (``stream.codecs``): float32 values stay
float32; float64, float16 and integer values, and every JSON line, are
float64; the fast layout says its type in the field metadata.
"""

from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from streamembed.stream.records import INPUT_DISSIMILARITIES, INPUT_FEATURES

__all__ = ["vector_dtype", "file_precision", "common_precision"]

_PACKED_KEY = b"streamembed.dtype"


def vector_dtype(schema: pa.Schema) -> np.dtype | None:
    """float32 or float64: what rows of this schema decode to; None without a usable vector column."""
    for name in (INPUT_DISSIMILARITIES, INPUT_FEATURES):
        if schema.get_field_index(name) < 0:
            continue
        field = schema.field(name)
        t = field.type
        if pa.types.is_fixed_size_binary(t):
            return np.dtype(np.float64) if (field.metadata or {}).get(_PACKED_KEY) == b"float64" else \
                np.dtype(np.float32)
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return np.dtype(np.float32) if pa.types.is_float32(t.value_type) else np.dtype(np.float64)
        if pa.types.is_null(t):
            continue
        return None
    return None


def file_precision(path: str | os.PathLike[str]) -> np.dtype | None:
    """The precision rows of ``path`` decode to (JSON lines: float64); None when the schema cannot be read."""
    from streamembed.stream.readers import file_format

    fmt = file_format(path)
    try:
        if fmt == "jsonl":
            return np.dtype(np.float64)
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return vector_dtype(pq.read_schema(path))
        if fmt == "arrow":
            import pyarrow.ipc as ipc

            with pa.OSFile(str(path)) as f:
                if f.read(6) == b"ARROW1":
                    f.seek(8)  # the stream that follows the magic: only its schema message is read
                else:
                    f.seek(0)
                return vector_dtype(ipc.open_stream(f).schema)
    except (OSError, pa.ArrowException, ValueError):
        return None
    return None


def common_precision(paths: Iterable[str | os.PathLike[str]]) -> np.dtype:
    """float32 when every input that says holds float32 vectors (and one does), else float64."""
    seen = {file_precision(Path(p)) for p in paths} - {None}
    return np.dtype(np.float32) if seen == {np.dtype(np.float32)} else np.dtype(np.float64)
