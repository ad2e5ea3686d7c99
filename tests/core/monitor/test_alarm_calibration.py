"""The CUSUM's stated run between false alarms on heavy tails and on correlated arrivals (docs/math.md §7.2–7.4).

The long measurements are in ``benchmarks/alarm_calibration.py``; these are their fast, exactly reproducible
cores: one extreme object, a heavy-tailed stream, arrivals in runs of one class, a baseline too correlated to
calibrate (and the remedy its refusal names), and the calibration's properties on i.i.d. normal values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import poisson

from streamembed.core.monitor.detector import (
    MIN_EFFECTIVE_OBJECTS,
    CalibrationError,
    CusumDetector,
    cusum_alarms,
    integrated_autocorrelation_time,
    siegmund_arl,
)
from streamembed.core.monitor.trigger import SequentialTrigger
from streamembed.core.monitor.drift import RefitTrigger


def class_runs(rng: np.random.Generator, n: int, mean_run: float, class_means: np.ndarray,
               within_sd: float = 1.0) -> np.ndarray:
    """n values arriving in runs of one class: geometric run lengths (mean ``mean_run``), classes drawn uniformly.

    Within a run the values are i.i.d. N(class mean, within_sd²); the integrated autocorrelation time is
    1 + 2·r·(mean_run − 1) with r the classes' share of the variance.
    """
    m = int(2 * n / mean_run) + 50  # enough runs: their total length exceeds n with overwhelming probability
    cls = np.repeat(rng.integers(0, class_means.size, m), rng.geometric(1.0 / mean_run, m))[:n]
    return class_means[cls] + within_sd * rng.normal(size=n)


def ar1(rng: np.random.Generator, n: int, rho: float) -> np.ndarray:
    """A stationary Gaussian AR(1) series (n,) with unit variance: φ = (1 + ρ)/(1 − ρ)."""
    from scipy.signal import lfilter

    e = rng.normal(size=n) * math.sqrt(1.0 - rho * rho)
    x = lfilter([1.0], [1.0, -rho], e, zi=[rng.normal()])[0]
    return x


# --------------------------------------------------------------------------- heavy tails


def test_one_extreme_object_cannot_raise_an_alarm(rng):
    """One object 10,000 times the baseline's maximum is clipped to the baseline's quantiles: no alarm on its own."""
    det = CusumDetector(1e8)
    base = rng.chisquare(8, size=20_000)
    det.calibrate(base)
    stream = rng.chisquare(8, size=100_000)
    stream[50_000] = 1e4 * base.max()
    d = det.update(stream)
    assert not d.fired and d.alarms == 0
    c = det.calibration
    assert c.clip_high == pytest.approx(np.quantile(base, 0.999))
    assert c.clip_low == pytest.approx(np.quantile(base, 0.001))


def test_heavy_tailed_values_keep_the_stated_run(rng):
    """Squared Student-t(3) values (infinite variance): at ERT 10⁷, 6·10⁶ objects over three baselines.

    The unclipped CUSUM raised a false alarm every ~3·10⁵ such objects (tens here); the stated rate allows
    0.6 on average, so more than the Poisson 0.999 quantile (4) fails.
    """
    alarms = 0
    for _ in range(3):
        det = CusumDetector(1e7)
        det.calibrate(rng.standard_t(3, size=20_000) ** 2)
        alarms += det.update(rng.standard_t(3, size=2_000_000) ** 2).alarms
    assert alarms <= poisson.ppf(0.999, 6e6 / 1e7), alarms


# --------------------------------------------------------------------------- dependence


MEANS = np.array([-1.0, -0.4, -0.3, 0.0, 0.1, 0.2, 0.5, 0.6, 0.8, 1.2])  # class means, within sd 1: r ≈ 0.32


def test_arrivals_in_runs_are_calibrated_not_refused(rng):
    """Arrivals in runs of one class (mean 256 objects) calibrate: φ is measured (near its true value) and used,
    so the alarm rate stays that of the guarantee."""
    r = MEANS.var() / (MEANS.var() + 1.0)
    truth = 1 + 2 * r * 255
    alarms = 0
    for _ in range(3):
        det = CusumDetector(1e5)
        c = det.calibrate(class_runs(rng, 20_000, 256, MEANS))
        assert truth / 3 < c.variance_inflation < 3 * truth
        assert c.effective_min_shift > c.min_shift  # the baseline's mean is too uncertain for 0.1 sd: k is raised
        assert c.effective_objects == pytest.approx(20_000 / c.variance_inflation)
        alarms += det.update(class_runs(rng, 1_000_000, 256, MEANS)).alarms
    assert alarms <= poisson.ppf(0.999, 3e6 / 1e5), alarms


def test_a_trigger_on_runs_stays_calibrated_and_says_why_it_is_less_sensitive(rng):
    trig = SequentialTrigger(CusumDetector(1e8), baseline_objects=20_000, fallback=RefitTrigger())
    values = class_runs(rng, 40_000, 256, MEANS)
    for i in range(40):
        trig.observe(float(i), None, 1000, values=values[i * 1000:(i + 1) * 1000])
    assert trig.kind == "cusum" and trig.expected_run_objects == 1e8
    assert "correlated" in trig.warning and "min_shift" in trig.warning


def test_a_baseline_too_correlated_is_refused_with_a_remedy_that_works(rng):
    """Runs of 10,000 objects at one of two levels 5 sd apart: a 20,000-object baseline holds two runs.

    Its values are correlated over about half of it: refused, naming drift.baseline_objects and a length; a
    baseline of that length from the same stream calibrates.
    """
    levels = np.r_[0.0, 5.0, rng.integers(0, 2, 200).astype(float) * 5.0]  # the first two runs differ
    x = np.repeat(levels, 10_000) + rng.normal(size=levels.size * 10_000)
    with pytest.raises(CalibrationError, match="correlated over about") as err:
        CusumDetector(1e6).calibrate(x[:20_000])
    assert err.value.setting == "drift.baseline_objects"
    need = int(str(err.value).split("raise drift.baseline_objects to at least ")[1].split()[0])
    assert 20_000 < need <= x.size
    c = CusumDetector(1e6).calibrate(x[:need])
    assert c.effective_objects >= MIN_EFFECTIVE_OBJECTS


def test_integrated_autocorrelation_time_of_known_processes(rng):
    assert integrated_autocorrelation_time(rng.normal(size=100_000)) == pytest.approx(1.0, abs=0.03)
    for rho in (0.5, 0.9):
        phi = integrated_autocorrelation_time(ar1(rng, 200_000, rho))
        assert phi == pytest.approx((1 + rho) / (1 - rho), rel=0.1)
    assert integrated_autocorrelation_time(np.ones(100)) == 1.0
    assert integrated_autocorrelation_time(np.array([1.0, -1.0] * 500)) == 1.0  # anticorrelated: not below 1


# --------------------------------------------------------------------------- i.i.d. normal values


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), b=st.sampled_from([16, 64, 256]), min_shift=st.floats(0.05, 0.5),
       log_ert=st.floats(4.5, 9.0))
def test_calibration_on_iid_normal_values(seed, b, min_shift, log_ert):
    """Independent normal values: φ ≈ 1, k as asked, θ* Gaussian, h solves Siegmund's ARL = ERT, margins ≥ 1."""
    rng = np.random.default_rng(seed)
    ert = 10.0**log_ert
    n = max(20_000, 40 * b, int((4 * 1.645 / min_shift) ** 2) + 1)
    det = CusumDetector(ert, min_shift, b)
    c = det.calibrate(3.0 + 2.0 * rng.normal(size=n))
    assert c.variance_inflation < 1.15  # φ̂ on 20,000 i.i.d. values: 99.9th percentile 1.10 over 400 seeds
    assert c.effective_min_shift == pytest.approx(min_shift, rel=0.06)
    assert c.reference == pytest.approx(0.5 * min_shift * math.sqrt(b / c.variance_inflation))
    assert 0 < c.mean_margin < 0.5 * c.reference and c.scale_margin >= 1.0
    k_eff = c.reference - c.mean_margin
    assert c.theta == pytest.approx(2 * k_eff / c.scale_margin**2, rel=0.1)
    arl = siegmund_arl(c.threshold, c.theta, k_eff, 1.166 * c.scale_margin)
    if c.threshold > 0:
        assert arl == pytest.approx(ert / b, rel=1e-6)
    else:  # a large reference value: even h = 0 runs longer than asked
        assert arl >= ert / b
    assert c.nominal_run_objects >= ert
    assert c.clip_low < 3.0 - 2.0 * 2.5 and c.clip_high > 3.0 + 2.0 * 2.5  # the 0.1 % tails: ±3.09 sd


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), b=st.sampled_from([16, 64]))
def test_false_alarms_on_iid_normal_values_stay_within_the_stated_rate(seed, b):
    """10⁶ stationary normal values at ERT 10⁴: at most the Poisson 0.999 quantile of 100 alarms, at least one."""
    rng = np.random.default_rng(seed)
    det = CusumDetector(1e4, 0.1, b)
    det.calibrate(rng.normal(size=20_000))
    alarms = det.update(rng.normal(size=1_000_000)).alarms
    assert 1 <= alarms <= poisson.ppf(0.999, 1e6 / 1e4), alarms


