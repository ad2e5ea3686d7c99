"""The Kafka client libraries ``kafka.client_library`` chooses from: one registry (``CLIENT_LIBRARIES``).

A library names the package it needs (and the streamembed extra that installs
it), the object of the Kafka layer that makes its clients
(``"package.module:attribute"``, a ``kafka.libraries.Clients``, imported only
when the run uses Kafka), the partition assignors it lacks, and what
``[kafka.client]`` holds for it. ``kafka.client_library``'s choices, the
start-up refusal of a library whose package is missing (exit 2, naming the
extra), the assignor check and the docs' table are derived from here.

This module imports nothing of the layers above the configuration: the
implementations are named, not imported.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from dataclasses import dataclass
from typing import Any

from streamembed.core.registry import Registry

__all__ = ["ClientLibrary", "CLIENT_LIBRARIES", "uses_kafka", "check_client_library"]


@dataclass(frozen=True)
class ClientLibrary:
    """One Kafka client library.

    Attributes:
        name: its ``kafka.client_library`` value.
        package: the module it imports (``kafka``, ``confluent_kafka``).
        distribution: the package to install (``kafka-python``, ``confluent-kafka``).
        extra: the streamembed extra that installs it (None: a dependency of streamembed).
        clients: ``"package.module:attribute"``, the Kafka layer's clients of this library.
        lacks_assignors: the ``kafka.assignor`` values it does not offer.
        client_table: what the ``[kafka.client]`` table holds for it (one line for the docs).
        doc: one line for the documentation tables.
    """

    name: str
    package: str
    distribution: str
    extra: str | None
    clients: str
    lacks_assignors: tuple[str, ...]
    client_table: str
    doc: str


def _check(lib: ClientLibrary, registry: Registry[ClientLibrary]) -> None:
    if not isinstance(lib, ClientLibrary):
        raise TypeError(f"a client library is a ClientLibrary, got {type(lib).__name__}")
    module, sep, attr = lib.clients.partition(":")
    if not (module and sep and attr):
        raise ValueError(f"clients {lib.clients!r} is not of the form 'package.module:attribute'")


#: Every Kafka client library by name (``kafka.client_library``'s choices; the first is the default).
CLIENT_LIBRARIES: Registry[ClientLibrary] = Registry("Kafka client library", _check)

CLIENT_LIBRARIES.register(ClientLibrary(
    "kafka-python", "kafka", "kafka-python", None, "streamembed.kafka.libraries:KAFKA_PYTHON", (),
    "kafka-python settings (linger_ms, compression_type)",
    "kafka-python, pure Python (a dependency)"))
CLIENT_LIBRARIES.register(ClientLibrary(
    "confluent", "confluent_kafka", "confluent-kafka", "confluent", "streamembed.kafka.librdkafka:CONFLUENT",
    ("sticky",), "librdkafka properties (\"linger.ms\", \"compression.type\")",
    "confluent-kafka: librdkafka, which fetches and produces in C threads (the extra streamembed[confluent])"))


def uses_kafka(cfg: Any) -> bool:
    """Whether the run makes Kafka clients: a Kafka source, an output topic or a model topic."""
    from streamembed.config.sources import consumes_kafka

    return consumes_kafka(cfg) or bool(cfg.output.kafka_topic) or bool(cfg.kafka.model_topic)


def check_client_library(cfg: Any) -> None:
    """Refuse (ValueError naming the key) a library whose package is not installed, when the run uses Kafka, and an
    assignor the library does not offer."""
    k = cfg.kafka
    lib = CLIENT_LIBRARIES[k.client_library]
    if not uses_kafka(cfg):
        return
    if importlib.util.find_spec(lib.package) is None:
        how = f"pip install 'streamembed[{lib.extra}]'" if lib.extra else "reinstall streamembed"
        raise ValueError(f"kafka.client_library = {lib.name!r} needs the {lib.distribution} package, which is not "
                         f"installed: {how}")
    if k.assignor in lib.lacks_assignors:
        every = next(f for f in dataclasses.fields(k) if f.name == "assignor").metadata["choices"]
        offered = [a for a in every if a not in lib.lacks_assignors]
        raise ValueError(f"kafka.assignor = {k.assignor!r} is not offered by kafka.client_library = {lib.name!r} "
                         f"(it offers {', '.join(offered)})")
