"""confluent-kafka (librdkafka) as the Kafka client library (``kafka.client_library = "confluent"``).

librdkafka fetches, decompresses and produces in C threads, outside the
interpreter's lock, where kafka-python reads every fetch in Python. The
clients here offer kafka-python's surface (``kafka.libraries``), so the
source, the producer, the model topic and the group-lag watcher are the same
code for both libraries:

* :mod:`~streamembed.kafka.librdkafka.settings` - kafka-python-named settings
  as librdkafka properties, and the ``[kafka.client]`` properties checked;
* :mod:`~streamembed.kafka.librdkafka.errors` - librdkafka's errors as
  kafka-python's exception classes;
* :mod:`~streamembed.kafka.librdkafka.consumer` and
  :mod:`~streamembed.kafka.librdkafka.producer` - the clients;
* :data:`CONFLUENT` - them as a ``kafka.libraries.Clients``, with the admin
  requests (creating the model topic, a topic's size limit).

Imported only when the run uses Kafka with this library (``config.kafka_clients``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from streamembed.kafka.libraries import Clients
from streamembed.kafka.librdkafka.consumer import LibrdkafkaConsumer
from streamembed.kafka.librdkafka.errors import LibrdkafkaLog, as_kafka_error
from streamembed.kafka.librdkafka.producer import LibrdkafkaProducer
from streamembed.kafka.librdkafka.settings import consumer_settings, producer_conf, producer_settings

__all__ = ["CONFLUENT", "LibrdkafkaConsumer", "LibrdkafkaProducer"]

log = logging.getLogger("streamembed.kafka.librdkafka")

#: Seconds an admin request may take.
ADMIN_SECONDS = 10.0


def _admin(settings: Mapping[str, Any]) -> Any:
    from confluent_kafka.admin import AdminClient

    conf: dict[str, Any] = {k: v for k, v in producer_conf(settings).items()
                            if k not in ("acks", "batch.size", "enable.idempotence", "linger.ms", "message.max.bytes",
                                         "compression.type")}
    conf["logger"] = LibrdkafkaLog(log)
    return AdminClient(conf)


def _create_topic(settings: Mapping[str, Any], topic: str, partitions: int, configs: Mapping[str, str]) -> None:
    from confluent_kafka.admin import NewTopic

    futures = _admin(settings).create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                                       config=dict(configs))], request_timeout=ADMIN_SECONDS)
    try:
        futures[topic].result(timeout=ADMIN_SECONDS)
    except Exception as exc:
        raise as_kafka_error(exc, f"creating {topic}") from None


def _topic_limit(settings: Mapping[str, Any], topic: str) -> int | None:
    try:
        from confluent_kafka.admin import ConfigResource

        futures = _admin(settings).describe_configs([ConfigResource("topic", topic)],
                                                    request_timeout=ADMIN_SECONDS)
        entries = next(iter(futures.values())).result(timeout=ADMIN_SECONDS)
        entry = entries.get("max.message.bytes")
        return None if entry is None or entry.value is None else int(entry.value)
    except Exception as exc:  # best effort: a broker that does not describe configs (Tansu), no permission
        log.debug("cannot ask the broker for the size limit of %s (%s)", topic, exc)
        return None


def _version() -> str:
    import confluent_kafka as ck

    return f"confluent-kafka {ck.version()[0]} (librdkafka {ck.libversion()[0]})"


#: confluent-kafka's clients.
CONFLUENT = Clients("confluent", LibrdkafkaConsumer, LibrdkafkaProducer, consumer_settings, producer_settings,
                    _create_topic, _topic_limit, _version)
