"""Every registered trigger kind passes the trigger checks (``checks.TRIGGER_CHECKS``)."""

from __future__ import annotations

import pytest

from streamembed.core.monitor.triggers import TRIGGERS, TriggerKind

from .checks import TRIGGER_CHECKS, Check


@pytest.mark.parametrize("check", TRIGGER_CHECKS, ids=lambda c: c.__name__.removeprefix("check_trigger_"))
@pytest.mark.parametrize("kind", list(TRIGGERS), ids=lambda k: k.name)
def test_every_trigger_passes_the_trigger_checks(kind: TriggerKind, check: Check) -> None:
    check(kind)
