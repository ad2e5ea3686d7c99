"""Background landmark refits, versioned and swapped in between batches (docs/math.md §5).

``RefitManager.poll()`` runs between batches on the loop's thread. When the
drift monitor has a pending trigger (or an operator asked with SIGUSR1 /
``streamembed refit``) and no refit is running, it writes the candidates
to a job file and starts ``refit_worker`` as a separate process. Later polls
check the process without waiting; when it is done the new model is loaded,
validated (newer version, finite and aligned), made current in the
registry (older versions stay retained for stale inputs), the monitor
restarts its window, and a record of the refit is appended to the model
history (JSON lines). Models live as ``model-v<N>.npz`` in the model
directory, so a restarted daemon continues with the newest one; a refit that
is rejected never stays there.

One map per version across a fleet: with a model topic, a finished refit is
installed only after ``claim`` (``ModelSync.claim``) took its version on the
topic - the first record of a version wins there - so that two replicas
refitting at once (a manual refit asked of both) cannot serve two different
"version N" maps: the loser's refit is dropped (status ``superseded``) and the
winner's map arrives through the topic.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

import numpy as np

from streamembed.blas_threads import THREAD_VARIABLES
from streamembed.core.errors import InputError
from streamembed.core.inputs.metrics import DEFAULT_METRIC
from streamembed.core.refit.refit import candidate_dissimilarities
from streamembed.fsafe import make_dirs
from streamembed.model_io import load_model, save_model
from streamembed.ops.history import append_record
from streamembed.config.core_args import core_value
from streamembed.config.schema import RefitConfig
from streamembed.daemon.refit_jobs import RefitSources
from streamembed.stream.registry import ModelRegistry, StaleModelError

__all__ = ["RefitManager", "model_path", "newest_models"]

log = logging.getLogger("streamembed.refit")

_MODEL_FILE = re.compile(r"^model-v(\d+)\.npz$")


def _expectation(rec: dict[str, Any]) -> str:
    """What an operator should expect of the gauges after an installed refit, from the refit's own measurements."""
    try:
        before, after, best = (float(rec[k]) for k in ("unexplained_before", "unexplained_after", "unexplained_best"))
    except (KeyError, TypeError, ValueError):
        return ""
    return (f"; on the recent objects the mean unexplained energy goes {before:.4g} → {after:.4g} (the best any "
            f"map of this dimension reaches is {best:.4g}): expect the gauges to fall toward that level, not below it")


def worker_environment() -> dict[str, str]:
    """The refit worker's environment: one BLAS thread, so the stream keeps a core.

    On a small machine a multithreaded eigensolver would take every core from
    the loop (and from the Kafka client's heartbeats) for the refit's duration.
    The directory this ``streamembed`` package was imported from comes first on
    PYTHONPATH, so the worker runs the daemon's own code, not another install.
    """
    import os

    import streamembed

    env = dict(os.environ)
    home = str(Path(streamembed.__file__).resolve().parents[1])
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != home]
    env["PYTHONPATH"] = os.pathsep.join([home, *rest])
    for var in THREAD_VARIABLES:
        env[var] = "1"
    env["STREAMEMBED_REFIT_PARENT"] = str(os.getpid())  # the worker dies with this process (refit_worker)
    return env


def model_path(model_dir: Path, version: int) -> Path:
    return Path(model_dir) / f"model-v{int(version)}.npz"


def newest_models(model_dir: Path, count: int) -> list[Path]:
    """The ``count`` newest ``model-v<N>.npz`` files, oldest first."""
    d = Path(model_dir)
    if not d.is_dir():
        return []
    found = sorted((int(m.group(1)), p) for p in d.iterdir() if (m := _MODEL_FILE.match(p.name)))
    return [p for _, p in found[-count:]]


