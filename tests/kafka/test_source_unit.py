"""KafkaSource and ReliableProducer against in-memory fakes (no broker): batching, rebalances,
commits, backpressure, retries. The broker tests confirm the same against Tansu."""

from __future__ import annotations

import threading
from collections import namedtuple
from typing import Any

import pytest
from kafka import TopicPartition
from kafka.errors import KafkaTimeoutError, MessageSizeTooLargeError

from streamembed.ops.metrics import Metrics
from streamembed.kafka.client import KafkaDeliveryError, is_transient
from streamembed.kafka.producer import ReliableProducer
from streamembed.kafka.codec import arrow_message, json_message
from streamembed.kafka.source import KafkaSource
from streamembed.kafka.batches import KafkaDeadRecord
from streamembed.stream.records import Reason

from ..stream.helpers import N_LANDMARKS, dissimilarities, input_table, objects
from ..stream.helpers import drain as _drain

TOPIC = "in"
Record = namedtuple("Record", "topic partition offset key value headers timestamp")


class FakeConsumer:
    """Just enough of KafkaConsumer: partitions of records, positions, pause, seek, commits, rebalances."""

    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self.log: dict[int, list[Record]] = {}
        self.pos: dict[int, int] = {}
        self.assigned: set[int] = set()
        self.paused_parts: set[int] = set()
        self.commits: list[dict[int, int]] = []
        self.listener: Any = None
        self.next_assignment: set[int] | None = None
        self.polls = 0
        self.timeouts: list[int] = []

    def add(self, partition: int, value: bytes, headers: list[tuple[str, bytes]] | None = None) -> int:
        recs = self.log.setdefault(partition, [])
        recs.append(Record(TOPIC, partition, len(recs), None, value, headers or [], 0))
        return len(recs) - 1

    def subscribe(self, topics: list[str], listener: Any) -> None:
        self.listener = listener
        self.next_assignment = set(self.log) or {0}

    def poll(self, timeout_ms: int = 0, max_records: int = 500) -> dict[Any, list[Record]]:
        self.polls += 1
        self.timeouts.append(timeout_ms)
        if self.next_assignment is not None:
            new, self.next_assignment = self.next_assignment, None
            self.listener.on_partitions_revoked({TopicPartition(TOPIC, p) for p in self.assigned})
            kept = self.assigned & new
            self.assigned = new
            self.paused_parts &= new  # a new assignment forgets the pause state of partitions it drops
            for p in new - kept:
                self.pos[p] = self.committed_offset(p)
            self.listener.on_partitions_assigned({TopicPartition(TOPIC, p) for p in new})
        out = {}
        for p in sorted(self.assigned - self.paused_parts):
            recs = self.log.get(p, [])[self.pos.get(p, 0):self.pos.get(p, 0) + max_records]
            if recs:
                out[TopicPartition(TOPIC, p)] = recs
                self.pos[p] = recs[-1].offset + 1
        return out

    def committed_offset(self, p: int) -> int:
        for c in reversed(self.commits):
            if p in c:
                return c[p]
        return 0

    def seek(self, tp: TopicPartition, offset: int) -> None:
        assert tp.partition in self.assigned
        self.pos[tp.partition] = offset

    def commit(self, offsets: dict[TopicPartition, Any], timeout_ms: int | None = None) -> None:
        self.commits.append({tp.partition: om.offset for tp, om in offsets.items()})

    def pause(self, *tps: TopicPartition) -> None:
        self.paused_parts |= {tp.partition for tp in tps}

    def resume(self, *tps: TopicPartition) -> None:
        self.paused_parts -= {tp.partition for tp in tps}

    def highwater(self, tp: TopicPartition) -> int:
        return len(self.log.get(tp.partition, []))

    def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int:
        return self.pos.get(tp.partition, 0)

    def close(self, autocommit: bool = False) -> None:
        pass


def _source(consumer: FakeConsumer, max_poll_records: int = 500, **kw: Any) -> KafkaSource:
    return KafkaSource({"max_poll_records": max_poll_records}, TOPIC, consumer_factory=lambda **s: consumer, **kw)


def _arrow(prefix: str, m: int, seed: int = 1) -> bytes:
    return arrow_message(input_table([f"{prefix}{i}" for i in range(m)], dissimilarities(objects(m, seed=seed))))[0]


