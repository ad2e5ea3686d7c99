"""The daemon: configuration -> model -> the one streaming loop, plus the ops server, signals and exit codes.

``run_daemon(cfg)`` returns the process exit code (``daemon.errors``): 0 after
a clean stop (SIGTERM/SIGINT, limits reached, or an exhausted source), 1 when
the loop died of an unexpected error (nothing durable is lost: the next start
resumes from the checkpoint), 2 when it refuses to start (configuration,
model file or run state a restart cannot fix), 3 when the environment is not
ready (disk full, port taken, brokers unreachable: restart later).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any, cast

from streamembed.atomic import atomic_write_bytes
from streamembed.core.model import LandmarkModel
from streamembed.fsafe import modes, parse_mode, set_modes
from streamembed.daemon.assembly import build_file_sinks, build_io, build_source, open_kafka, preflight, source_kind
from streamembed.daemon.model_setup import (ModelSync, build_drift, build_registry, load_or_fit_model, model_source,
                                            save_generator_model, startup_model)
from streamembed.config import ConfigError, check_memory, weakening_settings
from streamembed.daemon.errors import (EXIT_FAILED, EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE, EnvironmentUnavailable,
                                       StartupError, is_environment_error)
from streamembed.ops.health import HealthState
from streamembed.ops.logs import setup_logging
from streamembed.daemon.metric_setup import object_spec
from streamembed.stream.unversioned import START
from streamembed.daemon.refits import RefitManager
from streamembed.daemon.signals import DaemonSignals
from streamembed.daemon.state import (PidLock, archive_run, check_lineage, clean_leftovers, clean_refit_dirs,
                                      describe_model, model_record, writer_tag)
from streamembed.config.core_args import core_value
from streamembed.config.schema import Config
from streamembed.stream.sinks.base import StoppedUndelivered
from streamembed.stream.checkpoint import CheckpointError, Checkpointer, CheckpointStore, CrashGuard
from streamembed.monitors.consistency import ConsistencyMonitor
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.loop import EmbeddingLoop, RollPolicy
from streamembed.stream.read_ahead import ReadAhead
from streamembed.stream.sources.base import SourceContext

if TYPE_CHECKING:  # the ops server and the Prometheus metrics are imported only when enabled (docs/throughput.md)
    from streamembed.ops.endpoints import OpsServer
    from streamembed.ops.metrics import Metrics

__all__ = ["run_daemon", "StartupError", "EnvironmentUnavailable"]

log = logging.getLogger("streamembed.daemon")


def run_daemon(cfg: Config, *, stop: threading.Event | None = None, metrics: Metrics | None = None) -> int:
    """Run the engine with ``cfg`` until stopped; returns the exit code."""
    setup_logging(cfg.logging.level, cfg.logging.format)
    # every file and directory it creates gets these modes, whatever the umask (fsafe); restored on return
    old_modes = modes()
    old_umask = set_modes(parse_mode(cfg.output.file_mode), parse_mode(cfg.output.dir_mode))
    try:
        return _run(cfg, stop, metrics)
    finally:
        set_modes(*old_modes, umask=False)
        if old_umask is not None:
            os.umask(old_umask)


def _run(cfg: Config, stop: threading.Event | None, metrics: Metrics | None) -> int:
    stop = stop or threading.Event()
    metrics = metrics or _metrics(cfg)
    health = HealthState(cfg.metrics.wedged_after_seconds)
    server: OpsServer | None = None
    closers: list[Any] = []
    with DaemonSignals(stop) as signals:
        for warning in weakening_settings(cfg):
            log.warning("%s", warning)
        try:
            if cfg.metrics.enabled:
                server = _start_server(cfg, metrics, health)
            loop, model, refits = _assemble(cfg, metrics, health, stop, signals, closers)
        except Exception as exc:  # asked to stop while starting: whatever was waited for is moot
            if not stop.is_set():
                code = _startup_code(exc)
                return _close(closers, server, code)
            log.info("stopped during start-up (%s: %s)", type(exc).__name__, exc)
            return _close(closers, server, EXIT_OK)
        _describe_model(metrics, model, cfg)
        if server is not None and cfg.metrics.map_points:
            from streamembed.ops.map_view import MapView

            view = MapView(loop.embedder.registry, monitor=loop.embedder.monitor, history_path=cfg.history_path,
                           points=cfg.metrics.map_points)
            loop.on_batch = view.observe  # one cheap call per batch: keeps the newest rows
            server.map_view = view
        health.model_loaded = True
        log.info("running", extra={"source": loop.source.name, "output": str(cfg.embeddings_dir)})
        code = EXIT_OK
        try:
            stats = loop.run()
            if refits is not None and not stop.is_set():  # the input ended (batch mode): finish a pending refit
                log.info("input exhausted: %s", refits.drain(cfg.refit.drain_seconds, stop))
            log.info("stopped", extra={"batches": stats.batches, "records_in": stats.records_in,
                                       "embedded": stats.embedded, "dead_letters": stats.dead,
                                       "commits": stats.commits})
        except Exception as exc:  # report and exit non-zero; the checkpoint is intact
            if stop.is_set() and isinstance(exc, StoppedUndelivered):
                log.warning("stopped after run.stop_seconds = %g s with output not yet acknowledged: %s (nothing is "
                            "lost: the uncommitted input is read and produced again after the restart)",
                            cfg.run.stop_seconds, exc)
                code = EXIT_OK
            elif is_environment_error(exc) or _brokers_away(exc):
                log.error("the environment failed under the loop (exit %d, to be retried; the next start resumes "
                          "from the last checkpoint): %s: %s", EXIT_UNAVAILABLE, type(exc).__name__, exc)
                code = EXIT_UNAVAILABLE
            else:
                log.exception("the loop failed; restart resumes from the last checkpoint")
                code = EXIT_FAILED
        return _close(closers, server, code)


def _assemble(cfg: Config, metrics: Metrics, health: HealthState, stop: threading.Event, signals: DaemonSignals,
              closers: list[Any]) -> tuple[EmbeddingLoop, LandmarkModel, RefitManager | None]:
    """Everything the loop needs, in the order that makes refusals cheap (nothing written before the checks).

    Whatever needs closing is appended to ``closers`` as it is made (closed in reverse).
    """
    preflight(cfg)
    kafka = open_kafka(cfg, metrics, stop)  # None unless the run uses Kafka: then nothing of it is imported
    if kafka is not None:
        closers.append(kafka.close)
    model_topic = None if kafka is None else kafka.open_model_topic()
    model = startup_model(cfg, model_topic, load_or_fit_model)
    feats = model.features
    objects = object_spec(cfg, model)  # the metric of rows carrying objects: an unusable one refuses here
    try:  # now that the model's sizes are known, not only their lower bounds
        check_memory(cfg, n_features=0 if feats is None or model.has_objects else int(feats.shape[1]),
                     n_landmarks=model.n_landmarks)
    except ConfigError as exc:
        raise StartupError(str(exc)) from None
    source_name = model_source(cfg)
    store = CheckpointStore(cfg.checkpoint_path)
    pid = PidLock(cfg.pid_path)
    if cfg.run.fresh:  # the lock first: --fresh must not move a running daemon's state from under it
        pid.acquire()
        closers.append(pid.release)
        archive_run(cfg)
    ckpt = store.load()
    check_lineage(ckpt, model, source_name, cfg)
    if not cfg.run.fresh:  # after the checks: a refusal leaves nothing behind
        pid.acquire()
        closers.append(pid.release)
    tag = writer_tag(cfg.root)
    save_generator_model(cfg, model)
    clean_refit_dirs(cfg.model_dir)
    clean_leftovers(cfg)
    registry = build_registry(cfg, model)
    current = registry.current
    log.info("model: %s", describe_model(current, source_name),
             extra={"path": cfg.model.path or None, "version": current.version, "lineage": current.lineage,
                    "landmarks": current.n_landmarks, "method": cfg.model.method})
    if ckpt is not None and ckpt.model_version is not None and ckpt.model_version > current.version:
        log.warning("the checkpoint was written with model version %d, but the newest version found is %d "
                    "(models/ was pruned?); continuing with version %d", ckpt.model_version, current.version,
                    current.version)
    monitor, refits = build_drift(cfg, registry, metrics)
    if refits is not None and monitor is not None:
        refits.metric_name = None if objects is None else objects.metric
        refits.max_object_length = cfg.metric.max_object_length
        monitor.keep_rows = cfg.refit.request_seconds > 0  # rows alone: a refit request names them
        refits.requests = _refit_requests(cfg, refits)
    setup = build_source(cfg, SourceContext(current, registry, metrics, stop, kafka))
    inner = setup.source
    if refits is not None:
        signals.on_refit = refits.request_manual
        closers.append(refits.close)
        if setup.leads_refits is not None:  # e.g. one replica of a consumer group leads automatic refits
            refits.may_auto_refit = setup.leads_refits
    parquet, dead_files = build_file_sinks(cfg, inner.name, tag)
    output, dead = build_io(cfg, kafka, setup, parquet, dead_files)
    closers += [output.close, dead.close]
    source = ReadAhead(inner, depth=2)
    closers.append(source.close)
    # the checkpoint records the model in use when it is written: after a refit, the refitted version
    checkpointer = Checkpointer([output, dead], source, store, lambda: model_record(registry.current, source_name))
    if checkpointer.restore(ckpt):
        log.info("resuming from checkpoint", extra={"source": inner.name})
    model_sync = None if model_topic is None else ModelSync(model_topic, registry, monitor=monitor, metrics=metrics,
                                                            poll_seconds=cfg.kafka.model_poll_seconds)
    if model_sync is not None and refits is not None:
        refits.claim = model_sync.claim  # one map per version across the fleet
    between = [f for f in (None if refits is None else refits.poll,
                           None if model_sync is None else model_sync.poll) if f is not None]
    embedder = BatchEmbedder(current, method=cfg.model.method, k0_rows=core_value(cfg.model, "k0_rows"),
                             max_block_rows=cfg.source.max_block_rows, registry=registry, monitor=monitor,
                             max_batch_seconds=cfg.model.max_batch_seconds, cancelled=stop.is_set,
                             consistency=ConsistencyMonitor(cfg.consistency, metrics=metrics, health=health),
                             output_version=cfg.output.schema_version, objects=objects,
                             unversioned_rows=_unversioned_rows(cfg, model), started_version=int(model.version))
    guard = CrashGuard(cfg.root / "crash-guard.json", cfg.run.max_batch_attempts)
    loop = EmbeddingLoop(embedder, source, output, dead, checkpointer, run=cfg.run, roll=RollPolicy.of(cfg.output),
                         metrics=metrics, health=health, stop=stop, between_batches=_chain(between),
                         crash_guard=guard, overlap_commits=source_kind(cfg).commits == "behind")
    return loop, current, refits


def _refit_requests(cfg: Config, refits: RefitManager) -> Any:
    """The refit requests of a run (``daemon.request_refits``): on the model topic with Kafka's, else as files
    under ``output.root``; None with ``refit.request_seconds = 0``."""
    if cfg.refit.request_seconds <= 0:
        return None
    from streamembed.daemon.request_refits import DirectoryChannel, RefitRequests

    channel: Any = DirectoryChannel(cfg.root)
    answer_to = str(channel.dir)
    if cfg.kafka.model_topic:
        from streamembed.kafka.refit_channel import TopicChannel

        channel = TopicChannel.of_config(cfg)
        answer_to = f"kafka topic {cfg.kafka.model_topic} key {channel.answer_key.decode()}"
    return RefitRequests(channel, cfg.refit.request_seconds, cfg.refit.request_candidates, refits.record,
                         answer_to=answer_to)


def _unversioned_rows(cfg: Config, started: LandmarkModel) -> int | None:
    """``refit.unversioned_rows`` as a version (None: reject): "start" is the version of the model the daemon
    started with (``model.path``'s, the generator's or the topic's, before the refitted versions in models/)."""
    v = cfg.refit.unversioned_rows
    if v == "reject":
        return None
    return int(started.version) if v == START else int(v)


def _startup_code(exc: Exception) -> int:
    """Log why the daemon cannot start, and the exit code that says it: 2 refused, 3 to be retried."""
    if isinstance(exc, (StartupError, CheckpointError)):
        log.error("refusing to start: %s", exc)
        return EXIT_REFUSED
    if isinstance(exc, (EnvironmentUnavailable, OSError)):
        log.error("cannot start now (exit %d, to be retried): %s", EXIT_UNAVAILABLE, exc)
        return EXIT_UNAVAILABLE
    raise exc


def _brokers_away(exc: BaseException) -> bool:
    """A transient Kafka error (the brokers away) that ended the loop, e.g. stopped while retrying a commit."""
    if type(exc).__module__.split(".")[0] != "kafka" and "Kafka" not in type(exc).__name__:
        return False
    from streamembed.kafka.client import is_transient

    return is_transient(exc)


def _close(closers: list[Any], server: OpsServer | None, code: int) -> int:
    for close in reversed(closers):
        try:
            close()
        except Exception:  # shutting down: log and go on
            log.warning("closing %r failed", close, exc_info=True)
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


def _metrics(cfg: Config) -> Metrics:
    """The Prometheus metrics when the ops server serves them, else no-ops of the same names (no import of either)."""
    if cfg.metrics.enabled:
        from streamembed.ops.metrics import Metrics

        return Metrics()
    from streamembed.ops.no_metrics import NoMetrics

    return cast("Metrics", NoMetrics())  # the same attribute names (tests/ops/test_no_metrics.py), each a no-op


def _start_server(cfg: Config, metrics: Metrics, health: HealthState) -> OpsServer:
    from streamembed.ops.endpoints import OpsServer

    page = None
    if cfg.metrics.map_points:  # metrics.map_points = 0: no /map, and nothing of it loaded
        from streamembed.ops.map_page import MapPage

        page = MapPage.load()
    try:
        server = OpsServer(metrics.registry, health, cfg.metrics.host, cfg.metrics.port, map_page=page,
                           max_connections=cfg.metrics.max_connections,
                           max_per_client=cfg.metrics.max_connections_per_client,
                           request_timeout=cfg.metrics.request_timeout_seconds,
                           allowed_hosts=cfg.metrics.allowed_hosts).start()
    except OSError as exc:
        raise EnvironmentUnavailable(f"cannot listen on metrics.host = {cfg.metrics.host!r}, metrics.port = "
                                     f"{cfg.metrics.port}: {exc} (another process has the port? choose another, or "
                                     f"0 for a free one)") from None
    log.info("ops server listening on http://%s:%d (/metrics /healthz /readyz%s)", server.host, server.port,
             " /map" if cfg.metrics.map_points else "",
             extra={"host": server.host, "port": server.port})
    if cfg.metrics.port_file:
        atomic_write_bytes(cfg.metrics.port_file, f"{server.port}\n".encode())
    return server


def _describe_model(metrics: Metrics, model: LandmarkModel, cfg: Config) -> None:
    metrics.model_version.set(int(model.version))
    metrics.model_info.info({
        "lineage": str(model.lineage),
        "landmarks": str(model.n_landmarks),
        "dims": str(model.n_components),
        "method": cfg.model.method,
        "metric": str(model.metric or ""),
        "source": model_source(cfg),
    })
