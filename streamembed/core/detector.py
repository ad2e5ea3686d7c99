"""A CUSUM drift detector on the residual stream, calibrated to an expected run length (docs/math.md §7).

The monitor sees one residual value per object: by default the unexplained
energy β − ‖ŷ‖² (docs/math.md §4), which is what a change off the map raises
and what a move inside the map leaves alone. ``CusumDetector`` watches its
mean with a one-sided CUSUM (Page 1954) on *group means*: consecutive values
are averaged in groups of ``group_objects`` (carried across batches), each
group mean is standardised by the baseline, and

    S_j = max(0, S_{j-1} + x_j − k),   alarm when S_j > h,

with x_j the standardised group mean, k the reference value (half the
smallest shift worth detecting quickly) and h the threshold. h is chosen so
that the expected run length between false alarms on a stationary stream is
``expected_run_objects`` objects, from Siegmund's (1985) approximation of
the average run length with the adjustment coefficient θ* of the increments,
estimated from the baseline's empirical cumulant generating function (which
corrects for skewed residuals), after moving the baseline mean and scale to
the unfavourable end of their confidence intervals (so the guarantee holds
with probability ``confidence`` over the baseline draw). docs/math.md §7
derives all of it and states the assumptions; the tests check the false-alarm
rate by simulation.

``SequentialTrigger`` wraps the detector for the daemon: it collects the
baseline after each (re)fit, calibrates, and falls back to the baseline-ratio
rule (``core.drift.RefitTrigger``) with a warning naming the setting when
calibration is impossible. Nothing here reads a clock or does I/O: callers
pass ``now`` and log ``SequentialTrigger.warning``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.special import chdtri, logsumexp

from .drift import DriftStatistics, RefitTrigger, TriggerDecision


def _normal_quantile(p: float) -> float:
    """Φ⁻¹(p) of the standard normal (scipy.special.ndtri; scipy.stats costs 0.3 s to import)."""
    from scipy.special import ndtri

    return float(ndtri(p))

__all__ = [
    "CalibrationError",
    "Calibration",
    "Decision",
    "CusumDetector",
    "SequentialTrigger",
    "cusum_path",
    "cusum_alarms",
    "siegmund_arl",
    "siegmund_threshold",
    "check_detector_settings",
    "OVERSHOOT",
    "MIN_BASELINE_GROUPS",
]

#: Siegmund's correction for the overshoot of a Gaussian random walk over the
#: threshold, h → h + 2·0.583 (in increment standard deviations).
OVERSHOOT = 1.166

#: Baseline groups needed before the group-mean variance and the CLT can be trusted.
MIN_BASELINE_GROUPS = 30


class CalibrationError(ValueError):
    """The detector cannot be calibrated; ``setting`` names the configuration key to change."""

    def __init__(self, message: str, setting: str) -> None:
        super().__init__(message)
        self.setting = setting


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
        mean, sd: baseline mean and standard deviation of the per-object statistic.
        group_sd: standard deviation of a group mean used to standardise (≥ sd/√b;
            larger when the baseline's group means vary more than independence allows).
        variance_inflation: φ = (group_sd·√b/sd)², 1 for independent objects.
        skewness: of the per-object statistic.
        reference: k.
        mean_margin: e, the baseline mean's one-sided confidence margin (z/√G).
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

    def as_dict(self) -> dict:
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


# --------------------------------------------------------------------------- CUSUM arithmetic


def cusum_path(z: np.ndarray, start: float = 0.0) -> np.ndarray:
    """S_j = max(0, S_{j-1} + z_j) for all j at once: (G,) from increments z (G,) and S_0 = start ≥ 0.

    With partial sums P_j = z_1 + … + z_j, S_j = P_j − min(−S_0, min_{i≤j} P_i):
    one cumulative sum and one running minimum, no Python loop.
    """
    P = np.cumsum(np.asarray(z, dtype=np.float64))
    low = np.minimum.accumulate(np.concatenate(([-float(start)], P)))[1:]
    return P - low


def cusum_alarms(z: np.ndarray, h: float, start: float = 0.0) -> tuple[np.ndarray, float, float]:
    """Alarm positions of a CUSUM that restarts at 0 after each alarm.

    Args:
        z: (G,) increments x_j − k.
        h: threshold.
        start: S before z_1.
    Returns:
        (alarm indices into z (a,), S after the last increment, largest S reached).
        One vectorised pass per alarm, so the cost is O(G·(1 + alarms)).
    """
    z = np.asarray(z, dtype=np.float64)
    alarms: list[int] = []
    peak = float(start)
    pos, s = 0, float(start)
    while pos < z.size:
        S = cusum_path(z[pos:], s)
        peak = max(peak, float(S.max()))
        over = np.flatnonzero(S > h)
        if over.size == 0:
            s = float(S[-1])
            break
        j = pos + int(over[0])
        alarms.append(j)
        pos, s = j + 1, 0.0
    return np.asarray(alarms, dtype=np.int64), s, peak


def siegmund_arl(h: float, theta: float, drift: float, overshoot: float = OVERSHOOT) -> float:
    """Average run length (in increments) of a CUSUM whose increments have mean −drift < 0.

    Siegmund (1985): ARL ≈ (e^{θ(h+ρ)} − 1 − θ(h+ρ)) / (θ·drift), θ the positive root
    of the increments' cumulant generating function, ρ the overshoot correction.
    For N(−k, 1) increments θ = 2k and this is the familiar (e^{2k(h+1.166)} − 2k(h+1.166) − 1)/(2k²).
    """
    u = theta * (h + overshoot)
    return float(math.expm1(u) - u) / (theta * drift) if u < 700 else math.inf


def siegmund_threshold(arl: float, theta: float, drift: float, overshoot: float = OVERSHOOT) -> float:
    """The h with ``siegmund_arl(h, θ, drift) = arl`` (h ≥ 0; 0 when even h = 0 exceeds ``arl``)."""
    c = arl * theta * drift + 1.0  # solve e^u − u = c for u > 0
    u = math.log(c) if c > 1 else 0.0
    for _ in range(60):
        nxt = math.log(c + u)
        if abs(nxt - u) < 1e-13 * max(1.0, u):
            u = nxt
            break
        u = nxt
    return max(u / theta - overshoot, 0.0)


def _cgf(y: np.ndarray, t: float) -> float:
    """Empirical cumulant generating function log mean exp(t·y) of values y (N,)."""
    return float(logsumexp(t * y) - math.log(y.size))


def _adjustment_coefficient(y: np.ndarray, b_eff: float, scale: float, drift: float) -> float:
    """θ* > 0 with ψ(θ) = −θ·drift + b_eff·K_y(θ·scale/√b_eff) = 0 (K_y the empirical CGF of y).

    The increments are scale·ξ − drift with ξ a standardised mean of b_eff
    independent copies of y (mean 0, variance 1): K_ξ(θ) = b_eff·K_y(θ/√b_eff).
    """
    root_b = math.sqrt(b_eff)

    def psi(theta: float) -> float:
        return -theta * drift + b_eff * _cgf(y, theta * scale / root_b)

    lo = 1e-9
    hi = 2.0 * drift / scale**2  # the Gaussian root
    for _ in range(200):
        if psi(hi) > 0:
            break
        lo, hi = hi, 2.0 * hi
    else:  # pragma: no cover - the CGF of a non-degenerate sample grows at least quadratically
        raise CalibrationError("the baseline's cumulant generating function has no positive root", "drift.baseline_objects")
    if psi(lo) > 0:  # the root lies below 2·drift/scale²
        lo = 1e-12
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if psi(mid) > 0:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


def check_detector_settings(
    expected_run_objects: float,
    baseline_objects: int,
    group_objects: int = 256,
    min_shift: float = 0.1,
    confidence: float = 0.95,
) -> None:
    """Refuse settings that cannot be calibrated whatever the data (call at start-up).

    Checks that the ERT is a finite number of at least 10 groups, that the
    baseline holds ``MIN_BASELINE_GROUPS`` groups, and that even for ideal
    (independent, Gaussian) residuals the baseline mean's confidence margin
    leaves at least half of the reference value (docs/math.md §7):
    baseline_objects ≥ (4·z / min_shift)².

    Raises:
        CalibrationError naming the setting to change.
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
    z = _normal_quantile(confidence)
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
            nearly Gaussian (the ARL approximation's regime), absorbs
            short-range correlation, and costs at most b objects of delay.
        confidence: probability over baseline draws that the real ERT is at
            least ``expected_run_objects``: the baseline mean and scale are
            moved to the unfavourable end of their one-sided intervals.
        values_per_object: values fed per stream object (1 for the unexplained
            energy of every object; s/m when only a sample of s rows of
            m-object batches is fed), so that ERT is in objects.
    """

    kind = "cusum"

    def __init__(
        self,
        expected_run_objects: float = 1e8,
        min_shift: float = 0.1,
        group_objects: int = 256,
        confidence: float = 0.95,
        values_per_object: float = 1.0,
    ) -> None:
        if not values_per_object > 0:
            raise CalibrationError(f"values_per_object must be positive, got {values_per_object}", "drift.k0_sample")
        self._expected_run_objects = float(expected_run_objects)
        self.min_shift = float(min_shift)
        self.group_objects = int(group_objects)
        self.confidence = float(confidence)
        self.values_per_object = float(values_per_object)
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
        """Estimate the in-control mean and scale from baseline values (N,) and set h.

        Raises:
            CalibrationError: the baseline is too short for the requested ERT
                and ``min_shift`` (setting ``drift.baseline_objects``), has zero
                variance (``drift.baseline_objects``: a constant statistic cannot
                be standardised), or the ERT itself is unusable.
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
        mean = float(v.mean())
        sd = float(v.std(ddof=1))
        if not (math.isfinite(sd) and sd > 1e-12 * max(abs(mean), 1e-300)):
            raise CalibrationError(
                f"the baseline's statistic has zero variance (all {N} values ≈ {mean:.6g}): the CUSUM cannot be "
                f"standardised (drift.baseline_objects; is the map exact for this stream?)", "drift.baseline_objects")
        y = (v - mean) / sd
        skew = float(np.mean(y**3))
        kurt = float(np.mean(y**4))
        groups = y[: G * b].reshape(G, b).mean(axis=1) * math.sqrt(b)  # unit variance for independent values
        phi = max(1.0, float(groups.var(ddof=1)))
        group_sd = sd * math.sqrt(phi / b)
        b_eff = b / phi
        k = 0.5 * self.min_shift * math.sqrt(b_eff)
        z = _normal_quantile(self.confidence)
        e = z / math.sqrt(G)  # the baseline mean's error, in group sd units (sd/√N·√b/√φ ≤ 1/√G)
        s = 1.0 + z * math.sqrt(max(kurt - 1.0, 0.0) / (4.0 * N))
        if phi > 1.0:
            s *= math.sqrt((G - 1) / float(_chi2_lower(G - 1, self.confidence)))
        if k - e < 0.5 * k:
            need = int(math.ceil((2.0 * z / k) ** 2)) * b
            raise CalibrationError(
                f"the baseline of {N} objects is too short for drift.expected_run_objects = "
                f"{self._expected_run_objects:g} at drift.min_shift = {self.min_shift:g}: the uncertainty of its "
                f"mean ({e:.3g} group sd at confidence {self.confidence:g}) uses more than half of the reference "
                f"value k = {k:.3g}; raise drift.baseline_objects to at least {need}", "drift.baseline_objects")
        ert_groups = ert_values / b
        theta = _adjustment_coefficient(y, b_eff, s, k - e)
        h = siegmund_threshold(ert_groups, theta, k - e, OVERSHOOT * s)
        theta0 = _adjustment_coefficient(y, b_eff, 1.0, k)
        nominal = siegmund_arl(h, theta0, k) * b / self.values_per_object
        delay = (h + OVERSHOOT) / k * b / self.values_per_object  # shift 2k: increments of mean +k
        self.calibration = Calibration(
            baseline_objects=int(N), baseline_groups=int(G), group_objects=b, mean=mean, sd=sd, group_sd=group_sd,
            variance_inflation=phi, skewness=skew, reference=k, mean_margin=e, scale_margin=s, theta=theta,
            threshold=h, expected_run_objects=self._expected_run_objects, nominal_run_objects=nominal,
            delay_objects_at_min_shift=delay, confidence=self.confidence,
        )
        self.reset()
        return self.calibration

    # ---------------------------------------------------------------- update
    def reset(self) -> None:
        """S = 0 and no partial group (after an alarm was acted on, or a new baseline)."""
        self._S = 0.0
        self._carry = np.empty(0)

    def increments(self, group_means: np.ndarray) -> np.ndarray:
        """x_j − k for group means (G,) of the raw statistic."""
        c = self.calibration
        return (np.asarray(group_means, dtype=np.float64) - c.mean) / c.group_sd - c.reference

    def update(self, values: np.ndarray, now: float = 0.0) -> Decision:
        """Feed one batch of per-object values (m,) (NaN ignored); the CUSUM restarts after each alarm.

        Raises:
            RuntimeError: before ``calibrate``.
        """
        if self.calibration is None:
            raise RuntimeError("CusumDetector.update before calibrate")
        b = self.group_objects
        raw = np.asarray(values, dtype=np.float64).ravel()
        finite = np.isfinite(raw)
        v = raw if finite.all() else raw[finite]
        n_carry = self._carry.size
        buf = np.concatenate((self._carry, v)) if n_carry else v
        G = buf.size // b
        if G == 0:
            self._carry = buf.copy()
            return Decision(False, None, self._S, self.threshold, 0, self._S)
        means = buf[: G * b].reshape(G, b).mean(axis=1)
        self._carry = buf[G * b:].copy()
        alarms, self._S, peak = cusum_alarms(self.increments(means), self.threshold, self._S)
        if alarms.size == 0:
            return Decision(False, None, self._S, self.threshold, 0, peak)
        self.alarms += int(alarms.size)
        self.last_alarm_time = now
        pos = (int(alarms[0]) + 1) * b - n_carry - 1  # last value of the crossing group, among finite values
        index = int(np.flatnonzero(finite)[pos]) if not finite.all() else pos
        return Decision(True, index, self._S, self.threshold, int(alarms.size), peak)


def _chi2_lower(dof: int, confidence: float) -> float:
    """The (1 − confidence) quantile of χ²_dof (scipy.special's inverse survival function: scipy.stats costs 0.5 s
    to import, in the middle of the stream)."""
    return float(chdtri(dof, confidence))


# --------------------------------------------------------------------------- the daemon's trigger


class SequentialTrigger:
    """Refit decisions from a ``CusumDetector``, with baseline collection, cooldown and fallback.

    After construction and after every ``refitted``, the first
    ``baseline_objects`` values are collected (no decisions); then the
    detector is calibrated. If calibration fails, ``warning`` says why and
    which setting to change, and decisions come from ``fallback`` (the
    baseline-ratio rule) until the next refit, when calibration is tried
    again. Without a fallback the ``CalibrationError`` propagates.

    ``observe`` has ``RefitTrigger.observe``'s signature plus the batch's
    per-object values, and returns the same ``TriggerDecision``.

    Args:
        detector: the CUSUM (its ERT is the guarantee).
        baseline_objects: values collected after a (re)fit before calibrating.
        cooldown_seconds: no firing within this time after a refit.
        fallback: the rule used when calibration fails (None: raise instead).
    """

    def __init__(self, detector: CusumDetector, baseline_objects: int = 20_000, cooldown_seconds: float = 300.0,
                 fallback: RefitTrigger | None = None) -> None:
        self.detector = detector
        self.baseline_objects = int(baseline_objects)
        self.cooldown_seconds = float(cooldown_seconds)
        self.fallback = fallback
        self.warning: str | None = None
        self._baseline: list[np.ndarray] = []
        self._baseline_n = 0
        self._last_refit: float | None = None
        self._failed = False

    @property
    def kind(self) -> str:
        """"cusum", or "rule" while the fallback decides."""
        return "rule" if self._failed else "cusum"

    @property
    def expected_run_objects(self) -> float | None:
        return None if self._failed else self.detector.expected_run_objects

    @property
    def statistic(self) -> float:
        return self.detector.statistic

    @property
    def threshold(self) -> float:
        return self.detector.threshold

    def refitted(self, now: float) -> None:
        """A refit happened (or was attempted): new baseline, cooldown."""
        self._last_refit = now
        self._baseline, self._baseline_n = [], 0
        self.detector.calibration = None
        self.detector.reset()
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
        self.detector._S = 0.0
        if self.fallback is not None:
            self.fallback.cooldown(now)

    def observe(self, now: float, stats: DriftStatistics | None, n_new: int, values: Any = None) -> TriggerDecision:
        """Account for ``n_new`` objects: ``values`` (n_new,) their per-object statistic, ``stats`` the window's."""
        if self._failed:
            return self.fallback.observe(now, stats, n_new)
        vals = np.empty(0) if values is None else np.asarray(values, dtype=np.float64).ravel()
        det = self.detector
        if not det.calibrated:
            self._baseline.append(vals.copy())
            self._baseline_n += vals.size
            if self._baseline_n < self.baseline_objects:
                return TriggerDecision(False, "collecting the baseline", math.nan, math.nan, 0)
            try:
                det.calibrate(np.concatenate(self._baseline))
            except CalibrationError as exc:
                if self.fallback is None:
                    raise
                self._failed = True
                self.warning = (f"drift detector 'cusum' cannot be calibrated ({exc}); falling back to the "
                                f"baseline-ratio rule until the next refit (setting {exc.setting})")
                return self.fallback.observe(now, stats, n_new)
            finally:
                self._baseline = []
            return TriggerDecision(False, "calibrated", det.statistic, det.threshold, 0)
        d = det.update(vals, now)
        cooling = self._last_refit is not None and now - self._last_refit < self.cooldown_seconds
        if d.fired and not cooling:
            c = det.calibration
            return TriggerDecision(True, f"CUSUM of the residual reached {d.peak:.4g} > h = {c.threshold:.4g} "
                                   f"(ERT {c.expected_run_objects:.3g} objects)", d.peak, d.threshold, 0)
        return TriggerDecision(False, "cooldown" if d.fired else "below threshold", d.statistic, d.threshold, 0)
