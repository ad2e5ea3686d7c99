"""The split-conformal quantile: its rank, its minimum calibration size, and a direct computation."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from streamembed.core.errors import InputError
from streamembed.core.trust.conformal import (check_coverage, conformal_quantile, conformal_rank,
                                              min_calibration_objects)


@pytest.mark.parametrize("n", [9, 10, 19, 99, 100, 150, 1000])
@pytest.mark.parametrize("c", [0.5, 0.8, 0.9, 0.95, 0.99])
def test_the_quantile_is_the_order_statistic_at_rank_ceil_n_plus_1_times_c(n: int, c: float) -> None:
    rng = np.random.default_rng(n)
    s = rng.exponential(size=n)
    k = math.ceil(Fraction(n + 1) * Fraction(str(c)))  # exact rational arithmetic: no round-off in the rank
    expected = float(np.sort(s)[k - 1]) if k <= n else math.inf
    assert conformal_quantile(s, c) == expected
    # crepes' ConformalRegressor: the scores in descending order, index int((1 - c)(n + 1)) - 1 (none if < 0)
    j = int(round((1 - c) * (n + 1), 9)) - 1
    assert conformal_quantile(s, c) == (float(np.sort(s)[::-1][j]) if j >= 0 else math.inf)


def test_the_quantile_covers_a_new_exchangeable_score_with_probability_at_least_c() -> None:
    rng = np.random.default_rng(0)
    n, c, trials = 20, 0.9, 20_000
    S = rng.normal(size=(trials, n + 1))
    q = np.array([conformal_quantile(row[:n], c) for row in S])
    hit = float(np.mean(S[:, n] <= q))
    # exactly ⌈21·0.9⌉/21 = 19/21 = 0.9048 for continuous scores; binomial sd 0.0021
    assert abs(hit - 19 / 21) < 4 * math.sqrt(0.09 / trials)


@pytest.mark.parametrize(("c", "n_min"), [(0.5, 1), (0.8, 4), (0.9, 9), (0.95, 19), (0.99, 99)])
def test_the_fewest_calibration_objects_are_1_over_1_minus_c_minus_1(c: float, n_min: int) -> None:
    assert min_calibration_objects(c) == n_min
    assert conformal_rank(n_min, c) <= n_min
    assert conformal_rank(n_min - 1, c) > n_min - 1 or n_min == 1
    assert conformal_quantile(np.ones(n_min - 1), c) == math.inf or n_min == 1


@pytest.mark.parametrize("bad", [0, 1, 1.0, -0.1, 1.5, float("nan"), True, "0.9", None])
def test_a_coverage_outside_the_open_unit_interval_is_refused(bad: object) -> None:
    with pytest.raises(InputError, match="coverage"):
        check_coverage(bad)


def test_nan_scores_are_refused() -> None:
    with pytest.raises(InputError, match="NaN"):
        conformal_quantile(np.array([1.0, np.nan]), 0.5)
