"""What the Kafka source knows about its partitions: one typed table instead of parallel dicts.

Per assigned partition (:class:`Partition`, immutable: every change makes a new one):

* ``epoch`` - which assignment the state belongs to. Each assignment of a
  partition gets a new epoch from one counter, so a position handed out
  before a rebalance never matches the partition's epoch after it, even if
  the partition came back: its offsets are not committed (the new owner, or
  this member after its seek, re-reads from the last commit).
* ``handed`` - the offset after the last message handed to the loop in this
  epoch (None before the first).
* ``committed`` - the offset last committed in this epoch (None before).
* ``lag`` - the last measured lag (None before the first measure).

Around them, the table keeps the batches cut from polls and not yet handed
out (in poll order), and the *rewind* of revoked partitions: the first
offset of the queued batches a revocation dropped, where the consumer must
seek if the partition is assigned again (else it would resume after them).

The loop's *position* (:meth:`PartitionTable.hand_out`) is the handed
offsets of every partition with their epochs, taken when a batch is handed
out; it is committed (:meth:`PartitionTable.to_commit`) after the sinks made
that batch and every earlier one durable. Batches are processed in the order
they are handed out, so a position covers exactly the rows done: a commit
never includes an offset handed out later (the loop commits the position of
its last durable batch, not the table's latest).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from streamembed.kafka.batches import QueuedBatch

__all__ = ["Partition", "PartitionTable", "Position"]

#: A position as the loop keeps and returns it: ``{"offsets": {p: next offset}, "epochs": {p: epoch}}``.
Position = dict[str, dict[int, Any]]


@dataclass(frozen=True)
class Partition:
    """The source's state of one assigned partition (see the module doc)."""

    epoch: int
    handed: int | None = None
    committed: int | None = None
    lag: int | None = None


class PartitionTable:
    """Assigned partitions, the batches queued for them, and the rewinds of revoked ones (see the module doc).

    Not thread-safe: the source calls it from the thread that polls the consumer (the rebalance callbacks run
    inside ``consumer.poll``).
    """

    def __init__(self) -> None:
        self._parts: dict[int, Partition] = {}
        self._queue: deque[QueuedBatch] = deque()
        self._rewind: dict[int, int] = {}
        self._epochs = itertools.count(1)

    # ------------------------------------------------------------------ reading
    @property
    def assigned(self) -> set[int]:
        """The partitions assigned now (a copy)."""
        return set(self._parts)

    def __contains__(self, partition: object) -> bool:
        return partition in self._parts

    def __getitem__(self, partition: int) -> Partition:
        return self._parts[partition]

    @property
    def queued(self) -> int:
        """Batches waiting to be handed out."""
        return len(self._queue)

    @property
    def lag(self) -> dict[int, int]:
        """The last measured lag of each assigned partition that has one."""
        return {p: s.lag for p, s in self._parts.items() if s.lag is not None}

    @property
    def backlog(self) -> int | None:
        """Sum of the last measured lags over the assigned partitions, None before any was measured."""
        lags = self.lag
        return sum(lags.values()) if lags else None

    def next_offsets(self) -> dict[int, int]:
        """Per assigned partition, the next offset to hand out: its first queued batch's, else after the handed
        ones (partitions with neither are left out: the consumer's position says)."""
        out: dict[int, int] = {}
        for q in self._queue:
            out.setdefault(q.partition, q.first_offset)
        for p, s in self._parts.items():
            if p not in out and s.handed is not None:
                out[p] = s.handed
        return out

    # ------------------------------------------------------------------ rebalances
    def assign(self, partitions: Iterable[int]) -> dict[int, int]:
        """Partitions assigned: each gets a new epoch; returns ``{partition: offset}`` to seek to (the rewinds).

        A partition still assigned keeps its offsets and lag (only its epoch changes); rewinds of partitions
        not assigned back are forgotten (their new owner reads from the last commit).
        """
        seeks: dict[int, int] = {}
        for p in partitions:
            old = self._parts.get(p)
            epoch = next(self._epochs)
            self._parts[p] = Partition(epoch) if old is None else replace(old, epoch=epoch)
            if p in self._rewind:
                seeks[p] = self._rewind.pop(p)
        self._rewind.clear()
        return seeks

    def revoke(self, partitions: Iterable[int]) -> set[int]:
        """Partitions revoked (or lost): their queued batches are dropped, remembering the first dropped offset
        (the rewind); their state goes, so positions handed before are never committed. Returns the
        partitions that were assigned."""
        parts = set(partitions)
        kept: deque[QueuedBatch] = deque()
        for q in self._queue:
            if q.partition in parts:
                self._rewind[q.partition] = min(self._rewind.get(q.partition, q.first_offset), q.first_offset)
            else:
                kept.append(q)
        self._queue = kept
        gone = parts & self._parts.keys()
        for p in gone:
            del self._parts[p]
        return gone

    # ------------------------------------------------------------------ batches
    def enqueue(self, batches: Iterable[QueuedBatch]) -> None:
        """Queue batches cut from a poll (in offset order per partition)."""
        self._queue.extend(batches)

    def hand_out(self) -> tuple[QueuedBatch, Position] | None:
        """The next queued batch and the position after it (every partition's handed offset and epoch), or None."""
        if not self._queue:
            return None
        q = self._queue.popleft()
        s = self._parts.get(q.partition)
        if s is not None:  # (always: a revocation drops its partition's queued batches)
            self._parts[q.partition] = replace(s, handed=q.last_offset + 1)
        handed = {p: t.handed for p, t in self._parts.items() if t.handed is not None}
        return q, {"offsets": handed, "epochs": {p: self._parts[p].epoch for p in handed}}

    # ------------------------------------------------------------------ commits and lag
    def to_commit(self, position: Mapping[str, Mapping[int, Any]]) -> dict[int, int]:
        """The offsets of ``position`` worth committing: partitions assigned now, in the epoch the position was
        taken, whose offset differs from the last commit."""
        out: dict[int, int] = {}
        epochs = position["epochs"]
        for p, off in position["offsets"].items():
            s = self._parts.get(p)
            if s is not None and epochs.get(p) == s.epoch and s.committed != off:
                out[p] = off
        return out

    def committed(self, offsets: Mapping[int, int]) -> None:
        """The broker accepted these offsets (partitions revoked meanwhile are ignored)."""
        for p, off in offsets.items():
            if p in self._parts:
                self._parts[p] = replace(self._parts[p], committed=off)

    def measured(self, lags: Mapping[int, int]) -> None:
        """New lag measures (partitions no longer assigned are ignored)."""
        for p, lag in lags.items():
            if p in self._parts:
                self._parts[p] = replace(self._parts[p], lag=lag)
