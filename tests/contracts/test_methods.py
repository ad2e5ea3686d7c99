"""Every registered placement method passes the method checks (``checks.METHOD_CHECKS``) and keeps its output code."""

from __future__ import annotations

import pytest

from streamembed.core.place.methods import PLACEMENT_METHODS, PlacementMethod

from .checks import METHOD_CHECKS, Check

#: The output codes files were written with: a method keeps its code for good (codes are append-only).
WRITTEN_CODES = {"projection": 0, "restricted": 1, "stress": 2, "l1": 3, "block": 4, "kernel": 5}


@pytest.mark.parametrize("check", METHOD_CHECKS, ids=lambda c: c.__name__.removeprefix("check_method_"))
@pytest.mark.parametrize("method", list(PLACEMENT_METHODS), ids=lambda m: m.name)
def test_every_method_passes_the_method_checks(method: PlacementMethod, check: Check) -> None:
    check(method)


def test_output_codes_are_append_only() -> None:
    """Every code a file was ever written with still names its method; new methods take new codes after them."""
    codes = {m.name: m.code for m in PLACEMENT_METHODS}
    assert {name: codes.get(name) for name in WRITTEN_CODES} == WRITTEN_CODES
    assert sorted(codes.values()) == list(range(len(codes)))
