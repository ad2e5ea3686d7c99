"""Kafka messages that name their landmark order, through the real daemon and the Tansu test broker.

JSON messages (a shared ``landmarks`` list, or one per object) and Arrow messages (``streamembed.landmarks``
field metadata) in a permuted order are placed exactly as the same rows in model order; orders that are not a
permutation of the model's ids go to the dead-letter topic as ``landmark_mismatch``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from scipy.spatial.distance import cdist

from streamembed import LandmarkMDS
from streamembed.kafka.codec import arrow_message, json_message
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.landmark_order import order_metadata
from streamembed.stream.output import y_matrix

from ..e2e.daemon import Daemon
from ..stream.helpers import N_LANDMARKS, input_table, landmark_points, objects
from .test_daemon_e2e import Producer, _env, read_topic

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

IDS = [f"mol-{i}" for i in range(N_LANDMARKS)]


def _y(table: pa.Table | pa.RecordBatch) -> dict[str, np.ndarray]:
    return dict(zip(table.column("id").to_pylist(), y_matrix(table), strict=True))


@pytest.mark.kafka_python_only("the codec's landmark order, not the client")
@pytest.mark.slow
def test_named_orders_in_json_and_arrow_messages_are_applied_exactly_or_refused(broker, topic_factory,
                                                                                 tmp_path: Path) -> None:
    topic, out = topic_factory(prefix="ord"), topic_factory(prefix="ordout")
    dlq = f"{topic}.dlq"
    broker.create_topic(dlq)
    L = landmark_points()
    est = LandmarkMDS().fit(cdist(L, L), landmark_ids=IDS)
    est.save(tmp_path / "model.npz")
    perm = np.random.default_rng(11).permutation(N_LANDMARKS)
    named = [IDS[p] for p in perm]
    A = cdist(objects(30, seed=4), L)  # float64 rows, as JSON carries them
    want = _y(BatchEmbedder(est.model_).process(input_table([f"o{i}" for i in range(30)], A, event_time=False)).output)
    del want["o15"]  # sent as "bad-json"
    p = Producer(broker.bootstrap)
    try:
        # 1. JSON, one shared order for the message's objects
        p.send(topic, *json_message({"objects": [{"id": f"o{i}", "dissimilarities": A[i, perm].tolist()}
                                                 for i in range(10)], "landmarks": named}))
        # 2. JSON objects, each with its own order; one names an id the model does not have
        p.send(topic, *json_message([{"id": f"o{i}", "dissimilarities": A[i, perm].tolist(), "landmarks": named}
                                     for i in range(10, 15)]
                                    + [{"id": "bad-json", "dissimilarities": A[15, perm].tolist(),
                                        "landmarks": named[:-1] + ["mol-99"]}]))
        # 3. Arrow, the order in the vector field's metadata
        t = input_table([f"o{i}" for i in range(16, 30)], A[16:, perm], event_time=False)
        f = t.schema.field("dissimilarities").with_metadata(order_metadata(named))
        p.send(topic, *arrow_message(t.cast(pa.schema([t.schema.field("id"), f]))))
        # 4. Arrow naming one id twice: the whole message is refused
        bad = input_table(["bad-arrow-0", "bad-arrow-1"], A[:2], event_time=False)
        g = bad.schema.field("dissimilarities").with_metadata(order_metadata(IDS[:-1] + [IDS[0]]))
        p.send(topic, *arrow_message(bad.cast(pa.schema([bad.schema.field("id"), g]))))
    finally:
        p.close()
    d = Daemon(tmp_path, _env(broker, tmp_path / "out", tmp_path / "model.npz", f"g-{topic}", topic, out))
    try:
        d.wait_port()
        recs = read_topic(broker.bootstrap, out, lambda rs: sum(pa.ipc.open_stream(r.value).read_all().num_rows
                                                                 for r in rs) >= 29, timeout=45)
        got: dict[str, np.ndarray] = {}
        for r in recs:
            got.update(_y(pa.ipc.open_stream(r.value).read_all()))
        assert got.keys() == want.keys()
        assert all(np.array_equal(got[k], want[k]) for k in want), "a named permutation must be applied exactly"
        dead = read_topic(broker.bootstrap, dlq, lambda rs: len(rs) >= 3, timeout=20)
        heads = [{k: v.decode() for k, v in r.headers} for r in dead]
        assert sorted(h["streamembed-id"] for h in heads) == ["bad-arrow-0", "bad-arrow-1", "bad-json"]
        assert {h["streamembed-error-reason"] for h in heads} == {"landmark_mismatch"}
        assert d.metric("streamembed_records_failed_total", 'reason="landmark_mismatch"') == 3
        assert d.terminate() == 0
    finally:
        d.close()
