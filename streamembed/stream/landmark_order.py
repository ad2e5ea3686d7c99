"""Rows that name their landmark order: read the order, check it against the model's ids, gather into model order.

A row's columns follow the model's landmark order unless the row names its
own, the first of:

1. its ``landmarks`` value (a JSON-lines or Kafka JSON key; a list column in
   Arrow or Parquet): the landmark id of each column, in column order;
2. the ``streamembed.landmarks`` metadata of the ``dissimilarities`` field
   (Arrow / Parquet): a JSON list of ids naming the order of every row;
3. the same key in the schema metadata.

A named order must be a permutation of the ids of the model the row follows
(its ``landmark_version``, else the current model): an order that names an
id the model does not have, names one twice or misses one refuses the row
(``landmark_mismatch``) — it is never reordered silently. A permutation is
applied exactly: the row's values are moved, not recomputed, so a named
row embeds bit-identically to the same row sent in model order.

The work is per distinct order, not per row: rows are grouped by their
order (dictionary-encoding the joined ids), each distinct order is checked
once (and its permutation cached), and each group's columns are gathered in
one ``take``. Integers among the ids are read as their decimal text.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from streamembed.stream.columns import column, is_list, null_mask
from streamembed.stream.records import INPUT_LANDMARKS, LANDMARKS_KEY

__all__ = ["RowOrders", "row_orders", "metadata_order", "schema_order_key", "permutation", "apply_orders",
           "order_metadata"]

_KEY = LANDMARKS_KEY.encode()
#: joins a row's ids into one dictionary key; rows whose ids contain it are grouped the slow way
_SEP = "\x1f"


@dataclass
class RowOrders:
    """The order each row names.

    ``group`` (m,) int64: index into ``orders`` (the distinct named orders)
    of the row's order, -1 for a row that names none (model order). ``bad``
    (m,) marks rows whose order cannot be read at all, ``details`` says why
    (row -> text; bad rows only).
    """

    group: np.ndarray
    bad: np.ndarray
    orders: list[tuple[str, ...]] = field(default_factory=list)
    details: dict[int, str] = field(default_factory=dict)

    def refuse(self, rows: np.ndarray, why: str) -> None:
        for i in np.flatnonzero(rows & ~self.bad).tolist():
            self.details[i] = why
        self.bad |= rows


def order_metadata(ids: Sequence[Any]) -> dict[bytes, bytes]:
    """The field (or schema) metadata naming the column order ``ids`` (for producers and tests)."""
    return {_KEY: json.dumps([str(x) for x in ids]).encode("utf-8")}


def _ids_from_json(raw: bytes, where: str) -> tuple[tuple[str, ...] | None, str | None]:
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return None, f"{where} {LANDMARKS_KEY} is not JSON: {exc}"
    if not isinstance(doc, list) or not all(isinstance(x, str) or (isinstance(x, int) and not isinstance(x, bool))
                                            for x in doc):
        return None, f"{where} {LANDMARKS_KEY} must be a JSON list of landmark ids (strings or integers)"
    return tuple(str(x) for x in doc), None


def metadata_order(schema: pa.Schema, vector_field: str | None) -> tuple[tuple[str, ...] | None, str | None]:
    """(the order named by the vector field's metadata, else the schema's; or None, a problem or None)."""
    if vector_field is not None and schema.names.count(vector_field) == 1:
        meta = schema.field(vector_field).metadata or {}
        if _KEY in meta:
            return _ids_from_json(meta[_KEY], f"the metadata of field {vector_field!r}:")
    meta = schema.metadata or {}
    if _KEY in meta:
        return _ids_from_json(meta[_KEY], "the schema metadata:")
    return None, None


def schema_order_key(schema: pa.Schema, vector_field: str) -> tuple[bytes | None, bytes | None]:
    """The raw metadata orders of a schema (field, schema): tables with different keys must not be concatenated."""
    f = (schema.field(vector_field).metadata or {}).get(_KEY) if schema.names.count(vector_field) == 1 else None
    return f, (schema.metadata or {}).get(_KEY)


def _as_string_lists(col: pa.Array) -> tuple[pa.Array | None, str | None]:
    """A list column of ids as list<string> (integers as decimal text), or (None, problem)."""
    t = col.type
    if not is_list(t):
        return None, f"'{INPUT_LANDMARKS}' has type {t}, expected a list of landmark ids (strings)"
    v = t.value_type
    if pa.types.is_dictionary(v):
        v = v.value_type
    if not (pa.types.is_string(v) or pa.types.is_large_string(v) or pa.types.is_integer(v) or pa.types.is_null(v)):
        return None, f"'{INPUT_LANDMARKS}' holds {t.value_type}, expected landmark ids (strings or integers)"
    try:
        return col.cast(pa.list_(pa.string())), None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        return None, f"'{INPUT_LANDMARKS}' cannot be read as landmark ids: {exc}"


def row_orders(table: pa.Table | pa.RecordBatch, vector_field: str | None) -> RowOrders:
    """Which order each row of ``table`` names (see the module doc); vectorised over rows."""
    m = table.num_rows
    out = RowOrders(np.full(m, -1, dtype=np.int64), np.zeros(m, dtype=bool))
    own = np.zeros(m, dtype=bool)  # rows that carry their own order
    col = column(table, INPUT_LANDMARKS)
    if col is not None and not pa.types.is_null(col.type):
        own = ~null_mask(col)
        lists, why = _as_string_lists(col)
        if lists is None:
            out.refuse(own, str(why))
        elif own.any():
            _group_lists(lists, own, out)
    shared, problem = metadata_order(table.schema, vector_field)
    rest = ~own
    if problem is not None:
        out.refuse(rest, problem)
    elif shared is not None and rest.any():
        out.orders.append(shared)
        out.group[rest] = len(out.orders) - 1
    return out


def _group_lists(lists: pa.Array, named: np.ndarray, out: RowOrders) -> None:
    """Group the rows with a (non-null) list by its ids: one dictionary-encode of the joined ids."""
    import pyarrow.compute as pc  # (0.1 s to import: only where it is used)

    values = lists.flatten()
    rows_of_values = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    holes = null_mask(values)
    bad = np.zeros(len(lists), dtype=bool)
    if holes.any():
        bad[np.unique(rows_of_values[holes])] = True
        out.refuse(bad, f"'{INPUT_LANDMARKS}' holds a null id")
    rows = np.flatnonzero(named & ~bad)
    if rows.size:
        if len(values) and pc.any(pc.match_substring(values, _SEP)).as_py():
            keys = [tuple(x) for x in lists.take(pa.array(rows)).to_pylist()]  # the odd case: ids hold the separator
            uniq: dict[tuple[str, ...], int] = {}
            for r, k in zip(rows.tolist(), keys, strict=True):
                out.group[r] = uniq.setdefault(k, len(uniq) + len(out.orders))
            out.orders.extend(uniq)
        else:
            joined = pc.binary_join(lists.take(pa.array(rows)), _SEP)
            enc = pc.dictionary_encode(joined)
            idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            _, first = np.unique(idx, return_index=True)
            base = len(out.orders)
            # dictionary indices count up in order of first appearance: first[j] is the first row of order j
            out.orders.extend(tuple(lists[int(rows[at])].as_py()) for at in first.tolist())
            out.group[rows] = idx + base


class _PermutationCache:
    """Permutations of recent (order, model ids) pairs: an order repeats batch after batch."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._items: OrderedDict[tuple[int, tuple[str, ...]], tuple[Any, np.ndarray | None, str | None]] = \
            OrderedDict()
        self._lock = threading.Lock()

    def get(self, order: tuple[str, ...], ids: np.ndarray) -> tuple[np.ndarray | None, str | None] | None:
        with self._lock:
            hit = self._items.get((id(ids), order))
            if hit is None or hit[0] is not ids:
                return None
            self._items.move_to_end((id(ids), order))
            return hit[1], hit[2]

    def put(self, order: tuple[str, ...], ids: np.ndarray, perm: np.ndarray | None, problem: str | None) -> None:
        with self._lock:
            self._items[(id(ids), order)] = (ids, perm, problem)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


