"""Drift statistics over sliding windows and the refit trigger (docs/math.md §4, §7).

``DriftWindow`` keeps, per batch, the relative unexplained energy of every
object and the sum of their unexplained energies u (O(d) each, free from
projection), and the exact k0 and r-dimensional projections of a sample,
evicting batches by object count and by age. From them it reports the
window's statistics: the bound, the estimate and (where known) the exact
value of ``bounds.window_bounds``, each named as what it is. ``RefitTrigger`` turns a chosen statistic into
refit decisions with a baseline, hysteresis, a minimum run of objects and a
cooldown. Neither reads a clock: callers pass ``now`` (seconds), so both are
deterministic under test.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .bounds import window_bounds
from .residuals import K0_RTOL, landmark_trace

#: Objects in the sliding drift window (config ``drift.window_objects``).
WINDOW_OBJECTS = 50_000
#: Objects after a (re)fit before a trigger takes its baseline (config ``drift.baseline_objects``; both triggers).
BASELINE_OBJECTS = 20_000
#: No automatic refit within this many seconds after one (config ``drift.cooldown_seconds``; both triggers).
COOLDOWN_SECONDS = 300.0
#: The rule's defaults (config ``drift.ratio``, ``drift.margin``, ``drift.hysteresis``, ``drift.min_objects``).
RULE_RATIO = 1.5
RULE_MARGIN = 0.05
RULE_HYSTERESIS = 0.5
RULE_MIN_OBJECTS = 20_000


@dataclass
class _Batch:
    time: float
    rel_unexplained: np.ndarray  # (m,) finite values only
    k0: np.ndarray  # (s,)
    y_r: np.ndarray  # (s, r)
    beta: np.ndarray  # (s,)
    block_norm: float | None  # ‖K0‖₂ of the whole batch (one block, every row sampled), else None
    u_sum: float | None  # Σ u over the batch's objects with a finite u (None: not given)
    u_count: int


@dataclass(frozen=True)
class DriftStatistics:
    """Statistics of the current window (squared-distance units unless stated).

    ``relative_unexplained_*`` are ratios (unexplained / β) over every object.
    The k0 statistics are of three kinds (``bounds.window_bounds``):
    ``trace_k0_bound`` (Σu, a BOUND of Tr(k0), any data), ``trace_k0`` (an
    ESTIMATE, exact when every object was sampled, with ``trace_k0_stderr``),
    ``norm_k0`` (exact when ``norm_exact`` — the window is one block —, else a
    BOUND; NaN where k0 is not PSD), ``kernel_distance_bound`` (from the
    bound) and ``gap_ratio`` = ‖k0‖₂ / (γ_d − γ_{d+1}) (Corollary 16; NaN with
    ``norm_k0``); ``new_axis_possible`` is None where ``norm_k0`` is NaN.
    """

    n_objects: int
    n_sampled: int
    relative_unexplained_mean: float
    relative_unexplained_p50: float
    relative_unexplained_p90: float
    relative_unexplained_p99: float
    k0_mean: float
    relative_k0_mean: float
    trace_k0: float
    trace_k0_stderr: float
    trace_k0_bound: float
    norm_k0: float
    norm_exact: bool
    kernel_distance_bound: float
    eigengap: float
    gap_ratio: float
    new_axis_possible: bool | None
    negative_k0_share: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Statistics a trigger may watch.
STATISTICS = (
    "relative_unexplained_mean",
    "relative_unexplained_p90",
    "relative_k0_mean",
    "kernel_distance_bound",
    "gap_ratio",
)


class DriftWindow:
    """Sliding window of per-object residuals.

    Args:
        lam_r: (r,) eigenvalues used for the exact k0.
        n_components: d.
        n_landmarks: n.
        max_objects: evict the oldest batches beyond this many objects.
        max_seconds: evict batches older than this (None: count only).
        negative_tol: relative round-off tolerance (of |β| + |k̂|) below which a negative k0 counts as 0.
        landmark_trace: Σ_l k0(l,l) over the landmarks (``residuals.landmark_trace``; 0 for a full spectrum).
        euclidean: whether the landmark kernel is Euclidean (k0 can then be PSD).
    """

    def __init__(
        self,
        lam_r: np.ndarray,
        n_components: int,
        n_landmarks: int,
        max_objects: int = WINDOW_OBJECTS,
        max_seconds: float | None = None,
        negative_tol: float = 1e-6,
        landmark_trace: float = 0.0,
        euclidean: bool = True,
    ):
        self.lam_r = np.asarray(lam_r, dtype=np.float64)
        self.n_components = int(n_components)
        self.n_landmarks = int(n_landmarks)
        self.max_objects = int(max_objects)
        self.max_seconds = max_seconds
        self.negative_tol = negative_tol
        self.landmark_trace = float(landmark_trace)
        self.euclidean = bool(euclidean)
        self._batches: deque[_Batch] = deque()
        self._n = 0

    @classmethod
    def for_model(cls, model: object, **kwargs: object) -> DriftWindow:
        """The window for a fitted ``LandmarkModel`` (its monitored eigenvalues, landmark trace, Euclidean or not).

        A window does not know its rows' dtype: negative k0 counts beyond the float32 round-off
        (``residuals.K0_RTOL``), so float32 rows of Euclidean data do not make k0 look indefinite.
        """
        from ..fit.cmds import NEGATIVE_SHARE_TOL

        kwargs.setdefault("negative_tol", K0_RTOL[np.dtype(np.float32)])
        sp = model.spectrum  # type: ignore[attr-defined]
        return cls(sp.eigenvalues, int(model.n_components), sp.n_landmarks,  # type: ignore[attr-defined]
                   landmark_trace=landmark_trace(sp.row_means, sp.grand_mean, sp.eigenvalues),
                   euclidean=sp.negative_share <= NEGATIVE_SHARE_TOL, **kwargs)  # type: ignore[arg-type]

    def __len__(self) -> int:
        return self._n

    def clear(self) -> None:
        self._batches.clear()
        self._n = 0

    def add(
        self,
        now: float,
        rel_unexplained: np.ndarray,
        k0: np.ndarray | None = None,
        y_r: np.ndarray | None = None,
        beta: np.ndarray | None = None,
        block_norm: float | None = None,
        unexplained: np.ndarray | None = None,
    ) -> None:
        """Add one batch: rel_unexplained (m,), and for its sample k0 (s,), y_r (s, r), β (s,).

        ``unexplained`` (m,) are the batch's u = β − ‖ŷ‖² (their sum makes the
        bound and the control-variate estimate); ``block_norm`` is ‖K0‖₂ of
        the whole batch when it is one block whose every row was sampled.
        """
        rel = np.asarray(rel_unexplained, dtype=np.float64)
        rel = rel[np.isfinite(rel)]
        r = self.lam_r.size
        k0 = np.empty(0) if k0 is None else np.asarray(k0, dtype=np.float64)
        y_r = np.empty((0, r)) if y_r is None else np.asarray(y_r, dtype=np.float64)
        beta = np.empty(0) if beta is None else np.asarray(beta, dtype=np.float64)
        ok = np.isfinite(k0)
        if unexplained is None:
            u_sum, u_count = None, 0
        else:
            u = np.asarray(unexplained, dtype=np.float64)
            u = u[np.isfinite(u)]
            u_sum, u_count = float(u.sum()), int(u.size)
        self._batches.append(_Batch(now, rel, k0[ok], y_r[ok], beta[ok], block_norm, u_sum, u_count))
        self._n += rel.size
        self._evict(now)

    def _evict(self, now: float) -> None:
        while len(self._batches) > 1 and self._n - self._batches[0].rel_unexplained.size >= self.max_objects:
            self._n -= self._batches.popleft().rel_unexplained.size
        if self.max_seconds is not None:
            while self._batches and self._batches[0].time < now - self.max_seconds:
                self._n -= self._batches.popleft().rel_unexplained.size

    def statistics(self, now: float | None = None) -> DriftStatistics | None:
        """The window's statistics, or None while it is empty."""
        if now is not None:
            self._evict(now)
        if not self._batches or self._n == 0:
            return None
        rel = np.concatenate([b.rel_unexplained for b in self._batches])
        k0 = np.concatenate([b.k0 for b in self._batches])
        beta = np.concatenate([b.beta for b in self._batches])
        y_r = np.concatenate([b.y_r for b in self._batches]) if k0.size else np.empty((0, self.lam_r.size))
        p50, p90, p99 = np.percentile(rel, [50, 90, 99])
        known = all(b.u_sum is not None for b in self._batches)
        u_sum = sum(b.u_sum for b in self._batches) if known else None  # type: ignore[misc]
        n_u = sum(b.u_count for b in self._batches) if known else self._n
        if k0.size:
            one = self._batches[0] if len(self._batches) == 1 else None
            wb = window_bounds(k0, y_r, self.lam_r, self.n_components, self.n_landmarks, n_window=max(n_u, k0.size),
                               u_sum=u_sum, block_norm=None if one is None else one.block_norm,
                               landmark_trace=self.landmark_trace, euclidean=self.euclidean, rtol=self.negative_tol)
            with np.errstate(divide="ignore", invalid="ignore"):
                rel_k0 = float(np.nanmean(np.where(beta > 0, k0 / beta, np.nan))) if (beta > 0).any() else math.nan
            stats: dict[str, Any] = dict(
                k0_mean=float(k0.mean()),
                relative_k0_mean=rel_k0,
                trace_k0=wb.trace_k0,
                trace_k0_stderr=wb.trace_k0_stderr,
                trace_k0_bound=wb.trace_k0_bound,
                norm_k0=wb.norm_k0,
                norm_exact=wb.norm_exact,
                kernel_distance_bound=wb.kernel_distance_bound,
                eigengap=wb.eigengap,
                gap_ratio=wb.gap_ratio,
                new_axis_possible=wb.new_axis_possible,
                negative_k0_share=wb.negative_k0_share,
            )
        else:
            stats = dict(
                k0_mean=math.nan,
                relative_k0_mean=math.nan,
                trace_k0=math.nan,
                trace_k0_stderr=math.nan,
                trace_k0_bound=math.nan if u_sum is None else float(u_sum),
                norm_k0=math.nan,
                norm_exact=False,
                kernel_distance_bound=math.nan,
                eigengap=math.nan,
                gap_ratio=math.nan,
                new_axis_possible=None,
                negative_k0_share=math.nan,
            )
        return DriftStatistics(
            n_objects=self._n,
            n_sampled=int(k0.size),
            relative_unexplained_mean=float(rel.mean()),
            relative_unexplained_p50=float(p50),
            relative_unexplained_p90=float(p90),
            relative_unexplained_p99=float(p99),
            **stats,
        )


