"""Building the daemon from its configuration, the data side: source, sinks, Kafka clients
(``daemon.model_setup`` builds the model side: model, registry, drift, refits, model topic sync).

Each builder takes the ``Config`` (or the sections it reads) and returns a
component; ``daemon.app.run_daemon`` wires them into the one streaming loop.
What cannot work refuses with ``StartupError`` (exit 2: fix the
configuration, model or state) or ``EnvironmentUnavailable`` (exit 3: the
brokers are unreachable, the disk is full; a restart may succeed).

Kafka: ``build_io`` returns the loop's two sinks for any source (Parquet
files and/or the output topic; dead-letter files, or the dead-letter topic
when the source is Kafka) plus a ``KafkaIO`` that owns the shared producer;
``open_model_topic`` opens the model topic the replicas share.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

import numpy as np

from streamembed.core.model import LandmarkModel
from streamembed.daemon.errors import EnvironmentUnavailable, StartupError
from streamembed.kafka.client import consumer_settings, producer_settings
from streamembed.kafka.producer import ReliableProducer
from streamembed.kafka.limits import topic_limit
from streamembed.kafka.model_topic import ModelTopic
from streamembed.kafka.sink import KafkaDeadLetterSink, KafkaOutputSink
from streamembed.kafka.source import KafkaSource
from streamembed.config.schema import Config
from streamembed.stream.generator import GaussianMixtureStream, GeneratorSource
from streamembed.stream.registry import ModelRegistry
from streamembed.stream.sinks import DeadLetterSink, FanoutSink, ParquetSink, PerLabelSink, dead_letter_path
from streamembed.stream.sources import DirectorySource

if TYPE_CHECKING:
    from streamembed.ops.metrics import Metrics

__all__ = ["build_source", "check_input_directory", "build_file_sinks", "KafkaIO", "build_kafka_source", "build_io",
           "open_model_topic", "dead_letter_topic", "message_limit"]

log = logging.getLogger("streamembed.daemon")


# ----------------------------------------------------------------------------- the source and file sinks


def check_input_directory(cfg: Config) -> None:
    """Batch mode on a directory that does not exist would end at once, having read nothing, and exit 0 as if
    it had succeeded: refuse it (StartupError naming the path). A watching daemon waits for it instead."""
    d = cfg.directory
    path = Path(d.path)
    if cfg.source.kind != "directory" or not d.exit_when_idle or path.is_dir():
        return
    what = "is not a directory" if path.exists() else "does not exist"
    raise StartupError(f"directory.path = {d.path!r} ({path.absolute()}) {what}: batch mode "
                       f"(directory.exit_when_idle = true) has nothing to read; fix the path or create the directory")


def build_source(cfg: Config, model: LandmarkModel, registry: ModelRegistry | None = None,
                 metrics: Metrics | None = None) -> DirectorySource | GeneratorSource:
    """The directory or generator source (Kafka: ``build_kafka_source``)."""
    s = cfg.source
    if s.kind == "directory":
        d = cfg.directory
        check_input_directory(cfg)
        if not Path(d.path).is_dir():
            log.warning("directory.path = %r (%s) does not exist (yet); waiting for it to appear", d.path,
                        Path(d.path).absolute())
        return DirectorySource(d.path, pattern=d.pattern, batch_rows=s.batch_rows, settle_seconds=d.settle_seconds,
                               poll_seconds=d.poll_seconds, max_block_rows=s.max_block_rows,
                               exit_when_idle=d.exit_when_idle, incomplete_seconds=d.incomplete_seconds,
                               metrics=metrics, mapping=d.mmap)
    g = cfg.generator
    feats = model.features
    if feats is None or feats.shape[1] != g.n_features:
        have = "no landmark features" if feats is None else f"{feats.shape[1]} features"
        raise StartupError(f"source.kind = 'generator' needs a model fitted from {g.n_features}-dimensional "
                           f"feature vectors (generator.n_features), but model.path = {cfg.model.path!r} has "
                           f"{have}: leave model.path empty or fit the model with `streamembed fit --features`")
    to_diss: Callable[[np.ndarray], Any] | None = None
    if g.emit == "dissimilarities":
        if registry is None:
            to_diss = model.dissimilarities_to_landmarks
        else:
            def to_diss(X: np.ndarray) -> tuple[np.ndarray, int]:
                current = registry.current  # follow refits: stamp the landmark version used
                return current.dissimilarities_to_landmarks(X), int(current.version)
    return GeneratorSource(GaussianMixtureStream(g), batch_rows=s.batch_rows, rate=g.rate, id_prefix=g.id_prefix,
                           to_dissimilarities=to_diss)


def build_file_sinks(cfg: Config, source_name: str, tag: str = "") -> tuple[Any, Any]:
    """(Parquet output or None, dead-letter files). A Kafka source gets one file per partition per roll
    (``PerLabelSink``), so that file names stay a function of the input position whatever the interleaving
    (untagged: the partition's next owner replaces them); other sources end every file name with ``tag``
    (``state.writer_tag``), so daemons with their own roots can share one output directory."""
    o = cfg.output

    def parquet() -> ParquetSink:
        return ParquetSink(cfg.embeddings_dir, row_group_rows=o.row_group_rows, compression=o.compression,
                           clean=source_name != "kafka", tag="" if source_name == "kafka" else tag)

    def dead_files() -> DeadLetterSink:
        return DeadLetterSink(cfg.dead_letter_dir, fmt=o.dead_letter_format, source=source_name,
                              compression=o.compression, clean=source_name != "kafka",
                              tag="" if source_name == "kafka" else tag)

    if source_name != "kafka":
        return (parquet() if o.parquet else None), dead_files()
    output = PerLabelSink(parquet, cfg.embeddings_dir, "part") if o.parquet else None
    return output, PerLabelSink(dead_files, cfg.dead_letter_dir, "dead")


# ----------------------------------------------------------------------------- Kafka


def dead_letter_topic(cfg: Config) -> str:
    k = cfg.kafka
    return k.dead_letter_topic or f"{k.input_topic}.dlq"


@dataclass
class KafkaIO:
    """The Kafka clients of one daemon (closed by :meth:`close`)."""

    producer: ReliableProducer | None = None
    model_topic: ModelTopic | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)
    limit: int = 1 << 26

    def backpressure(self) -> bool:
        return self.producer is not None and self.producer.unacked_bytes > self.limit

    def resume(self) -> bool:
        return self.producer is None or self.producer.unacked_bytes <= self.limit // 2

    def close(self) -> None:
        for close in reversed(self.closers):
            try:
                close()
            except Exception:  # noqa: BLE001 - shutting down: log and go on
                log.warning("closing a Kafka client failed", exc_info=True)
        self.closers.clear()


def build_kafka_source(cfg: Config, io: KafkaIO, *, metrics: Metrics | None = None,
                       stop: threading.Event | None = None) -> KafkaSource:
    """The consumer-group source of ``source.kind = "kafka"`` (backpressure from ``io``'s producer)."""
    k = cfg.kafka
    try:
        source = KafkaSource(consumer_settings(k), k.input_topic, batch_rows=cfg.source.batch_rows,
                             poll_timeout_ms=k.poll_timeout_ms, metrics=metrics, stop=stop,
                             backpressure=io.backpressure, resume_when=io.resume,
                             startup_timeout=k.startup_timeout_seconds, max_backoff=k.retry_backoff_max_seconds,
                             event_time=k.event_time, adaptive_fetch=k.fetch_max_wait_ms == "auto")
    except Exception as exc:  # noqa: BLE001 - the brokers are unreachable: retry later
        raise EnvironmentUnavailable(f"cannot consume {k.input_topic!r} from kafka.bootstrap_servers = "
                                     f"{k.bootstrap_servers!r}: {type(exc).__name__}: {exc}") from None
    io.closers.append(source.close)
    return source


def _producer(cfg: Config, io: KafkaIO, metrics: Metrics | None, stop: threading.Event | None) -> ReliableProducer:
    if io.producer is None:
        k = cfg.kafka
        try:
            io.producer = ReliableProducer(producer_settings(k), metrics=metrics, stop=stop,
                                           max_backoff=k.retry_backoff_max_seconds, drain_seconds=cfg.run.stop_seconds)
        except Exception as exc:  # noqa: BLE001
            raise EnvironmentUnavailable(f"cannot produce to kafka.bootstrap_servers = {k.bootstrap_servers!r}: "
                                         f"{type(exc).__name__}: {exc}") from None
        io.limit = k.max_unacked_bytes
        io.closers.append(io.producer.close)
    return io.producer


def build_io(cfg: Config, io: KafkaIO, source: Any, parquet: ParquetSink | None, dead_files: DeadLetterSink, *,
             metrics: Metrics | None = None, stop: threading.Event | None = None) -> tuple[Any, Any]:
    """(output sink, dead-letter sink) for the loop.

    Output: Parquet and/or ``output.kafka_topic`` (both at once work).
    Dead letters: the dead-letter topic for a Kafka source, else the files.
    """
    outputs: list[Any] = [parquet] if parquet is not None else []
    dead: Any = dead_files
    if isinstance(source, KafkaSource):
        topic = dead_letter_topic(cfg)
        dead = KafkaDeadLetterSink(_producer(cfg, io, metrics, stop), topic, locate=source.locate,
                                   max_message_bytes=message_limit(cfg, topic), spill=dead_files,
                                   spill_path=lambda label: dead_letter_path(cfg.dead_letter_dir,
                                                                              cfg.output.dead_letter_format, label))
    if cfg.output.kafka_topic:
        producer = _producer(cfg, io, metrics, stop)

        def refuse(records: list[Any], version: int | None, label: str) -> None:
            dead.write(records, label, model_version=version)

        outputs.append(KafkaOutputSink(producer, cfg.output.kafka_topic, fmt=cfg.kafka.output_format,
                                       max_message_bytes=message_limit(cfg, cfg.output.kafka_topic), refuse=refuse))
    output = outputs[0] if len(outputs) == 1 else FanoutSink(outputs)
    if metrics is not None:  # the topics' series exist from the start (0), not from their first message
        for t in ([dead_letter_topic(cfg)] if isinstance(source, KafkaSource) else []) + (
                [cfg.output.kafka_topic] if cfg.output.kafka_topic else []):
            metrics.kafka_messages_out.labels(topic=t)
    return output, dead


def message_limit(cfg: Config, topic: str) -> int:
    """The largest message the sinks send to ``topic``: ``kafka.max_request_size``, or less if the broker says so."""
    limit = int(cfg.kafka.max_request_size)
    broker = topic_limit(producer_settings(cfg.kafka), topic)
    if broker is not None and broker < limit:
        log.info("the broker takes messages of at most %d bytes on %s (max.message.bytes): a lower limit than "
                 "kafka.max_request_size = %d", broker, topic, limit, extra={"topic": topic})
        return broker
    return limit


def open_model_topic(cfg: Config, io: KafkaIO, *, metrics: Metrics | None = None,
                     stop: threading.Event | None = None) -> ModelTopic | None:
    k = cfg.kafka
    if not k.model_topic:
        return None
    io.model_topic = ModelTopic(k.bootstrap_servers, k.model_topic, name=k.model_name,
                                consumer_settings=consumer_settings(k, group=False),
                                producer_settings=producer_settings(k), metrics=metrics, stop=stop,
                                read_timeout=max(10.0, k.startup_timeout_seconds))
    io.closers.append(io.model_topic.close)
    if metrics is not None:
        metrics.kafka_messages_out.labels(topic=k.model_topic)
    return io.model_topic

