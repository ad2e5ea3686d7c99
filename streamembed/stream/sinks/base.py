"""What the loop asks of every sink: ``write``, ``flush(label)``, ``close``, and what is pending since when.

Two kinds of sink, one base each (in the spirit of Quix Streams' ``BaseSink``):

* :class:`OutputSink` takes embedded rows, ``write(rows, label)``;
* :class:`DeadSink` takes refused records, ``write(dead, label, *, model_version, source)``.

A sink buffers (or sends) what it is given and makes it durable on
``flush(label)``; the loop commits its input position only after every sink's
``flush`` returned (``stream.checkpoint``). ``label`` names what a flush
publishes (the position of the roll's first input), so a replay after a crash
rewrites the same files. The roll policy reads ``pending_rows`` and
``pending_age``: that bookkeeping is :class:`Pending`, kept here once; a sink
made of other sinks (:class:`~streamembed.stream.sinks.fanout.FanoutSink`,
:class:`~streamembed.stream.sinks.per_label.PerLabelSink`) sums or maxes its
parts' instead.
"""

from __future__ import annotations

import abc
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa

from streamembed.atomic import fsync_dir
from streamembed.stream.codecs import DeadRecord

__all__ = ["Pending", "Sink", "OutputSink", "DeadSink", "safe_label", "remove_stale", "StoppedUndelivered"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class StoppedUndelivered(RuntimeError):
    """A sink's ``flush`` gave up because the daemon was asked to stop and its stop time (``run.stop_seconds``)
    ran out before the output was durable. Nothing is lost: the input position is not committed, so the rows are
    read and written again after the restart (duplicates)."""


def safe_label(text: str, limit: int = 96) -> str:
    """A file-name-safe version of ``text`` (no separators, bounded length)."""
    return _UNSAFE.sub("_", text).strip("._")[:limit] or "x"


def remove_stale(path: Path) -> None:
    """Remove ``path`` if a crashed run left it (and make the removal durable)."""
    if path.exists():
        path.unlink()
        fsync_dir(path.parent)


class Pending:
    """Rows handed to a sink since its last flush (``rows``), and since when (``age``, seconds; 0 when none)."""

    __slots__ = ("rows", "since")

    def __init__(self) -> None:
        self.rows = 0
        self.since: float | None = None

    def add(self, n: int) -> None:
        """Count ``n`` more rows (the clock starts at the first)."""
        if n and self.since is None:
            self.since = time.monotonic()
        self.rows += n

    @property
    def age(self) -> float:
        return 0.0 if self.since is None else time.monotonic() - self.since

    def clear(self) -> None:
        self.rows, self.since = 0, None


class Sink(abc.ABC):
    """A durable destination of the loop: pending bookkeeping, ``flush`` and ``close``."""

    def __init__(self) -> None:
        self._pending = Pending()

    @property
    def pending_rows(self) -> int:
        """Rows written since the last flush."""
        return self._pending.rows

    @property
    def pending_age(self) -> float:
        """Seconds since the first row after the last flush (0 when none)."""
        return self._pending.age

    def accepts(self, schema: pa.Schema, label: str | None = None) -> bool:
        """Whether rows of ``schema`` can join what is pending under ``label`` (a file has one schema)."""
        return True

    @abc.abstractmethod
    def flush(self, label: str) -> Path | None:
        """Make everything written durable; the file published (None: none, or not a file)."""

    def seal(self, label: str) -> Callable[[], Path | None]:
        """Hand what was written over as one unit and start afresh; the callable returned makes it durable.

        The loop may call the callable on another thread while it writes the
        next rows (``EmbeddingLoop(overlap_commits=True)``), one sealed unit at
        a time and in order. This default flushes at once (the callable only
        returns the path); a sink whose ``flush`` can wait (Parquet: the
        writer thread, fsyncs) overrides it.
        """
        path = self.flush(label)
        return lambda: path

    @abc.abstractmethod
    def close(self) -> None:
        """Drop what was not flushed (nothing committed is lost)."""


class OutputSink(Sink):
    """Where embedded rows go."""

    @abc.abstractmethod
    def write(self, rows: pa.RecordBatch | pa.Table, label: str, /) -> None:
        """Buffer (or send) ``rows``; ``label`` names the file if this opens a new one."""


class DeadSink(Sink):
    """Where dead letters go (records that were refused, with their reasons)."""

    @abc.abstractmethod
    def write(self, dead: Sequence[DeadRecord], label: str, /, *, model_version: int | None,
              source: str | None = None) -> None:
        """Buffer (or send) ``dead``, refused under ``model_version`` while reading ``source``."""
