"""The real CLI as a Kafka consumer-group member, against the Tansu test broker.

Every wait is bounded; volumes are small (Tansu's memory storage never frees
data). Each test uses its own topics and a fresh group id, and replicas leave
the group one at a time (two members leaving together can wedge a Tansu 0.6
group: see tools/broker.py).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from scipy.spatial.distance import cdist

from streamembed.kafka.codec import ARROW_CONTENT_TYPE, arrow_message, json_message
from streamembed.stream.output import y_matrix

from ..e2e.daemon import Daemon, wait_for
from ..stream.helpers import dissimilarities, fitted_model, input_table, objects

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


# --------------------------------------------------------------------------- helpers


def _model(path: Path, version: int) -> Path:
    est = fitted_model()
    est.model_ = est.model_.with_version(version)
    est.save(path)
    return path


def _env(broker: Any, root: Path, model: Path | None, group: str, topic: str, out: str, **more: str) -> dict[str, str]:
    env = {
        "STREAMEMBED_SOURCE__KIND": "kafka",
        "STREAMEMBED_KAFKA__BOOTSTRAP_SERVERS": broker.bootstrap,
        "STREAMEMBED_KAFKA__INPUT_TOPIC": topic,
        "STREAMEMBED_KAFKA__GROUP_ID": group,
        "STREAMEMBED_KAFKA__SESSION_TIMEOUT_MS": "10000",  # Tansu joins take ~half of it
        "STREAMEMBED_KAFKA__HEARTBEAT_INTERVAL_MS": "3000",
        "STREAMEMBED_KAFKA__STARTUP_TIMEOUT_SECONDS": "20",
        "STREAMEMBED_OUTPUT__KAFKA_TOPIC": out,
        "STREAMEMBED_OUTPUT__ROOT": str(root),
        "STREAMEMBED_OUTPUT__ROLL_SECONDS": "0.5",
        "STREAMEMBED_DRIFT__ENABLED": "false",  # no refit may change the model version under the test
        "STREAMEMBED_LOGGING__FORMAT": "json",
    }
    if model is not None:
        env["STREAMEMBED_MODEL__PATH"] = str(model)
    env.update(more)
    return env


def read_topic(bootstrap: str, topic: str, until: Callable[[list[Any]], bool], timeout: float = 30.0) -> list[Any]:
    """Every record of ``topic`` from the beginning, polled until ``until(records)`` or ``timeout``."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, max_partition_fetch_bytes=16 << 20)
    try:
        parts = sorted(c.partitions_for_topic(topic) or {0})
        tps = [TopicPartition(topic, p) for p in parts]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        out: list[Any] = []
        end = time.monotonic() + timeout
        while time.monotonic() < end and not until(out):
            for recs in c.poll(timeout_ms=200).values():
                out.extend(recs)
        return out
    finally:
        c.close()


