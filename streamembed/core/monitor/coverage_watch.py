"""The radius's coverage watched in the stream: a drift reason of its own (docs/math.md §7.9, §9.6).

When the stream carries objects whose mutual dissimilarities are known
(feature rows with the model's metric, a block with ``cross``), the drift
monitor checks the radius on a sample of them against an exact classical MDS
of that sample (``core.trust.check.sample_coverage``) and hands the coverage
to the triggers (``MonitorSample.coverage``). On objects like the fit
population it scatters around the stated coverage, with a spread far above
the binomial one (the full MDS of a sample is itself a sample); after a
population change the radius stops covering and it falls.

``CoverageTrigger`` runs a one-sided CUSUM on the falls of those coverages
(``block_detector.BlockDetector``: one value per check, standing for the
objects between checks), calibrated on stationary samples of the same size:
the fit baseline's (``FitBaseline.coverage``, armed from the first check)
or, without one, the stream's first ``MIN_BASELINE_GROUPS`` checks after the
(re)fit. The level it watches falls below is the radius's stated coverage
(known: conformal calibration makes it the stationary level) when the
baseline's mean reaches it, else the baseline's mean (estimated, its error
averaged over, ``block_detector``); the spread is the baseline's. Its ERT is
in objects (``expected_run_objects``). Without checkable
objects it never decides (statistic NaN, "no coverage checks").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .baseline import FitBaseline
from .block_detector import BlockDetector, BlockWatched
from .cusum import CalibrationError
from .detector import CONFIDENCE, EXPECTED_RUN_OBJECTS, MIN_BASELINE_GROUPS
from .drift import COOLDOWN_SECONDS, DriftStatistics, TriggerDecision
from .observation import MonitorSample

__all__ = ["CoverageTrigger", "COVERAGE_EVERY_OBJECTS", "COVERAGE_MIN_SHIFT"]

#: Objects between two coverage checks (config ``drift.coverage_every_objects``).
COVERAGE_EVERY_OBJECTS = 5000
#: The fall to catch quickly, in baseline sd of one check's coverage (config ``drift.coverage_min_shift``).
COVERAGE_MIN_SHIFT = 1.0


class CoverageTrigger(BlockWatched):
    """Refit decisions from the radius's sample coverage (module doc); a ``core.monitor.triggers.Trigger``.

    Args:
        expected_run_objects: stationary objects between false alarms.
        every_objects: objects between checks (each value stands for that many objects).
        min_shift: the fall to catch quickly, in baseline sd of a check's coverage.
        confidence: as the CUSUM's.
        cooldown_seconds: no firing within this time after a refit.
    """

    kind = "coverage"

    def __init__(self, expected_run_objects: float = EXPECTED_RUN_OBJECTS,
                 every_objects: int = COVERAGE_EVERY_OBJECTS, min_shift: float = COVERAGE_MIN_SHIFT,
                 confidence: float = CONFIDENCE, cooldown_seconds: float = COOLDOWN_SECONDS) -> None:
        self._ert = float(expected_run_objects)
        self.every_objects = int(every_objects)
        self.min_shift = float(min_shift)
        self.confidence = float(confidence)
        self.cooldown_seconds = float(cooldown_seconds)
        self.warning: str | None = None
        self._last_refit: float | None = None
        self._fit: FitBaseline | None = None
        self._start()

    def _start(self) -> None:
        self.detector: BlockDetector | None = None
        self.source: str | None = None
        self.coverage = math.nan  # the last check's
        self.level = math.nan  # the baseline's mean coverage
        self.checks = 0
        self._baseline: list[float] = []
        if self._fit is not None:
            self.arm_from_fit(self._fit)

    @property
    def watches(self) -> str:
        return "CUSUM of the fall of the radius's coverage on checked samples"

    def _calibrate(self, values: np.ndarray, source: str, groups: float | None = None,
                   stated: float | None = None) -> str | None:
        det = BlockDetector(self._ert, self.every_objects, self.min_shift, self.confidence)
        try:
            cal = det.calibrate(values, groups=groups, known_level=stated)
        except CalibrationError as exc:
            then = "; it takes its baseline from the stream's checks" if source == "the fit baseline" else ""
            self.warning = f"drift detector 'coverage' cannot be calibrated on {source} ({exc}){then}"
            return None
        self.detector, self.source, self.level = det, source, -cal.mean
        self.warning = None
        return f"{values.size} checks"

    def arm_from_fit(self, baseline: FitBaseline) -> str | None:
        """Calibrate on the fit population's sample coverages (overlapping samples of its N objects: their mean is
        known as from N / sample size independent samples); None when it has fewer than ``MIN_BASELINE_GROUPS``
        (the stream's first checks then make the baseline)."""
        self._fit = baseline
        cov = np.asarray(baseline.coverage, dtype=np.float64)
        if cov.size < MIN_BASELINE_GROUPS or baseline.coverage_objects < 1:
            return None
        stated = baseline.info.get("stated_coverage")
        return self._calibrate(cov, "the fit baseline", groups=max(1.0, baseline.n_objects / baseline.coverage_objects),
                               stated=None if stated is None else float(stated))

    def observe(self, now: float, stats: DriftStatistics | None, n_new: int, values: Any = None, *,
                result: Any = None, sample: MonitorSample | None = None) -> TriggerDecision:
        """Account for one batch: ``sample.coverage``, when the batch was checked, is one value."""
        if sample is None or sample.coverage is None or not math.isfinite(sample.coverage):
            why = "no coverage checks" if self.checks == 0 else "no check in this batch"
            return TriggerDecision(False, why, self.statistic, self.threshold, 0)
        self.coverage = float(sample.coverage)
        self.checks += 1
        if self.detector is None:
            self._baseline.append(self.coverage)
            if len(self._baseline) >= MIN_BASELINE_GROUPS:
                self._calibrate(np.asarray(self._baseline), "the stream's first checks",
                                stated=sample.stated_coverage)
                self._baseline = []
            return TriggerDecision(False, "collecting the baseline", self.statistic, self.threshold, 0)
        d = self.detector.update(np.array([self.coverage]), now)
        if not d.fired:
            return TriggerDecision(False, "below threshold", d.statistic, d.threshold, 0)
        if self._last_refit is not None and now - self._last_refit < self.cooldown_seconds:
            return TriggerDecision(False, "cooldown", d.peak, d.threshold, 0)
        return TriggerDecision(True, f"CUSUM of the coverage's fall reached {d.peak:.4g} > h = {d.threshold:.4g} "
                               f"(last check: {100 * self.coverage:.0f}% of {sample.coverage_objects} objects within "
                               f"their radius; baseline {100 * self.level:.0f}%)", d.peak, d.threshold, 0)

    def refitted(self, now: float) -> None:
        self._last_refit = now
        self._fit = None
        self.warning = None
        self._start()

    def cooldown(self, now: float) -> None:
        self._last_refit = now
        if self.detector is not None:
            self.detector.restart()
