"""Read input files (Parquet, Arrow IPC, JSON lines) in batches of rows.

Every reader yields :class:`ReadChunk` objects of exactly ``batch_rows`` rows
(the last one shorter) starting at ``start_row``, so a file resumed from a
checkpoint is cut at the same boundaries as the first time. A file whose
rows carry ``cross`` is one block and is read as one chunk (up to
``max_block_rows``). Failures never raise: an unreadable file or the
unreadable rest of a file becomes a :class:`~streamembed.stream.codecs.DeadRecord`.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.json as pajson
import pyarrow.parquet as pq

from streamembed.stream.codecs import DeadRecord
from streamembed.stream.records import (
    INPUT_CROSS,
    INPUT_DISSIMILARITIES,
    INPUT_EVENT_TIME,
    INPUT_FEATURES,
    INPUT_ID,
    INPUT_LANDMARK_VERSION,
    Reason,
)

__all__ = ["ReadChunk", "file_format", "iter_file", "parse_json_lines", "FORMATS"]

#: file extension -> format name
FORMATS: dict[str, str] = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
    ".arrows": "arrow",
    ".ipc": "arrow",
    ".feather": "arrow",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}

_ARROW_FILE_MAGIC = b"ARROW1"


@dataclass
class ReadChunk:
    """Rows ``start_row`` .. ``end_row - 1`` of a file.

    ``table`` holds the rows that could be parsed (None if none); ``rows``
    gives the file row of each table row when they are not contiguous
    (JSON lines with rejected lines), else None (table row i = start_row + i).
    ``dead`` are records refused while reading.
    """

    table: pa.Table | None
    start_row: int
    end_row: int
    dead: list[DeadRecord] = field(default_factory=list)
    rows: np.ndarray | None = None


def file_format(path: str | os.PathLike[str]) -> str | None:
    """'parquet', 'arrow', 'jsonl' or None from the file name."""
    return FORMATS.get(Path(path).suffix.lower())


def iter_file(
    path: str | os.PathLike[str],
    *,
    batch_rows: int,
    start_row: int = 0,
    max_block_rows: int = 4096,
    name: str | None = None,
) -> Iterator[ReadChunk]:
    """Chunks of ``path`` from ``start_row`` on; ``name`` is used in dead letters."""
    name = name if name is not None else str(path)
    fmt = file_format(path)
    if fmt is None:
        yield _unreadable(name, start_row, f"unknown file extension {Path(path).suffix!r}")
        return
    reader = {"parquet": _iter_parquet, "arrow": _iter_arrow, "jsonl": _iter_jsonl}[fmt]
    yield from reader(Path(path), batch_rows, start_row, max_block_rows, name)


def _unreadable(name: str, row: int, detail: str) -> ReadChunk:
    return ReadChunk(None, row, row, [DeadRecord(Reason.UNREADABLE_FILE, detail, file=name,
                                                 row=row if row else None)])


def _truncated(name: str, row: int, detail: str) -> ReadChunk:
    return ReadChunk(None, row, row, [DeadRecord(Reason.UNDECODABLE, detail, file=name, row=row)])


def _chunk_rows(schema: pa.Schema, batch_rows: int, total: int | None, max_block_rows: int) -> int:
    if INPUT_CROSS in schema.names:
        # one block per file; a too-large block is read as max_block_rows + 1 rows
        # so that decoding rejects it with a clear reason
        if total is not None and total <= max_block_rows:
            return max(total, 1)
        return max_block_rows + 1
    return batch_rows


def _rebatch(
    batches: Iterable[pa.RecordBatch], schema: pa.Schema, rows: int, skip: int, start_row: int, name: str
) -> Iterator[ReadChunk]:
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
            if pending:
                t = pa.Table.from_batches(pending, schema)
                yield ReadChunk(t, pos, pos + t.num_rows)
                pos += t.num_rows
            yield _truncated(name, pos, f"rows from {pos} on could not be read (truncated or corrupt): {exc}")
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


def _iter_parquet(path: Path, batch_rows: int, start_row: int, max_block_rows: int, name: str) -> Iterator[ReadChunk]:
    try:
        pf = pq.ParquetFile(path, memory_map=True)
        schema = pf.schema_arrow
        md = pf.metadata
    except Exception as exc:  # noqa: BLE001 - any failure to open is "unreadable"
        yield _unreadable(name, start_row, f"not a readable Parquet file: {exc}")
        return
    total = md.num_rows
    rows = _chunk_rows(schema, batch_rows, total, max_block_rows)
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
    # and allocator contention on 131 MB batches); the embed command overlaps
    # reading with embedding instead (pipeline.prefetch)
    batches = pf.iter_batches(batch_size=max(rows, 1024), row_groups=groups, use_threads=False)
    yield from _rebatch(batches, schema, rows, start_row - rg_start, start_row, name)


def _iter_arrow(path: Path, batch_rows: int, start_row: int, max_block_rows: int, name: str) -> Iterator[ReadChunk]:
    try:
        source = pa.memory_map(str(path), "r")
        buf = source.read_buffer()
    except Exception as exc:  # noqa: BLE001
        yield _unreadable(name, start_row, f"cannot open: {exc}")
        return
    batches: Iterable[pa.RecordBatch]
    try:
        if buf.size >= 6 and buf[:6].to_pybytes() == _ARROW_FILE_MAGIC:
            try:
                fr = ipc.open_file(buf)
                schema = fr.schema
                batches = (fr.get_batch(i) for i in range(fr.num_record_batches))
            except pa.ArrowInvalid:
                # no footer (truncated IPC file): read its stream part as far as it goes
                sr = ipc.open_stream(buf.slice(8))
                schema = sr.schema
                batches = _stream_batches(sr)
        else:
            sr = ipc.open_stream(buf)
            schema = sr.schema
            batches = _stream_batches(sr)
    except Exception as exc:  # noqa: BLE001
        yield _unreadable(name, start_row, f"not a readable Arrow IPC file or stream: {exc}")
        return
    rows = _chunk_rows(schema, batch_rows, None, max_block_rows)
    yield from _rebatch(batches, schema, rows, start_row, start_row, name)


def _stream_batches(reader: ipc.RecordBatchStreamReader) -> Iterator[pa.RecordBatch]:
    while True:
        try:
            yield reader.read_next_batch()
        except StopIteration:
            return


# ----------------------------------------------------------------------------- JSON lines

#: JSON-lines parse schema. event_time stays a string here; decoding parses it.
_JSON_SCHEMA = pa.schema(
    [
        pa.field(INPUT_ID, pa.string()),
        pa.field(INPUT_DISSIMILARITIES, pa.list_(pa.float64())),
        pa.field(INPUT_FEATURES, pa.list_(pa.float64())),
        pa.field(INPUT_LANDMARK_VERSION, pa.int64()),
        pa.field(INPUT_EVENT_TIME, pa.string()),
        pa.field(INPUT_CROSS, pa.list_(pa.float64())),
    ]
)
_VECTOR_FIELDS = (INPUT_DISSIMILARITIES, INPUT_FEATURES, INPUT_CROSS)


def _drop_unused(table: pa.Table) -> pa.Table:
    """Drop all-null optional columns (keys no line used), keep ``id``."""
    drop = [c for c in table.schema.names if c != INPUT_ID and table.column(c).null_count == table.num_rows]
    return table.drop_columns(drop) if drop else table


def _iter_jsonl(path: Path, batch_rows: int, start_row: int, max_block_rows: int, name: str) -> Iterator[ReadChunk]:
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        yield _unreadable(name, start_row, f"cannot open: {exc}")
        return
    with f:
        first = f.readline()
        f.seek(0)
        rows = max_block_rows + 1 if b'"cross"' in first else batch_rows
        collections.deque(itertools.islice(f, start_row), maxlen=0)  # skip, C-level
        pos = start_row
        while True:
            try:
                lines = list(itertools.islice(f, rows))
            except OSError as exc:
                yield _truncated(name, pos, f"read error: {exc}")
                return
            if not lines:
                return
            yield _parse_lines(lines, pos, name)
            pos += len(lines)


def _parse_lines(lines: list[bytes], start: int, name: str) -> ReadChunk:
    """Fast path: one vectorised pyarrow JSON parse of the whole chunk."""
    end = start + len(lines)
    if min(map(len, lines)) > 2:  # no blank lines (pyarrow would skip them, shifting rows)
        try:
            table = pajson.read_json(
                pa.py_buffer(b"".join(lines)),
                read_options=pajson.ReadOptions(use_threads=False, block_size=sum(map(len, lines)) + 1),
                parse_options=pajson.ParseOptions(explicit_schema=_JSON_SCHEMA, unexpected_field_behavior="ignore"),
            )
            if table.num_rows == len(lines):
                return ReadChunk(_drop_unused(table), start, end)
        except (pa.ArrowException, ValueError):
            pass
    return _parse_lines_slowly(lines, start, name)


def parse_json_lines(lines: list[bytes], start: int = 0, name: str = "") -> ReadChunk:
    """Parse JSON lines (one object per line, no newline inside) into rows and dead letters.

    The same parser and checks as JSON-lines files (used for JSON Kafka
    messages); line j is row ``start + j`` of ``name``.
    """
    return _parse_lines(lines, start, name)


def _parse_lines_slowly(lines: list[bytes], start: int, name: str) -> ReadChunk:
    """The bad path: line by line, so each bad line gets its own dead letter."""
    dead: list[DeadRecord] = []
    good: list[dict[str, Any]] = []
    good_rows: list[int] = []
    good_text: list[str] = []
    for j, line in enumerate(lines):
        row = start + j
        stripped = line.strip()
        if not stripped:
            continue
        try:
            text = stripped.decode("utf-8")
        except UnicodeDecodeError as exc:
            dead.append(DeadRecord(Reason.UNDECODABLE, f"not UTF-8: {exc}", file=name, row=row, raw=line))
            continue
        try:
            obj = json.loads(text)
        except ValueError as exc:
            dead.append(DeadRecord(Reason.UNDECODABLE, f"not JSON: {exc}", file=name, row=row, raw=line))
            continue
        if not isinstance(obj, dict):
            dead.append(DeadRecord(Reason.UNDECODABLE, "a JSON line must be an object", file=name, row=row,
                                   record=text))
            continue
        rid = obj.get(INPUT_ID)
        if rid is not None and not isinstance(rid, str):
            dead.append(DeadRecord(Reason.MISSING_ID, f"id must be a string, got {type(rid).__name__}",
                                   file=name, row=row, record=text))
            continue
        good.append(obj)
        good_rows.append(row)
        good_text.append(text)
    table: pa.Table | None = None
    if good:
        try:
            table = pa.Table.from_pylist(good, schema=_JSON_SCHEMA)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            keep: list[int] = []
            for j, obj in enumerate(good):
                try:
                    pa.Table.from_pylist([obj], schema=_JSON_SCHEMA)
                    keep.append(j)
                except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                    vector = any(not _all_numbers(obj.get(k)) for k in _VECTOR_FIELDS)
                    reason = Reason.NON_NUMERIC if vector else Reason.UNDECODABLE
                    dead.append(DeadRecord(reason, f"cannot convert: {exc}", id=obj.get(INPUT_ID), file=name,
                                           row=good_rows[j], record=good_text[j]))
            good = [good[j] for j in keep]
            good_rows = [good_rows[j] for j in keep]
            table = pa.Table.from_pylist(good, schema=_JSON_SCHEMA) if good else None
    if table is not None:
        table = _drop_unused(table)
    dead.sort(key=lambda r: r.row or 0)
    return ReadChunk(table, start, start + len(lines), dead, np.asarray(good_rows, dtype=np.int64))


def _all_numbers(v: Any) -> bool:
    if v is None:
        return True
    if not isinstance(v, list):
        return False
    return all(x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)) for x in v)
