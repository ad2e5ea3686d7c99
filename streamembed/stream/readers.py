"""Read input files (Parquet, Arrow IPC, JSON lines) in batches of rows, safely.

Every reader yields :class:`ReadChunk` objects of exactly ``batch_rows`` rows
(the last one shorter) starting at ``start_row``, so a file resumed from a
checkpoint is cut at the same boundaries as the first time. A file whose
rows carry ``cross`` (and no ``block`` column) is one block and is read as
one chunk (up to ``max_block_rows``). A file with a ``block`` column is cut
at block boundaries only (:func:`_whole_blocks`): each chunk is the longest
run of whole blocks of at most ``batch_rows`` rows from its first row (one
longer block alone), so resumed files are still cut the same way.

Files are memory-mapped only when the caller's ``mapping`` mode selects them
(:mod:`streamembed.stream.mapped`; off by default: a file that shrinks under a
mapping kills the process with SIGBUS, so only files immutable once published
may be mapped); a mapped Arrow IPC file is decoded in place, a mapped Parquet
file from the page cache. Otherwise a file up to the read budget
(``memlimit.read_budget``: a sixteenth of the process's memory limit, at most
``SNAPSHOT_BYTES``) is read into memory in one go (then decoded zero-copy
from that snapshot), a larger one streamed with plain reads, a row group or
record batch at a time, so the memory a file takes follows the memory limit,
never the file size (a Parquet row group too large for the limit is refused
as unreadable, not read); either way :func:`open_input` checks that the file's size,
modification time and inode did not change while it was read, and raises
:class:`FileChanged` if they did, so that a file is read whole or not at all.
Snapshots are read with ``readinto`` into a buffer of the process's slab
pool (:class:`_SlabPool`), which is reused for the next file once nothing
refers to the previous one: a fresh 600 MB buffer costs 0.4-1.5 s of page
faults and zeroing here, a reused one nothing.

``open_input(..., progressive=True)`` (the one-shot ``streamembed embed``)
gives up "whole or not at all" for overlap: an Arrow IPC file is read into
its buffer a chunk at a time *as decoding reaches it* (:class:`_Filling`,
on the read-ahead thread), so the first batches are embedded while the rest
is still being read, still decoded zero-copy from that buffer. Parquet and
JSON lines are read whole as above: plain reads of Parquet column chunks
measured 1.6-2x slower here than a snapshot, because every chunk lands in
freshly zeroed huge pages of Arrow's allocator. An Arrow file that is
truncated or changes while it is read progressively raises
:class:`FileChanged` between chunks (a short read or a changed size,
modification time or inode): the rows before it were handed out, the rest
is the caller's to report.

Failures never raise otherwise: an unreadable file or the unreadable rest of a
file becomes a :class:`~streamembed.stream.codecs.DeadRecord`. A file that
ends in an *incomplete tail* — an Arrow stream cut inside a message, an Arrow
or Parquet file without its footer, a last JSON line without its newline
that does not parse — may still be being written: with ``final=False`` the
reader reports it in the last chunk's ``tail`` instead of dead-lettering it,
and the caller decides when to wait and when to give up.
"""

from __future__ import annotations

import collections
import io
import itertools
import json
import mmap
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.json as pajson
import pyarrow.parquet as pq

from streamembed.core.options import MAX_BLOCK_ROWS
from streamembed.memlimit import READ_BUDGET_MAX, current_limit, format_bytes, read_budget
from streamembed.stream.blocks import block_units
from streamembed.stream.codecs import DeadRecord, writable_text
from streamembed.stream.mapped import MappedFile, map_file, should_map
from streamembed.stream.records import (
    INPUT_BLOCK,
    INPUT_CROSS,
    INPUT_DISSIMILARITIES,
    INPUT_EVENT_TIME,
    INPUT_FEATURES,
    INPUT_ID,
    INPUT_LANDMARK_VERSION,
    INPUT_LANDMARKS,
    Reason,
)

__all__ = ["ReadChunk", "FileChanged", "Signature", "signature", "open_input", "file_format", "iter_file",
           "parse_json_lines", "FORMATS", "SNAPSHOT_BYTES"]

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

#: Files up to this size (or the smaller read budget of the memory limit) are read into memory in one read.
SNAPSHOT_BYTES = READ_BUDGET_MAX
#: Progressive reads (``open_input(progressive=True)``) fill their buffer this many bytes at a time.
FILL_BYTES = 16 << 20
#: Size of a pooled read buffer (a larger message gets a slab of its own size).
SLAB_BYTES = 64 << 20

