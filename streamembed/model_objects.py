"""The landmark objects of a model file (strings, bytes or series), as fixed arrays: no pickle, no object arrays.

``model_io`` calls these two functions: :func:`object_arrays` gives the
entries a model's landmark objects add to its ``.npz`` (``landmark_objects_values``,
``uint8`` UTF-8 text or bytes or ``float64`` series values, and
``landmark_objects_offsets``, ``int64`` (n + 1,), ``core.inputs.objects.pack_objects``)
and the metadata block that names their kind; :func:`objects_of_file` reads them
back. Feature vectors stay the ``landmark_features`` (n, p) array they always were.

A model keeps at most ``MAX_OBJECT_BYTES`` of landmark objects: above that
saving refuses with the size and what to do (the model file is read whole by
every replica and sent over the model topic).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .core.errors import ModelFileError
from .core.inputs.objects import pack_objects, packed_bytes, unpack_objects

__all__ = ["MAX_OBJECT_BYTES", "OBJECTS_META", "object_arrays", "objects_of_file"]

#: The most bytes of landmark objects a model file keeps (values and offsets).
MAX_OBJECT_BYTES = 64 << 20
#: The metadata key of the landmark objects' block (``{"kind": ..., "count": n}``).
OBJECTS_META = "landmark_objects"
_VALUES, _OFFSETS = "landmark_objects_values", "landmark_objects_offsets"


def object_arrays(objects: np.ndarray | None, limit: int = MAX_OBJECT_BYTES) -> tuple[dict[str, np.ndarray],
                                                                                        dict[str, Any] | None]:
    """(the archive entries, the metadata block) of a model's landmark objects; ({}, None) for feature vectors
    or none. ModelFileError when they take more than ``limit`` bytes."""
    if objects is None or objects.dtype != object:
        return {}, None
    size = packed_bytes(objects)
    if size > limit:
        raise ModelFileError(f"the model's {len(objects)} landmark objects take {size} bytes, more than a model file "
                             f"keeps ({limit} bytes): fit with fewer landmarks or shorter objects "
                             f"([metric] max_object_length), or fit from dissimilarities and keep the objects with "
                             f"the producer (docs/objects.md)")
    kind, values, offsets = pack_objects(objects)
    return {_VALUES: values, _OFFSETS: offsets}, {"kind": kind, "count": int(len(objects)), "bytes": size}


def objects_of_file(files: dict[str, np.ndarray], meta: dict[str, Any], n: int) -> np.ndarray | None:
    """The landmark objects of a model file's entries (None when it keeps none); ValueError for entries that
    are not what :func:`object_arrays` writes for n landmarks."""
    block = meta.get(OBJECTS_META)
    values, offsets = files.get(_VALUES), files.get(_OFFSETS)
    if block is None:
        if values is not None or offsets is not None:
            raise ValueError("landmark object arrays without their metadata block")
        return None
    if not isinstance(block, dict) or not isinstance(block.get("kind"), str) or block.get("count") != n:
        raise ValueError(f"metadata {OBJECTS_META!r} must name the kind and the count ({n}) of the landmark objects, "
                         f"got {block!r}")
    if values is None or offsets is None:
        raise ValueError(f"metadata {OBJECTS_META!r} without the arrays {_VALUES!r} and {_OFFSETS!r}")
    if offsets.shape != (n + 1,):
        raise ValueError(f"{_OFFSETS} must have shape ({n + 1},), got {offsets.shape}")
    return unpack_objects(block["kind"], values, offsets)
