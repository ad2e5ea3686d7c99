"""Output file names are a function of the input position: a Kafka restart after the files were published but
before the offsets were committed rewrites the same files, even when the partitions come back interleaved in
another order (a fake consumer; the loop, source and Parquet sinks are the real ones).

Before: every restart wrote the rows again under new names (the label carried a random token): the report's
40 Parquet rows for 10 ids."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from kafka import TopicPartition

from streamembed.kafka.source import KafkaSource
from streamembed.config.schema import RunConfig
from streamembed.stream.checkpoint import Checkpointer
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.loop import EmbeddingLoop, RollPolicy
from streamembed.stream.sinks import DeadLetterSink, ParquetSink, PerLabelSink

from ..stream.helpers import fitted
from .test_source_unit import TOPIC, FakeConsumer, _arrow


class Interleaved(FakeConsumer):
    """One message per poll, partitions in the given order, round after round."""

    def __init__(self, order: list[int]) -> None:
        super().__init__()
        self.order = order
        self._turn = 0

    def poll(self, timeout_ms: int = 0, max_records: int = 500) -> dict[Any, list[Any]]:
        if self.next_assignment is not None:
            super().poll(0, 0)  # the assignment only
        for _ in range(len(self.order)):
            p = self.order[self._turn % len(self.order)]
            self._turn += 1
            recs = self.log.get(p, [])[self.pos.get(p, 0):self.pos.get(p, 0) + 1]
            if recs and p in self.assigned:
                self.pos[p] = recs[0].offset + 1
                return {TopicPartition(TOPIC, p): recs}
        return {}


class CrashOnCommit:
    """Raises where the offsets would be committed: the files are published, the offsets are not."""

    def __init__(self, inner: KafkaSource) -> None:
        self.inner = inner
        self.name = inner.name

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def commit(self, position: Any) -> None:
        raise RuntimeError("killed between publishing the files and committing the offsets")


def _run(root: Path, consumer: FakeConsumer, crash: bool, n_records: int) -> None:
    src: Any = KafkaSource({"max_poll_records": 500}, TOPIC, consumer_factory=lambda **s: consumer, batch_rows=4)
    source = CrashOnCommit(src) if crash else src
    out = PerLabelSink(lambda: ParquetSink(root / "embeddings", clean=False), root / "embeddings", "part")
    dead = DeadLetterSink(root / "dead-letter")
    loop = EmbeddingLoop(BatchEmbedder(fitted()), source, out, dead, Checkpointer([out, dead], source, None),
                         run=RunConfig(max_records=n_records), roll=RollPolicy(10_000, 3600))
    if crash:
        with pytest.raises(RuntimeError, match="killed"):
            loop.run()
    else:
        loop.run()


def _ids(root: Path) -> tuple[Counter[str], set[str]]:
    ids: Counter[str] = Counter()
    files = sorted((root / "embeddings").glob("part-*.parquet"))
    for f in files:
        ids.update(pq.read_table(f, columns=["id"]).column("id").to_pylist())
    return ids, {f.name for f in files}


def test_a_restart_rewrites_the_same_files_whatever_the_partitions_order(tmp_path: Path) -> None:
    log: dict[int, list[Any]] = {}
    for p in (0, 1, 2):
        for i in range(4):
            log.setdefault(p, []).append(_arrow(f"p{p}-{i}-", 3, seed=10 * p + i))
    n = 3 * 4 * 3

    def consumer(order: list[int]) -> FakeConsumer:
        c = Interleaved(order)
        for p, values in log.items():
            for v in values:
                c.add(p, v)
        return c

    _run(tmp_path, consumer([0, 1, 2]), crash=True, n_records=n)
    first, names = _ids(tmp_path)
    assert sum(first.values()) == n and len(names) == 3  # one file per partition, published, not committed
    _run(tmp_path, consumer([2, 0, 1]), crash=False, n_records=n)  # the restart: another interleaving
    again, names_again = _ids(tmp_path)
    assert names_again == names
    assert again == first and set(again.values()) == {1}
    assert names == {f"part-kafka-{TOPIC}-p{p}-o000000000000.parquet" for p in (0, 1, 2)}
