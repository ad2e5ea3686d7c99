"""One file per write label in a roll (:class:`PerLabelSink`): the Kafka partitions' outputs kept apart."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from streamembed.fsafe import clean_temps
from streamembed.stream.sinks.base import DeadSink, OutputSink

__all__ = ["PerLabelSink"]


class PerLabelSink(OutputSink, DeadSink):
    """One file per write label in each roll (``make()`` makes the sink of one label), each published under its own.

    The loop writes the rows of each input stream (a Kafka partition) under
    the label of that stream's first batch in the roll; this sink keeps them
    apart, so that every file name is a function of one stream's position and
    a restart that interleaves the streams differently still rewrites the same
    files. ``flush`` publishes them all (the label it is given is not used).
    Leftover temporary files of ``prefix`` in ``directory`` are removed once, here (those a live replica
    sharing the directory holds are not: ``fsafe.clean_temps``).
    """

    def __init__(self, make: Callable[[], OutputSink | DeadSink], directory: str | os.PathLike[str],
                 prefix: str) -> None:
        super().__init__()
        self._make = make
        self._sinks: dict[str, OutputSink | DeadSink] = {}
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
        return sink is None or sink.accepts(schema, label)

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
