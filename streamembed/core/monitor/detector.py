"""A CUSUM drift detector on the residual stream, calibrated to an expected run length (docs/math.md §7).

The monitor sees one residual value per object: by default the unexplained
energy β − ‖ŷ‖² (docs/math.md §4), which is what a change off the map raises
and what a move inside the map leaves alone. ``CusumDetector`` watches its
mean with a one-sided CUSUM (Page 1954) on *group means*: each value is
clipped to the baseline's 0.1 % and 99.9 % quantiles (one extreme object of
a heavy tail cannot raise an alarm alone), consecutive values are averaged
in groups of ``group_objects`` (carried across batches), each group mean is
standardised by the baseline's long-run scale — which counts the correlation
between objects, measured on the baseline as their integrated
autocorrelation time φ (objects arriving in runs of one class) — and

    S_j = max(0, S_{j-1} + x_j − k),   alarm when S_j > h,

with x_j the standardised group mean, k the reference value (half the
smallest shift worth detecting quickly) and h the threshold. h is chosen so
that the expected run length between false alarms on a stationary stream is
``expected_run_objects`` objects, from Siegmund's (1985) approximation of
the average run length with the adjustment coefficient θ* of the increments,
estimated from the baseline's empirical cumulant generating function (which
corrects for skewed residuals), after moving the baseline mean and scale to
the unfavourable end of their confidence intervals with N/φ − 1 degrees of
freedom (so the guarantee holds with probability ``confidence`` over the
baseline draw; correlated baselines raise k rather than being refused).
docs/math.md §7
derives all of it and states the assumptions; the tests check the false-alarm
rate by simulation.

``core.monitor.trigger.SequentialTrigger`` wraps the detector for the daemon: it collects the
baseline after each (re)fit, calibrates, and falls back to the baseline-ratio
rule (``core.monitor.drift.RefitTrigger``) with a warning naming the setting when
calibration is impossible. Nothing here reads a clock or does I/O: callers
pass ``now`` and log ``SequentialTrigger.warning``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .cusum import (
    OVERSHOOT,
    CalibrationError,
    adjustment_coefficient,
    chi2_lower,
    clip_bounds,
    cusum_alarms,
    cusum_path,
    integrated_autocorrelation_time,
    normal_quantile,
    round_up,
    siegmund_arl,
    siegmund_threshold,
)
from ..runtime import single_blas_thread
from .quantiles import t_quantile

__all__ = [
    "CalibrationError",
    "Calibration",
    "Decision",
    "CusumDetector",
    "cusum_path",
    "cusum_alarms",
    "siegmund_arl",
    "siegmund_threshold",
    "check_detector_settings",
    "clip_bounds",
    "integrated_autocorrelation_time",
    "OVERSHOOT",
    "MIN_BASELINE_GROUPS",
    "MIN_EFFECTIVE_OBJECTS",
    "CLIP_QUANTILE",
    "EXPECTED_RUN_OBJECTS",
    "MIN_SHIFT",
    "GROUP_OBJECTS",
    "CONFIDENCE",
]


#: Baseline groups needed before the group-mean variance and the CLT can be trusted.
MIN_BASELINE_GROUPS = 30

#: Effectively independent baseline objects (N / φ) below which the baseline cannot describe the stream's
#: dependence: calibration refuses and names the baseline length that would do (docs/math.md §7.4). Above it
#: the margins use N/φ − 1 degrees of freedom (Student t, χ²), so a few independent objects give a valid,
#: insensitive detector rather than a refusal.
MIN_EFFECTIVE_OBJECTS = 4.0

#: The refusal asks for this many multiples of the estimated φ (Sokal's rule of thumb for estimating φ is 50).
REMEDY_MULTIPLE = 30.0

#: Default q of ``clip_bounds``: every value is clipped to the baseline's 1 − q and q quantiles.
CLIP_QUANTILE = 0.999
#: The detector's defaults (config ``drift.expected_run_objects``, ``drift.min_shift``, ``drift.group_objects``,
#: ``drift.confidence``): a false alarm per 1e8 stationary objects, shifts of 0.1 baseline sd, groups of 256, at
#: 95 % confidence over baselines (docs/math.md §7).
EXPECTED_RUN_OBJECTS = 1e8
MIN_SHIFT = 0.1
GROUP_OBJECTS = 256
CONFIDENCE = 0.95




@dataclass(frozen=True)
class Calibration:
    """What the baseline gave and the threshold it implies.

    Units: ``mean``/``sd`` in the statistic's units (per object); ``reference``,
    ``threshold``, ``mean_margin`` and ``scale_margin`` in standardised group-mean
    units (x above); run lengths in objects.

    Attributes:
        baseline_objects: finite values used.
        baseline_groups: G, complete groups among them.
        group_objects: b, objects per group.
        mean, sd: baseline mean and standard deviation of the per-object
            statistic after clipping.
        group_sd: long-run standard deviation of a group mean, used to
            standardise: sd·√(φ/b) (sd/√b for independent objects).
        variance_inflation: φ ≥ 1, the integrated autocorrelation time of the
            (clipped) values in objects: 1 for independent objects, about
            1 + 2·r·L for arrivals in runs of mean length L whose class means
            carry a share r of the variance.
        skewness: of the per-object statistic.
        reference: k, ½·min_shift·√b_eff, or twice the mean's margin when that
            is larger (docs/math.md §7.3).
        mean_margin: e, the baseline mean's one-sided confidence margin, t_ν·√(b/N)
            with ν = N/φ − 1 (z/√G for independent values).
        scale_margin: s ≥ 1, the factor on the group sd at the confidence bound.
        theta: θ*, the adjustment coefficient of the worst-case increments.
        threshold: h.
        expected_run_objects: the requested ERT (objects between false alarms).
        nominal_run_objects: the ERT at the estimated (not worst-case) mean and
            scale, ≥ ``expected_run_objects``: how conservative the guarantee is.
        delay_objects_at_min_shift: Siegmund's expected detection delay of a
            step of ``min_shift`` baseline standard deviations (from a zero statistic).
        confidence: probability, over baseline draws, that the ERT is at least
            ``expected_run_objects`` (under the assumptions of docs/math.md §7).
        clip_low, clip_high: every value (baseline and stream) is clipped to
            [clip_low, clip_high], the baseline's 1 − q and q quantiles
            (q = ``clip_quantile``; ±inf when q = 1), in the statistic's units.
        effective_objects: N/φ, the baseline's effectively independent objects.
        min_shift: the shift asked for (baseline sd of one object).
        effective_min_shift: 2k/√b_eff, the shift the reference value is tuned
            to: ``min_shift``, or larger when the baseline's mean is too
            uncertain for it because its values are correlated (docs/math.md §7.4).
    """

    baseline_objects: int
    baseline_groups: int
    group_objects: int
    mean: float
    sd: float
    group_sd: float
    variance_inflation: float
    skewness: float
    reference: float
    mean_margin: float
    scale_margin: float
    theta: float
    threshold: float
    expected_run_objects: float
    nominal_run_objects: float
    delay_objects_at_min_shift: float
    confidence: float
    clip_low: float = -math.inf
    clip_high: float = math.inf
    clip_quantile: float = 1.0
    effective_objects: float = math.nan
    min_shift: float = math.nan
    effective_min_shift: float = math.nan

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Decision:
    """The detector after one batch.

    Attributes:
        fired: an alarm happened in this batch.
        index_in_batch: position (in the batch's values) of the object whose
            group crossed the threshold first, or None.
        statistic: S after the batch (after a restart if it fired).
        threshold: h (NaN before calibration).
        alarms: alarms in this batch (the CUSUM restarts at 0 after each).
        peak: the largest S reached in this batch (≥ threshold when fired).
    """

    fired: bool
    index_in_batch: int | None
    statistic: float
    threshold: float
    alarms: int = 0
    peak: float = 0.0


def check_detector_settings(
    expected_run_objects: float,
    baseline_objects: int,
    group_objects: int = GROUP_OBJECTS,
    min_shift: float = MIN_SHIFT,
    confidence: float = CONFIDENCE,
) -> None:
    """Refuse settings that cannot be calibrated whatever the data (call at start-up).

    Checks that the ERT is a finite number of at least 10 groups, that the
    baseline holds ``MIN_BASELINE_GROUPS`` groups, and that even for ideal
    (independent, Gaussian) residuals the baseline mean's confidence margin
    leaves at least half of the reference value (docs/math.md §7):
    baseline_objects ≥ (4·z / min_shift)².

    Raises:
        CalibrationError: naming the setting to change.
    """
    if not (math.isfinite(expected_run_objects) and expected_run_objects >= 10 * group_objects):
        raise CalibrationError(
            f"drift.expected_run_objects = {expected_run_objects:g} must be a finite number of at least 10 groups "
            f"({10 * group_objects} objects with drift.group_objects = {group_objects})", "drift.expected_run_objects")
    if group_objects < 1:
        raise CalibrationError(f"drift.group_objects must be ≥ 1, got {group_objects}", "drift.group_objects")
    if not 0.5 < confidence < 1.0:
        raise CalibrationError(f"drift.confidence must lie in (0.5, 1), got {confidence}", "drift.confidence")
    if not min_shift > 0:
        raise CalibrationError(f"drift.min_shift must be positive, got {min_shift}", "drift.min_shift")
    need_groups = MIN_BASELINE_GROUPS * group_objects
    z = normal_quantile(confidence)
    need_shift = math.ceil((4.0 * z / min_shift) ** 2)
    need = max(need_groups, need_shift)
    if baseline_objects < need:
        raise CalibrationError(
            f"drift.baseline_objects = {baseline_objects} is too short to calibrate the CUSUM for "
            f"drift.expected_run_objects = {expected_run_objects:g}: with drift.min_shift = {min_shift:g} and "
            f"drift.group_objects = {group_objects} it needs at least {need} objects "
            f"({MIN_BASELINE_GROUPS} groups, and a mean known to within a quarter of min_shift at "
            f"confidence {confidence:g})", "drift.baseline_objects")


# --------------------------------------------------------------------------- the detector


class CusumDetector:
    """One-sided CUSUM on baseline-standardised group means of a per-object statistic.

    Args:
        expected_run_objects: ERT, the expected number of stationary objects
            between false alarms (counted in objects that contribute values;
            see ``values_per_object``).
        min_shift: the smallest rise of the statistic's mean worth detecting
            quickly, in baseline standard deviations of one object's value;
            the reference value is half of it (per object). Smaller values
            detect smaller drifts, at a longer delay for large ones
            (docs/math.md §7; 0.1 detects a mean rise of ~5–10 % of a
            χ²-like residual within a few thousand objects).
        group_objects: b, values averaged per CUSUM step. Makes the increments
            nearly Gaussian (the ARL approximation's regime) and costs at most
            b objects of delay; correlation between objects, within or across
            groups, is measured on the baseline (φ) and accounted for.
        confidence: probability over baseline draws that the real ERT is at
            least ``expected_run_objects``: the baseline mean and scale are
            moved to the unfavourable end of their one-sided intervals.
        values_per_object: values fed per stream object (1 for the unexplained
            energy of every object; s/m when only a sample of s rows of
            m-object batches is fed), so that ERT is in objects.
        clip_quantile: q; every value is clipped to the baseline's 1 − q and
            q quantiles before it is averaged, so that one extreme object
            (heavy tails) cannot raise an alarm alone (docs/math.md §7.2).
            1 disables clipping.
    """

    kind = "cusum"

    def __init__(
        self,
        expected_run_objects: float = EXPECTED_RUN_OBJECTS,
        min_shift: float = MIN_SHIFT,
        group_objects: int = GROUP_OBJECTS,
        confidence: float = CONFIDENCE,
        values_per_object: float = 1.0,
        clip_quantile: float = CLIP_QUANTILE,
    ) -> None:
        if not values_per_object > 0:
            raise CalibrationError(f"values_per_object must be positive, got {values_per_object}", "drift.k0_sample")
        if not 0.5 < clip_quantile <= 1.0:
            raise CalibrationError(f"drift.clip_quantile must lie in (0.5, 1], got {clip_quantile}",
                                   "drift.clip_quantile")
        self._expected_run_objects = float(expected_run_objects)
        self.min_shift = float(min_shift)
        self.group_objects = int(group_objects)
        self.confidence = float(confidence)
        self.values_per_object = float(values_per_object)
        self.clip_quantile = float(clip_quantile)
        self.calibration: Calibration | None = None
        self._carry = np.empty(0)
        self._S = 0.0
        self.alarms = 0
        self.last_alarm_time: float | None = None

    # ------------------------------------------------------------ properties
    @property
    def expected_run_objects(self) -> float:
        return self._expected_run_objects

    @property
    def statistic(self) -> float:
        """S, the CUSUM statistic (standardised group-mean units)."""
        return self._S

    @property
    def threshold(self) -> float:
        """h (NaN before calibration)."""
        return math.nan if self.calibration is None else self.calibration.threshold

    @property
    def calibrated(self) -> bool:
        return self.calibration is not None

    # ----------------------------------------------------------- calibration
    def calibrate(self, baseline_values: np.ndarray) -> Calibration:
        """Estimate the in-control mean, scale and dependence from baseline values (N,) and set h.

        docs/math.md §7.2–7.3: values are clipped at the baseline's quantiles;
        φ, the integrated autocorrelation time of the clipped values, gives the
        long-run scale of a group mean and the baseline's N/φ effectively
        independent objects, which set the confidence margins.

        Raises:
            CalibrationError: the baseline is too short for the requested ERT
                and ``min_shift`` even for independent values, or its values
                are correlated over so many objects that fewer than
                ``MIN_EFFECTIVE_OBJECTS`` are effectively independent (setting
                ``drift.baseline_objects``; the message names the length that
                would do), has zero variance (``drift.baseline_objects``: a
                constant statistic cannot be standardised), or the ERT itself
                is unusable.
        """
        b = self.group_objects
        v = np.asarray(baseline_values, dtype=np.float64).ravel()
        v = v[np.isfinite(v)]
        N = v.size
        G = N // b
        ert_values = self._expected_run_objects * self.values_per_object
        if not (math.isfinite(ert_values) and ert_values >= 10 * b):
            raise CalibrationError(
                f"drift.expected_run_objects = {self._expected_run_objects:g} is not a finite number of at least "
                f"10 groups of {b} values", "drift.expected_run_objects")
        if G < MIN_BASELINE_GROUPS:
            raise CalibrationError(
                f"the baseline has {N} finite values, {G} groups of {b}: at least {MIN_BASELINE_GROUPS} groups "
                f"({MIN_BASELINE_GROUPS * b} values) are needed (drift.baseline_objects)", "drift.baseline_objects")
        q = self.clip_quantile
        lo, hi = clip_bounds(v, q)
        w = np.clip(v, lo, hi) if q < 1.0 else v
        mean = float(w.mean())
        sd = float(w.std(ddof=1))
        if not (math.isfinite(sd) and sd > 1e-12 * max(abs(mean), 1e-300)):
            raise CalibrationError(
                f"the baseline's statistic has zero variance (all {N} values ≈ {mean:.6g}"
                f"{'' if q == 1.0 else f' after clipping at its {1 - q:g} and {q:g} quantiles'}): the CUSUM cannot "
                f"be standardised (drift.baseline_objects; is the map exact for this stream?)",
                "drift.baseline_objects")
        y = (w - mean) / sd
        skew = float(np.mean(y**3))
        kurt = float(np.mean(y**4))
        z = normal_quantile(self.confidence)
        if (4.0 * z / self.min_shift) ** 2 > N:  # even independent values leave less than k/2 after the mean's margin
            need = int(math.ceil((4.0 * z / self.min_shift) ** 2))
            raise CalibrationError(
                f"the baseline of {N} objects is too short for drift.expected_run_objects = "
                f"{self._expected_run_objects:g} at drift.min_shift = {self.min_shift:g}: the uncertainty of its "
                f"mean (at confidence {self.confidence:g}) would use more than half of the reference value; "
                f"raise drift.baseline_objects to at least {need}", "drift.baseline_objects")
        phi = integrated_autocorrelation_time(y)
        n_eff = N / phi
        if n_eff < MIN_EFFECTIVE_OBJECTS:
            need = round_up(REMEDY_MULTIPLE * phi)
            raise CalibrationError(
                f"the baseline's values are correlated over about {phi:,.0f} objects (their integrated "
                f"autocorrelation time: objects arriving in runs or sorted by a key): its {N} objects hold only "
                f"{n_eff:.1f} independent ones, too few to know the stream's mean; raise drift.baseline_objects to "
                f"at least {need} (or interleave the inputs before the monitor)", "drift.baseline_objects")
        b_eff = b / phi
        group_sd = sd * math.sqrt(phi / b)
        nu = max(n_eff - 1.0, 1.0)
        e = t_quantile(nu, self.confidence) * math.sqrt(b / N)  # the mean's margin, in long-run group sd
        s = 1.0 + z * math.sqrt(max(kurt - 1.0, 0.0) / (4.0 * n_eff))
        if phi > 1.0:
            s *= math.sqrt(nu / chi2_lower(nu, self.confidence))
        k = max(0.5 * self.min_shift * math.sqrt(b_eff), 2.0 * e)
        ert_groups = ert_values / b
        with single_blas_thread():  # root searches of small products: one BLAS thread (core.runtime)
            theta = adjustment_coefficient(y, b_eff, s, k - e)
            theta0 = adjustment_coefficient(y, b_eff, 1.0, k)
        h = siegmund_threshold(ert_groups, theta, k - e, OVERSHOOT * s)
        nominal = siegmund_arl(h, theta0, k) * b / self.values_per_object
        delay = (h + OVERSHOOT) / k * b / self.values_per_object  # shift 2k: increments of mean +k
        self.calibration = Calibration(
            baseline_objects=int(N), baseline_groups=int(G), group_objects=b, mean=mean, sd=sd, group_sd=group_sd,
            variance_inflation=phi, skewness=skew, reference=k, mean_margin=e, scale_margin=s, theta=theta,
            threshold=h, expected_run_objects=self._expected_run_objects, nominal_run_objects=nominal,
            delay_objects_at_min_shift=delay, confidence=self.confidence, clip_low=lo, clip_high=hi,
            clip_quantile=q, effective_objects=n_eff, min_shift=self.min_shift,
            effective_min_shift=2.0 * k / math.sqrt(b_eff),
        )
        self.reset()
        return self.calibration

    # ---------------------------------------------------------------- update
    def reset(self) -> None:
        """S = 0 and no partial group (after an alarm was acted on, or a new baseline)."""
        self._S = 0.0
        self._carry = np.empty(0)

    def restart(self) -> None:
        """S = 0, the partial group kept (a refit that was not installed: the stream goes on, the baseline stays)."""
        self._S = 0.0

    def increments(self, group_means: np.ndarray) -> np.ndarray:
        """x_j − k for group means (G,) of the clipped statistic (``group_means``)."""
        c = self.calibration
        assert c is not None, "calibrate() first"
        return (np.asarray(group_means, dtype=np.float64) - c.mean) / c.group_sd - c.reference

    def group_means(self, values: np.ndarray) -> np.ndarray:
        """Means (⌊m/b⌋,) of consecutive complete groups of b clipped finite values of ``values`` (m,), no carry."""
        c = self.calibration
        assert c is not None, "calibrate() first"
        v = np.asarray(values, dtype=np.float64).ravel()
        v = np.clip(v[np.isfinite(v)], c.clip_low, c.clip_high)
        G = v.size // self.group_objects
        return v[: G * self.group_objects].reshape(G, self.group_objects).mean(axis=1)

    def _feed(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, float]:
        """Advance the CUSUM over one batch (m,): (alarm positions in the batch, finite mask or None, peak S).

        The one vectorised path of ``update`` and ``alarm_positions``: values
        are clipped, appended to the carried partial group, averaged in
        complete groups, and run through ``cusum_alarms``. A position is that
        of the last value of the group that crossed h.
        """
        if self.calibration is None:
            raise RuntimeError("CusumDetector.update before calibrate")
        c = self.calibration
        b = self.group_objects
        raw = np.asarray(values, dtype=np.float64).ravel()
        finite = np.isfinite(raw)
        mask = None if finite.all() else finite
        v = np.clip(raw if mask is None else raw[mask], c.clip_low, c.clip_high)
        n_carry = self._carry.size
        buf = np.concatenate((self._carry, v)) if n_carry else v
        G = buf.size // b
        if G == 0:
            self._carry = buf.copy()
            return np.empty(0, dtype=np.int64), mask, self._S
        means = buf[: G * b].reshape(G, b).mean(axis=1)
        self._carry = buf[G * b:].copy()
        alarms, self._S, peak = cusum_alarms(self.increments(means), c.threshold, self._S)
        self.alarms += int(alarms.size)
        pos = (alarms + 1) * b - n_carry - 1  # among the batch's finite values
        if mask is not None and pos.size:
            pos = np.flatnonzero(mask)[pos]
        return pos, mask, peak

    def update(self, values: np.ndarray, now: float = 0.0) -> Decision:
        """Feed one batch of per-object values (m,) (NaN ignored); the CUSUM restarts after each alarm.

        Raises:
            RuntimeError: before ``calibrate``.
        """
        pos, _, peak = self._feed(values)
        if pos.size == 0:
            return Decision(False, None, self._S, self.threshold, 0, peak)
        self.last_alarm_time = now
        return Decision(True, int(pos[0]), self._S, self.threshold, int(pos.size), peak)

    def alarm_positions(self, values: np.ndarray) -> np.ndarray:
        """Every alarm in a batch (m,), as positions into it (a,); the state advances exactly as in ``update``."""
        return self._feed(values)[0]
