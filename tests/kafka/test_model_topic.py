"""The landmark model on a (compacted) topic, against the Tansu test broker."""

from __future__ import annotations

import hashlib
import time

import numpy as np
import pytest
from kafka import KafkaProducer

from streamembed.kafka.model_topic import ModelTopic
from streamembed.model_io import model_to_bytes
from streamembed.daemon.model_setup import ModelSync
from streamembed.stream.registry import ModelRegistry

from ..stream.helpers import dissimilarities, fitted_model, objects

pytestmark = pytest.mark.broker


def _model(version: int, seed: int = 0, foreign: bool = False):
    """Version ``version`` of one map (a refit with other landmarks: another seed, the same lineage)."""
    model = fitted_model(seed=seed).model_
    return model.with_version(version, lineage=None if foreign else fitted_model(seed=0).model_.lineage)


def _wait(pred, timeout: float = 15.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = pred()
        if got is not None:
            return got
        time.sleep(0.05)
    return None


def test_publish_then_latest_round_trips_the_model(broker, topic_factory) -> None:
    topic = topic_factory(prefix="models")
    mt = ModelTopic(broker.bootstrap, topic, name="demo")
    assert mt.latest(timeout=5) is None  # nothing published yet
    est = _model(3)
    pub = mt.publish(est)
    assert pub.version == 3 and pub.sha256 == hashlib.sha256(model_to_bytes(est)).hexdigest()
    got = ModelTopic(broker.bootstrap, topic, name="demo").latest(timeout=10)
    assert got.version == 3
    A = dissimilarities(objects(20))
    np.testing.assert_array_equal(got.place(A).y, est.place(A).y)
    # another key on the same topic is another deployment's model
    assert ModelTopic(broker.bootstrap, topic, name="other").latest(timeout=5) is None


def test_latest_record_wins_and_bad_records_are_skipped(broker, topic_factory) -> None:
    topic = topic_factory(prefix="models", config={"cleanup.policy": "compact"})
    mt = ModelTopic(broker.bootstrap, topic)
    mt.publish(_model(1))
    mt.publish(_model(2, seed=1))
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, max_request_size=8 << 20)
    try:  # a later record whose checksum does not match: skipped, the previous one is used
        p.send(topic, key=b"streamembed", value=model_to_bytes(_model(9)),
               headers=[("model_version", b"9"), ("sha256", b"0" * 64)]).get(10)
    finally:
        p.close(10)
    assert ModelTopic(broker.bootstrap, topic).latest(timeout=10).version == 2


def test_watcher_hands_out_only_newer_models(broker, topic_factory) -> None:
    topic = topic_factory(prefix="models")
    publisher = ModelTopic(broker.bootstrap, topic)
    publisher.publish(_model(2))
    follower = ModelTopic(broker.bootstrap, topic)
    follower.start_watching(poll_seconds=0.2)
    try:
        assert _wait(lambda: follower.poll_new(1)).version == 2
        assert follower.poll_new(1) is None  # already handed out
        publisher.publish(_model(1, seed=3))  # an older version published later: never switched to
        publisher.publish(_model(4, seed=4))
        assert _wait(lambda: follower.poll_new(2)).version == 4
        assert follower.poll_new(0) is None
    finally:
        follower.close()


def test_model_sync_installs_remote_models_and_publishes_local_refits(broker, topic_factory) -> None:
    topic = topic_factory(prefix="models")
    mt = ModelTopic(broker.bootstrap, topic)
    mt.publish(_model(1))
    assert mt.latest(timeout=10) is not None
    registry = ModelRegistry(_model(1), retain=1)
    sync = ModelSync(mt, registry, poll_seconds=0.0)
    try:
        ModelTopic(broker.bootstrap, topic).publish(_model(2, seed=2))  # another replica's refit

        def installed() -> int | None:
            sync.poll()
            return registry.current_version if registry.current_version == 2 else None

        assert _wait(installed) == 2
        ModelTopic(broker.bootstrap, topic).publish(_model(5, seed=5, foreign=True))  # another map: never installed
        time.sleep(1.0)
        sync.poll()
        assert registry.current_version == 2
        registry.install(_model(3, seed=3))  # a local refit: published on the next poll
        sync.poll()
        assert ModelTopic(broker.bootstrap, topic).latest(timeout=10).version == 3
        assert registry.versions() == [2, 3]
    finally:
        mt.close()
