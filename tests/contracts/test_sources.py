"""Every registered source kind is declared consistently, and the source its builder makes (the Kafka source
over an in-memory consumer: no broker) satisfies the loop's protocol (``checks.check_source``)."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from streamembed.config.sources import SOURCES, SourceKind
from streamembed.stream.arrow_build import numeric, strings

from .checks import build_sample_source, check_source, check_source_kind_is_declared

_Record = namedtuple("_Record", "topic partition offset key value headers timestamp timestamp_type")


def _arrow(prefix: str, m: int, n: int = 12) -> bytes:
    A = np.random.default_rng(m).random((m, n)).astype(np.float32) + 1.0
    table = pa.table({"id": strings([f"{prefix}{i}" for i in range(m)]),
                      "dissimilarities": pa.FixedSizeListArray.from_arrays(numeric(A.ravel()), n)})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


class _Consumer:
    """kafka-python's consumer over an in-memory partition of three Arrow messages; a new consumer of the group
    starts at the offset the group committed (``committed``, shared), as a broker's would."""

    committed: dict[int, int] = {}

    def __init__(self, **settings: Any) -> None:
        from kafka import TopicPartition

        self.tp = TopicPartition("in", 0)
        self.log = [_Record("in", 0, i, None, _arrow(f"m{i}-", 5), [], 1_700_000_000_000 + i, 0) for i in range(3)]
        self.pos, self.listener = _Consumer.committed.get(0, 0), None

    def subscribe(self, topics: Any, listener: Any) -> None:
        self.listener = listener

    def poll(self, timeout_ms: int = 0, max_records: int = 500) -> dict[Any, list[Any]]:
        if self.listener is not None:
            self.listener.on_partitions_assigned({self.tp})
            self.listener = None
        recs, self.pos = self.log[self.pos:self.pos + 1], min(self.pos + 1, len(self.log))
        return {self.tp: recs} if recs else {}

    def seek(self, tp: Any, offset: int) -> None:
        self.pos = offset

    def commit(self, offsets: Any, timeout_ms: Any = None) -> None:
        _Consumer.committed.update({tp.partition: om.offset for tp, om in offsets.items()})

    def highwater(self, tp: Any) -> int:
        return len(self.log)

    def position(self, tp: Any, timeout_ms: Any = None) -> int:
        return self.pos

    def close(self, autocommit: bool = False) -> None:
        pass


def _sample(kind: SourceKind, tmp_path: Path) -> Callable[[], Any]:
    """What makes a source of ``kind`` here (each call a new one, as a restart would)."""
    if kind.name == "kafka":  # the real builder needs brokers; its source over the in-memory consumer
        from streamembed.kafka.source import KafkaSource

        _Consumer.committed.clear()
        return lambda: KafkaSource({}, "in", consumer_factory=_Consumer, batch_rows=4)
    (tmp_path / "part-a.arrows").write_bytes(_arrow("a", 150))
    return lambda: build_sample_source(kind, tmp_path)


@pytest.mark.parametrize("kind", list(SOURCES), ids=lambda k: k.name)
def test_every_source_kind_is_declared(kind: SourceKind) -> None:
    check_source_kind_is_declared(kind)


@pytest.mark.parametrize("kind", list(SOURCES), ids=lambda k: k.name)
def test_every_source_kind_builds_a_source_the_loop_can_resume(kind: SourceKind, tmp_path: Path) -> None:
    check_source(_sample(kind, tmp_path), kind.name)


def test_the_file_source_of_embed_satisfies_the_protocol_too(tmp_path: Path) -> None:
    """``streamembed embed``'s one-shot source (not a daemon kind: it starts at the beginning, always)."""
    from streamembed.stream.sources import FileSource

    path = tmp_path / "in.arrows"
    path.write_bytes(_arrow("f", 150))
    check_source(lambda: FileSource([path], batch_rows=64), "FileSource", resumable=False)