_ARROW_FILE_MAGIC = b"ARROW1"


class FileChanged(Exception):
    """The file changed (size, modification time or inode) while it was being read."""

    def dead_letter(self, name: str, row: int) -> DeadRecord:
        """The one ``unreadable_file`` dead letter for the rows of file ``name`` from ``row`` on (not read)."""
        return DeadRecord(Reason.UNREADABLE_FILE, f"{self}: rows from {row} on were not read", file=name,
                          row=row if row else None)


@dataclass(frozen=True)
class Signature:
    """What identifies one version of a file: size (bytes), modification time (ns), inode."""

    size: int
    mtime_ns: int
    inode: int

    def as_json(self) -> list[int]:
        return [self.size, self.mtime_ns, self.inode]

    @classmethod
    def from_json(cls, doc: Any) -> Signature | None:
        if isinstance(doc, list) and len(doc) == 3 and all(isinstance(x, int) for x in doc):
            return cls(*doc)
        return None


def signature(st: os.stat_result) -> Signature:
    return Signature(int(st.st_size), int(st.st_mtime_ns), int(st.st_ino))


@dataclass
class ReadChunk:
    """Rows ``start_row`` .. ``end_row - 1`` of a file.

    ``table`` holds the rows that could be parsed (None if none); ``rows``
    gives the file row of each table row when they are not contiguous
    (JSON lines with rejected lines), else None (table row i = start_row + i).
    ``dead`` are records refused while reading. ``tail`` (last chunk only,
    ``final=False``): why the rest of the file from ``end_row`` on could not
    be read yet (an incomplete tail).
    """

    table: pa.Table | None
    start_row: int
    end_row: int
    dead: list[DeadRecord] = field(default_factory=list)
    rows: np.ndarray | None = None
    tail: str | None = None


def file_format(path: str | os.PathLike[str]) -> str | None:
    """'parquet', 'arrow', 'jsonl' or None from the file name."""
    return FORMATS.get(Path(path).suffix.lower())


def _read_into(fh: Any, buf: np.ndarray) -> int:
    """Fill ``buf`` from ``fh`` (unbuffered) with as few ``readinto`` calls as the kernel allows; bytes read."""
    view = buf.data
    got = 0
    while got < len(view):
        n = fh.readinto(view[got:])
        if not n:
            break
        got += n
    return got


class _SlabPool:
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


_POOL: _SlabPool | None = None


def _pool() -> _SlabPool:
    """The process's slab pool (kept across files and runs, so their slabs are reused)."""
    global _POOL
    if _POOL is None:
        _POOL = _SlabPool()
    return _POOL


class _Filling:
    """A file read front to back into pooled slabs, as far as the reader needs it (see the module doc).

    :meth:`window` makes a byte range of the file available contiguously in
    the current slab (reading on the caller's thread, ``FILL_BYTES`` or more
    at a time; a range that does not fit moves, with what was read of it, to
    a fresh slab). Every read is followed by an ``fstat``: a short read or a
    changed signature raises :class:`FileChanged`. Bytes are never read twice
    and never held longer than a batch decoded from them lives.
    """

    def __init__(self, path: Path, fh: Any, sig: Signature, chunk: int | None = None,
                 pool: _SlabPool | None = None) -> None:
        self.path, self.fh, self.signature, self.chunk = path, fh, sig, int(chunk or FILL_BYTES)
        self.size = sig.size
        self.pool = pool or _pool()
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
            n = _read_into(self.fh, slab[self._filled:self._filled + want])
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
        got = _read_into(self.fh, data)
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