def output_rows(records: list[Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for r in records:
        assert dict(r.headers)["content-type"] == ARROW_CONTENT_TYPE.encode()
        t = pa.ipc.open_stream(r.value).read_all()
        assert r.key == t.column("id")[0].as_py().encode()
        rows.extend(t.select(["id", "model_version", "method"]).to_pylist())
    return rows


def _ids_in(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(r["id"] for r in rows)


def _count_rows(n: int) -> Callable[[list[Any]], bool]:
    return lambda recs: len(output_rows(recs)) >= n


class Producer:
    """kafka-python producer that remembers where each message landed."""

    def __init__(self, bootstrap: str) -> None:
        self.p = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=8 << 20, linger_ms=2)

    def send(self, topic: str, value: bytes, headers: list[tuple[str, bytes]] | None = None,
             partition: int | None = None) -> tuple[int, int]:
        md = self.p.send(topic, value=value, headers=headers or [], partition=partition).get(10)
        return md.partition, md.offset

    def close(self) -> None:
        self.p.close(10)


def _rows(ids: list[str], seed: int) -> pa.Table:
    return input_table(ids, dissimilarities(objects(len(ids), seed=seed)))


# --------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_mixed_messages_end_to_end_with_dead_letters_and_restart(broker, topic_factory, tmp_path: Path) -> None:
    """Arrow and JSON, single and block messages, from kafka-python and a foreign client (confluent-kafka);
    poison messages in the DLQ with reasons and coordinates; SIGTERM + restart resumes from the commits."""
    try:
        import confluent_kafka
    except ImportError:  # the test extra installs it; CI must have it
        if os.environ.get("CI"):
            pytest.fail("CI must install confluent-kafka (the test extra)", pytrace=False)
        confluent_kafka = None
    topic, out = topic_factory(partitions=2, prefix="in"), topic_factory(prefix="out")
    dlq = f"{topic}.dlq"
    broker.create_topic(dlq)
    model = _model(tmp_path / "model.npz", version=3)
    good: list[str] = []
    where: dict[str, tuple[int, int]] = {}  # poison message -> (partition, offset)
    p = Producer(broker.bootstrap)
    try:
        for i in range(10):  # single-object Arrow messages
            p.send(topic, *arrow_message(_rows([f"s{i}"], seed=i)), partition=i % 2)
            good.append(f"s{i}")
        for m in range(4):  # batch messages; one negative dissimilarity in the first
            ids = [f"b{m}-{i}" for i in range(150)]
            table = _rows(ids, seed=20 + m)
            if m == 0:
                A = dissimilarities(objects(150, seed=20))
                A[7, 2] = -1.0
                table = input_table(ids, A)
            where[f"batch{m}"] = p.send(topic, *arrow_message(table), partition=m % 2)
            good += [x for x in ids if x != "b0-7"]
        Z = objects(4, seed=40)  # an Arrow block
        blk = input_table([f"blk{i}" for i in range(4)], dissimilarities(Z), cross=cdist(Z, Z))
        p.send(topic, *arrow_message(blk), partition=0)
        good += [f"blk{i}" for i in range(4)]
        for i in range(10):  # single JSON objects
            a = dissimilarities(objects(1, seed=50 + i))[0].astype(float).tolist()
            p.send(topic, *json_message({"id": f"j{i}", "dissimilarities": a, "event_time": "2024-05-01T12:00:00Z"}))
            good.append(f"j{i}")
        L = dissimilarities(objects(5, seed=60)).astype(float)  # a JSON list with one short row
        docs = [{"id": f"l{i}", "dissimilarities": L[i].tolist()} for i in range(5)]
        docs.insert(2, {"id": "l-bad", "dissimilarities": [1.0, 2.0]})
        where["list"] = p.send(topic, *json_message(docs), partition=1)
        good += [f"l{i}" for i in range(5)]
        Zb = objects(3, seed=70)  # a JSON block
        jb = {"objects": [{"id": f"jb{i}", "dissimilarities": a.tolist()}
                          for i, a in enumerate(dissimilarities(Zb).astype(float))], "cross": cdist(Zb, Zb).tolist()}
        p.send(topic, *json_message(jb), partition=0)
        good += [f"jb{i}" for i in range(3)]
        # poison
        value, headers = arrow_message(_rows(["t0", "t1"], seed=80))
        where["truncated"] = p.send(topic, value[:-30], headers, partition=0)
        where["notjson"] = p.send(topic, b"{id: oops", [("content-type", b"application/json")], partition=1)
        where["schema"] = p.send(topic, *arrow_message(_rows(["v0"], seed=81), schema_version=2), partition=0)
        where["landmarks"] = p.send(topic, *arrow_message(_rows(["lv0", "lv1"], seed=82), landmark_version=99),
                                    partition=1)
    finally:
        p.close()
    # a client no one here wrote: librdkafka through confluent-kafka, JSON with and without content-type
    foreign = None if confluent_kafka is None else confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "client.id": "foreign"})
    p = Producer(broker.bootstrap)  # stands in only where confluent-kafka is not installed (never in CI)
    for i in range(12):
        a = dissimilarities(objects(1, seed=90 + i))[0].astype(float).tolist()
        value = json.dumps({"id": f"c{i}", "dissimilarities": a})
        headers = [("content-type", b"application/json")] if i < 10 else None
        if foreign is not None:
            foreign.produce(topic, key=f"c{i}", value=value, headers=headers)
        else:
            p.send(topic, value.encode(), headers)
        good.append(f"c{i}")
    p.close()
    if foreign is not None:
        assert foreign.flush(15) == 0
        del foreign

    group = f"g-{topic}"
    d = Daemon(tmp_path, _env(broker, tmp_path / "out", model, group, topic, out))
    try:
        d.wait_port()
        recs = read_topic(broker.bootstrap, out, _count_rows(len(good)), timeout=45)
        rows = output_rows(recs)
        assert _ids_in(rows) == Counter(good)
        assert {r["model_version"] for r in rows} == {3}
        assert sorted(r["id"] for r in rows if r["method"] == "block") == sorted(
            [f"blk{i}" for i in range(4)] + [f"jb{i}" for i in range(3)])
        dead = read_topic(broker.bootstrap, dlq, lambda rs: len(rs) >= 7, timeout=20)
        assert d.get("/healthz")[0] == 200
        wait_for(lambda: d.metric("streamembed_kafka_commits_total") > 0, 20, "an offset commit", d)
        # Parquet at the same time as the topic
        wait_for(lambda: len(_parquet_ids(tmp_path / "out")) == len(good), 20, "Parquet output", d)
        assert Counter(_parquet_ids(tmp_path / "out")) == Counter(good)
        assert d.metric("streamembed_kafka_assigned_partitions") == 2
        assert d.metric("streamembed_kafka_messages_in_total") == 10 + 4 + 1 + 10 + 1 + 1 + 4 + 12
        assert d.metric("streamembed_kafka_messages_out_total", f'topic="{dlq}"') == 7
        for part in (0, 1):
            wait_for(lambda part=part: d.metric("streamembed_kafka_consumer_lag", f'partition="{part}",topic="{topic}"')
                     == 0
                     and f'partition="{part}"' in d.get("/metrics")[1], 10, "lag 0", d)
        assert d.terminate() == 0
    finally:
        d.close()

    got = {}
    for r in dead:
        h = {k: v.decode() for k, v in r.headers}
        got[(h["streamembed-error-reason"], int(h["streamembed-source-partition"]),
             int(h["streamembed-source-offset"]), h.get("streamembed-source-row"))] = (r.value, h)
    expect = {
        ("negative", *where["batch0"], "7"), ("wrong_length", *where["list"], "2"),
        ("undecodable", *where["truncated"], None), ("undecodable", *where["notjson"], None),
        ("undecodable", *where["schema"], None),
        ("unknown_landmark_version", *where["landmarks"], "0"), ("unknown_landmark_version", *where["landmarks"], "1"),
    }
    assert set(got) == expect
    assert all(h["streamembed-source-topic"] == topic for _, h in got.values())
    value, h = got[("undecodable", *where["notjson"], None)]
    assert value == b"{id: oops" and h["content-type"] == "application/json" and "not JSON" in h[
        "streamembed-error-detail"]
    value, h = got[("negative", *where["batch0"], "7")]
    assert json.loads(value)["id"] == "b0-7" and h["streamembed-id"] == "b0-7" and h["streamembed-model-version"] == "3"

    # a second wave while stopped; the restarted daemon resumes from the committed offsets
    p = Producer(broker.bootstrap)
    wave = [f"w{m}-{i}" for m in range(4) for i in range(20)]
    try:
        for m in range(4):
            p.send(topic, *arrow_message(_rows(wave[m * 20:(m + 1) * 20], seed=100 + m)), partition=m % 2)
    finally:
        p.close()
    d2 = Daemon(tmp_path, _env(broker, tmp_path / "out", model, group, topic, out))
    try:
        d2.wait_port()
        recs = read_topic(broker.bootstrap, out, _count_rows(len(good) + len(wave)), timeout=40)
        assert _ids_in(output_rows(recs)) == Counter(good + wave)  # nothing lost, nothing processed twice
        wait_for(lambda: d2.metric("streamembed_kafka_commits_total") > 0, 20, "a commit", d2)
        assert d2.metric("streamembed_kafka_messages_in_total") == 4
        assert d2.terminate() == 0
    finally:
        d2.close()


