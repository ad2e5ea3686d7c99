"""Refit triggers: the :class:`Trigger` protocol, one registry of kinds (``TRIGGERS``), and composition.

A trigger turns the drift monitor's stream of batches into refit decisions
(docs/math.md §4, §7). The daemon's monitor feeds every batch to
``observe(now, stats, n_new, values, result=..., sample=...)`` — the window's
statistics, the batch's per-object unexplained energies, its
``EmbeddingResult`` and its ``observation.MonitorSample`` (projections on the
leading axes, a coverage check) — and
tells it ``refitted(now)`` (a new map: new baseline) or ``cooldown(now)`` (a
refit that was not installed). It reads ``kind``, ``watches``, ``statistic``,
``threshold``, ``expected_run_objects`` and ``warning`` for the metrics, the
drift history and the map page, whatever the trigger: nothing above the core
branches on a trigger's kind (River's ``DriftDetector`` in spirit:
``update`` and ``drift_detected``, the same for every member).

``TRIGGERS`` names the kinds ``drift.detector`` chooses from: ``cusum``, the
calibrated CUSUM on the unexplained energy (``core.monitor.trigger``: off
the map), ``rule``, the baseline-ratio rule on a window statistic
(``core.monitor.drift.RefitTrigger``), ``plane``, the calibrated CUSUM on the
map's captured share (``core.monitor.plane``: the map's plane turned), and
``coverage``, the calibrated CUSUM on the radius's sample coverage
(``core.monitor.coverage_watch``). A kind's ``build`` takes the ``[drift]``
settings as core arguments (a mapping; ``config.core_args`` turns the
configuration's "off" values into None). :class:`AnyOf` composes triggers: it
fires when any member fires and says which; ``drift.detector`` names kinds
joined by "+" (default ``cusum+plane+coverage``), which ``build_trigger``
composes. A trigger that can be calibrated from a model's fit population
also has ``arm_from_fit(baseline) -> str | None`` and ``armed``
(docs/math.md §7.8); the monitor calls it where it exists.

A new trigger is one file (a class satisfying :class:`Trigger`) and one
``TRIGGERS.register(TriggerKind(...))`` line (docs/extending.md); its
settings are fields of ``[drift]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import itertools
import math

from ..registry import Registry
from .baseline import FitBaseline
from .coverage_watch import CoverageTrigger
from .detector import CusumDetector, check_detector_settings
from .drift import DriftStatistics, RefitTrigger, TriggerDecision
from .observation import MonitorSample
from .plane import PlaneTrigger
from .trigger import SequentialTrigger

__all__ = ["Trigger", "TriggerKind", "TRIGGERS", "AnyOf", "build_trigger", "check_trigger", "members",
           "detector_choices", "DEFAULT_DETECTOR", "alarm_phrase", "arm_from_fit", "is_armed", "fired_by",
           "captured_share_watched"]


@runtime_checkable
class Trigger(Protocol):
    """What decides refits (see the module doc). ``now`` is in seconds, from the caller's clock."""

    @property
    def kind(self) -> str:
        """The kind in force (a ``TRIGGERS`` name; a trigger that falls back says the fallback's)."""

    @property
    def watches(self) -> str:
        """What it decides on, for people ("CUSUM of the unexplained energy", a window statistic's name)."""

    @property
    def statistic(self) -> float:
        """Its current value of what it watches (NaN: none yet)."""

    @property
    def threshold(self) -> float:
        """The level it fires above (NaN: not known yet, e.g. before its baseline)."""

    @property
    def expected_run_objects(self) -> float | None:
        """Its calibrated false-alarm guarantee in stationary objects between alarms (None: it states none)."""

    @property
    def warning(self) -> str | None:
        """What the operator should know about it now (a failed calibration, a weaker guarantee), else None."""

    def observe(self, now: float, stats: DriftStatistics | None, n_new: int, values: Any = None, *,
                result: Any = None, sample: MonitorSample | None = None) -> TriggerDecision:
        """Account for one batch of ``n_new`` objects: ``stats`` the window's statistics (None: none yet),
        ``values`` (n_new,) their unexplained energies, ``result`` their ``EmbeddingResult``, ``sample`` the
        monitor's extra measurements (None: none)."""

    def refitted(self, now: float) -> None:
        """A refit was installed (or the map accepted as it is): new baseline, cooldown."""

    def cooldown(self, now: float) -> None:
        """A refit was not installed: cool down, keep the baseline."""


