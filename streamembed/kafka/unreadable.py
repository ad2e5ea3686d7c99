"""Record batches the consumer cannot read: which partition and offset, so the source can skip them.

kafka-python decompresses a record batch when ``poll`` iterates it. A batch
it cannot read - a codec it does not know (attribute bits 5-7), a corrupt
compressed payload, a CRC mismatch, a record larger than a pre-KIP-74 fetch -
raises out of ``poll`` with the consumer's position still on that batch: the
next ``poll`` fetches it again and fails again, for ever (and kafka-python
3.0 even spins without returning, on the dead iterator it kept). So an error
here is *data*, to be dead-lettered like any undecodable message, never an
exit: :func:`is_unreadable_data` tells such errors from the environment's
(authorization, configuration: those still stop the daemon), and
:func:`stuck_partition` names the partition whose batch failed, so that the
source records a dead letter for the offset and seeks past it (which also
clears the client's broken iterator).

The batch's length is not known without its bytes, so the source skips one
offset per failure: a corrupt batch of n records gives n dead letters, one per
offset, each naming it (n fetches; such batches are rare and the cost bounded).
"""

from __future__ import annotations

import logging
import re
import struct
import zlib
from typing import Any
from collections.abc import Callable, Iterable, Mapping

from streamembed.kafka.batches import KafkaDeadRecord, QueuedBatch
from streamembed.stream.records import Reason

log = logging.getLogger("streamembed.kafka.source")

__all__ = ["is_unreadable_data", "stuck_partition", "skip_unreadable", "probe", "unreadable_batch"]

#: kafka-python errors that are the environment's or the configuration's, never the data's.
_NOT_DATA = ("Authorization", "Authentication", "Configuration", "IllegalState", "IllegalArgument",
             "UnsupportedVersion", "NoOffsetForPartition", "OffsetOutOfRange", "CommitFailed", "Sasl",
             "InvalidTopic", "UnknownMemberId", "RebalanceInProgress", "IllegalGeneration", "FencedInstanceId")

#: modules whose exceptions come from decompressing bytes
_CODEC_MODULES = frozenset({"zstandard", "zstd", "lz4", "snappy", "cramjam", "gzip", "zlib"})

_TP = re.compile(r"TopicPartition\(topic='(?P<topic>[^']*)', partition=(?P<p>\d+)\)")


def is_unreadable_data(exc: BaseException) -> bool:
    """True when ``exc`` (raised by ``consumer.poll``, not transient) says a fetched batch cannot be read."""
    return _kind(exc) is not None


def _kind(exc: BaseException) -> str | None:
    """"client": kafka-python's own words for unreadable data; "bytes": a parser's or decompressor's error
    (trusted only where the client says which partition it was reading); None: not about the data."""
    import kafka.errors as ke

    name = type(exc).__name__
    if any(s in name for s in _NOT_DATA):
        return None
    if isinstance(exc, (ke.UnsupportedCodecError, ke.CorruptRecordError)) or name == "RecordTooLargeError":
        return "client"
    if isinstance(exc, ke.KafkaError):
        return "client" if "Failed to make progress" in str(exc) else None
    if type(exc).__module__.split(".")[0] in _CODEC_MODULES:
        return "bytes"
    if isinstance(exc, (ValueError, RuntimeError, struct.error, zlib.error, EOFError, IndexError, OSError)):
        return "bytes"
    return None


def _from_exception(exc: BaseException, topic: str) -> int | None:
    """The partition an error names (RecordTooLargeError's ``{tp: offset}``, a CRC error's message), or None."""
    for arg in getattr(exc, "args", ()):
        if isinstance(arg, dict):
            for tp in arg:
                if getattr(tp, "topic", None) == topic:
                    return int(tp.partition)
    m = _TP.search(str(exc))
    if m and m.group("topic") == topic:
        return int(m.group("p"))
    return None


def _from_client(consumer: Any, topic: str) -> int | None:
    """The partition of the batch kafka-python was iterating when it failed (its broken in-line records)."""
    part = getattr(getattr(consumer, "_fetcher", None), "_next_partition_records", None)
    tp = getattr(part, "topic_partition", None)
    if tp is not None and getattr(tp, "topic", None) == topic:
        return int(tp.partition)
    return None