class RefitManager(RefitSources):
    """Starts, watches and installs refits; never blocks the stream."""

    def __init__(self, settings: RefitConfig, registry: ModelRegistry, monitor: Any, model_dir: Path,
                 history_path: Path, metrics: Any = None) -> None:
        self.settings = settings
        self.registry = registry
        self.monitor = monitor
        self.model_dir = Path(model_dir)
        self.history_path = Path(history_path)
        self.metrics = metrics
        self._manual = threading.Event()
        #: whether this replica may start automatic refits (Kafka: the owner of input partition 0)
        self.may_auto_refit: Callable[[], bool] = lambda: True
        #: claim(new model) before installing it: None when its version is this replica's to install, else why not
        self.claim: Callable[[Any], str | None] | None = None
        #: the metric of the objects rows carry ([metric] name or the model's; None: the model's), and its limit
        self.metric_name: str | None = None
        self.max_object_length: int | None = None
        #: refit requests for rows of dissimilarities alone (``daemon.request_refits``), or None: never ask
        self.requests: Any = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._job: dict[str, Any] = {}  # the running refit's (empty: none)
        self.completed = 0
        self.kept = 0
        self.failed = 0

    # ------------------------------------------------------------------ asking
    def request_manual(self) -> None:
        """Ask for a refit now (signal-safe: only sets a flag)."""
        self._manual.set()

    @property
    def running(self) -> bool:
        return self._proc is not None

    # --------------------------------------------------------------- the poll
    def poll(self) -> None:
        """Between batches: finish a done refit, take a refit request's answer, or start a requested refit."""
        if self._proc is None and self.requests is not None and self._answered():
            return
        if self._proc is not None:
            if self._proc.poll() is None:
                if time.monotonic() - self._job["started"] > self.settings.timeout_seconds:
                    self._proc.kill()
                    self._proc.wait()
                    self._fail("the refit worker exceeded refit.timeout_seconds and was killed")
                return
            self._finish()
            return
        trigger = None
        if self._manual.is_set():
            self._manual.clear()
            trigger, reason, stats = "manual", "requested by an operator", self.monitor.last_stats
        elif self.settings.auto and self.monitor.pending is not None:
            reason, stats = self.monitor.pending
            self.monitor.pending = None
            if not self.may_auto_refit():
                log.info("drift trigger on a replica that does not lead refits; the leader's model will follow")
                self._cool_down()
                return
            trigger = "auto"
        if trigger is not None:
            try:
                self._start(trigger, reason, stats)
            except OSError as exc:  # a full or failing model_dir: this refit is skipped, the stream goes on
                self._fail(f"the refit could not be prepared in {self.model_dir} ({exc}); the map stays at version "
                           f"{self.registry.current.version}")

    def wait(self, timeout: float) -> None:
        """Block until a running refit finishes and is installed (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while self._proc is not None and time.monotonic() < deadline:
            time.sleep(0.05)
            self.poll()

    def close(self) -> None:
        """Stop a running refit (shutdown): it is simply not installed; drift will ask again."""
        if self.requests is not None:
            self.requests.close()
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            self._record({"trigger": self._job["trigger"], "reason": self._job["reason"], "status": "abandoned",
                          "detail": "the daemon stopped while the refit ran"})
            log.warning("a running refit was abandoned because the daemon stopped; the map stays at version %d",
                        self.registry.current.version)
            self._cleanup(self._job)
        self._proc = None
        self.monitor.refit_running = False

    # ------------------------------------------------------------------ start
    def _start(self, trigger: str, reason: str, stats: Any) -> None:
        est = self.registry.current
        if est.input_kind == "similarity":
            self._record({"trigger": trigger, "reason": reason, "status": "skipped",
                          "detail": "refits of similarity-input models are not supported (core.refit.refit)"})
            log.warning("refit requested but the model takes similarities; refit it offline")
            self._cool_down()
            return
        cand = self.monitor.candidates()
        if cand is None or not cand.ids:
            self._record({"trigger": trigger, "reason": reason, "status": "skipped",
                          "detail": "no landmark candidates: the stream carried no blocks and no features"})
            log.warning("refit requested but there are no landmark candidates")
            self._cool_down()
            return
        if self._asking():  # a request is out: its answer starts the refit
            return
        if cand.objects is None and cand.mutual is None and cand.features is None and self.requests is not None \
                and cand.cross_to_landmarks is not None:  # rows alone: ask the producer (daemon.request_refits)
            self.requests.ask(trigger, reason, stats, est, cand.ids, cand.cross_to_landmarks)
            self.monitor.refit_running = True
            return
        if cand.objects is not None:  # the worker computes what the metric must (daemon.refit_jobs)
            self._start_job(trigger, reason, stats, est, cand.ids, None, est.n_landmarks,
                            self._object_job(est, cand))
            return
        try:
            cs = candidate_dissimilarities(est.landmark_ids, cand.ids, old_dissimilarities=est.dissimilarities,
                                           cross_to_landmarks=cand.cross_to_landmarks, mutual=cand.mutual,
                                           old_features=est.features, features=cand.features,
                                           metric=est.metric or DEFAULT_METRIC)
        except InputError as exc:
            self._fail(str(exc))
            return
        self._start_job(trigger, reason, stats, est, cs.ids, cs.features, cs.n_old, {"dissimilarities": cs.D})

    def _start_job(self, trigger: str, reason: str, stats: Any, est: Any, ids: Any, features: Any, n_old: int,
                   candidates: dict[str, Any]) -> None:
        """Make the refit's work directory and start the worker on the job of ``candidates``' arrays."""
        self.model_dir.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix="refit-", dir=self.model_dir))
        try:
            self._launch(trigger, reason, stats, workdir, est, ids, features, candidates, n_old)
        except BaseException:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
            raise

    def _launch(self, trigger: str, reason: str, stats: Any, workdir: Path, est: Any, ids: Any, features: Any,
                candidates: dict[str, Any], n_old: int) -> None:
        """Write the refit's job into ``workdir`` (``candidates``: their dissimilarities, or an object job of
        ``daemon.refit_jobs``) and start the worker on it."""
        job = workdir / "job.npz"
        count = core_value(self.settings, "n_landmarks")  # None: as many as now
        arrays = {**candidates, "ids": np.asarray(ids, dtype=str),
                  "n_landmarks": np.asarray(n_old if count is None else count),
                  "selection": np.asarray(self.settings.selection),
                  # an operator who asks for a refit gets the best candidate, whatever it gains (the record says what)
                  "min_gain": np.asarray(-np.inf if trigger == "manual" else float(self.settings.min_gain))}
        if features is not None:
            arrays["features"] = features
        np.savez(job, **arrays)
        old_path = workdir / "old.npz"
        save_model(est, old_path)
        new_path = workdir / "new.npz"
        record_path = workdir / "record.json"
        cmd = [sys.executable, "-m", "streamembed.daemon.refit_worker", str(job), str(old_path), str(new_path),
               str(record_path)]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, env=worker_environment())
        self._job = {"trigger": trigger, "reason": reason, "started": time.monotonic(), "started_at": time.time(),
                     "workdir": workdir, "new": new_path, "record": record_path,
                     "stats": None if stats is None else stats.as_dict(), "n_candidates": len(ids),
                     "objects_seen": self.monitor.objects_seen}
        self.monitor.refit_running = True
        if self.metrics is not None:
            self.metrics.refit_in_progress.set(1)
        log.info("refit started", extra={"trigger": trigger, "reason": reason, "candidates": len(ids)})

    # ----------------------------------------------------------------- finish
    def _finish(self) -> None:

        job, proc = self._job, self._proc
        assert proc is not None  # poll() finishes the running worker
        self._proc = None
        self.monitor.refit_running = False
        try:
            rec = json.loads(Path(job["record"]).read_text())
        except (OSError, ValueError):
            rec = {"error": f"the refit worker exited with code {proc.returncode} and wrote no record"}
        if proc.returncode != 0 or "error" in rec:
            self._fail(rec.get("error", f"worker exit code {proc.returncode}"))
            return
        if rec.get("outcome") == "kept":
            self._kept(job, rec)
            return
        try:
            new = load_model(job["new"])
            current = self.registry.current
            if not np.isfinite(new.embedding).all() or not np.isfinite(rec["alignment_rms"]):
                raise ValueError("the new model has non-finite coordinates")
            if int(new.n_components) != int(current.n_components):
                raise ValueError("the new model changed the map's dimension")
            if int(new.version) <= self.registry.current_version:
                self._superseded(job, f"version {self.registry.current_version} arrived while it ran")
                return
            lost = self.claim(new) if self.claim is not None else None
            if lost is not None:
                self._superseded(job, lost)
                return
            make_dirs(self.model_dir)
            final = model_path(self.model_dir, new.version)
            Path(job["new"]).replace(final)
            try:
                self.registry.install(new)
            except BaseException:
                final.unlink(missing_ok=True)  # a rejected refit must not be picked up by a restart
                raise
        except (ValueError, StaleModelError, OSError) as exc:
            self._fail(f"the refitted model was rejected: {exc}")
            return
        duration = time.monotonic() - job["started"]
        self.monitor.reset(new)
        self.completed += 1
        self._record({**rec, "trigger": job["trigger"], "reason": job["reason"], "status": "installed",
                      "statistics": job["stats"], "triggered_after_objects": job["objects_seen"],
                      "installed_after_objects": self.monitor.objects_seen, "duration_seconds": duration,
                      "path": str(final)})
        self._cleanup(job)
        if self.metrics is not None:
            m = self.metrics
            m.refits.labels(trigger=job["trigger"]).inc()
            m.refit_seconds.observe(duration)
            m.refit_alignment_rms.set(rec["alignment_rms"])
            m.last_refit.set(time.time())
            m.refit_in_progress.set(0)
            m.model_version.set(int(new.version))
        log.info("refit installed: %s%s", rec.get("detail", ""), _expectation(rec),
                 extra={"model_version": int(new.version), "alignment_rms": rec["alignment_rms"],
                        "seconds": round(duration, 3)})

    def _kept(self, job: dict[str, Any], rec: dict[str, Any]) -> None:
        """The refit found no better map: nothing is installed, and the detector is told so (docs/refits.md).

        When the recent objects were measured (the usual case), the current map
        is as good as a refit can make it for them, so the drift is *accepted*:
        the detector takes a new baseline at the new level, and says so. When
        they could not be measured (too few), the detector keeps its baseline
        and cools down, to ask again later.
        """
        measured = "captured_before" in rec
        self._record({**rec, "trigger": job["trigger"], "reason": job["reason"], "status": "kept",
                      "statistics": job["stats"], "triggered_after_objects": job["objects_seen"],
                      "duration_seconds": time.monotonic() - job["started"],
                      "detector": "new baseline (drift accepted)" if measured else "cooldown, same baseline"})
        self._cleanup(job)
        self.kept += 1
        if measured:
            self.monitor.accept()
        else:
            self._cool_down()
        if self.metrics is not None:
            self.metrics.refits_kept.labels(trigger=job["trigger"]).inc()
            self.metrics.refit_in_progress.set(0)
        log.warning("refit kept the map (model version %d stays): %s; %s", int(rec.get("model_version", 0)),
                    rec.get("detail", ""), "the drift detector takes a new baseline at the current level"
                    if measured else "the detector keeps its baseline and will ask again after its cooldown")

    def drain(self, timeout: float, stop: threading.Event | None = None) -> str:
        """Input exhausted (batch mode): start the refit an alarm is waiting for, and finish it within ``timeout``
        seconds, or until ``stop`` is set (a signal: the refit or request is given up at once, the map kept).

        Returns one line saying what happened, for the exit log.
        """
        if self._proc is None and self.monitor.pending is None:
            self.monitor.arm_now()
        asking = self.requests is not None and self.requests.pending is not None
        if self._proc is None and self.monitor.pending is None and not self._manual.is_set() and not asking:
            return "no refit pending"
        self.poll()  # starts it
        if self._asking():
            log.info("input exhausted: waiting up to %g s for the producer's answer to the refit request "
                     "(`streamembed producer answer`, docs/objects.md); a signal stops the wait",
                     min(timeout, self.settings.request_seconds))
        deadline = time.monotonic() + timeout
        stopped = stop if stop is not None else threading.Event()
        while (self._proc is not None or self._asking()) and time.monotonic() < deadline and not stopped.is_set():
            stopped.wait(0.05)
            self.poll()
        why = "a signal" if stopped.is_set() else f"refit.drain_seconds = {timeout:g} s"
        if self._asking():
            self.requests.close()
            return (f"a refit request was still unanswered at {why} and was withdrawn; the map stays at version "
                    f"{self.registry.current.version}")
        if self._proc is not None:
            self.close()
            return (f"a refit was still running at {why} and was stopped; the map stays at version "
                    f"{self.registry.current.version}")
        return (f"the refit finished before exit: {self.completed} installed, {self.kept} kept the map, "
                f"{self.failed} failed; model version {self.registry.current.version}")

    def _superseded(self, job: dict[str, Any], why: str) -> None:
        """Another replica's refit took this version first: drop ours, and follow the topic."""
        self._record({"trigger": job["trigger"], "reason": job["reason"], "status": "superseded", "detail": why})
        self._cleanup(job)
        self._cool_down()
        if self.metrics is not None:
            self.metrics.refit_in_progress.set(0)
        log.info("refit not installed: %s; the winning map follows through the model topic", why)

    def _fail(self, why: str) -> None:
        job = self._job or {}
        self._proc = None
        self.monitor.refit_running = False
        self.failed += 1
        self._record({"trigger": job.get("trigger"), "reason": job.get("reason"), "status": "failed", "error": why})
        if job:
            self._cleanup(job)
        self._cool_down()  # before trying again
        if self.metrics is not None:
            self.metrics.refit_failures.inc()
            self.metrics.refit_in_progress.set(0)
        log.error("refit failed: %s", why)

    def _cool_down(self) -> None:
        """No refit was installed: cool down but keep the detector's baseline (a new one would accept the drift)."""
        self.monitor.trigger.cooldown(time.time())

    def _cleanup(self, job: dict[str, Any]) -> None:
        import shutil

        shutil.rmtree(job["workdir"], ignore_errors=True)
        self._job = {}

    def record(self, doc: dict[str, Any]) -> None:
        """Append ``doc`` to the model history (what refit requests record too)."""
        self._record(doc)

    def _record(self, doc: dict[str, Any]) -> None:
        try:
            append_record(self.history_path, doc)
        except OSError as exc:  # the history is a record, not a reason to stop the stream
            log.warning("could not append to the refit history %s (%s): %s", self.history_path, exc,
                        doc.get("status"))
