"""The extension checklist, demonstrated (docs/extending.md): a toy metric and a toy trigger, each defined in this
one file and registered in one line, pass their axis's contract checks and run through the estimator, ``evaluate``
and the daemon's drift monitor without an edit anywhere else."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pytest

from streamembed.core.inputs.metrics import METRICS, Metric, resolve_metric
from streamembed.core.monitor.drift import TriggerDecision
from streamembed.core.monitor.triggers import TRIGGERS, AnyOf, TriggerKind

from .checks import METRIC_CHECKS, TRIGGER_CHECKS, Check, TRIGGER_SETTINGS


# ----------------------------------------------------------------------------- a toy metric: one function


def mean_absolute(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(len(a), len(b)) mean absolute coordinate difference (cityblock / p)."""
    return np.abs(a[:, None, :] - b[None, :, :]).mean(axis=2)


TOY_METRIC = Metric("mean-absolute", mean_absolute, "vectors", "cityblock divided by the number of features")


# ----------------------------------------------------------------------------- a toy trigger: one class


class BatchMeanTrigger:
    """Fires when three batches in a row have a mean unexplained energy above 1.5 x the baseline's."""

    kind = "batch-mean"
    watches = "batch mean of the unexplained energy"
    expected_run_objects = None
    warning = None

    def __init__(self, baseline_objects: int, cooldown_seconds: float) -> None:
        self.baseline_objects, self.cooldown_seconds = baseline_objects, cooldown_seconds
        self.refitted(-math.inf)

    @property
    def statistic(self) -> float:
        return self._value

    @property
    def threshold(self) -> float:
        return 1.5 * self._baseline if self._baseline is not None else math.nan

    def observe(self, now: float, stats: Any, n_new: int, values: Any = None, *,
                result: Any = None, sample: Any = None) -> TriggerDecision:
        v = np.asarray(values, dtype=np.float64)
        self._value = float(v.mean()) if v.size else math.nan
        if self._baseline is None:
            self._seen.append(v)
            if sum(x.size for x in self._seen) >= self.baseline_objects:
                self._baseline = float(np.concatenate(self._seen).mean())
            return TriggerDecision(False, "collecting the baseline", self._value, math.nan, 0)
        self._above = self._above + 1 if self._value > self.threshold else 0
        if self._above >= 3 and now - self._last >= self.cooldown_seconds:
            return TriggerDecision(True, f"batch mean {self._value:.3g} > {self.threshold:.3g} three times",
                                   self._value, self.threshold, 0)
        return TriggerDecision(False, "below threshold", self._value, self.threshold, 0)

    def refitted(self, now: float) -> None:
        self._baseline: float | None = None
        self._seen: list[np.ndarray] = []
        self._value, self._above, self._last = math.nan, 0, now

    def cooldown(self, now: float) -> None:
        self._above, self._last = 0, now


def build_batch_mean(settings: Mapping[str, Any]) -> BatchMeanTrigger:
    return BatchMeanTrigger(settings["baseline_objects"], settings["cooldown_seconds"])


TOY_TRIGGER = TriggerKind("batch-mean", build_batch_mean, "three batches above 1.5 x the baseline mean")
#: Composition: the CUSUM and the toy together, firing when either fires and saying which.
EITHER = TriggerKind("cusum+batch-mean", lambda s: AnyOf([TRIGGERS["cusum"].build(s), build_batch_mean(s)]),
                     "the CUSUM or the batch mean")


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    """The one line each member's registration is (undone after each test: the built-ins stay)."""
    METRICS.register(TOY_METRIC)
    TRIGGERS.register(TOY_TRIGGER)
    TRIGGERS.register(EITHER)
    yield
    METRICS.unregister(TOY_METRIC.name)
    TRIGGERS.unregister(TOY_TRIGGER.name)
    TRIGGERS.unregister(EITHER.name)


@pytest.mark.parametrize("check", METRIC_CHECKS, ids=lambda c: c.__name__.removeprefix("check_metric_"))
def test_the_toy_metric_passes_the_metric_checks(check: Check) -> None:
    check(TOY_METRIC)


@pytest.mark.parametrize("kind", [TOY_TRIGGER, EITHER], ids=lambda k: k.name)
@pytest.mark.parametrize("check", TRIGGER_CHECKS, ids=lambda c: c.__name__.removeprefix("check_trigger_"))
def test_the_toy_trigger_and_its_composition_pass_the_trigger_checks(kind: TriggerKind, check: Check) -> None:
    check(kind)


def test_the_toy_metric_works_wherever_a_metric_is_taken() -> None:
    """By name in the estimator and ``evaluate``, and as ``package.module:function`` without registering."""
    from streamembed import LandmarkMDS
    from streamembed.evaluate_data import evaluate_landmarks

    X = np.random.default_rng(0).normal(size=(120, 4))
    est = LandmarkMDS(n_components=2, metric="mean-absolute").fit(X[:30])
    np.testing.assert_allclose(est.dissimilarities_to_landmarks(X[30:]), mean_absolute(X[30:], X[:30]))
    rep = evaluate_landmarks(X=X, metric="mean-absolute", landmarks=(20,), selections=("random",), seeds=1)
    assert rep.rows and all(math.isfinite(r.procrustes.median) for r in rep.rows)
    by_path = resolve_metric(f"{__name__}:mean_absolute")
    np.testing.assert_array_equal(by_path(X[:3], X[3:5]), mean_absolute(X[:3], X[3:5]))


def test_the_daemon_drift_monitor_runs_the_toy_trigger_and_says_which_fired() -> None:
    """``drift.detector = "cusum+batch-mean"``: the monitor builds it by name and records whatever fired."""
    from streamembed.config.schema import DriftConfig
    from streamembed.core.model import fit_model
    from streamembed.monitors.drift import DriftMonitor, build_trigger

    settings = DriftConfig(detector=EITHER.name, baseline_objects=TRIGGER_SETTINGS.baseline_objects,
                           reservoir_objects=0, stats_every_objects=1000)
    rng = np.random.default_rng(1)
    L = rng.normal(size=(20, 2))
    model = fit_model(np.sqrt(((L[:, None] - L[None]) ** 2).sum(-1)), n_components=2)
    trigger = build_trigger(settings)
    assert isinstance(trigger, AnyOf) and trigger.kind == EITHER.name
    clock = iter(range(10_000))
    monitor = DriftMonitor(model, settings, trigger, clock=lambda: float(next(clock)))
    for i in range(60):
        Z = np.hstack([rng.normal(size=(1000, 2)), (0.05 if i < 30 else 1.5) * rng.normal(size=(1000, 1))])
        A = np.sqrt(((Z[:, None, :] - np.hstack([L, np.zeros((20, 1))])[None]) ** 2).sum(-1))
        monitor.observe(A, model.place(A, k0_rows=None))
    assert monitor.triggered_at is not None and monitor.triggered_at > 30_000
    assert trigger.fired_by in ("cusum", "batch-mean")