@dataclass(frozen=True)
class TriggerKind:
    """One kind of trigger: its name (``drift.detector``), how to build it from the ``[drift]`` settings
    (core arguments by key name), and one line for the documentation tables."""

    name: str
    build: Callable[[Mapping[str, Any]], Trigger]
    doc: str
    #: what its alarm means, for the "drift: alarm" log line ("off the map", "the map's plane turned")
    alarm: str = ""


def check_trigger(trigger: object, name: str = "") -> None:
    """Raise TypeError naming ``name`` (or the object) when ``trigger`` does not satisfy :class:`Trigger`."""
    if not isinstance(trigger, Trigger):
        missing = [m for m in ("kind", "watches", "statistic", "threshold", "expected_run_objects", "warning",
                               "observe", "refitted", "cooldown") if not hasattr(trigger, m)]
        raise TypeError(f"trigger {name or type(trigger).__name__!r} does not satisfy the Trigger protocol: "
                        f"missing {', '.join(missing)}")
    for method in ("observe", "refitted", "cooldown"):
        if not callable(getattr(trigger, method)):
            raise TypeError(f"trigger {name or type(trigger).__name__!r}: {method} is not callable")


def _check_kind(kind: TriggerKind, registry: Registry[TriggerKind]) -> None:
    if not isinstance(kind, TriggerKind):
        raise TypeError(f"a trigger kind is a TriggerKind, got {type(kind).__name__}")
    if not callable(kind.build):
        raise TypeError("its build is not callable")


def _rule(s: Mapping[str, Any]) -> RefitTrigger:
    return RefitTrigger(statistic=s["statistic"], ratio=s["ratio"], margin=s["margin"], threshold=s["threshold"],
                        hysteresis=s["hysteresis"], min_objects=s["min_objects"],
                        baseline_objects=s["baseline_objects"], cooldown_seconds=s["cooldown_seconds"])


def _cusum(s: Mapping[str, Any]) -> SequentialTrigger:
    """The calibrated CUSUM, falling back to the rule when a baseline cannot calibrate it.

    Raises ``CalibrationError`` for settings no data can fit.
    """
    check_detector_settings(s["expected_run_objects"], s["baseline_objects"], s["group_objects"], s["min_shift"],
                            s["confidence"])
    detector = CusumDetector(s["expected_run_objects"], s["min_shift"], s["group_objects"], s["confidence"],
                             clip_quantile=s["clip_quantile"])
    return SequentialTrigger(detector, baseline_objects=s["baseline_objects"],
                             cooldown_seconds=s["cooldown_seconds"], fallback=_rule(s))


#: Every trigger kind by name (``drift.detector``'s choices).
TRIGGERS: Registry[TriggerKind] = Registry("trigger", _check_kind)

def _plane(s: Mapping[str, Any]) -> PlaneTrigger:
    return PlaneTrigger(s["expected_run_objects"], s["plane_axes"], s["plane_objects"], s["plane_min_shift"],
                        s["confidence"], s["baseline_objects"], s["cooldown_seconds"])


def _coverage(s: Mapping[str, Any]) -> CoverageTrigger:
    return CoverageTrigger(s["expected_run_objects"], s["coverage_every_objects"], s["coverage_min_shift"],
                           s["confidence"], s["cooldown_seconds"])


TRIGGERS.register(TriggerKind("cusum", _cusum, "a CUSUM on the per-object unexplained energy, calibrated on the "
                              "baseline to drift.expected_run_objects between false alarms (docs/math.md §7)",
                              alarm="off the map"))
TRIGGERS.register(TriggerKind("rule", _rule, "a window statistic against baseline × ratio, for min_objects "
                              "objects (docs/math.md §4)", alarm="a window statistic stayed above its level"))
TRIGGERS.register(TriggerKind("plane", _plane, "a CUSUM on the fall of the share of the recent objects' variance "
                              "the map holds against their best d-plane, calibrated like cusum (docs/math.md §7.7)",
                              alarm="the map's plane turned"))
TRIGGERS.register(TriggerKind("coverage", _coverage, "a CUSUM on the fall of the radius's coverage on checked "
                              "samples (features, blocks), calibrated like cusum (docs/math.md §7.9)",
                              alarm="the radius stopped covering"))

#: ``drift.detector``'s default: the off-map CUSUM, the in-map statistic and the coverage watch together.
DEFAULT_DETECTOR = "cusum+plane+coverage"


def detector_choices() -> tuple[str, ...]:
    """``drift.detector``'s values: every non-empty set of registered kinds, joined by "+" in registry order."""
    names = TRIGGERS.names()
    return tuple("+".join(c) for r in range(1, len(names) + 1) for c in itertools.combinations(names, r))


