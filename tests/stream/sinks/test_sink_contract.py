"""Every sink the loop can be given implements one of two small bases, and "rows pending since when" is kept once."""

from __future__ import annotations

import ast
import inspect
import typing
from pathlib import Path

import pyarrow as pa
import pytest

import streamembed
from streamembed.kafka.sink import KafkaDeadLetterSink, KafkaOutputSink
from streamembed.stream.codecs import DeadRecord
from streamembed.stream.loop import EmbeddingLoop
from streamembed.stream.records import Reason
from streamembed.stream.sinks import DeadLetterSink, DeadSink, FanoutSink, OutputSink, ParquetSink, PerLabelSink

PACKAGE = Path(streamembed.__file__).parent
#: The sinks made of other sinks: they sum or max their parts' pending rows and ages.
COMPOSITES = {"FanoutSink", "PerLabelSink", "Checkpointer"}


@pytest.mark.parametrize("cls", [ParquetSink, KafkaOutputSink, FanoutSink, PerLabelSink])
def test_output_sinks_implement_the_output_base(cls: type) -> None:
    assert issubclass(cls, OutputSink) and not inspect.isabstract(cls)


@pytest.mark.parametrize("cls", [DeadLetterSink, KafkaDeadLetterSink, PerLabelSink])
def test_dead_letter_sinks_implement_the_dead_letter_base(cls: type) -> None:
    assert issubclass(cls, DeadSink) and not inspect.isabstract(cls)


def test_the_loop_is_typed_by_the_bases() -> None:
    hints = typing.get_type_hints(EmbeddingLoop.__init__)
    assert hints["output"] is OutputSink and hints["dead"] is DeadSink
    assert "Any" not in str(hints["metrics"]) and "Any" not in str(hints["health"])


def test_pending_bookkeeping_is_written_once() -> None:
    """Only ``stream.sinks.base`` keeps pending rows and their age; composites aggregate their parts'."""
    owners = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            defs = {f.name for f in cls.body if isinstance(f, ast.FunctionDef)}
            if defs & {"pending_rows", "pending_age"} and cls.name not in COMPOSITES:
                owners.append(f"{path.relative_to(PACKAGE)}:{cls.name}")
    assert owners == ["stream/sinks/base.py:Sink"], owners


def test_file_sinks_count_pending_rows_and_age_alike(tmp_path: Path) -> None:
    out = ParquetSink(tmp_path / "out")
    dead = {fmt: DeadLetterSink(tmp_path / fmt, fmt=fmt) for fmt in ("parquet", "jsonl")}
    assert out.pending_rows == 0 and out.pending_age == 0.0
    out.write(pa.table({"id": ["a", "b"]}), "l")
    for sink in dead.values():
        sink.write([DeadRecord(Reason.BAD_ID, "x"), DeadRecord(Reason.MISSING_ID, "y")], "l", model_version=1)
    for sink in (out, *dead.values()):
        assert sink.pending_rows == 2 and sink.pending_age >= 0.0
        assert sink.flush("l") is not None
        assert sink.pending_rows == 0 and sink.pending_age == 0.0
