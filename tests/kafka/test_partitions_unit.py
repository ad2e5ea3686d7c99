"""The Kafka source's partition table: assignments and epochs, revocations with queued batches, hand-outs and
commits of only what the loop made durable; and, on random rebalance schedules, the same decisions as the
parallel dicts the source kept before (transcribed below as ``DictBook``)."""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamembed.kafka.batches import QueuedBatch
from streamembed.kafka.partitions import Partition, PartitionTable


def _q(p: int, first: int, last: int | None = None) -> QueuedBatch:
    return QueuedBatch(p, first, first if last is None else last)


def test_each_assignment_is_a_new_epoch_and_a_partition_kept_keeps_its_offsets() -> None:
    t = PartitionTable()
    assert t.assign([0, 1]) == {}
    e0 = t[0].epoch
    t.enqueue([_q(0, 0, 4)])
    t.hand_out()
    t.assign([0])
    assert t[0].epoch != e0 and t[0].handed == 5 and t.assigned == {0, 1}


def test_a_commit_covers_only_the_batches_the_position_was_taken_after() -> None:
    """Three batches handed, the loop made the first two durable: the commit stops after the second."""
    t = PartitionTable()
    t.assign([0, 1])
    t.enqueue([_q(0, 0, 9), _q(1, 0, 4), _q(0, 10, 19)])
    positions = [t.hand_out()[1] for _ in range(3)]  # type: ignore[index]
    assert t.hand_out() is None
    assert positions[1]["offsets"] == {0: 10, 1: 5}
    assert t.to_commit(positions[1]) == {0: 10, 1: 5}
    t.committed({0: 10, 1: 5})
    assert t.to_commit(positions[1]) == {}  # committed once
    assert t.to_commit(positions[2]) == {0: 20}  # only what moved
    assert t[0] == Partition(t[0].epoch, handed=20, committed=10)


def test_revoke_with_queued_batches_drops_them_and_rewinds_when_the_partition_comes_back() -> None:
    t = PartitionTable()
    t.assign([0, 1, 2])
    t.enqueue([_q(0, 0, 9), _q(1, 0, 2), _q(0, 10, 12), _q(2, 5, 6), _q(1, 3, 3)])
    _, before = t.hand_out()  # type: ignore[misc]
    assert t.revoke([0, 1, 7]) == {0, 1}
    assert t.queued == 1 and t.assigned == {2}
    assert t.to_commit(before) == {}  # a position from before the revocation is never committed
    assert t.assign([1, 2]) == {1: 0}  # partition 1 seeks back to its first dropped offset
    assert t.assign([0]) == {}  # partition 0's rewind was forgotten: it went to another member
    q, after = t.hand_out()  # type: ignore[misc]
    assert (q.partition, q.first_offset) == (2, 5)
    assert t.to_commit(before) == {} and t.to_commit(after) == {2: 7}


def test_lag_of_assigned_partitions_only_and_the_next_offsets_to_hand_out() -> None:
    t = PartitionTable()
    assert t.backlog is None
    t.assign([0, 1])
    t.enqueue([_q(0, 3, 5), _q(0, 6, 8)])
    t.hand_out()
    assert t.next_offsets() == {0: 6}
    t.hand_out()
    assert t.next_offsets() == {0: 9}
    t.measured({0: 4, 1: 2, 5: 100})
    assert t.lag == {0: 4, 1: 2} and t.backlog == 6
    t.revoke([1])
    assert t.backlog == 4
    t.assign([1])
    assert t.lag == {0: 4}