def alarm_phrase(kind: str) -> str:
    """What an alarm of ``kind`` means (its ``TriggerKind.alarm``; the kind itself for an unregistered one)."""
    return TRIGGERS[kind].alarm if kind in TRIGGERS.names() and TRIGGERS[kind].alarm else kind


def build_trigger(kind: str, settings: Mapping[str, Any]) -> Trigger:
    """The trigger of kind ``kind`` built from ``settings`` (checked against the protocol, naming the kind);
    kinds joined by "+" make an :class:`AnyOf` of them."""
    parts = kind.split("+")
    built = []
    for part in parts:
        trigger = TRIGGERS[part].build(settings)
        check_trigger(trigger, part)
        built.append(trigger)
    return built[0] if len(built) == 1 else AnyOf(built)


def members(trigger: Trigger) -> tuple[Trigger, ...]:
    """The triggers ``trigger`` is made of (its ``AnyOf`` members, or itself)."""
    return trigger.members if isinstance(trigger, AnyOf) else (trigger,)


def fired_by(trigger: Trigger) -> str:
    """Which kind fired: an ``AnyOf``'s member that fired last (its ``fired_by``), else the trigger's kind."""
    return str(getattr(trigger, "fired_by", None) or trigger.kind)


def captured_share_watched(trigger: Trigger) -> float:
    """The captured share the in-map member (kind ``plane``) watches now; NaN without one."""
    for member in members(trigger):
        if member.kind == "plane":
            share = getattr(member, "share", None)  # None before its first block
            return math.nan if share is None else float(share)
    return math.nan


def is_armed(trigger: Trigger) -> bool:
    """Whether ``trigger`` decides on a calibrated baseline: its ``armed``, or else a known threshold."""
    armed = getattr(trigger, "armed", None)
    return bool(armed) if armed is not None else math.isfinite(trigger.threshold)


def arm_from_fit(trigger: Trigger, baseline: FitBaseline) -> dict[str, str | None]:
    """Arm every member that can be armed from a model's fit baseline: {kind: what it was armed with, or None}."""
    out: dict[str, str | None] = {}
    for m in members(trigger):
        arm = getattr(m, "arm_from_fit", None)
        out[m.kind] = arm(baseline) if callable(arm) else None
    return out


class AnyOf:
    """Triggers watched together: fires when any member fires, and says which (``fired_by``, the reason).

    The first member is the primary: ``watches``, ``statistic``, ``threshold`` and ``expected_run_objects``
    are its; ``kind`` joins every member's with "+"; ``warning`` joins theirs; ``armed`` is any member's. Every
    member sees every batch and every ``refitted`` / ``cooldown``. A firing decision's reason starts with what
    the member's alarm means (``alarm_phrase``) and its kind.
    """

    def __init__(self, members: Sequence[Trigger]) -> None:
        if not members:
            raise ValueError("AnyOf needs at least one trigger")
        for m in members:
            check_trigger(m)
        self.members = tuple(members)
        self.fired_by: str | None = None

    @property
    def kind(self) -> str:
        return "+".join(m.kind for m in self.members)

    @property
    def watches(self) -> str:
        return self.members[0].watches

    @property
    def statistic(self) -> float:
        return self.members[0].statistic

    @property
    def threshold(self) -> float:
        return self.members[0].threshold

    @property
    def expected_run_objects(self) -> float | None:
        return self.members[0].expected_run_objects

    @property
    def warning(self) -> str | None:
        notes = [w for w in (m.warning for m in self.members) if w]
        return "; ".join(notes) if notes else None

    @property
    def armed(self) -> bool:
        return any(is_armed(m) for m in self.members)

    def observe(self, now: float, stats: DriftStatistics | None, n_new: int, values: Any = None, *,
                result: Any = None, sample: MonitorSample | None = None) -> TriggerDecision:
        decisions = [m.observe(now, stats, n_new, values, result=result, sample=sample) for m in self.members]
        fired = [(m, d) for m, d in zip(self.members, decisions, strict=True) if d.fire]
        if not fired:
            self.fired_by = None
            return decisions[0]
        member, d = fired[0]
        self.fired_by = member.kind
        return TriggerDecision(True, f"{alarm_phrase(member.kind)} ({member.kind}): {d.reason}", d.value,
                               d.threshold, d.objects_above)

    def refitted(self, now: float) -> None:
        for m in self.members:
            m.refitted(now)

    def cooldown(self, now: float) -> None:
        for m in self.members:
            m.cooldown(now)