# --------------------------------------------------------------------------- one vectorised path


def test_alarm_positions_and_update_share_one_path(rng):
    base = rng.exponential(size=20_000)
    stream = rng.exponential(size=200_000) * np.where(np.arange(200_000) > 50_000, 1.4, 1.0)
    stream[rng.random(stream.size) < 0.01] = np.nan
    a = CusumDetector(1e6, 0.1, 64)
    a.calibrate(base)
    pos = a.alarm_positions(stream)
    b = CusumDetector(1e6, 0.1, 64)
    b.calibrate(base)
    firsts = []
    for start in range(0, stream.size, 999):
        d = b.update(stream[start:start + 999])
        if d.fired:
            firsts.append(start + d.index_in_batch)
    assert len(pos) > 5 and pos[0] == firsts[0] and a.alarms == b.alarms and a.statistic == b.statistic
    assert np.isfinite(stream[pos]).all()
    # brute force: clip, group, the recursion
    c = a.calibration
    v = np.clip(stream[np.isfinite(stream)], c.clip_low, c.clip_high)
    idx = np.flatnonzero(np.isfinite(stream))
    s, ref = 0.0, []
    for g in range(v.size // 64):
        s = max(0.0, s + (v[g * 64:(g + 1) * 64].mean() - c.mean) / c.group_sd - c.reference)
        if s > c.threshold:
            ref.append(idx[g * 64 + 63])
            s = 0.0
    assert pos.tolist() == ref


def test_cusum_alarms_is_exact_when_alarms_are_frequent_and_rare(rng):
    for mean in (0.5, -0.2):  # an alarm every few increments; a few in 50,000
        z = rng.normal(mean, 1.0, size=50_000)
        got, end, peak = cusum_alarms(z, 6.0)
        s, ref, top = 0.0, [], 0.0
        for j, x in enumerate(z):
            s = max(0.0, s + x)
            top = max(top, s)
            if s > 6.0:
                ref.append(j)
                s = 0.0
        assert got.tolist() == ref and end == pytest.approx(s) and peak == pytest.approx(top)
        assert len(ref) > (1000 if mean > 0 else 0)
