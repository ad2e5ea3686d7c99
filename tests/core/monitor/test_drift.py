"""Sliding-window drift statistics and the refit trigger (docs/math.md §4)."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed.core.monitor.drift import DriftWindow, RefitTrigger


def _window(**kw):
    return DriftWindow(lam_r=np.array([4.0, 2.0, 1.0]), n_components=2, n_landmarks=10, **kw)


def test_window_evicts_by_count_and_by_time():
    w = _window(max_objects=250, max_seconds=10.0)
    for i in range(5):
        w.add(now=float(i), rel_unexplained=np.full(100, 0.1 * i))
    assert len(w) == 300  # the oldest batches beyond 250 objects are gone, keeping ≥ 250
    stats = w.statistics(now=4.0)
    assert stats.relative_unexplained_mean == pytest.approx(0.3)
    assert w.statistics(now=100.0) is None  # everything older than 10 s


def test_window_statistics_from_sampled_k0():
    w = _window()
    rng = np.random.default_rng(0)
    y_r = rng.normal(size=(20, 3))
    beta = 0.5 + np.einsum("ij,ij->i", y_r, y_r)  # k0 = 0.5 for every sampled object
    w.add(now=0.0, rel_unexplained=np.full(200, 0.2), k0=np.full(20, 0.5), y_r=y_r, beta=beta)
    s = w.statistics()
    assert s.n_objects == 200 and s.n_sampled == 20
    assert s.trace_k0 == pytest.approx(0.5 * 200)  # without u: the sample scaled to the window, an estimate
    assert np.isnan(s.trace_k0_bound) and np.isnan(s.norm_k0) and s.new_axis_possible is None  # no bound without u
    assert s.relative_k0_mean == pytest.approx(np.mean(0.5 / beta))
    assert s.negative_k0_share == 0.0


def test_window_bound_and_control_variate_estimate():
    w = _window()
    rng = np.random.default_rng(0)
    y_r = rng.normal(size=(20, 3))
    tau = y_r[:, 2] ** 2
    k0 = rng.uniform(0.0, 1.0, size=20)
    u = np.tile(k0 + tau, 10)  # the window is ten copies of the sample: u = k0 + τ
    w.add(now=0.0, rel_unexplained=np.full(200, 0.2), k0=k0, y_r=y_r,
          beta=k0 + np.einsum("ij,ij->i", y_r, y_r), unexplained=u)
    s = w.statistics()
    assert s.trace_k0_bound == pytest.approx(u.sum())  # Σu: a bound whatever the sample
    # the regression estimator with u as control variate (slope from the sample), and its standard error
    slope = np.polyfit(k0 + tau, k0, 1)[0]
    assert s.trace_k0 == pytest.approx(10 * k0.sum() + slope * (u.sum() - 10 * (k0 + tau).sum()))
    resid = k0 - slope * (k0 + tau)
    assert s.trace_k0_stderr == pytest.approx(200 * np.sqrt((1 - 20 / 200) * np.var(resid, ddof=2) / 20))
    assert s.trace_k0 == pytest.approx(10 * k0.sum())  # here also the truth (the sample is the window's mean)
    assert s.norm_k0 == pytest.approx(u.sum()) and not s.norm_exact  # ‖k0‖₂ ≤ Tr(k0) ≤ Σu (PSD, full spectrum)
    assert s.kernel_distance_bound == pytest.approx(np.sqrt(2 * u.sum() / (10 + 200)))
    assert s.new_axis_possible is not None


def test_trigger_fires_after_min_objects_above_baseline_then_cools_down():
    t = RefitTrigger(min_objects=300, baseline_objects=100, cooldown_seconds=50.0, ratio=1.5, margin=0.05)
    w = _window()
    now = 0.0
    decisions = []
    for i in range(30):
        now += 1.0
        level = 0.2 if i < 10 else 0.6
        w.clear()
        w.add(now, np.full(100, level))
        decisions.append(t.observe(now, w.statistics(), 100))
    assert t.baseline == pytest.approx(0.2)
    fired = [i for i, d in enumerate(decisions) if d.fire]
    assert fired and fired[0] == 12  # 3 batches of 100 above the level
    t.refitted(now)
    w.clear()
    w.add(now + 1, np.full(100, 0.9))
    assert not t.observe(now + 1, w.statistics(), 100).fire  # new baseline not yet known / cooldown


def test_stationary_noisy_input_never_fires():
    rng = np.random.default_rng(1)
    t = RefitTrigger(min_objects=2000, baseline_objects=2000, cooldown_seconds=0.0)
    w = _window(max_objects=5000)
    fired = 0
    for i in range(400):
        w.add(float(i), np.clip(0.6 + 0.2 * rng.standard_normal(500), 0, 1))
        fired += t.observe(float(i), w.statistics(), 500).fire
    assert fired == 0


def test_hysteresis_keeps_count_between_levels_and_resets_below():
    t = RefitTrigger(threshold=0.5, hysteresis=0.5, min_objects=300, baseline_objects=0, cooldown_seconds=0)
    w = _window()

    def step(v):
        w.clear()
        w.add(0.0, np.full(100, v))
        return t.observe(0.0, w.statistics(), 100)

    step(0.6)
    step(0.6)
    assert step(0.4).objects_above == 200  # between clear (0.25) and trigger: kept
    assert step(0.1).objects_above == 0  # below clear: reset
    step(0.6), step(0.6)
    assert step(0.6).fire


def test_unknown_statistic_is_refused():
    with pytest.raises(ValueError, match="statistic must be one of"):
        RefitTrigger(statistic="nope")


def test_a_non_euclidean_window_reports_nan_and_none_never_zero():
    """Negative k0 (edit distances, city-block): ‖k0‖₂ has no trace bound, so the window reports NaN and None
    for it, never 0.0 / 0.0 / False, which a gap_ratio rule would take for "no drift", forever."""
    for kw, k0 in (({"euclidean": False}, np.full(20, 0.5)), ({}, np.linspace(-3.0, 1.0, 20))):
        w = _window(**kw)
        y_r = np.random.default_rng(0).normal(size=(20, 3))
        w.add(0.0, np.full(200, 0.2), k0, y_r, k0 + np.einsum("ij,ij->i", y_r, y_r), unexplained=np.full(200, 1.0))
        s = w.statistics()
        assert np.isnan(s.norm_k0) and np.isnan(s.gap_ratio) and np.isnan(s.kernel_distance_bound)
        assert s.new_axis_possible is None and not s.norm_exact
        assert s.trace_k0_bound == pytest.approx(200.0) and np.isfinite(s.trace_k0)
