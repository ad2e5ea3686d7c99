"""The poison corpus (tests/poison.py) as Kafka messages through the real daemon, then a restart of the group member.

One partition, every kind followed by a good message: the good message must
come out (a poison that stalls the partition would hold it back), every
poison record must reach the dead-letter topic with its reason and
coordinates, /healthz must answer 200 throughout, SIGTERM must give exit 0,
and the restarted member must resume after the committed offsets without
re-emitting anything.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from kafka import KafkaProducer

from .. import poison
from ..e2e.daemon import Daemon, wait_for
from ..e2e.test_poison import CORPUS_ENV, settle
from ..poison import build_corpus, corpus_messages, expected
from ..stream.helpers import fitted_model
from .test_daemon_e2e import _env, output_rows, read_topic

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.slow]


def _parquet_ids(root: Path) -> Counter[str]:
    ids: Counter[str] = Counter()
    for f in sorted((root / "embeddings").glob("part-*.parquet")):
        ids.update(pq.read_table(f, columns=["id"]).column("id").to_pylist())
    return ids


def _dlq_keys(records: list[Any], where: dict[int, tuple[str, int]]) -> Counter[tuple[Any, ...]]:
    keys: Counter[tuple[Any, ...]] = Counter()
    for r in records:
        h = {k: v.decode("utf-8", "replace") for k, v in r.headers}
        offset = int(h.get("streamembed-source-offset", -1))
        row = h.get("streamembed-source-row")
        keys[(*where.get(offset, (f"?offset {offset}", -9)), None if row is None else int(row),
              h["streamembed-error-reason"])] += 1
    return keys


@pytest.mark.kafka_python_only(
    "the codec's corpus through the daemon (25 s); dead letters on both libraries: test_daemon_e2e, test_oversize")
def test_poison_corpus_in_kafka_mode_then_a_restart(broker, topic_factory, tmp_path: Path) -> None:
    kinds = [k for k in build_corpus() if k.messages is not None]
    assert len(kinds) >= 70
    topic, out = topic_factory(partitions=1, prefix="poison"), topic_factory(prefix="poison-out")
    dlq = f"{topic}.dlq"
    broker.create_topic(dlq)
    model = tmp_path / "model.npz"
    fitted_model().save(model)
    where: dict[int, tuple[str, int]] = {}
    after: dict[str, str] = {}
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, max_request_size=32 << 20, linger_ms=2)
    try:
        for name, unit, value, headers in corpus_messages(kinds):
            md = p.send(topic, key=name.encode(), value=value, headers=headers).get(30)
            assert md.partition == 0
            where[md.offset] = (name, unit)
            if unit == -1:
                after[name] = f"{name}.after"
    finally:
        p.close(10)
    want_ids, want_dead = expected(kinds, "kafka")
    exact = {k.name for k in kinds}
    want_exact_dead = {x for x in want_dead if x[0] in exact}
    root = tmp_path / "out"
    env = _env(broker, root, model, f"g-{topic}", topic, out, **CORPUS_ENV)
    health: list[int] = []
    d = Daemon(tmp_path, env)
    try:
        d.wait_port()

        def probe() -> None:
            try:
                health.append(d.get("/healthz")[0])
            except OSError:
                health.append(-1)

        settle(lambda: d.dead() or set(after.values()) <= set(_parquet_ids(root)), 90, also=probe)
        assert not d.dead(), d.log()
        dlq_records = read_topic(broker.bootstrap, dlq, lambda rs: want_exact_dead <= set(_dlq_keys(rs, where)),
                                 timeout=30)
        probe()
        out_ids = _parquet_ids(root)
        got_dead = _dlq_keys(dlq_records, where)
        assert {k: i for k, i in after.items() if i not in out_ids} == {}
        assert {x for x in got_dead if x[0] in exact or str(x[0]).startswith("?")} == want_exact_dead
        assert [x for x, c in got_dead.items() if c > 1] == []
        assert [i for i, c in out_ids.items() if c > 1] == []
        assert set(out_ids) == want_ids
        # the output topic holds what the Parquet files hold
        topic_rows = output_rows(read_topic(broker.bootstrap, out, lambda rs: len(output_rows(rs)) >= sum(
            out_ids.values()), timeout=30))
        assert Counter(r["id"] for r in topic_rows) == out_ids
        # the dead letters say why, and carry the message
        by_key = {next(iter(_dlq_keys([r], where))): r for r in dlq_records}
        deep = by_key[("msg_json_deep_list", 0, None, "undecodable")]
        assert b"nested too deeply" in dict(deep.headers)["streamembed-error-detail"]
        assert deep.value == b"[" * poison.DEEP + b"]" * poison.DEEP  # the message itself, to replay
        short = by_key[("json_vector_short", 1, 0, "wrong_length")]
        assert dict(short.headers)["streamembed-id"] == b"json_vector_short.0.1"
        assert d.metric("streamembed_kafka_messages_out_total", f'topic="{dlq}"') == len(dlq_records)
        assert d.metric("streamembed_quarantined_batches_total") == 0
        wait_for(lambda: d.metric("streamembed_kafka_consumer_lag", f'partition="0",topic="{topic}"') == 0, 20,
                 "lag 0", d)
        assert d.terminate() == 0
    finally:
        d.close()
    assert health and set(health) == {200}, Counter(health)
    assert "the loop failed" not in d.log()

    # the restarted member resumes after the committed offsets: one new message in, nothing emitted twice
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        p.send(topic, value=poison.jsonl_line({"id": "after-restart", "dissimilarities": poison.good_rows(1, 999)[
            0].tolist()}), headers=poison.JSON_HEADERS).get(30)
    finally:
        p.close(10)
    d2 = Daemon(tmp_path, env)
    try:
        d2.wait_port()
        wait_for(lambda: "after-restart" in _parquet_ids(root), 60, "the new message", d2)
        assert d2.metric("streamembed_kafka_messages_in_total") == 1
        assert d2.metric("streamembed_dead_letters_total") == 0
        assert d2.get("/healthz")[0] == 200
        assert d2.terminate() == 0
    finally:
        d2.close()
    assert _parquet_ids(root) == out_ids + Counter(["after-restart"])
    assert len(read_topic(broker.bootstrap, dlq, lambda rs: False, timeout=3)) == len(dlq_records)
