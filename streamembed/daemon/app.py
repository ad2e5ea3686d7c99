"""The daemon: configuration -> model -> source, sinks, loop, ops server.

``run_daemon(cfg)`` returns the process exit code: 0 after a clean stop
(SIGTERM/SIGINT, limits reached, or an exhausted source), 2 when it refuses
to start (bad configuration, missing or corrupt model, unusable checkpoint),
1 when the loop died of an unexpected error (nothing uncommitted is lost:
the next start resumes from the last checkpoint).
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from streamembed.daemon.config import Config
from streamembed.daemon.health import HealthState, OpsServer
from streamembed.daemon.logs import setup_logging
from streamembed.daemon.metrics import Metrics
from streamembed.kafka.wiring import KafkaIO, ModelSync, build_io, open_model_topic, startup_model
from streamembed.kafka.wiring import build_source as build_kafka_source
from streamembed.daemon.refits import RefitManager, newest_models
from streamembed.stream.checkpoint import CheckpointError, CheckpointStore
from streamembed.stream.models import ModelRegistry
from streamembed.stream.monitor import DriftMonitor, build_trigger
from streamembed.stream.generator import GaussianMixtureStream, GeneratorSource
from streamembed.stream.loop import EmbeddingLoop, LoopSettings
from streamembed.atomic import atomic_write_bytes
from streamembed.stream.sinks import DeadLetterSink, ParquetSink
from streamembed.stream.sources import DirectorySource, Source

__all__ = ["StartupError", "run_daemon", "load_or_fit_model", "build_source", "k0_rows_value"]

log = logging.getLogger("streamembed.daemon")

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2


class StartupError(RuntimeError):
    """The daemon refuses to start; the message says what to fix."""


def k0_rows_value(value: str | int) -> None | str | int:
    """Config ``model.k0_rows`` -> the core's ``k0_rows`` argument."""
    if isinstance(value, str):
        return None if value == "none" else "all"
    return int(value)


def load_or_fit_model(cfg: Config) -> Any:
    """The configured model: loaded from ``model.path``, else fitted from generator samples."""
    from streamembed import LandmarkMDS, ModelFileError
    from streamembed.core.landmarks import maxmin_select
    from streamembed.model_io import load_model, save_model

    m = cfg.model
    if m.path:
        path = Path(m.path)
        if not path.exists():
            raise StartupError(f"model.path = {m.path!r} does not exist: make a model with `streamembed fit` "
                               f"or leave model.path empty to fit one from the generator")
        try:
            est = load_model(path)
        except (ModelFileError, OSError) as exc:
            raise StartupError(f"model.path = {m.path!r} cannot be loaded: {exc}") from None
        try:
            est.check_method(m.method)
        except ValueError as exc:
            raise StartupError(f"model.method = {m.method!r} does not suit model.path = {m.path!r}: {exc}") from None
        return est
    stream = GaussianMixtureStream(cfg.generator)
    X = stream.fit_sample(m.fit_sample)
    rng = np.random.default_rng([cfg.generator.seed, 7])
    if m.landmark_selection == "maxmin":
        idx = maxmin_select(m.n_landmarks, X=X, metric=m.metric, first=int(rng.integers(len(X))))
    else:
        idx = np.sort(rng.choice(len(X), size=m.n_landmarks, replace=False))
    try:
        fitted = LandmarkMDS(n_components=m.n_components, method=m.method, input=m.input,
                             geodesic_neighbors=m.geodesic_neighbors or None, correction=m.correction,
                             landmark_map=m.landmark_map)
        fitted.fit_features(X[idx], metric=m.kernel if m.input == "similarity" else m.metric)
        est = fitted.model_
    except ValueError as exc:
        raise StartupError(f"cannot fit a model from the generator ({exc}); check [model] and [generator]") from None
    log.info("fitted a model from generator samples",
             extra={"landmarks": m.n_landmarks, "dims": m.n_components,
                    "metric": f"{m.kernel} kernel" if m.input == "similarity" else m.metric})
    if m.save_path:
        save_model(est, m.save_path, params=fitted.get_params())
        log.info("saved the fitted model", extra={"path": m.save_path})
    return est


