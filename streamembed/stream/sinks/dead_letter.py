"""Dead letters as files: Parquet or JSON lines, published atomically (:class:`DeadLetterSink`)."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from streamembed.atomic import atomic_write_bytes
from streamembed.config.schema import OutputConfig, choices
from streamembed.fsafe import clean_temps, make_dirs
from streamembed.stream.arrow_build import rows
from streamembed.stream.codecs import DeadRecord, encode_dead_letters
from streamembed.stream.sinks.base import DeadSink, remove_stale, safe_label
from streamembed.stream.sinks.parquet import ParquetSink

__all__ = ["DeadLetterSink", "dead_letter_path"]


def dead_letter_path(directory: str | os.PathLike[str], fmt: str, label: str) -> Path:
    """The file a :class:`DeadLetterSink` of ``fmt`` in ``directory`` publishes for ``label``."""
    return Path(directory) / f"dead-{safe_label(label)}.{'parquet' if fmt == 'parquet' else 'jsonl'}"


class DeadLetterSink(DeadSink):
    """Dead letters as Parquet (``dead-<label><tag>.parquet``) or JSON lines (``dead-<label><tag>.jsonl``).

    JSON lines hold the same fields as the Parquet schema; ``raw`` is base64.
    ``tag``: as for :class:`ParquetSink`.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        fmt: str = OutputConfig.dead_letter_format,
        source: str = "",
        compression: str = OutputConfig.compression,
        clean: bool = True,
        tag: str = "",
    ) -> None:
        if fmt not in choices("output.dead_letter_format"):
            raise ValueError(f"dead-letter format must be one of {choices('output.dead_letter_format')}, got {fmt!r}")
        super().__init__()
        self.directory = Path(directory)
        self.tag = tag
        self.fmt = fmt
        self.source = source
        self.compression = compression
        self.clean = clean
        self._parquet: ParquetSink | None = None  # made with the directory on the first dead letter
        self._lines: list[bytes] = []
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
        self._pending.add(len(dead))
        if self._parquet is not None:
            self._parquet.write(table, label)
            return
        for row in rows(table):  # not to_pylist(): its timestamps would import pandas
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
            self._pending.clear()
            return path
        if self.fmt == "parquet":
            return None  # nothing was ever written (the directory does not exist)
        final = self.directory / f"dead-{safe_label(label)}{self.tag}.jsonl"
        if not self.directory.is_dir():
            return None
        if not self._lines:
            remove_stale(final)
            return None
        atomic_write_bytes(final, b"".join(self._lines), clean=False)
        self._lines = []
        self._pending.clear()
        self.files_written += 1
        return final

    def close(self) -> None:
        if self._parquet is not None:
            self._parquet.close()
        self._lines = []
        self._pending.clear()
