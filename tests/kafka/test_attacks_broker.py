"""Issue 35's attacks on the model topic (#1, #2, #3), against the real test broker: each is a bounded scenario of
``tests/attacks.py`` that failed on the code before this round and must find nothing now."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.attacks import BROKER_ATTACKS

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.kafka_python_only("attacks (25 s in all); the model topic on both libraries: test_model_topic*")
@pytest.mark.parametrize("number", sorted(BROKER_ATTACKS))
def test_the_attack_on_the_model_topic_does_no_harm(number: int, tmp_path: Path, broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    def fresh_topic() -> str:
        return str(topic_factory(config={"cleanup.policy": "compact"}))

    res = BROKER_ATTACKS[number](tmp_path, broker.bootstrap, fresh_topic)
    assert not res.problems, "\n".join(res.problems)
    assert res.lost == 0 and res.crashes == 0


@pytest.mark.kafka_python_only("a broker restart (20 s)")
def test_a_broker_restart_under_the_output_producer_costs_no_exit(tmp_path: Path) -> None:
    """Attack #5: a broker of its own (restarted on the same port: Tansu's memory storage comes back empty)."""
    import socket

    from tests.attacks import attack_5
    from tools.broker import TansuBroker, TansuNotFoundError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    try:
        b = TansuBroker(port=port)
    except TansuNotFoundError as exc:
        pytest.skip(str(exc))
    b.start()
    try:
        res = attack_5(tmp_path, port, b.start, b.stop, lambda t: b.create_topic(t))
    finally:
        b.stop()
    assert not res.problems, "\n".join(res.problems)
    assert res.lost == 0 and res.crashes == 0


@pytest.mark.kafka_python_only("timing-heavy: the stop deadline (13 s)")
def test_a_stop_with_a_slow_output_exits_0_within_the_stop_time_and_loses_nothing(tmp_path: Path) -> None:
    """Attack #8: a broker of its own behind a proxy that passes 256 KB/s."""
    from tests.attacks import attack_8
    from tools.broker import TansuNotFoundError, find_tansu

    try:
        find_tansu()
    except TansuNotFoundError as exc:
        pytest.skip(str(exc))
    res = attack_8(tmp_path)
    assert not res.problems, "\n".join(res.problems)
    assert res.lost == 0 and res.crashes == 0
