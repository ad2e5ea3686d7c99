"""Durable sinks: rolling Parquet files and dead letters, written atomically.

A sink buffers what it is given (``write``) and makes it durable on
``flush(label)``: the data goes to a temporary file, is fsynced, renamed to
its final name and the directory is fsynced. The final name is derived from
``label`` - the position of the first input the file holds - so replaying the
same input after a crash rewrites the same file instead of adding a second one.

The loop commits its checkpoint only after every sink's ``flush`` returned.

Parquet row groups are encoded and compressed on a write-behind thread
(:class:`_WriteBehind`; pyarrow releases the GIL meanwhile), so writing the
output overlaps embedding the next batches; ``flush`` waits for it before
publishing, and an error on that thread is raised by the next ``write`` or
``flush`` (never lost: nothing is committed before ``flush`` returned).
The row groups are the same as when written inline; float columns are written
without a dictionary (see :func:`_dictionary_columns`): same values, other bytes.
"""

from __future__ import annotations

import contextlib
import base64
import json
import os
import queue
import re
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO, Protocol
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from streamembed.atomic import atomic_write_bytes, fsync_dir, glob_escape, naming_path, publish
from streamembed.fsafe import clean_temps, create_temp, make_dirs
from streamembed.stream.codecs import DeadRecord, encode_dead_letters
from streamembed.stream.output import DICTIONARY_COLUMNS, schema_version_of

__all__ = [
    "Sink",
    "ParquetSink",
    "DeadLetterSink",
    "PerLabelSink",
    "dead_letter_path",
    "safe_label",
]


class Sink(Protocol):
    """What the loop needs from a sink."""

    @property
    def pending_rows(self) -> int: ...

    @property
    def pending_age(self) -> float: ...

    def flush(self, label: str) -> Path | None: ...

    def close(self) -> None: ...


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_label(text: str, limit: int = 96) -> str:
    """A file-name-safe version of ``text`` (no separators, bounded length)."""
    return _UNSAFE.sub("_", text).strip("._")[:limit] or "x"




def _remove_stale(path: Path) -> None:
    if path.exists():
        path.unlink()
        fsync_dir(path.parent)


def _dictionary_columns(schema: pa.Schema) -> list[str]:
    """Columns worth dictionary-encoding: all but floating-point ones (and lists of them).

    Embedding coordinates and residuals almost never repeat, so a dictionary
    is built and then abandoned for every float column; skipping it measured
    0.14 s instead of 0.25 s of CPU for 300,000 output rows (zstd), and a
    smaller file. The values written are the same. Output version 2 names its
    few repetitive columns (``stream.output.DICTIONARY_COLUMNS``): ids and
    event times are unique too (another 0.016 s and 1.7 bytes a row).
    """
    if schema_version_of(schema) >= 2 and "flag_bits" in schema.names:
        return [c for c in DICTIONARY_COLUMNS if c in schema.names]

    def floating(t: pa.DataType) -> bool:
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return floating(t.value_type)
        return pa.types.is_floating(t)

    return [f.name for f in schema if not floating(f.type)]


class _WriteBehind:
    """Writes tables to a ``pq.ParquetWriter`` on a background thread, in order, at most ``depth`` queued."""

    def __init__(self, writer: pq.ParquetWriter, depth: int = 2) -> None:
        self.writer = writer
        self._q: queue.Queue[tuple[pa.Table, int] | None] = queue.Queue(maxsize=max(1, depth))
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="streamembed-parquet-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._q.get()
            try:
                if item is None:
                    return
                if self._error is None:
                    table, rows = item
                    self.writer.write_table(table, row_group_size=rows)
            except BaseException as exc:  # noqa: BLE001 - handed to the loop's thread
                self._error = exc
            finally:
                self._q.task_done()

    def raise_error(self) -> None:
        if self._error is not None:
            exc, self._error = self._error, None
            raise exc

    def put(self, table: pa.Table, row_group_size: int) -> None:
        self.raise_error()
        self._q.put((table, row_group_size))

    def drain(self) -> None:
        """Wait until everything queued is written; raise what went wrong meanwhile."""
        self._q.join()
        self.raise_error()

    def close(self) -> None:
        """Stop the thread (after what is queued) and close the writer."""
        self._q.put(None)
        self._thread.join()
        self.writer.close()