def build_registry(cfg: Config, est: Any) -> ModelRegistry:
    """The served models: ``est`` plus newer refitted versions found in the model directory."""
    from streamembed import ModelFileError
    from streamembed.model_io import load_model

    registry = ModelRegistry(est, retain=cfg.refit.retain_versions)
    for path in newest_models(cfg.model_dir, cfg.refit.retain_versions + 1):
        try:
            m = load_model(path)
        except ModelFileError as exc:
            raise StartupError(f"{path} cannot be loaded ({exc}); remove it to fall back to an older version") from None
        if int(m.version) > registry.current_version:
            registry.install(m)
            log.info("resuming with a refitted model", extra={"model_version": int(m.version),
                                                              "path": str(path)})
    return registry


def build_drift(cfg: Config, registry: ModelRegistry, metrics: Metrics) -> tuple[DriftMonitor | None, RefitManager | None]:
    """The drift monitor and refit manager of the [drift] and [refit] sections (None, None if disabled)."""
    d, r = cfg.drift, cfg.refit
    if not d.enabled:
        return None, None
    monitor = DriftMonitor(registry.current, d, build_trigger(d), metrics)
    cfg.model_dir.mkdir(parents=True, exist_ok=True)
    refits = RefitManager(r, registry, monitor, cfg.model_dir, cfg.history_path, metrics)
    return monitor, refits


def build_source(cfg: Config, est: Any, registry: ModelRegistry | None = None) -> Source:
    s = cfg.source
    if s.kind == "directory":
        d = cfg.directory
        if not Path(d.path).is_dir():
            log.warning("directory.path = %r does not exist (yet); waiting for it to appear", d.path)
        return DirectorySource(d.path, pattern=d.pattern, batch_rows=s.batch_rows, settle_seconds=d.settle_seconds,
                               poll_seconds=d.poll_seconds, max_block_rows=s.max_block_rows,
                               exit_when_idle=d.exit_when_idle)
    g = cfg.generator
    feats = est.features
    if feats is None or feats.shape[1] != g.n_features:
        have = "no landmark features" if feats is None else f"{feats.shape[1]} features"
        raise StartupError(f"source.kind = 'generator' needs a model fitted from {g.n_features}-dimensional "
                           f"feature vectors (generator.n_features), but model.path = {cfg.model.path!r} has "
                           f"{have}: leave model.path empty or fit the model with `streamembed fit --features`")
    to_diss = None
    if g.emit == "dissimilarities":
        if registry is None:
            to_diss = est.dissimilarities_to_landmarks
        else:
            def to_diss(X: np.ndarray) -> tuple[np.ndarray, int]:
                model = registry.current  # follow refits: stamp the landmark version used
                return model.dissimilarities_to_landmarks(X), int(model.version)
    return GeneratorSource(GaussianMixtureStream(g), batch_rows=s.batch_rows, rate=g.rate,
                           id_prefix=g.id_prefix, to_dissimilarities=to_diss)