def _parquet_ids(root: Path) -> list[str]:
    ids: list[str] = []
    for f in sorted((root / "embeddings").glob("part-*.parquet")):
        ids += pq.read_table(f, columns=["id"]).column("id").to_pylist()
    return ids


@pytest.mark.slow
def test_replicas_share_partitions_survive_kill_9_and_share_the_model(broker, topic_factory, tmp_path: Path) -> None:
    """Two daemons in one group split a 4-partition topic; replica B, started later with an older model,
    takes A's from the model topic; B is killed -9 mid-stream and A takes over: every id comes out."""
    topic, out = topic_factory(partitions=4, prefix="in"), topic_factory(partitions=2, prefix="out")
    models = topic_factory(prefix="models", config={"cleanup.policy": "compact"})
    model_a, model_b = _model(tmp_path / "a.npz", version=5), _model(tmp_path / "b.npz", version=1)
    group = f"g-{topic}"
    sent: list[str] = []
    p = Producer(broker.bootstrap)
    stop_producing = threading.Event()

    def produce(first: int, count: int, pause: float) -> None:
        for m in range(first, first + count):
            if stop_producing.is_set():
                return
            ids = [f"m{m}-{i}" for i in range(20)]
            p.send(topic, *arrow_message(_rows(ids, seed=m)), partition=m % 4)
            sent.extend(ids)
            time.sleep(pause)

    produce(0, 40, 0.0)
    more = {"STREAMEMBED_KAFKA__MODEL_TOPIC": models, "STREAMEMBED_SOURCE__BATCH_ROWS": "40"}
    a = Daemon(tmp_path, _env(broker, tmp_path / "out-a", model_a, group, topic, out, **more))
    b: Daemon | None = None
    feeder: threading.Thread | None = None
    try:
        a.wait_port()
        wait_for(lambda: a.metric("streamembed_kafka_assigned_partitions") == 4
                 and a.metric("streamembed_records_in_total") >= 800, 30, "A reading all partitions", a)
        b = Daemon(tmp_path, _env(broker, tmp_path / "out-b", model_b, group, topic, out, **more))
        b.wait_port()
        # B took the newer model from the topic; the two split the partitions
        wait_for(lambda: b.metric("streamembed_model_version") > 0, 20, "B's model", b)
        assert b.metric("streamembed_model_version") == 5
        wait_for(lambda: a.metric("streamembed_kafka_assigned_partitions") == 2
                 and b.metric("streamembed_kafka_assigned_partitions") == 2, 40, "the partitions split", b)
        feeder = threading.Thread(target=produce, args=(40, 120, 0.05), daemon=True)
        feeder.start()
        wait_for(lambda: b.metric("streamembed_records_in_total") >= 200, 20, "B embedding", b)
        b.kill9()  # mid-stream: its uncommitted batches are re-read by A after the session times out
        feeder.join(timeout=30)
        assert not feeder.is_alive()
        wait_for(lambda: a.metric("streamembed_kafka_assigned_partitions") == 4, 40, "A taking over", a)
        recs = read_topic(broker.bootstrap, out, lambda rs: set(_ids_in(output_rows(rs))) >= set(sent), timeout=40)
        rows = output_rows(recs)
        assert set(_ids_in(rows)) >= set(sent) and len(sent) == 160 * 20
        assert {r["model_version"] for r in rows} == {5}
        assert a.metric("streamembed_kafka_rebalances_total") >= 3  # join, B joins, B gone
        assert a.get("/healthz")[0] == 200
        assert a.terminate() == 0
    finally:
        stop_producing.set()
        p.close()
        a.close()
        if b is not None:
            b.close()
    assert "the model topic has a newer model than model.path" in b.log()


