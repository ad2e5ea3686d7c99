"""Messages too large for the limits, through the real daemon under a supervisor loop (restart on exit 1/3).

The four cases of the report, at a 1 MiB ``max_request_size`` and a 2 MiB
``max_partition_fetch_bytes`` instead of the 16 MiB defaults (the same code
paths; Tansu's memory storage never frees what a test sends):

* a message larger than the fetch limit (the 17 MB message);
* an undecodable message whose dead letter - its bytes plus the headers - is
  larger than the produce limit;
* a good message whose output row cannot fit one message (a 1.2 MB id: a
  message of output rows holds at least one row), nor its dead letter;
* a row whose dead letter (the row as JSON text) is larger than the produce
  limit (the 6 MB input that became an 18.9 MB dead letter).

Before: ``MessageSizeTooLargeError``, exit 1, and the same again after every
restart. Now: no exit; every id in is embedded or dead-lettered (a cut dead
letter names the file that keeps the whole record); and after a kill -9 in
the middle of a second wave, no Parquet row is written twice (file names are a
function of the input position).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamembed.kafka.codec import arrow_message, json_message
from streamembed.kafka.limits import FULL_RECORD_HEADER, TRUNCATED_HEADER

from ..e2e.daemon import wait_for
from ..stream.helpers import dissimilarities, fitted_model, input_table, objects
from .supervise import Supervised
from .test_daemon_e2e import Producer, _env, output_rows, read_topic

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.slow]

LIMIT = 1 << 20
FETCH = 2 << 20


def _rows(ids: list[str], seed: int) -> pa.Table:
    return input_table(ids, dissimilarities(objects(len(ids), seed=seed)))


def _parquet_ids(root: Path) -> Counter[str]:
    ids: Counter[str] = Counter()
    for f in sorted((root / "embeddings").glob("part-*.parquet")):
        ids.update(pq.read_table(f, columns=["id"]).column("id").to_pylist())
    return ids


def _headers(r: Any) -> dict[str, str]:
    return {k: v.decode("utf-8", "replace") for k, v in r.headers}


def test_oversize_messages_outputs_and_dead_letters_never_loop_and_restarts_never_duplicate(
        broker, topic_factory, tmp_path: Path) -> None:
    topic, out = topic_factory(prefix="big"), topic_factory(prefix="big-out")
    dlq = f"{topic}.dlq"
    broker.create_topic(dlq)
    model = tmp_path / "model.npz"
    fitted_model().save(model)
    good: list[str] = []
    at: dict[str, int] = {}
    sent: dict[str, bytes] = {}
    p = Producer(broker.bootstrap)
    p.p.config["max_request_size"] = 8 << 20

    def plain(n: int, seed: int) -> None:
        ids = [f"g{seed}-{i}" for i in range(n)]
        p.send(topic, *arrow_message(_rows(ids, seed)), partition=0)
        good.extend(ids)

    try:
        plain(5, 1)
        # 1. larger than the fetch limit: a valid JSON list of 8,000 objects (2.2 MB), refused unread
        A = dissimilarities(objects(8000, seed=2)).astype(float)
        value, headers = json_message([{"id": f"a{i}", "dissimilarities": A[i].tolist()} for i in range(8000)])
        assert len(value) > FETCH
        at["fetch"], sent["fetch"] = p.send(topic, value, headers, partition=0)[1], value
        plain(5, 3)
        # 2. undecodable, its dead letter (bytes + headers) over the produce limit
        value = b"{" + b"not json " * (LIMIT // 9 - 40)
        assert LIMIT - 400 < len(value) < LIMIT
        at["undecodable"], sent["undecodable"] = p.send(topic, value, [("content-type", b"application/json")],
                                                        partition=0)[1], value
        plain(5, 4)
        # 3. a good row whose output message cannot fit, nor its dead letter (the row as JSON)
        huge_id = "id-" + "x" * 1_200_000
        at["output"] = p.send(topic, *arrow_message(_rows([huge_id], 5)), partition=0)[1]
        plain(5, 6)
        # 4. a row of 70,000 dissimilarities (wrong length): its dead letter, as JSON text, is over the limit
        long_row = pa.table({"id": ["long-row"], "dissimilarities": pa.array(
            [np.random.default_rng(7).random(70_000).tolist()], pa.list_(pa.float64()))})
        at["row"] = p.send(topic, *arrow_message(long_row), partition=0)[1]
        plain(5, 8)
    finally:
        p.close()

    root = tmp_path / "out"
    env = _env(broker, root, model, f"g-{topic}", topic, out, STREAMEMBED_KAFKA__MAX_REQUEST_SIZE=str(LIMIT),
               STREAMEMBED_KAFKA__MAX_PARTITION_FETCH_BYTES=str(FETCH))
    s = Supervised(tmp_path, env)
    feeder: threading.Thread | None = None
    try:
        s.wait_port()
        want = len(good) + 1  # the huge id is embedded in Parquet but refused by the output topic
        wait_for(lambda: sum(_parquet_ids(root).values()) >= want, 40, "the Parquet output")
        dead = read_topic(broker.bootstrap, dlq, lambda rs: len(rs) >= 4, timeout=30)
        assert s.crashes == [], s.log()
        assert s.starts == 1, s.log()

        # a second wave, and a kill -9 in the middle of it
        wave: list[str] = []

        def feed() -> None:
            q = Producer(broker.bootstrap)
            try:
                for m in range(30):
                    ids = [f"w{m}-{i}" for i in range(10)]
                    q.send(topic, *arrow_message(_rows(ids, 100 + m)), partition=0)
                    wave.extend(ids)
                    time.sleep(0.1)
            finally:
                q.close()

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        wait_for(lambda: any(i.startswith("w") for i in _parquet_ids(root)), 30, "the second wave")
        s.kill9()
        feeder.join(30)
        wait_for(lambda: set(good + wave) <= set(_parquet_ids(root)), 60, "the second wave after the restart")
        time.sleep(1.0)
        assert s.stop() == 0
    finally:
        s.close()
    assert s.crashes == [], s.log()
    assert s.starts == 2  # the one kill -9 of the test's own

    # no row written twice, whatever the restart re-read
    ids = _parquet_ids(root)
    assert [i for i, c in ids.items() if c > 1] == []
    assert set(ids) == set(good) | set(wave) | {huge_id}
    recs = read_topic(broker.bootstrap, out, lambda rs: {r["id"] for r in output_rows(rs)} >= set(good + wave),
                      timeout=30)
    outputs = output_rows(recs)
    assert {r["id"] for r in outputs} == set(good) | set(wave)

    # every oversize case is one dead letter that fits, and names where its whole record is
    dead = read_topic(broker.bootstrap, dlq, lambda rs: len(rs) >= 4, timeout=10)
    by_offset = {int(_headers(r)["streamembed-source-offset"]): r for r in dead
                 if "streamembed-source-offset" in _headers(r)}
    assert all(len(r.value or b"") + sum(len(v) for _, v in r.headers) < LIMIT for r in dead)

    def kept(r: Any) -> dict[str, Any]:
        h = _headers(r)
        path = Path(h[FULL_RECORD_HEADER])
        assert path.parent == root / "dead-letter", path
        rows = pq.read_table(path).to_pylist()
        match = [x for x in rows if (x["raw"] or x["record"].encode()).startswith(r.value)]
        assert len(match) == 1, path
        return match[0]

    r = by_offset[at["fetch"]]
    h = _headers(r)
    assert h["streamembed-error-reason"] == "too_large" and int(h[TRUNCATED_HEADER]) == len(sent["fetch"])
    whole = kept(r)["raw"]
    assert whole == sent["fetch"] and sent["fetch"].startswith(r.value)
    assert {o["id"] for o in json.loads(whole)} == {f"a{i}" for i in range(8000)}  # the ids, dead-lettered whole

    r = by_offset[at["undecodable"]]
    h = _headers(r)
    assert h["streamembed-error-reason"] == "undecodable" and int(h[TRUNCATED_HEADER]) == len(sent["undecodable"])
    assert kept(r)["raw"] == sent["undecodable"]

    refused = [r for r in dead if _headers(r)["streamembed-error-reason"] == "too_large"
               and _headers(r).get("streamembed-id", "").startswith("id-xxx")]
    assert len(refused) == 1 and len(refused[0].key) < 3000 and TRUNCATED_HEADER in _headers(refused[0])
    assert json.loads(kept(refused[0])["record"])["id"] == huge_id  # the output row, whole, in the file

    r = by_offset[at["row"]]
    h = _headers(r)
    assert (h["streamembed-error-reason"], h["streamembed-id"]) == ("wrong_length", "long-row")
    assert TRUNCATED_HEADER in h and int(h[TRUNCATED_HEADER]) > LIMIT
    assert len(json.loads(kept(r)["record"])["dissimilarities"]) == 70_000
