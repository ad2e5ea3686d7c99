"""Building the daemon from its configuration, the data side: the source of the configured kind and the sinks
(``daemon.model_setup`` builds the model side: model, registry, drift, refits, model topic sync).

The source comes from its kind (``config.sources.SOURCES[source.kind]``): the
kind's builder makes it, says whether its dead letters go elsewhere than the
files and whether this replica may lead automatic refits; the kind's
``commits`` and ``files`` say how the loop commits and how output files are
named. Nothing here names a kind. The Kafka clients (``kafka.wiring.KafkaIO``)
are made only when the run uses Kafka (its source, ``output.kafka_topic`` or
``kafka.model_topic``), and only then is anything of Kafka imported.

What cannot work refuses with ``StartupError`` (exit 2: fix the
configuration, model or state) or ``EnvironmentUnavailable`` (exit 3: the
brokers are unreachable, the disk is full; a restart may succeed).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from streamembed.config.schema import Config
from streamembed.config.sources import SOURCES, SourceKind, consumes_kafka
from streamembed.core.registry import resolve_path
from streamembed.stream.sinks import DeadLetterSink, FanoutSink, ParquetSink, PerLabelSink
from streamembed.stream.sources.base import SourceContext, SourceSetup

if TYPE_CHECKING:
    from streamembed.kafka.wiring import KafkaIO
    from streamembed.ops.metrics import Metrics

__all__ = ["source_kind", "preflight", "open_kafka", "build_source", "build_file_sinks", "build_io"]


def source_kind(cfg: Config) -> SourceKind:
    """The configured source kind."""
    return SOURCES[cfg.source.kind]


def preflight(cfg: Config) -> None:
    """The source kind's checks of the environment, before anything is written (StartupError)."""
    kind = source_kind(cfg)
    if kind.preflight is not None:
        resolve_path(kind.preflight, f"source.kind = {kind.name!r}: preflight")(cfg)


def open_kafka(cfg: Config, metrics: Metrics | None = None, stop: threading.Event | None = None) -> KafkaIO | None:
    """The daemon's Kafka clients when the run uses Kafka (its source, the output topic or the model topic), else
    None (and nothing of Kafka is imported)."""
    if not (consumes_kafka(cfg) or cfg.output.kafka_topic or cfg.kafka.model_topic):
        return None
    from streamembed.kafka.wiring import KafkaIO

    return KafkaIO(cfg, metrics, stop)


def build_source(cfg: Config, context: SourceContext) -> SourceSetup:
    """The source of the configured kind, by its builder (``config.sources``)."""
    kind = source_kind(cfg)
    build = resolve_path(kind.builder, f"source.kind = {kind.name!r}: builder")
    setup = build(cfg, context)
    if not isinstance(setup, SourceSetup):
        raise TypeError(f"the builder of source.kind = {kind.name!r} returned {type(setup).__name__}, not a "
                        f"SourceSetup")
    return setup


def build_file_sinks(cfg: Config, source_name: str, tag: str = "") -> tuple[Any, Any]:
    """(Parquet output or None, dead-letter files), named as the source kind says (``SourceKind.files``).

    "per_stream" (Kafka): one file per stream (partition) per roll (``PerLabelSink``), so that file names stay
    a function of the input position whatever the interleaving (untagged: the partition's next owner replaces
    them). "tagged": every file name ends with ``tag`` (``state.writer_tag``), so daemons with their own roots
    can share one output directory.
    """
    o = cfg.output
    per_stream = source_kind(cfg).files == "per_stream"
    mine = "" if per_stream else tag

    def parquet() -> ParquetSink:
        return ParquetSink(cfg.embeddings_dir, row_group_rows=o.row_group_rows, compression=o.compression,
                           clean=not per_stream, tag=mine)

    def dead_files() -> DeadLetterSink:
        return DeadLetterSink(cfg.dead_letter_dir, fmt=o.dead_letter_format, source=source_name,
                              compression=o.compression, clean=not per_stream, tag=mine)

    if not per_stream:
        return (parquet() if o.parquet else None), dead_files()
    output = PerLabelSink(parquet, cfg.embeddings_dir, "part") if o.parquet else None
    return output, PerLabelSink(dead_files, cfg.dead_letter_dir, "dead")


def build_io(cfg: Config, kafka: KafkaIO | None, setup: SourceSetup, parquet: ParquetSink | None,
             dead_files: Any) -> tuple[Any, Any]:
    """(output sink, dead-letter sink) for the loop.

    Output: Parquet and/or ``output.kafka_topic`` (both at once work). Dead letters: the source kind's own sink
    (``SourceSetup.dead_letters``: Kafka's dead-letter topic) or the files.
    """
    outputs: list[Any] = [parquet] if parquet is not None else []
    dead: Any = dead_files if setup.dead_letters is None else setup.dead_letters(dead_files)
    if cfg.output.kafka_topic:
        assert kafka is not None  # open_kafka made the clients: output.kafka_topic is set
        outputs.append(kafka.output_sink(dead))
    output = outputs[0] if len(outputs) == 1 else FanoutSink(outputs)
    return output, dead
