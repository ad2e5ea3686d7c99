"""The daemon's refit trigger around the CUSUM (docs/math.md §7): it collects the baseline after each (re)fit,
calibrates a :class:`~streamembed.core.monitor.detector.CusumDetector`, and falls back to the baseline-ratio rule
(``core.monitor.drift.RefitTrigger``) with a warning naming the setting when calibration is impossible. A model's
fit baseline (``core.monitor.baseline``) arms it from the first record (``arm_from_fit``, docs/math.md §7.8) until
the stream's own baseline is taken; a stream baseline whose halves differ is not taken silently: it fires.

Nothing here reads a clock or does I/O: callers pass ``now`` and log ``SequentialTrigger.warning``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .baseline import FitBaseline
from .block_detector import halves_alarm
from .cusum import CalibrationError, normal_quantile, round_up
from .detector import MIN_BASELINE_GROUPS, Calibration, CusumDetector
from .drift import BASELINE_OBJECTS, COOLDOWN_SECONDS, DriftStatistics, RefitTrigger, TriggerDecision
from .quantiles import t_quantile

__all__ = ["SequentialTrigger", "correlation_note"]


def correlation_note(c: Calibration) -> str | None:
    """What a calibration on correlated values gave up (None when the reference value is the one asked for).

    The reference value is raised to twice the mean's margin when N/φ
    effectively independent objects cannot place the mean within a quarter of
    ``min_shift`` (docs/math.md §7.3); the baseline that would restore it is
    (4·t/min_shift)²·φ objects.
    """
    if not c.effective_min_shift > c.min_shift * (1.0 + 1e-9):
        return None
    t = t_quantile(max(c.effective_objects - 1.0, 1.0), c.confidence)
    need = round_up((4.0 * t / c.min_shift) ** 2 * c.variance_inflation)
    return (f"drift detector 'cusum': the baseline's values are correlated over about {c.variance_inflation:,.0f} "
            f"objects (objects arriving in runs?), so its {c.baseline_objects} objects hold {c.effective_objects:,.0f} "
            f"independent ones; the CUSUM is calibrated for them and tuned to rises of {c.effective_min_shift:.3g} "
            f"baseline sd instead of drift.min_shift = {c.min_shift:g} (drift.baseline_objects = {need} would "
            f"restore it)")


class SequentialTrigger:
    """Refit decisions from a ``CusumDetector``, with baseline collection, cooldown and fallback.

    After construction and after every ``refitted``, the first
    ``baseline_objects`` values are collected (no decisions); then the
    detector is calibrated. If calibration fails, ``warning`` says why and
    which setting to change, and decisions come from ``fallback`` (the
    baseline-ratio rule) until the next refit, when calibration is tried
    again. Without a fallback the ``CalibrationError`` propagates. When the
    baseline's values are correlated enough that the detector is tuned to a
    larger shift than ``min_shift``, ``warning`` says so (``correlation_note``)
    while the CUSUM decides.

    ``observe`` has ``RefitTrigger.observe``'s signature and uses the batch's
    per-object values; it returns the same ``TriggerDecision``. A
    ``core.monitor.triggers.Trigger``: while the fallback decides, ``kind``,
    ``watches``, ``statistic`` and ``threshold`` are the fallback's.

    Args:
        detector: the CUSUM (its ERT is the guarantee).
        baseline_objects: values collected after a (re)fit before calibrating.
        cooldown_seconds: no firing within this time after a refit.
        fallback: the rule used when calibration fails (None: raise instead).
    """

    def __init__(self, detector: CusumDetector, baseline_objects: int = BASELINE_OBJECTS,
                 cooldown_seconds: float = COOLDOWN_SECONDS, fallback: RefitTrigger | None = None) -> None:
        self.detector = detector
        self.baseline_objects = int(baseline_objects)
        self.cooldown_seconds = float(cooldown_seconds)
        self.fallback = fallback
        self.warning: str | None = None
        self._baseline: list[np.ndarray] = []
        self._baseline_n = 0
        self._last_refit: float | None = None
        self._failed = False
        #: the detector calibrated on the model's fit baseline, deciding until the stream baseline is taken
        self.fit_detector: CusumDetector | None = None

    @property
    def kind(self) -> str:
        """"cusum", or "rule" while the fallback decides."""
        return "rule" if self._failed else "cusum"

    @property
    def expected_run_objects(self) -> float | None:
        return None if self._failed else self.detector.expected_run_objects

    @property
    def watches(self) -> str:
        """What the decision is made on."""
        if self._failed and self.fallback is not None:
            return self.fallback.watches
        return "CUSUM of the unexplained energy"

    @property
    def _deciding(self) -> CusumDetector:
        """The detector that decides now: the fit-armed one until the stream baseline is taken."""
        if not self.detector.calibrated and self.fit_detector is not None:
            return self.fit_detector
        return self.detector

    @property
    def statistic(self) -> float:
        """S (standardised group-mean units), or the fallback's statistic while it decides."""
        if self._failed and self.fallback is not None:
            return self.fallback.statistic
        return self._deciding.statistic

    @property
    def threshold(self) -> float:
        """h (NaN before calibration), or the fallback's level while it decides."""
        if self._failed and self.fallback is not None:
            return self.fallback.threshold
        return self._deciding.threshold

    @property
    def armed(self) -> bool:
        """Whether a calibrated detector (or the fallback, once it has its baseline) decides."""
        if self._failed and self.fallback is not None:
            return math.isfinite(self.fallback.threshold)
        return self._deciding.calibrated

    def arm_from_fit(self, baseline: FitBaseline) -> str | None:
        """Calibrate a detector on the fit population's unexplained energies (docs/math.md §7.8): groups of at most
        ``group_objects`` (at least ``MIN_BASELINE_GROUPS`` of them) and the smallest shift its N objects support
        (4z/√N baseline sd, at least ``min_shift``). It decides until the stream's own baseline is taken. Returns
        what it was armed with, or None (and why in ``warning``)."""
        det = self.detector
        u = np.asarray(baseline.unexplained, dtype=np.float64)
        u = u[np.isfinite(u)]
        b = min(det.group_objects, u.size // MIN_BASELINE_GROUPS)
        if b < 1:
            self.warning = (f"drift detector 'cusum': the fit baseline's {u.size} objects are too few to arm it; it "
                            f"arms after {self.baseline_objects} objects of the stream")
            return None
        shift = max(det.min_shift, 1.0001 * 4.0 * normal_quantile(det.confidence) / math.sqrt(u.size))
        fit = CusumDetector(det.expected_run_objects, shift, b, det.confidence, clip_quantile=det.clip_quantile)
        try:
            c = fit.calibrate(u)
        except CalibrationError as exc:
            self.warning = f"drift detector 'cusum' cannot be armed from the fit ({exc}); it arms from the stream"
            return None
        self.fit_detector = fit
        self.warning = None if c.effective_min_shift <= det.min_shift * (1 + 1e-6) else (
            f"drift detector 'cusum': armed from {u.size} fit objects, tuned to rises of {c.effective_min_shift:.3g} "
            f"baseline sd of the unexplained energy until the stream's {self.baseline_objects} baseline objects "
            f"restore drift.min_shift = {det.min_shift:g}")
        return f"{u.size} fit objects in groups of {b}"

    def refitted(self, now: float) -> None:
        """A refit happened (or was attempted): new baseline, cooldown."""
        self._last_refit = now
        self._baseline, self._baseline_n = [], 0
        self.detector.calibration = None
        self.detector.reset()
        self.fit_detector = None  # the fit population belongs to the map that was replaced
        self._failed = False
        self.warning = None
        if self.fallback is not None:
            self.fallback.refitted(now)

    def cooldown(self, now: float) -> None:
        """A refit was not installed (failed, skipped, led elsewhere): restart S and cool down, keep the baseline.

        Re-baselining here would calibrate on the drifted stream and accept
        the drift the alarm was about.
        """
        self._last_refit = now
        self.detector.restart()
        if self.fit_detector is not None:
            self.fit_detector.restart()
        if self.fallback is not None:
            self.fallback.cooldown(now)

    def observe(self, now: float, stats: DriftStatistics | None, n_new: int, values: Any = None, *,
                result: object = None, sample: object = None) -> TriggerDecision:
        """Account for ``n_new`` objects: ``values`` (n_new,) their per-object statistic, ``stats`` the window's
        (``result``, the batch's ``EmbeddingResult``, and ``sample`` are not needed)."""
        if self._failed:
            assert self.fallback is not None  # _failed is only set with a fallback
            return self.fallback.observe(now, stats, n_new)
        vals = np.empty(0) if values is None else np.asarray(values, dtype=np.float64).ravel()
        det = self.detector
        if not det.calibrated:
            self._baseline.append(vals.copy())
            self._baseline_n += vals.size
            if self._baseline_n < self.baseline_objects:
                if self.fit_detector is not None:
                    return self._decide(self.fit_detector, vals, now)
                return TriggerDecision(False, "collecting the baseline", math.nan, math.nan, 0)
            baseline = np.concatenate(self._baseline)
            changed = self._baseline_changed(baseline, now)  # first: a baseline holding a change may not calibrate
            try:
                c = det.calibrate(baseline)
            except CalibrationError as exc:
                if self.fallback is None:
                    raise
                self._failed = True
                self.warning = (f"drift detector 'cusum' cannot be calibrated ({exc}); falling back to the "
                                f"baseline-ratio rule until the next refit (setting {exc.setting})")
                return changed or self.fallback.observe(now, stats, n_new)
            finally:
                self._baseline = []
            self.fit_detector = None
            self.warning = correlation_note(c)
            return changed or TriggerDecision(False, "calibrated", det.statistic, det.threshold, 0)
        return self._decide(det, vals, now)

    def _baseline_changed(self, baseline: np.ndarray, now: float) -> TriggerDecision | None:
        """Fire when the detector calibrated on the baseline's first half alarms on its second (a change inside the
        baseline window), outside the cooldown; else None."""
        det = self.detector
        probe = CusumDetector(det.expected_run_objects, det.min_shift, det.group_objects, det.confidence,
                              clip_quantile=det.clip_quantile)
        at = halves_alarm(baseline[np.isfinite(baseline)], probe)
        if at is None or (self._last_refit is not None and now - self._last_refit < self.cooldown_seconds):
            return None
        v = baseline[np.isfinite(baseline)]
        return TriggerDecision(True, f"the baseline window itself changed: the unexplained energy of its second half "
                               f"(mean {v[v.size // 2:].mean():.4g}) alarms the CUSUM calibrated on its first (mean "
                               f"{v[: v.size // 2].mean():.4g}) at its object {at}", math.nan, math.nan, 0)

    def _decide(self, det: CusumDetector, vals: np.ndarray, now: float) -> TriggerDecision:
        d = det.update(vals, now)
        cooling = self._last_refit is not None and now - self._last_refit < self.cooldown_seconds
        if d.fired and not cooling:
            cal = det.calibration
            assert cal is not None  # a detector that fired is calibrated
            return TriggerDecision(True, f"CUSUM of the residual reached {d.peak:.4g} > h = {cal.threshold:.4g} "
                                   f"(ERT {cal.expected_run_objects:.3g} objects)", d.peak, d.threshold, 0)
        return TriggerDecision(False, "cooldown" if d.fired else "below threshold", d.statistic, d.threshold, 0)
