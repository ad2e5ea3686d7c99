"""Progressive reading (``open_input(..., progressive=True)``, the one-shot ``streamembed embed``).

It gives up "whole or not at all" for overlap: an Arrow IPC file is read into
its buffer a chunk at a time *as decoding reaches it* (:class:`Filling`, on the
read-ahead thread), so the first batches are embedded while the rest is still
being read, still decoded zero-copy from that buffer. Parquet and JSON lines
are read whole: plain reads of Parquet column chunks measured 1.6-2x slower
here than a snapshot, because every chunk lands in freshly zeroed huge pages of
Arrow's allocator. An Arrow file that is truncated or changes while it is read
progressively raises :class:`~streamembed.stream.readers.base.FileChanged`
between chunks (a short read or a changed size, modification time or inode):
the rows before it were handed out, the rest is the caller's to report.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from streamembed.stream.readers.base import FileChanged, Signature, signature
from streamembed.stream.readers.slabs import SlabPool, read_into, shared_pool

#: Progressive reads (``open_input(progressive=True)``) fill their buffer this many bytes at a time.
FILL_BYTES = 16 << 20


class Filling:
    """A file read front to back into pooled slabs, as far as the reader needs it (see the module doc).

    :meth:`window` makes a byte range of the file available contiguously in
    the current slab (reading on the caller's thread, ``FILL_BYTES`` or more
    at a time; a range that does not fit moves, with what was read of it, to
    a fresh slab). Every read is followed by an ``fstat``: a short read or a
    changed signature raises :class:`FileChanged`. Bytes are never read twice
    and never held longer than a batch decoded from them lives.
    """

    def __init__(self, path: Path, fh: Any, sig: Signature, chunk: int | None = None,
                 pool: SlabPool | None = None) -> None:
        self.path, self.fh, self.signature, self.chunk = path, fh, sig, int(chunk or FILL_BYTES)
        self.size = sig.size
        self.pool = pool or shared_pool()
        self._slab: np.ndarray | None = None
        self._buffer: pa.Buffer | None = None
        self._base = 0  # file offset of the slab's first byte
        self._filled = 0  # bytes of the slab read so far
        self.done = False

    def window(self, start: int, end: int) -> tuple[pa.Buffer, np.ndarray, int]:
        """(Arrow buffer over the slab, the slab, offset of ``start`` in it) with file bytes [start, end) read.

        ``start`` never goes back before the previous call's ``start``; ``end``
        is clipped to the file size.
        """
        end = min(int(end), self.size)
        if self._slab is None or end - self._base > self._slab.size:
            new = self.pool.get(max(end - start, 1))
            keep = self._base + self._filled - start  # bytes of the range already read into the old slab
            if self._slab is not None and keep > 0:
                new[:keep] = self._slab[start - self._base:self._filled]
            self._slab, self._buffer = new, pa.py_buffer(new)
            self._base, self._filled = start, max(keep, 0)
        slab = self._slab
        while self._base + self._filled < end:
            at = self._base + self._filled
            want = min(slab.size - self._filled, max(end - at, self.chunk), self.size - at)
            n = read_into(self.fh, slab[self._filled:self._filled + want])
            self._filled += n
            if n < want:
                raise FileChanged(f"{self.path} was truncated while it was read (read {at + n} of {self.size} "
                                  f"bytes)")
            if signature(os.fstat(self.fh.fileno())) != self.signature:
                raise FileChanged(f"{self.path} changed while it was read")
        assert self._buffer is not None
        return self._buffer, slab, start - self._base

    def finish(self) -> None:
        """Read the rest; raise FileChanged if the file grew, shrank or was replaced meanwhile."""
        if self.done:
            return
        at = self._base + self._filled
        while at < self.size:  # what follows the last message (an IPC file's footer): read, not kept
            n = len(self.fh.read(min(self.chunk, self.size - at)))
            if n == 0:
                raise FileChanged(f"{self.path} was truncated while it was read (read {at} of {self.size} bytes)")
            at += n
        self._base, self._filled = at, 0
        extra = self.fh.read(1)
        if extra or signature(os.fstat(self.fh.fileno())) != self.signature \
                or signature(os.stat(self.path)) != self.signature:
            raise FileChanged(f"{self.path} changed while it was read")
        self.close()
        self.done = True

    def whole(self) -> np.ndarray:
        """The whole file in one buffer (for readers that need it all: read from the start, checked)."""
        self.fh.seek(0)
        data = np.empty(self.size, dtype=np.uint8)
        got = read_into(self.fh, data)
        if got != self.size or signature(os.fstat(self.fh.fileno())) != self.signature:
            raise FileChanged(f"{self.path} changed while it was read")
        self._slab = self._buffer = None
        self._base, self._filled = self.size, 0
        self.finish()
        return data

    def close(self) -> None:
        self._slab = self._buffer = None
        if not self.fh.closed:
            self.fh.close()


class OpenParquet:
    """A Parquet file opened to be read progressively: ``readers.parquet_fill`` reads its row groups.

    :meth:`finish` checks, once they were read, that the file is still the
    version opened (and was not appended to). :meth:`whole` (for readers
    that need the whole file: an unreadable file's first bytes) reads it into
    a pooled buffer, checked the same way.
    """

    def __init__(self, path: Path, fh: Any, sig: Signature, pool: SlabPool | None = None) -> None:
        self.path, self.fh, self.signature, self.pool = path, fh, sig, pool
        self.size = sig.size
        self.done = False
        self._data: np.ndarray | None = None

    def whole(self) -> np.ndarray:
        """The whole file (read from the start, checked)."""
        if self._data is None:
            data = (self.pool or shared_pool()).get(self.size + 1)[:self.size]
            self.fh.seek(0)
            if read_into(self.fh, data) != self.size:
                raise FileChanged(f"{self.path} was truncated while it was read")
            self.finish()
            self._data = data
        return self._data

    def finish(self) -> None:
        """Raise FileChanged if the file grew, shrank or was replaced since it was opened; close it."""
        if self.done:
            return
        self.fh.seek(self.size)
        if self.fh.read(1) or signature(os.fstat(self.fh.fileno())) != self.signature \
                or signature(os.stat(self.path)) != self.signature:
            raise FileChanged(f"{self.path} changed while it was read")
        self.close()
        self.done = True

    def close(self) -> None:
        if not self.fh.closed:
            self.fh.close()
