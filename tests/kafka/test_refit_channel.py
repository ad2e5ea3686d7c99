"""Refit requests on the model topic (``kafka.refit_channel``), against the Tansu test broker: the daemon's request,
the producer kit reading it and answering, the daemon taking the answer; model readers never see either."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from streamembed.daemon.request_refits import RefitRequests
from streamembed.kafka.model_topic import ModelTopic
from streamembed.kafka.refit_channel import TopicChannel, read_requests, send_answer
from streamembed.stream.refit_requests import answer_bytes, answer_table

from ..stream.helpers import fitted_model

pytestmark = pytest.mark.broker


def test_a_request_and_its_answer_travel_on_the_model_topic(broker, topic_factory) -> None:
    topic = topic_factory(prefix="models")
    model = fitted_model(seed=0).model_
    ModelTopic(broker.bootstrap, topic, name="demo").publish(model)
    records: list[dict] = []
    channel = TopicChannel(broker.bootstrap, topic, "demo")
    requests = RefitRequests(channel, 60.0, 100, records.append)
    ids = [f"r{i}" for i in range(8)]
    est = SimpleNamespace(landmark_ids=model.landmark_ids, version=int(model.version), lineage=model.lineage)
    request = requests.ask("manual", "asked", None, est, ids, np.ones((8, model.n_landmarks)))
    found = read_requests(broker.bootstrap, topic, "demo")
    assert [r.request_id for r in found] == [request.request_id]
    P = np.random.default_rng(0).normal(size=(8, 2))
    M = np.sqrt(((P[:, None] - P[None]) ** 2).sum(-1))
    send_answer(broker.bootstrap, topic, "demo", request, answer_bytes(answer_table(request, ids, M)))
    got = None
    end = time.monotonic() + 20
    while got is None and time.monotonic() < end:
        got = requests.poll(int(model.version))
        time.sleep(0.1)
    assert got is not None and got[0] == "accepted"
    np.testing.assert_allclose(got[2], M)
    assert read_requests(broker.bootstrap, topic, "demo") == []  # withdrawn once answered (a tombstone)
    # the model's readers read their key only
    assert int(ModelTopic(broker.bootstrap, topic, name="demo").latest().version) == int(model.version)
    channel.close()
