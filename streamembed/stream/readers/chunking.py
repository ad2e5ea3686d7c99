"""Cut a reader's record batches into chunks at boundaries that do not depend on where reading resumed.

Every reader yields chunks of exactly ``batch_rows`` rows (the last one
shorter) starting at ``start_row``, so a file resumed from a checkpoint is cut
at the same boundaries as the first time (:func:`rebatch`). A file whose rows
carry ``cross`` (and no ``block`` column) is one block and is read as one chunk
(up to ``max_block_rows``, :func:`chunk_rows`). A file with a ``block`` column
is cut at block boundaries only (:func:`whole_blocks`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from streamembed.stream.blocks import block_units
from streamembed.stream.readers.base import ReadChunk, truncated
from streamembed.stream.records import (
    INPUT_BLOCK,
    INPUT_CROSS,
)


def chunk_rows(schema: pa.Schema, batch_rows: int, total: int | None, max_block_rows: int) -> int:
    if INPUT_CROSS in schema.names and INPUT_BLOCK not in schema.names:
        # one block per file; a too-large block is read as max_block_rows + 1 rows
        # so that decoding rejects it with a clear reason
        if total is not None and total <= max_block_rows:
            return max(total, 1)
        return max_block_rows + 1
    return batch_rows


def whole_blocks(chunks: Iterable[ReadChunk], batch_rows: int, max_block_rows: int) -> Iterator[ReadChunk]:
    """Re-cut chunks of a file with a ``block`` column so that no block straddles two chunks.

    Each chunk is the longest run of whole units (a block, or a row outside
    blocks) from its first row with at most ``batch_rows`` rows; a longer
    block is a chunk of its own, cut at ``max(batch_rows, max_block_rows) + 1``
    rows if it is longer still (decoding then refuses it as too large). The
    cut depends only on the rows from the chunk's first row on, so a file
    resumed at a chunk boundary is cut as the first time. Chunks of other
    files, and chunks with rejected lines or an unfinished tail, pass through
    unchanged (after whatever was buffered).
    """
    limit = max(batch_rows, max_block_rows) + 1
    buf: pa.Table | None = None
    start = 0

    def cut(final: bool) -> Iterator[ReadChunk]:
        nonlocal buf, start
        while buf is not None and buf.num_rows:
            n = buf.num_rows
            if not final and n <= max(batch_rows, limit):
                return  # more rows may decide where this chunk ends
            units = block_units(buf)
            bounds = np.append(units[units > 0], n if final else n + 1)  # a boundary at n only at the end
            inside = bounds[bounds <= batch_rows]
            at = int(inside[-1]) if inside.size else int(min(bounds[0], limit, n))
            if at > n:
                return
            yield ReadChunk(buf.slice(0, at), start, start + at)
            start += at
            buf = buf.slice(at) if at < n else None

    for chunk in chunks:
        table = chunk.table
        plain = (table is None or INPUT_BLOCK not in table.schema.names or chunk.rows is not None
                 or chunk.dead or chunk.tail is not None)
        if plain:
            yield from cut(True)
            buf = None
            yield chunk
            continue
        if buf is not None:
            try:
                buf = pa.concat_tables([buf, table])
            except (pa.ArrowException, ValueError):  # chunks of one file that disagree (JSON lines inferred apart)
                yield from cut(True)
                buf = None
        if buf is None:
            buf, start = table, chunk.start_row
        yield from cut(False)
    yield from cut(True)


def rebatch(batches: Iterable[pa.RecordBatch], schema: pa.Schema, rows: int, skip: int, start_row: int, name: str,
            final: bool) -> Iterator[ReadChunk]:
    """Exactly ``rows``-row chunks from a stream of record batches, after skipping ``skip``."""
    pending: list[pa.RecordBatch] = []
    have = 0
    pos = start_row
    it = iter(batches)
    while True:
        try:
            b = next(it)
        except StopIteration:
            break
        except (pa.ArrowException, OSError, ValueError) as exc:
            if isinstance(exc, MemoryError):
                raise  # out of memory is the environment's failure, not the file's: never a dead letter
            if pending:
                t = pa.Table.from_batches(pending, schema)
                yield ReadChunk(t, pos, pos + t.num_rows)
                pos += t.num_rows
            yield truncated(name, pos, f"rows from {pos} on could not be read (truncated or corrupt): {exc}", final)
            return
        if skip:
            if b.num_rows <= skip:
                skip -= b.num_rows
                continue
            b = b.slice(skip)
            skip = 0
        pending.append(b)
        have += b.num_rows
        while have >= rows:
            t = pa.Table.from_batches(pending, schema)
            head, rest = t.slice(0, rows), t.slice(rows)
            yield ReadChunk(head, pos, pos + rows)
            pos += rows
            pending = rest.to_batches()
            have = rest.num_rows
    if have:
        t = pa.Table.from_batches(pending, schema)
        yield ReadChunk(t, pos, pos + t.num_rows)
