"""What the loop reads: :class:`SourceBatch` (rows, their resume position and label) and the :class:`Source` protocol;
what a source kind's builder (``config.sources``) is given and returns: :class:`SourceContext`, :class:`SourceSetup`.

A source yields :class:`SourceBatch` objects. ``position`` is a
JSON-serialisable state meaning "everything up to and including this batch";
the loop's checkpointer stores it once the batch's outputs are durable and
hands it back to :meth:`Source.restore` on restart. ``label`` is a
file-name-safe rendering of the batch's *first* position, used to name the
output files deterministically; ``key`` identifies the batch across restarts
(the crash guard counts crashes per key).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from streamembed.stream.codecs import DeadRecord
from streamembed.stream.origin import NO_ORIGIN, RowOrigin

__all__ = ["SourceBatch", "Source", "SourceContext", "SourceSetup", "display_name"]


@dataclass
class SourceBatch:
    """One batch of raw input.

    ``table`` holds the rows to decode (None when there are none, e.g. an
    unreadable file or an end-of-file marker); ``dead`` the records refused
    before decoding. ``origin`` says where its rows come from (file and
    row numbers, for dead letters). ``stream`` names the ordered part of the
    input the batch belongs to when there are several read concurrently (a
    Kafka partition): the loop writes each stream's rows of a roll under the
    label of its first batch in that roll; None: one stream.
    """

    table: pa.Table | None
    position: Any
    label: str
    dead: list[DeadRecord] = field(default_factory=list)
    origin: RowOrigin = NO_ORIGIN
    stable_key: str | None = None
    stream: str | None = None

    @property
    def key(self) -> str:
        """The batch's identity across restarts (the label, unless the source says otherwise)."""
        return self.stable_key or self.label

    @property
    def n_records(self) -> int:
        """Input records in this batch (rows plus records refused while reading)."""
        return (self.table.num_rows if self.table is not None else 0) + len(self.dead)


class Source(Protocol):
    """What the loop needs from a source."""

    name: str

    def poll(self) -> SourceBatch | None:
        """The next batch, or None if nothing is available right now."""

    def restore(self, state: Any) -> None:
        """Resume after the batch whose ``position`` was ``state`` (raises ValueError for a state it cannot use)."""

    def commit(self, position: Any) -> None:
        """The outputs up to ``position`` are durable (Kafka commits its offsets; file sources have nothing to do)."""

    def wait_hint(self) -> float:
        """Seconds worth sleeping after ``poll`` returned None."""

    @property
    def caught_up(self) -> bool:
        """True when the last ``poll`` found no input waiting (the loop publishes then)."""

    @property
    def exhausted(self) -> bool:
        """True when no more batches will ever come (bounded sources)."""

    def close(self) -> None: ...


@dataclass
class SourceContext:
    """What a source kind's builder may use besides the configuration.

    Attributes:
        model: the model the run starts with (``core.model.LandmarkModel``).
        registry: the served models (``stream.registry.ModelRegistry``), for a source that follows refits.
        metrics: the daemon's metrics (``ops.metrics.Metrics`` or its no-op twin), or None.
        stop: set when the daemon stops (a source that waits or retries ends its waits).
        kafka: the daemon's Kafka clients (``kafka.wiring.KafkaIO``), or None when the run uses no Kafka.
    """

    model: Any
    registry: Any = None
    metrics: Any = None
    stop: threading.Event | None = None
    kafka: Any = None


@dataclass
class SourceSetup:
    """What a source kind's builder returns: the source and what the rest of the run takes from its kind.

    Attributes:
        source: the :class:`Source`.
        dead_letters: replaces the dead-letter files by the kind's own sink (Kafka: the dead-letter topic,
            spilling oversize records to the files it is given), or None: the files.
        leads_refits: whether this replica may start automatic refits now (Kafka: while it owns input
            partition 0), or None: always.
    """

    source: Source
    dead_letters: Callable[[Any], Any] | None = None
    leads_refits: Callable[[], bool] | None = None


def display_name(rel: str) -> str:
    """A file name as valid text (bytes that are not UTF-8 shown as U+FFFD), for dead letters and logs."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