class _Input:
    """An opened input: ``native`` (Arrow) and ``binary`` (JSON) views of one version of a file.

    ``snapshot`` is the whole file in memory (a uint8 array), or None: then
    either ``filling`` reads it progressively (Arrow IPC) or it is read with
    plain reads (files over the snapshot size).
    """

    def __init__(self, path: Path, snapshot: np.ndarray | bytes | None, sig: Signature,
                 filling: _Filling | None = None, mapped: MappedFile | None = None) -> None:
        self.path, self.snapshot, self.signature, self.filling = path, snapshot, sig, filling
        self.mapped = mapped  # the snapshot is a memory mapping of the file (``stream.mapped``)

    def _whole(self) -> np.ndarray | bytes | None:
        if self.filling is not None and self.snapshot is None:
            self.snapshot = self.filling.whole()
        return self.snapshot

    def native(self) -> pa.NativeFile:
        whole = self._whole()
        return pa.BufferReader(pa.py_buffer(whole)) if whole is not None else pa.OSFile(str(self.path))

    def binary(self) -> io.BufferedIOBase:
        whole = self._whole()
        if whole is None:
            return open(self.path, "rb")  # noqa: SIM115 - the caller closes it
        return io.BytesIO(whole.data if isinstance(whole, np.ndarray) else memoryview(whole))

    def check(self) -> None:
        """Raise FileChanged if the file on disk is no longer the version being read (streamed or mapped reads)."""
        if self.mapped is not None:
            if self.mapped.fd is not None and signature(self.mapped.stat()) != self.signature:
                raise FileChanged(f"{self.path} changed while it was read (it is memory-mapped: files that change "
                                  f"in place must not be, see --mmap / directory.mmap)")
            return
        if self.snapshot is None and self.filling is None and signature(os.stat(self.path)) != self.signature:
            raise FileChanged(f"{self.path} changed while it was read")

    def close(self) -> None:
        if self.filling is not None:
            self.filling.close()
        if self.mapped is not None:
            self.mapped.close()


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0))


def open_input(path: str | os.PathLike[str], snapshot_bytes: int | None = None, *,
               progressive: bool = False, follow_symlinks: bool = True, mapping: str = "never") -> _Input:
    """Open one version of ``path``: read into memory if small enough, checked for changes either way.

    ``progressive`` (see the module doc): Arrow IPC files are read as
    decoding reaches them; Parquet and JSON lines are still read whole.
    ``mapping`` (``stream.mapped``: never, auto, always): an Arrow IPC or
    Parquet file it selects is memory-mapped instead, whatever its size.
    Raises OSError (the environment: missing, permissions, I/O) or
    FileChanged. ``follow_symlinks`` False: a symbolic link at ``path`` is not
    opened (OSError ELOOP; the directory source resolves the links it allows).
    """
    p = Path(path)
    opener = None if follow_symlinks else _no_follow
    fmt = file_format(p)
    if mapping != "never" and fmt in ("arrow", "parquet"):
        opened = _open_mapped(p, mapping)
        if opened is not None:
            return opened
    if snapshot_bytes is None:
        snapshot_bytes = min(SNAPSHOT_BYTES, read_budget())
    if progressive and fmt == "arrow":
        fh = open(p, "rb", buffering=0, opener=opener)  # noqa: SIM115 - closed by _Filling.finish/close
        try:
            sig = signature(os.fstat(fh.fileno()))
            if sig.size > snapshot_bytes:
                fh.close()
                return _Input(p, None, sig)
            return _Input(p, None, sig, filling=_Filling(p, fh, sig))
        except BaseException:
            fh.close()
            raise
    with open(p, "rb", buffering=0, opener=opener) as fh:
        before = signature(os.fstat(fh.fileno()))
        if before.size > snapshot_bytes:
            return _Input(p, None, before)
        # into a pooled buffer (a view of it: the slab is reused once the file's batches are gone), one
        # byte more than the size: a file that grew reads longer
        data = _pool().get(before.size + 1)[:before.size + 1]
        got = _read_into(fh, data)
        after = signature(os.fstat(fh.fileno()))
    if after != before or got != before.size or signature(os.stat(p)) != before:
        raise FileChanged(f"{p} changed while it was read ({before.size} -> {got} bytes)")
    return _Input(p, data[:got], before)


def _open_mapped(p: Path, mode: str) -> _Input | None:
    """``p`` memory-mapped when ``mode`` selects it (``stream.mapped.should_map``), else None (copy it)."""
    if not should_map(p, os.stat(p), mode):
        return None
    try:
        mf, st = map_file(p)
    except (OSError, ValueError):  # no address space for it (RLIMIT_AS), an empty file: read it as any other
        return None
    if not should_map(p, st, mode):  # replaced by another version between the stat and the open
        mf.close()
        return None
    return _Input(p, mf.data, signature(st), mapped=mf)


