"""librdkafka configurations from streamembed's client settings, and the ``[kafka.client]`` properties checked.

The Kafka layer builds every client's settings in kafka-python's names
(``kafka.client.managed_consumer_settings``: the same choices whatever the
library); :func:`consumer_conf` / :func:`producer_conf` translate them into
librdkafka properties, with the choices that keep kafka-python's behaviour:
CRCs checked (``check.crcs``, kafka-python's default), offsets stored and
committed only by the source (never automatically), and a receive buffer that
holds the largest fetch. The producer is not idempotent: librdkafka's
idempotent producer recovers from a broker that forgot its producer id by
bumping its epoch itself, which a broker without that support (the test
broker, restarted) refuses for ever, messages never delivered; kafka-python's
producer is replaced instead (``kafka.producer.ReliableProducer``). Delivery is
at least once either way (the input is committed after the acknowledgements),
and ``max.in.flight`` is 5, so a retry reorders at most the messages in flight
(``"enable.idempotence" = true`` in ``[kafka.client]`` against Apache Kafka).

Properties of the ``[kafka.client]`` table (librdkafka's names, with dots) are
given to the clients that know them: each is tried once on a producer and a
consumer that never connect, and a property one of them calls "ignored" goes
to the other only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import cache
from typing import Any

from streamembed.kafka.client import managed_consumer_settings, managed_producer_settings

__all__ = ["consumer_settings", "producer_settings", "consumer_conf", "producer_conf", "validate_properties",
           "properties_for", "MANAGED_PROPERTIES", "bootstrap_seconds"]

#: librdkafka properties streamembed sets itself; ``[kafka.client]`` may not override them.
MANAGED_PROPERTIES = frozenset({
    "bootstrap.servers", "metadata.broker.list", "group.id", "enable.auto.commit", "enable.auto.offset.store",
    "enable.partition.eof", "error_cb", "throttle_cb", "stats_cb", "logger", "on_commit", "on_delivery",
    "oauth_cb", "partition.assignment.strategy",
})

#: kafka-python names -> librdkafka properties, for every client.
_COMMON = {"client_id": "client.id", "security_protocol": "security.protocol", "sasl_mechanism": "sasl.mechanism",
           "sasl_plain_username": "sasl.username", "sasl_plain_password": "sasl.password",
           "ssl_cafile": "ssl.ca.location", "ssl_certfile": "ssl.certificate.location",
           "ssl_keyfile": "ssl.key.location"}
#: ... for consumers
_CONSUMER = {"group_id": "group.id", "auto_offset_reset": "auto.offset.reset",
             "max_partition_fetch_bytes": "max.partition.fetch.bytes", "max_poll_interval_ms": "max.poll.interval.ms",
             "session_timeout_ms": "session.timeout.ms", "heartbeat_interval_ms": "heartbeat.interval.ms",
             "fetch_max_wait_ms": "fetch.wait.max.ms", "fetch_min_bytes": "fetch.min.bytes",
             "partition_assignment_strategy": "partition.assignment.strategy", "check_crcs": "check.crcs"}
#: ... for producers
_PRODUCER = {"linger_ms": "linger.ms", "max_request_size": "message.max.bytes", "compression_type": "compression.type"}
#: kafka-python settings with no librdkafka counterpart, used by the clients themselves or not at all.
_OWN = frozenset({"bootstrap_timeout_ms", "max_poll_records", "api_version", "request_timeout_ms",
                  "consumer_timeout_ms", "retries", "enable_auto_commit", "fetch_max_bytes", "acks", "batch_size",
                  "bootstrap_servers", "ssl_check_hostname"})
#: librdkafka's default receive buffer (bytes); raised to hold the largest fetch.
_RECEIVE_DEFAULT = 100_000_000
_INT32 = 2**31 - 1


def bootstrap_seconds(settings: Mapping[str, Any]) -> float:
    """How long a client waits for the brokers' metadata when it is made (kafka-python's ``bootstrap_timeout_ms``)."""
    return max(0.5, float(settings.get("bootstrap_timeout_ms", 5000)) / 1000)


def _servers(value: Any) -> str:
    return value if isinstance(value, str) else ",".join(value)


def _translate(settings: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": _servers(settings.get("bootstrap_servers", "127.0.0.1:9092"))}
    for key, value in settings.items():
        if "." in key:  # a librdkafka property of [kafka.client]
            conf[key] = value
        elif key in names:
            conf[names[key]] = value
        elif key in _COMMON:
            conf[_COMMON[key]] = value
        elif key not in _OWN:
            raise ValueError(f"{key} is not a client setting streamembed can give librdkafka")
    if settings.get("security_protocol", "PLAINTEXT") in ("SSL", "SASL_SSL"):
        conf["ssl.endpoint.identification.algorithm"] = "https" if settings.get("ssl_check_hostname", True) else "none"
    return conf


def consumer_conf(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The librdkafka configuration of a consumer with these (kafka-python) settings.

    Without a ``group_id`` the consumer reads assigned partitions only: librdkafka still needs a group id, so it
    gets one of its own, which it never joins (it never subscribes) nor commits to.
    """
    conf = _translate(settings, _CONSUMER)
    if not conf.get("group.id"):
        conf["group.id"] = f"{conf.get('client.id', 'streamembed')}-reader"
    conf.update({"enable.auto.commit": False, "enable.auto.offset.store": False, "enable.partition.eof": False})
    conf.setdefault("check.crcs", True)
    fetch = max(int(settings.get("fetch_max_bytes", 52_428_800)), int(conf.get("max.partition.fetch.bytes", 0)))
    conf["fetch.max.bytes"] = min(fetch, _INT32 - 512)
    conf["receive.message.max.bytes"] = min(max(_RECEIVE_DEFAULT, fetch + 512), _INT32)
    return conf


