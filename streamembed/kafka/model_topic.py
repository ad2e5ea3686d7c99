"""The landmark model on a compacted topic: every replica embeds with the same model version.

One record per published model: key = the model name, value = the portable
``.npz`` bytes of ``model_io.model_to_bytes`` (a model file's content, no pickle), headers
``model_version`` (decimal), ``model_lineage`` (the map's identity) and
``sha256`` (hex digest of the value), plus
``content-type: application/vnd.streamembed.model+npz``. The topic is created
with ``cleanup.policy=compact`` and a single partition when missing; readers
never rely on compaction (some brokers, e.g. Tansu, never compact): they read
the whole topic.

**Which record counts.** A replica follows one lineage (:meth:`ModelTopic.follow`:
its own map's): records of other lineages are ignored, whatever their
version, and so are records whose checksum or file does not verify (skipped
with a warning) - none of them can hold back the next version of the
followed lineage. A record is checked in the order that costs least first:
its headers (a record without ``model_lineage`` is skipped: every publisher
sets it), its lineage against the followed one, its size against
``MAX_RECORD_BYTES``, its sha256, and only then its archive, read by
``model_io`` within the sizes its headers state (a record that would inflate
beyond a model, a decompression bomb, is refused before anything is
decompressed) and validated array by array (a NaN anywhere refuses it). Each
record skipped for what it holds is counted in
``streamembed_model_records_skipped_total{reason}``. Of that lineage the highest version wins, and of several
records with that version the *first* in the log: a version number is claimed
once (:meth:`ModelTopic.claim`: a refit publishes, reads the log back, and is
installed only if its record came first; the loser re-publishes the winner,
so that compaction, which keeps the last record of a key, keeps the winner).

A replica never goes back: :meth:`ModelTopic.poll_new` only returns a model
newer than both the version it is given and any version it returned before.

Usage (the daemon's :class:`streamembed.daemon.model_setup.ModelSync` does this)::

    mt = ModelTopic("127.0.0.1:9092", "streamembed-models")
    mt.publish(est)                    # after a fit or a refit
    est = mt.latest()                  # at startup: the topic's model, or None
    mt.start_watching()                # background reader thread
    new = mt.poll_new(current_version) # between batches: a newer model, or None
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Mapping

from streamembed.kafka.client import retry
from streamembed.model_io import model_from_bytes, model_to_bytes

__all__ = ["ModelTopic", "PublishedModel", "MODEL_CONTENT_TYPE"]

log = logging.getLogger("streamembed.kafka.model")

MODEL_CONTENT_TYPE = "application/vnd.streamembed.model+npz"
_VERSION_HEADER = "model_version"
_LINEAGE_HEADER = "model_lineage"
_SHA_HEADER = "sha256"
#: The largest model record read at all (bytes): beyond the fetch size the reader asks for anyway.
MAX_RECORD_BYTES = 1 << 30


@dataclass
class PublishedModel:
    """What was published (or found): version, checksum, size and coordinates."""

    name: str
    version: int
    sha256: str
    size: int
    partition: int = -1
    offset: int = -1


def _headers(record: Any) -> dict[str, bytes]:
    return {k.lower(): v for k, v in (record.headers or ())}


def _stated(record: Any) -> tuple[int | None, str | None]:
    """(version, lineage) as the record's headers state them (None where absent or unreadable)."""
    h = _headers(record)
    try:
        version: int | None = int(h[_VERSION_HEADER].decode())
    except (KeyError, ValueError, UnicodeDecodeError):
        version = None
    try:
        lineage: str | None = h[_LINEAGE_HEADER].decode()
    except (KeyError, UnicodeDecodeError):
        lineage = None
    return version, lineage


