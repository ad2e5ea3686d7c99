"""A CUSUM on falls of a per-block share (the in-map statistic, the coverage watch), calibrated like the off-map
one (docs/math.md §7.7).

Each block of the stream gives one value s_j (the captured share of M
objects, the coverage of a checked sample); a fall of its mean is what the
detector is for. ``BlockDetector`` runs ``detector.CusumDetector`` on −s_j
with one value per group (a block is already an average over many objects),
no clipping (a share lies in [0, 1]) and ``values_per_object`` = 1 / (objects
per block), so that its threshold is calibrated to ``expected_run_objects``
stationary *objects* between false alarms from the baseline's block values,
with the same margins for an estimated mean, scale and dependence (§7.3).

A baseline of G blocks knows its mean to about one block sd/√G: calibration
needs ``MIN_BASELINE_GROUPS`` blocks, and with fewer than (4z/min_shift)²
(44 at min_shift 1 and confidence 0.95) the reference value is raised to the
smallest shift they support, 4z/√G sd (``effective_min_shift``), and the
warning says so. ``halves_alarm`` is the check that a baseline holds no
change: the detector calibrated on its first half, run on its second.
"""

from __future__ import annotations

import math

import numpy as np

from .cusum import CalibrationError, normal_quantile
from .detector import MIN_BASELINE_GROUPS, Calibration, CusumDetector, Decision

__all__ = ["BlockDetector", "halves_alarm"]


class BlockDetector:
    """CUSUM on falls of per-block values (module doc).

    Args:
        expected_run_objects: stationary objects between false alarms.
        objects_per_value: objects each block value stands for (the ERT is counted in objects).
        min_shift: the fall to catch quickly, in baseline standard deviations of one block value.
        confidence: as ``CusumDetector``'s.
    """

    def __init__(self, expected_run_objects: float, objects_per_value: float, min_shift: float,
                 confidence: float) -> None:
        self.expected_run_objects = float(expected_run_objects)
        self.objects_per_value = float(objects_per_value)
        self.min_shift = float(min_shift)
        self.confidence = float(confidence)
        self.cusum: CusumDetector | None = None

    @property
    def calibration(self) -> Calibration | None:
        return None if self.cusum is None else self.cusum.calibration

    @property
    def statistic(self) -> float:
        return math.nan if self.cusum is None else self.cusum.statistic

    @property
    def threshold(self) -> float:
        return math.nan if self.cusum is None else self.cusum.threshold

    def calibrate(self, values: np.ndarray) -> Calibration:
        """Calibrate on baseline block values (G,) (finite ones); raises ``CalibrationError`` (setting
        ``drift.baseline_objects``) for fewer than ``MIN_BASELINE_GROUPS`` of them or no spread."""
        v = np.asarray(values, dtype=np.float64)
        v = v[np.isfinite(v)]
        G = v.size
        if G < MIN_BASELINE_GROUPS:
            raise CalibrationError(f"the baseline holds {G} blocks with a value; at least {MIN_BASELINE_GROUPS} "
                                   f"are needed (drift.baseline_objects)", "drift.baseline_objects")
        z = normal_quantile(self.confidence)
        shift = max(self.min_shift, 1.0001 * 4.0 * z / math.sqrt(G))
        cusum = CusumDetector(self.expected_run_objects, shift, 1, self.confidence,
                              values_per_object=1.0 / self.objects_per_value, clip_quantile=1.0)
        cal = cusum.calibrate(-v)
        self.cusum = cusum
        return cal

    def update(self, values: np.ndarray, now: float = 0.0) -> Decision:
        """Feed block values (g,) (NaN ignored); before ``calibrate`` nothing happens."""
        if self.cusum is None or self.cusum.calibration is None:
            return Decision(False, None, math.nan, math.nan)
        return self.cusum.update(-np.asarray(values, dtype=np.float64), now)

    def reset(self) -> None:
        if self.cusum is not None:
            self.cusum.reset()

    def restart(self) -> None:
        if self.cusum is not None:
            self.cusum.restart()


def halves_alarm(values: np.ndarray, make: BlockDetector | CusumDetector) -> int | None:
    """The first position in the second half of ``values`` (N,) where ``make`` calibrated on the first half
    alarms, or None (no alarm, or a first half that cannot be calibrated): a baseline window that itself
    holds a change. ``make`` is an uncalibrated detector with the settings to use; it is calibrated here."""
    v = np.asarray(values, dtype=np.float64)
    half = v.size // 2
    try:
        make.calibrate(v[:half])
    except CalibrationError:
        return None
    if isinstance(make, BlockDetector):
        assert make.cusum is not None
        pos = make.cusum.alarm_positions(-v[half:])
    else:
        pos = make.alarm_positions(v[half:])
    return int(half + pos[0]) if pos.size else None
