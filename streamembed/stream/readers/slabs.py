"""Reusable read buffers ("slabs") that files are read into and decoded from zero-copy.

Snapshots are read with ``readinto`` into a buffer of the process's slab pool
(:class:`SlabPool`), which is reused for the next file once nothing refers to
the previous one: a fresh 600 MB buffer costs 0.4-1.5 s of page faults and
zeroing here, a reused one nothing. :func:`small_columns_copied` keeps the
output (which keeps the ids) from pinning a slab or a mapping.
"""

from __future__ import annotations

import mmap
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from streamembed.memlimit import read_budget
from streamembed.stream.readers.base import VECTOR_FIELDS

#: The memory page: the stride of :func:`touch_pages`.
PAGE_BYTES = mmap.PAGESIZE
#: Size of a pooled read buffer (a larger message gets a slab of its own size).
SLAB_BYTES = 64 << 20


def read_into(fh: Any, buf: np.ndarray) -> int:
    """Fill ``buf`` from ``fh`` (unbuffered) with as few ``readinto`` calls as the kernel allows; bytes read."""
    view = buf.data
    got = 0
    while got < len(view):
        n = fh.readinto(view[got:])
        if not n:
            break
        got += n
    return got


class SlabPool:
    """Reusable read buffers ("slabs"): a slab is handed out again once nothing references it any more.

    Arrays decoded zero-copy from a slab keep it alive through the Arrow
    buffer that wraps it (a strong reference), so "only the pool holds it"
    (``sys.getrefcount``) means every batch read into it is gone. Reusing
    slabs spares the page faults and zeroing of fresh memory, which cost more
    than the read itself (measured here: reading 600 MB into fresh memory took
    0.4-1.5 s, into reused buffers 0.17 s).
    """

    def __init__(self, slab_bytes: int | None = None) -> None:
        self.slab_bytes = int(slab_bytes or min(SLAB_BYTES, read_budget()))
        self._slabs: list[np.ndarray] = []
        self._lock = threading.Lock()

    def get(self, capacity: int) -> np.ndarray:
        with self._lock:
            # referenced only by the list and getrefcount's argument: no batch holds it any more
            free = [i for i in range(len(self._slabs)) if sys.getrefcount(self._slabs[i]) <= 2]
            for i in free:
                if self._slabs[i].size >= capacity:
                    return self._slabs[i]
            # free slabs too small for this one are dropped if oversized (one huge message must not
            # keep its memory for good) or beyond a few spare ones
            drop = {i for k, i in enumerate(free) if self._slabs[i].size > self.slab_bytes or k >= 4}
            self._slabs = [s for i, s in enumerate(self._slabs) if i not in drop]
            # anonymous memory: pages are zeroed by the kernel as the read first touches them (a
            # bytearray zero-fills them all first, a second pass; np.empty asks for huge pages,
            # whose compaction stalled a 600 MB allocation for over a second here)
            slab = np.frombuffer(mmap.mmap(-1, max(int(capacity), self.slab_bytes)), dtype=np.uint8)
            self._slabs.append(slab)
            return slab


_POOL: SlabPool | None = None


def shared_pool() -> SlabPool:
    """The process's slab pool (kept across files and runs, so their slabs are reused)."""
    global _POOL
    if _POOL is None:
        _POOL = SlabPool()
    return _POOL


def small_columns_copied(batches: Iterable[pa.RecordBatch], schema: pa.Schema,
                         mapped: bool = False) -> Iterator[pa.RecordBatch]:
    """``batches`` with every column but the vectors copied out of the buffer they were decoded from.

    The vectors stay zero-copy views of the file's slab or mapping; the ids
    and other small columns (a few bytes a row) are copied, so that the
    output, which keeps the ids, never refers to the input's memory. With
    ``mapped`` (the batches are views of a memory-mapped file) the vectors'
    pages are faulted in here (:func:`touch_pages`), on the thread that reads,
    and not by the projection kernel on the loop's thread.
    """
    small = [i for i, f in enumerate(schema) if f.name not in VECTOR_FIELDS]
    vectors = [i for i, f in enumerate(schema) if f.name in VECTOR_FIELDS] if mapped else []
    for b in batches:
        for i in vectors:
            touch_pages(b.column(i))
        if small:
            cols = b.columns
            for i in small:
                cols[i] = pa.concat_arrays([cols[i]])
            b = pa.RecordBatch.from_arrays(cols, schema=schema)
        yield b


def touch_pages(col: pa.Array) -> None:
    """Read one byte of every page of ``col``'s buffers: a mapped file's page faults (0.1 s per 800 MB here)
    are taken now, by numpy's strided reduction, which runs without the GIL."""
    for buf in col.buffers():
        if buf is not None and buf.size > PAGE_BYTES:
            np.frombuffer(buf, dtype=np.uint8)[::PAGE_BYTES].max()
