"""Sources: where batches come from, each with an opaque resume position.

A source yields :class:`SourceBatch` objects. ``position`` is a
JSON-serialisable state meaning "everything up to and including this batch";
the loop stores it in the checkpoint once the batch's outputs are durable and
hands it back to :meth:`Source.restore` on restart. ``label`` is a
file-name-safe rendering of the batch's *first* position, used to name the
output files deterministically.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Protocol

import numpy as np
import pyarrow as pa

from streamembed.stream.codecs import DeadRecord
from streamembed.stream.readers import ReadChunk, iter_file
from streamembed.stream.sinks import safe_label

__all__ = ["SourceBatch", "Source", "DirectorySource"]

log = logging.getLogger("streamembed.source")


@dataclass
class SourceBatch:
    """One batch of raw input.

    ``table`` holds the rows to decode (None when there are none, e.g. an
    unreadable file or an end-of-file marker); ``dead`` the records refused
    before decoding. Row i of ``table`` is row ``rows[i]`` (or
    ``row_base + i``) of ``file``.
    """

    table: pa.Table | None
    position: Any
    label: str
    dead: list[DeadRecord] = field(default_factory=list)
    file: str | None = None
    row_base: int = 0
    rows: np.ndarray | None = None

    @property
    def n_records(self) -> int:
        """Input records in this batch (rows plus records refused while reading)."""
        return (self.table.num_rows if self.table is not None else 0) + len(self.dead)


class Source(Protocol):
    """What the loop needs from a source."""

    name: str

    def poll(self) -> SourceBatch | None:
        """The next batch, or None if nothing is available right now."""

    def restore(self, state: Any) -> None:
        """Resume after the batch whose ``position`` was ``state``."""

    def wait_hint(self) -> float:
        """Seconds worth sleeping after ``poll`` returned None."""

    @property
    def caught_up(self) -> bool:
        """True when the last ``poll`` found no input waiting (the loop publishes then)."""

    @property
    def exhausted(self) -> bool:
        """True when no more batches will ever come (bounded sources)."""

    def close(self) -> None: ...

    # Optional: ``commit(position)``. A source that keeps its own positions
    # (Kafka: the consumer group's committed offsets) defines it; the loop then
    # calls it, after the sinks are durable, instead of writing the checkpoint
    # file, and ``restore`` is not used.


_SKIP_SUFFIXES = (".tmp", ".part", ".partial", ".crdownload")


def _short_hash(text: str) -> str:
    return hashlib.blake2s(text.encode("utf-8"), digest_size=4).hexdigest()


class DirectorySource:
    """Files matching ``pattern`` under ``directory``, each processed once.

    New files are picked up as they appear, oldest modification time first
    (ties by name). Hidden files (``.x``, ``_x``) and names ending in
    ``.tmp``/``.part`` are ignored, as are files modified less than
    ``settle_seconds`` ago (still being written): producers should write to a
    temporary name and rename. Large files are read ``batch_rows`` rows at a
    time. Position: ``{"done": [relative paths], "current": {"file", "row"} | None}``.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        pattern: str = "*",
        batch_rows: int = 1024,
        settle_seconds: float = 1.0,
        poll_seconds: float = 0.5,
        max_block_rows: int = 4096,
        exit_when_idle: bool = False,
        name: str = "files",
    ) -> None:
        self.directory = Path(directory)
        self.pattern = pattern
        self.batch_rows = int(batch_rows)
        self.settle_seconds = float(settle_seconds)
        self.poll_seconds = float(poll_seconds)
        self.max_block_rows = int(max_block_rows)
        self.exit_when_idle = exit_when_idle
        self.name = name
        self._done: set[str] = set()
        self._current: str | None = None
        self._row = 0
        self._chunks: Iterator[ReadChunk] | None = None
        self._resume: dict[str, int] = {}
        self._idle = False

    # -- state -------------------------------------------------------------
    def _position(self) -> dict[str, Any]:
        current = None if self._current is None else {"file": self._current, "row": self._row}
        return {"done": sorted(self._done), "current": current}

    def restore(self, state: Any) -> None:
        if not state:
            return
        self._done = set(state.get("done", []))
        cur = state.get("current")
        if cur:
            self._resume = {str(cur["file"]): int(cur["row"])}

    # -- discovery ---------------------------------------------------------
    def _candidates(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        now = time.time()
        found: list[tuple[int, str]] = []
        for p in self.directory.rglob("*") if "**" in self.pattern or "/" in self.pattern else self.directory.iterdir():
            rel = p.relative_to(self.directory).as_posix()
            if rel in self._done or rel == self._current:
                continue
            base = p.name
            if base.startswith((".", "_")) or base.endswith(_SKIP_SUFFIXES):
                continue
            if not fnmatch.fnmatch(rel, self.pattern) and not fnmatch.fnmatch(base, self.pattern):
                continue
            try:
                st = p.stat()
            except OSError:
                continue
            if not p.is_file() or now - st.st_mtime < self.settle_seconds:
                continue
            found.append((st.st_mtime_ns, rel))
        found.sort()
        # a file interrupted by a crash comes first
        resumed = [rel for rel in self._resume if rel not in self._done]
        rest = [rel for _, rel in found if rel not in self._resume]
        return [r for r in resumed if (self.directory / r).exists()] + rest

    def _open_next(self) -> bool:
        for rel in self._candidates():
            start = self._resume.pop(rel, 0)
            self._current, self._row = rel, start
            self._chunks = iter_file(self.directory / rel, batch_rows=self.batch_rows, start_row=start,
                                     max_block_rows=self.max_block_rows, name=rel)
            log.info("reading %s from row %d", rel, start)
            return True
        self._resume.clear()
        return False

    # -- polling -----------------------------------------------------------
    def poll(self) -> SourceBatch | None:
        if self._chunks is None and not self._open_next():
            self._idle = True
            return None
        self._idle = False
        assert self._chunks is not None and self._current is not None
        rel = self._current
        label = f"{self.name}-{safe_label(rel, 64)}-{_short_hash(rel)}-r{self._row:012d}"
        chunk = next(self._chunks, None)
        if chunk is None:
            # end of file: an empty batch that marks the file done
            self._done.add(rel)
            self._current, self._chunks = None, None
            return SourceBatch(None, self._position(), label, file=rel, row_base=self._row)
        self._row = chunk.end_row
        if chunk.dead and chunk.table is None and chunk.end_row == chunk.start_row:
            # unreadable file or unreadable rest: the file is finished
            self._done.add(rel)
            self._current, self._chunks = None, None
        return SourceBatch(chunk.table, self._position(), label, dead=chunk.dead, file=rel,
                           row_base=chunk.start_row, rows=chunk.rows)

    def wait_hint(self) -> float:
        return self.poll_seconds

    @property
    def caught_up(self) -> bool:
        return self._idle

    @property
    def exhausted(self) -> bool:
        return self.exit_when_idle and self._idle and self._chunks is None

    def close(self) -> None:
        self._chunks = None
