"""Two replicas asked for a manual refit at the same moment: one map per version across the fleet.

Each replica refits from its own reservoir (different blocks, so different maps). Before, both installed
and published their own "version 2": the same object came back up to 11.5 units apart. Now a refit is
installed only once its version is claimed on the model topic (the first record of a version wins): the
loser drops its refit (status ``superseded``, nothing left in models/) and takes the winner's map. Probe
objects with the same dissimilarities, sent to both replicas' partitions, come back at the same place.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from scipy.spatial.distance import cdist

from streamembed.kafka.codec import arrow_message
from streamembed.kafka.model_topic import ModelTopic
from streamembed.model_io import model_to_bytes
from streamembed.stream.output import y_matrix

from ..e2e.daemon import Daemon, wait_for
from ..stream.helpers import fitted_model, input_table, landmark_points, objects
from .test_daemon_e2e import Producer, _env, read_topic

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.slow]


def _history(root: Path) -> list[dict]:
    path = root / "model-history.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.kafka_python_only("a race of two replicas (20 s); the model topic on both libraries: test_model_topic*")
def test_two_replicas_refitting_at_once_end_on_one_map(broker, topic_factory, tmp_path: Path) -> None:
    topic, out = topic_factory(partitions=2, prefix="race"), topic_factory(prefix="race-out")
    models = topic_factory(prefix="race-models", config={"cleanup.policy": "compact"})
    model = tmp_path / "model.npz"
    fitted_model().save(model)
    L = landmark_points()
    group = f"g-{topic}"
    more = {"STREAMEMBED_KAFKA__MODEL_TOPIC": models, "STREAMEMBED_KAFKA__MODEL_POLL_SECONDS": "0.2",
            "STREAMEMBED_DRIFT__ENABLED": "true", "STREAMEMBED_REFIT__AUTO": "false"}
    roots = [tmp_path / "a", tmp_path / "b"]
    a = Daemon(tmp_path, _env(broker, roots[0], model, group, topic, out, **more))
    b: Daemon | None = None
    pool = {str(i): L[i] for i in range(len(L))}  # default landmark ids: row numbers
    try:
        a.wait_port()
        wait_for(lambda: a.metric("streamembed_kafka_assigned_partitions") == 2, 30, "A's partitions", a)
        b = Daemon(tmp_path, _env(broker, roots[1], model, group, topic, out, **more))
        b.wait_port()
        wait_for(lambda: a.metric("streamembed_kafka_assigned_partitions") == 1
                 and b.metric("streamembed_kafka_assigned_partitions") == 1, 40, "the partitions split", b)
        p = Producer(broker.bootstrap)
        try:  # each partition (so each replica) gets its own blocks: landmark candidates of two different maps
            for part, shift in ((0, 4.0), (1, -4.0)):
                Zb = objects(40, seed=5 + part) + shift
                ids = [f"b{part}-{i}" for i in range(40)]
                pool.update(zip(ids, Zb, strict=True))
                p.send(topic, *arrow_message(input_table(ids, cdist(Zb, L).astype(np.float32), cross=cdist(Zb, Zb))),
                       partition=part)
        finally:
            p.close()
        for d in (a, b):
            wait_for(lambda d=d: d.metric("streamembed_refit_candidates") >= 40, 30, "the blocks in the reservoir", d)
        a.proc.send_signal(signal.SIGUSR1)
        b.proc.send_signal(signal.SIGUSR1)
        for d in (a, b):
            wait_for(lambda d=d: d.metric("streamembed_model_version") == 2, 60, "version 2", d)
        # each refit ends: installed, or superseded (lost, or overtaken)
        for root, d in zip(roots, (a, b), strict=True):
            wait_for(lambda root=root: any(h.get("trigger") == "manual" for h in _history(root)), 60,
                     "the end of the refit", d)

        # one installed, one superseded; nothing of the loser left in its models/
        statuses = sorted(h["status"] for root in roots for h in _history(root) if h.get("trigger") == "manual")
        assert statuses == ["installed", "superseded"], [_history(r) for r in roots]
        loser = next(r for r in roots if any(h["status"] == "superseded" for h in _history(r)))
        assert not (loser / "models" / "model-v2.npz").exists()
        winner_doc = next(h for r in roots for h in _history(r) if h.get("status") == "installed")
        canonical = ModelTopic(broker.bootstrap, models).latest(timeout=10, lineage=fitted_model().model_.lineage)
        assert canonical.version == 2 and list(canonical.landmark_ids) == winner_doc["new_landmarks"]

        # the same objects, to both replicas (one partition each), come back at the same place
        Z = objects(6, seed=77)
        D = cdist(Z, np.vstack([pool[i] for i in canonical.landmark_ids])).astype(np.float32)
        p = Producer(broker.bootstrap)
        try:
            for part in (0, 1):
                t = input_table([f"probe{part}-{i}" for i in range(6)], D)
                t = t.append_column("landmark_version", pa.array(np.full(6, 2, dtype=np.int64)))
                p.send(topic, *arrow_message(t), partition=part)
        finally:
            p.close()
        recs = read_topic(broker.bootstrap, out, lambda rs: sum(
            1 for r in rs for x in pa.ipc.open_stream(r.value).read_all().column("id").to_pylist()
            if x.startswith("probe")) >= 12, timeout=40)
        y: dict[str, np.ndarray] = {}
        for r in recs:
            t = pa.ipc.open_stream(r.value).read_all()
            ids, versions = t.column("id").to_pylist(), t.column("model_version").to_pylist()
            for rid, v, yy in zip(ids, versions, y_matrix(t), strict=True):
                if rid.startswith("probe"):
                    assert v == 2
                    y[rid] = np.asarray(yy)
        for i in range(6):
            np.testing.assert_allclose(y[f"probe0-{i}"], y[f"probe1-{i}"], atol=1e-6)
        np.testing.assert_allclose(y["probe0-0"], canonical.place(D[:1].astype(np.float64)).y[0], atol=1e-4)
        assert model_to_bytes(canonical)  # the topic's version 2 is a loadable model
        assert b.terminate() == 0
        assert a.terminate() == 0
    finally:
        a.close()
        if b is not None:
            b.close()