class ModelTopic:
    """Publish and read landmark models on ``topic`` under key ``name`` (see the module doc).

    ``consumer_settings`` / ``producer_settings`` are kafka-python keyword
    arguments (security options etc.; a group id is ignored: the reader is
    group-less); without them only ``bootstrap`` is used. ``clients``: the
    client library's (``kafka.libraries``; default kafka-python).
    """

    def __init__(self, bootstrap: str | list[str], topic: str, *, name: str = "streamembed",
                 consumer_settings: Mapping[str, Any] | None = None,
                 producer_settings: Mapping[str, Any] | None = None, metrics: Any = None,
                 stop: threading.Event | None = None, read_timeout: float = 30.0, clients: Any = None) -> None:
        if clients is None:
            from streamembed.kafka.libraries import KAFKA_PYTHON

            clients = KAFKA_PYTHON
        self._clients = clients
        servers = [s.strip() for s in bootstrap.split(",")] if isinstance(bootstrap, str) else list(bootstrap)
        self.topic = topic
        self.name = name
        self._key = name.encode("utf-8")
        base_c = dict(consumer_settings or {})
        for k in ("group_id", "max_poll_records", "max_poll_interval_ms", "session_timeout_ms",
                  "heartbeat_interval_ms", "auto_offset_reset", "enable_auto_commit"):
            base_c.pop(k, None)
        base_c.update(bootstrap_servers=servers, enable_auto_commit=False, group_id=None)
        base_c.setdefault("client_id", "streamembed-model-reader")
        base_c["max_partition_fetch_bytes"] = max(int(base_c.get("max_partition_fetch_bytes", 0)), 64 << 20)
        self._consumer_settings = base_c
        base_p = dict(producer_settings or {})
        base_p.update(bootstrap_servers=servers)
        base_p.setdefault("client_id", "streamembed-model-publisher")
        self._producer_settings = base_p
        self.metrics = metrics
        self.stop = stop or threading.Event()
        self.read_timeout = float(read_timeout)
        self._lock = threading.Lock()
        self._newest: tuple[int, Any] | None = None  # (version, model) seen by the watcher
        self._returned = -1  # highest version poll_new handed out
        #: the lineage this replica follows (None: any - the lineage of the newest record)
        self.lineage: str | None = None
        self._ignored: set[tuple[str | None, int | None]] = set()
        self._skipped: set[tuple[int, int]] = set()
        self._watcher: threading.Thread | None = None
        self._closing = threading.Event()
        self.published: list[PublishedModel] = []
        #: the highest model version known to be on the topic (read or published; -1: none)
        self.topic_version = -1

    def follow(self, lineage: str) -> None:
        """Follow ``lineage`` only (call before :meth:`start_watching`)."""
        self.lineage = lineage

    # ------------------------------------------------------------------ publishing
    def ensure_topic(self) -> None:
        """Create the topic (1 partition, compacted) if it does not exist; best effort."""
        try:
            self._clients.create_topic(self._producer_settings, self.topic, 1, {"cleanup.policy": "compact"})
            log.info("created the model topic", extra={"topic": self.topic})
        except Exception as exc:  # exists already, or no permission: the producer decides
            log.debug("model topic not created (%s: %s)", type(exc).__name__, exc)

    def _partitions(self, consumer: Any) -> list[int]:
        parts = consumer.partitions_for_topic(self.topic)
        return sorted(parts) if parts else []

    def publish(self, est: Any) -> PublishedModel:
        """Publish ``est`` (blocking until the broker acknowledged it)."""
        value = model_to_bytes(est)
        version = int(est.version)
        digest = hashlib.sha256(value).hexdigest()
        headers = [(_VERSION_HEADER, str(version).encode()), (_LINEAGE_HEADER, str(est.lineage).encode()),
                   (_SHA_HEADER, digest.encode()), ("content-type", MODEL_CONTENT_TYPE.encode())]
        return self._publish(value, headers, version, digest)

    def _publish(self, value: bytes, headers: list[tuple[str, bytes]], version: int, digest: str) -> PublishedModel:
        settings = dict(self._producer_settings)
        settings["max_request_size"] = max(int(settings.get("max_request_size", 1 << 20)), len(value) + (1 << 20))
        self.ensure_topic()
        producer = retry(lambda: self._clients.producer(**settings), "connecting the model publisher",
                         stop=self.stop, metrics=self.metrics)
        try:
            meta = retry(lambda: producer.send(self.topic, key=self._key, value=value, headers=headers).get(60),
                         f"publishing model version {version}", stop=self.stop, metrics=self.metrics)
        finally:
            producer.close(timeout=10)
        if self.metrics is not None:
            self.metrics.kafka_messages_out.labels(topic=self.topic).inc()
        pub = PublishedModel(self.name, version, digest, len(value), meta.partition, meta.offset)
        self.published.append(pub)
        self.topic_version = max(self.topic_version, version)
        log.info("published the model", extra={"topic": self.topic, "model_version": version, "bytes": len(value),
                                               "sha256": digest})
        return pub

    # ------------------------------------------------------------------ reading
    def _reader(self) -> Any:
        return retry(lambda: self._clients.consumer(**self._consumer_settings), "connecting the model reader",
                     stop=self.stop, metrics=self.metrics, deadline=time.monotonic() + self.read_timeout)

    def _skip(self, record: Any, reason: str, why: str) -> None:
        """Log (once per record) and count a record skipped for what it holds."""
        if (record.partition, record.offset) in self._skipped:
            return
        self._skipped.add((record.partition, record.offset))
        log.warning("model record at offset %d %s; skipped", record.offset, why,
                    extra={"topic": self.topic, "offset": record.offset, "reason": reason})
        if self.metrics is not None:
            self.metrics.model_records_skipped.labels(reason=reason).inc()

    def _verify(self, record: Any, lineage: str | None = None, *, any_lineage: bool = False) -> tuple[int, Any] | None:
        """(version, model) of a record of our key, or None (tombstone, or a bad record: logged and counted).

        Checked cheapest first (see the module doc): headers, lineage (``lineage``, default the followed one;
        ``any_lineage``: whichever), size, sha256, then the archive within its stated sizes and every array's values.
        """
        if record.value is None:
            return None
        h = _headers(record)
        try:
            version = int(h[_VERSION_HEADER].decode())
            digest = h[_SHA_HEADER].decode()
        except (KeyError, ValueError, UnicodeDecodeError):
            self._skip(record, "headers", "lacks valid model_version/sha256 headers")
            return None
        stated = _stated(record)[1]
        if stated is None:
            self._skip(record, "headers", "has no model_lineage header")
            return None
        want = None if any_lineage else (lineage if lineage is not None else self.lineage)
        if want is not None and stated != want:
            return None  # another map: ignored (not loaded), see _ignore
        if len(record.value) > MAX_RECORD_BYTES:
            self._skip(record, "size", f"holds {len(record.value)} bytes, more than {MAX_RECORD_BYTES}")
            return None
        if hashlib.sha256(record.value).hexdigest() != digest:
            self._skip(record, "checksum", "fails its sha256")
            return None
        try:
            est = model_from_bytes(record.value)
        except Exception as exc:  # ModelFileError and friends: not a usable model
            self._skip(record, "invalid", f"is not a loadable model ({exc})")
            return None
        if int(est.version) != version:
            log.warning("model record at offset %d: header says version %d, the file %d; using the file's",
                        record.offset, version, int(est.version))
            version = int(est.version)
        if stated != est.lineage:
            self._skip(record, "headers", f"says lineage {stated} in its header, its file {est.lineage}")
            return None
        return version, est

    def _read_all(self, timeout: float | None, until: tuple[int, int] | None = None) -> list[Any]:
        """Every record of our key, in log order (up to ``until`` = (partition, offset) inclusive)."""
        from kafka import TopicPartition

        deadline = time.monotonic() + (self.read_timeout if timeout is None else timeout)
        consumer = self._reader()
        try:
            parts = self._partitions(consumer)
            if not parts:
                return []
            tps = [TopicPartition(self.topic, p) for p in parts]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            out: list[Any] = []
            while time.monotonic() < deadline:
                for recs in consumer.poll(timeout_ms=200).values():
                    out.extend(r for r in recs if r.key == self._key)
                if until is not None and any(r.partition == until[0] and r.offset >= until[1] for r in out):
                    break
                caught_up = all((hw := consumer.highwater(tp)) is not None and consumer.position(tp) >= hw
                                for tp in tps)
                if caught_up and (until is None or until[0] not in parts):
                    break
            else:
                log.warning("reading the model topic %s timed out; using what was read", self.topic)
            if until is not None:
                out = [r for r in out if r.partition != until[0] or r.offset <= until[1]]
            return sorted(out, key=lambda r: (r.timestamp, r.partition, r.offset)) if len(parts) > 1 else out
        finally:
            consumer.close()

    def newest(self, records: list[Any], lineage: str | None) -> tuple[int, Any, Any] | None:
        """(version, model, record) of the record that counts for ``lineage`` among ``records`` (log order): its
        highest version, the first valid record of it; None: none. ``lineage`` None: that of the last valid record.

        A tombstone withdraws what came before it. Only the candidates are loaded.
        """
        start = max((i + 1 for i, r in enumerate(records) if r.value is None), default=0)
        records = records[start:]
        if lineage is None:
            for r in reversed(records):
                got = self._verify(r, any_lineage=True)
                if got is not None:
                    lineage = got[1].lineage
                    break
            else:
                return None
        failed: set[int] = set()
        while True:
            best: tuple[int, Any] | None = None  # (version, record) by the headers
            for r in records:
                version, stated = _stated(r)
                if version is None or id(r) in failed or stated != lineage:
                    continue
                if best is None or version > best[0]:
                    best = (version, r)
            if best is None:
                return None
            got = self._verify(best[1], lineage=lineage)
            if got is not None and got[1].lineage == lineage:
                return got[0], got[1], best[1]
            failed.add(id(best[1]))

    def latest(self, timeout: float | None = None, lineage: str | None = None) -> Any | None:
        """The model that counts on the topic for ``lineage`` (default: the followed one; if none, the lineage of
        the newest valid record), reading the whole topic; None: none."""
        found = self.newest(self._read_all(timeout), lineage or self.lineage)
        if found is None:
            return None
        self.topic_version = max(self.topic_version, found[0])
        return found[1]

    def lineages(self, timeout: float | None = None) -> dict[str, int]:
        """Every lineage on the topic and its highest valid version (to name them in a refusal)."""
        out: dict[str, int] = {}
        for r in self._read_all(timeout):
            got = self._verify(r, any_lineage=True) if r.value is not None else None
            if got is not None:
                out[got[1].lineage] = max(out.get(got[1].lineage, -1), got[0])
        return out

    def claim(self, est: Any, timeout: float | None = None) -> str | None:
        """Publish ``est`` as its lineage's next version and read the log back: None if its record is the first of
        that version (installing it is safe), else why not (another replica claimed the version first; the winner
        is published again so that it stays the last record of the key)."""
        pub = self.publish(est)
        records = self._read_all(timeout, until=(pub.partition, pub.offset))
        found = self.newest(records, est.lineage)
        if found is not None and found[2].partition == pub.partition and found[2].offset == pub.offset:
            return None
        if found is None:
            return f"its record (offset {pub.offset}) could not be read back from {self.topic}"
        version, winner, record = found
        why = (f"version {version} of lineage {est.lineage} was claimed first on {self.topic} (offset "
               f"{record.offset}; this replica's is offset {pub.offset})")
        try:
            self._publish(record.value, list(record.headers), version, _headers(record)[_SHA_HEADER].decode())
        except Exception:  # the readers' rule (first record wins) holds without it
            log.warning("re-publishing the winning model version %d failed", version, exc_info=True)
        return why

    # ------------------------------------------------------------------ watching
    def start_watching(self, poll_seconds: float = 1.0) -> None:
        """Start the background reader that feeds :meth:`poll_new` (idempotent)."""
        if self._watcher is not None:
            return
        self._watcher = threading.Thread(target=self._watch, args=(poll_seconds,), name="streamembed-model-watch",
                                         daemon=True)
        self._watcher.start()

    def _watch(self, poll_seconds: float) -> None:
        from kafka import TopicPartition

        consumer = None
        try:
            while not self._closing.is_set():
                try:
                    if consumer is None:
                        consumer = self._reader()
                        parts = self._partitions(consumer)
                        if not parts:
                            consumer.close()
                            consumer = None
                            self._closing.wait(poll_seconds)
                            continue
                        tps = [TopicPartition(self.topic, p) for p in parts]
                        consumer.assign(tps)
                        consumer.seek_to_beginning(*tps)
                    for recs in consumer.poll(timeout_ms=int(poll_seconds * 1000)).values():
                        for r in recs:
                            if r.key == self._key:
                                self._offer(r)
                except Exception:  # keep watching; the stream goes on with its model
                    log.warning("watching the model topic failed; retrying", exc_info=True)
                    if consumer is not None:
                        consumer.close()
                        consumer = None
                    self._closing.wait(min(10.0, poll_seconds * 5))
        finally:
            if consumer is not None:
                consumer.close()

    def _offer(self, record: Any) -> None:
        if record.value is None:
            return
        version, stated = _stated(record)
        if self.lineage is not None and stated is not None and stated != self.lineage:
            self._ignore(stated, version)
            return  # another map: whatever its version, it neither installs nor raises the bar
        if stated is None:
            self._skip(record, "headers", "has no model_lineage header")
            return
        if version is not None and version <= max(self._returned, self._newest[0] if self._newest else -1):
            return  # not newer than what we have (or a later record of a claimed version): do not even load it
        got = self._verify(record)
        if got is None:
            return
        if self.lineage is not None and got[1].lineage != self.lineage:
            self._ignore(got[1].lineage, got[0])
            return
        with self._lock:
            if self._newest is None or got[0] > self._newest[0]:
                self._newest = got

    def _ignore(self, lineage: str | None, version: int | None) -> None:
        if (lineage, version) not in self._ignored:
            self._ignored.add((lineage, version))
            log.warning("ignoring model version %s on the model topic: another map (lineage %s; this replica follows "
                        "%s)", version, lineage, self.lineage)

    def poll_new(self, current_version: int) -> Any | None:
        """A model newer than ``current_version`` (and than any returned before), or None. Non-blocking.

        The first call starts the background watcher (if :meth:`start_watching` was not called).
        """
        if self._watcher is None and not self._closing.is_set():
            self.start_watching()
        with self._lock:
            if self._newest is None:
                return None
            version, est = self._newest
            if version <= max(int(current_version), self._returned):
                return None
            self._returned = version
            return est

    def close(self) -> None:
        self._closing.set()
        if self._watcher is not None:
            self._watcher.join(timeout=10)
            self._watcher = None
