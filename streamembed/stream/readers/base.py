"""What every reader shares: the chunk a reader yields, the file version it reads, its dead letters.

:class:`ReadChunk` (rows ``start_row .. end_row - 1`` of a file), :class:`Signature`
(size, modification time, inode: one version of a file), :class:`FileChanged` (that
version changed while it was read), the format of a file from its name
(:data:`FORMATS`), and the two ways a read fails: :func:`unreadable` (the file, or
the rest of it, becomes one ``unreadable_file`` dead letter) and :func:`truncated`
(an incomplete tail: reported to the caller when ``final`` is False, else dead-lettered).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from streamembed.memlimit import READ_BUDGET_MAX
from streamembed.stream.codecs import DeadRecord
from streamembed.stream.records import (
    INPUT_CROSS,
    INPUT_DISSIMILARITIES,
    INPUT_FEATURES,
    Reason,
)

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


#: The vector columns (decoded zero-copy; every other column is small and copied).
VECTOR_FIELDS = (INPUT_DISSIMILARITIES, INPUT_FEATURES, INPUT_CROSS)
#: The first bytes of an Arrow IPC *file* (a stream has none).
ARROW_FILE_MAGIC = b"ARROW1"


def unreadable(name: str, row: int, detail: str) -> ReadChunk:
    """No rows, one ``unreadable_file`` dead letter for the file ``name`` from ``row`` on."""
    return ReadChunk(None, row, row, [DeadRecord(Reason.UNREADABLE_FILE, detail, file=name,
                                                 row=row if row else None)])


def truncated(name: str, row: int, detail: str, final: bool) -> ReadChunk:
    """No rows; the rest from ``row`` on is an unfinished tail (``final`` False) or one ``undecodable`` dead letter."""
    if not final:
        return ReadChunk(None, row, row, tail=detail)
    return ReadChunk(None, row, row, [DeadRecord(Reason.UNDECODABLE, detail, file=name, row=row)])
