"""Failover: a killed replica's partitions are taken over, and while they are not, every member shows them orphaned.

The group's lag of every partition (``streamembed_kafka_group_lag``) and who owns it
(``streamembed_kafka_partition_owned``) are what the orphaned-partition alert reads (deploy/prometheus/alerts.yml,
promtool-tested in deploy/prometheus/tests/failover.yml). Issue 35: after a kill -9 the killed replica's partitions
had no consumer for 69 s and the lag gauge read 0 for them (each replica reported only its own partitions). The
takeover time itself is measured by ``python -m tests.soak --mode failover`` (docs/kafka.md), not asserted here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamembed.kafka.group_lag import GroupLagWatcher, owned_lag
from streamembed.ops.metrics import Metrics


def test_an_owned_partitions_group_lag_counts_what_was_handed_but_not_committed() -> None:
    assert owned_lag(5, handed=120, committed=100) == 25
    assert owned_lag(5, handed=None, committed=100) == 5
    assert owned_lag(0, handed=100, committed=120) == 0  # (a commit never runs ahead of the hand-out)


@pytest.mark.broker
def test_the_watcher_measures_the_group_lag_of_partitions_nobody_here_owns(broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

    topic = topic_factory(partitions=3)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(30):  # one record per request: Tansu's end offsets are then exact
        producer.send(topic, b"x", partition=i % 3).get(10)
    producer.close()
    group = f"g-{topic}"
    committer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    committer.commit({TopicPartition(topic, 1): OffsetAndMetadata(4, "", -1)})
    committer.close()
    metrics = Metrics()
    w = GroupLagWatcher({"bootstrap_servers": broker.bootstrap, "group_id": group}, topic, lambda: {0}, metrics)
    consumer = KafkaConsumer(**w.settings)
    try:
        lags = w.measure(consumer)
    finally:
        consumer.close()
    assert lags == {1: 6, 2: 10}  # partition 1: 10 - 4 committed; partition 2: nothing committed, from the start
    gauge: Any = metrics.kafka_group_lag
    assert gauge.labels(topic=topic, partition="2")._value.get() == 10
    assert metrics.kafka_partition_owned.labels(topic=topic, partition="1")._value.get() == 0


@pytest.mark.kafka_python_only("a failover (40 s); groups on both libraries: test_daemon_e2e")
@pytest.mark.broker
@pytest.mark.e2e
@pytest.mark.slow
def test_a_killed_replicas_partitions_show_orphaned_then_taken_over(tmp_path: Path, broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    from tests.soak_failover import failover_soak

    topic = topic_factory(partitions=2)
    broker.create_topic(f"{topic}.dlq")
    res = failover_soak(tmp_path, broker.bootstrap, topic, runs=1)
    assert not res.problems, res.problems
    assert len(res.details["takeovers"]) == 1
    assert res.rows[0]["lost"] == 0 and res.rows[0]["crashes"] == 0
