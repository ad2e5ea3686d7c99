"""``kafka.client_library``: confluent-kafka (librdkafka) as the daemon's Kafka client, without a broker.

The broker tests run once per library (tests/kafka/conftest.py); here, what needs no broker: the refusal at
start of a library that is not installed (exit 2, naming the extra), the translation of streamembed's settings
into librdkafka properties, the ``[kafka.client]`` table in librdkafka's names, and librdkafka's errors as
kafka-python's classes (the one classification of transient, too-large and lost-producer errors).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamembed.config import ConfigError, load_config
from streamembed.config.kafka_clients import CLIENT_LIBRARIES
from streamembed.kafka.client import is_too_large, is_transient
from streamembed.kafka.libraries import KAFKA_PYTHON, clients_for
from streamembed.kafka.producer import is_lost_producer

from ..e2e.cli import clean_env

ck = pytest.importorskip("confluent_kafka")

KAFKA = {"source.kind": "kafka", "kafka.input_topic": "t", "model.path": "m.npz"}


def test_the_libraries_are_one_registry_and_kafka_python_the_default() -> None:
    assert CLIENT_LIBRARIES.names() == ("kafka-python", "confluent")
    assert load_config().kafka.client_library == "kafka-python"
    assert clients_for(load_config().kafka) is KAFKA_PYTHON
    k = load_config(overrides={**KAFKA, "kafka.client_library": "confluent"}).kafka
    assert clients_for(k).name == "confluent" and "librdkafka" in clients_for(k).version()
    with pytest.raises(ConfigError, match="kafka.client_library = 'librdkafka' is not one of 'kafka-python', "
                                          "'confluent'"):
        load_config(overrides={"kafka.client_library": "librdkafka"})


def test_a_library_that_is_not_installed_refuses_to_start_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "confluent_kafka" else
                        real(name, *a))
    with pytest.raises(ConfigError, match=r"kafka.client_library = 'confluent' needs the confluent-kafka package, "
                                          r"which is not installed: pip install 'streamembed\[confluent\]'"):
        load_config(overrides={**KAFKA, "kafka.client_library": "confluent"})
    # a run that makes no Kafka client does not need it
    load_config(overrides={"kafka.client_library": "confluent"})


@pytest.mark.e2e
def test_the_daemon_exits_2_when_the_library_is_missing(tmp_path: Path) -> None:
    """The real command line, with confluent_kafka made unimportable: exit 2 before anything connects."""
    probe = ("import sys, runpy; sys.modules['confluent_kafka'] = None; sys.argv = ['streamembed', 'run']; "
             "runpy.run_module('streamembed', run_name='__main__')")
    env = clean_env({"STREAMEMBED_SOURCE__KIND": "kafka", "STREAMEMBED_KAFKA__INPUT_TOPIC": "t",
                     "STREAMEMBED_MODEL__PATH": str(tmp_path / "m.npz"), "STREAMEMBED_OUTPUT__ROOT": str(tmp_path),
                     "STREAMEMBED_KAFKA__CLIENT_LIBRARY": "confluent", "STREAMEMBED_KAFKA__BOOTSTRAP_SERVERS":
                     "127.0.0.1:9"})
    r = subprocess.run([sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "pip install 'streamembed[confluent]'" in r.stderr


def test_an_assignor_librdkafka_does_not_offer_is_refused() -> None:
    with pytest.raises(ConfigError, match="kafka.assignor = 'sticky' is not offered by kafka.client_library = "
                                          "'confluent' \\(it offers range, roundrobin, cooperative-sticky\\)"):
        load_config(overrides={**KAFKA, "kafka.client_library": "confluent", "kafka.assignor": "sticky"})


def test_streamembeds_settings_become_librdkafka_properties() -> None:
    from streamembed.kafka.librdkafka.settings import consumer_conf, producer_conf

    k = load_config(overrides={**KAFKA, "kafka.client_library": "confluent", "kafka.security_protocol": "SASL_SSL",
                               "kafka.sasl_mechanism": "SCRAM-SHA-512", "kafka.sasl_plain_username": "svc",
                               "kafka.sasl_plain_password": "pw", "kafka.ssl_cafile": "/ca.pem",
                               "kafka.bootstrap_servers": "b1:9093,b2:9093"}).kafka
    clients = clients_for(k)
    c = consumer_conf(clients.consumer_settings(k))
    assert c["bootstrap.servers"] == "b1:9093,b2:9093" and c["group.id"] == "streamembed"
    assert c["enable.auto.commit"] is False and c["enable.auto.offset.store"] is False and c["check.crcs"] is True
    assert (c["session.timeout.ms"], c["heartbeat.interval.ms"], c["fetch.wait.max.ms"]) == (8000, 2000, 10)
    assert c["partition.assignment.strategy"] == "range" and c["auto.offset.reset"] == "earliest"
    assert (c["security.protocol"], c["sasl.mechanism"], c["sasl.username"], c["sasl.password"]) == \
        ("SASL_SSL", "SCRAM-SHA-512", "svc", "pw")
    assert c["ssl.ca.location"] == "/ca.pem" and c["ssl.endpoint.identification.algorithm"] == "https"
    assert c["receive.message.max.bytes"] >= c["fetch.max.bytes"] + 512
    p = producer_conf(clients.producer_settings(k))
    assert (p["acks"], p["linger.ms"], p["message.max.bytes"], p["enable.idempotence"]) == ("all", 5, 16_777_216,
                                                                                             False)
    reader = consumer_conf(clients.consumer_settings(k, group=False))
    assert reader["group.id"] == "streamembed-consumer-reader"  # a reader never joins the group
    # librdkafka takes every property given (its constructor refuses unknown ones; TLS files are read at once:
    # the plaintext defaults here), and connects to nothing yet
    plain = load_config(overrides={**KAFKA, "kafka.client_library": "confluent"}).kafka
    ck.Consumer(consumer_conf(clients.consumer_settings(plain))).close()
    ck.Producer(producer_conf(clients.producer_settings(plain)))


def test_the_client_table_holds_librdkafka_properties_given_to_the_role_that_takes_them() -> None:
    from streamembed.kafka.librdkafka.settings import properties_for

    table = {"compression.type": "lz4", "fetch.min.bytes": 2, "socket.keepalive.enable": True}
    k = load_config(overrides={**KAFKA, "kafka.client_library": "confluent", "kafka.client": json.dumps(table)}).kafka
    assert properties_for(k.client, "producer") == {"compression.type": "lz4", "socket.keepalive.enable": True}
    assert properties_for(k.client, "consumer") == {"fetch.min.bytes": 2, "socket.keepalive.enable": True}
    assert clients_for(k).producer_settings(k)["compression.type"] == "lz4"


@pytest.mark.parametrize(("table", "message"), [
    ({"linger_ms": 5}, r"No such configuration property: \"linger_ms\".*did you mean 'linger.ms'"),
    ({"linger.ms": "soon"}, r"kafka.client.linger.ms = 'soon' is refused by librdkafka: Invalid value"),
    ({"compression.type": "brotli"}, r"Invalid value \"brotli\""),
    ({"group.id": "other"}, r"kafka.client.group.id is managed by streamembed"),
    ({"bootstrap.servers": "x:1"}, r"kafka.client.bootstrap.servers is managed by streamembed"),
])
def test_an_unusable_client_property_refuses_to_start(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(overrides={**KAFKA, "kafka.client_library": "confluent", "kafka.client": json.dumps(table)})


def test_librdkafkas_errors_are_classified_as_kafka_pythons() -> None:
    from streamembed.kafka.librdkafka.errors import as_kafka_error

    E = ck.KafkaError
    assert is_transient(as_kafka_error(E(E._MSG_TIMED_OUT), "x"))
    assert is_transient(as_kafka_error(E(E._TRANSPORT), "x"))
    assert is_transient(as_kafka_error(E(E.NOT_LEADER_FOR_PARTITION), "x"))
    assert is_too_large(as_kafka_error(E(E.MSG_SIZE_TOO_LARGE), "x"))
    assert is_lost_producer(as_kafka_error(E(E.UNKNOWN_PRODUCER_ID), "x"))
    assert is_lost_producer(as_kafka_error(E(E._FATAL, fatal=True), "x"))  # an unusable producer: a new one
    assert not is_transient(as_kafka_error(E(E.TOPIC_AUTHORIZATION_FAILED), "x"))
    assert "producing to out" in str(as_kafka_error(ck.KafkaException(E(E._MSG_TIMED_OUT)), "producing to out"))
