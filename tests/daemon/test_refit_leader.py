"""Only the replica that leads refits starts automatic ones (Kafka: owner of input partition 0)."""

from __future__ import annotations


import numpy as np

from streamembed import LandmarkMDS
from streamembed.core.monitor.drift import RefitTrigger
from streamembed.daemon.refits import RefitManager
from streamembed.config.schema import RefitConfig
from streamembed.stream.registry import ModelRegistry


class _Monitor:
    def __init__(self) -> None:
        self.pending = ("drift", None)
        self.trigger = RefitTrigger()
        self.last_stats = None
        self.refit_running = False
        self.objects_seen = 0

    def candidates(self):
        return None


def _manager(tmp_path, leader: bool) -> tuple[RefitManager, _Monitor]:
    P = np.random.default_rng(0).normal(size=(8, 2))
    est = LandmarkMDS(n_components=2).fit(np.sqrt(((P[:, None] - P[None]) ** 2).sum(-1))).model_
    monitor = _Monitor()
    mgr = RefitManager(RefitConfig(), ModelRegistry(est), monitor, tmp_path / "models", tmp_path / "h.jsonl")
    mgr.may_auto_refit = lambda: leader
    return mgr, monitor


def test_a_follower_drops_the_trigger_and_cools_down(tmp_path):
    mgr, monitor = _manager(tmp_path, leader=False)
    mgr.poll()
    assert monitor.pending is None and not mgr.running
    assert monitor.trigger._last_refit is not None  # cooldown started
    assert not (tmp_path / "h.jsonl").exists()  # nothing attempted, nothing recorded


def test_the_leader_attempts_the_refit(tmp_path):
    mgr, monitor = _manager(tmp_path, leader=True)
    mgr.poll()
    # no candidates in this fake reservoir: the attempt is recorded as skipped
    assert "no landmark candidates" in (tmp_path / "h.jsonl").read_text()


def test_a_manual_request_runs_on_any_replica(tmp_path):
    mgr, monitor = _manager(tmp_path, leader=False)
    monitor.pending = None
    mgr.request_manual()
    mgr.poll()
    assert "manual" in (tmp_path / "h.jsonl").read_text()