def test_messages_are_cut_into_batches_per_partition_and_blocks_apart_from_rows() -> None:
    """Row messages share batches up to batch_rows; consecutive block messages share a batch of their own,
    each block marked by its offset; an undecodable message is a dead letter of the batch it falls in."""
    c = FakeConsumer()
    for i in range(4):
        c.add(0, _arrow(f"a{i}-", 100))
    from scipy.spatial.distance import cdist

    for j, k in enumerate((3, 2)):
        Z = objects(k, seed=5 + j)
        c.add(0, arrow_message(input_table([f"b{j}-{i}" for i in range(k)], dissimilarities(Z), cross=cdist(Z, Z)))[0])
    c.add(0, b"garbage", [("content-type", b"application/vnd.apache.arrow.stream")])
    c.add(0, _arrow("z", 100))
    src = _source(c, batch_rows=250)
    batches = _drain(src)
    assert [b.table.num_rows if b.table is not None else 0 for b in batches] == [200, 200, 5, 100]
    assert [b.position["offsets"][0] for b in batches] == [2, 4, 7, 8]
    assert "block" not in batches[0].table.schema.names
    assert batches[2].table.column("block").to_pylist() == [4, 4, 4, 5, 5]
    dead = batches[2].dead
    assert len(dead) == 1 and isinstance(dead[0], KafkaDeadRecord)
    assert (dead[0].reason, dead[0].partition, dead[0].offset, dead[0].raw) == (Reason.UNDECODABLE, 0, 6, b"garbage")
    # rows refused later are located by the batch's file (unique) and row index
    where = src.locate(batches[1].origin.file, 150)
    assert (where.partition, where.offset, where.row) == (0, 3, 50)
    where = src.locate(batches[2].origin.file, 4)
    assert (where.partition, where.offset, where.row) == (0, 5, 1)
    assert src.poll() is None and src.caught_up


def test_a_poll_with_records_is_followed_by_a_non_blocking_one() -> None:
    """kafka-python 3.0 sends the next fetch only from a poll that finds its buffer drained: the
    source polls once more without waiting, so a fetch is in flight while the loop embeds."""
    c = FakeConsumer()
    for i in range(5):
        c.add(0, _arrow(f"a{i}-", 10, seed=i))
    src = _source(c, max_poll_records=2, batch_rows=10, poll_timeout_ms=200)
    first = src.poll()
    assert c.timeouts == [200, 0]  # the second poll's records are queued too
    assert first.position["offsets"] == {0: 1} and src._parts.queued == 3
    rest = _drain(src)
    assert [b.position["offsets"][0] for b in rest] == [2, 3, 4, 5]
    # the queue ran dry at offset 4: one more waiting poll, one kick after it, then a waiting poll that finds nothing
    assert c.timeouts == [200, 0, 200, 0, 200]


def test_commit_commits_the_handed_offsets_once() -> None:
    c = FakeConsumer()
    c.add(0, _arrow("a", 10))
    c.add(0, json_message({"id": "j", "dissimilarities": [1.0] * N_LANDMARKS})[0])
    src = _source(c)
    batches = _drain(src)
    assert len(batches) == 2  # different schemas (Arrow fixed-size lists, JSON lists) are not concatenated
    src.commit(batches[-1].position)
    src.commit(batches[-1].position)  # nothing new: no second request
    assert c.commits == [{0: 2}]


def test_revoked_partitions_drop_queued_work_rewind_and_never_commit_old_positions() -> None:
    c = FakeConsumer()
    c.log = {0: [], 1: []}
    for i in range(5):
        c.add(0, _arrow(f"p0-{i}-", 100, seed=i))
        c.add(1, _arrow(f"p1-{i}-", 100, seed=i + 10))
    over = threading.Event()
    src = _source(c, batch_rows=100, backpressure=over.is_set)
    first = [src.poll(), src.poll()]  # one poll fetched all 10 messages; 2 handed (partition 0, offsets 0, 1)
    assert [b.position["offsets"] for b in first] == [{0: 1}, {0: 2}]
    # the sinks fall behind: partitions paused; a poll while paused runs a rebalance that keeps only partition 0
    over.set()
    src._last_consumer_poll -= 10.0  # time for a keep-alive poll
    c.next_assignment = {0}
    assert src.poll() is None and c.paused_parts == {0}
    assert src.assigned_partitions == {0}
    # the old position is from a previous assignment epoch: never committed
    src.commit(first[-1].position)
    assert c.commits == []
    over.clear()
    rest = _drain(src)
    # partition 0 was rewound to its first queued (dropped) offset: nothing skipped, nothing of partition 1
    assert [b.position["offsets"] for b in rest] == [{0: 3}, {0: 4}, {0: 5}]
    assert all(b.label.split("-p")[1].startswith("0-") for b in rest)
    src.commit(rest[-1].position)
    assert c.commits == [{0: 5}]


