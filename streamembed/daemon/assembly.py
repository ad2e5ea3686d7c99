"""Building the daemon from its configuration: model, registry, source, sinks, drift, Kafka clients.

Each builder takes the ``Config`` (or the sections it reads) and returns a
component; ``daemon.app.run_daemon`` wires them into the one streaming loop.
What cannot work refuses with ``StartupError`` (exit 2: fix the
configuration, model or state) or ``EnvironmentUnavailable`` (exit 3: the
brokers are unreachable, the disk is full; a restart may succeed).

Kafka: ``build_io`` returns the loop's two sinks for any source (Parquet
files and/or the output topic; dead-letter files, or the dead-letter topic
when the source is Kafka) plus a ``KafkaIO`` that owns the shared producer;
``startup_model`` picks the model a replica starts with (its own file, or the
model topic's, whichever is newer); ``ModelSync`` follows the model topic
between batches and publishes local refits.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

import numpy as np

from streamembed.core.detector import CalibrationError
from streamembed.core.errors import ModelFileError
from streamembed.core.model import LandmarkModel
from streamembed.daemon.errors import EnvironmentUnavailable, StartupError
from streamembed.daemon.metrics import Metrics
from streamembed.daemon.refits import RefitManager, newest_models
from streamembed.daemon.state import descendants
from streamembed.fsafe import make_dirs
from streamembed.kafka.client import ReliableProducer, consumer_settings, producer_settings
from streamembed.kafka.limits import topic_limit
from streamembed.kafka.model_topic import ModelTopic
from streamembed.kafka.sink import KafkaDeadLetterSink, KafkaOutputSink
from streamembed.kafka.source import KafkaSource
from streamembed.model_io import load_model, save_model
from streamembed.config.schema import Config
from streamembed.stream.generator import GaussianMixtureStream, GeneratorSource
from streamembed.stream.registry import ModelRegistry, StaleModelError
from streamembed.stream.monitor import DriftMonitor, build_trigger
from streamembed.stream.sinks import DeadLetterSink, FanoutSink, ParquetSink, PerLabelSink, dead_letter_path
from streamembed.stream.sources import DirectorySource

__all__ = ["load_or_fit_model", "build_registry", "build_drift", "build_source", "check_input_directory",
           "KafkaIO", "ModelSync", "build_kafka_source", "build_io", "open_model_topic", "startup_model",
           "dead_letter_topic",
           "model_source", "own_lineage", "message_limit", "save_generator_model", "DEFAULT_MODEL_NAME"]

log = logging.getLogger("streamembed.daemon")

#: Where the run keeps a generator-fitted model (in output.root) unless model.save_path says otherwise.
DEFAULT_MODEL_NAME = "model.npz"


def model_source(cfg: Config) -> str:
    """Where the configured model comes from, as a short name (no absolute paths in metric labels)."""
    if cfg.model.path:
        return Path(cfg.model.path).name
    return f"model topic {cfg.kafka.model_topic}" if cfg.kafka.model_topic else "generator"


# ----------------------------------------------------------------------------- the model


def load_or_fit_model(cfg: Config) -> LandmarkModel:
    """The configured model: loaded from ``model.path``, else fitted from generator samples."""
    from streamembed.core.landmarks import initial_landmarks

    m = cfg.model
    if m.path:
        path = Path(m.path)
        if not path.exists():
            raise StartupError(f"model.path = {m.path!r} does not exist: make a model with `streamembed fit` "
                               f"or leave model.path empty to fit one from the generator")
        try:
            model = load_model(path)
        except ModelFileError as exc:
            raise StartupError(f"model.path = {m.path!r} cannot be used: {exc}") from None
        try:
            model.check_method(m.method)
        except ValueError as exc:
            raise StartupError(f"model.method = {m.method!r} does not suit model.path = {m.path!r}: {exc}") from None
        return model
    stream = GaussianMixtureStream(cfg.generator)
    X = stream.fit_sample(m.fit_sample)
    try:
        fitted = _generator_estimator(cfg)
        idx = initial_landmarks(m.landmark_selection, m.n_landmarks, X=X, metric=m.metric,
                                random_state=fitted.random_state, n_components=m.n_components)
        fitted.fit_features(X[idx], metric=m.kernel if m.input == "similarity" else m.metric)
        model = fitted.model_
    except ValueError as exc:
        raise StartupError(f"cannot fit a model from the generator ({exc}); check [model] and [generator]") from None
    log.info("fitted a model from generator samples",
             extra={"landmarks": m.n_landmarks, "dims": m.n_components,
                    "metric": f"{m.kernel} kernel" if m.input == "similarity" else m.metric})
    if m.save_path and m.save_path != "none":  # the default place is written later: save_generator_model
        save_model(model, m.save_path, params=fitted.get_params())
        log.info("saved the fitted model", extra={"path": m.save_path})
    return model


def _generator_estimator(cfg: Config) -> Any:
    """The (unfitted) LandmarkMDS that fits the generator's model, as [model] configures it (seeded by
    generator.seed: its random_state seeds the landmark selection, as ``streamembed fit --seed`` does)."""
    from streamembed import LandmarkMDS

    m = cfg.model
    return LandmarkMDS(n_components=m.n_components, method=m.method,  # type: ignore[arg-type]  # a checked choice
                       input=m.input,
                       geodesic_neighbors=m.geodesic_neighbors or None, correction=m.correction,
                       landmark_map=m.landmark_map, random_state=cfg.generator.seed)


def save_generator_model(cfg: Config, model: LandmarkModel) -> Path | None:
    """Keep a generator-fitted model at its default place, ``<output.root>/model.npz`` (``model.save_path``
    empty), where `streamembed model info` and `streamembed plot map` find it; returns the path, or None.

    Called once the run's state is checked (a refused start overwrites nothing). Models from ``model.path``
    or the model topic are not copied.
    """
    if cfg.model.path or cfg.model.save_path or model_source(cfg) != "generator":
        return None
    path = cfg.root / DEFAULT_MODEL_NAME
    cfg.root.mkdir(parents=True, exist_ok=True)
    save_model(model, path, params=_generator_estimator(cfg).get_params())
    log.info("saved the generator-fitted model (streamembed model info / plot map read it)",
             extra={"path": str(path)})
    return path


def build_registry(cfg: Config, model: LandmarkModel) -> ModelRegistry:
    """The served models: ``model`` plus the refitted versions in the model directory that descend from it."""
    registry = ModelRegistry(model, retain=cfg.refit.retain_versions)
    found: list[tuple[Path, LandmarkModel]] = []
    for path in newest_models(cfg.model_dir, cfg.refit.retain_versions + 1):
        try:
            found.append((path, load_model(path)))
        except ModelFileError as exc:
            raise StartupError(f"{path} cannot be loaded ({exc}); move it aside to fall back to an older "
                               f"version") from None
    for path, m in descendants(model, found):
        registry.install(m)
        log.info("resuming with a refitted model", extra={"model_version": int(m.version), "path": str(path)})
    return registry


def build_drift(cfg: Config, registry: ModelRegistry,
                metrics: Metrics) -> tuple[DriftMonitor | None, RefitManager | None]:
    """The drift monitor and refit manager of the [drift] and [refit] sections (None, None if disabled)."""
    if not cfg.drift.enabled:
        return None, None
    try:
        trigger = build_trigger(cfg.drift)
    except CalibrationError as exc:
        raise StartupError(f"the drift detector cannot be calibrated with these settings: {exc} (or set "
                           f"drift.detector = 'rule')") from None
    monitor = DriftMonitor(registry.current, cfg.drift, trigger, metrics, history_path=cfg.drift_history_path)
    make_dirs(cfg.model_dir)
    refits = RefitManager(cfg.refit, registry, monitor, cfg.model_dir, cfg.history_path, metrics)
    return monitor, refits


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
                             event_time=k.event_time)
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
                                           max_backoff=k.retry_backoff_max_seconds)
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


def startup_model(cfg: Config, topic: ModelTopic | None,
                  load_local: Callable[[Config], LandmarkModel]) -> LandmarkModel:
    """The model this replica starts with (and the lineage it follows on the topic from then on).

    Without a model topic: ``load_local(cfg)``. With one and ``model.path``:
    the newer of the local model and the topic's newest of the same lineage
    (records of other lineages are ignored); a local model newer than the
    topic's (or the only one) is published. Without ``model.path``: the topic's
    newest map of the lineage this replica can trace - ``kafka.adopt_lineage``,
    else this root's own (checkpoint or models/) - awaited up to
    ``kafka.model_wait_seconds``; a map it cannot trace is refused (exit 2).
    """
    if topic is None:
        return load_local(cfg)
    local = load_local(cfg) if cfg.model.path else None
    try:
        if local is None:
            return _adopted_model(cfg, topic)
        topic.follow(local.lineage)
        remote = topic.latest()
        if remote is None:
            others = topic.lineages()
            if others:
                raise StartupError(f"kafka.model_topic = {cfg.kafka.model_topic!r} (key {cfg.kafka.model_name!r}) "
                                   f"holds only other maps ({_named(others)}) than model.path = {cfg.model.path!r} "
                                   f"(lineage {local.lineage}): use another kafka.model_name for the new map")
            topic.publish(local)
            return local
        lv = int(local.version)
        if lv > int(remote.version):
            topic.publish(local)
            return local
        if int(remote.version) > lv:
            log.info("the model topic has a newer model than model.path; using it",
                     extra={"model_version": int(remote.version), "local_version": lv})
            return remote
        return local
    except (StartupError, EnvironmentUnavailable):
        raise
    except Exception as exc:  # noqa: BLE001
        raise EnvironmentUnavailable(f"cannot use kafka.model_topic = {cfg.kafka.model_topic!r}: "
                                     f"{type(exc).__name__}: {exc}") from None


def _named(lineages: dict[str, int]) -> str:
    return ", ".join(f"lineage {lin} version {v}" for lin, v in sorted(lineages.items(), key=lambda kv: -kv[1]))


def own_lineage(cfg: Config) -> str | None:
    """The lineage of the map this root already ran: its checkpoint's, else its newest refitted model's."""
    from streamembed.stream.checkpoint import CheckpointError, CheckpointStore

    try:
        ckpt = CheckpointStore(cfg.checkpoint_path).load()
    except (CheckpointError, OSError):
        ckpt = None  # the real load, later, says what is wrong with it
    if ckpt is not None and ckpt.lineage:
        return str(ckpt.lineage)
    for path in reversed(newest_models(cfg.model_dir, 1)):
        try:
            return str(load_model(path).lineage)
        except ModelFileError:
            return None
    return None


def _adopted_model(cfg: Config, topic: ModelTopic) -> LandmarkModel:
    """Without model.path: the topic's newest map of a lineage this replica can trace (see ``startup_model``)."""
    k = cfg.kafka
    want = k.adopt_lineage.strip() or own_lineage(cfg)
    deadline = time.monotonic() + k.model_wait_seconds
    while True:
        remote = topic.latest(lineage=None) if want == "*" else (topic.latest(lineage=want) if want else None)
        if remote is not None:
            topic.follow(remote.lineage)
            log.info("using the model from the model topic",
                     extra={"model_version": int(remote.version), "lineage": remote.lineage})
            return remote
        found = topic.lineages()
        if want is None and found:
            raise StartupError(
                f"model.path is empty and this root has run no map, so this replica cannot tell which map on "
                f"kafka.model_topic = {k.model_topic!r} (key {k.model_name!r}) is its own: it holds {_named(found)}. "
                f"Set model.path, or kafka.adopt_lineage to the lineage to take ('*': the newest, whatever its "
                f"lineage)")
        if time.monotonic() >= deadline or topic.stop.is_set():
            what = f"of lineage {want} " if want and want != "*" else ""
            held = f" (it holds {_named(found)})" if found else ""
            raise EnvironmentUnavailable(
                f"no model {what}on kafka.model_topic = {k.model_topic!r} (key {k.model_name!r}) after "
                f"{k.model_wait_seconds:.0f} s{held}, and model.path is empty: start a replica with model.path first")
        topic.stop.wait(1.0)