class _Signals:
    """SIGTERM/SIGINT set ``stop``; the loop ends after the current batch. SIGUSR1 asks for a refit."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.on_refit: Any = None
        self._old: dict[int, Any] = {}

    def _refit(self, signum: int, frame: FrameType | None) -> None:
        if self.on_refit is not None:
            self.on_refit()

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        log.info("signal received; stopping after the current batch", extra={"signal": signal.Signals(signum).name})
        self.stop.set()

    def __enter__(self) -> "_Signals":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._old[sig] = signal.signal(sig, self._handler)
            self._old[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, self._refit)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def run_daemon(cfg: Config, *, stop: threading.Event | None = None, metrics: Metrics | None = None) -> int:
    """Run the engine with ``cfg`` until stopped; returns the exit code."""
    setup_logging(cfg.logging.level, cfg.logging.format)
    stop = stop or threading.Event()
    metrics = metrics or Metrics()
    health = HealthState(cfg.metrics.wedged_after_seconds)
    server: OpsServer | None = None
    refits: RefitManager | None = None
    kafka_io = KafkaIO()
    with _Signals(stop) as signals:
        try:
            if cfg.metrics.enabled:
                server = _start_server(cfg, metrics, health)
            model_topic = open_model_topic(cfg, kafka_io, metrics=metrics, stop=stop)
            est = startup_model(cfg, model_topic, load_or_fit_model)
            registry = build_registry(cfg, est)
            est = registry.current
            source = (build_kafka_source(cfg, kafka_io, metrics=metrics, stop=stop) if cfg.source.kind == "kafka"
                      else build_source(cfg, est, registry))
            monitor, refits = build_drift(cfg, registry, metrics)
            if refits is not None:
                signals.on_refit = refits.request_manual
                if cfg.source.kind == "kafka":
                    # one replica of the group leads automatic refits: the owner of input partition 0;
                    # the others take its model from the model topic (ModelSync)
                    refits.may_auto_refit = lambda: 0 in source.assigned_partitions
            checkpoints = CheckpointStore(cfg.checkpoint_path)
            output = ParquetSink(cfg.embeddings_dir, row_group_rows=cfg.output.row_group_rows,
                                 compression=cfg.output.compression) if cfg.output.parquet else None
            dead = DeadLetterSink(cfg.dead_letter_dir, fmt=cfg.output.dead_letter_format, source=source.name,
                                  compression=cfg.output.compression) if cfg.source.kind != "kafka" else None
            # Parquet and/or the Kafka output topic; the dead-letter topic for a Kafka source
            output, dead = build_io(cfg, kafka_io, source, output, dead, metrics=metrics, stop=stop)
            model_sync = None if model_topic is None else ModelSync(
                model_topic, registry, monitor=monitor, metrics=metrics, poll_seconds=cfg.kafka.model_poll_seconds)
            between = [f for f in (None if refits is None else refits.poll,
                                   None if model_sync is None else model_sync.poll) if f is not None]
            loop = EmbeddingLoop(est, source, output, dead, checkpoints, settings=_settings(cfg), metrics=metrics,
                                 health=health, stop=stop, registry=registry, monitor=monitor,
                                 between_batches=_chain(between))
            _write_pid(cfg)
            loop.restore()
        except (StartupError, CheckpointError, OSError) as exc:
            log.error("refusing to start: %s", exc)
            kafka_io.close()
            if server is not None:
                server.stop()
            return EXIT_REFUSED
        _describe_model(metrics, est, cfg)
        health.model_loaded = True
        log.info("running", extra={"source": source.name, "output": str(cfg.embeddings_dir)})
        code = EXIT_OK
        try:
            stats = loop.run()
            log.info("stopped", extra={"batches": stats.batches, "records_in": stats.records_in,
                                       "embedded": stats.embedded, "dead_letters": stats.dead,
                                       "commits": stats.commits})
        except Exception:  # noqa: BLE001 - report, exit non-zero; the checkpoint is intact
            log.exception("the loop failed; restart resumes from the last checkpoint")
            code = EXIT_FAILED
        finally:
            if refits is not None:
                refits.close()
            output.close()
            dead.close()
            source.close()
            kafka_io.close()
            cfg.pid_path.unlink(missing_ok=True)
            if server is not None:
                server.stop()
        return code


def _chain(calls: list[Any]) -> Any:
    """One between-batches callable running ``calls`` in order (None when there are none)."""
    if not calls:
        return None
    if len(calls) == 1:
        return calls[0]

    def run_all() -> None:
        for call in calls:
            call()

    return run_all


def _write_pid(cfg: Config) -> None:
    """``<root>/streamembed.pid``: where ``streamembed refit`` sends SIGUSR1."""
    import os

    cfg.pid_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(cfg.pid_path, f"{os.getpid()}\n".encode())


def _settings(cfg: Config) -> LoopSettings:
    return LoopSettings(method=cfg.model.method, k0_rows=k0_rows_value(cfg.model.k0_rows),
                        max_batches=cfg.run.max_batches, max_records=cfg.run.max_records,
                        roll_rows=cfg.output.roll_rows, roll_seconds=cfg.output.roll_seconds,
                        max_block_rows=cfg.source.max_block_rows,
                        max_idle_sleep=max(0.05, min(1.0, cfg.directory.poll_seconds)))


def _start_server(cfg: Config, metrics: Metrics, health: HealthState) -> OpsServer:
    try:
        server = OpsServer(metrics.registry, health, cfg.metrics.host, cfg.metrics.port).start()
    except OSError as exc:
        raise StartupError(f"cannot listen on metrics.host = {cfg.metrics.host!r}, metrics.port = "
                           f"{cfg.metrics.port}: {exc} (choose another port, or 0 for a free one)") from None
    log.info("ops server listening on http://%s:%d (/metrics /healthz /readyz)", server.host, server.port,
             extra={"host": server.host, "port": server.port})
    if cfg.metrics.port_file:
        atomic_write_bytes(cfg.metrics.port_file, f"{server.port}\n".encode())
    return server


def _describe_model(metrics: Metrics, est: Any, cfg: Config) -> None:
    metrics.model_version.set(int(est.version))
    metrics.model_info.info({
        "landmarks": str(est.n_landmarks),
        "dims": str(est.n_components),
        "method": cfg.model.method,
        "metric": str(est.metric or ""),
        "source": cfg.model.path or "generator",
    })
