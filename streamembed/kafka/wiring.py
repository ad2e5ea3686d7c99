"""The Kafka clients of one daemon (:class:`KafkaIO`) and the Kafka source kind's builder.

Every client is made by the library ``kafka.client_library`` names (``kafka.libraries``: kafka-python or
confluent-kafka), with the same semantics.

``source.kind = "kafka"`` (``config.sources``): :func:`build_source` makes
the consumer-group source, the dead-letter topic that takes its refused
records (spilling what the broker cannot take to the dead-letter files) and
the rule that this replica leads automatic refits while it owns input
partition 0. ``KafkaIO`` owns the one producer the dead-letter topic, the
output topic (``output.kafka_topic``, with any source: :meth:`KafkaIO.output_sink`)
and the model topic share, and closes them. The daemon imports this module
only when the run uses Kafka (``KafkaIO.needed``): a daemon on a directory
imports nothing of it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamembed.config.schema import Config
from streamembed.exits import EnvironmentUnavailable
from streamembed.kafka.libraries import Clients, clients_for
from streamembed.kafka.producer import ReliableProducer
from streamembed.kafka.limits import topic_limit
from streamembed.kafka.model_topic import ModelTopic
from streamembed.kafka.sink import KafkaDeadLetterSink, KafkaOutputSink
from streamembed.kafka.source import KafkaSource
from streamembed.stream.sinks import dead_letter_path
from streamembed.stream.sources.base import SourceContext, SourceSetup

__all__ = ["KafkaIO", "build_source", "dead_letter_topic", "message_limit"]

log = logging.getLogger("streamembed.daemon")


def dead_letter_topic(cfg: Config) -> str:
    k = cfg.kafka
    return k.dead_letter_topic or f"{k.input_topic}.dlq"


def message_limit(cfg: Config, topic: str) -> int:
    """The largest message the sinks send to ``topic``: ``kafka.max_request_size``, or less if the broker says so."""
    limit = int(cfg.kafka.max_request_size)
    clients = clients_for(cfg.kafka)
    broker = topic_limit(clients.producer_settings(cfg.kafka), topic, clients)
    if broker is not None and broker < limit:
        log.info("the broker takes messages of at most %d bytes on %s (max.message.bytes): a lower limit than "
                 "kafka.max_request_size = %d", broker, topic, limit, extra={"topic": topic})
        return broker
    return limit


@dataclass
class KafkaIO:
    """The Kafka clients of one daemon (closed by :meth:`close`).

    Attributes:
        cfg: the run's configuration ([kafka] settings).
        metrics: the daemon's metrics (or their no-op twin), or None.
        stop: set when the daemon stops (retries end).
    """

    cfg: Config
    metrics: Any = None
    stop: threading.Event | None = None
    producer: ReliableProducer | None = None
    model_topic: ModelTopic | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)
    limit: int = 1 << 26

    def __post_init__(self) -> None:
        log.info("Kafka clients: %s (kafka.client_library = %s)", self.clients.version(), self.cfg.kafka.client_library)

    @property
    def clients(self) -> Clients:
        """The clients of ``kafka.client_library``."""
        return clients_for(self.cfg.kafka)

    def backpressure(self) -> bool:
        return self.producer is not None and self.producer.unacked_bytes > self.limit

    def resume(self) -> bool:
        return self.producer is None or self.producer.unacked_bytes <= self.limit // 2

    def shared_producer(self) -> ReliableProducer:
        """The one producer of the dead-letter, output and model topics (made at first use)."""
        if self.producer is None:
            k = self.cfg.kafka
            try:
                clients = self.clients
                self.producer = ReliableProducer(clients.producer_settings(k), metrics=self.metrics, stop=self.stop,
                                                 max_backoff=k.retry_backoff_max_seconds,
                                                 drain_seconds=self.cfg.run.stop_seconds, factory=clients.producer)
            except Exception as exc:  # the brokers are unreachable: retry later
                raise EnvironmentUnavailable(f"cannot produce to kafka.bootstrap_servers = {k.bootstrap_servers!r}: "
                                             f"{type(exc).__name__}: {exc}") from None
            self.limit = k.max_unacked_bytes
            self.closers.append(self.producer.close)
        return self.producer

    def output_sink(self, dead: Any) -> KafkaOutputSink:
        """The sink of ``output.kafka_topic``; rows the broker refuses go to ``dead`` as dead letters."""
        topic = self.cfg.output.kafka_topic

        def refuse(records: list[Any], version: int | None, label: str) -> None:
            dead.write(records, label, model_version=version)

        sink = KafkaOutputSink(self.shared_producer(), topic, fmt=self.cfg.kafka.output_format,
                               max_message_bytes=message_limit(self.cfg, topic), refuse=refuse)
        if self.metrics is not None:  # the topic's series exists from the start (0), not from its first message
            self.metrics.kafka_messages_out.labels(topic=topic)
        return sink

    def open_model_topic(self) -> ModelTopic | None:
        """The model topic the replicas share (``kafka.model_topic``), or None when it is off."""
        k = self.cfg.kafka
        if not k.model_topic:
            return None
        clients = self.clients
        self.model_topic = ModelTopic(k.bootstrap_servers, k.model_topic, name=k.model_name,
                                      consumer_settings=clients.consumer_settings(k, group=False),
                                      producer_settings=clients.producer_settings(k), metrics=self.metrics,
                                      stop=self.stop, read_timeout=max(10.0, k.startup_timeout_seconds),
                                      clients=clients)
        self.closers.append(self.model_topic.close)
        if self.metrics is not None:
            self.metrics.kafka_messages_out.labels(topic=k.model_topic)
        return self.model_topic

    def close(self) -> None:
        for close in reversed(self.closers):
            try:
                close()
            except Exception:  # shutting down: log and go on
                log.warning("closing a Kafka client failed", exc_info=True)
        self.closers.clear()


def build_source(cfg: Config, context: SourceContext) -> SourceSetup:
    """The consumer-group source of ``source.kind = "kafka"`` (backpressure from the shared producer), its
    dead-letter topic, and the leader rule of automatic refits.

    Raises:
        EnvironmentUnavailable: the brokers cannot be reached (exit 3: retry later).
    """
    io: KafkaIO = context.kafka
    k = cfg.kafka
    clients = io.clients
    try:
        source = KafkaSource(clients.consumer_settings(k), k.input_topic, batch_rows=cfg.source.batch_rows,
                             poll_timeout_ms=k.poll_timeout_ms, metrics=context.metrics, stop=context.stop,
                             backpressure=io.backpressure, resume_when=io.resume,
                             startup_timeout=k.startup_timeout_seconds, max_backoff=k.retry_backoff_max_seconds,
                             event_time=k.event_time, adaptive_fetch=k.fetch_max_wait_ms == "auto", clients=clients)
    except Exception as exc:  # the brokers are unreachable: retry later
        raise EnvironmentUnavailable(f"cannot consume {k.input_topic!r} from kafka.bootstrap_servers = "
                                     f"{k.bootstrap_servers!r}: {type(exc).__name__}: {exc}") from None
    io.closers.append(source.close)
    topic = dead_letter_topic(cfg)

    def dead_letters(files: Any) -> KafkaDeadLetterSink:
        sink = KafkaDeadLetterSink(io.shared_producer(), topic, locate=source.locate,
                                   max_message_bytes=message_limit(cfg, topic), spill=files,
                                   spill_path=lambda label: dead_letter_path(cfg.dead_letter_dir,
                                                                              cfg.output.dead_letter_format, label))
        if context.metrics is not None:  # the topic's series exists from the start (0)
            context.metrics.kafka_messages_out.labels(topic=topic)
        return sink

    # one replica of the group leads automatic refits: the owner of input partition 0; the others take its
    # model from the model topic (daemon.model_setup.ModelSync)
    return SourceSetup(source, dead_letters=dead_letters, leads_refits=lambda: 0 in source.assigned_partitions)
