"""The crash soak in directory mode (tests/soak.py), bounded: random kill -9s while good and poison files arrive.

At the end: every input record embedded or dead-lettered with its reason (none
lost; duplicates counted and allowed), no temporary file left, every output
Parquet file readable, the checkpoint never moved backwards, no crash of its
own. ``python -m tests.soak`` runs the same and prints the table.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ..soak import TAIL_ONLY_KINDS, _soak_kinds, directory_soak, table

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_directory_soak_random_kill_9_with_good_and_poison_files(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    res = directory_soak(tmp_path / "soak", seconds=25.0, seed=seed, around_d10=True)
    report = f"seed {seed} (python -m tests.soak --around-d10 --seed {seed})\n{table(res.rows)}\n{res.details}"
    print(report)
    assert res.problems == [], report
    assert sum(r["lost"] for r in res.rows) == 0, report
    assert res.details["kills"] >= 5, report
    assert res.details["poison_kinds"] == len(_soak_kinds("file")) - len(TAIL_ONLY_KINDS), report
    assert res.details["checkpoint_samples"] >= 20, report
