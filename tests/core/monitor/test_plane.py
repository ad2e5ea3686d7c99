"""The in-map statistic's trigger (``core.monitor.plane``) on synthetic streams with a known answer (docs/math.md
§7.7): projections on 8 leading axes with a known covariance; the map holds the first two."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamembed.core.monitor.baseline import FitBaseline
from streamembed.core.monitor.block_detector import BlockDetector
from streamembed.core.monitor.observation import MonitorSample
from streamembed.core.monitor.plane import PlaneTrigger, block_shares

SD = np.array([3.0, 2.5, 1.0, 0.9, 0.8, 0.7, 0.6, 0.5])
BATCH = 1000


def _feed(t: PlaneTrigger, rng: np.random.Generator, batches: int, sd: np.ndarray = SD, start: float = 0.0,
          rows: np.ndarray | None = None) -> list:
    out = []
    for i in range(batches):
        X = rng.normal(size=(BATCH, sd.size)) * sd if rows is None else rows
        out.append(t.observe(start + i, None, BATCH, sample=MonitorSample(2, X)))
    return out


def test_a_stationary_stream_raises_no_alarm_at_the_default_run():
    t = PlaneTrigger(baseline_objects=20_000, cooldown_seconds=0)
    decisions = _feed(t, np.random.default_rng(0), 300)
    assert t.armed and t.source == "stream" and not any(d.fire for d in decisions)
    assert 0.9 < t.level < 1.0 and 0.8 < t.share <= 1.0


@pytest.mark.slow  # 2.4 million objects
def test_the_measured_false_alarm_run_holds_within_three_times_the_stated_one():
    """Baselines of 20,000 objects (312 blocks), each run on 300,000 stationary objects at a stated run of 10^4:
    the pooled run is at least the stated one (Poisson slack) and at most three times it."""
    rng = np.random.default_rng(1)
    alarms = objects = 0
    for _ in range(8):
        det = BlockDetector(1e4, 64, 1.0, 0.95)
        det.calibrate(block_shares(rng.normal(size=(20_000, 8)) * SD, 2, 64))
        assert det.cusum is not None
        alarms += det.cusum.alarm_positions(-block_shares(rng.normal(size=(300_000, 8)) * SD, 2, 64)).size
        objects += 300_000
    ratio = objects / alarms / 1e4
    assert 0.85 <= ratio <= 3.0, (ratio, alarms)


def test_the_plane_turning_away_is_alarmed_within_a_few_blocks():
    """After the baseline, the third axis carries more variance than the map's second: the best 2-plane is no
    longer the map's; alarmed within 2,000 objects, saying why."""
    rng = np.random.default_rng(2)
    t = PlaneTrigger(baseline_objects=20_000, cooldown_seconds=0)
    assert not any(d.fire for d in _feed(t, rng, 25))
    turned = SD.copy()
    turned[2] = 4.0
    fired = [i for i, d in enumerate(_feed(t, rng, 10, turned, start=25)) if d.fire]
    assert fired and fired[0] <= 1, fired
    d = _feed(t, rng, 1, turned, start=40)[0] if not fired else None
    assert d is None or isinstance(d.reason, str)


def test_a_change_inside_the_stream_baseline_is_not_taken_silently():
    """The baseline window's second half is the turned plane: its first half's detector alarms on it, so the
    trigger fires with that reason when the baseline is taken."""
    rng = np.random.default_rng(3)
    t = PlaneTrigger(baseline_objects=20_000, cooldown_seconds=0)
    turned = SD.copy()
    turned[2] = 4.0
    first = _feed(t, rng, 10)
    second = _feed(t, rng, 10, turned, start=10)
    fired = [d for d in first + second if d.fire]
    assert fired and "the baseline window itself changed" in fired[0].reason, fired


def test_blocks_that_cannot_be_measured_never_alarm():
    """Identical objects (no variance): every block's share is NaN, 'not enough objects'; no alarm, no crash."""
    t = PlaneTrigger(baseline_objects=5_000, cooldown_seconds=0)
    decisions = _feed(t, np.random.default_rng(4), 12, rows=np.ones((BATCH, 8)))
    assert not any(d.fire for d in decisions) and not t.armed
    assert t.warning is not None and "not enough objects" in t.warning and math.isnan(t.share)
    assert t.skipped_blocks > 0


def test_a_fit_baseline_arms_it_from_the_first_block():
    rng = np.random.default_rng(5)
    fit = FitBaseline(np.zeros(3000), (rng.normal(size=(3000, 8)) * SD).astype(np.float32), np.empty(0),
                      info={"n_components": 2, "seed": 0})
    t = PlaneTrigger(baseline_objects=20_000, cooldown_seconds=0)
    assert t.arm_from_fit(fit) == "3000 fit objects, blocks of 64" and t.armed and t.source == "fit"
    assert not any(d.fire for d in _feed(t, rng, 10))
    turned = SD.copy()
    turned[2] = 4.0
    assert any(d.fire for d in _feed(t, rng, 5, turned, start=10))


@pytest.mark.parametrize("objects", [100, 300])
def test_a_fit_baseline_too_small_says_when_it_arms(objects):
    fit = FitBaseline(np.zeros(objects), np.zeros((objects, 8), dtype=np.float32), np.empty(0),
                      info={"n_components": 2})
    t = PlaneTrigger(baseline_objects=20_000)
    assert t.arm_from_fit(fit) is None and not t.armed and "arms after 20000 objects" in (t.warning or "")