def test_backpressure_pauses_every_partition_and_resumes() -> None:
    c = FakeConsumer()
    c.log = {0: [], 1: []}
    c.add(0, _arrow("a", 5))
    c.add(1, _arrow("b", 5))
    over = threading.Event()
    metrics = Metrics()
    src = _source(c, backpressure=over.is_set, metrics=metrics)
    assert src.poll() is not None
    over.set()
    assert src.poll() is None and src.paused and src.wait_hint() > 0
    assert c.paused_parts == {0, 1} and metrics.kafka_paused_partitions._value.get() == 2
    over.clear()
    assert src.poll() is not None and not src.paused and c.paused_parts == set()
    assert metrics.kafka_paused_partitions._value.get() == 0
    assert metrics.kafka_messages_in._value.get() == 2 and metrics.kafka_rebalances._value.get() == 1


# --------------------------------------------------------------------------- producer


class FakeFuture:
    def __init__(self, exc: BaseException | None) -> None:
        self.is_done, self.exception = True, exc

    def succeeded(self) -> bool:
        return self.exception is None


class FakeProducer:
    def __init__(self, failures: list[BaseException | None]) -> None:
        self.failures = failures
        self.sent: list[tuple[str, bytes]] = []

    def send(self, topic: str, value: bytes, key: bytes | None = None, headers: Any = None) -> FakeFuture:
        self.sent.append((topic, value))
        return FakeFuture(self.failures.pop(0) if self.failures else None)

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self, timeout: float = 0) -> None:
        pass


def test_transient_produce_errors_are_sent_again_until_acknowledged() -> None:
    fake = FakeProducer([KafkaTimeoutError("slow"), None, KafkaTimeoutError("slower")])
    metrics = Metrics()
    p = ReliableProducer({}, factory=lambda **s: fake, metrics=metrics, max_backoff=0.01)
    for v in (b"a", b"b", b"c"):
        p.send("out", v)
    assert p.flush() == 3
    assert [v for _, v in fake.sent] == [b"a", b"b", b"c", b"a", b"c"]
    assert p.unacked_bytes == 0 and p.pending_messages == 0
    assert metrics.kafka_retries._value.get() == 2 and metrics.kafka_produce_errors._value.get() == 2
    assert metrics.kafka_messages_out.labels(topic="out")._value.get() == 3


def test_permanent_produce_errors_refuse_to_flush() -> None:
    p = ReliableProducer({}, factory=lambda **s: FakeProducer([MessageSizeTooLargeError("big")]))
    p.send("out", b"x" * 10)
    with pytest.raises(KafkaDeliveryError, match="permanently"):
        p.flush()


def test_stop_while_retrying_refuses_to_flush() -> None:
    stop = threading.Event()
    stop.set()
    p = ReliableProducer({}, factory=lambda **s: FakeProducer([KafkaTimeoutError()]), stop=stop, drain_seconds=0)
    p.send("out", b"x")
    with pytest.raises(KafkaDeliveryError, match="not acknowledged"):
        p.flush()


def test_transient_errors_are_classified() -> None:
    from kafka.errors import KafkaConnectionError, NotLeaderForPartitionError, TopicAuthorizationFailedError

    assert is_transient(KafkaTimeoutError()) and is_transient(NotLeaderForPartitionError())
    assert is_transient(KafkaConnectionError()) and is_transient(ConnectionResetError())
    assert not is_transient(MessageSizeTooLargeError()) and not is_transient(TopicAuthorizationFailedError())
    assert not is_transient(ValueError())