@pytest.mark.kafka_python_only("block placement, not the client (13 s with confluent)")
@pytest.mark.slow
def test_block_messages_of_a_poll_are_placed_together_and_a_bad_block_alone_is_dead(
        broker, topic_factory, tmp_path: Path) -> None:
    """40 block messages (20 Arrow, then 20 JSON, k = 2..8) and one asymmetric block between them: every good block is
    placed by block RR, exactly as on its own; the bad block's rows are dead letters with their coordinates;
    the blocks went to the solver in far fewer batches than messages."""
    import numpy as np

    from streamembed import LandmarkMDS

    topic, out = topic_factory(prefix="blk"), topic_factory(prefix="blkout")
    dlq = f"{topic}.dlq"
    broker.create_topic(dlq)
    model = _model(tmp_path / "model.npz", version=1)
    est = LandmarkMDS.load(model)
    want: dict[str, np.ndarray] = {}
    p = Producer(broker.bootstrap)
    try:
        for b in range(41):
            k = 2 + b % 7
            Z = objects(k, seed=300 + b)
            A, C = dissimilarities(Z), cdist(Z, Z)
            ids = [f"k{b}-{i}" for i in range(k)]
            if b == 20:
                C[0, 1] += 3.0  # not symmetric: this block alone is refused
                bad_at = p.send(topic, *arrow_message(input_table(ids, A, cross=C)))
                continue
            if b < 20:  # consecutive messages of one schema share a batch: Arrow first, then JSON
                p.send(topic, *arrow_message(input_table(ids, A, cross=C)))
            else:
                p.send(topic, *json_message({"objects": [{"id": x, "dissimilarities": a.astype(float).tolist()}
                                                         for x, a in zip(ids, A, strict=True)], "cross": C.tolist()}))
            want.update(zip(ids, est.transform_block(A.astype(np.float64), C), strict=True))
    finally:
        p.close()
    d = Daemon(tmp_path, _env(broker, tmp_path / "out", model, f"g-{topic}", topic, out,
                              STREAMEMBED_SOURCE__BATCH_ROWS="64"))
    try:
        d.wait_port()
        recs = read_topic(broker.bootstrap, out, _count_rows(len(want)), timeout=45)
        got: dict[str, np.ndarray] = {}
        methods = set()
        for r in recs:
            t = pa.ipc.open_stream(r.value).read_all()
            got.update(zip(t.column("id").to_pylist(), y_matrix(t), strict=True))
            methods |= set(t.column("method").to_pylist())
        assert set(got) == set(want) and methods == {"block"}
        for x, y in want.items():
            np.testing.assert_allclose(got[x], y, rtol=1e-6, atol=1e-6)
        dead = read_topic(broker.bootstrap, dlq, lambda rs: len(rs) >= 8, timeout=20)
        heads = [{k: v.decode() for k, v in r.headers} for r in dead]
        assert sorted(h["streamembed-id"] for h in heads) == [f"k20-{i}" for i in range(8)]  # k = 2 + 20 % 7
        assert {h["streamembed-error-reason"] for h in heads} == {"bad_block"}
        assert {int(h["streamembed-source-offset"]) for h in heads} == {bad_at[1]}
        batches = d.metric("streamembed_batch_processing_seconds_count")
        assert 0 < batches < 41 / 3, batches  # several block messages per solver call
        assert d.terminate() == 0
    finally:
        d.close()
