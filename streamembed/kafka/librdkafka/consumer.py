"""A confluent-kafka consumer with the surface of kafka-python's ``KafkaConsumer`` that streamembed uses.

librdkafka fetches in its own threads and hands messages out of a queue;
:meth:`LibrdkafkaConsumer.poll` takes up to ``max_records`` of them and
returns them as kafka-python does (``{TopicPartition: [record, ...]}``, the
records with kafka-python's attribute names and timestamp types). What differs
in librdkafka, and is made to behave as the source expects:

* **Rebalances.** The listener (kafka-python's ``ConsumerRebalanceListener``
  methods) runs inside ``poll``, from librdkafka's assign/revoke/lost
  callbacks; a ``seek`` made by the listener on partitions being assigned is
  the offset they are assigned at (librdkafka cannot seek a partition before
  it is assigned). A partition revoked and assigned back in one rebalance
  resumes where this consumer was, as kafka-python 3 does (librdkafka would
  start it again from the committed offset: the rows handed out since, which
  the sinks hold, would be read twice); one lost, or assigned later, starts
  from the committed offset.
* **Unreadable batches.** librdkafka reports a batch it cannot read (a corrupt
  compressed payload, a CRC mismatch: ``check.crcs`` is on) as an error at the
  batch's first offset, for ever, whatever offset inside the batch it fetches
  from. The consumer turns each report into one unreadable offset
  (:meth:`take_unreadable`: the source's dead letters) and seeks one past it,
  the next report at the same batch naming the next offset: a batch of n
  records gives n dead letters, one per offset, as with kafka-python
  (``kafka.unreadable``).
* **Brokers away.** librdkafka retries connections itself and says so in its
  error callback; :meth:`brokers_away` answers the source's readiness check.
* **Positions and lag.** ``highwater`` is the high watermark of the last fetch
  (librdkafka's cached watermark: ListOffsets is wrong on some brokers, e.g.
  Tansu); ``position`` the next offset to read.

Errors are kafka-python's classes (``librdkafka.errors``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from streamembed.kafka.librdkafka.errors import DATA_ERRORS, NO_OFFSET, LibrdkafkaLog, as_kafka_error
from streamembed.kafka.librdkafka.settings import bootstrap_seconds, consumer_conf

__all__ = ["LibrdkafkaConsumer", "Record"]

log = logging.getLogger("streamembed.kafka.librdkafka")

#: librdkafka's timestamp types -> kafka-python's (0 CreateTime, 1 LogAppendTime; None: not available).
_TIMESTAMP_TYPES = {1: 0, 2: 1}
#: Seconds a metadata request (partitions of a topic, a connectivity check) may take.
METADATA_SECONDS = 5.0


class Record:
    """One consumed message, with the attributes of kafka-python's ``ConsumerRecord`` that streamembed reads."""

    __slots__ = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers")

    def __init__(self, msg: Any) -> None:
        self.topic, self.partition, self.offset = msg.topic(), msg.partition(), msg.offset()
        kind, ts = msg.timestamp()
        self.timestamp_type = _TIMESTAMP_TYPES.get(kind)
        self.timestamp = ts if self.timestamp_type is not None else -1
        self.key, self.value = msg.key(), msg.value()
        self.headers = msg.headers() or []

    def __repr__(self) -> str:
        return f"Record({self.topic}, {self.partition}, {self.offset})"


