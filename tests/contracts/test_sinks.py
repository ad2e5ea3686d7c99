"""Every sink of the package (each concrete ``OutputSink`` and ``DeadSink``, found by introspection) behaves as
the loop expects: pending rows counted from the first write, made durable by ``flush`` (or ``seal``), dropped by
``close`` without one. A new sink class fails ``test_every_sink_class_has_a_sample`` until it is given one here,
and then gets the checks."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import streamembed.kafka.sink  # noqa: F401 - the Kafka sinks are sinks of the package too
from streamembed.kafka.producer import ReliableProducer
from streamembed.kafka.sink import KafkaDeadLetterSink, KafkaOutputSink
from streamembed.stream.sinks import DeadLetterSink, DeadSink, FanoutSink, OutputSink, ParquetSink, PerLabelSink

from .checks import check_sink


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


@pytest.mark.parametrize(("cls", "takes", "make"), SAMPLES, ids=lambda x: getattr(x, "__name__", str(x)))
def test_every_sink_counts_flushes_and_drops(cls: type, takes: str, make: Callable[[Path], Any],
                                             tmp_path: Path) -> None:
    check_sink(make(tmp_path), takes, tmp_path, files=cls not in (KafkaOutputSink, KafkaDeadLetterSink))
