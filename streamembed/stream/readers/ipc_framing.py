"""An Arrow IPC stream read only as far as decoding has reached (:mod:`.progressive`), by pyarrow's own reader.

pyarrow's :class:`~pyarrow.ipc.RecordBatchStreamReader` frames the messages
(Arrow columnar format, "Encapsulated message format": a continuation marker,
the metadata length, the flatbuffer metadata, the body) and asks its input for
exactly the bytes of each part. :class:`FillingStream` is that input: a
file-like object over :class:`~streamembed.stream.readers.progressive.Filling`
whose ``read`` hands out Arrow buffers over the slab the bytes were read into,
so only as much of the file is read as the batches decoded so far need, and
each batch is decoded zero-copy from its slab. An IPC *file* is an 8-byte
magic, the same stream, then a footer (not needed: the stream ends with its
end-of-stream marker; :meth:`Filling.finish` reads and checks the rest).
A :class:`~streamembed.stream.readers.base.FileChanged` raised by a read (a
short read, a changed size, modification time or inode) comes out of the
reader as itself, between batches.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.ipc as ipc

from streamembed.stream.readers.base import ARROW_FILE_MAGIC
from streamembed.stream.readers.progressive import Filling
from streamembed.stream.readers.slabs import small_columns_copied


class FillingStream:
    """A forward-only binary file over ``fill`` from file offset ``pos``, for :func:`pyarrow.ipc.open_stream`.

    ``read(n)`` returns up to ``n`` bytes (fewer only at the end of the file)
    as a :class:`pyarrow.Buffer` slice of the slab they were read into; Arrow
    keeps the slab alive through it for as long as a batch uses it.
    """

    def __init__(self, fill: Filling, pos: int = 0) -> None:
        self.fill, self.pos = fill, int(pos)
        self.closed = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.pos

    def read(self, nbytes: int = -1) -> pa.Buffer:
        end = self.fill.size if nbytes is None or nbytes < 0 else min(self.pos + int(nbytes), self.fill.size)
        if end <= self.pos:
            return pa.py_buffer(b"")
        buf, _, off = self.fill.window(self.pos, end)
        out = buf.slice(off, end - self.pos)
        self.pos = end
        return out

    def close(self) -> None:
        self.closed = True


def framed_stream(fill: Filling) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """(schema, batches) of an Arrow IPC stream or file read progressively from ``fill``.

    Columns other than the vectors are copied out of the slab (a few bytes a
    row), so the output, which keeps the ids, does not pin input slabs.
    Raises what opening the stream raises (``pa.ArrowInvalid`` for a file
    that is not an IPC stream, ``FileChanged``).
    """
    _, slab, off = fill.window(0, 8)
    start = 8 if slab[off:off + 6].tobytes() == ARROW_FILE_MAGIC else 0
    reader = ipc.open_stream(pa.PythonFile(FillingStream(fill, start), mode="r"))
    return reader.schema, small_columns_copied(stream_batches(reader), reader.schema)


def stream_batches(reader: ipc.RecordBatchStreamReader) -> Iterator[pa.RecordBatch]:
    """The batches of ``reader``, lazily; a read error is raised by the ``next`` that meets it."""
    while True:
        try:
            yield reader.read_next_batch()
        except StopIteration:
            return
