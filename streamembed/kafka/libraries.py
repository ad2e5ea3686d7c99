"""The clients of one Kafka client library (``kafka.client_library``): what the Kafka layer makes its consumers,
producers and admin requests with.

The registry of libraries is ``config.kafka_clients`` (names, packages,
extras); each member names a :class:`Clients` of this layer:
:data:`KAFKA_PYTHON` here, ``kafka.librdkafka.CONFLUENT`` for confluent-kafka.
Every client offers the kafka-python surface the source, the producer, the
model topic and the group-lag watcher use (``KafkaConsumer``'s ``poll``,
``commit``, ``seek``, ``pause``, ``highwater``...; ``KafkaProducer``'s
``send`` returning a future, ``flush``, ``close``), raising kafka-python's
exception classes (``kafka.errors``), so that the semantics - commits after
the sinks, retries, dead letters, sizes, backpressure, rebalances - are
written once (``kafka.source``, ``kafka.producer``) and hold for both.
Settings are built in kafka-python's names (``kafka.client``) and
translated by the library that needs another vocabulary.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streamembed.kafka.client import consumer_settings, producer_settings

__all__ = ["Clients", "KAFKA_PYTHON", "clients_for", "config_value", "validate_client_table"]

log = logging.getLogger("streamembed.kafka")


@dataclass(frozen=True)
class Clients:
    """The clients of one library.

    Attributes:
        name: the ``kafka.client_library`` value.
        consumer: ``consumer(**settings)``, a consumer with kafka-python's ``KafkaConsumer`` surface.
        producer: ``producer(**settings)``, a producer with ``KafkaProducer``'s surface.
        consumer_settings: ``consumer_settings(k, group=True)``: the keyword arguments of ``consumer`` from a
            ``[kafka]`` section (``group=False``: a reader that never joins the group).
        producer_settings: ``producer_settings(k)``: those of ``producer``.
        create_topic: ``create_topic(settings, topic, partitions, configs)``, raising when it cannot.
        topic_limit: ``topic_limit(settings, topic)``: the topic's ``max.message.bytes`` if the cluster says, else
            None (best effort).
        version: ``version()``: the library's version, as the start-up log names it.
    """

    name: str
    consumer: Callable[..., Any]
    producer: Callable[..., Any]
    consumer_settings: Callable[..., dict[str, Any]]
    producer_settings: Callable[[Any], dict[str, Any]]
    create_topic: Callable[[Mapping[str, Any], str, int, Mapping[str, str]], None]
    topic_limit: Callable[[Mapping[str, Any], str], int | None]
    version: Callable[[], str]


def _kafka_consumer(**settings: Any) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(**settings)


def _kafka_producer(**settings: Any) -> Any:
    from kafka import KafkaProducer

    return KafkaProducer(**settings)


def _admin(settings: Mapping[str, Any]) -> Any:
    from kafka import KafkaAdminClient

    keys = set(KafkaAdminClient.DEFAULT_CONFIG)
    return KafkaAdminClient(**{k: v for k, v in settings.items() if k in keys})


def _create_topic(settings: Mapping[str, Any], topic: str, partitions: int, configs: Mapping[str, str]) -> None:
    from kafka.admin import NewTopic

    admin = _admin(settings)
    try:
        admin.create_topics([NewTopic(name=topic, num_partitions=partitions, replication_factor=1,
                                      topic_configs=dict(configs))])
    finally:
        admin.close()


def _topic_limit(settings: Mapping[str, Any], topic: str) -> int | None:
    try:
        from kafka.admin import ConfigResource, ConfigResourceType

        admin = _admin(settings)
    except Exception as exc:
        log.debug("cannot ask the broker for the size limit of %s (%s)", topic, exc)
        return None
    try:
        return config_value(admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]),
                            "max.message.bytes")
    except Exception as exc:
        log.debug("cannot ask the broker for the size limit of %s (%s)", topic, exc)
        return None
    finally:
        with contextlib.suppress(Exception):
            admin.close()


def _version() -> str:
    import kafka

    return f"kafka-python {kafka.__version__}"


def config_value(responses: Any, name: str) -> int | None:
    """``name``'s integer value in DescribeConfigs responses (kafka-python's response objects), or None."""
    for response in responses if isinstance(responses, list) else [responses]:
        for resource in getattr(response, "resources", []) or []:
            entries = resource[4] if isinstance(resource, (tuple, list)) and len(resource) > 4 else []
            for entry in entries or []:
                if isinstance(entry, (tuple, list)) and len(entry) > 1 and entry[0] == name:
                    try:
                        return int(entry[1])
                    except (TypeError, ValueError):
                        return None
    return None


#: kafka-python's clients (the default library, a dependency of streamembed).
KAFKA_PYTHON = Clients("kafka-python", _kafka_consumer, _kafka_producer, consumer_settings, producer_settings,
                       _create_topic, _topic_limit, _version)


def validate_client_table(table: Mapping[str, Any], library: str) -> None:
    """Raise ValueError naming the first unusable ``[kafka.client]`` key of ``library`` (``kafka.client_library``):
    kafka-python's settings (``kafka.client``), librdkafka's properties (``kafka.librdkafka.settings``)."""
    if library == "confluent":
        from streamembed.kafka.librdkafka.settings import validate_properties

        validate_properties(table)
    else:
        from streamembed.kafka.client import validate_client_table as kafka_python_table

        kafka_python_table(table)


def clients_for(k: Any) -> Clients:
    """The clients of ``k.client_library`` (a ``[kafka]`` section; kafka-python where it names none)."""
    from streamembed.config.kafka_clients import CLIENT_LIBRARIES
    from streamembed.core.registry import resolve_path

    lib = CLIENT_LIBRARIES[getattr(k, "client_library", KAFKA_PYTHON.name)]
    clients: Clients = resolve_path(lib.clients, "kafka.client_library")
    return clients