_CACHE = _PermutationCache()


def permutation(order: tuple[str, ...], ids: np.ndarray) -> tuple[np.ndarray | None, str | None]:
    """(perm, None) with ``row_in_model_order = row[perm]``, or (None, why the order is refused).

    ``perm`` is None as well when the order is the model's own (nothing to
    gather); ``ids`` (n,) are the model's landmark ids in model order.
    """
    hit = _CACHE.get(order, ids)
    if hit is not None:
        return hit
    perm, problem = _permutation(order, ids)
    _CACHE.put(order, ids, perm, problem)
    return perm, problem


def _permutation(order: tuple[str, ...], ids: np.ndarray) -> tuple[np.ndarray | None, str | None]:
    n = len(ids)
    where = {x: j for j, x in enumerate(order)}
    if len(where) < len(order):
        seen: set[str] = set()
        twice = next(x for x in order if x in seen or seen.add(x))  # type: ignore[func-returns-value]
        return None, f"'{INPUT_LANDMARKS}' names landmark {twice!r} {order.count(twice)} times"
    known = {str(x) for x in ids.tolist()}
    unknown = [x for x in order if x not in known]
    if unknown:
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        return None, f"'{INPUT_LANDMARKS}' names landmark {unknown[0]!r}{more}, which the model does not have"
    if len(order) < n:
        missing = [str(x) for x in ids.tolist() if x not in where]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        return None, (f"'{INPUT_LANDMARKS}' names {len(order)} of the model's {n} landmarks: it misses "
                      f"{missing[0]!r}{more}")
    perm = np.fromiter((where[str(x)] for x in ids.tolist()), dtype=np.intp, count=n)
    if np.array_equal(perm, np.arange(n)):
        return None, None
    return perm, None


def apply_orders(matrix: np.ndarray, group: np.ndarray, perms: Mapping[int, np.ndarray | None]) -> np.ndarray:
    """``matrix`` (m, w) with each row's columns in model order: rows of group g gathered by ``perms[g]``.

    ``group`` (m,) names each row's group (-1 or a group without a
    permutation: unchanged). ``perms[g]`` has n entries; a wider row (a
    similarity model's k(z, z) last) keeps its extra columns in place. One
    ``take`` per group; the input matrix is returned as is when nothing moves.
    """
    moving = [g for g, p in perms.items() if p is not None and (group == g).any()]
    if not moving:
        return matrix
    w = matrix.shape[1]

    def full(p: np.ndarray) -> np.ndarray:
        return p if p.size == w else np.concatenate([p, np.arange(p.size, w)])

    if len(moving) == 1 and (group == moving[0]).all():
        return np.take(matrix, full(perms[moving[0]]), axis=1)  # type: ignore[arg-type]
    out = np.array(matrix, copy=True)
    for g in moving:
        rows = np.flatnonzero(group == g)
        out[rows] = matrix[np.ix_(rows, full(perms[g]))]  # type: ignore[arg-type]
    return out
