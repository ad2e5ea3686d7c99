"""How the daemon uses Kafka: source, output and dead-letter topics, model distribution.

:func:`build_io` returns the loop's two sinks for any source (Parquet files
and/or the output topic; dead-letter files, or the dead-letter topic when
the source is Kafka) plus a :class:`KafkaIO` that owns the shared producer.
:func:`startup_model` picks the model a replica starts with (its own file,
or the model topic's, whichever is newer); :class:`ModelSync` follows the
model topic between batches and publishes local refits.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from streamembed.kafka.client import ReliableProducer, consumer_settings, producer_settings
from streamembed.kafka.model_topic import ModelTopic
from streamembed.kafka.sink import FanoutSink, KafkaDeadLetterSink, KafkaOutputSink
from streamembed.kafka.source import KafkaSource

__all__ = ["KafkaIO", "ModelSync", "build_source", "build_io", "open_model_topic", "startup_model",
           "dead_letter_topic"]

log = logging.getLogger("streamembed.kafka")


def _startup_error(message: str) -> Exception:
    from streamembed.daemon.app import StartupError

    return StartupError(message)


def dead_letter_topic(cfg: Any) -> str:
    k = cfg.kafka
    return k.dead_letter_topic or f"{k.input_topic}.dlq"


@dataclass
class KafkaIO:
    """The Kafka clients of one daemon (closed by :meth:`close`)."""

    producer: ReliableProducer | None = None
    model_topic: ModelTopic | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)

    def backpressure(self) -> bool:
        return self.producer is not None and self.producer.unacked_bytes > self._limit

    def resume(self) -> bool:
        return self.producer is None or self.producer.unacked_bytes <= self._limit // 2

    _limit: int = 1 << 26

    def close(self) -> None:
        for close in reversed(self.closers):
            try:
                close()
            except Exception:  # noqa: BLE001 - shutting down: log and go on
                log.warning("closing a Kafka client failed", exc_info=True)
        self.closers.clear()


def build_source(cfg: Any, io: KafkaIO, *, metrics: Any = None, stop: threading.Event | None = None) -> KafkaSource:
    """The consumer-group source of ``source.kind = "kafka"`` (backpressure from ``io``'s producer)."""
    k = cfg.kafka
    try:
        source = KafkaSource(consumer_settings(k), k.input_topic, batch_rows=cfg.source.batch_rows,
                             poll_timeout_ms=k.poll_timeout_ms, metrics=metrics, stop=stop,
                             backpressure=io.backpressure, resume_when=io.resume,
                             startup_timeout=k.startup_timeout_seconds, max_backoff=k.retry_backoff_max_seconds)
    except Exception as exc:  # noqa: BLE001 - cannot connect / bad settings: refuse to start
        raise _startup_error(f"cannot consume {k.input_topic!r} from kafka.bootstrap_servers = "
                             f"{k.bootstrap_servers!r}: {type(exc).__name__}: {exc}") from None
    io.closers.append(source.close)
    return source


def _producer(cfg: Any, io: KafkaIO, metrics: Any, stop: threading.Event | None) -> ReliableProducer:
    if io.producer is None:
        k = cfg.kafka
        try:
            io.producer = ReliableProducer(producer_settings(k), metrics=metrics, stop=stop,
                                           max_backoff=k.retry_backoff_max_seconds)
        except Exception as exc:  # noqa: BLE001
            raise _startup_error(f"cannot produce to kafka.bootstrap_servers = {k.bootstrap_servers!r}: "
                                 f"{type(exc).__name__}: {exc}") from None
        io._limit = k.max_unacked_bytes
        io.closers.append(io.producer.close)
    return io.producer


def build_io(cfg: Any, io: KafkaIO, source: Any, parquet: Any, dead_files: Any, *, metrics: Any = None,
             stop: threading.Event | None = None) -> tuple[Any, Any]:
    """(output sink, dead-letter sink) for the loop.

    ``parquet`` / ``dead_files`` are the file sinks (None when not wanted).
    Output: Parquet and/or ``output.kafka_topic`` (both at once work).
    Dead letters: the dead-letter topic for a Kafka source, else the files.
    """
    outputs = [parquet] if parquet is not None else []
    if cfg.output.kafka_topic:
        producer = _producer(cfg, io, metrics, stop)
        outputs.append(KafkaOutputSink(producer, cfg.output.kafka_topic, fmt=cfg.kafka.output_format,
                                       max_message_bytes=cfg.kafka.max_request_size))
    if isinstance(source, KafkaSource):
        dead = KafkaDeadLetterSink(_producer(cfg, io, metrics, stop), dead_letter_topic(cfg), locate=source.locate)
    else:
        dead = dead_files
    output = outputs[0] if len(outputs) == 1 else FanoutSink(outputs)
    return output, dead


# ----------------------------------------------------------------------------- models


def open_model_topic(cfg: Any, io: KafkaIO, *, metrics: Any = None,
                     stop: threading.Event | None = None) -> ModelTopic | None:
    k = cfg.kafka
    if not k.model_topic:
        return None
    io.model_topic = ModelTopic(k.bootstrap_servers, k.model_topic, name=k.model_name,
                                consumer_settings=consumer_settings(k, group=False),
                                producer_settings=producer_settings(k), metrics=metrics, stop=stop,
                                read_timeout=max(10.0, k.startup_timeout_seconds))
    io.closers.append(io.model_topic.close)
    return io.model_topic


def startup_model(cfg: Any, topic: ModelTopic | None, load_local: Callable[[Any], Any]) -> Any:
    """The model this replica starts with.

    Without a model topic: ``load_local(cfg)``. With one: the newer of the
    local model (``model.path``) and the topic's latest; a local model newer
    than the topic's (or the only one) is published. Without ``model.path``
    the topic's model is awaited up to ``kafka.model_wait_seconds``.
    """
    if topic is None:
        return load_local(cfg)
    local = load_local(cfg) if cfg.model.path else None
    try:
        remote = topic.latest()
        if local is None:
            deadline = time.monotonic() + cfg.kafka.model_wait_seconds
            while remote is None and time.monotonic() < deadline and not topic.stop.is_set():
                topic.stop.wait(1.0)
                remote = topic.latest()
            if remote is None:
                raise _startup_error(f"no model on kafka.model_topic = {cfg.kafka.model_topic!r} (key "
                                     f"{cfg.kafka.model_name!r}) after {cfg.kafka.model_wait_seconds:.0f} s, and "
                                     "model.path is empty: start a replica with model.path first")
            log.info("using the model from the model topic", extra={"model_version": int(remote.version)})
            return remote
        lv = int(local.version)
        if remote is None or lv > int(remote.version):
            topic.publish(local)
            return local
        if int(remote.version) > lv:
            log.info("the model topic has a newer model than model.path; using it",
                     extra={"model_version": int(remote.version), "local_version": lv})
            return remote
        return local
    except Exception as exc:  # noqa: BLE001
        if type(exc).__name__ == "StartupError":
            raise
        raise _startup_error(f"cannot use kafka.model_topic = {cfg.kafka.model_topic!r}: "
                             f"{type(exc).__name__}: {exc}") from None


class ModelSync:
    """Between batches: install a newer model from the topic; publish a newer local one (a refit).

    Never installs a model older than (or as old as) the current one (the
    registry refuses it anyway). Counts installs as ``refits{trigger="remote"}``.
    """

    def __init__(self, topic: ModelTopic, registry: Any, *, monitor: Any = None, metrics: Any = None,
                 poll_seconds: float = 2.0) -> None:
        self.topic = topic
        self.registry = registry
        self.monitor = monitor
        self.metrics = metrics
        self.poll_seconds = float(poll_seconds)
        self._next = 0.0
        self._published = topic.topic_version  # a newer current model is a local refit: publish it
        self.installed = 0
        topic.start_watching(poll_seconds=max(0.2, min(1.0, self.poll_seconds)))

    def poll(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.poll_seconds
        current = self.registry.current_version
        new = self.topic.poll_new(current)
        if new is not None:
            from streamembed.stream.models import StaleModelError

            try:
                self.registry.install(new)
            except StaleModelError:
                return
            self._published = max(self._published, int(new.version))
            self.installed += 1
            if self.monitor is not None:
                self.monitor.reset(new)
            if self.metrics is not None:
                self.metrics.model_version.set(int(new.version))
                self.metrics.refits.labels(trigger="remote").inc()
            log.info("installed a newer model from the model topic", extra={"model_version": int(new.version),
                                                                            "previous": current})
            return
        if current > self._published:
            try:
                self.topic.publish(self.registry.current)
                self._published = current
            except Exception:  # noqa: BLE001 - the stream goes on; try again next time
                log.warning("publishing model version %d failed; will retry", current, exc_info=True)
