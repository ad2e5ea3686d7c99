"""Liveness without a broker: waits on the brokers keep /healthz alive and /readyz unready; a pending join rests."""

from __future__ import annotations

import time
import types

from streamembed.ops.health import HealthState
from streamembed.kafka.client import retry
from streamembed.kafka.consumer_health import throttle_join_spin
from streamembed.liveness import WAITS, ExternalWaits


def test_a_wait_with_attempts_is_alive_and_unready() -> None:
    waits = ExternalWaits()
    assert waits.alive(1.0) == (False, None) and waits.problems() == {}
    with waits.waiting("committing offsets") as failed:
        assert waits.alive(1.0) == (True, "committing offsets")
        assert waits.problems() == {}  # a short wait without failures is not a problem
        failed("KafkaTimeoutError: no answer")
        assert "committing offsets" in waits.problems()["broker"] and "no answer" in waits.problems()["broker"]
        time.sleep(0.05)
        assert waits.alive(0.01) == (False, None)  # no attempt for longer than that: a hang stays a hang
    assert waits.alive(10.0) == (False, None) and waits.problems() == {}


def test_the_probes_while_the_loop_waits_on_the_brokers() -> None:
    health = HealthState(wedged_after=0.05)
    health.model_loaded = True
    health.set_state("running")
    time.sleep(0.1)
    assert health.healthy()[0] is False  # wedged: no beat, no wait
    with WAITS.waiting("waiting for the brokers to acknowledge produced messages") as failed:
        failed("not acknowledged within 10 s")
        ok, doc = health.healthy()
        assert ok and doc["status"] == "waiting" and "acknowledge" in doc["waiting_for"]
        ok, doc = health.ready()
        assert not ok and "acknowledge" in doc["problems"]["broker"]
    assert health.ready()[0] is True and health.healthy()[0] is False


def test_retry_reports_each_failed_attempt() -> None:
    from kafka.errors import KafkaTimeoutError

    attempts = []
    seen: list[dict[str, str]] = []

    def flaky() -> str:
        attempts.append(1)
        seen.append(WAITS.problems())
        if len(attempts) < 3:
            raise KafkaTimeoutError("no answer")
        return "done"

    assert retry(flaky, "committing offsets", max_backoff=0.01) == "done"
    assert seen[0] == {} and "2 failed attempts" in seen[2]["broker"]
    assert WAITS.problems() == {}


def test_a_pending_join_rests_between_coordinator_steps() -> None:
    calls: list[float] = []

    class Coordinator:
        def poll(self, timeout_ms: float | None = None) -> bool:
            calls.append(time.monotonic())
            return False  # what kafka-python 3 does at once while a JoinGroup is pending

    consumer = types.SimpleNamespace(_coordinator=Coordinator())
    assert throttle_join_spin(consumer) and not throttle_join_spin(consumer)  # wrapped once
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.2:  # KafkaConsumer.poll(200): steps until its timeout
        consumer._coordinator.poll(timeout_ms=max(0.0, 200 - (time.monotonic() - t0) * 1000))
    assert len(calls) <= 15, len(calls)  # ~10 steps, not thousands
    assert not throttle_join_spin(types.SimpleNamespace())  # a client without a coordinator is left alone
