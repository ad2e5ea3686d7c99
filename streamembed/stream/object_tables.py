"""Objects as Arrow columns: the landmarks of a model (``streamembed model landmarks``) and rows of objects.

``objects_column`` turns a collection of objects (``core.inputs.objects``: str,
bytes or series; or (N, p) feature vectors) into the ``object`` column's
Arrow type — string, binary or list<float64> — built from buffers;
``landmarks_table`` is a model's landmark ids and objects in model order, with
the model's version, lineage and metric in the schema metadata.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa

from streamembed.core.inputs.objects import pack_objects
from streamembed.stream.records import INPUT_ID, INPUT_OBJECT

__all__ = ["objects_column", "landmarks_table", "LANDMARKS_TABLE_KEYS"]

#: Schema metadata keys of a landmarks table.
LANDMARKS_TABLE_KEYS = ("streamembed.model_version", "streamembed.lineage", "streamembed.metric")


def objects_column(objects: Any) -> pa.Array:
    """The ``object`` column of ``objects``: string (text), binary (bytes) or list<float64> (series, vectors)."""
    if isinstance(objects, np.ndarray) and objects.dtype != object:
        X = np.ascontiguousarray(objects, dtype=np.float64)
        offsets = np.arange(X.shape[0] + 1, dtype=np.int32) * X.shape[1]
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(X.ravel()))
    arr = np.asarray(objects, dtype=object) if not isinstance(objects, np.ndarray) else objects
    kind, values, offsets = pack_objects(arr)
    if kind == "series":
        return pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), pa.array(values)).cast(
            pa.list_(pa.float64()))
    typ = pa.large_string() if kind == "strings" else pa.large_binary()
    out = pa.Array.from_buffers(typ, len(arr), [None, pa.py_buffer(offsets.astype(np.int64)),
                                                pa.py_buffer(values.tobytes())])
    return out.cast(pa.string() if kind == "strings" else pa.binary())


def landmarks_table(model: Any) -> pa.Table:
    """The model's landmark ids and objects in model order (``id``, ``object``), its version, lineage and metric
    in the schema metadata."""
    meta = {"streamembed.model_version": str(int(model.version)), "streamembed.lineage": str(model.lineage),
            "streamembed.metric": json.dumps(model.metric)}
    ids = pa.array([str(x) for x in model.landmark_ids], pa.string())
    return pa.table({INPUT_ID: ids, INPUT_OBJECT: objects_column(model.features)}).replace_schema_metadata(meta)
