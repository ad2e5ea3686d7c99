"""core.monitor.leave_one_out: the calibration's leave-one-out projections from one eigendecomposition equal
those of a refit per landmark (docs/math.md §4.3), on edit distances and on a kernel of paired eigenvalues."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.fit import cmds
from streamembed.core.monitor import calibration
from streamembed.core.monitor.leave_one_out import LeaveOneOut
from benchmarks.datasets import english_words, python_attribute_names


@pytest.fixture(scope="module")
def words() -> np.ndarray:
    return python_attribute_names(n=240).D


def _both(D: np.ndarray, d: int, n_residual: int | None) -> tuple[np.ndarray, np.ndarray]:
    sp, whole = cmds.fit_spectrum_eigh(D, n_residual, "auto", np.dtype(np.float64), d)
    assert whole is not None and sp.negative_share > cmds.NEGATIVE_SHARE_TOL
    return calibration.loo_ratios(D, d, n_residual, "auto"), calibration.loo_ratios(D, d, n_residual, "auto", whole)


@pytest.mark.parametrize("d, n_residual", [(2, None), (10, None), (3, 6)])
def test_every_leave_one_out_ratio_equals_the_refits(words: np.ndarray, d: int, n_residual: int | None) -> None:
    refit, fast = _both(words, d, n_residual)
    assert refit.size == fast.size == calibration.loo_sample(words.shape[0])
    np.testing.assert_allclose(fast, refit, rtol=1e-9, atol=1e-11)


def test_a_sample_of_a_larger_set_equals_the_refits() -> None:
    D = english_words(n=420).D
    refit, fast = _both(D, 4, None)
    assert refit.size == calibration.loo_sample(420)
    np.testing.assert_allclose(fast, refit, rtol=1e-9, atol=1e-11)


def test_paired_eigenvalues_are_deflated_not_lost() -> None:
    """Geodesic distances on a cycle: a circulant kernel, every eigenvalue but one twice, non-Euclidean."""
    n = 48
    i = np.arange(n)
    gap = np.abs(i[:, None] - i[None])
    D = np.minimum(gap, n - gap).astype(np.float64)
    sp, whole = cmds.fit_spectrum_eigh(D, None, "auto", np.dtype(np.float64), 2)
    assert whole is not None and np.isclose(whole[0][0], whole[0][1])
    fast = LeaveOneOut(D, *whole)
    got = [fast.ratio(k, 2, None) for k in range(n)]
    assert all(g is not None for g in got)  # decided without a refit
    refit, quick = _both(D, 2, None)
    np.testing.assert_allclose(quick, refit, rtol=1e-9, atol=1e-12)


def test_a_fit_calibrates_its_flag_as_before(words: np.ndarray) -> None:
    model = LandmarkMDS(n_components=2).fit(words).model_
    assert model.negative_ratio == pytest.approx(calibration.threshold(calibration.loo_ratios(words, 2, None, "auto")),
                                               rel=1e-9)