class DictBook:
    """The source's bookkeeping before the table (kafka/source.py, 2026-11-26), transcribed."""

    def __init__(self) -> None:
        self.queue: deque[QueuedBatch] = deque()
        self.handed: dict[int, int] = {}
        self.epoch: dict[int, int] = {}
        self.epochs = itertools.count(1)
        self.rewind: dict[int, int] = {}
        self.committed: dict[int, int] = {}
        self.assigned: set[int] = set()
        self.lag: dict[int, int] = {}

    def revoked(self, parts: set[int]) -> None:
        kept: deque[QueuedBatch] = deque()
        for q in self.queue:
            if q.partition in parts:
                self.rewind[q.partition] = min(self.rewind.get(q.partition, q.first_offset), q.first_offset)
            else:
                kept.append(q)
        self.queue = kept
        for p in parts:
            self.handed.pop(p, None)
            self.committed.pop(p, None)
            self.epoch[p] = next(self.epochs)
            self.lag.pop(p, None)
        self.assigned -= parts

    def assigned_(self, parts: set[int]) -> dict[int, int]:
        seeks = {}
        self.assigned |= parts
        for p in parts:
            self.epoch[p] = next(self.epochs)
            if p in self.rewind:
                seeks[p] = self.rewind.pop(p)
        self.rewind.clear()
        return seeks

    def hand_out(self) -> tuple[QueuedBatch, Any] | None:
        if not self.queue:
            return None
        q = self.queue.popleft()
        self.handed[q.partition] = q.last_offset + 1
        return q, {"offsets": dict(self.handed), "epochs": {k: self.epoch.get(k) for k in self.handed}}

    def to_commit(self, position: Any) -> dict[int, int]:
        return {p: off for p, off in position["offsets"].items()
                if p in self.assigned and position["epochs"].get(p) == self.epoch.get(p)
                and self.committed.get(p) != off}

    def backlog(self) -> int | None:
        lags = [self.lag[p] for p in self.assigned if p in self.lag]
        return sum(lags) if lags else None


_PARTS = st.sets(st.integers(0, 3))
_OPS = st.lists(st.one_of(
    st.tuples(st.just("assign"), _PARTS), st.tuples(st.just("revoke"), _PARTS),
    st.tuples(st.just("poll"), st.lists(st.tuples(st.integers(0, 3), st.integers(1, 5)), max_size=4)),
    st.tuples(st.just("hand_out"), st.just(None)), st.tuples(st.just("commit"), st.integers(0, 30)),
    st.tuples(st.just("lag"), st.integers(0, 50))), max_size=40)


@settings(max_examples=300, deadline=None)
@given(_OPS)
@example([("assign", {0}), ("poll", [(0, 2)]), ("hand_out", None), ("assign", {0}), ("commit", 0)])
@example([("assign", {0, 1}), ("poll", [(0, 2), (1, 1)]), ("hand_out", None), ("revoke", {0, 1}),
          ("assign", {0}), ("poll", [(0, 1)]), ("hand_out", None), ("commit", 0), ("commit", 1)])
@example([("assign", {0, 1}), ("poll", [(0, 2), (1, 3), (0, 1)]), ("hand_out", None), ("commit", 0), ("revoke", {0}),
          ("lag", 5), ("assign", {0, 2}), ("poll", [(0, 1)]), ("hand_out", None), ("hand_out", None),
          ("commit", 0), ("commit", 2), ("revoke", {1}), ("hand_out", None)])
def test_the_table_decides_as_the_parallel_dicts_did(ops: list[tuple[str, Any]]) -> None:
    """Random schedules of rebalances, polls (only assigned partitions fetch, as the source filters), hand-outs,
    commits of any earlier position (the loop's last durable one) and lag measures: same batches, positions'
    offsets, commits, seeks, assignments and backlog."""
    t, d = PartitionTable(), DictBook()
    fetched: dict[int, int] = {}  # next offset a fetch returns per partition
    positions: list[tuple[Any, Any]] = []
    for op, arg in ops:
        if op == "assign":
            assert t.assign(arg) == d.assigned_(set(arg))
        elif op == "revoke":
            t.revoke(arg)
            d.revoked(set(arg))
        elif op == "poll":
            for p, n in arg:
                if p in d.assigned:
                    first = fetched.get(p, 0)
                    fetched[p] = first + n
                    t.enqueue([_q(p, first, first + n - 1)])
                    d.queue.append(_q(p, first, first + n - 1))
        elif op == "hand_out":
            a, b = t.hand_out(), d.hand_out()
            assert (a is None) == (b is None)
            if a is not None and b is not None:
                assert (a[0].partition, a[0].first_offset) == (b[0].partition, b[0].first_offset)
                assert a[1]["offsets"] == b[1]["offsets"]
                positions.append((a[1], b[1]))
        elif op == "commit" and positions:
            pt, pd = positions[min(arg, len(positions) - 1)]
            offsets = t.to_commit(pt)
            assert offsets == d.to_commit(pd)
            t.committed(offsets)
            d.committed.update(offsets)
        elif op == "lag":
            lags = {p: arg + p for p in sorted(d.assigned)}
            t.measured(lags)
            d.lag.update(lags)
        assert t.assigned == d.assigned and t.queued == len(d.queue) and t.backlog == d.backlog()
