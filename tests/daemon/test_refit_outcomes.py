"""The refit manager's outcomes through the real worker process: kept (no version), installed, batch-mode drain."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.monitor.drift import RefitTrigger
from streamembed.ops.metrics import Metrics
from streamembed.daemon.refits import RefitManager
from streamembed.config.schema import RefitConfig
from streamembed.monitors.drift import Candidates
from streamembed.stream.registry import ModelRegistry

pytestmark = pytest.mark.slow  # each test runs the refit worker (a Python process) once or twice


class _Monitor:
    """What RefitManager needs of the drift monitor: a pending trigger, candidates, accept/reset/arm_now."""

    def __init__(self, features: np.ndarray, pending: bool = True) -> None:
        self.pending = ("drift", None) if pending else None
        self.trigger = RefitTrigger()
        self.last_stats = None
        self.refit_running = False
        self.objects_seen = 10_000
        self._features = features
        self.accepted = self.reset_with = 0
        self.armed = False

    def candidates(self) -> Candidates:
        return Candidates(ids=[f"r{i}" for i in range(len(self._features))], features=self._features)

    def accept(self) -> None:
        self.accepted += 1
        self.pending = None

    def reset(self, est, refitted: bool = True) -> None:
        self.reset_with = int(est.version)

    def arm_now(self) -> None:
        if self.armed:
            self.pending, self.armed = ("drift", None), False


def _population(rng: np.random.Generator, m: int) -> np.ndarray:
    X = 0.3 * rng.normal(size=(m, 6))
    X[:, :2] = rng.normal(size=(m, 2)) * [3.0, 2.0]
    return X


def _manager(tmp_path, recent: np.ndarray, pending: bool = True) -> tuple[RefitManager, _Monitor, Metrics]:
    rng = np.random.default_rng(0)
    est = LandmarkMDS(n_components=2).fit_features(_population(rng, 60)).model_
    monitor, metrics = _Monitor(recent, pending), Metrics()
    mgr = RefitManager(RefitConfig(), ModelRegistry(est), monitor, tmp_path / "models", tmp_path / "h.jsonl",
                       metrics=metrics)
    return mgr, monitor, metrics


def _history(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "h.jsonl").read_text().splitlines()]


def test_a_refit_that_finds_no_better_map_is_kept_not_installed(tmp_path):
    mgr, monitor, metrics = _manager(tmp_path, _population(np.random.default_rng(1), 600))
    mgr.poll()
    mgr.wait(60)
    (rec,) = _history(tmp_path)
    assert rec["status"] == "kept" and rec["model_version"] == 1 and "no candidate map gains" in rec["detail"]
    assert {"unexplained_before", "unexplained_best", "captured_before"} <= set(rec)
    assert mgr.registry.current.version == 1 and not list((tmp_path / "models").glob("model-v*.npz"))
    assert monitor.accepted == 1 and monitor.reset_with == 0  # an announced new baseline, no model switch
    assert metrics.registry.get_sample_value("streamembed_refits_kept_total", {"trigger": "auto"}) == 1
    assert metrics.registry.get_sample_value("streamembed_refits_total", {"trigger": "auto"}) == 0


def test_traffic_on_a_new_plane_is_installed_with_its_figures(tmp_path):
    recent = _population(np.random.default_rng(2), 600)[:, [0, 2, 1, 3, 4, 5]]
    recent[:, 2] *= 1.5
    mgr, monitor, metrics = _manager(tmp_path, recent)
    mgr.poll()
    mgr.wait(60)
    (rec,) = _history(tmp_path)
    assert rec["status"] == "installed" and rec["model_version"] == 2, rec
    assert rec["unexplained_after"] < rec["unexplained_before"] and rec["movement"] > 0
    assert mgr.registry.current.version == 2 and monitor.reset_with == 2


def test_an_installed_refit_has_a_radius_and_a_fit_baseline_from_the_candidates_that_are_not_landmarks(tmp_path):
    """The refitted model's radius column is not null: it is calibrated in the worker on the candidates that did not
    become landmarks (their mutual dissimilarities are in the job), and its detectors are armed from them."""
    recent = _population(np.random.default_rng(2), 600)[:, [0, 2, 1, 3, 4, 5]]
    recent[:, 2] *= 1.5
    mgr, _, _ = _manager(tmp_path, recent)
    mgr.poll()
    mgr.wait(60)
    (rec,) = _history(tmp_path)
    new = mgr.registry.current
    assert rec["status"] == "installed" and rec["radius"] == "calibrated", rec
    assert new.radius_calibration is not None and new.radius_calibration.coverage == 0.9
    held_out = _population(np.random.default_rng(9), 50)[:, [0, 2, 1, 3, 4, 5]]
    held_out[:, 2] *= 1.5
    assert np.isfinite(new.place(new.dissimilarities_to_landmarks(held_out)).radius).all()
    assert new.fit_baseline is not None and rec["drift_baseline_objects"] == new.fit_baseline.n_objects > 400


def test_a_manual_refit_installs_the_best_candidate_even_on_a_stationary_stream(tmp_path):
    mgr, monitor, _ = _manager(tmp_path, _population(np.random.default_rng(3), 600), pending=False)
    mgr.request_manual()
    mgr.poll()
    mgr.wait(60)
    (rec,) = _history(tmp_path)
    assert rec["status"] == "installed" and rec["trigger"] == "manual" and rec["movement"] < 0.5, rec


def test_batch_mode_drains_an_alarm_that_waits_for_its_reservoir(tmp_path):
    mgr, monitor, _ = _manager(tmp_path, _population(np.random.default_rng(4), 600), pending=False)
    assert mgr.drain(60) == "no refit pending"
    monitor.armed = True  # an alarm fired, the reservoir had not refilled when the input ended
    line = mgr.drain(60)
    assert line.startswith("the refit finished before exit: 0 installed, 1 kept the map"), line
    assert [r["status"] for r in _history(tmp_path)] == ["kept"]


def test_batch_mode_drain_gives_up_at_a_signal(tmp_path):
    """A signal during the batch-mode drain stops the refit (or the request) at once and keeps the map."""
    mgr, monitor, _ = _manager(tmp_path, _population(np.random.default_rng(5), 600), pending=False)
    monitor.armed = True
    stop = threading.Event()
    stop.set()
    t0 = time.monotonic()
    line = mgr.drain(600, stop)
    assert time.monotonic() - t0 < 10, line
    assert "at a signal" in line and "stays at version 1" in line, line
