"""A consumer-group Kafka source: messages -> batches, offsets committed only after the outputs are durable.

The loop sees an ordinary :class:`~streamembed.stream.sources.Source`. What
is particular to Kafka:

* **Checkpoint = committed offsets.** A batch's ``position`` is the next
  offset per partition of everything handed to the loop so far. The loop's
  checkpoint step calls :meth:`KafkaSource.commit` with it *after* the sinks'
  ``flush`` returned (output topic acknowledged, files renamed), so a crash
  at any point loses nothing: the group resumes from the last commit and at
  most the batches since then are processed again (at-least-once).
* **Batches.** One ``poll`` of the consumer (at most ``max_poll_records``
  messages, ``fetch_max_bytes``) is decoded at once and cut into batches per
  partition: consecutive row messages of the same schema are concatenated up
  to ``batch_rows`` rows (a message is never split; a message of more rows
  is a zero-copy batch of its own); consecutive block messages (``cross``,
  one block each) share a batch the same way, each marked with a ``block``
  column (its offset), so a poll's blocks go to the block solver together.
  The consumer is polled again only when those batches are handed
  out, so a poll's work takes (messages x per-message time), far below
  ``max_poll_interval_ms``; the gap is logged if it ever gets close. Each
  poll that returned records is followed by a non-blocking one, so that the
  next fetch is in flight while the batches are embedded (kafka-python 3.0
  sends it only from a poll that finds its buffer drained).
* **Rebalances** (listener callbacks run inside ``consumer.poll``):
  revoked partitions' queued, not-yet-handed batches are dropped and, if the
  partition comes back, the consumer seeks to the first dropped offset; the
  positions handed before are never committed again (each assignment gets a
  new epoch, and :meth:`commit` only commits partitions owned now, in the
  epoch the position was taken). Rows already handed to the loop stay in the
  sinks and are flushed with the next commit; if the partition moved to
  another member, that member re-reads them from the last commit
  (duplicates, never loss). The bookkeeping (epochs, offsets handed and
  committed, lag, queued batches, rewinds) is one
  :class:`~streamembed.kafka.partitions.PartitionTable`: this module drives
  the consumer around it.
* **Backpressure.** When ``backpressure()`` (the sinks' unacknowledged bytes
  over a limit) is true, every assigned partition is paused and ``poll``
  returns None; they resume when it clears. The consumer is still polled
  (nothing is fetched) to stay within ``max_poll_interval_ms``.
* **Lag** per partition = fetch high watermark - next offset to hand out
  (``end_offsets`` is not used: it is wrong on some brokers, e.g. Tansu).
  The *group's* lag of every partition of the topic (end of log - committed
  offset) and which partitions this member owns are exported too, by every
  member (:mod:`~streamembed.kafka.group_lag`: the owned ones from what the
  source knows, the others by a thread with a consumer of its own, off the
  poll path): a partition that no member owns (its owner killed, the group not
  yet rebalanced) shows as owned by nobody, its lag growing.
* **Fetch wait** (``kafka.fetch_max_wait_ms = "auto"``,
  :class:`~streamembed.kafka.consumer_health.AdaptiveFetch`): short fetches
  while caught up, full ones while behind by more than a poll.
* **Dead letters.** A message that cannot be decoded becomes one
  :class:`KafkaDeadRecord` holding its bytes and coordinates; rows refused
  later (by the embedder) are located by :meth:`locate` from the batch's
  ``file`` and row index, so the dead-letter topic can name
  topic/partition/offset. A message larger than ``max_partition_fetch_bytes``
  is not decoded: it is a ``too_large`` dead letter. A record batch the client
  cannot read at all (an unknown codec, a corrupt compressed payload, a CRC
  mismatch: :mod:`~streamembed.kafka.unreadable`) is an ``undecodable`` dead
  letter per offset, skipped by seeking past it - never an exit, which would
  only fail on the same batch again after the restart.
* **Event time** (``kafka.event_time``, :mod:`~streamembed.kafka.event_time`):
  by default a row without its own ``event_time`` takes its message's
  timestamp, so end-to-end latency is observed with any producer.
* **Backlog** (the progress line's): the sum of the last lag measured over
  the assigned partitions.
* **Labels** (which name output files) are a function of the input position,
  ``kafka-<topic>-p<partition>-o<first offset>``, so that the batches a
  restart reads again are written under the same names; ``stream`` is the
  partition (one output file per partition per roll, see the loop).
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Mapping

import numpy as np
import pyarrow as pa

from streamembed.core.options import BATCH_ROWS
from streamembed.kafka.client import is_transient, retry
from streamembed.kafka.batches import Coordinates, KafkaDeadRecord, QueuedBatch, cut_batches
from streamembed.kafka.consumer_health import (AdaptiveFetch, brokers_away, measure_lag, rebalance_listener,
                                               throttle_join_spin)
from streamembed.kafka.group_lag import GroupLagWatcher, owned_lag
from streamembed.kafka.partitions import PartitionTable, Position
from streamembed.kafka.unreadable import is_unreadable_data, skip_unreadable, unreadable_batch
from streamembed.stream.codecs import DeadRecord
from streamembed.stream.origin import RowOrigin
from streamembed.stream.sinks import safe_label
from streamembed.stream.sources import SourceBatch
import contextlib

__all__ = ["KafkaSource"]

log = logging.getLogger("streamembed.kafka.source")

#: A blocking consumer poll waits in slices of this many ms while another thread may want the consumer.
POLL_SLICE_MS = 10
#: The brokers unreachable this long (seconds) make the source unready (``problem``, /readyz).
BROKER_GRACE_SECONDS = 5.0
#: Longest wait of one offset-commit attempt (ms); a failed attempt is retried with backoff.
COMMIT_TIMEOUT_MS = 10_000
#: Seconds between measures of the group's lag on every partition of the topic (owned or not).
GROUP_LAG_SECONDS = 5.0


@dataclass
class _Provenance:
    partition: int
    row_offset: np.ndarray  # message offset of each table row
    row_in_msg: np.ndarray  # row index within its message


def _skip_unreadable(source: KafkaSource, exc: BaseException) -> bool:
    """Dead-letter the offset whose batch the client cannot read, and seek past it; False if not found."""
    found = skip_unreadable(source._consumer, source.topic, exc, source._parts.assigned, source._settings)
    if found is not None and found[0] >= 0:  # (-1: revoked meanwhile, nothing to skip here)
        source._parts.enqueue([_record_unreadable(source, *found)])
    return found is not None


def _record_unreadable(source: KafkaSource, p: int, offset: int, detail: str) -> QueuedBatch:
    """The batch of one dead letter for an offset whose batch the client could not read (skipped past it)."""
    source.skipped += 1
    if source.skipped <= 3 or source.skipped % 1000 == 0:
        log.warning("skipping offset %d of partition %d: %s (%d skipped so far; each is a dead letter)", offset, p,
                    detail, source.skipped, extra={"topic": source.topic, "partition": p, "offset": offset})
    return unreadable_batch(source.topic, p, offset, detail)


class KafkaSource:
    """Batches from ``topic`` as a member of a consumer group (see the module doc).

    ``settings`` are ``KafkaConsumer`` keyword arguments (see
    :func:`streamembed.kafka.client.consumer_settings`) of the client library
    ``clients`` (``kafka.libraries``; default kafka-python); ``backpressure`` a
    callable that is True while the sinks are behind.
    """

    name = "kafka"

    def __init__(
        self,
        settings: Mapping[str, Any],
        topic: str,
        *,
        batch_rows: int = BATCH_ROWS,
        poll_timeout_ms: int = 200,
        metrics: Any = None,
        stop: threading.Event | None = None,
        backpressure: Callable[[], bool] | None = None,
        resume_when: Callable[[], bool] | None = None,
        startup_timeout: float = 60.0,
        max_backoff: float = 10.0,
        consumer_factory: Callable[..., Any] | None = None,
        event_time: str = "auto",
        adaptive_fetch: bool = False,
        clients: Any = None,
    ) -> None:
        if clients is None:
            from streamembed.kafka.libraries import KAFKA_PYTHON

            clients = KAFKA_PYTHON
        self.topic = topic
        self.batch_rows = int(batch_rows)
        self.poll_timeout_ms = int(poll_timeout_ms)
        self.max_poll_records = int(settings.get("max_poll_records", 500))
        self.max_poll_interval = float(settings.get("max_poll_interval_ms", 300_000)) / 1000
        self.metrics = metrics
        self.stop = stop or threading.Event()
        self.backpressure = backpressure
        self.resume_when = resume_when
        self.max_backoff = max_backoff
        self.max_message_bytes = int(settings.get("max_partition_fetch_bytes", 1 << 20))
        self.event_time = event_time
        self._settings = dict(settings)
        make = consumer_factory or clients.consumer
        deadline = time.monotonic() + startup_timeout
        self._consumer = retry(lambda: make(**settings), "connecting the consumer", stop=self.stop, metrics=metrics,
                               max_backoff=max_backoff, deadline=deadline)
        throttle_join_spin(self._consumer)
        #: ``kafka.fetch_max_wait_ms = "auto"``: the fetch wait follows the backlog (see the module doc)
        self._fetch_wait = AdaptiveFetch(self._consumer, self.max_poll_records) if adaptive_fetch else None
        self._consumer.subscribe([topic], listener=rebalance_listener(self._revoked, self._assigned))
        self._parts = PartitionTable()  # offsets, epochs, lag, queued batches, rewinds (kafka.partitions)
        self._paused = False
        self._caught_up = False
        self._provenance: OrderedDict[str, _Provenance] = OrderedDict()
        self._token = os.urandom(3).hex()
        self._seq = itertools.count()
        self._last_consumer_poll = time.monotonic()
        self._last_lag = 0.0
        self.rebalances = 0
        self.commits = 0
        self.skipped = 0  # offsets skipped because the client could not read their batch
        #: Set by a thread waiting to use the consumer (``pipeline.ReadAhead``): a blocking poll ends early.
        self.preempt: threading.Event | None = None
        self._problem: str | None = None
        self._away_since: float | None = None
        self._checked_at = 0.0
        self._lag_watcher: GroupLagWatcher | None = None
        if getattr(metrics, "registry", None) is not None:  # exported metrics (not ops.no_metrics): watch the group
            self._lag_watcher = GroupLagWatcher(settings, topic, lambda: self._parts.assigned, metrics,
                                                GROUP_LAG_SECONDS, factory=clients.consumer).start()

    # ------------------------------------------------------------------ the Source interface
    def restore(self, state: Any) -> None:
        """Positions live in the consumer group (committed offsets): nothing to restore."""

    def wait_hint(self) -> float:
        return 0.05 if self._paused else 0.0

    @property
    def caught_up(self) -> bool:
        return self._caught_up

    @property
    def exhausted(self) -> bool:
        return False

    @property
    def assigned_partitions(self) -> set[int]:
        return self._parts.assigned

    @property
    def backlog(self) -> int | None:
        """Messages not yet handed out over the assigned partitions (last measured lag), None before any."""
        return self._parts.backlog

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def problem(self) -> str | None:
        """Why the source cannot work now (the brokers unreachable for BROKER_GRACE_SECONDS), for /readyz."""
        return self._problem

    def _check_brokers(self) -> None:
        """Note whether the brokers are reachable (at most once a second; on the polling thread)."""
        now = time.monotonic()
        if now - self._checked_at < 1.0:
            return
        self._checked_at = now
        away = brokers_away(self._consumer)
        if away is None:
            self._away_since, self._problem = None, None
            return
        if self._away_since is None:
            self._away_since = now
        if now - self._away_since >= BROKER_GRACE_SECONDS:
            self._problem = f"the brokers are unreachable ({away}) for {now - self._away_since:.0f} s"

    def poll(self) -> SourceBatch | None:
        """The next batch, or None (nothing new, or paused for backpressure)."""
        self._check_brokers()
        if self._apply_backpressure():
            self._caught_up = False
            self._keep_alive()
            return None
        if not self._parts.queued:
            self._fetch(self.poll_timeout_ms)
        self._update_lag()
        handed = self._parts.hand_out()
        self._caught_up = handed is None
        return None if handed is None else self._batch(*handed)

    def commit(self, position: Any) -> None:
        """Commit ``position``'s offsets for the partitions still owned in the same epoch.

        Called by the loop after the sinks are durable. A commit refused
        because the group rebalanced meanwhile is logged and skipped: the new
        owner re-reads from the previous commit (duplicates, not loss).
        """
        if not position:
            return
        from kafka import OffsetAndMetadata, TopicPartition

        offsets = {TopicPartition(self.topic, p): OffsetAndMetadata(off, "", -1)
                   for p, off in self._parts.to_commit(position).items()}
        if not offsets:
            return
        try:
            # a bounded wait per attempt: a broker away makes attempts fail (and retried), not hang (liveness.py)
            retry(lambda: self._consumer.commit(offsets, timeout_ms=COMMIT_TIMEOUT_MS), "committing offsets",
                  stop=self.stop, metrics=self.metrics, max_backoff=self.max_backoff)
        except Exception as exc:  # a lost generation is expected during rebalances
            if is_transient(exc):
                raise
            log.warning("offset commit refused (%s: %s); the partitions' new owner re-reads from the previous "
                        "commit", type(exc).__name__, exc)
            return
        self._parts.committed({tp.partition: om.offset for tp, om in offsets.items()})
        self.commits += 1
        if self.metrics is not None:
            self.metrics.kafka_commits.inc()

    def locate(self, label: str | None, row: int | None) -> Coordinates | None:
        """Coordinates of row ``row`` of the batch labelled ``label`` (None if unknown)."""
        prov = self._provenance.get(label or "")
        if prov is None or row is None or not 0 <= row < prov.row_offset.size:
            return None
        return Coordinates(self.topic, prov.partition, int(prov.row_offset[row]), int(prov.row_in_msg[row]))

    def close(self) -> None:
        if self._lag_watcher is not None:
            self._lag_watcher.close()
        try:
            self._consumer.close(autocommit=False)
        except Exception:  # closing is best effort
            log.warning("closing the Kafka consumer failed", exc_info=True)

    # ------------------------------------------------------------------ fetching
    def _consumer_poll(self, timeout_ms: int) -> dict[Any, list[Any]]:
        gap = time.monotonic() - self._last_consumer_poll
        if gap > self.max_poll_interval / 2:
            log.warning("%.1f s between consumer polls (max_poll_interval_ms is %.0f s): lower source.batch_rows "
                        "or kafka.max_poll_records", gap, self.max_poll_interval)
        try:
            records = self._consumer.poll(timeout_ms=timeout_ms, max_records=self.max_poll_records)
        except Exception as exc:
            if is_transient(exc):
                log.warning("polling the consumer failed transiently (%s: %s)", type(exc).__name__, exc)
                if self.metrics is not None:
                    self.metrics.kafka_retries.inc()
            elif not (is_unreadable_data(exc) and _skip_unreadable(self, exc)):
                raise
            records = {}
        self._last_consumer_poll = time.monotonic()
        return records

    def _waiting_poll(self, timeout_ms: int) -> dict[Any, list[Any]]:
        """``_consumer_poll(timeout_ms)``, in slices when another thread may be waiting to use the consumer.

        The read-ahead polls under a lock ``commit`` needs too (the consumer is not thread-safe): a poll
        blocking for ``poll_timeout_ms`` held each commit back by up to one fetch (0.1 s a commit, measured).
        While ``preempt`` (set by the read-ahead when its caller waits for the lock) is set, the poll
        returns after its current slice.
        """
        if self.preempt is None or timeout_ms <= POLL_SLICE_MS or not self._parts.assigned:
            return self._consumer_poll(timeout_ms)  # (nothing to commit before a partition is assigned)
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            left_ms = int((deadline - time.monotonic()) * 1000)
            records = self._consumer_poll(max(0, min(POLL_SLICE_MS, left_ms)))
            if records or left_ms <= POLL_SLICE_MS or self.preempt.is_set():
                return records

    def _fetch(self, timeout_ms: int) -> None:
        if self._take(self._waiting_poll(timeout_ms)):
            # kafka-python 3.0 sends the next fetch only from a poll that finds its
            # buffer already drained, so without this second, non-blocking poll no
            # fetch is in flight while the loop embeds what the first one returned:
            # fetching and processing would take turns instead of overlapping
            # (measured: a poll of 6 MB took 33 ms after 24 ms of processing, 2.5 ms
            # with this). Its records, if any, are queued too.
            self._take(self._consumer_poll(0))

    def _take(self, records: Mapping[Any, list[Any]]) -> int:
        """Decode and queue one poll's records; returns how many messages it held."""
        n_msgs = n_bytes = 0
        batches: list[QueuedBatch] = []
        for tp, recs in records.items():
            if tp.partition not in self._parts:
                continue  # revoked inside this very poll
            n_msgs += len(recs)
            n_bytes += sum(len(r.value) for r in recs if r.value is not None)
            batches += cut_batches(tp.partition, recs, self.batch_rows, self._dead, self.max_message_bytes,
                                   self.event_time)
        take = getattr(self._consumer, "take_unreadable", None)  # a client that skips unreadable batches itself
        if take is not None:  # (reported since the last poll with records): in offset order with these records
            batches += [_record_unreadable(self, p, offset, detail) for p, offset, detail in take() if p in self._parts]
            batches.sort(key=lambda q: (q.partition, q.first_offset))
        self._parts.enqueue(batches)
        if self.metrics is not None and n_msgs:
            self.metrics.kafka_messages_in.inc(n_msgs)
            self.metrics.kafka_bytes_in.inc(n_bytes)
        return n_msgs

    def _dead(self, d: DeadRecord, partition: int, rec: Any, content_type: str) -> KafkaDeadRecord:
        return KafkaDeadRecord(reason=d.reason, detail=d.detail, id=d.id, file=None, row=d.row, record=d.record,
                               raw=d.raw, topic=self.topic, partition=partition, offset=rec.offset, key=rec.key,
                               content_type=content_type)

    def _batch(self, q: QueuedBatch, position: Position) -> SourceBatch:
        p = q.partition
        # the label names output files: a function of the position only, so a restart rewrites the same files;
        # ``file`` (the key of the rows' provenance) is unique in this process
        label = f"kafka-{safe_label(self.topic, 48)}-p{p}-o{q.first_offset:012d}"
        file = f"{label}-{self._token}{next(self._seq):06d}"
        table: pa.Table | None = None
        if q.tables:
            table = q.tables[0] if len(q.tables) == 1 else pa.concat_tables(q.tables)
            counts = [t.num_rows for t in q.tables]
            row_offset = np.repeat(np.asarray(q.offsets, dtype=np.int64), counts)
            row_in_msg = np.concatenate([np.arange(c, dtype=np.int64) if r is None else np.asarray(r, np.int64)
                                         for c, r in zip(counts, q.msg_rows, strict=True)])
            self._provenance[file] = _Provenance(p, row_offset, row_in_msg)
            while len(self._provenance) > 64:
                self._provenance.popitem(last=False)
        return SourceBatch(table, position, label, dead=q.dead, origin=RowOrigin(file), stream=f"p{p}")

    # ------------------------------------------------------------------ backpressure and lag
    def _apply_backpressure(self) -> bool:
        if self.backpressure is None:
            return False
        if not self._paused and self.backpressure():
            self._paused = True
            log.info("sinks are behind: pausing %d partitions", len(self._parts.assigned))
        elif self._paused and (self.resume_when() if self.resume_when is not None else not self.backpressure()):
            self._paused = False
            self._set_paused(False)
            log.info("sinks caught up: resuming")
        if self._paused:
            self._set_paused(True)
        return self._paused

    def _set_paused(self, paused: bool) -> None:
        from kafka import TopicPartition

        tps = [TopicPartition(self.topic, p) for p in sorted(self._parts.assigned)]
        if paused:
            self._consumer.pause(*tps)
        else:
            self._consumer.resume(*tps)
        if self.metrics is not None:
            self.metrics.kafka_paused_partitions.set(len(tps) if paused else 0)

    def _keep_alive(self) -> None:
        """Poll the paused consumer now and then: it stays in the group, fetches nothing paused."""
        if time.monotonic() - self._last_consumer_poll > min(5.0, self.max_poll_interval / 4):
            self._fetch(0)  # a rebalance may add unpaused partitions: their records are queued

    def _update_lag(self) -> None:
        since = time.monotonic() - self._last_lag
        if since < 0.1 or (since < 1.0 and self._parts.assigned <= self._parts.lag.keys()):
            return  # once a second; a newly assigned partition's first lag within 0.1 s
        self._last_lag = time.monotonic()
        self._parts.measured(measure_lag(self._consumer, self.topic, self._parts.assigned, self._parts.next_offsets()))
        if self._fetch_wait is not None:
            self._fetch_wait.follow(self._parts.backlog or 0)
        if self.metrics is not None:
            for p, lag in self._parts.lag.items():
                self.metrics.kafka_consumer_lag.labels(topic=self.topic, partition=str(p)).set(lag)
                s = self._parts[p]
                self.metrics.kafka_group_lag.labels(topic=self.topic, partition=str(p)).set(
                    owned_lag(lag, s.handed, s.committed))

    # ------------------------------------------------------------------ rebalance callbacks
    def _revoked(self, tps: set[Any]) -> None:
        parts = {tp.partition for tp in tps if tp.topic == self.topic}
        self._parts.revoke(parts)
        if self.metrics is not None:
            for p in parts:
                with contextlib.suppress(KeyError):
                    self.metrics.kafka_consumer_lag.remove(self.topic, str(p))
                self.metrics.kafka_partition_owned.labels(topic=self.topic, partition=str(p)).set(0)
        if parts:
            log.info("partitions revoked", extra={"topic": self.topic, "partitions": sorted(parts)})

    def _assigned(self, tps: set[Any]) -> None:
        from kafka import TopicPartition

        parts = {tp.partition for tp in tps if tp.topic == self.topic}
        for p, offset in self._parts.assign(parts).items():
            self._consumer.seek(TopicPartition(self.topic, p), offset)
        if self._paused:
            self._set_paused(True)
        self.rebalances += 1
        if self.metrics is not None:
            self.metrics.kafka_rebalances.inc()
            self.metrics.kafka_assigned_partitions.set(len(self._parts.assigned))
            for p in parts:
                self.metrics.kafka_partition_owned.labels(topic=self.topic, partition=str(p)).set(1)
        log.info("partitions assigned", extra={"topic": self.topic, "partitions": sorted(self._parts.assigned)})
