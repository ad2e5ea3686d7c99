"""Drift monitoring of the stream: residuals -> window -> trigger (docs/math.md §4, §7).

``DriftMonitor.observe`` sees every batch embedded with the current model.
It adds the batch's relative unexplained energy (all objects, free) and the
exact k0 the embedding already computed for its sample of rows
(``model.k0_rows``; the result's ``residual_rows``) to a ``core.monitor.drift.DriftWindow``;
it feeds every batch to the trigger (a ``core.monitor.triggers.Trigger`` of the
kind ``drift.detector`` names: by default the calibrated CUSUM, else the
baseline-ratio rule) and the window's statistics and the trigger's state to
the metrics and to ``<root>/drift-history.jsonl`` (what ``streamembed plot
drift`` draws), whatever the trigger's kind. It keeps the reservoir of landmark candidates a refit
needs: in feature mode the most recent objects' feature vectors, in
dissimilarity mode the most recent block (its members' mutual
dissimilarities are known), and the most recent rows with their objects
when rows carry them (``monitors.reservoir``: a refit from objects, or a
refit request for the rows' mutual dissimilarities). After an alarm it waits until the reservoir has
refilled with post-change objects before asking for the refit.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, replace
from datetime import datetime, UTC
from pathlib import Path
from typing import Any
from collections.abc import Callable

import numpy as np

from streamembed.config.core_args import core_args, core_value
from streamembed.config.schema import DriftConfig
from streamembed.core.monitor import triggers
from streamembed.core.monitor.drift import DriftStatistics, DriftWindow
from streamembed.core.monitor.fit_baseline import leading_axes
from streamembed.core.monitor.observation import MonitorSample
from streamembed.core.monitor.triggers import TRIGGERS, AnyOf, Trigger, alarm_phrase, is_armed, members
from streamembed.core.errors import InputError
from streamembed.core.result import EmbeddingResult
from streamembed.fsafe import make_dirs, open_append
from streamembed.monitors.reservoir import RecentRows

__all__ = ["DriftMonitor", "Candidates", "build_trigger"]

log = logging.getLogger("streamembed.monitor")

#: Fewest objects a coverage check is made on (fewer say little about the radius).
MIN_CHECKED = 20


def build_trigger(drift: DriftConfig) -> Trigger:
    """The refit trigger of a [drift] section: the ``drift.detector`` kind of ``core.monitor.triggers.TRIGGERS``.

    Raises ``core.monitor.detector.CalibrationError`` for settings no data can fit.
    """
    return triggers.build_trigger(drift.detector, core_args(drift))


@dataclass
class Candidates:
    """Recent objects usable as landmarks: features (feature mode), objects, one block, or rows whose mutual
    dissimilarities must be asked for (``objects`` and ``mutual`` both None, ``cross_to_landmarks`` given)."""

    ids: list[str]
    features: np.ndarray | None = None  # (k, p)
    cross_to_landmarks: np.ndarray | None = None  # (k, n) dissimilarities to the current landmarks
    mutual: np.ndarray | None = None  # (k, k)
    objects: np.ndarray | None = None  # (k,) strings, bytes or series (core.inputs.objects)


class DriftMonitor:
    """Watches the residuals of the current model and decides when to refit."""

    def __init__(self, est: Any, settings: DriftConfig, trigger: Trigger,
                 metrics: Any = None, clock: Callable[[], float] = time.time, history_path: Path | None = None) -> None:
        self.settings = settings
        self.trigger = trigger
        self.metrics = metrics
        self.clock = clock
        self.history_path = None if history_path is None else Path(history_path)
        self._history_at = -math.inf
        self._fired_since_record = False
        self._warned: set[str] = set()  # the members' warnings of the last batch: each is logged once
        self._armed: tuple[str, DriftStatistics | None, int] | None = None
        self.pending: tuple[str, DriftStatistics | None] | None = None
        #: set by the refit manager while a refit runs: no new trigger meanwhile
        self.refit_running = False
        self.last_stats: DriftStatistics | None = None
        #: objects observed since start (the trigger's position in the stream)
        self.objects_seen = 0
        self.triggered_at: int | None = None
        self._features = RecentRows(settings.reservoir_objects)
        self._block: Candidates | None = None
        self._recent = RecentRows(settings.reservoir_objects)
        #: keep the dissimilarity rows themselves (a refit request asks for their mutual dissimilarities)
        self.keep_rows = False
        #: rows' objects are decoded beside their dissimilarities for this reservoir (``BatchEmbedder``)
        self.keeps_objects = True
        #: how the detectors are armed: {kind: what a fit baseline armed it with, or None}
        self.armed_from_fit: dict[str, str | None] = {}
        self._since_check = settings.coverage_every_objects  # the first checkable batch is checked
        self._recent_features = np.empty((0, 0))
        self.last_sample: MonitorSample | None = None
        #: the radius's coverage checked with the last alarm (None: no checkable objects then)
        self.coverage_at_alarm: float | None = None
        self.reset(est, refitted=False)

    def reset(self, est: Any, refitted: bool = True) -> None:
        """Start over with ``est`` (after a refit): new window, new baseline, cooldown; armed from its fit
        baseline when it has one."""
        s = self.settings
        self.model = est
        self.window = DriftWindow.for_model(est, max_objects=s.window_objects,
                                            max_seconds=core_value(s, "window_seconds"))
        self.model_version = int(est.version)
        self.pending = None
        self._armed = None
        self.last_stats = None
        self._since_stats, self._stats_time = 0, 0.0
        self._block = None  # its dissimilarities refer to the old landmarks
        if hasattr(self, "_recent"):
            self._recent.clear()  # its rows refer to the old landmarks
        self._since_reset = 0
        if refitted:
            self.trigger.refitted(self.clock())
        baseline = getattr(est, "fit_baseline", None)
        self.armed_from_fit = {} if baseline is None else triggers.arm_from_fit(self.trigger, baseline)
        self._announce_arming()
        self._export_arming()

    def _announce_arming(self) -> None:
        """Say how the detectors are armed: from the fit (from the first record), or after how many objects."""
        armed = {k: v for k, v in self.armed_from_fit.items() if v}
        if armed:
            log.info("drift monitoring armed from the fit: %s; the detectors take the stream's own baseline after "
                     "%d objects", "; ".join(f"{k} ({v})" for k, v in armed.items()), self.settings.baseline_objects,
                     extra={"armed": True})
        else:
            why = "the model has no fit baseline" if not self.armed_from_fit else "its fit baseline is too small"
            log.info("drift monitoring arms after %d objects (%s: `streamembed fit` with more objects than "
                     "landmarks arms it from the first record)", self.settings.baseline_objects, why,
                     extra={"armed": False})

    @property
    def armed(self) -> bool:
        """Whether any detector decides on a calibrated baseline now."""
        return is_armed(self.trigger)

    @property
    def arming_objects(self) -> int:
        """Objects still to be seen before the stream's own baseline is taken (0 once it is)."""
        return max(0, self.settings.baseline_objects - self._since_reset)

    def accept(self) -> None:
        """A refit measured that no map places the recent objects better: new baseline at the current level."""
        self.pending = None
        self._armed = None
        self.trigger.refitted(self.clock())

    def arm_now(self) -> None:
        """The input ended (batch mode): an alarm waiting for its reservoir asks for its refit with what there is."""
        if self._armed is not None and self.pending is None:
            reason, at_alarm, _ = self._armed
            log.info("drift: the input ended before the reservoir refilled; refit now", extra={"reason": reason})
            self.pending = (reason, at_alarm)
            self._armed = None

    # ----------------------------------------------------------------- observe
    def observe(self, A: np.ndarray, res: EmbeddingResult, *, ids: Any = None, features: np.ndarray | None = None,
                block: tuple[np.ndarray, Any, np.ndarray] | None = None, objects: Any = None,
                checkable: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Account for one batch: A (m, n) input rows, ``res`` their (valid) EmbeddingResult.

        ``features`` (m, p) feed the refit reservoir of a feature-mode model;
        ``block`` = (A_b (k, n), ids (k,), cross (k, k)), a block placed whole,
        becomes the refit candidates of a dissimilarity model; ``objects`` (m,), the rows' objects, and
        (with ``keep_rows``) the rows A themselves feed the reservoir of recent rows. Both can be checked for the
        radius's coverage, and so can ``checkable`` = (rows (k, w), mutual (k, k)): any sample with its mutual
        dissimilarities.
        """
        now = self.clock()
        m = A.shape[0]
        if m == 0:
            return
        self.objects_seen += m
        self._since_reset += m
        k0 = y_r = beta = whole_block = None
        if res.residual_rows is not None and res.residual_rows.size:
            rows = res.residual_rows
            k0, y_r, beta = res.k0[rows], res.residual_coords, res.beta[rows]
            if res.blocks is not None and len(res.blocks["sizes"]) == 1 and rows.size == m:
                whole_block = res.block_norm_k0  # ‖K0‖₂ of the whole batch: exact while it is the window
        self.window.add(now, res.relative_unexplained, k0, y_r, beta, whole_block, unexplained=res.unexplained)
        self._keep_candidates(A, ids, features, block)
        self._keep_recent(A, ids, features, objects)
        self._since_stats += m
        if (self.last_stats is None or self._since_stats >= self.settings.stats_every_objects
                or now - self._stats_time >= self.settings.stats_every_seconds):
            self.last_stats = self.window.statistics(now)
            self._since_stats, self._stats_time, refreshed = 0, now, True
        else:
            refreshed = False
        stats = self.last_stats
        if checkable is not None and block is None:
            block = (checkable[0], None, checkable[1])
        self.last_sample = sample = self._sample(A, res, features, block)
        decision = self.trigger.observe(now, stats, m, values=res.unexplained, result=res, sample=sample)
        warnings = {w for w in (member.warning for member in members(self.trigger)) if w}
        for w in sorted(warnings - self._warned):
            log.warning("%s", w)
        self._warned = warnings
        if decision.fire:
            self._fired_since_record = True
            if self.metrics is not None:
                self.metrics.drift_alarms.inc()
            if self._armed is None and self.pending is None and not self.refit_running:
                reason = decision.reason if isinstance(self.trigger, AnyOf) else (
                    f"{alarm_phrase(self.trigger.kind)} ({self.trigger.kind}): {decision.reason}")
                decision = replace(decision, reason=reason)
                coverage = self._coverage_at_alarm(sample, features, block)
                detector = triggers.fired_by(self.trigger)
                log.info("drift: alarm: %s; the refit waits for the reservoir to fill with post-change objects%s",
                         reason, "" if coverage is None else f" (the radius covers {100 * coverage:.0f}% of a checked "
                         f"sample now)", extra={"reason": reason, "objects_seen": self.objects_seen,
                                                "detector": detector, "coverage": coverage})
                self._armed = (decision.reason, stats, self.objects_seen + self.settings.reservoir_objects)
                self.triggered_at = self.objects_seen
        if self._armed is not None and self.objects_seen >= self._armed[2] and self.pending is None:
            reason, at_alarm, _ = self._armed
            log.info("drift: refit triggered", extra={"reason": reason})
            self.pending = (reason, at_alarm)
            self._armed = None
        self._export_arming()
        if refreshed:
            self._export(stats, decision.value, decision.threshold)
            self._record(now, stats, decision.value, decision.threshold)

    def _watches(self, kind: str) -> bool:
        return any(m.kind == kind for m in members(self.trigger))

    def _sample(self, A: np.ndarray, res: EmbeddingResult, features: np.ndarray | None,
                block: tuple[np.ndarray, Any, np.ndarray] | None) -> MonitorSample:
        """The batch's ``MonitorSample`` (module doc): projections on the leading axes, a coverage check."""
        model, s = self.model, self.settings
        axes = None
        if self._watches("plane"):
            m = A.shape[0]
            rows = A if m <= s.plane_rows else A[_spaced_rows(m, s.plane_rows)]
            try:
                core = rows if model.pipeline.identity else model.core_dissimilarities(rows)[0]
                axes = leading_axes(model, core, s.plane_axes)
            except (InputError, ValueError):  # rows the placer accepted: never expected
                axes = None
        self._since_check += A.shape[0]
        if features is not None and self._watches("coverage"):
            self._recent_features = _last_rows(self._recent_features, features, s.coverage_objects)
        coverage, k = None, 0
        if (self._watches("coverage") and self._since_check >= s.coverage_every_objects
                and model.radius_calibration is not None):
            checked = self._check_coverage(features, block)
            if checked is not None:
                coverage, k = checked
                self._since_check = 0
                if self.metrics is not None:
                    self.metrics.drift_coverage.set(coverage)
        cal = model.radius_calibration
        return MonitorSample(int(model.n_components), axes, coverage, k, None if cal is None else float(cal.coverage))

    def _coverage_at_alarm(self, sample: MonitorSample, features: np.ndarray | None,
                           block: tuple[np.ndarray, Any, np.ndarray] | None) -> float | None:
        """At an alarm, the radius's coverage on this batch's checkable objects (the gauge shows the fall with the
        alarm, whenever the last scheduled check was): the batch's own check, or one made now; None: none."""
        if sample.coverage is not None:
            self.coverage_at_alarm = sample.coverage
            return sample.coverage
        if self.model.radius_calibration is None or (features is None and block is None):
            return None
        checked = self._check_coverage(features, block)
        if checked is None:
            return None
        if self.metrics is not None:
            self.metrics.drift_coverage.set(checked[0])
        self.coverage_at_alarm = checked[0]
        return checked[0]

    def _check_coverage(self, features: np.ndarray | None,
                        block: tuple[np.ndarray, Any, np.ndarray] | None) -> tuple[float, int] | None:
        """(the radius's coverage, objects checked) on ``drift.coverage_objects`` objects with known mutual
        dissimilarities (``core.trust.check``): the most recent feature rows (kept across batches by ``_sample``),
        or a block with at least that many members, or what ``observe``'s ``checkable`` supplied; None when there
        are too few."""
        from streamembed.core.trust.check import sample_coverage, sample_coverage_features

        model, k = self.model, self.settings.coverage_objects
        try:
            if features is not None:
                if self._recent_features.shape[0] < k:
                    return None
                sc = sample_coverage_features(model, self._recent_features)
            elif block is not None and block[0].shape[0] >= k:
                A_b, _, cross = block
                pick = np.unique(np.linspace(0, A_b.shape[0] - 1, k).round()).astype(np.int64)
                sc = sample_coverage(model, A_b[pick], np.asarray(cross)[np.ix_(pick, pick)])
            else:
                return None
        except (InputError, ValueError, np.linalg.LinAlgError) as exc:
            log.debug("coverage check skipped: %s", exc)
            return None
        return (sc.coverage, sc.n_objects) if np.isfinite(sc.coverage) else None

    def _record(self, now: float, stats: DriftStatistics | None, value: float, threshold: float) -> None:
        """Append the window's statistics and the detector's state to the drift history (rate-limited)."""
        if self.history_path is None or now - self._history_at < self.settings.history_seconds:
            return
        self._history_at = now
        trig = self.trigger
        doc = {
            "time": datetime.fromtimestamp(now, UTC).isoformat().replace("+00:00", "Z"),
            "unix": now,
            "model_version": self.model_version,
            "objects_seen": self.objects_seen,
            "window": None if stats is None else _finite(stats.as_dict()),
            "detector": _finite({"kind": trig.kind, "statistic": value, "threshold": threshold,
                                 "expected_run_objects": trig.expected_run_objects, "watches": trig.watches,
                                 "fired": self._fired_since_record, "armed": self.armed,
                                 "arming_objects": self.arming_objects}),
            "detectors": [_finite({"kind": t.kind, "statistic": t.statistic, "threshold": t.threshold,
                                   "armed": is_armed(t), "share": getattr(t, "share", None),
                                   "coverage": getattr(t, "coverage", None)}) for t in members(trig)],
        }
        self._fired_since_record = False
        try:
            make_dirs(self.history_path.parent)
            with open_append(self.history_path) as fh:  # never through a link; created with the file mode
                fh.write((json.dumps(doc) + "\n").encode("utf-8"))
        except OSError as exc:  # the stream goes on; the history has a gap
            log.warning("cannot append to %s: %s", self.history_path, exc)

    def _keep_candidates(self, A: np.ndarray, ids: Any, features: np.ndarray | None,
                         block: tuple[np.ndarray, Any, np.ndarray] | None) -> None:
        if features is not None:
            m = A.shape[0]
            id_arr = (np.asarray(ids.to_numpy(zero_copy_only=False), dtype=object) if ids is not None
                      else np.array([f"obj-{i}" for i in range(m)], dtype=object))
            self._features.add(id_arr, np.asarray(features, dtype=np.float64))
        elif block is not None:
            A_b, ids_b, cross = block
            k = A_b.shape[0]
            names = ([str(x) for x in ids_b.to_pylist()] if ids_b is not None else [f"obj-{i}" for i in range(k)])
            self._block = Candidates(ids=names, cross_to_landmarks=np.asarray(A_b, dtype=np.float64).copy(),
                                     mutual=np.asarray(cross, dtype=np.float64).copy())

    def _keep_recent(self, A: np.ndarray, ids: Any, features: np.ndarray | None, objects: Any) -> None:
        """The recent rows' ids, rows (with ``keep_rows``) and objects (``monitors.reservoir``)."""
        if features is not None or (objects is None and not self.keep_rows):
            return
        m = A.shape[0]
        keep = max(0, m - self._recent.capacity)  # only the last ``capacity`` rows can stay
        if ids is not None:  # to_pylist, not to_numpy: that would import pandas on the hot path
            id_arr = np.fromiter(ids.slice(keep).to_pylist(), dtype=object, count=m - keep)
        else:
            id_arr = np.array([f"obj-{i}" for i in range(keep, m)], dtype=object)
        self._recent.add(id_arr, A[keep:] if A.shape[1] else None, None if objects is None else objects[keep:])

    def candidates(self) -> Candidates | None:
        """The reservoir as refit candidates (None when there are none): feature vectors, else recent objects,
        else the last block, else recent rows whose mutual dissimilarities a refit request asks for."""
        if len(self._features):
            kept = self._features.contents()
            return Candidates(ids=[str(x) for x in kept.ids], features=kept.rows)
        recent = self._recent.contents() if len(self._recent) else None
        if recent is not None and recent.objects is not None and len(recent.ids):
            return Candidates(ids=[str(x) for x in recent.ids], cross_to_landmarks=recent.rows,
                              objects=recent.objects)
        if self._block is not None or recent is None or recent.rows is None:
            return self._block
        return Candidates(ids=[str(x) for x in recent.ids], cross_to_landmarks=recent.rows)

    @property
    def reservoir_size(self) -> int:
        if len(self._features):
            return len(self._features)
        if len(self._recent):
            return len(self._recent)
        return 0 if self._block is None else len(self._block.ids)

    # ----------------------------------------------------------------- metrics
    def _export_arming(self) -> None:
        """Whether each detector is armed and how many objects the stream baseline still needs (every batch)."""
        m = self.metrics
        if m is None:
            return
        for member in members(self.trigger):
            m.drift_armed.labels(kind=member.kind).set(1.0 if is_armed(member) else 0.0)
        m.drift_arming_objects.set(self.arming_objects)

    def _export(self, stats: DriftStatistics | None, value: float, level: float) -> None:
        m = self.metrics
        if m is None:
            return
        m.refit_trigger_value.set(value)
        m.refit_trigger_level.set(level)
        m.reservoir_objects.set(self.reservoir_size)
        trig = self.trigger
        deciding = set(trig.kind.split("+"))
        for k in TRIGGERS.names():
            m.drift_detector_info.labels(kind=k).set(1.0 if k in deciding else 0.0)
        for member in members(trig):
            m.drift_member_statistic.labels(kind=member.kind).set(member.statistic)
            m.drift_member_threshold.labels(kind=member.kind).set(member.threshold)
        m.drift_captured_share.set(triggers.captured_share_watched(trig))
        ert = trig.expected_run_objects
        if ert is not None:  # a calibrated detector states its guarantee: its statistic and threshold are exported
            m.drift_detector_statistic.set(trig.statistic)
            m.drift_detector_threshold.set(trig.threshold)
            m.drift_detector_expected_run_objects.set(ert)
        if stats is not None:
            _export_window(m, stats)


def _export_window(m: Any, stats: DriftStatistics) -> None:
    """The window's statistics on the drift gauges of ``m`` (``ops.metrics``)."""
    g = m.drift
    g["window_objects"].set(stats.n_objects)
    g["sampled_objects"].set(stats.n_sampled)
    for name in ("relative_unexplained_mean", "relative_k0_mean", "trace_k0", "trace_k0_stderr", "trace_k0_bound",
                 "norm_k0", "kernel_distance_bound", "eigengap", "gap_ratio"):
        v = getattr(stats, name)
        g[name].set(v if math.isfinite(v) else float("nan"))
    g["norm_k0_exact"].set(1.0 if stats.norm_exact else 0.0)
    g["negative_k0_ratio"].set(stats.negative_k0_share)
    for q, v in (("0.5", stats.relative_unexplained_p50), ("0.9", stats.relative_unexplained_p90),
                 ("0.99", stats.relative_unexplained_p99)):
        m.drift_quantile.labels(q=q).set(v)


def _last_rows(kept: np.ndarray, new: np.ndarray, k: int) -> np.ndarray:
    """The last k rows of ``kept`` then ``new`` (a new width starts over)."""
    new = np.asarray(new, dtype=np.float64)
    if kept.size and kept.shape[1] == new.shape[1]:
        new = np.concatenate([kept, new])
    return new[-k:].copy()


def _finite(doc: dict[str, Any]) -> dict[str, Any]:
    """NaN and ±inf as null: the history is strict JSON."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in doc.items()}



def _spaced_rows(m: int, k: int) -> np.ndarray:
    """k evenly spaced row indices of m (k < m), each once and in order (``np.unique`` of the rounded linspace,
    without ``np.unique``'s sort and its import of numpy.ma)."""
    rows = np.linspace(0, m - 1, k).round().astype(np.intp)
    return rows[np.concatenate(([True], rows[1:] != rows[:-1]))]
