"""Every numeric setting is range-checked at load (one table), and timings that make failover impossible are refused.

Attack #7 of issue 35: ``output.row_group_rows = 99999999999999999999`` crashed every start with an
OverflowError (300 records neither processed nor dead-lettered); ``metrics.request_timeout_seconds = 1e-320``
failed half the probes and ``metrics.wedged_after_seconds = 1e-320`` answered /healthz 503 for good. Each is now
refused at start with its range.
"""

from __future__ import annotations

import pytest

from streamembed.config import ConfigError, load_config, weakening_settings
from streamembed.config.ranges import RANGES, describe_range


@pytest.mark.parametrize(("key", "value", "range_text"), [
    ("output.row_group_rows", 99999999999999999999, ">= 1 and <= 100_000_000"),
    ("metrics.request_timeout_seconds", 1e-320, ">= 0.1 and <= 3600"),
    ("metrics.wedged_after_seconds", 1e-320, ">= 1 and <= 2_000_000"),
    ("kafka.fetch_max_wait_ms", 0, ">= 1 and <= 60000"),
    ("kafka.fetch_max_wait_ms", -5, ">= 1 and <= 60000"),
])
def test_the_attack_values_are_refused_with_their_range(key: str, value: object, range_text: str) -> None:
    with pytest.raises(ConfigError, match=rf"{key} = .* is out of range \(must be {range_text}\)"):
        load_config(overrides={key: value})


def test_the_same_refusal_from_toml_and_the_environment(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "c.toml"
    cfg.write_text("[output]\nrow_group_rows = 99999999999999999999\n")
    with pytest.raises(ConfigError, match="row_group_rows = 99999999999999999999 is out of range"):
        load_config(cfg)
    with pytest.raises(ConfigError, match="STREAMEMBED_METRICS__WEDGED_AFTER_SECONDS: .* out of range"):
        load_config(environ={"STREAMEMBED_METRICS__WEDGED_AFTER_SECONDS": "1e-320"})
    with pytest.raises(ConfigError, match="kafka.fetch_max_wait_ms = 0 is out of range"):
        load_config(environ={"STREAMEMBED_KAFKA__FETCH_MAX_WAIT_MS": "0"})


def test_fetch_wait_takes_auto_or_milliseconds() -> None:
    assert load_config().kafka.fetch_max_wait_ms == 10  # the measured best (docs/failover-and-latency.md)
    assert load_config(overrides={"kafka.fetch_max_wait_ms": "auto"}).kafka.fetch_max_wait_ms == "auto"
    assert load_config(overrides={"kafka.fetch_max_wait_ms": "25"}).kafka.fetch_max_wait_ms == 25
    with pytest.raises(ConfigError, match="fetch_max_wait_ms = 'soon' is not auto or an integer"):
        load_config(overrides={"kafka.fetch_max_wait_ms": "soon"})


def test_ranges_read_as_the_refusals_state_them() -> None:
    assert describe_range(RANGES["drift.clip_quantile"]) == "> 0.5 and <= 1"
    assert describe_range(RANGES["metrics.port"]) == ">= 0 and <= 65535"


def test_a_heartbeat_slower_than_a_third_of_the_session_is_refused_with_the_range() -> None:
    with pytest.raises(ConfigError, match=r"heartbeat_interval_ms = 4000 must be at most a third of "
                                          r"kafka.session_timeout_ms = 6000 \(range: 100 to 2000\)"):
        load_config(overrides={"kafka.session_timeout_ms": 6000, "kafka.heartbeat_interval_ms": 4000})
    with pytest.raises(ConfigError, match="heartbeat_interval_ms = 9000 must be at most a third"):
        load_config(overrides={"kafka.session_timeout_ms": 8000, "kafka.heartbeat_interval_ms": 9000})


def test_a_poll_interval_shorter_than_a_batch_may_take_is_refused() -> None:
    kafka = {"source.kind": "kafka", "kafka.input_topic": "t", "model.path": "m.npz"}
    with pytest.raises(ConfigError, match=r"max_poll_interval_ms = 30000 must be more than "
                                          r"model.max_batch_seconds = 60 s .* set it above 60000"):
        load_config(overrides={**kafka, "kafka.max_poll_interval_ms": 30000})
    load_config(overrides={**kafka, "kafka.max_poll_interval_ms": 30000, "model.max_batch_seconds": 20})
    load_config(overrides={"kafka.max_poll_interval_ms": 30000})  # not a Kafka source: no batch between polls


def test_the_failover_defaults_go_together() -> None:
    k = load_config().kafka
    assert k.heartbeat_interval_ms * 3 <= k.session_timeout_ms <= 10_000
    assert k.assignor == "range"  # measured: cooperative-sticky's second round made a takeover 4 s longer


def test_a_client_setting_of_the_wrong_type_is_refused_at_start() -> None:
    with pytest.raises(ConfigError, match=r"kafka.client.linger_ms = 'soon' is not a number"):
        load_config(overrides={"kafka.client": '{"linger_ms": "soon"}'})
    with pytest.raises(ConfigError, match=r"kafka.client.request_timeout_ms = -1 is out of range"):
        load_config(overrides={"kafka.client": '{"request_timeout_ms": -1}'})
    with pytest.raises(ConfigError, match=r"kafka.client.check_crcs = 'yes' is not a boolean"):
        load_config(overrides={"kafka.client": '{"check_crcs": "yes"}'})
    load_config(overrides={"kafka.client": '{"linger_ms": 10, "acks": "all", "compression_type": "gzip"}'})


def test_weakening_settings_are_named() -> None:
    assert weakening_settings(load_config()) == []
    found = weakening_settings(load_config(overrides={"metrics.host": "0.0.0.0", "output.file_mode": "0666",
                                                      "metrics.allowed_hosts": "*"}))
    assert len(found) == 3
    assert "metrics.host = '0.0.0.0'" in found[0] and "allowed_hosts = '*'" in found[1]
    assert "output.file_mode = '0666' lets every user write" in found[2]
    assert weakening_settings(load_config(overrides={"metrics.host": "0.0.0.0", "metrics.enabled": False})) == []
