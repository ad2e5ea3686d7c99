"""The model side of building the daemon: which model a run starts with (``model.path``, a generator fit, or the
model topic's, whichever is newer), its refitted versions, the drift monitor and refits, and ``ModelSync``, which
follows the model topic between batches and publishes local refits.

``daemon.assembly`` builds the data side (source, sinks, Kafka clients); ``daemon.app.run_daemon`` wires both into
the one streaming loop. What cannot work refuses with ``StartupError`` (exit 2).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable


import numpy as np

from streamembed.core.fit.features import feature_matrix, fit_feature_model, fit_warnings
from streamembed.core.monitor.fit_baseline import fit_baseline_on_matrix
from streamembed.core.trust.calibrate import calibrate_on_matrix
from streamembed.core.monitor.detector import CalibrationError
from streamembed.core.options import DEFAULTS
from streamembed.core.errors import ModelFileError
from streamembed.core.model import LandmarkModel
from streamembed.daemon.errors import EnvironmentUnavailable, StartupError
from streamembed.daemon.refits import RefitManager, newest_models
from streamembed.daemon.state import descendants
from streamembed.estimator_inputs import PRECOMPUTED
from streamembed.fsafe import make_dirs
from streamembed.model_io import load_model, save_model
from streamembed.config.core_args import core_value
from streamembed.config.schema import Config
from streamembed.stream.sources.generator import GaussianMixtureStream
from streamembed.stream.registry import ModelRegistry, StaleModelError
from streamembed.monitors.drift import DriftMonitor, build_trigger

if TYPE_CHECKING:  # the model topic is Kafka's: imported (kafka.wiring) only when configured
    from streamembed.kafka.model_topic import ModelTopic
    from streamembed.ops.metrics import Metrics

__all__ = ["load_or_fit_model", "build_registry", "build_drift", "ModelSync", "startup_model", "model_source",
           "own_lineage", "save_generator_model", "DEFAULT_MODEL_NAME"]

log = logging.getLogger("streamembed.daemon")


#: Where the run keeps a generator-fitted model (in output.root) unless model.save_path says otherwise.
DEFAULT_MODEL_NAME = "model.npz"


def model_source(cfg: Config) -> str:
    """Where the configured model comes from, as a short name (no absolute paths in metric labels)."""
    if cfg.model.path:
        return Path(cfg.model.path).name
    return f"model topic {cfg.kafka.model_topic}" if cfg.kafka.model_topic else "generator"


#: Objects of the generator sample that calibrate a generator-fitted model's radius (docs/math.md §9).
GENERATOR_CALIBRATION_OBJECTS = 400


def load_or_fit_model(cfg: Config) -> LandmarkModel:
    """The configured model: loaded from ``model.path``, else fitted from generator samples."""
    from streamembed.core.refit.landmarks import initial_landmarks

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
        sigma = core_value(m, "kernel_bandwidth")
        if sigma is not None:  # [model] kernel_bandwidth overrides the file's σ (docs/math.md §8.6)
            model = model.with_kernel_bandwidth(sigma)
        try:
            model.check_method(m.method)
        except ValueError as exc:
            raise StartupError(f"model.method = {m.method!r} does not suit model.path = {m.path!r}: {exc}") from None
        return stated_coverage(model, cfg.trust.coverage, m.method)
    stream = GaussianMixtureStream(cfg.generator)
    X = stream.fit_sample(m.fit_sample)
    options = _generator_options(cfg)
    try:
        idx = initial_landmarks(m.landmark_selection, m.n_landmarks, X=X, metric=m.metric,
                                random_state=options["random_state"], n_components=m.n_components)
        model = fit_feature_model(X[idx], m.kernel if m.input == "similarity" else m.metric, **options)
        model.check_method(m.method)  # e.g. method = kernel on landmarks that give no bandwidth
        # the radius, on (a seeded sample of) the sample's objects that are not landmarks: ~0.1 s at start
        model = _calibrated(model, X, idx, cfg)
    except ValueError as exc:
        raise StartupError(f"cannot fit a model from the generator ({exc}); check [model] and [generator]") from None
    for warning in fit_warnings(model):
        log.warning("%s", warning)
    log.info("fitted a model from generator samples",
             extra={"landmarks": m.n_landmarks, "dims": m.n_components,
                    "metric": f"{m.kernel} kernel" if m.input == "similarity" else m.metric})
    if m.save_path and m.save_path != "none":  # the default place is written later: save_generator_model
        save_model(model, m.save_path, params=_estimator_params(cfg))
        log.info("saved the fitted model", extra={"path": m.save_path})
    return model


def _generator_options(cfg: Config) -> dict[str, Any]:
    """``core.model.fit_model``'s options for the generator's model, as [model] configures it (seeded by
    generator.seed: it seeds the landmark selection, as ``streamembed fit --seed`` does); the option table's
    defaults for the options [model] does not have."""
    m = cfg.model
    return {"n_components": int(m.n_components), "input": m.input,
            "geodesic_neighbors": core_value(m, "geodesic_neighbors"), "correction": m.correction,
            "landmark_map": m.landmark_map, "n_residual_components": DEFAULTS["n_residual_components"],
            "eigensolver": DEFAULTS["eigensolver"], "random_state": cfg.generator.seed,
            "n_threads": DEFAULTS["n_threads"], "kernel_bandwidth": core_value(m, "kernel_bandwidth")}


def _estimator_params(cfg: Config) -> dict[str, Any]:
    """The parameters a ``LandmarkMDS`` takes back from the generator's saved model (``model_io``'s "params"): the
    fit's options, [model]'s method, and the option table's defaults for the landmark options; its X are
    dissimilarity rows ("precomputed")."""
    return {**_generator_options(cfg), "method": cfg.model.method, "n_landmarks": DEFAULTS["n_landmarks"],
            "landmark_selection": DEFAULTS["landmark_selection"], "metric": PRECOMPUTED,
            "coverage": cfg.trust.coverage}


def _calibrated(model: LandmarkModel, X: np.ndarray, idx: np.ndarray, cfg: Config) -> LandmarkModel:
    """The generator model with its radius calibrated on the sample X's objects that are not landmarks
    (docs/math.md §9), and its drift detectors' fit baseline on them (§7.8); as it is, with a WARNING saying
    why, when the radius cannot be made."""
    M = feature_matrix(np.asarray(X, dtype=np.float64), str(model.metric), model.input_kind)
    lm = np.asarray(idx, dtype=np.int64)
    result = calibrate_on_matrix(model, M, lm, coverage=cfg.trust.coverage,
                                 random_state=int(cfg.generator.seed), max_objects=GENERATOR_CALIBRATION_OBJECTS)
    if result.calibration is None:
        log.warning("%s", result.reason)
    model = model.with_radius_calibration(result.calibration)
    return model.with_fit_baseline(fit_baseline_on_matrix(model, M, lm, random_state=int(cfg.generator.seed)))


def stated_coverage(model: LandmarkModel, coverage: float, method: str) -> LandmarkModel:
    """``model`` stating ``trust.coverage`` (its stored calibration rescaled, docs/math.md §9), with a WARNING when
    the calibration has too few objects for it and an INFO line when the model has no radius at all."""
    cal = model.radius_calibration
    if cal is None:
        log.info("the model has no radius calibration: the output's radius column is null (fit it with more "
                 "objects than landmarks, docs/math.md 9)")
        return model
    if cal.coverage != coverage:
        cal = cal.with_coverage(coverage)
        model = model.with_radius_calibration(cal)
    if method in cal.methods and cal.shortfall(method):
        log.warning("no radius: the model's calibration has %d objects for method %s, coverage %g needs %d more",
                    cal.methods[method].ratios.size, method, coverage, cal.shortfall(method))
    return model


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
    save_model(model, path, params=_estimator_params(cfg))
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
        others = topic.lineages() if remote is None else {}
        if local.lineage in others:  # another replica of this map published it since latest() read the topic
            remote = topic.latest()
        if remote is None:
            others.pop(local.lineage, None)
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
    except Exception as exc:
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

    def claim(self, model: LandmarkModel) -> str | None:
        """Claim ``model``'s version on the topic before a local refit is installed: None if it is ours (then it
        is published), else why not (another replica's refit took the version first: it arrives by ``poll``).
        Raises ValueError when the topic cannot be written (unclaimed: not installed, one map per version)."""
        try:
            why = self.topic.claim(model)
        except Exception as exc:
            raise ValueError(f"its version could not be claimed on the model topic ({type(exc).__name__}: "
                             f"{exc})") from None
        if why is None:
            self._published = max(self._published, int(model.version))
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
            except Exception:  # the stream goes on; try again next time
                log.warning("publishing model version %d failed; will retry", current, exc_info=True)
