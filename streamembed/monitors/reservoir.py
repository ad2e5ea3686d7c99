"""The recent rows a refit can choose landmarks from when the stream carries objects or plain dissimilarity rows.

``DriftMonitor`` keeps two of these (beside its last block): one of feature
vectors (features input), and one of the most recent
``drift.reservoir_objects`` rows of the stream: their ids, their
dissimilarities to the current landmarks (the row itself) and, when rows
carry them, their objects (``stream.objects``). What a refit can do with them
(``candidates``):

* objects known (rows placed from their objects, or carrying them beside
  their dissimilarities): the refit computes every dissimilarity it needs by
  the metric itself (docs/objects.md, "Refits from objects");
* dissimilarity rows alone: the candidates' dissimilarities to the landmarks
  are known, their mutual ones are not — the daemon asks the producer for
  them (a refit request, ``daemon.refit_requests``).

After a refit the rows refer to the old landmarks: ``clear`` (the reservoir
refills with rows of the new map). Stored in preallocated arrays (one copy per batch of
its last ``capacity`` rows; no per-object Python).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["RecentRows", "RecentContents", "ring_write"]


@dataclass
class RecentContents:
    """The reservoir, oldest first: ids (k,), rows (k, n) or None, objects (k,) object array, (k, p), or None."""

    ids: np.ndarray
    rows: np.ndarray | None
    objects: np.ndarray | None


class RecentRows:
    """The most recent ``capacity`` (id, row, object) triples (see the module doc)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = int(capacity)
        self._ids = np.empty(self.capacity, dtype=object)
        self._rows: np.ndarray | None = None
        self._objects: np.ndarray | None = None
        self._next = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def clear(self) -> None:
        self._rows = self._objects = None
        self._next = self._size = 0

    def add(self, ids: np.ndarray, rows: np.ndarray | None, objects: Any = None) -> None:
        """Add a batch: ids (m,), rows (m, n) or None, objects (m,) / (m, p) or None (None items: no object)."""
        m = len(ids)
        if self.capacity == 0 or m == 0 or (rows is None and objects is None):
            return
        keep = slice(max(0, m - self.capacity), m)
        ids = ids[keep]
        rows = None if rows is None else np.asarray(rows)[keep]
        objects = None if objects is None else objects[keep]
        if not self._same_layout(rows, objects):
            self.clear()
        if self._size == 0:
            self._rows = None if rows is None else np.empty((self.capacity, rows.shape[1]), dtype=np.float64)
            self._objects = None if objects is None else np.empty((self.capacity, *np.shape(objects)[1:]),
                                                                  dtype=objects.dtype)
        k, start = len(ids), self._next
        self._next = ring_write(self._ids, start, ids)
        if self._rows is not None and rows is not None:
            ring_write(self._rows, start, rows)
        if self._objects is not None and objects is not None:
            ring_write(self._objects, start, objects)
        self._size = min(self.capacity, self._size + k)

    def _same_layout(self, rows: np.ndarray | None, objects: Any) -> bool:
        """Whether a batch of ``rows`` / ``objects`` can join what is kept (same width, same kind of objects)."""
        if self._size == 0:
            return True
        if (rows is None) != (self._rows is None) or (objects is None) != (self._objects is None):
            return False
        if rows is not None and self._rows is not None and rows.shape[1] != self._rows.shape[1]:
            return False
        return objects is None or self._objects is None or (
            objects.dtype == self._objects.dtype and np.shape(objects)[1:] == self._objects.shape[1:])

    def contents(self) -> RecentContents:
        """What is kept, oldest first; objects rows without an object (None) are left out when there are objects."""
        order = (self._next - self._size + np.arange(self._size)) % self.capacity
        ids = self._ids[order]
        rows = None if self._rows is None else self._rows[order]
        objects = None if self._objects is None else self._objects[order]
        if objects is not None and objects.dtype == object:
            has = np.fromiter((x is not None for x in objects), dtype=bool, count=len(objects))
            if not has.all():
                ids, objects = ids[has], objects[has]
                rows = None if rows is None else rows[has]
        return RecentContents(ids, rows, objects)


def ring_write(ring: np.ndarray, start: int, values: np.ndarray) -> int:
    """Write ``values`` (k ≤ len(ring) items along axis 0) into the circular buffer ``ring`` from position
    ``start`` on, wrapping at its end; returns the position after the last written. At most two slice
    assignments: a modular fancy index over a batch of 8,192 rows of 200 costs 1.5 ms, a copy a fraction."""
    cap, k = ring.shape[0], values.shape[0]
    first = min(k, cap - start)
    ring[start:start + first] = values[:first]
    if k > first:
        ring[:k - first] = values[first:]
    return (start + k) % cap
