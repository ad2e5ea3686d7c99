"""The crash soak in Kafka mode (tests/soak.py), bounded: random kill -9s of a group member while good and
poison messages arrive on two partitions; nothing lost, duplicates counted, committed offsets never move back."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ..soak import CATEGORIES, _soak_kinds, kafka_soak, table

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.kafka_python_only("a soak (40 s)")
def test_kafka_soak_random_kill_9_with_good_and_poison_messages(broker, topic_factory, tmp_path: Path) -> None:
    topic, out = topic_factory(partitions=2, prefix="soak"), topic_factory(prefix="soak-out")
    broker.create_topic(f"{topic}.dlq")
    seed = random.randrange(1 << 30)
    res = kafka_soak(tmp_path / "soak", broker.bootstrap, topic, out, seconds=25.0, seed=seed)
    report = f"seed {seed} (python -m tests.soak --mode kafka --seed {seed})\n{table(res.rows)}\n{res.details}"
    print(report)
    assert res.problems == [], report
    assert sum(r["lost"] for r in res.rows) == 0, report
    assert res.details["kills"] >= 3, report
    assert res.details["poison_kinds"] == len(_soak_kinds("kafka")), report
    assert res.details["checkpoint_samples"] >= 20, report


@pytest.mark.kafka_python_only("a soak (40 s)")
def test_kafka_soak_random_kill_9_with_transport_faults(broker, topic_factory, tmp_path: Path) -> None:
    """Compressed batches of every codec, unreadable batches and oversize messages, outputs and dead letters,
    with random kill -9s: nothing lost, no crash of the daemon's own, no Parquet row written twice."""
    topic, out = topic_factory(partitions=2, prefix="soakf"), topic_factory(prefix="soakf-out")
    broker.create_topic(f"{topic}.dlq")
    seed = random.randrange(1 << 30)
    res = kafka_soak(tmp_path / "soak", broker.bootstrap, topic, out, seconds=15.0, seed=seed, faults=True)
    report = f"seed {seed} (python -m tests.soak --mode kafka-faults --seed {seed})\n{table(res.rows)}\n{res.details}"
    print(report)
    assert res.problems == [], report
    assert sum(r["lost"] for r in res.rows) == 0 and sum(r["crashes"] for r in res.rows) == 0, report
    assert res.details["parquet_duplicates"] == 0, report
    for category in ("compressed-msg", "unreadable-msg", "oversize-msg"):
        assert any(r["fault"].endswith(CATEGORIES[category]) and r["records in"] > 0 for r in res.rows), report
    assert res.details["kills"] >= 2, report
