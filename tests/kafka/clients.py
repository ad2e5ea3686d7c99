"""The Kafka client library the running broker test exercises (``kafka.client_library``; tests/kafka/conftest.py).

Every broker test that runs streamembed's Kafka code runs once per library: the daemons and commands it starts
get ``STREAMEMBED_KAFKA__CLIENT_LIBRARY`` (``tests.e2e.cli.SESSION_ENV``), and what it makes in this process
(a model topic, a source) takes :func:`clients`.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

#: The libraries every such test runs with (``config.kafka_clients``).
LIBRARIES = ("kafka-python", "confluent")

_current = ["kafka-python"]


def library() -> str:
    """The library of the test running now."""
    return _current[0]


def use(name: str) -> None:
    from tests.e2e.cli import SESSION_ENV

    _current[0] = name
    SESSION_ENV["STREAMEMBED_KAFKA__CLIENT_LIBRARY"] = name


def clients() -> Any:
    """The clients of the library of the test running now (``kafka.libraries.Clients``)."""
    from streamembed.kafka.libraries import clients_for

    return clients_for(SimpleNamespace(client_library=library()))