def iter_file(
    path: str | os.PathLike[str],
    *,
    batch_rows: int,
    start_row: int = 0,
    max_block_rows: int = MAX_BLOCK_ROWS,
    name: str | None = None,
    final: bool = True,
    opened: _Input | None = None,
    progressive: bool = False,
    mapping: str = "never",
) -> Iterator[ReadChunk]:
    """Chunks of ``path`` from ``start_row`` on; ``name`` is used in dead letters.

    ``opened`` is the file already opened by :func:`open_input` (else it is
    opened here, with ``progressive`` when ``final``, and an OSError or
    FileChanged while opening becomes an ``unreadable_file`` dead letter). A
    streamed or progressively read file that changes while read raises
    FileChanged between chunks. ``mapping``: see :func:`open_input`.
    """
    name = name if name is not None else str(path)
    fmt = file_format(path)
    if fmt is None:
        yield _unreadable(name, start_row, f"unknown file extension {Path(path).suffix!r} (expected one of "
                                           f"{', '.join(sorted(FORMATS))})")
        return
    if opened is None:
        try:
            opened = open_input(path, progressive=progressive and final, mapping=mapping)
        except (OSError, FileChanged) as exc:
            yield _unreadable(name, start_row, f"cannot read: {exc}")
            return
    reader = {"parquet": _iter_parquet, "arrow": _iter_arrow, "jsonl": _iter_jsonl}[fmt]
    try:
        chunks = reader(opened, batch_rows, start_row, max_block_rows, name, final)
        for chunk in _whole_blocks(chunks, batch_rows, max_block_rows):
            opened.check()
            yield chunk
        if opened.filling is not None:
            opened.filling.finish()  # the whole file was this one version
        opened.check()  # a mapped file: the same version to its end
    finally:
        opened.close()


def _unreadable(name: str, row: int, detail: str) -> ReadChunk:
    return ReadChunk(None, row, row, [DeadRecord(Reason.UNREADABLE_FILE, detail, file=name,
                                                 row=row if row else None)])


def _truncated(name: str, row: int, detail: str, final: bool) -> ReadChunk:
    if not final:
        return ReadChunk(None, row, row, tail=detail)
    return ReadChunk(None, row, row, [DeadRecord(Reason.UNDECODABLE, detail, file=name, row=row)])


def _chunk_rows(schema: pa.Schema, batch_rows: int, total: int | None, max_block_rows: int) -> int:
    if INPUT_CROSS in schema.names and INPUT_BLOCK not in schema.names:
        # one block per file; a too-large block is read as max_block_rows + 1 rows
        # so that decoding rejects it with a clear reason
        if total is not None and total <= max_block_rows:
            return max(total, 1)
        return max_block_rows + 1
    return batch_rows


def _whole_blocks(chunks: Iterable[ReadChunk], batch_rows: int, max_block_rows: int) -> Iterator[ReadChunk]:
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


