"""The model topic cannot split the fleet: real daemons sharing one model topic (those with model.path watch an
empty directory, the others consume an empty topic: a directory source needs model.path).

Garbage, a record with a wrong checksum and a map of another lineage at version 50 arrive before the
legitimate version 2: a running replica ignores the first three and installs version 2 (before, the foreign
version 50 raised its bar, and it stayed on version 1 for good while replicas started later took version 2);
replicas started afterwards, with the same model.path or with ``kafka.adopt_lineage``, start on version 2; a
replica without model.path and without a map of its own refuses to start (exit 2), naming the lineages; and a
foreign record *after* the legitimate one changes nothing either.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from kafka import KafkaProducer

from streamembed.kafka.model_topic import ModelTopic
from streamembed.model_io import model_to_bytes

from ..e2e.daemon import Daemon, wait_for
from ..stream.helpers import fitted_model

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.slow]


def _version(version: int, seed: int = 0, foreign: bool = False):
    """Version ``version`` of the map of seed 0 (its refits: other landmarks, the same lineage), or another map."""
    model = fitted_model(seed=seed).model_
    return model.with_version(version, lineage=None if foreign else fitted_model(seed=0).model_.lineage)


def _env(broker, root: Path, topic: str, model: Path | None, **more: str) -> dict[str, str]:
    (root / "in").mkdir(parents=True, exist_ok=True)
    source = {"STREAMEMBED_SOURCE__KIND": "directory", "STREAMEMBED_DIRECTORY__PATH": str(root / "in")}
    if model is None:
        source = {"STREAMEMBED_SOURCE__KIND": "kafka", "STREAMEMBED_KAFKA__INPUT_TOPIC": f"{topic}-in",
                  "STREAMEMBED_KAFKA__GROUP_ID": f"g-{root.name}", "STREAMEMBED_KAFKA__SESSION_TIMEOUT_MS": "10000",
                  "STREAMEMBED_KAFKA__HEARTBEAT_INTERVAL_MS": "3000"}
    env = {
        **source,
        "STREAMEMBED_OUTPUT__ROOT": str(root / "out"), "STREAMEMBED_KAFKA__BOOTSTRAP_SERVERS": broker.bootstrap,
        "STREAMEMBED_KAFKA__MODEL_TOPIC": topic, "STREAMEMBED_KAFKA__MODEL_POLL_SECONDS": "0.2",
        "STREAMEMBED_KAFKA__MODEL_WAIT_SECONDS": "5", "STREAMEMBED_KAFKA__STARTUP_TIMEOUT_SECONDS": "10",
        "STREAMEMBED_DRIFT__ENABLED": "false", "STREAMEMBED_LOGGING__FORMAT": "json",
    }
    if model is not None:
        env["STREAMEMBED_MODEL__PATH"] = str(model)
    env.update(more)
    return env


def _on(d: Daemon, version: int, timeout: float = 20.0) -> None:
    wait_for(lambda: d.metric("streamembed_model_version") == version, timeout, f"model version {version}", d)


def test_garbage_a_wrong_checksum_and_another_lineage_cannot_hold_back_the_next_version(broker, topic_factory,
                                                                                     tmp_path: Path) -> None:
    topic = topic_factory(prefix="models", config={"cleanup.policy": "compact"})
    broker.create_topic(f"{topic}-in")
    v1 = tmp_path / "v1.npz"
    fitted_model().save(v1)
    lineage, foreign = _version(1).lineage, _version(50, seed=9, foreign=True)
    assert foreign.lineage != lineage
    daemons: list[Daemon] = []

    def start(name: str, model: Path | None, **more: str) -> Daemon:
        d = Daemon(tmp_path, _env(broker, tmp_path / name, topic, model, **more))
        daemons.append(d)
        return d

    try:
        a = start("a", v1)
        a.wait_port()
        _on(a, 1)
        p = KafkaProducer(bootstrap_servers=broker.bootstrap, max_request_size=8 << 20)
        try:
            p.send(topic, key=b"streamembed", value=b"\x00garbage, no headers").get(10)
            p.send(topic, key=b"streamembed", value=model_to_bytes(_version(9, seed=3)),
                   headers=[("model_version", b"9"), ("model_lineage", lineage.encode()),
                            ("sha256", b"0" * 64)]).get(10)
        finally:
            p.close(5)
        publisher = ModelTopic(broker.bootstrap, topic)
        publisher.publish(foreign)  # another map, version 50: valid, but not this fleet's
        publisher.publish(_version(2, seed=2))  # the legitimate next version
        _on(a, 2)  # the running replica follows its own lineage past all three
        b = start("b", v1)  # a replica started later with the same model.path
        b.wait_port()
        _on(b, 2)
        adopt = start("adopt", None, STREAMEMBED_KAFKA__ADOPT_LINEAGE=lineage)
        adopt.wait_port()
        _on(adopt, 2)
        stranger = start("stranger", None)  # no model.path, no map of its own: cannot tell which map is its own
        assert stranger.wait(30) == 2
        log = stranger.log()
        assert re.search(rf"lineage {foreign.lineage} version 50", log) and re.search(rf"lineage {lineage} version 2",
                                                                                      log), log
        assert "kafka.adopt_lineage" in log
        # a foreign record after the legitimate one: nothing moves; the next legitimate version is followed
        publisher.publish(_version(51, seed=8, foreign=True))
        time.sleep(1.5)
        assert [d.metric("streamembed_model_version") for d in (a, b, adopt)] == [2, 2, 2]
        publisher.publish(_version(3, seed=3))
        for d in (a, b, adopt):
            _on(d, 3)
        late = start("late", v1)
        late.wait_port()
        _on(late, 3)
        for d in (a, b, adopt, late):
            assert d.terminate() == 0
        assert "ignoring model version 50" in a.log() and "fails its sha256" in a.log()
        publisher.close()
    finally:
        for d in daemons:
            d.close()


def test_of_two_records_of_one_version_the_first_counts(broker, topic_factory) -> None:
    """A version claimed twice (two replicas' refits): readers and watchers take the first record, and the
    second claimant learns it lost (and publishes the winner again, for compaction)."""
    topic = topic_factory(prefix="models")
    a, b = ModelTopic(broker.bootstrap, topic), ModelTopic(broker.bootstrap, topic)
    a.publish(_version(1))
    first, second = _version(2, seed=2), _version(2, seed=5)
    assert a.claim(first) is None
    why = b.claim(second)
    assert why is not None and "claimed first" in why
    got = ModelTopic(broker.bootstrap, topic).latest(timeout=10, lineage=first.lineage)
    assert got.version == 2 and model_to_bytes(got) == model_to_bytes(first)
    watcher = ModelTopic(broker.bootstrap, topic)
    watcher.follow(first.lineage)
    watcher.start_watching(poll_seconds=0.2)
    try:
        end = time.monotonic() + 15
        new = None
        while new is None and time.monotonic() < end:
            new = watcher.poll_new(1)
            time.sleep(0.05)
        assert new is not None and model_to_bytes(new) == model_to_bytes(first)
    finally:
        watcher.close()
