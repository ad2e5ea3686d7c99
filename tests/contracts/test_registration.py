"""Bad members are refused with a message naming them: a name registered twice, an output code reused or
skipped, a member that does not satisfy its axis's protocol (at registration, or when it is built); and the
contract checks fail on a member that breaks its contract (a check that cannot fail would prove nothing)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from streamembed.config.sources import SOURCES, SourceKind
from streamembed.core.errors import InputError
from streamembed.core.inputs.metrics import METRICS, Metric, resolve_metric
from streamembed.core.monitor.drift import TriggerDecision
from streamembed.core.monitor.triggers import TRIGGERS, TriggerKind, build_trigger
from streamembed.core.place.dispatch import project
from streamembed.core.place.methods import PLACEMENT_METHODS, PlacementMethod
from streamembed.core.registry import RegistrationError
from streamembed.quality_indices import INDICES, QualityIndex

from .checks import (check_metric_is_a_dissimilarity, check_metric_rows_are_independent,
                     check_trigger_is_quiet_on_a_stationary_stream)


def _cdist(a: Any, b: Any) -> np.ndarray:
    return np.zeros((len(a), len(b)))


def test_a_name_registered_twice_is_refused_naming_it() -> None:
    with pytest.raises(RegistrationError, match="metric 'euclidean' is registered twice"):
        METRICS.register(Metric("euclidean", _cdist))
    with pytest.raises(RegistrationError, match="trigger 'cusum' is registered twice"):
        TRIGGERS.register(TriggerKind("cusum", lambda s: None, ""))  # type: ignore[arg-type, return-value]
    with pytest.raises(RegistrationError, match="placement method 'stress' is registered twice"):
        PLACEMENT_METHODS.register(PlacementMethod("stress", 5, project, "any", False, ""))


def test_an_output_code_reused_or_skipped_is_refused_naming_the_method() -> None:
    with pytest.raises(RegistrationError, match="'median': output code 2 is already 'stress''s"):
        PLACEMENT_METHODS.register(PlacementMethod("median", 2, project, "cmds", False, ""))
    with pytest.raises(RegistrationError, match="'median': output code 9 skips codes"):
        PLACEMENT_METHODS.register(PlacementMethod("median", 9, project, "cmds", False, ""))
    assert "median" not in PLACEMENT_METHODS


@pytest.mark.parametrize(("registry", "member", "why"), [
    (PLACEMENT_METHODS, PlacementMethod("median", 6, "not a function", "cmds", False, ""),  # type: ignore[arg-type]
     "placement method 'median' cannot be registered: its routine 'not a function' is not callable"),
    (PLACEMENT_METHODS, PlacementMethod("median", 6, project, "refined", False, ""),  # type: ignore[arg-type]
     "placement method 'median' cannot be registered: maps must be one of"),
    (METRICS, Metric("graph-edit", _cdist, takes="graphs"), "metric 'graph-edit' cannot be registered: takes"),
    (METRICS, Metric("pkg.mod:f", _cdist), "metric 'pkg.mod:f' cannot be registered: a registered name has no ':'"),
    (METRICS, Metric("broken", "cdist"), "metric 'broken' cannot be registered: its between"),  # type: ignore[arg-type]
    (TRIGGERS, TriggerKind("sleepy", "build", ""), "trigger 'sleepy' cannot be registered"),  # type: ignore[arg-type]
    (SOURCES, SourceKind("s3", None, "streamembed.s3", "behind", "tagged", ""),
     "source kind 's3' cannot be registered: builder 'streamembed.s3' is not of the form"),
    (INDICES, QualityIndex("stress", "stress", lambda r, y: 0.0, "smaller", ""),  # type: ignore[arg-type]
     "quality index 'stress' cannot be registered: better must be"),
], ids=["routine", "maps", "takes", "path-name", "not-callable", "build", "builder", "better"])
def test_a_member_that_does_not_satisfy_its_protocol_is_refused_naming_it(registry: Any, member: Any,
                                                                          why: str) -> None:
    with pytest.raises(RegistrationError) as info:
        registry.register(member)
    assert why in str(info.value) and member.name not in registry


def test_a_trigger_that_builds_something_else_is_refused_when_built_naming_what_is_missing() -> None:
    TRIGGERS.register(TriggerKind("hollow", lambda s: object(), "builds nothing useful"))  # type: ignore[arg-type]
    try:
        with pytest.raises(TypeError, match="trigger 'hollow' does not satisfy the Trigger protocol: missing kind, "
                                            "watches, statistic, threshold"):
            build_trigger("hollow", {})
    finally:
        TRIGGERS.unregister("hollow")


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(InputError, match="unknown metric 'levenstein'; known: braycurtis, canberra"):
        resolve_metric("levenstein")
    with pytest.raises(InputError, match="unknown trigger 'cusm'; known: cusum, rule"):
        TRIGGERS["cusm"]
    with pytest.raises(InputError, match="metric 'streamembed.core.nothing:f': cannot import"):
        resolve_metric("streamembed.core.nothing:f")
    with pytest.raises(InputError, match="is neither a Metric nor a function"):
        resolve_metric("streamembed.core.inputs.metrics:DEFAULT_METRIC")


def test_the_metric_checks_fail_on_a_metric_that_is_not_a_dissimilarity() -> None:
    lopsided = Metric("lopsided", lambda a, b: np.abs(a[:, None, 0] - 2 * b[None, :, 0]))
    with pytest.raises(AssertionError, match="lopsided"):
        check_metric_is_a_dissimilarity(lopsided)
    batchwise = Metric("batchwise", lambda a, b: np.abs(a[:, None, :] - b[None]).sum(-1) / len(a))
    with pytest.raises(AssertionError):
        check_metric_rows_are_independent(batchwise)


class _Jumpy:
    """Fires on every batch: not quiet on a stationary stream."""

    kind, watches, expected_run_objects, warning, statistic, threshold = "jumpy", "nothing", None, None, 1.0, 0.0

    def observe(self, now: float, stats: Any, n_new: int, values: Any = None, *, result: Any = None,
                sample: Any = None) -> Any:
        return TriggerDecision(True, "always", 1.0, 0.0, 0)

    def refitted(self, now: float) -> None:
        pass

    def cooldown(self, now: float) -> None:
        pass


def test_the_trigger_checks_fail_on_a_trigger_that_fires_on_a_stationary_stream() -> None:
    with pytest.raises(AssertionError, match="jumpy"):
        check_trigger_is_quiet_on_a_stationary_stream(TriggerKind("jumpy", lambda s: _Jumpy(), ""))
