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

The threshold is set for the false-alarm rate *averaged over baselines*
(``average_threshold``): a baseline of G blocks (G/φ effectively independent)
knows the stream's mean to δ ~ N(0, 1/G) block sd and its scale to a factor
s with log s ~ N(0, (κ − 1)φ/(4G)); h solves E_{δ,s}[1/ARL(h; δ, s)] = 1/A,
A = ``AVERAGE_MARGIN`` · ERT / objects per block, with Siegmund's ARL of increments s·ξ + δ − k
(θ* from the baseline's empirical CGF, as §7.3) and Gauss–Hermite quadrature
over δ and log s. A daemon takes a new baseline after every refit, so its
long-run false-alarm rate is that average: the stated run holds on average
rather than for 95 % of baselines (the per-baseline margins of the
off-map CUSUM made the measured run 3–6× the stated one here; docs/math.md
§7.7 has the measurements). A baseline worth few blocks (``groups``: a
fit baseline of N objects is worth N/M blocks) is treated as the off-map
CUSUM treats every baseline (§7.3): its mean is moved by the margin
e = z/√G block sd (z at ``FEW_BLOCKS_CONFIDENCE``) towards the alarm and the reference value is at least 2e,
with h for that mean; averaging over its mean's error instead put the
baselines whose mean is off by more than k, which alarm in a time linear in
h, in charge of the rate and set h ≈ 7,500 at 20 blocks' worth (no alarm in
10,000 objects of a switch the stream baseline alarms in 500), and a
fit population's mean is off its stream's by up to 0.46 block sd on the real
streams (docs/math.md §7.8). Calibration needs ``MIN_BASELINE_GROUPS``
blocks. ``halves_alarm`` is the check that a baseline holds no change: the
detector calibrated on its first half, run on its second.
"""

from __future__ import annotations

import math

import numpy as np

from .cusum import (OVERSHOOT, CalibrationError, adjustment_coefficient, integrated_autocorrelation_time,
                    normal_quantile, siegmund_arl)
from ..runtime import single_blas_thread
from .detector import MIN_BASELINE_GROUPS, MIN_EFFECTIVE_OBJECTS, Calibration, CusumDetector, Decision

__all__ = ["BlockDetector", "BlockWatched", "halves_alarm", "average_threshold", "QUADRATURE_NODES", "AVERAGE_MARGIN",
           "FEW_BLOCKS_CONFIDENCE"]

#: Gauss–Hermite nodes per dimension (mean, log scale) of ``average_threshold``.
QUADRATURE_NODES = 12
#: A baseline worth few blocks takes its mean's margin at this confidence: a fit population's mean share is off its
#: stream's by up to 2.1 standard errors on the real streams (the landmark choice selects among the fit objects),
#: and at 95 % the fit-armed run on stdlib code lines at a stated 10⁶ was 0.40 times it; at 99.5 %, 3.3 times.
FEW_BLOCKS_CONFIDENCE = 0.995
#: The threshold is set for this many times the stated run: Siegmund's approximation on block values (a few
#: hundred baseline blocks) came out within ±20 % of the simulated run, and the stated run must hold.
AVERAGE_MARGIN = 1.5


def _arl(h: float, theta: float, drift: float, scale: float) -> float:
    """Siegmund's ARL for increments of mean −drift < 0 and scale ``scale``; the mean passage time
    (h + ρ)/|drift| (at least a step per unit) when the increments drift upwards."""
    if drift > 1e-9 and theta > 0:
        return siegmund_arl(h, theta, drift, OVERSHOOT * scale)
    return max(1.0, (h + OVERSHOOT * scale) / max(-drift, 0.05 * scale))


def average_threshold(y: np.ndarray, k: float, groups: float, phi: float, kurtosis: float,
                      target_groups: float) -> float:
    """h with E_{δ,s}[1/ARL(h; δ, s)] = 1/target_groups (module doc): y (N,) the baseline's standardised values,
    k the reference value, ``groups`` the baseline's values G (inf: a known mean), φ their integrated
    autocorrelation time, κ their kurtosis; ARL in values (one per group)."""
    with single_blas_thread():  # a loop of small products: one BLAS thread (core.runtime)
        return _average_threshold(y, k, groups, phi, kurtosis, target_groups)


def _average_threshold(y: np.ndarray, k: float, groups: float, phi: float, kurtosis: float,
                       target_groups: float) -> float:
    from numpy.polynomial.hermite_e import hermegauss

    x, w = hermegauss(QUADRATURE_NODES)
    w = w / w.sum()
    sd_mean = 0.0 if math.isinf(groups) else math.sqrt(1.0 / groups)
    sd_log_scale = math.sqrt(max(kurtosis - 1.0, 0.0) * phi / (4.0 * min(groups, 1e12)))
    nodes = []
    b_eff = 1.0 / phi
    for xi, wi in zip(x, w, strict=True):
        delta = xi * sd_mean
        for xj, wj in zip(x, w, strict=True):
            scale = math.exp(xj * sd_log_scale)
            drift = k - delta
            try:
                theta = adjustment_coefficient(y, b_eff, scale, drift) if drift > 1e-9 else 0.0
            except CalibrationError:  # no increment can exceed the drift: this node never alarms
                continue
            nodes.append((wi * wj, theta, drift, scale))

    def rate(h: float) -> float:
        return sum(weight / _arl(h, theta, drift, scale) for weight, theta, drift, scale in nodes)

    lo, hi = 0.0, 1.0
    while rate(hi) > 1.0 / target_groups and hi < 1e4:
        lo, hi = hi, 2.0 * hi
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rate(mid) > 1.0 / target_groups else (lo, mid)
    return hi


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

    def calibrate(self, values: np.ndarray, groups: float | None = None,
                  known_level: float | None = None) -> Calibration:
        """Calibrate on baseline block values (G,) (finite ones); raises ``CalibrationError`` (setting
        ``drift.baseline_objects``) for fewer than ``MIN_BASELINE_GROUPS`` of them or no spread.

        ``groups``: how many independent blocks the baseline is worth, when the values are not that many
        independent blocks (a bootstrap of blocks from a fit population of N objects is worth N / block size;
        default: the values' count over their autocorrelation time). Given, the mean is moved by the margin
        z/√groups block sd and the reference is at least twice it (module doc); not given, h averages the
        false-alarm rate over the mean's error (7.7.1).
        ``known_level``: a level the values' mean is known to hold on a stationary stream (the radius's stated
        coverage): when the baseline's mean reaches it or falls short by less than its standard error (at the
        confidence), the lower of the two is the reference and no error of the mean is averaged over; a baseline
        mean significantly below it is used as estimated."""
        v = np.asarray(values, dtype=np.float64)
        v = v[np.isfinite(v)]
        G = v.size
        if G < MIN_BASELINE_GROUPS:
            raise CalibrationError(f"the baseline holds {G} blocks with a value; at least {MIN_BASELINE_GROUPS} "
                                   f"are needed (drift.baseline_objects)", "drift.baseline_objects")
        w = -v
        mean, sd = float(w.mean()), float(w.std(ddof=1))
        if not (math.isfinite(sd) and sd > 1e-12 * max(abs(mean), 1e-300)):
            raise CalibrationError(f"the baseline's {G} block values have no spread (all ≈ {-mean:.6g}): nothing "
                                   f"to standardise (drift.baseline_objects)", "drift.baseline_objects")
        y = (w - mean) / sd
        phi = integrated_autocorrelation_time(y)
        if G / phi < MIN_EFFECTIVE_OBJECTS:
            raise CalibrationError(f"the baseline's {G} block values are correlated over about {phi:.0f} blocks: too "
                                   f"few independent ones (drift.baseline_objects)", "drift.baseline_objects")
        target = AVERAGE_MARGIN * self.expected_run_objects / self.objects_per_value
        worth = float(G) if groups is None else float(groups)
        # the known level holds unless the baseline says otherwise: its mean reaches it, or falls short by less
        # than its standard error at the confidence; the lower of the two is the reference (the conservative one)
        known = known_level is not None and -mean >= known_level - normal_quantile(self.confidence) * sd * math.sqrt(
            phi / worth)
        if known:
            assert known_level is not None
            mean = max(mean, -float(known_level))
        k = 0.5 * self.min_shift / math.sqrt(phi)
        e = 0.0
        if groups is not None and not known:  # worth few blocks: per-baseline margins (module doc)
            e = normal_quantile(max(self.confidence, FEW_BLOCKS_CONFIDENCE)) / math.sqrt(worth)
            k = max(k, 2.0 * e)
            mean += e * sd
        averaged = not known and groups is None
        h = average_threshold(y, k, worth if averaged else math.inf, phi, float(np.mean(y**4)), target)
        with single_blas_thread():
            theta0 = adjustment_coefficient(y, 1.0 / phi, 1.0, k)
        cal = Calibration(
            baseline_objects=int(G), baseline_groups=int(G), group_objects=1, mean=mean, sd=sd,
            group_sd=sd * math.sqrt(phi), variance_inflation=phi, skewness=float(np.mean(y**3)), reference=k,
            mean_margin=e, scale_margin=1.0, theta=theta0, threshold=h,
            expected_run_objects=self.expected_run_objects,
            nominal_run_objects=siegmund_arl(h, theta0, k) * self.objects_per_value,
            delay_objects_at_min_shift=(h + OVERSHOOT) / k * self.objects_per_value, confidence=self.confidence,
            effective_objects=worth / phi, min_shift=self.min_shift, effective_min_shift=(e + 2.0 * k) * math.sqrt(phi))
        cusum = CusumDetector(self.expected_run_objects, self.min_shift, 1, self.confidence,
                              values_per_object=1.0 / self.objects_per_value, clip_quantile=1.0)
        cusum.calibration = cal
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


class BlockWatched:
    """The ``Trigger`` protocol's questions for a trigger that decides by a :class:`BlockDetector` (``detector``,
    None before its baseline) at a stated run of ``_ert`` objects (the in-map statistic, the coverage watch)."""

    detector: BlockDetector | None
    _ert: float

    @property
    def statistic(self) -> float:
        return math.nan if self.detector is None else self.detector.statistic

    @property
    def threshold(self) -> float:
        return math.nan if self.detector is None else self.detector.threshold

    @property
    def expected_run_objects(self) -> float | None:
        return self._ert

    @property
    def armed(self) -> bool:
        return self.detector is not None and self.detector.calibration is not None