@dataclass(frozen=True)
class TriggerDecision:
    """What a trigger made of one batch: fire or not, why, the value it decided on and its level (NaN: none yet),
    and the objects counted above the level (the rule's count; 0 for the CUSUM)."""

    fire: bool
    reason: str
    value: float
    threshold: float
    objects_above: int


class RefitTrigger:
    """When to refit: a statistic that stays high, relative to a baseline.

    The statistic's baseline is its value once ``baseline_objects`` objects
    have been seen after a (re)fit: a map that explains stationary data
    poorly (high-dimensional or non-Euclidean input) sets a high baseline
    and never triggers, which is what prevents refit storms. The trigger
    arms when the statistic exceeds ``max(baseline·ratio, baseline + margin)``
    (or ``threshold`` when given: an absolute level), counts objects while it
    stays there, keeps the count while it is between the clear level
    (``hysteresis`` of the way from baseline to the trigger level) and the
    trigger level, resets it below the clear level, and fires after
    ``min_objects`` objects outside the ``cooldown_seconds`` after a refit.

    A ``core.monitor.triggers.Trigger``: ``watches`` names the statistic,
    ``statistic`` is its value at the last ``observe`` and ``threshold`` the
    level in force (``level()``).

    Args:
        statistic: one of ``STATISTICS``, the window statistic watched.
        ratio, margin: relative and absolute rise over the baseline that counts as drift.
        threshold: absolute trigger level instead of the baseline rule (None: the baseline rule).
        hysteresis: clear level = baseline + hysteresis·(level − baseline), in [0, 1].
        min_objects: objects above the level before firing.
        baseline_objects: objects after a refit before the baseline is taken.
        cooldown_seconds: no automatic refit within this time after one.
    """

    #: what the daemon's drift history calls this trigger (``trigger.SequentialTrigger`` is "cusum")
    kind = "rule"
    #: the rule states no false-alarm guarantee
    expected_run_objects = None
    #: the rule has nothing to warn about
    warning = None

    def __init__(
        self,
        statistic: str = STATISTICS[0],
        ratio: float = RULE_RATIO,
        margin: float = RULE_MARGIN,
        threshold: float | None = None,
        hysteresis: float = RULE_HYSTERESIS,
        min_objects: int = RULE_MIN_OBJECTS,
        baseline_objects: int = BASELINE_OBJECTS,
        cooldown_seconds: float = COOLDOWN_SECONDS,
    ):
        if statistic not in STATISTICS:
            raise ValueError(f"statistic must be one of {STATISTICS}, got {statistic!r}")
        if not 0.0 <= hysteresis <= 1.0:
            raise ValueError(f"hysteresis must lie in [0, 1], got {hysteresis}")
        self.watches = statistic
        self.ratio = ratio
        self.margin = margin
        self.absolute_level = threshold
        self.hysteresis = hysteresis
        self.min_objects = int(min_objects)
        self.baseline_objects = int(baseline_objects)
        self.cooldown_seconds = cooldown_seconds
        self.baseline: float | None = None
        self._seen_since_refit = 0
        self._objects_above = 0
        self._last_refit: float | None = None
        self._value = math.nan

    @property
    def statistic(self) -> float:
        """The watched statistic at the last ``observe`` (NaN before the window has one)."""
        return self._value

    @property
    def threshold(self) -> float:
        """The trigger level in force (``level()``)."""
        return self.level()

    def level(self) -> float:
        """The trigger level in force (NaN before the baseline is known)."""
        if self.absolute_level is not None:
            return float(self.absolute_level)
        if self.baseline is None or not math.isfinite(self.baseline):
            return math.nan
        return max(self.baseline * self.ratio, self.baseline + self.margin)

    def refitted(self, now: float) -> None:
        """A refit happened (automatic or manual): cooldown and a new baseline."""
        self._last_refit = now
        self.baseline = None
        self._seen_since_refit = 0
        self._objects_above = 0
        self._value = math.nan

    def cooldown(self, now: float) -> None:
        """A refit was not installed: as ``refitted`` (the rule re-baselines; kept for the daemon's call sites)."""
        self.refitted(now)

    @property
    def armed(self) -> bool:
        """Whether its level is known (a baseline, or an absolute level)."""
        return math.isfinite(self.level())

    def observe(self, now: float, stats: DriftStatistics | None, n_new: int, values: object = None, *,
                result: object = None, sample: object = None) -> TriggerDecision:
        """Account for ``n_new`` objects whose window statistics are ``stats``.

        ``values`` (the batch's per-object statistic), ``result`` (its
        ``EmbeddingResult``) and ``sample`` are accepted and ignored: every trigger is fed alike.
        """
        self._seen_since_refit += n_new
        value = math.nan if stats is None else float(getattr(stats, self.watches))
        self._value = value
        if self.baseline is None and self.absolute_level is None and self._seen_since_refit >= self.baseline_objects \
                and math.isfinite(value):
            self.baseline = value
        level = self.level()
        if not (math.isfinite(value) and math.isfinite(level)):
            return TriggerDecision(False, "no baseline yet", value, level, 0)
        base = self.baseline if self.baseline is not None else 0.0
        clear = base + self.hysteresis * (level - base)
        if value > level:
            self._objects_above += n_new
        elif value < clear:
            self._objects_above = 0
        if self._objects_above < self.min_objects:
            return TriggerDecision(False, "below trigger", value, level, self._objects_above)
        if self._last_refit is not None and now - self._last_refit < self.cooldown_seconds:
            return TriggerDecision(False, "cooldown", value, level, self._objects_above)
        return TriggerDecision(
            True,
            f"{self.watches} = {value:.4g} above {level:.4g} for {self._objects_above} objects",
            value,
            level,
            self._objects_above,
        )
