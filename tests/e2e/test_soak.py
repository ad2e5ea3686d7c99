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

from ..soak import _soak_kinds, directory_soak, shared_output_soak, table

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_directory_soak_random_kill_9_with_good_and_poison_files(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    res = directory_soak(tmp_path / "soak", seconds=25.0, seed=seed)
    report = f"seed {seed} (python -m tests.soak --seed {seed})\n{table(res.rows)}\n{res.details}"
    print(report)
    assert res.problems == [], report
    assert sum(r["lost"] for r in res.rows) == 0, report
    assert res.details["kills"] >= 5, report
    assert res.details["poison_kinds"] == len(_soak_kinds("file")), report
    assert res.details["checkpoint_samples"] >= 20, report


def test_shared_output_soak_two_daemons_hostile_names_links_and_pid_files(tmp_path: Path) -> None:
    """Two daemons with their own roots share one output directory (inputs of the same
    names) under random kill -9s and umask 000, with files named with a newline and ESC bytes, links out of
    the watched directories, a link planted at the old temporary name, and pid files deleted under running
    daemons: nothing lost, nothing read through a link, no second daemon on a held root, modes 0640/0750."""
    seed = random.randrange(1 << 30)
    res = shared_output_soak(tmp_path / "soak", seconds=20.0, seed=seed)
    report = f"seed {seed} (python -m tests.soak --mode shared --seed {seed})\n{table(res.rows)}\n{res.details}"
    print(report)
    assert res.problems == [], report
    assert sum(r["lost"] for r in res.rows) == 0, report
    assert res.details["kills"] >= 5 and res.details["hostile_files"] >= 5, report


def test_the_soak_ledger_counts_lost_duplicated_and_quarantined() -> None:
    """The accounting itself (no daemon): a test of the soak that could not fail would prove nothing."""
    from collections import Counter

    from ..soak import Ledger, _account

    ledger = Ledger()
    ledger.good("good", ["a", "b", "c", "d"])
    ledger.dead[("k", 0, 1, "negative")] = "poison"
    ledger.dead[("k", 0, 2, "bad_id")] = "poison"
    ledger.dead[("k", 0, 3, "wrong_length")] = "poison"
    ledger.records["poison"] += 3
    out = Counter({"a": 2, "b": 1})  # a twice, c quarantined, d lost
    dead = Counter({("k", 0, 1, "negative"): 1, ("k", 0, 2, "quarantined"): 1, ("q:f", -1, 0, "quarantined"): 1,
                    ("k", 0, 9, "negative"): 1})  # row 3 lost; row 9 was never input
    rows, problems, details = _account(ledger, out, dead, {"c"}, 3, 0, "t")
    by = {r["fault"]: r for r in rows}
    assert by["t: good files, renamed into place"] == {"fault": "t: good files, renamed into place", "runs": 3,
                                                       "records in": 4, "lost": 1, "duplicated": 1, "crashes": 0,
                                                       "quarantined": 1}
    assert (by["t: poison corpus"]["lost"], by["t: poison corpus"]["quarantined"]) == (1, 1)
    assert any("unexpected dead letters" in p and "('k', 0, 9, 'negative')" in p for p in problems)
    assert any(p.startswith("2 records lost") for p in problems)
