"""The [kafka] configuration reaches kafka-python's clients (no broker, no SASL server needed)."""

from __future__ import annotations

import json

import pytest

from streamembed.config import ConfigError, load_config, to_json, to_toml
from streamembed.kafka.client import consumer_settings, producer_settings


def _kafka(**kv: object):
    env = {f"STREAMEMBED_KAFKA__{k.upper()}": v if isinstance(v, str) else json.dumps(v) for k, v in kv.items()}
    return load_config(environ=env).kafka


def test_sasl_scram_and_tls_options_reach_both_clients() -> None:
    k = _kafka(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="svc",
               sasl_plain_password="s3cret", ssl_cafile="/etc/ca.pem", ssl_certfile="/etc/c.pem",
               ssl_keyfile="/etc/k.pem", ssl_check_hostname="false", bootstrap_servers="b1:9093, b2:9093")
    for settings in (consumer_settings(k), producer_settings(k)):
        assert settings["bootstrap_servers"] == ["b1:9093", "b2:9093"]
        assert (settings["security_protocol"], settings["sasl_mechanism"]) == ("SASL_SSL", "SCRAM-SHA-512")
        assert (settings["sasl_plain_username"], settings["sasl_plain_password"]) == ("svc", "s3cret")
        assert (settings["ssl_cafile"], settings["ssl_certfile"], settings["ssl_keyfile"]) == \
            ("/etc/ca.pem", "/etc/c.pem", "/etc/k.pem")
        assert settings["ssl_check_hostname"] is False


def test_settings_are_accepted_by_kafka_python_clients() -> None:
    """Every key we pass is one the installed kafka-python knows (constructors reject unknown ones)."""
    from kafka import KafkaConsumer, KafkaProducer

    k = _kafka(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_plain_username="u",
               client={"compression_type": "gzip", "request_timeout_ms": 20000, "fetch_min_bytes": 2})
    c, p = consumer_settings(k), producer_settings(k)
    assert set(c) <= set(KafkaConsumer.DEFAULT_CONFIG) and set(p) <= set(KafkaProducer.DEFAULT_CONFIG)
    assert c["enable_auto_commit"] is False and c["group_id"] == "streamembed"
    # [kafka.client] keys go to the client that knows them (both, when both do)
    assert p["compression_type"] == "gzip" and "compression_type" not in c
    assert c["fetch_min_bytes"] == 2 and "fetch_min_bytes" not in p
    assert c["request_timeout_ms"] == p["request_timeout_ms"] == 20000


def test_plaintext_defaults_bind_nothing_but_loopback() -> None:
    cfg = load_config()
    assert cfg.source.kind == "generator" and cfg.output.kafka_topic == "" and cfg.kafka.model_topic == ""
    c = consumer_settings(cfg.kafka)
    assert c["bootstrap_servers"] == ["127.0.0.1:9092"] and c["security_protocol"] == "PLAINTEXT"
    assert "sasl_mechanism" not in c and "ssl_check_hostname" not in c


def test_a_typo_in_the_client_table_refuses_to_start(tmp_path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[kafka.client]\nlinger_msec = 5\n')
    with pytest.raises(ConfigError, match="linger_msec is not a kafka-python setting.*linger_ms"):
        load_config(path)
    path.write_text('[kafka.client]\nlinger_ms = 5\nsasl_oauth_token_provider = "x"\n')
    assert load_config(path).kafka.client["linger_ms"] == 5
    with pytest.raises(ConfigError, match="managed by streamembed"):
        _kafka(client={"enable_auto_commit": True})
    with pytest.raises(ConfigError, match="kafka.client"):
        _kafka(client="[1, 2]")


@pytest.mark.parametrize("env, message", [
    ({"SECURITY_PROTOCOL": "SASL_SSL"}, "needs kafka.sasl_mechanism"),
    ({"SASL_MECHANISM": "PLAIN"}, "needs kafka.security_protocol"),
    ({"SECURITY_PROTOCOL": "SASL_PLAINTEXT", "SASL_MECHANISM": "PLAIN"}, "needs kafka.sasl_plain_username"),
    ({"SASL_MECHANISM": "GSSAPI"}, "is not one of"),
    ({"SECURITY_PROTOCOL": "TLS"}, "is not one of"),
])
def test_inconsistent_security_settings_refuse(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(environ={f"STREAMEMBED_KAFKA__{k}": v for k, v in env.items()})


def test_kafka_source_and_output_selection_are_checked() -> None:
    with pytest.raises(ConfigError, match="needs kafka.input_topic"):
        load_config(overrides={"source.kind": "kafka", "model.path": "m.npz"})
    with pytest.raises(ConfigError, match="needs a model"):
        load_config(overrides={"source.kind": "kafka", "kafka.input_topic": "in"})
    ok = load_config(overrides={"source.kind": "kafka", "kafka.input_topic": "in", "kafka.model_topic": "models"})
    assert ok.kafka.model_topic == "models"
    with pytest.raises(ConfigError, match="would go nowhere"):
        load_config(overrides={"output.parquet": "false"})
    assert load_config(overrides={"output.parquet": "false", "output.kafka_topic": "out"}).output.kafka_topic == "out"


def test_printed_configuration_hides_passwords() -> None:
    cfg = load_config(environ={"STREAMEMBED_KAFKA__SASL_PLAIN_PASSWORD": "hunter2",
                               "STREAMEMBED_KAFKA__CLIENT": '{"ssl_password": "pem-pass"}'})
    assert cfg.kafka.sasl_plain_password == "hunter2"
    for text in (to_toml(cfg), to_json(cfg)):
        assert "hunter2" not in text and "pem-pass" not in text and "<redacted>" in text


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_every_compression_type_is_accepted_and_a_producer_can_be_made(codec: str) -> None:
    """The README's `compression_type = "lz4"`: the codec packages are dependencies, so every codec works
    (before: the missing lz4 package made the producer's constructor fail, exit 3 "retry" for ever)."""
    from kafka import KafkaProducer

    settings = producer_settings(_kafka(client={"compression_type": codec}))
    assert settings["compression_type"] == codec
    KafkaProducer(**{**settings, "bootstrap_servers": [], "api_version": (3, 9)}).close(0)


def test_a_compression_type_whose_codec_is_missing_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafka.codec

    monkeypatch.setattr(kafka.codec, "has_lz4", lambda: False)
    with pytest.raises(ConfigError, match="compression_type = 'lz4' needs the lz4 package"):
        _kafka(client={"compression_type": "lz4"})
    with pytest.raises(ConfigError, match="one of none"):
        _kafka(client={"compression_type": "brotli"})
