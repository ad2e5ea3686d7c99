"""Every sink of the package (each concrete ``OutputSink`` and ``DeadSink``, found by introspection) behaves as
the loop expects: pending rows counted from the first write, made durable by ``flush`` (or ``seal``), dropped by
``close`` without one. A new sink class fails ``test_every_sink_class_has_a_sample`` until it is given one here,
and then gets the checks."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import streamembed.kafka.sink  # noqa: F401 - the Kafka sinks are sinks of the package too
from streamembed.kafka.client import ReliableProducer
from streamembed.kafka.sink import KafkaDeadLetterSink, KafkaOutputSink
from streamembed.stream.codecs import DeadRecord
from streamembed.stream.records import Reason
from streamembed.stream.sinks import DeadLetterSink, DeadSink, FanoutSink, OutputSink, ParquetSink, PerLabelSink


class _Future:
    is_done = True
    exception = None

    def succeeded(self) -> bool:
        return True


class _Producer:
    """kafka-python's producer, in memory: what it was sent."""

    def __init__(self, **settings: Any) -> None:
        self.sent: list[tuple[str, Any]] = []

    def send(self, topic: str, value: Any = None, key: Any = None, headers: Any = None) -> _Future:
        self.sent.append((topic, value))
        return _Future()

    def flush(self, timeout: Any = None) -> None:
        pass

    def close(self, timeout: Any = None) -> None:
        pass


def _producer() -> ReliableProducer:
    return ReliableProducer({}, factory=_Producer)


#: (class, what it takes, how to make one in a directory, what it published there after a flush)
Sample = tuple[type, str, Callable[[Path], Any]]
SAMPLES: list[Sample] = [
    (ParquetSink, "output", lambda d: ParquetSink(d)),
    (FanoutSink, "output", lambda d: FanoutSink([ParquetSink(d / "a"), ParquetSink(d / "b")])),
    (PerLabelSink, "output", lambda d: PerLabelSink(lambda: ParquetSink(d), d, "part")),
    (DeadLetterSink, "dead", lambda d: DeadLetterSink(d, fmt="parquet")),
    (DeadLetterSink, "dead", lambda d: DeadLetterSink(d, fmt="jsonl")),
    (PerLabelSink, "dead", lambda d: PerLabelSink(lambda: DeadLetterSink(d), d, "dead")),
    (KafkaOutputSink, "output", lambda d: KafkaOutputSink(_producer(), "out", fmt="arrow")),
    (KafkaOutputSink, "output", lambda d: KafkaOutputSink(_producer(), "out", fmt="json")),
    (KafkaDeadLetterSink, "dead", lambda d: KafkaDeadLetterSink(_producer(), "in.dlq")),
]


def _concrete(base: type) -> set[type]:
    out, todo = set(), list(base.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if not inspect.isabstract(cls) and cls.__module__.startswith("streamembed."):
            out.add(cls)
    return out


def test_every_sink_class_has_a_sample() -> None:
    assert _concrete(OutputSink) | _concrete(DeadSink) <= {cls for cls, _, _ in SAMPLES}


def _output_rows() -> pa.RecordBatch:
    """Three output rows as the loop writes them (version 2), from a small fitted model."""
    import numpy as np

    from streamembed.core.model import fit_model
    from streamembed.stream.output import encode_output
    from streamembed.stream.records import TIMESTAMP_TYPE

    L = np.random.default_rng(0).normal(size=(8, 2))
    D = np.sqrt(((L[:, None] - L[None]) ** 2).sum(-1))
    res = fit_model(D, n_components=2).place(D[:3])
    return encode_output(pa.array(["a", "b", "c"]), res, model_version=1, event_time=pa.nulls(3, TIMESTAMP_TYPE),
                         processed_at_us=1_700_000_000_000_000)


def _write(sink: Any, takes: str, label: str) -> int:
    if takes == "output":
        sink.write(_output_rows(), label)
    else:
        sink.write([DeadRecord(Reason.BAD_ID, "x"), DeadRecord(Reason.MISSING_ID, "y"),
                    DeadRecord(Reason.BAD_ID, "z")], label, model_version=1)
    return 3


def _published(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file() and not p.name.startswith("."))


@pytest.mark.parametrize(("cls", "takes", "make"), SAMPLES, ids=lambda x: getattr(x, "__name__", str(x)))
def test_every_sink_counts_flushes_and_drops(cls: type, takes: str, make: Callable[[Path], Any],
                                             tmp_path: Path) -> None:
    sink = make(tmp_path)
    assert isinstance(sink, cls) and isinstance(sink, OutputSink if takes == "output" else DeadSink)
    assert sink.pending_rows == 0 and sink.pending_age == 0.0
    assert isinstance(sink.accepts(pa.schema([("id", pa.string())]), "L1"), bool)
    n = _write(sink, takes, "L1")
    assert sink.pending_rows == n and sink.pending_age >= 0.0
    sink.flush("L1")
    assert sink.pending_rows == 0 and sink.pending_age == 0.0
    files = _published(tmp_path)
    n = _write(sink, takes, "L2")
    sink.seal("L2")()  # handed over as one unit, made durable by the callable
    assert sink.pending_rows == 0
    assert len(_published(tmp_path)) >= len(files)
    _write(sink, takes, "L3")
    sink.close()  # never flushed: nothing of L3 is published
    assert not [p for p in _published(tmp_path) if "L3" in p.name]
    if cls not in (KafkaOutputSink, KafkaDeadLetterSink):
        assert files, f"{cls.__name__} published no file on flush"