class LibrdkafkaConsumer:
    """``KafkaConsumer(**settings)`` on librdkafka (settings in kafka-python's names: ``librdkafka.settings``).

    The constructor asks the brokers for metadata (within ``bootstrap_timeout_ms``), as kafka-python's does, so
    that unreachable brokers fail it with a transient error, retried by the caller. Not thread-safe beyond what
    librdkafka is: one thread polls (the source's lock, as for kafka-python).
    """

    def __init__(self, *topics: str, **settings: Any) -> None:
        import confluent_kafka as ck

        self._ck = ck
        self._max_records = int(settings.get("max_poll_records", 500))
        conf = consumer_conf(settings)
        self._cooperative = conf.get("partition.assignment.strategy") == "cooperative-sticky"
        self._c: Any = ck.Consumer({**conf, "logger": LibrdkafkaLog(log), "error_cb": self._on_error})
        self._down_since: float | None = None
        self._listener: Any = None
        self._assigned: set[tuple[str, int]] = set()
        self._starts: dict[tuple[str, int], int] = {}  # where assigned partitions start (seeks, rewinds)
        self._in_callback = False
        self._pending_seeks: dict[tuple[str, int], int] = {}
        self._pending_pauses: list[Any] = []
        self._kept: dict[tuple[str, int], int] = {}  # positions at the last revocation (_on_revoke)
        # per partition, the next offset this consumer hands out, and whether it was set (an assignment, a seek)
        # since the last message handed out: what tells a stale report of an unreadable batch from a new one
        self._next: dict[tuple[str, int], int] = {}
        self._fresh: set[tuple[str, int]] = set()
        self._unreadable: list[tuple[int, int, str]] = []
        self._tps: dict[tuple[str, int], Any] = {}
        self._committer: Any = None  # the thread that commits (commit)
        try:
            self._c.list_topics(timeout=bootstrap_seconds(settings))
        except ck.KafkaException as exc:
            self._c.close()
            raise as_kafka_error(exc, "connecting the consumer") from None
        if topics:
            self.subscribe(list(topics))

    # ------------------------------------------------------------------ helpers
    def _tp(self, topic: str, partition: int) -> Any:
        """kafka-python's TopicPartition (one object per partition: the source keys dicts by it)."""
        key = (topic, partition)
        tp = self._tps.get(key)
        if tp is None:
            from kafka import TopicPartition

            tp = self._tps[key] = TopicPartition(topic, partition)
        return tp

    def _ctp(self, tp: Any, offset: int | None = None) -> Any:
        if offset is None:
            return self._ck.TopicPartition(tp.topic, tp.partition)
        return self._ck.TopicPartition(tp.topic, tp.partition, int(offset))

    def _on_error(self, err: Any) -> None:
        if err.code() == self._ck.KafkaError._ALL_BROKERS_DOWN and self._down_since is None:
            self._down_since = time.monotonic()
        log.debug("librdkafka consumer: %s", err)

    # ------------------------------------------------------------------ subscription and rebalances
    def subscribe(self, topics: Iterable[str], listener: Any = None) -> None:
        self._listener = listener
        self._c.subscribe(list(topics), on_assign=self._on_assign, on_revoke=self._on_revoke,
                          on_lost=self._on_lost)

    def _call(self, method: str, parts: list[Any]) -> None:
        if self._listener is None:
            return
        self._in_callback = True
        try:
            getattr(self._listener, method)({self._tp(p.topic, p.partition) for p in parts})
        finally:
            self._in_callback = False

    def _on_assign(self, consumer: Any, parts: list[Any]) -> None:
        self._pending_seeks.clear()
        self._pending_pauses = []
        self._call("on_partitions_assigned", parts)
        kept, self._kept = self._kept, {}
        starts = {(p.topic, p.partition): self._pending_seeks.pop((p.topic, p.partition), kept.get((p.topic,
                                                                                                     p.partition)))
                  for p in parts}
        starts.update(committed_starts(self._ck, consumer, [k for k, s in starts.items() if s is None]))
        offsets = []
        for p in parts:
            key = (p.topic, p.partition)
            start = starts.get(key)
            offsets.append(self._ck.TopicPartition(p.topic, p.partition,
                                                   self._ck.OFFSET_INVALID if start is None else start))
            self._assigned.add(key)
            self._moved_to(key, start)
        if self._cooperative:
            consumer.incremental_assign(offsets)
        else:
            consumer.assign(offsets)
        if self._pending_pauses:  # paused by the listener (backpressure): once they are assigned
            consumer.pause(self._pending_pauses)
            self._pending_pauses = []

    def _on_revoke(self, consumer: Any, parts: list[Any]) -> None:
        # where this consumer was (past the batches it skipped too): a partition assigned back in this rebalance
        # resumes there
        self._kept = {(p.topic, p.partition): self._next[(p.topic, p.partition)] for p in parts
                      if (p.topic, p.partition) in self._next}
        self._call("on_partitions_revoked", parts)
        self._forget(parts)
        if self._cooperative:
            consumer.incremental_unassign(parts)
        else:
            consumer.unassign()

    def _on_lost(self, consumer: Any, parts: list[Any]) -> None:
        self._kept = {}  # others may have read them meanwhile: from the committed offsets
        self._call("on_partitions_lost", parts)
        self._forget(parts)
        if self._cooperative:
            consumer.incremental_unassign(parts)
        else:
            consumer.unassign()

    def _forget(self, parts: list[Any]) -> None:
        for p in parts:
            self._assigned.discard((p.topic, p.partition))
            self._moved_to((p.topic, p.partition), None)

    def _moved_to(self, key: tuple[str, int], offset: int | None) -> None:
        """The partition's position was set (an assignment, a seek; None: unknown)."""
        if offset is None or offset < 0:
            self._next.pop(key, None)
        else:
            self._next[key] = int(offset)
        self._fresh.add(key)

    def assignment(self) -> set[Any]:
        return {self._tp(t, p) for t, p in self._assigned}

    def assign(self, tps: Iterable[Any]) -> None:
        """Read these partitions (no group), from the committed offset or ``auto_offset_reset``."""
        tps = list(tps)
        self._assigned = {(tp.topic, tp.partition) for tp in tps}
        self._starts.clear()
        self._c.assign([self._ctp(tp) for tp in tps])

    def seek_to_beginning(self, *tps: Any) -> None:
        keys = {(tp.topic, tp.partition) for tp in tps} or set(self._assigned)
        self._starts.update({k: self._ck.OFFSET_BEGINNING for k in keys})
        self._c.assign([self._ck.TopicPartition(t, p, self._starts.get((t, p), self._ck.OFFSET_INVALID))
                        for t, p in sorted(self._assigned)])

    def seek(self, tp: Any, offset: int) -> None:
        key = (tp.topic, tp.partition)
        if self._in_callback:  # partitions being assigned: the offset they are assigned at
            self._pending_seeks[key] = int(offset)
            return
        self._starts[key] = int(offset)
        self._moved_to(key, int(offset))
        try:
            self._c.seek(self._ctp(tp, offset))
        except self._ck.KafkaException as exc:
            raise as_kafka_error(exc, f"seeking {tp.topic} partition {tp.partition} to {offset}") from None

    def pause(self, *tps: Any) -> None:
        if self._in_callback:  # partitions being assigned: paused once they are
            self._pending_pauses.extend(self._ctp(tp) for tp in tps)
        elif tps:
            self._c.pause([self._ctp(tp) for tp in tps])

    def resume(self, *tps: Any) -> None:
        if tps:
            self._c.resume([self._ctp(tp) for tp in tps])

    # ------------------------------------------------------------------ consuming
    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[Any, list[Record]]:
        """Up to ``max_records`` messages, waiting at most ``timeout_ms`` for the first: ``{TopicPartition: [...]}``."""
        msgs = self._c.consume(num_messages=int(max_records or self._max_records), timeout=max(0, timeout_ms) / 1000)
        out: dict[Any, list[Record]] = {}
        broken: set[tuple[str, int]] = set()
        for m in msgs:
            err = m.error()
            if err is not None:
                self._error(m, err, broken)
                continue
            key = (m.topic(), m.partition())
            nxt = self._next.get(key)
            if key in broken or (nxt is not None and m.offset() < nxt):
                continue  # after an unreadable batch in this very call, or before the position: stale
            out.setdefault(self._tp(*key), []).append(Record(m))
            self._next[key] = m.offset() + 1
            self._fresh.discard(key)
        if out:
            self._down_since = None
        return out

    def _error(self, m: Any, err: Any, broken: set[tuple[str, int]]) -> None:
        name = err.name()
        topic, partition, offset = m.topic(), m.partition(), m.offset()
        data = name in DATA_ERRORS or (name == "_NOT_IMPLEMENTED" and "Message" in err.str())  # a misread header
        if data and topic is not None and partition is not None:
            key = (topic, partition)
            if key in broken:
                return
            offset = self._plausible(key, offset)
            if offset is None:
                raise as_kafka_error(err, "consuming")
            nxt = self._next.get(key)
            if nxt is not None and offset < nxt and key not in self._fresh:
                log.debug("a stale report of an unreadable batch at offset %d of partition %d (reading %d)", offset,
                          partition, nxt)
                return  # a batch read past already: librdkafka reported it again
            broken.add(key)
            # the batch reported is the one holding the position (its first offset may lie before: a batch is
            # fetched whole), or a new one at or after it
            dead = offset if nxt is None or offset >= nxt else nxt
            self._moved_to(key, dead + 1)
            detail = f"the record batch holding offset {dead} cannot be read: {name}: {err.str()}"[:1000]
            self._unreadable.append((partition, dead, detail))
            try:
                self._c.seek(self._ck.TopicPartition(topic, partition, dead + 1))
            except self._ck.KafkaException:  # revoked meanwhile: its new owner meets the batch
                log.info("could not seek past the unreadable batch at offset %d of partition %d", dead, partition)
            return
        if err.fatal():
            raise as_kafka_error(err, "consuming")
        if name == "_MAX_POLL_EXCEEDED":
            log.warning("librdkafka left the group: the consumer was not polled within max.poll.interval.ms; it "
                        "rejoins at the next poll")
            return
        exc = as_kafka_error(err, "consuming")
        if getattr(exc, "retriable", False) or err.retriable() or name in ("_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_OR_PART",
                                                                           "_PARTITION_EOF", "_TRANSPORT",
                                                                           "_ALL_BROKERS_DOWN"):
            log.debug("consuming: %s", err)
            return
        raise exc

    def _plausible(self, key: tuple[str, int], offset: int | None) -> int | None:
        """The offset an unreadable-batch error is at: its own when it lies in the partition, else (a header read
        as garbage names any number) where this consumer reads from."""
        high = self.highwater(self._tp(*key))
        if offset is not None and offset >= 0 and (high is None or offset < high):
            return int(offset)
        if key in self._next:
            return self._next[key]
        got = self._c.position([self._ck.TopicPartition(*key)])
        return int(got[0].offset) if got and got[0].offset >= 0 else None

    def take_unreadable(self) -> list[tuple[int, int, str]]:
        """(partition, offset, detail) of each offset skipped because its batch could not be read, since the last
        call (each one dead letter: ``kafka.source``)."""
        out, self._unreadable = self._unreadable, []
        return out

    # ------------------------------------------------------------------ offsets
    def commit(self, offsets: Mapping[Any, Any] | None = None, timeout_ms: int | None = None) -> None:
        """Commit ``{TopicPartition: OffsetAndMetadata}`` (the next offsets to read) synchronously, waiting at most
        ``timeout_ms`` (then ``KafkaTimeoutError``, retried by the caller, as kafka-python's commit does).

        librdkafka's synchronous commit takes no timeout (a broker that stopped answering holds it for the socket
        timeout, a minute): it runs on a thread of this consumer's, in order, and the caller waits for it.
        """
        if not offsets:
            return
        parts = [self._ctp(tp, om.offset) for tp, om in offsets.items()]
        if self._committer is None:
            from concurrent.futures import ThreadPoolExecutor

            self._committer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="streamembed-commit")
        future = self._committer.submit(commit_sync, self._ck, self._c, parts)
        try:
            future.result(timeout=None if timeout_ms is None else timeout_ms / 1000)
        except TimeoutError:
            from kafka.errors import KafkaTimeoutError

            raise KafkaTimeoutError(f"the offset commit was not acknowledged within {timeout_ms} ms") from None

    def committed_offsets(self, tps: Iterable[Any], timeout_ms: int = 5000) -> dict[Any, int | None]:
        """The group's committed offset of each partition (None: none), in one request."""
        tps = list(tps)
        try:
            got = self._c.committed([self._ctp(tp) for tp in tps], timeout=timeout_ms / 1000)
        except self._ck.KafkaException as exc:
            raise as_kafka_error(exc, "reading committed offsets") from None
        found = {(p.topic, p.partition): p.offset for p in got}
        return {tp: (o if (o := found.get((tp.topic, tp.partition), -1)) >= 0 else None) for tp in tps}

    def committed(self, tp: Any, timeout_ms: int = 5000) -> int | None:
        return self.committed_offsets([tp], timeout_ms)[tp]

    def highwater(self, tp: Any) -> int | None:
        """The high watermark of the partition's last fetch (None before one)."""
        _, high = self._c.get_watermark_offsets(self._ctp(tp), cached=True)
        return None if high is None or high < 0 else int(high)

    def position(self, tp: Any, timeout_ms: int | None = None) -> int | None:
        """The next offset this consumer reads from the partition (None: not known yet)."""
        got = self._c.position([self._ctp(tp)])
        if got and got[0].offset >= 0:
            return int(got[0].offset)
        key = (tp.topic, tp.partition)
        start = self._starts.get(key)
        if start is not None and start >= 0:
            return start
        if start == self._ck.OFFSET_BEGINNING:
            return self.beginning_offsets([tp], timeout_ms or 5000)[tp]
        return self.committed(tp, timeout_ms or 5000)

    def end_offsets(self, tps: Iterable[Any], timeout_ms: int = 5000) -> dict[Any, int]:
        return {tp: int(high) for tp, (_, high) in watermarks(self._ck, self._c, tps, self._ctp, timeout_ms).items()}

    def beginning_offsets(self, tps: Iterable[Any], timeout_ms: int = 5000) -> dict[Any, int]:
        return {tp: int(low) for tp, (low, _) in watermarks(self._ck, self._c, tps, self._ctp, timeout_ms).items()}

    # ------------------------------------------------------------------ metadata and life
    def partitions_for_topic(self, topic: str) -> set[int] | None:
        try:
            md = self._c.list_topics(topic, timeout=METADATA_SECONDS)
        except self._ck.KafkaException as exc:
            raise as_kafka_error(exc, f"describing {topic}") from None
        t = md.topics.get(topic)
        if t is None or t.error is not None or not t.partitions:
            return None
        return set(t.partitions)

    def topics(self) -> set[str]:
        return set(self._c.list_topics(timeout=METADATA_SECONDS).topics)

    def brokers_away(self) -> str | None:
        """Why the consumer cannot reach the brokers now, or None (a metadata request when librdkafka said all
        brokers were down)."""
        if self._down_since is None:
            return None
        try:
            self._c.list_topics(timeout=0.5)
        except self._ck.KafkaException:
            return "no connection to any broker"
        self._down_since = None
        return None

    def close(self, autocommit: bool = False) -> None:
        """Leave the group (its offsets are committed by the source only) and let the client go."""
        if self._committer is not None:
            self._committer.shutdown(wait=False, cancel_futures=True)
        self._c.close()