class ModelSync:
    """Between batches: install a newer model from the topic; publish a newer local one (a refit).

    Never installs a model older than (or as old as) the current one (the
    registry refuses it anyway), nor one of another lineage. Counts installs
    as ``refits{trigger="remote"}``.
    """

    def __init__(self, topic: ModelTopic, registry: ModelRegistry, *, monitor: DriftMonitor | None = None,
                 metrics: Metrics | None = None, poll_seconds: float = 2.0) -> None:
        self.topic = topic
        self.registry = registry
        self.monitor = monitor
        self.metrics = metrics
        self.poll_seconds = float(poll_seconds)
        self._next = 0.0
        self._published = topic.topic_version  # a newer current model is a local refit: publish it
        self.installed = 0
        topic.follow(registry.current.lineage)
        topic.start_watching(poll_seconds=max(0.2, min(1.0, self.poll_seconds)))

    def claim(self, est: LandmarkModel) -> str | None:
        """Claim ``est``'s version on the topic before a local refit is installed: None if it is ours (then it
        is published), else why not (another replica's refit took the version first: it arrives by ``poll``).
        Raises ValueError when the topic cannot be written (unclaimed: not installed, one map per version)."""
        try:
            why = self.topic.claim(est)
        except Exception as exc:  # noqa: BLE001
            raise ValueError(f"its version could not be claimed on the model topic ({type(exc).__name__}: "
                             f"{exc})") from None
        if why is None:
            self._published = max(self._published, int(est.version))
        return why

    def poll(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.poll_seconds
        current = self.registry.current_version
        new = self.topic.poll_new(current)
        if new is not None:
            if new.lineage != self.registry.current.lineage:
                log.warning("ignoring model version %d on the model topic: another map (lineage %s)", new.version,
                            new.lineage)
                return
            try:
                self.registry.install(new)
            except StaleModelError:
                return
            self._published = max(self._published, int(new.version))
            self.installed += 1
            if self.monitor is not None:
                self.monitor.reset(new)
            if self.metrics is not None:
                self.metrics.model_version.set(int(new.version))
                self.metrics.refits.labels(trigger="remote").inc()
            log.info("installed a newer model from the model topic", extra={"model_version": int(new.version),
                                                                            "previous": current})
            return
        if current > self._published:
            try:
                self.topic.publish(self.registry.current)
                self._published = current
            except Exception:  # noqa: BLE001 - the stream goes on; try again next time
                log.warning("publishing model version %d failed; will retry", current, exc_info=True)
