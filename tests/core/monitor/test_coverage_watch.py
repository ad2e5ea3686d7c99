"""The coverage watch (``core.monitor.coverage_watch``, docs/math.md §7.9): a CUSUM on the falls of the radius's
sample coverage, calibrated on stationary samples of the same size."""

from __future__ import annotations

import numpy as np

from streamembed.core.monitor.baseline import FitBaseline
from streamembed.core.monitor.coverage_watch import CoverageTrigger
from streamembed.core.monitor.observation import MonitorSample


def _checks(t: CoverageTrigger, values: np.ndarray, start: float = 0.0) -> list:
    return [t.observe(start + i, None, 5000, sample=MonitorSample(2, None, float(v), 150, 0.9))
            for i, v in enumerate(values)]


def test_without_checks_it_never_decides():
    t = CoverageTrigger(cooldown_seconds=0)
    d = t.observe(0.0, None, 1000, sample=MonitorSample(2))
    assert not d.fire and d.reason == "no coverage checks" and not t.armed


def test_stationary_coverages_raise_nothing_and_a_fall_is_alarmed():
    rng = np.random.default_rng(0)
    t = CoverageTrigger(cooldown_seconds=0)
    stationary = np.clip(0.9 + 0.04 * rng.normal(size=200), 0, 1)
    assert not any(d.fire for d in _checks(t, stationary)) and t.armed and abs(t.level - 0.9) < 0.02
    fell = [i for i, d in enumerate(_checks(t, np.clip(0.6 + 0.04 * rng.normal(size=20), 0, 1), 200)) if d.fire]
    assert fell and fell[0] < 10


def test_a_fit_baseline_arms_it_at_the_first_check():
    rng = np.random.default_rng(1)
    fit = FitBaseline(np.zeros(1500), np.zeros((0, 2), np.float32), np.clip(0.9 + 0.04 * rng.normal(size=40), 0, 1),
                      coverage_objects=150, info={"stated_coverage": 0.9})
    t = CoverageTrigger(cooldown_seconds=0)
    assert t.arm_from_fit(fit) == "40 checks" and t.armed
    assert not any(d.fire for d in _checks(t, np.clip(0.9 + 0.04 * rng.normal(size=30), 0, 1)))
    assert any(d.fire for d in _checks(t, np.full(20, 0.4), 30))
