"""Against the Tansu test broker: a group join costs no CPU, and a broker away is a readiness
problem, not a liveness one.

* While the JoinGroup is pending (Tansu holds it ~half the session timeout), kafka-python 3's poll spun ~800
  coordinator rounds a second: a quarter to a third of a core for the whole join.
* A broker paused longer than ``metrics.wedged_after_seconds`` turned /healthz to 503 (Kubernetes restarts
  a pod that cannot start either) while /readyz stayed 200: the loop was blocked in an offset commit.
"""

from __future__ import annotations

import os
import resource
import signal
import threading
import time
from pathlib import Path

import pytest
from kafka import KafkaProducer

from streamembed.kafka.client import consumer_settings
from streamembed.kafka.codec import arrow_message
from streamembed.kafka.source import KafkaSource
from streamembed.config.schema import KafkaConfig
from streamembed.stream.read_ahead import ReadAhead
from tools.broker import TansuBroker, TansuNotFoundError, find_tansu

from ..e2e.daemon import Daemon, wait_for
from ..stream.helpers import dissimilarities, fitted_model, input_table, objects, read_ids
import contextlib

pytestmark = [pytest.mark.broker]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@pytest.mark.kafka_python_only("timing-heavy: a CPU-time measurement over a held join")
@pytest.mark.slow
def test_waiting_on_a_group_join_costs_no_cpu(broker, topic_factory) -> None:
    topic = topic_factory(partitions=2)
    k = KafkaConfig(bootstrap_servers=broker.bootstrap, input_topic=topic, group_id=f"join-{topic}",
                    session_timeout_ms=10_000, heartbeat_interval_ms=3000)
    src = ReadAhead(KafkaSource(consumer_settings(k), topic, poll_timeout_ms=200), depth=2)
    src.restore(None)
    try:
        c0, t0 = _cpu(), time.monotonic()
        while time.monotonic() - t0 < 3.0:  # Tansu holds this join ~5 s
            src.poll()
        joining = (_cpu() - c0) / (time.monotonic() - t0)
        assert not src.inner.assigned_partitions  # it was still joining all along
        end = time.monotonic() + 30
        while not src.inner.assigned_partitions and time.monotonic() < end:
            src.poll()
        assert src.inner.assigned_partitions == {0, 1}  # and the join completes
    finally:
        src.close()
    assert joining < 0.1, f"{joining:.3f} of a core while the join was pending"  # a spinning wait took 0.22-0.30


@pytest.mark.kafka_python_only("timing-heavy: a broker away for a minute")
@pytest.mark.slow
@pytest.mark.e2e
def test_a_broker_away_longer_than_wedged_after_is_unready_not_dead(tmp_path: Path) -> None:
    try:
        find_tansu()
    except TansuNotFoundError as exc:
        pytest.skip(str(exc))
    wedged_after, outage = 16, 34
    model = tmp_path / "model.npz"
    fitted_model().save(model)
    with TansuBroker() as b:  # its own broker: it is paused
        b.create_topic("in", partitions=1)
        env = {"STREAMEMBED_SOURCE__KIND": "kafka", "STREAMEMBED_MODEL__PATH": str(model),
               "STREAMEMBED_KAFKA__BOOTSTRAP_SERVERS": b.bootstrap, "STREAMEMBED_KAFKA__INPUT_TOPIC": "in",
               "STREAMEMBED_KAFKA__GROUP_ID": "live", "STREAMEMBED_KAFKA__SESSION_TIMEOUT_MS": "10000",
               "STREAMEMBED_KAFKA__HEARTBEAT_INTERVAL_MS": "3000", "STREAMEMBED_OUTPUT__ROOT": str(tmp_path / "out"),
               "STREAMEMBED_OUTPUT__ROLL_SECONDS": "0.5", "STREAMEMBED_DRIFT__ENABLED": "false",
               "STREAMEMBED_METRICS__WEDGED_AFTER_SECONDS": str(wedged_after), "STREAMEMBED_LOGGING__FORMAT": "json"}
        d = Daemon(tmp_path, env)
        producer = KafkaProducer(bootstrap_servers=b.bootstrap)
        stop = threading.Event()
        sent: list[str] = []

        def feed() -> None:
            i = 0
            while not stop.is_set():
                ids = [f"m{i}-{j}" for j in range(5)]
                try:
                    producer.send("in", arrow_message(input_table(ids, dissimilarities(objects(5, seed=i))))[0])
                    sent.extend(ids)
                except Exception:  # the broker is paused: those are not counted as sent
                    pass
                i += 1
                stop.wait(0.2)

        feeder = threading.Thread(target=feed, daemon=True)
        try:
            d.wait_port()
            wait_for(lambda: d.get("/readyz")[0] == 200, 60, "the daemon to be ready", d)
            feeder.start()
            wait_for(lambda: d.metric("streamembed_records_embedded_total", 'method="projection"') > 0, 30,
                     "the first embedded rows", d)
            os.kill(b._proc.pid, signal.SIGSTOP)
            health, ready, reasons = [], [], set()
            t0 = time.monotonic()
            while time.monotonic() - t0 < outage:
                health.append(d.get("/healthz")[0])
                code, body = d.get("/readyz")
                ready.append(code)
                if code == 503:
                    reasons.add(body)
                time.sleep(1.0)
            os.kill(b._proc.pid, signal.SIGCONT)
            assert set(health) == {200}, health  # alive all along, more than twice wedged_after
            assert 503 in ready and any('"broker"' in r for r in reasons), (ready, reasons)
            wait_for(lambda: d.get("/readyz")[0] == 200, 60, "readiness back after the outage", d)
            stop.set()
            feeder.join(10)
            producer.flush(30)
            wait_for(lambda: set(sent) <= set(read_ids(tmp_path / "out" / "embeddings", "*.parquet")), 60,
                     "every id sent to be embedded", d)
            assert d.terminate(60) == 0
        finally:
            stop.set()
            if b.running:
                with contextlib.suppress(OSError):
                    os.kill(b._proc.pid, signal.SIGCONT)
            d.close()
            producer.close(5)
