"""``unexplained`` is the projection's β − ‖ŷ‖² for every method; ``unexplained_placed`` is the placement's own.

docs/math.md §4: drift monitoring watches β − ‖ŷ‖² (free, the same whatever the method); a user of RR,
stress, L1 or block RR may want the residual of the point actually placed, β − ‖y‖², which differed from
it by up to 2.75 on edit distances between words with nothing saying which one the output held.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import LandmarkMDS
from benchmarks.datasets import random_strings

from ..conftest import landmark_problem


@pytest.fixture(scope="module")
def words():
    D = random_strings(n=140, length=12, seed=3).dissimilarities()
    return D[:60, :60], D[60:, :60], D[60:70, 60:70]


@pytest.mark.parametrize("method", ["restricted", "stress", "l1"])
def test_the_placement_s_own_residual_is_reported_next_to_the_projection_s(words, method: str) -> None:
    D, A, _ = words
    est = LandmarkMDS(2).fit(D)
    res, proj = est.embed(A, method=method), est.embed(A)
    y_own = est.model_.place(A, method=method).y  # not aligned: the model's own frame
    # `unexplained` is the projection's, whatever the method
    np.testing.assert_array_equal(res.unexplained, proj.unexplained)
    np.testing.assert_allclose(res.unexplained, proj.beta - np.square(proj.y).sum(axis=1), rtol=1e-12, atol=1e-12)
    # the placement's own, β − ‖y‖², differs from it on these non-Euclidean rows
    np.testing.assert_allclose(res.unexplained_placed, res.beta - np.square(y_own).sum(axis=1), rtol=1e-12, atol=1e-12)
    assert np.abs(res.unexplained_placed - res.unexplained).max() > 0.1
    if method == "restricted":  # t = ‖y‖² − β
        np.testing.assert_allclose(res.unexplained_placed, -res.t, rtol=1e-9, atol=1e-9 * res.beta.max())
    assert est.embed(A).unexplained_placed is None  # projection: nothing new to say


def test_blocks_report_each_member_s_own_residual(words) -> None:
    D, A, C = words
    est = LandmarkMDS(2).fit(D)
    res = est.embed(A[:10], C)
    np.testing.assert_allclose(res.unexplained_placed, res.beta - np.square(res.y).sum(axis=1), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(res.unexplained, est.embed(A[:10]).unexplained, rtol=1e-10, atol=1e-12)


def test_masked_and_unknown_rows_have_no_own_residual() -> None:
    rng = np.random.default_rng(0)
    D, A, _ = landmark_problem(rng, 20, 3, 4, off_span=1.0)
    A[1, 3] = np.nan
    res = LandmarkMDS(2).fit(D).embed(A, method="restricted", errors="mask")
    assert np.isnan(res.unexplained_placed[1]) and np.isfinite(res.unexplained_placed[[0, 2, 3]]).all()
    assert res.take(np.array([2, 0])).unexplained_placed.tolist() == res.unexplained_placed[[2, 0]].tolist()
