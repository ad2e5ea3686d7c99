"""Parquet files, a row group at a time (a row group too large for the memory limit is refused, not read)."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from streamembed.memlimit import current_limit, format_bytes
from streamembed.stream.readers.base import ReadChunk, unreadable
from streamembed.stream.readers.chunking import chunk_rows, rebatch
from streamembed.stream.readers.opening import Input, looks_unfinished
from streamembed.stream.readers.parquet_fill import GroupFile, GroupFill


def iter_parquet(src: Input, batch_rows: int, start_row: int, max_block_rows: int, name: str,
                 final: bool) -> Iterator[ReadChunk]:
    """Chunks of an opened Parquet file (``iter_file``'s arguments), resumed at the row group holding ``start_row``."""
    fill = src.open_parquet
    try:
        if fill is not None and not fill.done:  # read progressively: the footer first, the row groups as reached
            fd, size = fill.fh.fileno(), fill.size
            tail = os.pread(fd, 8, max(size - 8, 0))
            footer_start = size - 8 - struct.unpack("<I", tail[:4])[0]
            # the footer, and at least the 64 KiB pyarrow reads first from the end
            tail_start = max(0, min(footer_start, size - (64 << 10)))
            gfile = GroupFile(size, tail_start, os.pread(fd, size - tail_start, tail_start))
            pf = pq.ParquetFile(pa.PythonFile(gfile, mode="r"), pre_buffer=False)
        else:
            # streamed (no snapshot): no pre-buffering, which would read every row group asked for up front,
            # i.e. the whole file (measured: 1.6 GB of RSS for a 1.5 GB file; 0.28 GB without)
            fill = None
            pf = pq.ParquetFile(src.native(), pre_buffer=src.snapshot is not None)
        schema = pf.schema_arrow
        md = pf.metadata
    except Exception as exc:  # any failure to open is "unreadable" (or an unfinished file)
        if not final and looks_unfinished(src, (b"PAR1",)):
            yield ReadChunk(None, start_row, start_row, tail=f"a Parquet file without its footer (unfinished?): {exc}")
        else:
            yield unreadable(name, start_row, f"not a readable Parquet file: {exc}")
        return
    too_big = _oversized_row_group(md)
    if too_big is not None:
        yield unreadable(name, start_row, too_big)
        return
    total = md.num_rows
    rows = chunk_rows(schema, batch_rows, total, max_block_rows)
    # resume: start at the row group holding start_row
    first_rg, rg_start = 0, 0
    for i in range(md.num_row_groups):
        n = md.row_group(i).num_rows
        if rg_start + n > start_row:
            first_rg = i
            break
        rg_start += n
    else:
        return  # start_row is past the end
    groups = list(range(first_rg, md.num_row_groups))
    # one thread: decoding two row groups at once measured slower here (page faults
    # and allocator contention on 131 MB batches); the loop overlaps reading with
    # embedding instead (its read-ahead)
    if fill is None:
        batches = pf.iter_batches(batch_size=max(rows, 1024), row_groups=groups, use_threads=False)
    else:
        batches = _by_group(pf, groups, max(rows, 1024), fill, gfile, footer_start)
    yield from rebatch(batches, schema, rows, start_row - rg_start, start_row, name, True)


def _by_group(pf: pq.ParquetFile, groups: list[int], batch_size: int, fill: Any, gfile: GroupFile,
              footer_start: int) -> Iterator[pa.RecordBatch]:
    """The batches of ``groups``, each row group read into a pooled slab on the fill thread (``GroupFill``).

    A row group's column chunks end where the next one's start (the last
    one's where the footer starts), so its range is read up to there.
    """
    md = pf.metadata
    starts = [_row_group_start(md, g) for g in groups]
    ranges = [(s, starts[k + 1] if k + 1 < len(groups) else footer_start) for k, s in enumerate(starts)]
    ranges = [(s, max(e, _row_group_end(md, g))) for (s, e), g in zip(ranges, groups, strict=True)]
    reader = GroupFill(fill.path, fill.fh, fill.signature, ranges)
    try:
        for k, g in enumerate(groups):
            slab = reader.group(k)
            gfile.show(ranges[k][0], slab.data)
            del slab
            yield from pf.iter_batches(batch_size=batch_size, row_groups=[g], use_threads=False)
            gfile.show(0, None)
    finally:
        reader.close()
    fill.finish()


def _row_group_start(md: Any, g: int) -> int:
    rg = md.row_group(g)
    return min(_chunk_start(rg.column(j)) for j in range(rg.num_columns))


def _row_group_end(md: Any, g: int) -> int:
    rg = md.row_group(g)
    return max(_chunk_start(c) + c.total_compressed_size for c in (rg.column(j) for j in range(rg.num_columns)))


def _chunk_start(c: Any) -> int:
    start = int(c.data_page_offset)
    if c.has_dictionary_page and c.dictionary_page_offset is not None:
        start = min(start, int(c.dictionary_page_offset))
    return start


def _oversized_row_group(md: Any) -> str | None:
    """Why a Parquet file cannot be read within the memory limit (a row group is read whole), or None."""
    limit = current_limit()
    if limit is None:
        return None
    cap = limit.bytes // 4
    for i in range(md.num_row_groups):
        size = md.row_group(i).total_byte_size  # uncompressed
        if size > cap:
            return (f"row group {i} holds {format_bytes(size)} uncompressed and is read whole, more than a quarter of "
                    f"the memory limit ({format_bytes(limit.bytes)}, {limit.source}): rewrite the file with smaller "
                    f"row groups")
    return None
