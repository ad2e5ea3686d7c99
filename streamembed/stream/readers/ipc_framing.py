"""The Arrow IPC message framing, for reading a file only as far as decoding has reached (:mod:`.progressive`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from streamembed.stream.readers.base import ARROW_FILE_MAGIC
from streamembed.stream.readers.progressive import Filling
from streamembed.stream.readers.slabs import small_columns_copied


def framed_stream(fill: Filling) -> tuple[pa.Schema, Iterator[pa.RecordBatch]] | None:
    """(schema, batches) of an Arrow IPC stream or file read progressively; None: use the ordinary reader.

    The IPC framing (Arrow columnar format, "Encapsulated message format": a
    continuation marker, the metadata length, the flatbuffer metadata holding
    the body length, the body) says how far each message reaches, so only
    that much of the file is read before the message is decoded, zero-copy,
    from its slab. An IPC *file* is an 8-byte magic, the same stream, then a
    footer (not needed: the stream ends with its end-of-stream marker).
    Columns other than the vectors are copied out of the slab (a few bytes a
    row), so the output, which keeps the ids, does not pin input slabs.
    Schemas with dictionary columns are read whole (their dictionary messages
    need the stream reader).
    """
    _, slab, off = fill.window(0, 8)
    start = 8 if slab[off:off + 6].tobytes() == ARROW_FILE_MAGIC else 0
    msg, pos = _next_message(fill, start)
    if msg is None:
        raise EOFError("no schema message")
    if msg.type != "schema":
        raise pa.ArrowInvalid(f"the first message is a {msg.type}, expected the schema")
    schema = ipc.read_schema(msg)
    if any(_has_dictionary(f.type) for f in schema):
        return None
    def batches() -> Iterator[pa.RecordBatch]:
        nonlocal pos
        while True:
            m, pos = _next_message(fill, pos)
            if m is None:
                return
            if m.type != "record batch":
                raise pa.ArrowInvalid(f"unexpected {m.type} message in the stream")
            b = ipc.read_record_batch(m, schema)
            del m
            yield b

    return schema, small_columns_copied(batches(), schema)


def _has_dictionary(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return True
    return any(_has_dictionary(t.field(i).type) for i in range(t.num_fields))


def _u(data: np.ndarray, at: int, size: int, signed: bool = False) -> int:
    if at < 0 or at + size > data.size:
        raise pa.ArrowInvalid("corrupt message metadata")
    return int.from_bytes(data[at:at + size].tobytes(), "little", signed=signed)


def _body_length(meta: np.ndarray) -> int:
    """``Message.bodyLength`` of a flatbuffer ``Message`` (field 3: root table -> vtable -> offset; 0 if absent)."""
    root = _u(meta, 0, 4)
    vtable = root - _u(meta, root, 4, signed=True)
    vt_size = _u(meta, vtable, 2)
    if vt_size < 12:
        return 0
    field = _u(meta, vtable + 10, 2)
    return _u(meta, root + field, 8, signed=True) if field else 0


def _next_message(fill: Filling, pos: int) -> tuple[Any, int]:
    """(message at file offset ``pos``, the offset after it), or (None, pos) at the end of the stream."""
    size = fill.size
    if pos >= size:
        return None, pos
    _, slab, off = fill.window(pos, pos + 8)
    if pos + 4 > size:
        raise pa.ArrowInvalid(f"truncated message prefix at byte {pos}")
    word = _u(slab, off, 4)
    prefix = 4
    if word == 0xFFFFFFFF:
        if pos + 8 > size:
            raise pa.ArrowInvalid(f"truncated message prefix at byte {pos}")
        word = _u(slab, off + 4, 4, signed=True)
        prefix = 8
    if word == 0:
        return None, pos + prefix  # end-of-stream marker
    if word < 0 or pos + prefix + word > size:
        raise pa.ArrowInvalid(f"truncated message at byte {pos} (metadata of {word} bytes, file of {size})")
    _, slab, off = fill.window(pos, pos + prefix + word)
    body = _body_length(slab[off + prefix:off + prefix + word])
    end = pos + prefix + word + body
    if body < 0 or end > size:
        raise pa.ArrowInvalid(f"truncated message body at byte {pos} (body of {body} bytes, file of {size})")
    buf, slab, off = fill.window(pos, end)
    msg = ipc.read_message(pa.BufferReader(buf.slice(off, end - pos)))  # the body: a zero-copy slice of the slab
    return msg, end
