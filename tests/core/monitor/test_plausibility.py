"""Rows that cannot be right (docs/math.md §4.8) on real dissimilarities: rows multiplied by 10 and squared rows
are flagged on at least 90 % of rows, correct rows of the same datasets on at most 1 %."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.drift_pools import load_pool
from streamembed import LandmarkMDS
from streamembed.core.flags import FLAG_IMPLAUSIBLE_SCALE, FLAG_NEGATIVE_UNEXPLAINED, flag_names

IMPOSSIBLE = FLAG_IMPLAUSIBLE_SCALE | FLAG_NEGATIVE_UNEXPLAINED


@pytest.mark.parametrize("name", ["words", "digits", "identifiers"])
def test_rows_in_other_units_are_flagged_and_correct_rows_are_not(name):
    pool = load_pool(name)
    model = LandmarkMDS(n_components=2, n_landmarks=200 if pool.D_fit.shape[0] >= 800 else 100).fit(pool.D_fit).model_
    lm = np.array([int(x) for x in model.landmark_ids])
    A = pool.old_rows[:, lm]

    def flagged(rows: np.ndarray) -> float:
        return float(np.mean((model.place(rows, errors="mask").flags & IMPOSSIBLE) != 0))

    assert flagged(A) <= 0.01 and flagged(pool.new_rows[:, lm]) <= 0.01  # a population change is not a unit error
    assert flagged(10.0 * A) >= 0.9 and flagged(np.square(A)) >= 0.9


def test_the_flags_have_names_after_the_old_bits():
    assert flag_names(int(FLAG_IMPLAUSIBLE_SCALE | FLAG_NEGATIVE_UNEXPLAINED)) == ["implausible_scale",
                                                                                   "negative_unexplained"]
    assert int(FLAG_IMPLAUSIBLE_SCALE) == 512 and int(FLAG_NEGATIVE_UNEXPLAINED) == 1024
