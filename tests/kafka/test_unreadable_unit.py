"""Record batches the client cannot read, against a fake consumer: which partition and offset are skipped, which
errors still stop the daemon. The broker test (test_compression.py) confirms it against Tansu."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kafka import TopicPartition
from kafka.errors import CorruptRecordError, TopicAuthorizationFailedError, UnsupportedCodecError

from streamembed.kafka import unreadable
from streamembed.kafka.source import KafkaSource
from streamembed.stream.records import Reason

from ..stream.helpers import drain
from .test_source_unit import TOPIC, FakeConsumer, _arrow


class BrokenBatch(FakeConsumer):
    """A FakeConsumer whose partition ``bad`` holds unreadable offsets: a poll that reaches one raises ``error``,
    and keeps raising (as kafka-python does) until the consumer seeks past it. ``tell`` exposes the partition the
    way kafka-python 3.0 does (its in-line records), else nothing does."""

    def __init__(self, bad: int, offsets: set[int], error: BaseException, tell: bool = True) -> None:
        super().__init__()
        self.bad, self.bad_offsets, self.error, self.tell = bad, offsets, error, tell
        self._fetcher = SimpleNamespace(_next_partition_records=None)
        self.raised = 0

    def poll(self, timeout_ms: int = 0, max_records: int = 500) -> dict[Any, list[Any]]:
        pos = self.pos.get(self.bad, 0)
        if self.next_assignment is None and self.bad in self.assigned and pos in self.bad_offsets:
            self.raised += 1
            if self.tell:
                self._fetcher._next_partition_records = SimpleNamespace(topic_partition=TopicPartition(TOPIC, self.bad))
            raise self.error
        self._fetcher._next_partition_records = None
        out = super().poll(timeout_ms, max_records)
        for tp, recs in list(out.items()):  # stop before the next unreadable offset
            if tp.partition == self.bad:
                keep = [r for r in recs if r.offset < min((o for o in self.bad_offsets if o >= recs[0].offset),
                                                         default=1 << 60)]
                if keep:
                    out[tp] = keep
                else:
                    del out[tp]
                self.pos[self.bad] = (keep[-1].offset + 1) if keep else recs[0].offset
        return out


def _source(c: FakeConsumer) -> KafkaSource:
    return KafkaSource({"max_poll_records": 500}, TOPIC, consumer_factory=lambda **s: c)


def _fill(c: FakeConsumer, partition: int, n: int) -> None:
    for i in range(n):
        c.add(partition, _arrow(f"p{partition}-{i}-", 2, seed=i + 1))


def _outcome(batches: list[Any]) -> tuple[list[str], list[tuple[int, int, str]]]:
    ids = sorted(x for b in batches if b.table is not None for x in b.table.column("id").to_pylist())
    dead = sorted((d.partition, d.offset, d.reason) for b in batches for d in b.dead)
    return ids, dead


@pytest.mark.parametrize("error", [UnsupportedCodecError("Unrecognized compression type: 5"),
                                   UnsupportedCodecError("Libraries for lz4 compression codec not found"),
                                   CorruptRecordError("Record batch failed crc check"),
                                   ValueError("bad varint in a decompressed batch")])
def test_an_unreadable_batch_is_a_dead_letter_per_offset_and_the_rest_is_read(error: BaseException) -> None:
    c = BrokenBatch(bad=1, offsets={2, 3}, error=error)
    _fill(c, 0, 3)
    _fill(c, 1, 6)
    src = _source(c)
    ids, dead = _outcome(drain(src))
    assert dead == [(1, 2, Reason.UNDECODABLE), (1, 3, Reason.UNDECODABLE)]
    assert ids == sorted(f"p{p}-{i}-{j}" for p, n in ((0, 3), (1, 6)) for i in range(n) if (p, i) not in
                         ((1, 2), (1, 3)) for j in range(2))
    assert c.raised == 2 and src.skipped == 2
    batches = [b for b in drain(src)]
    assert batches == []


def test_the_partition_is_told_by_the_error_or_by_the_only_one_with_data_when_the_client_does_not_say() -> None:
    c = BrokenBatch(bad=1, offsets={1}, error=CorruptRecordError(
        f"Record batch for partition TopicPartition(topic='{TOPIC}', partition=1) at offset 1 failed crc check"),
        tell=False)
    _fill(c, 0, 2)
    _fill(c, 1, 3)
    ids, dead = _outcome(drain(_source(c)))
    assert dead == [(1, 1, Reason.UNDECODABLE)]
    c = BrokenBatch(bad=1, offsets={1}, error=UnsupportedCodecError("Unrecognized compression type: 6"), tell=False)
    _fill(c, 0, 2)
    _fill(c, 1, 3)
    src = _source(c)
    src.poll()  # assignment, partition 0 drained first
    ids, dead = _outcome(drain(src))
    assert dead == [(1, 1, Reason.UNDECODABLE)]


def test_errors_of_the_environment_or_of_unknown_origin_still_stop_the_daemon() -> None:
    c = BrokenBatch(bad=0, offsets={1}, error=TopicAuthorizationFailedError("not allowed"))
    _fill(c, 0, 3)
    with pytest.raises(TopicAuthorizationFailedError):
        drain(_source(c))
    # a parser's error is trusted only where the client says which partition it was reading
    c = BrokenBatch(bad=0, offsets={1}, error=ValueError("who knows"), tell=False)
    _fill(c, 0, 3)
    with pytest.raises(ValueError):
        drain(_source(c))


def test_which_errors_are_about_the_data() -> None:
    import zlib

    assert unreadable.is_unreadable_data(UnsupportedCodecError("x"))
    assert unreadable.is_unreadable_data(CorruptRecordError("x"))
    assert unreadable.is_unreadable_data(zlib.error("x"))
    assert not unreadable.is_unreadable_data(TopicAuthorizationFailedError("x"))
    assert not unreadable.is_unreadable_data(KeyboardInterrupt())


def test_a_probe_tells_the_partition_when_several_have_data(monkeypatch: pytest.MonkeyPatch) -> None:
    c = BrokenBatch(bad=1, offsets={0}, error=UnsupportedCodecError("Unrecognized compression type: 7"), tell=False)
    _fill(c, 0, 2)
    _fill(c, 1, 2)
    c.pos = {0: 0, 1: 0}
    c.assigned = {0, 1}
    probed: list[int] = []

    def probe(consumer: Any, topic: str, partition: int, settings: Any) -> bool:
        probed.append(partition)
        return partition == 1

    monkeypatch.setattr(unreadable, "probe", probe)
    got = unreadable.skip_unreadable(c, TOPIC, c.error, {0, 1}, {})
    assert got is not None and got[:2] == (1, 0) and probed == [0, 1]
    assert c.pos[1] == 1
