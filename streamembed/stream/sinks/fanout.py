"""Several sinks behind one (:class:`FanoutSink`): the output topic and the output files at once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from streamembed.stream.sinks.base import OutputSink

__all__ = ["FanoutSink"]


class FanoutSink(OutputSink):
    """Several output sinks behind one: ``write`` to each, ``flush`` each (the first path returned wins)."""

    def __init__(self, sinks: Sequence[OutputSink]) -> None:
        if not sinks:
            raise ValueError("FanoutSink needs at least one sink")
        super().__init__()
        self.sinks = list(sinks)

    @property
    def pending_rows(self) -> int:
        return max(s.pending_rows for s in self.sinks)

    @property
    def pending_age(self) -> float:
        return max(s.pending_age for s in self.sinks)

    def accepts(self, schema: pa.Schema, label: str | None = None) -> bool:
        """Whether every sink can take rows of ``schema`` now (a Parquet file has one schema)."""
        return all(s.accepts(schema, label) for s in self.sinks)

    def write(self, rows: pa.RecordBatch | pa.Table, label: str, **kwargs: Any) -> None:
        for s in self.sinks:
            s.write(rows, label, **kwargs)

    def flush(self, label: str) -> Path | None:
        out = None
        for s in self.sinks:
            path = s.flush(label)
            out = out or path
        return out

    def close(self) -> None:
        for s in self.sinks:
            s.close()