class ParquetSink:
    """Rolling Parquet files ``<prefix>-<label><tag>.parquet`` in ``directory`` (or one file, ``final_name``).

    Rows stream into a temporary Parquet file (row groups of
    ``row_group_rows``; ``fsafe.create_temp``: a random name, created
    exclusively, the configured file mode); ``flush(label)`` closes it and
    publishes it atomically. The schema's key-value metadata
    (``streamembed.schema_version``) is kept. ``tag`` (the daemon's writer
    id, ``-w<hex>``) makes the names of two daemons sharing ``directory``
    distinct; what a crashed writer of the same prefix and tag left is removed
    at start, and nobody else's. With ``final_name`` every flush publishes to
    ``directory / final_name`` (the one-shot ``embed``, which flushes once).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        prefix: str = "part",
        row_group_rows: int = 65536,
        compression: str = "zstd",
        final_name: str | None = None,
        clean: bool = True,
        tag: str = "",
    ) -> None:
        self.directory = make_dirs(directory)
        self.final_name = final_name
        self.prefix = prefix
        self.tag = tag
        self.row_group_rows = int(row_group_rows)
        self.compression = compression
        self._writer: _WriteBehind | None = None
        self._fh: BinaryIO | None = None
        self._tmp: Path | None = None
        self._schema: pa.Schema | None = None
        self._buffer: list[pa.RecordBatch] = []
        self._buffered = 0
        self._rows = 0
        self._since: float | None = None
        self.files_written = 0
        if clean:
            clean_temps(self.directory, glob_escape(final_name) if final_name else f"{prefix}-*{tag}.parquet")

    @property
    def pending_rows(self) -> int:
        """Rows written since the last flush."""
        return self._rows

    @property
    def pending_age(self) -> float:
        """Seconds since the first row after the last flush (0 when empty)."""
        return 0.0 if self._since is None else time.monotonic() - self._since

    def accepts(self, schema: pa.Schema, label: str | None = None) -> bool:
        """Whether rows of ``schema`` can go into the open file (its columns and types; always, with none open).

        A file has one schema: rows of another precision (output version 2
        writes the input's) or of another model lineage (in the schema
        metadata) must start a new file (the loop publishes this one first)
        or, for a single-file sink, be written in the file's own precision by
        the embedder (``streamembed embed`` decides it up front).
        """
        return self._schema is None or self._writer is None or schema.equals(self._schema, check_metadata=True)

    def write(self, data: pa.RecordBatch | pa.Table, label: str) -> None:
        """Buffer rows; ``label`` names the file if this opens a new one."""
        if data.num_rows == 0:
            return
        if self._writer is not None and self._schema is not None and not data.schema.equals(self._schema):
            raise ValueError(f"rows of another schema cannot join the open output file {self._tmp}: "
                             f"{data.schema.types} after {self._schema.types}")
        if self._writer is None:
            self._schema = data.schema
            self._fh, self._tmp = create_temp(self.directory, self.final_path(label).name)
            with naming_path(self._tmp):
                self._writer = _WriteBehind(pq.ParquetWriter(self._fh, data.schema, compression=self.compression,
                                                             use_dictionary=_dictionary_columns(data.schema)))
            self._since = time.monotonic()
        batches = data.to_batches() if isinstance(data, pa.Table) else [data]
        self._buffer.extend(batches)
        self._buffered += data.num_rows
        self._rows += data.num_rows
        if self._buffered >= self.row_group_rows:
            assert self._tmp is not None  # opened above
            with naming_path(self._tmp):
                self._write_buffer()

    def _write_buffer(self) -> None:
        if self._buffer and self._writer is not None:
            table = pa.Table.from_batches(self._buffer, self._schema)
            self._writer.put(table, max(self.row_group_rows, table.num_rows))
        self._buffer = []
        self._buffered = 0

    def final_path(self, label: str) -> Path:
        if self.final_name is not None:
            return self.directory / self.final_name
        return self.directory / f"{self.prefix}-{safe_label(label)}{self.tag}.parquet"

    def flush(self, label: str) -> Path | None:
        """Publish the buffered rows as ``<prefix>-<label>.parquet``; None if empty.

        With nothing buffered, a file of the same label left by a crashed run
        is removed: it covered input from the same uncommitted position on,
        which this run has just processed again (and found nothing to write).
        """
        if self._writer is None or self._tmp is None:
            _remove_stale(self.final_path(label))
            return None
        with naming_path(self._tmp):
            self._write_buffer()
            self._writer.drain()
            self._writer.close()
        assert self._fh is not None
        self._fh.close()
        final = publish(self._tmp, self.final_path(label))
        self._writer, self._fh, self._tmp, self._since = None, None, None, None
        self._rows = 0
        self.files_written += 1
        return final

    def close(self) -> None:
        """Drop an unflushed temporary file (nothing durable is lost)."""
        if self._writer is not None:
            with contextlib.suppress(Exception):  # the file is dropped anyway
                self._writer.close()
        if self._fh is not None:
            self._fh.close()
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
        self._writer, self._fh, self._tmp, self._since, self._buffer, self._rows = None, None, None, None, [], 0


def dead_letter_path(directory: str | os.PathLike[str], fmt: str, label: str) -> Path:
    """The file a :class:`DeadLetterSink` of ``fmt`` in ``directory`` publishes for ``label``."""
    return Path(directory) / f"dead-{safe_label(label)}.{'parquet' if fmt == 'parquet' else 'jsonl'}"


class DeadLetterSink:
    """Dead letters as Parquet (``dead-<label><tag>.parquet``) or JSON lines (``dead-<label><tag>.jsonl``).

    JSON lines hold the same fields as the Parquet schema; ``raw`` is base64.
    ``tag``: as for :class:`ParquetSink`.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        fmt: str = "parquet",
        source: str = "",
        compression: str = "zstd",
        clean: bool = True,
        tag: str = "",
    ) -> None:
        if fmt not in ("parquet", "jsonl"):
            raise ValueError(f"dead-letter format must be 'parquet' or 'jsonl', got {fmt!r}")
        self.directory = Path(directory)
        self.tag = tag
        self.fmt = fmt
        self.source = source
        self.compression = compression
        self.clean = clean
        self._parquet: ParquetSink | None = None  # made with the directory on the first dead letter
        self._lines: list[bytes] = []
        self._since: float | None = None
        self.files_written = 0
        if self.directory.is_dir():
            self._open()

    def _open(self) -> None:
        make_dirs(self.directory)
        if self.fmt == "parquet" and self._parquet is None:
            self._parquet = ParquetSink(self.directory, prefix="dead", compression=self.compression, clean=self.clean,
                                        tag=self.tag)
        elif self.fmt == "jsonl" and self.clean:
            clean_temps(self.directory, f"dead-*{self.tag}.jsonl")

    @property
    def pending_rows(self) -> int:
        return self._parquet.pending_rows if self._parquet is not None else len(self._lines)

    @property
    def pending_age(self) -> float:
        if self._parquet is not None:
            return self._parquet.pending_age
        return 0.0 if self._since is None else time.monotonic() - self._since

    def write(self, dead: Sequence[DeadRecord], label: str, *, model_version: int | None,
              source: str | None = None) -> None:
        """Buffer dead records (label names the file if this opens a new one)."""
        if not dead:
            return
        now_us = time.time_ns() // 1000
        table = encode_dead_letters(dead, source=source or self.source, model_version=model_version,
                                    failed_at_us=now_us)
        if self.fmt == "parquet" and self._parquet is None or self.fmt == "jsonl" and not self.directory.is_dir():
            self._open()
        if self._parquet is not None:
            self._parquet.write(table, label)
            return
        if self._since is None:
            self._since = time.monotonic()
        for row in table.to_pylist():
            raw = row.get("raw")
            row["raw"] = base64.b64encode(raw).decode("ascii") if raw is not None else None
            row["failed_at"] = row["failed_at"].isoformat()
            self._lines.append(json.dumps(row, allow_nan=True).encode("utf-8") + b"\n")

    def path_for(self, label: str) -> Path:
        """Where ``flush(label)`` publishes."""
        return dead_letter_path(self.directory, self.fmt, label)

    def flush(self, label: str) -> Path | None:
        if self._parquet is not None:
            path = self._parquet.flush(label)
            self.files_written = self._parquet.files_written
            return path
        if self.fmt == "parquet":
            return None  # nothing was ever written (the directory does not exist)
        final = self.directory / f"dead-{safe_label(label)}{self.tag}.jsonl"
        if not self.directory.is_dir():
            return None
        if not self._lines:
            _remove_stale(final)
            return None
        atomic_write_bytes(final, b"".join(self._lines), clean=False)
        self._lines, self._since = [], None
        self.files_written += 1
        return final

    def close(self) -> None:
        if self._parquet is not None:
            self._parquet.close()
        self._lines, self._since = [], None


