"""The captured share: the map's variance of a set of objects against their best d-plane (docs/math.md §7.7),
one measure for the refit policy and the in-map drift statistic."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.spatial.distance as ssd

from streamembed import LandmarkMDS
from streamembed.core.monitor.captured import (best_captured_variance, captured_share, captured_variance,
                                               centred_kernel)
from streamembed.core.monitor.fit_baseline import leading_axes
from streamembed.core.monitor.plane import block_shares
from streamembed.core.refit.policy import plan_refit


def test_the_share_is_the_maps_variance_over_the_top_d_eigenvalues_of_the_window():
    """Against a direct eigendecomposition of the window's covariance (numpy's full eigh, not the module's path)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 12)) * np.linspace(3.0, 0.2, 12)
    X[:, :2] *= 0.4  # the map's two axes are no longer the window's main ones
    C = np.cov(X.T, bias=True)
    top = np.sort(np.linalg.eigh(C)[0])[::-1][:2].sum()
    want = np.trace(C[:2, :2]) / top
    assert captured_share(X[:, :2], 2, X=X) == pytest.approx(want, rel=1e-12)
    assert 0 < want < 0.5


def test_the_gram_and_feature_forms_and_the_stacked_blocks_agree():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 6)) * [4, 3, 2, 1, 1, 0.5]
    D = ssd.squareform(ssd.pdist(X))
    assert best_captured_variance(2, X=X) == pytest.approx(best_captured_variance(2, K=centred_kernel(D)), rel=1e-9)
    A = rng.normal(size=(5 * 64, 8)) * np.linspace(2, 0.5, 8)
    loop = [captured_share(A[g * 64:(g + 1) * 64, :2], 2, X=A[g * 64:(g + 1) * 64]) for g in range(5)]
    assert np.allclose(block_shares(A, 2, 64), loop, rtol=1e-12)


def test_a_set_on_the_maps_plane_is_wholly_captured_and_no_set_more_than_wholly():
    rng = np.random.default_rng(2)
    X = np.zeros((100, 5))
    X[:, :2] = rng.normal(size=(100, 2)) * [3, 1]
    assert captured_share(X[:, :2], 2, X=X) == pytest.approx(1.0, rel=1e-12)
    X[:, 2:] = rng.normal(size=(100, 3))
    assert captured_share(X[:, :2], 2, X=X) <= 1.0 + 1e-12


@pytest.mark.parametrize("rows", [np.zeros((2, 4)), np.ones((50, 4))])
def test_too_few_or_identical_objects_have_no_share(rows):
    """Fewer objects than d + 1, or all identical: NaN ("not enough objects"), never a number."""
    assert math.isnan(captured_share(rows[:, :2], 2, X=rows))
    assert np.isnan(block_shares(rows, 2, rows.shape[0])).all()
    assert math.isnan(captured_variance(np.empty((0, 2))))


def test_the_refit_policy_reports_the_same_share_on_its_evaluation_half():
    """The policy's captured_share_before is captured_share of the current map's coordinates of E against E's own
    classical MDS: the function the in-map statistic computes on its blocks."""
    rng = np.random.default_rng(3)
    L = rng.normal(size=(40, 6)) * [3, 2, 0.3, 0.3, 0.3, 0.3]
    recent = rng.normal(size=(200, 6)) * [0.3, 0.3, 3, 2, 0.3, 0.3]
    P = np.vstack([L, recent])
    D = ssd.squareform(ssd.pdist(P))
    est = LandmarkMDS(n_components=2).fit(D[:40, :40])
    plan = plan_refit(D, 40, 40, est.model_.embedding, 2, seed=0)
    share = plan.details["captured_share_before"]
    assert share == pytest.approx(plan.details["captured_before"] / plan.details["captured_best"], rel=1e-9)
    assert share < 0.3 and plan.action == "install"


def test_the_leading_axes_start_with_the_maps_coordinates():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(90, 5))
    D = ssd.squareform(ssd.pdist(X))
    model = LandmarkMDS(n_components=2).fit(D[:60, :60]).model_
    Z = leading_axes(model, D[60:, :60], 4)
    assert Z.shape == (30, 4)
    assert np.allclose(Z[:, :2], model.place(D[60:, :60]).y @ model.rotation.T, atol=1e-9)