def producer_conf(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The librdkafka configuration of a producer with these (kafka-python) settings."""
    conf = _translate(settings, _PRODUCER)
    acks = settings.get("acks", -1)
    conf["acks"] = "all" if acks in (-1, "all") else int(acks)
    conf["batch.size"] = max(1, int(settings.get("batch_size", 1_048_576)))
    conf.setdefault("enable.idempotence", False)
    conf.setdefault("max.in.flight", 5)
    if "message.max.bytes" in conf:  # librdkafka's own bound on it
        conf["message.max.bytes"] = min(int(conf["message.max.bytes"]), 1_000_000_000)
    return conf


def consumer_settings(k: Any, *, group: bool = True) -> dict[str, Any]:
    """A consumer's settings from a ``[kafka]`` section: streamembed's own, and the table's consumer properties."""
    from streamembed.kafka.client import BOOTSTRAP_ATTEMPT_SECONDS

    out = managed_consumer_settings(k, group=group)
    out["bootstrap_timeout_ms"] = int(max(1.0, min(BOOTSTRAP_ATTEMPT_SECONDS, float(k.startup_timeout_seconds))) * 1000)
    out.update(properties_for(k.client, "consumer"))
    return out


def producer_settings(k: Any) -> dict[str, Any]:
    """A producer's settings from a ``[kafka]`` section: streamembed's own, and the table's producer properties."""
    from streamembed.kafka.client import BOOTSTRAP_ATTEMPT_SECONDS

    out = managed_producer_settings(k)
    out["bootstrap_timeout_ms"] = int(max(1.0, min(BOOTSTRAP_ATTEMPT_SECONDS, float(k.startup_timeout_seconds))) * 1000)
    out.update(properties_for(k.client, "producer"))
    return out


# ----------------------------------------------------------------------------- [kafka.client]


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _probe(role: str, key: str, value: Any) -> list[str]:
    """What a client of ``role`` that never connects says of ``{key: value}`` (its log lines); raises librdkafka's
    error for an unknown property or a bad value."""
    import confluent_kafka as ck

    capture = _Capture()
    logger = logging.getLogger(f"streamembed.kafka.librdkafka.probe.{role}")
    logger.propagate = False
    logger.addHandler(capture)
    logger.setLevel(logging.DEBUG)
    try:
        if role == "producer":
            p = ck.Producer({key: value, "logger": logger})
            p.poll(0)
            del p
        else:
            c = ck.Consumer({"group.id": "streamembed-probe", key: value, "logger": logger})
            c.poll(0)
            c.close()
    finally:
        logger.removeHandler(capture)
    return capture.lines


@cache
def _roles(key: str, value: Any) -> frozenset[str]:
    """The client roles that use ``key`` (a property librdkafka calls ignored by one role goes to the other)."""
    out = set()
    for role, other in (("producer", "consumer"), ("consumer", "producer")):
        lines = _probe(role, key, value)
        if not any(f"is a {other} property and will be ignored" in line for line in lines):
            out.add(role)
    return frozenset(out)


def properties_for(table: Mapping[str, Any], role: str) -> dict[str, Any]:
    """The ``[kafka.client]`` properties a client of ``role`` ("consumer" or "producer") takes."""
    return {key: value for key, value in table.items() if role in _roles(key, _hashable(value))}


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool)) else repr(value)


def validate_properties(table: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first unusable ``[kafka.client]`` property (librdkafka's names).

    Refused: a property streamembed sets itself, one librdkafka does not know (with a hint for kafka-python's
    underscored names), a value that is not a number, string or boolean, and a value librdkafka refuses (its
    words: a type, a range, an unknown codec).
    """
    try:
        import confluent_kafka as ck
    except ImportError:  # the library check says which extra to install
        return
    for key, value in table.items():
        if key in MANAGED_PROPERTIES:
            raise ValueError(f"kafka.client.{key} is managed by streamembed and cannot be set here")
        if not isinstance(value, (str, int, float, bool)):
            raise ValueError(f"kafka.client.{key} = {value!r}: only numbers, strings and booleans")
        try:
            _roles(key, value)
        except ck.KafkaException as exc:
            err = exc.args[0]
            what = err.str() if hasattr(err, "str") else str(err)
            hint = ""
            if "No such configuration property" in what and "_" in key and "." not in key:
                hint = f" (librdkafka names properties with dots: did you mean {key.replace('_', '.')!r}?)"
            raise ValueError(f"kafka.client.{key} = {value!r} is refused by librdkafka: {what}{hint}") from None