class PerLabelSink:
    """One file per write label in each roll (``make()`` makes the sink of one label), each published under its own.

    The loop writes the rows of each input stream (a Kafka partition) under
    the label of that stream's first batch in the roll; this sink keeps them
    apart, so that every file name is a function of one stream's position and
    a restart that interleaves the streams differently still rewrites the same
    files. ``flush`` publishes them all (the label it is given is not used).
    Leftover temporary files of ``prefix`` in ``directory`` are removed once, here (those a live replica
    sharing the directory holds are not: ``fsafe.clean_temps``).
    """

    def __init__(self, make: Callable[[], Any], directory: str | os.PathLike[str], prefix: str) -> None:
        self._make = make
        self._sinks: dict[str, Any] = {}
        self.files_written = 0
        if Path(directory).is_dir():
            clean_temps(Path(directory), f"{prefix}-*")

    @property
    def pending_rows(self) -> int:
        return sum(s.pending_rows for s in self._sinks.values())

    @property
    def pending_age(self) -> float:
        return max((s.pending_age for s in self._sinks.values()), default=0.0)

    def accepts(self, schema: pa.Schema, label: str | None = None) -> bool:
        """Whether the file of ``label`` (if open) can take rows of ``schema`` (:meth:`ParquetSink.accepts`)."""
        sink = self._sinks.get(label) if label is not None else None
        return sink is None or getattr(sink, "accepts", lambda *a: True)(schema, label)

    def write(self, data: Any, label: str, **kwargs: Any) -> None:
        sink = self._sinks.get(label)
        if sink is None:
            sink = self._sinks[label] = self._make()
        sink.write(data, label, **kwargs)

    def flush(self, label: str) -> Path | None:
        out = None
        for own, sink in self._sinks.items():
            path = sink.flush(own)
            self.files_written += path is not None
            out = out or path
        self._sinks.clear()
        return out

    def close(self) -> None:
        for sink in self._sinks.values():
            sink.close()
        self._sinks.clear()
