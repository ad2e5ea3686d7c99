"""``LandmarkMDS`` is a real scikit-learn estimator: checks, clone, pipelines and model selection."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import Pipeline, make_pipeline  # noqa: E402
from sklearn.utils.estimator_checks import check_estimator  # noqa: E402
from sklearn.utils.validation import check_is_fitted  # noqa: E402

from streamembed import LandmarkMDS  # noqa: E402

from .core.conftest import euclidean  # noqa: E402

#: scikit-learn's generic checks that do not apply, and why.
NOT_APPLICABLE = {
    "check_array_api_input": "needs SCIPY_ARRAY_API; streamembed computes with numpy only",
}


def test_scikit_learn_check_estimator_passes_on_pairwise_kernel_input() -> None:
    # the checks feed pairwise input as kernels (X @ Xᵀ): the similarity-input estimator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "does not inherit from BaseEstimator": on purpose (no runtime dependency)
        results = check_estimator(LandmarkMDS(input="similarity"), expected_failed_checks=NOT_APPLICABLE,
                                  on_fail=None)
    failed = [r for r in results if r["status"] == "failed"]
    assert not failed, [(r["check_name"], str(r["exception"])[:200]) for r in failed]
    assert sum(r["status"] == "passed" for r in results) >= 40


def _points(seed: int = 0, m: int = 40) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    P = np.hstack([rng.normal(size=(m, 2)) * 3, 0.3 * rng.normal(size=(m, 2))])
    return euclidean(P, P), (P[:, 0] > 0).astype(int)


def test_clone_copies_parameters_not_the_fit() -> None:
    D, _ = _points()
    est = LandmarkMDS(n_components=3, method="restricted", random_state=7).fit(D)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and twin is not est
    with pytest.raises(NotFittedError):
        check_is_fitted(twin)
    check_is_fitted(est)
    assert est.n_features_in_ == D.shape[0]


def test_a_pipeline_passes_y_to_fit_without_taking_it_for_landmark_ids() -> None:
    D, y = _points()
    pipe = make_pipeline(LandmarkMDS(n_components=2)).fit(D, y)
    est = pipe[-1]
    assert est.landmark_ids_.tolist() == [f"L{i}" for i in range(D.shape[0])]
    np.testing.assert_allclose(pipe.transform(D), est.embedding_, atol=1e-9)
    named = Pipeline([("map", LandmarkMDS(n_components=2))]).fit(D, y)
    np.testing.assert_allclose(named.fit_transform(D, y), est.embedding_, atol=1e-9)


def test_grid_search_scores_held_out_objects_against_the_training_landmarks() -> None:
    D, _ = _points(m=60)
    search = GridSearchCV(LandmarkMDS(), {"n_components": [1, 2, 3]}, cv=3).fit(D)
    # the data have two strong axes and two weak ones: more axes explain more held-out energy
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.diff(scores) > 0) and 0.8 < scores[1] < scores[2] <= 1.0
    assert search.best_params_ == {"n_components": 3}
    # pairwise input: each split fits on train x train and scores test x train
    assert search.best_estimator_.n_landmarks_ == D.shape[0]
