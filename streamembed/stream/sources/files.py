"""Given files, read once in order (:class:`FileSource`: ``streamembed embed`` and the backfill tasks)."""

from __future__ import annotations

import dataclasses
import glob
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from streamembed.core.options import BATCH_ROWS, MAX_BLOCK_ROWS
from streamembed.stream.arrow_build import booleans
from streamembed.stream.origin import RowOrigin
from streamembed.stream.readers import FileChanged, ReadChunk, iter_file
from streamembed.stream.sinks import safe_label
from streamembed.stream.sources.base import SourceBatch

__all__ = ["FileSource", "expand_inputs"]


class FileSource:
    """The given files, in order, each read once to its end (``streamembed embed``; no waiting, no position).

    A file's unfinished tail is dead-lettered at once (the file is taken as complete). Files are read
    progressively (``readers.open_input(progressive=True)``: reading overlaps embedding); one that is
    truncated or changes while it is read keeps the rows handed out before, and the rest of it is one
    ``unreadable_file`` dead letter saying so. ``row_range`` (start, end; end None: to the end) reads
    only those rows of one file (a backfill task); ``label`` names every batch (default: file and row).
    """

    def __init__(self, paths: list[str | os.PathLike[str]], *, batch_rows: int = BATCH_ROWS,
                 max_block_rows: int = MAX_BLOCK_ROWS,
                 names: list[str] | None = None, name: str = "files", mapping: str = "never",
                 row_range: tuple[int, int | None] = (0, None), label: str | None = None) -> None:
        if row_range != (0, None) and len(paths) != 1:
            raise ValueError("a row range is of one file")
        self.start_row, self.end_row = row_range
        self.label = label
        self.name = name
        self.mapping = mapping  # which files are memory-mapped instead of read progressively (``stream.mapped``)
        self.paths = [Path(p) for p in paths]
        self.names = names or [p.name for p in self.paths]
        self.batch_rows = int(batch_rows)
        self.max_block_rows = int(max_block_rows)
        self._i = 0
        self._chunks: Iterator[ReadChunk] | None = None
        self._row = 0
        self.unreadable: list[str] = []

    def restore(self, state: Any) -> None:
        """A one-shot source starts at the beginning."""

    def commit(self, position: Any) -> None:
        """Nothing to remember."""

    def poll(self) -> SourceBatch | None:
        while self._i < len(self.paths):
            path, name = self.paths[self._i], self.names[self._i]
            if self._chunks is None:
                self._chunks = iter_file(path, batch_rows=self.batch_rows, start_row=self.start_row,
                                         max_block_rows=self.max_block_rows, name=name, progressive=True,
                                         mapping=self.mapping)
                self._row = self.start_row
            try:
                chunk = next(self._chunks, None)
            except FileChanged as exc:
                # read progressively: the rows handed out so far stand, the rest is one dead letter
                chunk = ReadChunk(None, self._row, self._row, [exc.dead_letter(name, self._row)])
                self._chunks = iter(())
                if self._row == self.start_row and self.start_row:
                    self.unreadable.append(name)  # nothing of the range was read (row 0: the check below)
            if chunk is not None and self.end_row is not None:
                chunk = _within(chunk, self.end_row)
            if chunk is None:
                self._i += 1
                self._chunks = None
                continue
            self._row = chunk.end_row
            if chunk.table is None and any(d.row is None for d in chunk.dead):
                self.unreadable.append(name)
            return SourceBatch(chunk.table, {"file": self._i, "row": chunk.end_row},
                               self.label or f"{safe_label(name, 64)}-r{chunk.start_row:012d}", dead=chunk.dead,
                               origin=RowOrigin(name, chunk.rows, chunk.start_row))
        return None

    def wait_hint(self) -> float:
        return 0.0

    @property
    def caught_up(self) -> bool:
        return self.exhausted

    @property
    def exhausted(self) -> bool:
        return self._i >= len(self.paths)

    def close(self) -> None:
        self._chunks = None


def _within(chunk: ReadChunk, end: int) -> ReadChunk | None:
    """The rows of ``chunk`` before file row ``end`` (None: the chunk starts at or after it)."""
    if chunk.start_row >= end:
        return None
    if chunk.end_row <= end or chunk.table is None:
        return chunk
    rows = chunk.rows
    keep = rows < end if rows is not None else np.arange(chunk.table.num_rows) + chunk.start_row < end
    return dataclasses.replace(chunk, table=chunk.table.filter(booleans(keep)),
                               rows=rows[keep] if rows is not None else None,
                               dead=[d for d in chunk.dead if d.row is None or d.row < end])


def expand_inputs(inputs: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files named by ``inputs``: files as given, directories (their readable files, sorted), globs (sorted).

    Hidden files (``.x``, ``_x``) and files of unknown extensions inside
    directories are skipped; a named file is kept whatever its name (the
    reader then says what is wrong with it). Raises FileNotFoundError for an
    input that names nothing.
    """
    from streamembed.stream.readers import file_format

    out: list[Path] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.is_file() and not q.name.startswith((".", "_"))
                           and file_format(q) is not None)
        elif p.exists():
            found = [p]
        else:
            found = sorted(Path(q) for q in glob.glob(str(item), recursive=True) if Path(q).is_file())
        if not found:
            raise FileNotFoundError(f"{item}: no such file, directory or matching files")
        out.extend(found)
    unique: dict[Path, Path] = {}  # a file named twice (a file and its directory) is read once
    for p in out:
        unique.setdefault(p.resolve(), p)
    return list(unique.values())
