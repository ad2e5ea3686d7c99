"""The calibrated CUSUM drift detector (docs/math.md §7)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamembed.core.monitor.detector import (
    CalibrationError,
    CusumDetector,
    check_detector_settings,
    cusum_alarms,
    cusum_path,
    siegmund_arl,
    siegmund_threshold,
)
from streamembed.core.monitor.trigger import SequentialTrigger
from streamembed.core.monitor.drift import RefitTrigger


def _loop_cusum(z, h, start=0.0):
    s, alarms, path = start, [], []
    for j, x in enumerate(z):
        s = max(0.0, s + x)
        if s > h:
            alarms.append(j)
            path.append(s)
            s = 0.0
        else:
            path.append(s)
    return alarms, s


def test_vectorised_cusum_equals_the_recursion(rng):
    z = rng.normal(-0.3, 1.0, size=5000)
    S = cusum_path(z, start=2.5)
    s, ref = 2.5, []
    for x in z:
        s = max(0.0, s + x)
        ref.append(s)
    np.testing.assert_allclose(S, ref, atol=1e-9)
    alarms, end, peak = cusum_alarms(z, 4.0, start=2.5)
    ref_alarms, ref_end = _loop_cusum(z, 4.0, start=2.5)
    assert alarms.tolist() == ref_alarms and len(ref_alarms) > 3
    assert end == pytest.approx(ref_end) and peak > 4.0


def test_siegmund_arl_matches_the_published_value_and_inverts():
    # one-sided CUSUM, k = 0.5, h = 4 (sd units): ARL0 ≈ 336 (twice the two-sided 168 of Montgomery's table)
    assert siegmund_arl(4.0, theta=1.0, drift=0.5) == pytest.approx(336, rel=0.01)
    for arl in (50.0, 1e4, 1e8):
        h = siegmund_threshold(arl, theta=1.3, drift=0.65)
        assert siegmund_arl(h, 1.3, 0.65) == pytest.approx(arl, rel=1e-9)


def test_gaussian_baseline_gives_the_gaussian_adjustment_coefficient(rng):
    det = CusumDetector(expected_run_objects=1e8, min_shift=0.1, group_objects=256)
    c = det.calibrate(rng.normal(3.0, 2.0, size=400_000))
    assert c.mean == pytest.approx(3.0, abs=0.02) and c.sd == pytest.approx(2.0, rel=0.01)
    assert c.reference == pytest.approx(0.05 * 16, rel=0.05)  # k = min_shift/2 · √b
    k_eff = c.reference - c.mean_margin
    assert c.theta == pytest.approx(2 * k_eff / c.scale_margin**2, rel=0.05)  # θ* = 2k/σ² for Gaussian increments
    assert c.nominal_run_objects > c.expected_run_objects  # the worst case is the conservative one


def test_skewed_residuals_get_a_higher_threshold_than_gaussian_ones(rng):
    """Right-skewed values cross high thresholds more often: the CGF correction raises h."""
    n = 200_000
    gauss = CusumDetector(1e7, 0.1, 64).calibrate(rng.normal(size=n))
    skewed = CusumDetector(1e7, 0.1, 64).calibrate(rng.chisquare(1, size=n))
    assert skewed.skewness > 2 and abs(gauss.skewness) < 0.05
    assert skewed.threshold > gauss.threshold * 1.03
    assert skewed.theta < gauss.theta * 0.97


def test_a_step_in_the_mean_is_found_within_the_expected_delay(rng):
    det = CusumDetector(expected_run_objects=1e8, min_shift=0.1, group_objects=256)
    c = det.calibrate(rng.chisquare(8, size=20_000))
    stream = rng.chisquare(8, size=200_000)
    stream[100_000:] += 0.25 * 4.0  # +0.25 sd (sd of χ²₈ = 4)
    first = None
    for start in range(0, stream.size, 1000):
        d = det.update(stream[start:start + 1000], now=float(start))
        if d.fired:
            first = start + d.index_in_batch
            break
    assert first is not None and first >= 100_000
    # Siegmund's delay for a shift of 2.5·min_shift: (h + 1.166)/(2.5·2k − k) groups, plus one group of rounding
    expected = (c.threshold + 1.166) / (4 * c.reference) * 256
    assert first - 100_000 < 3 * expected + 256


def test_batch_boundaries_do_not_change_the_decisions(rng):
    base = rng.exponential(size=20_000)
    stream = rng.exponential(size=30_000)
    stream[15_000:] *= 1.3
    stream[rng.random(30_000) < 0.01] = np.nan  # invalid rows are skipped, not counted
    found = {}
    for size in (1, 7, 256, 1000, 30_000):
        det = CusumDetector(1e6, 0.1, 128)
        det.calibrate(base)
        alarms = []
        for start in range(0, stream.size, size):
            d = det.update(stream[start:start + size])
            if d.fired:
                alarms.append(start + d.index_in_batch)
        found[size] = (alarms[0], det.alarms, round(det.statistic, 9))
        if size == 1:
            assert len(alarms) > 3 and alarms[0] >= 15_000 and math.isfinite(stream[alarms[0]])
    assert len({repr(v) for v in found.values()}) == 1, found


def test_zero_variance_baseline_is_refused_naming_the_setting():
    det = CusumDetector(1e8)
    with pytest.raises(CalibrationError, match="zero variance") as err:
        det.calibrate(np.full(50_000, 0.25))
    assert err.value.setting == "drift.baseline_objects"
    assert not det.calibrated
    with pytest.raises(RuntimeError, match="before calibrate"):
        det.update(np.ones(10))


def test_a_baseline_too_short_for_the_ert_is_refused(rng):
    with pytest.raises(CalibrationError, match="at least 30 groups") as err:
        CusumDetector(1e8, group_objects=256).calibrate(rng.normal(size=5000))
    assert err.value.setting == "drift.baseline_objects"
    with pytest.raises(CalibrationError, match="too short") as err:  # 40 groups of 256: mean too uncertain for 0.02 sd
        CusumDetector(1e8, min_shift=0.02, group_objects=256).calibrate(rng.normal(size=40 * 256))
    assert "drift.baseline_objects" in str(err.value)
    with pytest.raises(CalibrationError, match="expected_run_objects") as err:
        CusumDetector(1000, group_objects=256).calibrate(rng.normal(size=20_000))
    assert err.value.setting == "drift.expected_run_objects"


def test_settings_check_at_start_up():
    check_detector_settings(1e8, 20_000, 256, 0.1, 0.95)
    with pytest.raises(CalibrationError, match="baseline_objects = 2000 is too short") as err:
        check_detector_settings(1e8, 2000, 256, 0.1, 0.95)
    assert err.value.setting == "drift.baseline_objects"
    with pytest.raises(CalibrationError) as err:
        check_detector_settings(math.inf, 20_000)
    assert err.value.setting == "drift.expected_run_objects"


def test_sequential_trigger_collects_a_baseline_then_fires_and_cools_down(rng):
    trig = SequentialTrigger(CusumDetector(1e8, 0.1, 256), baseline_objects=20_000, cooldown_seconds=50.0,
                             fallback=RefitTrigger())
    now, fired_at = 0.0, None
    for i in range(60):
        now += 1.0
        v = rng.chisquare(8, size=1000) * (1.0 if i < 40 else 1.5)
        d = trig.observe(now, None, 1000, values=v)
        if i < 19:
            assert not d.fire and d.reason == "collecting the baseline"
        if d.fire:
            fired_at = i
            break
    assert trig.kind == "cusum" and trig.expected_run_objects == 1e8
    assert fired_at is not None and 40 <= fired_at <= 42
    trig.cooldown(now)  # a failed refit: keep the baseline (re-baselining would accept the drift), cool down
    assert trig.detector.calibrated and trig.statistic == 0.0
    assert not trig.observe(now + 10.0, None, 1000, values=rng.chisquare(8, size=1000) * 1.5).fire  # cooling down
    trig.refitted(now)
    assert not trig.detector.calibrated  # a new model needs a new baseline


def test_uncalibratable_baseline_falls_back_to_the_rule_with_a_warning():
    trig = SequentialTrigger(CusumDetector(1e8), baseline_objects=10_000, fallback=RefitTrigger(baseline_objects=100))
    d = None
    for i in range(12):
        d = trig.observe(float(i), None, 1000, values=np.zeros(1000))
    assert trig.kind == "rule" and trig.expected_run_objects is None
    assert "zero variance" in trig.warning and "drift.baseline_objects" in trig.warning
    assert d.reason == "no baseline yet"  # the rule's own answer (no window statistics given)
    trig.refitted(20.0)
    assert trig.kind == "cusum" and trig.warning is None
    no_fallback = SequentialTrigger(CusumDetector(1e8), baseline_objects=10_000)
    with pytest.raises(CalibrationError):
        for i in range(12):
            no_fallback.observe(float(i), None, 1000, values=np.zeros(1000))


def test_false_alarm_rate_on_a_short_stationary_stream(rng):
    """Fast companion of the slow ERT test: 4·10⁶ skewed values, ERT 10⁵ → about 40 alarms, never far more."""
    alarms, total = 0, 0
    for _ in range(2):
        det = CusumDetector(1e5, 0.1, 128)
        det.calibrate(rng.chisquare(4, size=20_000))
        alarms += det.update(rng.chisquare(4, size=2_000_000)).alarms
        total += 2_000_000
    from scipy.stats import poisson

    assert alarms <= poisson.ppf(0.999, total / 1e5)
    assert alarms >= 1  # a detector that never fires is not calibrated either


@pytest.mark.slow
def test_measured_false_alarm_rate_on_a_long_stationary_residual_stream_is_within_the_ert():
    """10⁷ objects of a real landmark map's residual stream (defaults but ERT = 10⁵ objects).

    Objects: a 4-component Gaussian mixture on a plane in R^10 plus isotropic
    noise, embedded by projection on a 2-d map of 60 landmarks; the per-object
    statistic is the unexplained energy β − ‖ŷ‖². Five baselines of 20,000
    objects (as after five refits), each followed by 2·10⁶ objects. At the
    stated ERT the count of false alarms is Poisson with mean ≤ 100: the test
    fails if it is significantly larger (anti-conservative calibration), or
    if the detector is more than 10× conservative (it would be needlessly slow).
    """
    from scipy.stats import poisson

    from streamembed import LandmarkMDS

    rng = np.random.default_rng(2024)
    p, q = 10, 2
    basis = np.linalg.qr(rng.normal(size=(p, q)))[0]
    means = 5.0 * rng.normal(size=(4, q))

    def draw(n):
        comp = rng.integers(0, 4, n)
        return (means[comp] + 0.5 * rng.normal(size=(n, q))) @ basis.T + 0.3 * rng.normal(size=(n, p))

    def dist(X, L):
        sq = (X**2).sum(1)[:, None] + (L**2).sum(1)[None] - 2.0 * X @ L.T
        return np.sqrt(np.maximum(sq, 0.0))

    L = draw(60)
    est = LandmarkMDS(n_components=2).fit(dist(L, L))
    ert, per_baseline, chunk = 1e5, 2_000_000, 250_000
    alarms = total = 0
    for _ in range(5):
        det = CusumDetector(expected_run_objects=ert)
        det.calibrate(est.embed(dist(draw(20_000), L)).unexplained)
        for _ in range(per_baseline // chunk):
            alarms += det.update(est.embed(dist(draw(chunk), L)).unexplained).alarms
        total += per_baseline
    assert alarms <= poisson.ppf(0.999, total / ert), (alarms, total)
    assert alarms >= poisson.ppf(0.001, total / (10 * ert)), (alarms, total)
