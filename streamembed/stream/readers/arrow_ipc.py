"""Arrow IPC files and streams (with or without the file footer; progressively through :mod:`.ipc_framing`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.ipc as ipc

from streamembed.stream.readers.base import ARROW_FILE_MAGIC, ReadChunk, unreadable
from streamembed.stream.readers.chunking import chunk_rows, rebatch
from streamembed.stream.readers.ipc_framing import framed_stream, stream_batches
from streamembed.stream.readers.opening import Input, looks_unfinished
from streamembed.stream.readers.slabs import small_columns_copied


def iter_arrow(src: Input, batch_rows: int, start_row: int, max_block_rows: int, name: str,
               final: bool) -> Iterator[ReadChunk]:
    """Chunks of an opened Arrow IPC file or stream (``iter_file``'s arguments): progressively when ``src`` fills.

    Otherwise an IPC file is read through its footer, or, without one (an
    unfinished or truncated file), through the stream after its magic.
    """
    batches: Iterable[pa.RecordBatch]
    no_footer = False
    if src.filling is not None:
        try:
            schema, batches = framed_stream(src.filling)
        except (pa.ArrowException, OSError, ValueError, EOFError) as exc:
            yield unreadable(name, start_row, f"not a readable Arrow IPC file or stream: {exc}")
            return
        yield from rebatch(batches, schema, chunk_rows(schema, batch_rows, None, max_block_rows), start_row,
                           start_row, name, final)
        return
    try:
        f = src.native()
        head = f.read(6)
        f.seek(0)
        if head == ARROW_FILE_MAGIC:
            try:
                fr = ipc.open_file(f)
                schema = fr.schema
                batches = (fr.get_batch(i) for i in range(fr.num_record_batches))
            except pa.ArrowInvalid:
                # no footer (an unfinished or truncated IPC file): read its stream part as far as it goes
                f.seek(8)
                sr = ipc.open_stream(f)
                schema = sr.schema
                batches = stream_batches(sr)
                no_footer = True
        else:
            sr = ipc.open_stream(f)
            schema = sr.schema
            batches = stream_batches(sr)
    except Exception as exc:
        if not final and looks_unfinished(src, (ARROW_FILE_MAGIC, b"\xff\xff\xff\xff")):
            yield ReadChunk(None, start_row, start_row,
                            tail=f"an Arrow IPC file that cannot be read yet (unfinished?): "
                                 f"{exc}")
        else:
            yield unreadable(name, start_row, f"not a readable Arrow IPC file or stream: {exc}")
        return
    rows = chunk_rows(schema, batch_rows, None, max_block_rows)
    if src.mapped is not None:
        batches = small_columns_copied(batches, schema, mapped=True)
    end = start_row
    for chunk in rebatch(batches, schema, rows, start_row, start_row, name, final):
        end = chunk.end_row
        yield chunk
        if chunk.tail is not None:
            return
    if no_footer and not final:
        yield ReadChunk(None, end, end, tail="an Arrow IPC file without its footer (unfinished?)")
