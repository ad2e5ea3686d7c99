"""Objects that are not feature vectors: strings, byte strings and series (the ``object`` column, docs/objects.md).

A collection of N such objects is held as a 1-D numpy array of dtype object
(fancy-indexable like a feature matrix; in memory only): ``str`` for text,
``bytes`` for binary objects, 1-D float64 arrays for series (variable length).
Feature vectors stay (N, p) float arrays. What a metric takes is its kind
(``core.inputs.metrics.OBJECT_KINDS``); this module turns what a caller hands
over into objects of a kind, says which objects are unusable and why
(:func:`object_problems`: wrong type, too long, empty, a non-finite value), and
packs a collection into fixed arrays and back (:func:`pack_objects`,
:func:`unpack_objects`): UTF-8 or raw bytes, or float64 values, concatenated
as ``uint8`` / ``float64`` values with ``int64`` offsets, so that a model file
or a refit's job file stores them without pickle or object arrays.

No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import InputError

__all__ = ["OBJECT_STORAGE", "DEFAULT_MAX_LENGTH", "as_object_array", "object_lengths", "object_problems",
           "objects_of_kind", "storage_kind", "pack_objects", "unpack_objects", "packed_bytes"]

#: How a collection of objects is stored (``pack_objects``): text (UTF-8), bytes, or series of float64.
OBJECT_STORAGE: tuple[str, ...] = ("strings", "bytes", "series")
#: The longest object (characters, bytes or values) a metric takes unless configured otherwise
#: (``[metric] max_object_length``): an edit distance or DTW costs the product of the two lengths.
DEFAULT_MAX_LENGTH = 10_000


def as_object_array(items: Iterable[Any], count: int | None = None) -> np.ndarray:
    """A 1-D object array of ``items`` (never a 2-D array, even when the items are series of one length)."""
    if isinstance(items, np.ndarray) and items.dtype == object and items.ndim == 1:
        return items
    seq = items if isinstance(items, (Sequence, np.ndarray)) else list(items)
    return np.fromiter(seq, dtype=object, count=len(seq) if count is None else count)


def _series(x: Any) -> np.ndarray | None:
    """x as a 1-D float64 series, or None when it is not one (a string, a scalar, a nested list)."""
    if isinstance(x, (str, bytes)) or x is None:
        return None
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return a if a.ndim == 1 else None


def _as_series(x: Any) -> Any:
    """x as a 1-D float64 series when it is one (a list of numbers, an array), else x itself."""
    if isinstance(x, (str, bytes)):
        return x
    s = _series(x)
    return x if s is None else s


def objects_of_kind(X: Any, kind: str, metric: str, what: str = "X", max_length: int | None = None) -> np.ndarray:
    """X as a 1-D object array of ``kind`` ("strings": str or bytes; "series": 1-D float64 arrays; "objects": any
    of them), refusing (InputError naming ``metric``) the first object it cannot take (``object_problems``)."""
    if isinstance(X, np.ndarray) and X.dtype.kind in "US":
        X = X.astype(object)
    if isinstance(X, (str, bytes)) or not isinstance(X, (Sequence, np.ndarray)):
        raise InputError(f"metric {metric!r} takes a collection of {_KIND_TEXT[kind]}; {what} is a "
                         f"{type(X).__name__}")
    if isinstance(X, np.ndarray) and X.dtype != object:
        if kind == "series" and X.ndim == 2:  # equal-length series given as a matrix
            X = as_object_array(np.ascontiguousarray(X, dtype=np.float64))
        else:
            raise InputError(f"metric {metric!r} takes {_KIND_TEXT[kind]}; {what} is an array of "
                             f"{X.dtype} with shape {X.shape}")
    objs = as_object_array(X)
    if kind in ("series", "objects"):
        objs = as_object_array((_as_series(x) for x in objs), len(objs))
    problems = object_problems(objs, kind, max_length)
    if problems:
        i, why = next(iter(problems.items()))
        raise InputError(f"metric {metric!r} cannot take {what}[{i}]: {why}")
    return objs


_KIND_TEXT = {"strings": "strings (text or bytes)", "series": "series (1-D lists of numbers)",
              "objects": "objects (strings, bytes or series)"}


def object_lengths(objs: np.ndarray) -> np.ndarray:
    """(N,) int64 lengths (characters, bytes or values; -1 for an object without one)."""
    return np.fromiter((len(x) if hasattr(x, "__len__") else -1 for x in objs), dtype=np.int64, count=len(objs))


def object_problems(objs: np.ndarray, kind: str, max_length: int | None = None) -> dict[int, str]:
    """Why each unusable object of ``objs`` (1-D object array) cannot be taken by a metric of ``kind``
    (index -> reason, in index order; empty when every object is usable): a null, the wrong type, an empty
    series, one longer than ``max_length`` (None: ``DEFAULT_MAX_LENGTH``), a NaN or infinity in a series."""
    limit = DEFAULT_MAX_LENGTH if max_length is None else int(max_length)
    out: dict[int, str] = {}
    if kind == "strings":
        typed = np.fromiter((isinstance(x, (str, bytes)) for x in objs), dtype=bool, count=len(objs))
        want = "a string (text or bytes)"
    elif kind == "series":
        typed = np.fromiter((isinstance(x, np.ndarray) and x.ndim == 1 for x in objs), dtype=bool, count=len(objs))
        want = "a series (a list of numbers)"
    else:
        typed = np.fromiter((isinstance(x, (str, bytes)) or (isinstance(x, np.ndarray) and x.ndim == 1)
                             for x in objs), dtype=bool, count=len(objs))
        want = "a string, bytes or a list of numbers"
    lengths = object_lengths(objs)
    for i in np.flatnonzero(~typed).tolist():
        x = objs[i]
        out[i] = "the object is null" if x is None else f"the object is a {_type_name(x)}, not {want}"
    for i in np.flatnonzero(typed & (lengths > limit)).tolist():
        out[i] = f"the object is too long: {int(lengths[i])} {_length_unit(objs[i])}, the metric's limit is {limit}"
    series = typed & np.fromiter((isinstance(x, np.ndarray) for x in objs), dtype=bool, count=len(objs))
    for i in np.flatnonzero(series & (lengths == 0)).tolist():
        out[i] = "the series is empty"
    rows = np.flatnonzero(series & (lengths > 0) & (lengths <= limit))
    if rows.size:
        flat = np.concatenate([objs[i] for i in rows.tolist()])
        bounds = np.concatenate([[0], np.cumsum(lengths[rows])])
        bad = np.logical_not(np.isfinite(flat))
        if bad.any():
            per = np.add.reduceat(bad, bounds[:-1])
            for j in np.flatnonzero(per).tolist():
                k = int(np.argmax(bad[bounds[j]:bounds[j + 1]]))
                out[int(rows[j])] = f"value {k} of the series is {objs[rows[j]][k]} (not finite)"
    return dict(sorted(out.items()))


def _type_name(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return f"{x.ndim}-D array"
    return type(x).__name__


def _length_unit(x: Any) -> str:
    return "characters" if isinstance(x, str) else ("bytes" if isinstance(x, bytes) else "values")


def storage_kind(objs: np.ndarray) -> str:
    """How ``objs`` is stored: "strings" (every object a str), "bytes" (every one bytes) or "series" (every one a
    1-D array); InputError for a mixture, which no file format here keeps."""
    if all(isinstance(x, str) for x in objs):
        return "strings"
    if all(isinstance(x, bytes) for x in objs):
        return "bytes"
    if all(isinstance(x, np.ndarray) and x.ndim == 1 for x in objs):
        return "series"
    raise InputError("landmark objects must be all text, all bytes or all series to be stored")


def packed_bytes(objs: np.ndarray) -> int:
    """What :func:`pack_objects` of ``objs`` takes, in bytes (values and offsets)."""
    kind = storage_kind(objs)
    if kind == "strings":
        size = sum(len(x.encode("utf-8", "surrogatepass")) for x in objs)
    elif kind == "bytes":
        size = sum(len(x) for x in objs)
    else:
        size = 8 * int(object_lengths(objs).sum())
    return int(size + 8 * (len(objs) + 1))


def pack_objects(objs: np.ndarray) -> tuple[str, np.ndarray, np.ndarray]:
    """(storage kind, values, offsets (N + 1,) int64): object i is ``values[offsets[i]:offsets[i + 1]]``; values
    are uint8 (UTF-8 text or bytes) or float64 (series)."""
    kind = storage_kind(objs)
    if kind == "series":
        lengths = object_lengths(objs)
        values = np.concatenate([np.asarray(x, dtype=np.float64) for x in objs]) if len(objs) else np.empty(0)
    else:
        raw = [x.encode("utf-8", "surrogatepass") if kind == "strings" else bytes(x) for x in objs]
        lengths = np.fromiter(map(len, raw), dtype=np.int64, count=len(raw))
        values = np.frombuffer(b"".join(raw), dtype=np.uint8).copy()
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return kind, values, offsets


def unpack_objects(kind: str, values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The objects :func:`pack_objects` packed, as a 1-D object array; ValueError for arrays that cannot be
    its output (another kind, offsets that are not non-decreasing from 0 to the values' length)."""
    if kind not in OBJECT_STORAGE:
        raise ValueError(f"landmark objects of storage kind {kind!r}; known: {OBJECT_STORAGE}")
    off = np.asarray(offsets)
    if off.ndim != 1 or off.size < 1 or off.dtype.kind not in "iu" or off[0] != 0 or off[-1] != values.size \
            or (np.diff(off) < 0).any():
        raise ValueError("landmark object offsets must rise from 0 to the number of values")
    want = np.float64 if kind == "series" else np.uint8
    if values.ndim != 1 or values.dtype != want:
        raise ValueError(f"landmark objects of kind {kind!r} need 1-D {np.dtype(want)} values, got {values.dtype} "
                         f"{values.shape}")
    bounds = off.tolist()
    if kind == "series":
        return as_object_array((values[a:b].copy() for a, b in zip(bounds[:-1], bounds[1:], strict=True)),
                               off.size - 1)
    buf = values.tobytes()
    if kind == "bytes":
        return as_object_array((buf[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)), off.size - 1)
    try:
        return as_object_array((buf[a:b].decode("utf-8", "surrogatepass")
                                for a, b in zip(bounds[:-1], bounds[1:], strict=True)), off.size - 1)
    except UnicodeDecodeError as exc:
        raise ValueError(f"landmark objects are not UTF-8 text: {exc}") from None
