"""Issue 35's attacks on the real daemon that need no broker (#2 as model.path, #4, #6, #7, #9, #10, #11): each
is a bounded scenario of ``tests/attacks.py`` that failed on the code before this round and must find nothing now.
The broker ones (#1, #2 on the model topic, #3) are ``tests/kafka/test_attacks_broker.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.attacks import ATTACKS

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.parametrize("number", sorted(ATTACKS))
def test_the_attack_does_no_harm(number: int, tmp_path: Path) -> None:
    res = ATTACKS[number](tmp_path)
    skips = [p for p in res.problems if p.startswith("skip:")]
    problems = [p for p in res.problems if not p.startswith("skip:")]
    assert not problems, "\n".join(problems)
    assert res.lost == 0 and res.crashes == 0
    if skips:
        pytest.skip(skips[0])
