"""The in-map drift statistic: has the map's plane turned away from the traffic? (docs/math.md §7.7)

The off-map CUSUM (``core.monitor.trigger``) watches the unexplained energy
u = β − ‖ŷ‖²: what a change *off* the map raises. A population whose main
directions lie elsewhere in the landmarks' span than the map's d axes can
leave u where it was (on a flat spectrum u is mostly the many small axes
every object leaves out) while the map shows the wrong plane of it. What a
refit would gain is then the share of the objects' variance the map holds
against the best d-dimensional map of the same objects — the refit policy's
measure (``core.refit.policy``, ``core.monitor.captured.captured_share``).
``PlaneTrigger`` computes it over consecutive blocks of ``block_objects``
objects, each represented by its projections on the map's q leading
monitored eigenpairs (``MonitorSample.axes``; the best plane of a block is
the top-d principal plane of those projections), and runs a one-sided CUSUM
on its falls (``block_detector.BlockDetector``), calibrated on a baseline
of blocks to ``expected_run_objects`` stationary objects between false
alarms.

Its baseline: the fit population's objects when the model carries a fit
baseline (``arm_from_fit``: blocks of a size its objects can support, armed
from the first record), else — and in any case once the stream has sent
``baseline_objects`` objects — the stream's own first blocks after the
(re)fit. A stream baseline whose second half alarms the detector calibrated
on its first half holds a change: it is not taken, and the trigger fires
("the baseline window itself changed"). A block with fewer than d + 1
objects or no variance has no share ("not enough objects"): it is skipped,
never an alarm.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .baseline import FitBaseline
from .block_detector import BlockDetector, BlockWatched, halves_alarm
from .captured import NOT_ENOUGH, captured_share
from .cusum import CalibrationError
from .detector import CONFIDENCE, EXPECTED_RUN_OBJECTS
from .drift import BASELINE_OBJECTS, COOLDOWN_SECONDS, DriftStatistics, TriggerDecision
from .observation import MonitorSample

__all__ = ["PlaneTrigger", "PLANE_AXES", "PLANE_ROWS", "PLANE_OBJECTS", "PLANE_MIN_SHIFT", "MIN_BLOCK", "block_shares"]

#: Leading monitored axes the captured share is measured in (config ``drift.plane_axes``), measured in
#: docs/drift.md ("which space"): 32 detected soonest on the edit-distance streams at no false alarm.
PLANE_AXES = 32
#: Rows per batch whose projections feed it (config ``drift.plane_rows``): the leading axes cost about
#: (q + 1)·n flops per row, several times the projection's (d + 1)·n, so a large batch is sampled.
PLANE_ROWS = 1024
#: Objects per block (config ``drift.plane_objects``).
PLANE_OBJECTS = 64
#: The fall of the share to catch quickly, in baseline sd of one block's share (config ``drift.plane_min_shift``).
PLANE_MIN_SHIFT = 1.0
#: The smallest block a fit baseline may calibrate (fewer objects leave the share mostly overfitting).
MIN_BLOCK = 16
#: A fit baseline of N objects arms blocks of at most N / this many objects (its mean is then known from that many
#: blocks' worth of objects) ...
FIT_BLOCK_SHARE = 20
#: ... and draws this many blocks with replacement for the shape of a block's share.
FIT_BLOCKS = 2000


def block_shares(axes: np.ndarray, d: int, size: int) -> np.ndarray:
    """Captured shares (⌊m/size⌋,) of consecutive blocks of ``size`` rows of ``axes`` (m, q) (``captured_share``
    on the stacked blocks); NaN where a block cannot be measured."""
    G = axes.shape[0] // size
    B = np.asarray(axes[: G * size], dtype=np.float64).reshape(G, size, axes.shape[1])
    return np.asarray(captured_share(B[:, :, :d], d, X=B), dtype=np.float64)


class _Blocks:
    """Rows carried across batches into complete blocks of ``size``."""

    def __init__(self, size: int) -> None:
        self.size = int(size)
        self._carry: np.ndarray | None = None

    def block_shares_of(self, axes: np.ndarray, d: int) -> np.ndarray:
        """The captured shares (G,) of the complete blocks these rows axes (m, q) finish; the rest is carried."""
        buf = axes if self._carry is None or not self._carry.size else np.concatenate([self._carry, axes])
        G = buf.shape[0] // self.size
        self._carry = buf[G * self.size:].copy()
        return block_shares(buf[: G * self.size], d, self.size)


class PlaneTrigger(BlockWatched):
    """Refit decisions from the captured share (module doc); a ``core.monitor.triggers.Trigger``.

    Args:
        expected_run_objects: stationary objects between false alarms.
        axes: q, leading monitored axes the share is measured in.
        block_objects: objects per block (stream baseline and monitoring).
        min_shift: the fall to catch quickly, in baseline sd of a block's share.
        confidence: as the CUSUM's.
        baseline_objects: stream objects after a (re)fit that make the stream baseline.
        cooldown_seconds: no firing within this time after a refit.
    """

    kind = "plane"

    def __init__(self, expected_run_objects: float = EXPECTED_RUN_OBJECTS, axes: int = PLANE_AXES,
                 block_objects: int = PLANE_OBJECTS, min_shift: float = PLANE_MIN_SHIFT,
                 confidence: float = CONFIDENCE, baseline_objects: int = BASELINE_OBJECTS,
                 cooldown_seconds: float = COOLDOWN_SECONDS) -> None:
        self._ert = float(expected_run_objects)
        self.axes = int(axes)
        self.block_objects = int(block_objects)
        self.min_shift = float(min_shift)
        self.confidence = float(confidence)
        self.baseline_objects = int(baseline_objects)
        self.cooldown_seconds = float(cooldown_seconds)
        self.warning: str | None = None
        self._last_refit: float | None = None
        self._fit: FitBaseline | None = None
        self._start()

    def _start(self) -> None:
        self.detector: BlockDetector | None = None
        self.source: str | None = None  # "fit" or "stream" once calibrated
        self.share = math.nan  # the last block's captured share
        self.level = math.nan  # the baseline's mean share
        self.skipped_blocks = 0
        self._stream = _Blocks(self.block_objects)
        self._fit_blocks: _Blocks | None = None
        self._baseline: list[np.ndarray] = []
        self._seen = 0
        if self._fit is not None:
            self.arm_from_fit(self._fit)

    # ------------------------------------------------------------ the protocol's questions
    @property
    def watches(self) -> str:
        size = self._fit_blocks.size if self._fit_blocks is not None else self.block_objects
        return f"CUSUM of the fall of the map's captured share (blocks of {size} objects, {self.axes} axes)"

    # ------------------------------------------------------------ baselines
    def arm_from_fit(self, baseline: FitBaseline) -> str | None:
        """Calibrate on the fit population's projections (docs/math.md §7.8): ``FIT_BLOCKS`` blocks of at most
        ``block_objects`` objects (at least ``MIN_BLOCK``, at most N / ``FIT_BLOCK_SHARE``) drawn with replacement
        from its N objects give the shape of a block's share, and the mean's uncertainty is that of N / size
        blocks, so its mean is taken with a margin of z standard errors and the CUSUM is tuned to falls of at
        least five times that (``block_detector``; ``warning`` says so). Returns what it was armed with, or None
        (and why in ``warning``). Until the stream baseline replaces it, the stream is watched in blocks of that
        size."""
        self._fit = baseline
        axes = np.asarray(baseline.axes, dtype=np.float64)
        d = int(baseline.info.get("n_components", 2))
        N = axes.shape[0]
        size = min(self.block_objects, N // FIT_BLOCK_SHARE)
        if size < MIN_BLOCK or axes.shape[1] <= d:
            self.warning = (f"drift detector 'plane': the fit baseline's {N} objects are too few to arm it "
                            f"({MIN_BLOCK * FIT_BLOCK_SHARE} needed); it arms after {self.baseline_objects} objects "
                            f"of the stream")
            return None
        q = min(self.axes, axes.shape[1])
        rng = np.random.default_rng(int(baseline.info.get("seed", 0)))
        draws = axes[rng.integers(0, N, FIT_BLOCKS * size), :q]
        det = BlockDetector(self._ert, size, self.min_shift, self.confidence)
        try:
            det.calibrate(block_shares(draws, d, size), groups=N / size)
        except CalibrationError as exc:
            self.warning = f"drift detector 'plane' cannot be armed from the fit ({exc}); it arms from the stream"
            return None
        self.detector, self.source = det, "fit"
        assert det.calibration is not None
        self.level = -det.calibration.mean
        self._fit_blocks = _Blocks(size)
        tuned = det.calibration.effective_min_shift
        self.warning = None if tuned <= self.min_shift * (1 + 1e-6) else (
            f"drift detector 'plane': armed from {N} fit objects, tuned to falls of {tuned:.3g} block sd of the "
            f"captured share until the stream's {self.baseline_objects} baseline objects restore "
            f"drift.plane_min_shift = {self.min_shift:g}")
        return f"{N} fit objects, blocks of {size}"

    def _stream_baseline(self, now: float) -> TriggerDecision | None:
        """Calibrate on the collected stream blocks; a decision to fire when their halves differ (checked first:
        a baseline holding a change may not calibrate at all)."""
        values = np.concatenate(self._baseline) if self._baseline else np.empty(0)
        self._baseline = []
        finite = values[np.isfinite(values)]
        changed = halves_alarm(finite, BlockDetector(self._ert, self.block_objects, self.min_shift,
                                                     self.confidence))
        det = BlockDetector(self._ert, self.block_objects, self.min_shift, self.confidence)
        try:
            cal = det.calibrate(finite)
        except CalibrationError as exc:
            self.warning = (f"drift detector 'plane' cannot take its baseline from the stream ({exc}; "
                            f"{values.size - finite.size} blocks had {NOT_ENOUGH}); it tries again after the next "
                            f"{self.baseline_objects} objects")
            self._seen = 0
        else:
            self.detector, self.source, self._fit_blocks = det, "stream", None
            self.level = -cal.mean
            self.warning = None
        if changed is None:
            return None
        return TriggerDecision(True, f"the baseline window itself changed: the captured share of its second half "
                               f"(mean {np.mean(finite[finite.size // 2:]):.3f}) alarms the detector calibrated on "
                               f"its first (mean {np.mean(finite[:finite.size // 2]):.3f})", self.share, self.level,
                               0)

    # ------------------------------------------------------------ the stream
    def observe(self, now: float, stats: DriftStatistics | None, n_new: int, values: Any = None, *,
                result: Any = None, sample: MonitorSample | None = None) -> TriggerDecision:
        """Account for one batch: ``sample.axes`` (the batch's projections) feed the blocks; the rest is unused."""
        if sample is None or sample.axes is None or not sample.axes.size:
            return TriggerDecision(False, "no projections on the leading axes", self.share, self.threshold, 0)
        self._d = int(sample.n_components)
        axes = np.asarray(sample.axes, dtype=np.float64)[:, : self.axes]
        shares = self._stream.block_shares_of(axes, self._d)
        watched = shares if self._fit_blocks is None else self._fit_blocks.block_shares_of(axes, self._d)
        finite = watched[np.isfinite(watched)]
        self.skipped_blocks += int(watched.size - finite.size)
        if finite.size:
            self.share = float(finite[-1])
        decision: TriggerDecision | None = None
        if self.source != "stream":
            self._baseline.append(shares)
            self._seen += axes.shape[0]
            if self._seen >= self.baseline_objects:
                decision = self._stream_baseline(now)
                finite = np.empty(0)  # these blocks made the baseline
        if decision is None and finite.size and self.detector is not None:
            d = self.detector.update(finite, now)
            if d.fired:
                cal = self.detector.calibration
                assert cal is not None
                decision = TriggerDecision(True, f"CUSUM of the captured share's fall reached {d.peak:.4g} > h = "
                                           f"{cal.threshold:.4g} (last block: {self.share:.3f} of the best "
                                           f"{self._d}-plane; baseline {self.level:.3f}; ERT {self._ert:.3g} objects)",
                                           d.peak, d.threshold, 0)
        if decision is None:
            why = "collecting the baseline" if self.detector is None else "below threshold"
            return TriggerDecision(False, why, self.statistic, self.threshold, 0)
        if self._last_refit is not None and now - self._last_refit < self.cooldown_seconds:
            return TriggerDecision(False, "cooldown", decision.value, decision.threshold, 0)
        return decision

    def refitted(self, now: float) -> None:
        """A new map (or the map accepted as it is): new baselines from the stream, cooldown."""
        self._last_refit = now
        self._fit = None  # the fit population belongs to the map that was replaced
        self.warning = None
        self._start()

    def cooldown(self, now: float) -> None:
        """A refit was not installed: restart the CUSUM and cool down, keep the baseline."""
        self._last_refit = now
        if self.detector is not None:
            self.detector.restart()