def stuck_partition(consumer: Any, topic: str, exc: BaseException, assigned: Iterable[int],
                    probe: Callable[[int], bool] | None = None) -> int | None:
    """The assigned partition whose fetched batch raised ``exc``, or None when it cannot be told.

    In order: the client's in-line records, the exception's own words and,
    for kafka-python's own unreadable-data errors only, the only assigned
    partition with unread data (position below the high watermark), then
    ``probe(partition)`` (True: reading it alone fails) for each with data.
    """
    assigned = sorted(set(assigned))
    for found in (_from_client(consumer, topic), _from_exception(exc, topic)):
        if found is not None and found in assigned:
            return found
    if _kind(exc) != "client":
        return None
    from kafka import TopicPartition

    with_data = []
    for p in assigned:
        tp = TopicPartition(topic, p)
        try:
            hw, pos = consumer.highwater(tp), consumer.position(tp, timeout_ms=1000)
        except Exception:  # cannot tell for this one
            hw, pos = None, None
        if hw is None or pos is None or pos < hw:
            with_data.append(p)
    if len(with_data) == 1:
        return with_data[0]
    if probe is not None:
        for p in with_data:
            if probe(p):
                return p
    return None


def skip_unreadable(consumer: Any, topic: str, exc: BaseException, assigned: Iterable[int],
                    settings: Mapping[str, Any]) -> tuple[int, int, str] | None:
    """Find the partition whose batch raised ``exc``, seek it one offset on; (partition, offset, detail) or None.
    (-1, -1, "") when the partition was revoked meanwhile (nothing to skip here).

    The seek also drops kafka-python's broken iterator over that batch (its
    next ``poll`` would otherwise spin on it). ``settings`` are the consumer's
    (a throw-away copy probes a partition when nothing else tells which).
    """
    from kafka import TopicPartition

    p = stuck_partition(consumer, topic, exc, assigned, probe=lambda q: probe(consumer, topic, q, settings))
    if p is None:
        return None
    tp = TopicPartition(topic, p)
    try:
        offset = int(consumer.position(tp, timeout_ms=5000))
        consumer.seek(tp, offset + 1)
    except Exception as revoked:  # the partition moved meanwhile: its new owner meets the batch
        log.info("partition %d was revoked before its unreadable batch could be skipped (%s)", p, revoked)
        return -1, -1, ""
    detail = f"the record batch holding offset {offset} cannot be read: {type(exc).__name__}: {exc}"[:1000]
    return p, offset, detail


def probe(consumer: Any, topic: str, partition: int, settings: Mapping[str, Any]) -> bool:
    """True if a throw-away consumer reading ``partition`` alone from ``consumer``'s position fails on
    unreadable data (a few polls at most)."""
    from kafka import KafkaConsumer, TopicPartition

    from streamembed.kafka.client import is_transient

    tp = TopicPartition(topic, partition)
    own = {k: v for k, v in settings.items() if k not in ("group_id", "enable_auto_commit")}
    own.update(group_id=None, enable_auto_commit=False, client_id=f"{own.get('client_id', 'streamembed')}-probe")
    try:
        position = consumer.position(tp, timeout_ms=5000)
        reader = KafkaConsumer(**own)
    except Exception:  # cannot probe: cannot tell
        return False
    try:
        reader.assign([tp])
        reader.seek(tp, position)
        for _ in range(10):
            try:
                if reader.poll(timeout_ms=300, max_records=1):
                    return False
            except Exception as exc:  # the answer
                return is_unreadable_data(exc) and not is_transient(exc)
        return False
    finally:
        reader.close(autocommit=False)


def unreadable_batch(topic: str, partition: int, offset: int, detail: str) -> QueuedBatch:
    """The queued batch of one offset skipped because its record batch cannot be read: its ``undecodable`` dead
    letter, nothing to embed."""
    dead = KafkaDeadRecord(reason=Reason.UNDECODABLE, detail=detail, raw=b"", topic=topic, partition=partition,
                           offset=offset)
    return QueuedBatch(partition, offset, offset, dead=[dead])
