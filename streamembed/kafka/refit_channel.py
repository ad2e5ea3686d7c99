"""Refit requests and their answers as messages on the model topic (Kafka deployments; docs/objects.md).

The same records as a directory deployment's files (``stream.refit_requests``),
keyed beside the model's records so that model readers, which read their own
key only (``kafka.model_topic``), never see them: a request is a JSON message
with key ``<kafka.model_name>.refit-request``, its withdrawal a tombstone of
that key; an answer is one Arrow IPC stream with key
``<kafka.model_name>.refit-answer`` (``stream.refit_requests.answer_bytes``;
the producer kit, ``streamembed.producer``, sends it). The daemon reads the
answers between batches with a non-blocking poll of a group-less consumer
positioned at the end of the topic when the request was published.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from streamembed.kafka.client import consumer_settings, producer_settings
from streamembed.stream.refit_requests import RefitRequest

__all__ = ["TopicChannel", "request_key", "answer_key", "read_requests", "send_answer"]

log = logging.getLogger("streamembed.refit")


def request_key(model_name: str) -> bytes:
    return f"{model_name}.refit-request".encode()


def answer_key(model_name: str) -> bytes:
    return f"{model_name}.refit-answer".encode()


class TopicChannel:
    """Requests published on, and answers read from, ``topic`` (see the module doc)."""

    def __init__(self, bootstrap: str, topic: str, name: str, consumer: dict[str, Any] | None = None,
                 producer: dict[str, Any] | None = None) -> None:
        self.servers = [s.strip() for s in bootstrap.split(",")]
        self.topic = topic
        self.request_key, self.answer_key = request_key(name), answer_key(name)
        self._consumer_settings = {**(consumer or {}), "bootstrap_servers": self.servers, "group_id": None,
                                   "enable_auto_commit": False}
        for k in ("max_poll_interval_ms", "session_timeout_ms", "heartbeat_interval_ms", "auto_offset_reset"):
            self._consumer_settings.pop(k, None)
        self._consumer_settings["max_partition_fetch_bytes"] = max(
            int(self._consumer_settings.get("max_partition_fetch_bytes", 0)), 64 << 20)
        self._producer_settings = {**(producer or {}), "bootstrap_servers": self.servers}
        self._consumer: Any = None
        self._seen: list[tuple[str, bytes]] = []

    @classmethod
    def of_config(cls, cfg: Any) -> TopicChannel:
        k = cfg.kafka
        return cls(k.bootstrap_servers, k.model_topic, k.model_name, consumer_settings(k, group=False),
                   producer_settings(k))

    def send(self, key: bytes, value: bytes | None, headers: list[tuple[str, bytes]]) -> None:
        """Produce one record on the topic (blocking until acknowledged)."""
        from kafka import KafkaProducer

        settings = dict(self._producer_settings)
        size = 0 if value is None else len(value)
        settings["max_request_size"] = max(int(settings.get("max_request_size", 1 << 20)), size + (1 << 20))
        producer = KafkaProducer(**settings)
        try:
            producer.send(self.topic, key=key, value=value, headers=headers).get(60)
        finally:
            producer.close(timeout=10)

    def publish(self, request: RefitRequest) -> None:
        """Send the request, after positioning the answer reader at the topic's end (answers come after it)."""
        from kafka import KafkaConsumer, TopicPartition

        if self._consumer is None:
            self._consumer = KafkaConsumer(**self._consumer_settings)
        parts = self._consumer.partitions_for_topic(self.topic) or {0}
        tps = [TopicPartition(self.topic, p) for p in sorted(parts)]
        self._consumer.assign(tps)
        self._consumer.seek_to_end(*tps)
        for tp in tps:
            self._consumer.position(tp)  # resolve the end now, before the request is sent
        self.send(self.request_key, request.to_json(), [("content-type", b"application/json"),
                                                         ("streamembed-request-id", request.request_id.encode())])

    def withdraw(self, request: RefitRequest) -> None:
        try:
            self.send(self.request_key, None, [("streamembed-request-id", request.request_id.encode())])
        except Exception as exc:  # the producer kit also checks the deadline: a stale request is not answered
            log.warning("could not withdraw refit request %s on %s: %s", request.request_id, self.topic, exc)

    def answers(self) -> Iterator[tuple[str, bytes]]:
        if self._consumer is None:
            return
        try:
            for recs in self._consumer.poll(timeout_ms=0).values():
                for r in recs:
                    if r.key == self.answer_key and r.value is not None:
                        self._seen.append((f"{self.topic}@{r.partition}:{r.offset}", r.value))
        except Exception as exc:  # the stream goes on; the next poll tries again
            log.warning("reading refit answers from %s failed: %s", self.topic, exc)
        while self._seen:
            yield self._seen.pop(0)

    def handled(self, label: str, reason: str | None) -> None:
        """Nothing to set aside on a topic (the reason is in the model history and the log)."""

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def read_requests(bootstrap: str, topic: str, name: str, timeout: float = 10.0) -> list[RefitRequest]:
    """The producer's side: the pending request on the model topic (the last record of the request key, unless
    a tombstone withdrew it), as a list of at most one."""
    import time as _time

    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=[s.strip() for s in bootstrap.split(",")], group_id=None,
                             enable_auto_commit=False, max_partition_fetch_bytes=64 << 20)
    key = request_key(name)
    last: Any = None
    try:
        parts = consumer.partitions_for_topic(topic) or set()
        if not parts:
            return []
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        deadline = _time.monotonic() + timeout
        while _time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=200).values():
                for r in recs:
                    if r.key == key:
                        last = r
            if all((hw := consumer.highwater(tp)) is not None and consumer.position(tp) >= hw for tp in tps):
                break
    finally:
        consumer.close()
    if last is None or last.value is None:
        return []
    try:
        return [RefitRequest.from_json(last.value)]
    except (ValueError, KeyError) as exc:
        log.warning("the refit request on %s cannot be read: %s", topic, exc)
        return []


def send_answer(bootstrap: str, topic: str, name: str, request: RefitRequest, data: bytes) -> None:
    """The producer's side: send an answer (``stream.refit_requests.answer_bytes``) for ``request``."""
    channel = TopicChannel(bootstrap, topic, name)
    channel.send(channel.answer_key, data, [("content-type", b"application/vnd.apache.arrow.stream"),
                                             ("streamembed-request-id", request.request_id.encode())])
