"""Input consistency in the stream: do the rows follow the model's landmark order? (docs/math.md §4.5)

Rows that do not name their order (``stream.landmark_order``) are taken in
the model's order; a producer that sends them in another order (ascending
landmark ids, reversed, another model's landmarks of the same count) gets
placements far from where its objects belong, and nothing else fails: such
rows are finite, non-negative and of the right length. ``ConsistencyMonitor``
scores an evenly spaced sample of every batch embedded with the current
model (``consistency.sample_rows``) by the profile share of
``core.monitor.consistency`` and keeps the last ``consistency.window_objects``
scores. Its value C = (mean share − chance)/(reference − chance) reads 1
for rows like the landmarks' own and 0 for rows unrelated to the landmark
order. Once ``consistency.min_objects`` rows are scored, C below
``consistency.alarm_below`` raises the alarm: a WARNING naming the value and
the remedy, the ``streamembed_input_consistency_alarm`` gauge, and a
``/readyz`` problem; it clears (INFO) when C is back above
(1 + alarm_below)/2. A new model starts a new window. Feature rows are not
scored: the engine computes their dissimilarities itself.

Rows that cannot be right (flagged ``implausible_scale`` or
``negative_unexplained``, docs/math.md §4.8: other units than the landmarks',
×10, squared) raise the same alarm on their own when more than
``IMPLAUSIBLE_ALARM`` of the last ``consistency.window_objects`` rows carry
one, from ``IMPLAUSIBLE_MIN_ROWS`` rows on — a file of three such rows
alarms as a stream of thousands does; it clears below half of that share.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from streamembed.core.flags import FLAG_IMPLAUSIBLE_SCALE, FLAG_NEGATIVE_UNEXPLAINED
from streamembed.core.monitor.consistency import ProfileCheck, profile_check
from streamembed.monitors.reservoir import ring_write
from streamembed.config.schema import ConsistencyConfig

__all__ = ["ConsistencyMonitor", "HEALTH_PROBLEM"]

log = logging.getLogger("streamembed.consistency")

#: The name of the ``/readyz`` problem while the alarm is raised.
HEALTH_PROBLEM = "input_consistency"
#: Share of the window's rows flagged as impossible above which the alarm is raised, and rows needed first.
IMPLAUSIBLE_ALARM = 0.5
IMPLAUSIBLE_MIN_ROWS = 3


class ConsistencyMonitor:
    """Scores the rows embedded with the current model and raises an alarm when they look mixed up.

    ``metrics`` (``ops.metrics.Metrics``) and ``health``
    (``ops.health.HealthState``) are optional; ``warn`` False keeps the
    alarm out of the log (``streamembed embed`` reports it in its final line).
    After a run, ``first_alarm`` is the text of the first alarm raised (None:
    none) and ``first_alarm_objects`` the rows seen when it was raised.
    """

    def __init__(self, settings: ConsistencyConfig | None = None, *, metrics: Any = None, health: Any = None,
                 warn: bool = True) -> None:
        self.settings = settings or ConsistencyConfig()
        self.metrics = metrics
        self.health = health
        self.warn = warn
        self._scores = np.empty(max(int(self.settings.window_objects), 1))
        self._next = self._size = 0
        self._model: Any = None
        self._check: ProfileCheck | None = None
        self.value = math.nan
        self.alarm = False
        self.alarm_text: str | None = None
        self.alarms = 0
        self.objects = 0  # rows observed since start
        self.first_alarm: str | None = None
        self.first_alarm_objects: int | None = None
        self._failed = False
        self._alarm_kind = ""
        self._implausible = np.zeros(self._scores.size, dtype=bool)
        self._inext = self._isize = 0
        #: share of the window's rows flagged as impossible (NaN before any)
        self.implausible_share = math.nan
        self._export()

    @property
    def clear_above(self) -> float:
        return (1.0 + self.settings.alarm_below) / 2.0

    @property
    def window(self) -> int:
        """Rows scored in the current window."""
        return self._size

    def observe(self, model: Any, A: np.ndarray, *, file: str | None = None, flags: np.ndarray | None = None) -> None:
        """Account for the valid rows A (m, w) of one batch embedded with ``model`` (their placements' ``flags``
        (m,), when given, for the rows that cannot be right); never raises."""
        if not self.settings.enabled or A.shape[0] == 0:
            return
        try:
            self._observe(model, A, file)
            if flags is not None:
                self.account_flags(np.asarray(flags), model, file)
        except Exception:  # a monitor must not cost the batch its records
            if not self._failed:
                log.warning("input consistency: scoring a batch failed; the check is skipped for it", exc_info=True)
            self._failed = True

    def _observe(self, model: Any, A: np.ndarray, file: str | None) -> None:
        if model is not self._model:
            self._start(model)
        m = A.shape[0]
        self.objects += m
        check = self._check
        if check is None:
            return
        k = min(m, int(self.settings.sample_rows))
        rows: np.ndarray | slice = slice(None)
        if k < m:  # evenly spaced rows, each once (no np.unique: it imports numpy.ma, 0.03 s, at its first call)
            rows = np.linspace(0, m - 1, k).round().astype(np.intp)
            rows = rows[np.concatenate(([True], rows[1:] != rows[:-1]))]
        self.account(check.shares(A[rows]), model, file)

    def account(self, scores: np.ndarray, model: Any, file: str | None = None) -> None:
        """Add one batch's profile shares (NaN: unscored rows) to the window and decide (``observe``'s second half).

        Public for the benchmark, which replays precomputed shares.
        """
        check = self._check
        assert check is not None
        self._add(scores[np.isfinite(scores)])
        if self._size < min(int(self.settings.min_objects), self._scores.size):
            return
        self.value = check.consistency(float(self._scores[:self._size].mean()))
        if not self.alarm and self.value < self.settings.alarm_below:
            self._raise(check, model, file)
        elif self.alarm and self._alarm_kind == "order" and self.value >= self.clear_above:
            self._clear()
        self._export()

    def account_flags(self, flags: np.ndarray, model: Any, file: str | None = None) -> None:
        """Add one batch's placement flags to the window of impossible rows and decide (module doc)."""
        bad = (flags & (FLAG_IMPLAUSIBLE_SCALE | FLAG_NEGATIVE_UNEXPLAINED)) != 0
        cap = self._implausible.size
        bad = bad[-cap:]
        if bad.size:
            self._inext = ring_write(self._implausible, self._inext, bad)
            self._isize = min(cap, self._isize + bad.size)
        if self._isize == 0:
            return
        share = float(self._implausible[: self._isize].mean())
        self.implausible_share = share
        if not self.alarm and self._isize >= IMPLAUSIBLE_MIN_ROWS and share > IMPLAUSIBLE_ALARM:
            self._raise_implausible(share, model, file)
            self._export()
        elif self.alarm and self._alarm_kind == "scale" and share < IMPLAUSIBLE_ALARM / 2:
            self._clear()

    def _raise_implausible(self, share: float, model: Any, file: str | None) -> None:
        where = f" (last batch from {file})" if file else ""
        self._alarm_kind = "scale"
        self._alarm_with(
            f"input rows cannot be right: {100 * share:.0f}% of the last {self._isize:,} rows{where} are flagged "
            f"implausible_scale or negative_unexplained, model version {getattr(model, 'version', '?')} (their mean "
            f"squared dissimilarity is more than 3x outside the fit population's range, or their unexplained energy "
            f"is negative as no real object's is; docs/math.md §4.8). Are they in other units than the landmarks' "
            f"dissimilarities (multiplied, squared, similarities)?")

    def start(self, model: Any) -> ProfileCheck | None:
        """Watch ``model`` from now on (a new window); its check, or None when its rows cannot be checked."""
        self._start(model)
        return self._check

    def _start(self, model: Any) -> None:
        """A new model: a new window, no alarm (the old one was about the previous model's order)."""
        if self.alarm:
            self._clear()
        self._model = model
        self._next = self._size = 0
        self._inext = self._isize = 0
        self.implausible_share = math.nan
        self.value = math.nan
        check = profile_check(model)
        self._check = check if check is not None and check.usable else None
        if self._check is None:
            why = ("its rows are similarities of a transformed kernel" if check is None else
                   f"its landmarks' own rows are not told apart from shuffled ones (profile share "
                   f"{check.reference:.3f} against {check.chance:.3f} by chance; too few landmarks?)")
            log.info("input consistency: not checked for model version %s: %s", getattr(model, "version", "?"), why)
        self._export()

    def _add(self, scores: np.ndarray) -> None:
        cap = self._scores.size
        scores = scores[-cap:]
        k = scores.size
        if k == 0:
            return
        self._next = ring_write(self._scores, self._next, scores)
        self._size = min(cap, self._size + k)

    def _raise(self, check: ProfileCheck, model: Any, file: str | None) -> None:
        where = f" (last batch from {file})" if file else ""
        self._alarm_kind = "order"
        self._alarm_with(
            f"input rows look like they follow another landmark order: consistency {self.value:.2f} over the last "
            f"{self._size:,} rows scored{where}, model version {getattr(model, 'version', '?')} (1 = like the "
            f"landmarks' own rows, 0 = unrelated to the landmark order; alarm below {self.settings.alarm_below:g}, "
            f"docs/math.md §4.5). Check the column order against `streamembed model info`, or name it: a "
            f"'landmarks' list per row, or streamembed.landmarks field metadata (docs/formats.md)")

    def _alarm_with(self, text: str) -> None:
        self.alarm = True
        self.alarms += 1
        self.alarm_text = text
        if self.first_alarm is None:
            self.first_alarm, self.first_alarm_objects = self.alarm_text, self.objects
        if self.warn:
            log.warning("%s", self.alarm_text, extra={"consistency": round(self.value, 4) if math.isfinite(self.value)
                                                      else None, "rows": self._size})
        if self.metrics is not None:
            self.metrics.input_consistency_alarms.inc()
        if self.health is not None:
            self.health.set_problem(HEALTH_PROBLEM, self.alarm_text)

    def _clear(self) -> None:
        self.alarm = False
        self.alarm_text = None
        if self.warn:
            log.info("input consistency: back to %.2f (rows flagged as impossible: %.0f%%); the alarm is cleared",
                     self.value, 100 * self.implausible_share if math.isfinite(self.implausible_share) else 0.0)
        if self.health is not None:
            self.health.set_problem(HEALTH_PROBLEM, None)
        self._export()

    def _export(self) -> None:
        m = self.metrics
        if m is None:
            return
        m.input_consistency.set(self.value)
        m.input_consistency_alarm.set(1.0 if self.alarm else 0.0)