def committed_starts(ck: Any, consumer: Any, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Where partitions assigned without an offset of their own start: the group's committed offsets (asked when
    they are assigned, so that the consumer knows its position from the first message)."""
    if not keys:
        return {}
    try:
        got = consumer.committed([ck.TopicPartition(t, p) for t, p in keys], timeout=METADATA_SECONDS)
    except ck.KafkaException:  # unknown: the first message tells
        return {}
    return {(q.topic, q.partition): int(q.offset) for q in got if q.offset >= 0}


def commit_sync(ck: Any, consumer: Any, parts: list[Any]) -> None:
    """Commit librdkafka ``TopicPartition``s (with their offsets) synchronously; errors as kafka-python's."""
    try:
        done = consumer.commit(offsets=parts, asynchronous=False)
    except ck.KafkaException as exc:
        if exc.args and getattr(exc.args[0], "name", lambda: "")() == NO_OFFSET:
            return
        raise as_kafka_error(exc, "committing offsets") from None
    for p in done or []:
        if p.error is not None:
            raise as_kafka_error(p.error, f"committing partition {p.partition}")


def watermarks(ck: Any, consumer: Any, tps: Iterable[Any], to_part: Any, timeout_ms: int
               ) -> dict[Any, tuple[int, int]]:
    """``{tp: (low, high)}``: the broker's watermarks of each partition (``to_part``: its librdkafka
    ``TopicPartition``)."""
    out = {}
    for tp in tps:
        try:
            out[tp] = consumer.get_watermark_offsets(to_part(tp), timeout=timeout_ms / 1000, cached=False)
        except ck.KafkaException as exc:
            raise as_kafka_error(exc, "listing offsets") from None
    return out