def _rebatch(batches: Iterable[pa.RecordBatch], schema: pa.Schema, rows: int, skip: int, start_row: int, name: str,
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
            yield _truncated(name, pos, f"rows from {pos} on could not be read (truncated or corrupt): {exc}", final)
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


def _iter_parquet(src: _Input, batch_rows: int, start_row: int, max_block_rows: int, name: str,
                  final: bool) -> Iterator[ReadChunk]:
    try:
        # streamed (no snapshot): no pre-buffering, which would read every row group asked for up front,
        # i.e. the whole file (measured: 1.6 GB of RSS for a 1.5 GB file; 0.28 GB without)
        pf = pq.ParquetFile(src.native(), pre_buffer=src.snapshot is not None)
        schema = pf.schema_arrow
        md = pf.metadata
    except Exception as exc:  # noqa: BLE001 - any failure to open is "unreadable" (or an unfinished file)
        if not final and _looks_unfinished(src, (b"PAR1",)):
            yield ReadChunk(None, start_row, start_row, tail=f"a Parquet file without its footer (unfinished?): {exc}")
        else:
            yield _unreadable(name, start_row, f"not a readable Parquet file: {exc}")
        return
    too_big = _oversized_row_group(md)
    if too_big is not None:
        yield _unreadable(name, start_row, too_big)
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
    # and allocator contention on 131 MB batches); the loop overlaps reading with
    # embedding instead (its read-ahead)
    batches = pf.iter_batches(batch_size=max(rows, 1024), row_groups=groups, use_threads=False)
    yield from _rebatch(batches, schema, rows, start_row - rg_start, start_row, name, True)


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


def _iter_arrow(src: _Input, batch_rows: int, start_row: int, max_block_rows: int, name: str,
                final: bool) -> Iterator[ReadChunk]:
    batches: Iterable[pa.RecordBatch]
    no_footer = False
    if src.filling is not None:
        try:
            framed = _framed_stream(src.filling)
        except (pa.ArrowException, OSError, ValueError, EOFError) as exc:
            yield _unreadable(name, start_row, f"not a readable Arrow IPC file or stream: {exc}")
            return
        if framed is not None:
            schema, batches = framed
            yield from _rebatch(batches, schema, _chunk_rows(schema, batch_rows, None, max_block_rows), start_row,
                                start_row, name, final)
            return
    try:
        f = src.native()
        head = f.read(6)
        f.seek(0)
        if head == _ARROW_FILE_MAGIC:
            try:
                fr = ipc.open_file(f)
                schema = fr.schema
                batches = (fr.get_batch(i) for i in range(fr.num_record_batches))
            except pa.ArrowInvalid:
                # no footer (an unfinished or truncated IPC file): read its stream part as far as it goes
                f.seek(8)
                sr = ipc.open_stream(f)
                schema = sr.schema
                batches = _stream_batches(sr)
                no_footer = True
        else:
            sr = ipc.open_stream(f)
            schema = sr.schema
            batches = _stream_batches(sr)
    except Exception as exc:  # noqa: BLE001
        if not final and _looks_unfinished(src, (_ARROW_FILE_MAGIC, b"\xff\xff\xff\xff")):
            yield ReadChunk(None, start_row, start_row,
                            tail=f"an Arrow IPC file that cannot be read yet (unfinished?): "
                                 f"{exc}")
        else:
            yield _unreadable(name, start_row, f"not a readable Arrow IPC file or stream: {exc}")
        return
    rows = _chunk_rows(schema, batch_rows, None, max_block_rows)
    if src.mapped is not None:
        batches = _small_columns_copied(batches, schema)
    end = start_row
    for chunk in _rebatch(batches, schema, rows, start_row, start_row, name, final):
        end = chunk.end_row
        yield chunk
        if chunk.tail is not None:
            return
    if no_footer and not final:
        yield ReadChunk(None, end, end, tail="an Arrow IPC file without its footer (unfinished?)")


def _framed_stream(fill: _Filling) -> tuple[pa.Schema, Iterator[pa.RecordBatch]] | None:
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
    start = 8 if slab[off:off + 6].tobytes() == _ARROW_FILE_MAGIC else 0
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

    return schema, _small_columns_copied(batches(), schema)


def _small_columns_copied(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """``batches`` with every column but the vectors copied out of the buffer they were decoded from.

    The vectors stay zero-copy views of the file's slab or mapping; the ids
    and other small columns (a few bytes a row) are copied, so that the
    output, which keeps the ids, never refers to the input's memory.
    """
    small = [i for i, f in enumerate(schema) if f.name not in _VECTOR_FIELDS]
    for b in batches:
        if small:
            cols = b.columns
            for i in small:
                cols[i] = pa.concat_arrays([cols[i]])
            b = pa.RecordBatch.from_arrays(cols, schema=schema)
        yield b


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


def _next_message(fill: _Filling, pos: int) -> tuple[Any, int]:
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


def _looks_unfinished(src: _Input, magics: tuple[bytes, ...]) -> bool:
    """Could this unreadable file be one still being written? (Empty, or it starts as the format starts.)"""
    head = src.native().read(8)
    return len(head) == 0 or any(head.startswith(m) or m.startswith(head) for m in magics)


def _stream_batches(reader: ipc.RecordBatchStreamReader) -> Iterator[pa.RecordBatch]:
    while True:
        try:
            yield reader.read_next_batch()
        except StopIteration:
            return


# ----------------------------------------------------------------------------- JSON lines

#: JSON-lines parse schema for the known fields (other keys are kept as inferred columns, so a
#: misspelt key can be named in the dead letter). event_time stays a string here; decoding parses it.
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
#: The same with integer ids (``{"id": 12345}``): read as int64, then kept as their decimal text.
_JSON_SCHEMA_INT_IDS = _JSON_SCHEMA.set(_JSON_SCHEMA.get_field_index(INPUT_ID), pa.field(INPUT_ID, pa.int64()))


def _drop_unused(table: pa.Table) -> pa.Table:
    """Drop all-null optional columns (keys no line used), keep ``id``."""
    drop = [c for c in table.schema.names if c != INPUT_ID and table.column(c).null_count == table.num_rows]
    return table.drop_columns(drop) if drop else table


def _iter_jsonl(src: _Input, batch_rows: int, start_row: int, max_block_rows: int, name: str,
                final: bool) -> Iterator[ReadChunk]:
    try:
        f = src.binary()
    except OSError as exc:
        yield _unreadable(name, start_row, f"cannot open: {exc}")
        return
    with f:
        first = f.readline()
        f.seek(0)
        rows = max_block_rows + 1 if b'"cross"' in first and b'"block"' not in first else batch_rows
        collections.deque(itertools.islice(f, start_row), maxlen=0)  # skip, C-level
        pos = start_row
        while True:
            try:
                lines = list(itertools.islice(f, rows))
            except OSError as exc:
                yield _truncated(name, pos, f"read error: {exc}", final)
                return
            if not lines:
                return
            tail = None
            if not lines[-1].endswith(b"\n") and not _parses(lines[-1]) and not final:
                # an unfinished last line: leave it for when the file is complete
                lines.pop()
                tail = f"line {pos + len(lines)} is unfinished (no newline, not yet valid JSON)"
            if lines:
                chunk = _parse_lines(lines, pos, name)
                if tail is not None:
                    chunk.tail = tail
                yield chunk
                pos += len(lines)
            elif tail is not None:
                yield ReadChunk(None, pos, pos, tail=tail)
            if tail is not None:
                return


def _parses(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


def _parse_lines(lines: list[bytes], start: int, name: str) -> ReadChunk:
    """Fast path: one vectorised pyarrow JSON parse of the whole chunk."""
    end = start + len(lines)
    if min(map(len, lines)) > 2:  # no blank lines (pyarrow would skip them, shifting rows)
        data = pa.py_buffer(b"".join(lines))
        # string ids; else (a producer that numbers its objects) integer ids, as their decimal text
        for schema in (_JSON_SCHEMA, _JSON_SCHEMA_INT_IDS):
            try:
                table = pajson.read_json(
                    data,
                    read_options=pajson.ReadOptions(use_threads=False, block_size=len(data) + 1),
                    parse_options=pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer"),
                )
            except (pa.ArrowException, ValueError, RecursionError):
                continue
            if table.num_rows != len(lines):
                break
            if schema is _JSON_SCHEMA_INT_IDS:
                i = table.schema.get_field_index(INPUT_ID)
                table = table.set_column(i, INPUT_ID, table.column(i).cast(pa.string()))
            return ReadChunk(_drop_unused(table), start, end)
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
            text = stripped.decode("utf-8").removeprefix("\ufeff")  # a byte-order mark, as the fast path skips it
        except UnicodeDecodeError as exc:
            dead.append(DeadRecord(Reason.UNDECODABLE, f"not UTF-8: {exc}", file=name, row=row, raw=line))
            continue
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as exc:
            what = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            dead.append(DeadRecord(Reason.UNDECODABLE, f"not JSON: {what}", file=name, row=row, raw=line))
            continue
        if not isinstance(obj, dict):
            dead.append(DeadRecord(Reason.UNDECODABLE, "a JSON line must be an object", file=name, row=row,
                                   record=text))
            continue
        rid = obj.get(INPUT_ID)
        if isinstance(rid, int) and not isinstance(rid, bool):
            rid = obj[INPUT_ID] = str(rid)  # an integer id is its decimal text
        if rid is not None and not isinstance(rid, str):
            dead.append(DeadRecord(Reason.BAD_ID, f"id must be a string or an integer, got {type(rid).__name__} "
                                   f"{rid!r:.40}", file=name, row=row, record=text))
            continue
        problem = _object_problem(obj)
        if problem is not None:
            reason, detail = problem
            dead.append(DeadRecord(reason, detail, id=rid if isinstance(rid, str) else None, file=name, row=row,
                                   record=text))
            continue
        good.append(obj)
        good_rows.append(row)
        good_text.append(text)
    table: pa.Table | None = None
    if good:
        table, bad = _rows_to_table(good)
        for j, err in bad:
            obj = good[j]
            vector = any(not _all_numbers(obj.get(k)) for k in _VECTOR_FIELDS)
            reason = Reason.NON_NUMERIC if vector else Reason.UNDECODABLE
            dead.append(DeadRecord(reason, f"cannot convert: {err}", id=obj.get(INPUT_ID), file=name,
                                   row=good_rows[j], record=good_text[j]))
        if bad:
            keep = sorted(set(range(len(good))) - {j for j, _ in bad})
            good_rows = [good_rows[j] for j in keep]
    if table is not None:
        table = _drop_unused(table)
    dead.sort(key=lambda r: r.row or 0)
    return ReadChunk(table, start, start + len(lines), dead, np.asarray(good_rows, dtype=np.int64))


def _rows_to_table(good: list[dict[str, Any]]) -> tuple[pa.Table | None, list[tuple[int, Exception]]]:
    """Decoded JSON objects -> (table of the convertible ones, [(index, error)] of the others).

    Keys outside the known fields become columns too, as the fast path keeps
    them (inferred): ``block`` keys, and misspelt keys that decoding names.
    """
    known = [{k: obj[k] for k in _JSON_SCHEMA.names if k in obj} for obj in good]
    bad: list[tuple[int, Exception]] = []
    try:
        table = pa.Table.from_pylist(known, schema=_JSON_SCHEMA)
        kept = list(range(len(good)))
    except (pa.ArrowException, TypeError, ValueError, OverflowError, RecursionError):
        kept = []
        for j, obj in enumerate(known):
            try:
                pa.Table.from_pylist([obj], schema=_JSON_SCHEMA)
                kept.append(j)
            except (pa.ArrowException, TypeError, ValueError, OverflowError, RecursionError) as exc:
                bad.append((j, exc))
        if not kept:
            return None, bad
        table = pa.Table.from_pylist([known[j] for j in kept], schema=_JSON_SCHEMA)
    extra = list(dict.fromkeys(k for j in kept for k in good[j] if k not in _JSON_SCHEMA.names))
    for key in extra:
        values = [good[j].get(key) for j in kept]
        if key == INPUT_LANDMARKS:  # ids (checked by _object_problem): integers as their decimal text
            table = table.append_column(key, pa.array([None if v is None else [str(x) for x in v] for v in values],
                                                      pa.list_(pa.string())))
            continue
        try:
            col = pa.array(values)
        except (pa.ArrowException, TypeError, ValueError, OverflowError, RecursionError):
            col = pa.array([None if v is None else _as_text(v) for v in values], pa.string())
        table = table.append_column(key, col)
    return table, bad


def _object_problem(obj: dict[str, Any]) -> tuple[str, str] | None:
    """What Arrow's conversion would silently change in a decoded JSON object: (reason, detail), or None.

    ``pa.Table.from_pylist`` turns true/false in a number list into 1.0/0.0 and truncates 1.5 into an
    int64; a lone surrogate ("\ud800", valid JSON) is not text.
    """
    for key in _VECTOR_FIELDS:
        if not _all_numbers(obj.get(key)):
            return Reason.NON_NUMERIC, f"'{key}' must be a list of numbers, got {_as_text(obj.get(key))[:80]}"
    order = obj.get(INPUT_LANDMARKS)
    if order is not None and not (isinstance(order, list) and all(
            isinstance(x, str) or (isinstance(x, int) and not isinstance(x, bool)) for x in order)):
        return Reason.LANDMARK_MISMATCH, (f"'{INPUT_LANDMARKS}' must be a list of landmark ids (strings or "
                                          f"integers), got {_as_text(order)[:80]}")
    version = obj.get(INPUT_LANDMARK_VERSION)
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        return Reason.UNDECODABLE, f"landmark_version must be an integer, got {version!r:.40}"
    for key in (INPUT_ID, INPUT_EVENT_TIME):
        value = obj.get(key)
        if isinstance(value, str) and writable_text(value) != value:
            return Reason.UNDECODABLE, f"'{key}' is not valid Unicode text (a lone surrogate escape)"
    return None


def _as_text(v: Any) -> str:
    try:
        return json.dumps(v)
    except (ValueError, TypeError, RecursionError):
        return "<unprintable>"


def _all_numbers(v: Any) -> bool:
    if v is None:
        return True
    if not isinstance(v, list):
        return False
    return all(x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)) for x in v)
