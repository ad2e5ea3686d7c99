"""``LandmarkMDS`` is a real scikit-learn estimator: checks, clone, pipelines, output containers and model selection.

scikit-learn's ``check_estimator`` runs on every input mode. With ``metric="precomputed"`` (the default)
its checks feed the estimator Euclidean distance matrices (as they do ``MDS`` and ``TSNE``), with a feature
metric they feed feature vectors: every check applies and passes. The one configuration whose generated data
cannot be valid input, a similarity model with precomputed input (a distance matrix is not a kernel), lists
each check it skips and why (``NOT_APPLICABLE_TO_PRECOMPUTED_SIMILARITIES``); the same checks pass on the
similarity model that computes its kernel from features. Before this, the default estimator failed 25 of 47
checks (its tags made scikit-learn feed it kernels X Xᵀ, not dissimilarities).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

import sklearn
import sklearn.utils.estimator_checks as checks
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.utils.estimator_checks import check_estimator
from sklearn.utils.validation import check_is_fitted

from streamembed import LandmarkMDS

from .core.conftest import euclidean

#: Checks that cannot run anywhere here, and why.
NOT_APPLICABLE = {
    "check_array_api_input": "needs SCIPY_ARRAY_API (it is skipped without it); streamembed computes with numpy only",
}

_KERNEL_REASON = ("scikit-learn feeds an estimator with metric='precomputed' Euclidean distance matrices; a "
                  "similarity model's X is a kernel, and a distance matrix as a kernel implies negative squared "
                  "dissimilarities, so fit refuses it. The check passes on LandmarkMDS(input='similarity', "
                  "metric='linear'), which computes the kernel from the same data")
#: input="similarity" with precomputed kernels: the checks that fit on generated data (each refused, as above).
NOT_APPLICABLE_TO_PRECOMPUTED_SIMILARITIES = {name: _KERNEL_REASON for name in (
    "check_fit_score_takes_y", "check_estimators_overwrite_params", "check_dont_overwrite_parameters",
    "check_estimators_fit_returns_self", "check_readonly_memmap_input", "check_n_features_in_after_fitting",
    "check_positive_only_tag_during_fit", "check_estimators_dtypes", "check_dtype_object",
    "check_pipeline_consistency", "check_estimators_nan_inf", "check_estimators_pickle",
    "check_f_contiguous_array_estimator", "check_transformer_data_not_an_array", "check_transformer_general",
    "check_transformer_preserve_dtypes", "check_methods_sample_order_invariance", "check_methods_subset_invariance",
    "check_fit2d_1feature", "check_dict_unchanged", "check_fit_idempotent", "check_fit_check_is_fitted",
    "check_n_features_in", "check_fit2d_predict1d",
)}

#: scikit-learn's output and column-name checks, which ``check_estimator`` does not run for third-party
#: estimators: run here one by one.
OUTPUT_CHECKS = ("check_set_output_transform", "check_set_output_transform_pandas",
                 "check_global_output_transform_pandas", "check_transformer_get_feature_names_out",
                 "check_transformer_get_feature_names_out_pandas", "check_set_output_transform_polars",
                 "check_global_set_output_transform_polars", "check_dataframe_column_names_consistency")
#: ... and the one whose convention streamembed deliberately does not follow.
DIFFERENT_ON_PURPOSE = {
    "check_dataframe_column_names_consistency": "a frame whose columns are a permutation of the fitted names is "
    "put in model order (streamembed.named_columns: the landmark order of the rows is what a user can get wrong), "
    "where scikit-learn refuses it with 'Feature names must be in the same order as they were in fit.'; unseen and "
    "missing names raise in scikit-learn's words (tests/test_named_columns.py)",
}

ESTIMATORS = {
    "dissimilarities": LandmarkMDS(),
    "features": LandmarkMDS(metric="euclidean"),
    "kernel from features": LandmarkMDS(input="similarity", metric="linear"),
    "ordinal map": LandmarkMDS(method="stress", landmark_map="nonmetric"),
}


def _check(estimator: LandmarkMDS, expected: dict[str, str]) -> list[dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "does not inherit from BaseEstimator": on purpose (no runtime dependency)
        return check_estimator(estimator, expected_failed_checks=expected, on_fail=None)


@pytest.mark.parametrize("mode", [pytest.param(m, marks=pytest.mark.slow) if m == "ordinal map" else m
                                  for m in sorted(ESTIMATORS)])
def test_every_scikit_learn_check_passes(mode: str) -> None:
    results = _check(ESTIMATORS[mode], NOT_APPLICABLE)
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] in ("failed", "xfail")]
    assert not failed
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert skipped <= set(NOT_APPLICABLE)
    assert sum(r["status"] == "passed" for r in results) >= 45


def test_a_similarity_model_with_precomputed_kernels_fails_exactly_the_listed_checks() -> None:
    results = _check(LandmarkMDS(input="similarity"), {**NOT_APPLICABLE, **NOT_APPLICABLE_TO_PRECOMPUTED_SIMILARITIES})
    status: dict[str, set[str]] = {}
    for r in results:
        status.setdefault(r["check_name"], set()).add(r["status"])
    assert not [name for name, s in status.items() if "failed" in s]
    listed = set(NOT_APPLICABLE_TO_PRECOMPUTED_SIMILARITIES)
    assert {name for name, s in status.items() if "xfail" in s} == listed  # each listed check is inapplicable
    assert sum("passed" in s for s in status.values()) >= 20


@pytest.mark.parametrize("mode", ["dissimilarities", "features", "kernel from features"])
def test_the_output_container_checks_pass(mode: str) -> None:
    ran = 0
    for name in OUTPUT_CHECKS:
        check = getattr(checks, name, None)
        if check is None or name in DIFFERENT_ON_PURPOSE:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                check("LandmarkMDS", clone(ESTIMATORS[mode]))
        except checks.SkipTest:  # polars is optional
            continue
        ran += 1
    assert ran >= 5
    with pytest.raises(AssertionError, match="did not raise"):  # the documented difference is real
        checks.check_dataframe_column_names_consistency("LandmarkMDS", clone(ESTIMATORS[mode]))


def _points(seed: int = 0, m: int = 40) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    P = np.hstack([rng.normal(size=(m, 2)) * 3, 0.3 * rng.normal(size=(m, 2))])
    return euclidean(P, P), (P[:, 0] > 0).astype(int)


def test_clone_copies_parameters_and_output_config_not_the_fit() -> None:
    D, _ = _points()
    est = LandmarkMDS(n_components=3, method="restricted", random_state=7).set_output(transform="pandas").fit(D)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and twin is not est
    assert twin._sklearn_output_config == {"transform": "pandas"}
    with pytest.raises(NotFittedError):
        check_is_fitted(twin)
    check_is_fitted(est)
    assert est.n_features_in_ == D.shape[0]


def test_a_pipeline_passes_y_to_fit_without_taking_it_for_landmark_ids() -> None:
    D, y = _points()
    pipe = make_pipeline(LandmarkMDS(n_components=2)).fit(D, y)
    est = pipe[-1]
    assert est.landmark_ids_.tolist() == [str(i) for i in range(D.shape[0])]  # row numbers, as `streamembed fit`
    np.testing.assert_allclose(pipe.transform(D), est.embedding_, atol=1e-9)
    named = Pipeline([("map", LandmarkMDS(n_components=2))]).fit(D, y)
    np.testing.assert_allclose(named.fit_transform(D, y), est.embedding_, atol=1e-9)


def _flat3(n: int, seed: int = 0) -> np.ndarray:
    """n points of a 3-D subspace of R¹⁰ (axes of scale 3, 2, 1.5) plus isotropic noise 0.1: dimension 3."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(10, 10)))
    U = rng.uniform(-1, 1, size=(n, 3)) * np.array([3.0, 2.0, 1.5])
    return np.hstack([U, np.zeros((n, 7))]) @ Q.T + 0.1 * rng.normal(size=(n, 10))


@pytest.mark.slow
def test_grid_search_over_n_components_picks_the_known_dimension_not_the_largest() -> None:
    # before: score was the share of energy explained, which rises with d: the largest d always won
    X = _flat3(150)
    D = euclidean(X, X)
    grid = [1, 2, 3, 4, 5, 6]
    search = GridSearchCV(LandmarkMDS(), {"n_components": grid}, cv=KFold(5, shuffle=True, random_state=0)).fit(D)
    scores = search.cv_results_["mean_test_score"]
    assert search.best_params_ == {"n_components": 3}, scores
    assert scores[2] > scores[-1] and np.all(np.diff(scores[:3]) > 0)
    # pairwise input: each split fits on train x train and scores test x train
    assert search.best_estimator_.n_landmarks_ == D.shape[0]
    energy = [LandmarkMDS(d).fit(D[:120, :120]).explained_energy(D[120:, :120]) for d in grid]
    assert np.all(np.diff(energy) > 0)  # the old score keeps rising: it cannot choose d


@pytest.mark.slow
def test_grid_search_on_iris_picks_the_dimension_pca_likelihood_and_minkas_estimate_agree_on() -> None:
    # real data: iris's 4 features, whose dimension by Minka's PCA(n_components="mle") is 3
    from sklearn.decomposition import PCA

    from benchmarks.datasets import load_dataset

    ds = load_dataset("iris")
    assert PCA(n_components="mle").fit(ds.X).n_components_ == 3
    D = ds.dissimilarities()
    cv = KFold(5, shuffle=True, random_state=0)
    search = GridSearchCV(LandmarkMDS(), {"n_components": [1, 2, 3, 4]}, cv=cv).fit(D)
    assert search.best_params_ == {"n_components": 3}, search.cv_results_["mean_test_score"]
    # the share of energy explained, the score before, picks the largest d of the grid
    energy = [np.mean([LandmarkMDS(d).fit(D[np.ix_(tr, tr)]).explained_energy(D[np.ix_(te, tr)])
                       for tr, te in cv.split(D)]) for d in (1, 2, 3, 4)]
    assert int(np.argmax(energy)) == 3


def test_score_is_scikit_learns_pca_score_for_euclidean_features() -> None:
    from sklearn.decomposition import PCA

    X = _flat3(120, seed=1)
    for d in (1, 3, 5):
        est = LandmarkMDS(d, metric="euclidean").fit(X[:90])
        assert est.score(X[90:]) == pytest.approx(PCA(d).fit(X[:90]).score(X[90:]), rel=1e-9)
        D = euclidean(X, X)
        assert LandmarkMDS(d).fit(D[:90, :90]).score(D[90:, :90]) == pytest.approx(est.score(X[90:]), rel=1e-9)


@pytest.mark.slow
def test_grid_search_in_a_feature_pipeline() -> None:
    from sklearn.preprocessing import StandardScaler

    X = _flat3(150, seed=2)
    pipe = Pipeline([("scale", StandardScaler(with_std=False)), ("map", LandmarkMDS(metric="euclidean"))])
    search = GridSearchCV(pipe, {"map__n_components": [1, 2, 3, 5, 8]}, cv=KFold(5, shuffle=True, random_state=0))
    assert search.fit(X).best_params_ == {"map__n_components": 3}


def test_a_refined_map_is_scored_on_its_kernel() -> None:
    X = _flat3(80, seed=3)
    D = euclidean(X, X)
    plain = LandmarkMDS(3).fit(D[:60, :60]).score(D[60:, :60])
    refined = LandmarkMDS(3, method="stress", landmark_map="smacof").fit(D[:60, :60]).score(D[60:, :60])
    assert refined == pytest.approx(plain, rel=1e-12)


def test_set_output_pandas_keeps_the_index_and_names_the_columns() -> None:
    pd = pytest.importorskip("pandas")
    D, _ = _points(m=30)
    ids = [f"obj-{i}" for i in range(30)]
    frame = pd.DataFrame(D, index=ids, columns=ids)
    est = LandmarkMDS(n_components=3).set_output(transform="pandas")
    out = est.fit_transform(frame)
    assert isinstance(out, pd.DataFrame) and out.index.tolist() == ids
    assert out.columns.tolist() == ["landmarkmds0", "landmarkmds1", "landmarkmds2"]
    assert est.get_feature_names_out().tolist() == out.columns.tolist()
    rows = pd.DataFrame(D[:5][:, ::-1], index=["a", "b", "c", "d", "e"], columns=ids[::-1])  # any column order
    y = est.transform(rows)
    assert y.index.tolist() == ["a", "b", "c", "d", "e"]
    np.testing.assert_array_equal(y.to_numpy(), out.to_numpy()[:5])
    assert isinstance(est.set_output(transform="default").transform(rows), np.ndarray)
    with sklearn.config_context(transform_output="pandas"):  # the global setting, unless the estimator has its own
        assert isinstance(LandmarkMDS(3).fit(D).transform(D[:2]), pd.DataFrame)
        assert isinstance(est.transform(D[:2]), np.ndarray)
    assert isinstance(LandmarkMDS(3).fit(D).transform(D[:2]), np.ndarray)


def test_set_output_through_a_pipeline_and_unknown_or_missing_containers() -> None:
    pd = pytest.importorskip("pandas")
    D, _ = _points(m=20)
    pipe = make_pipeline(LandmarkMDS(2)).set_output(transform="pandas")
    assert list(pipe.fit_transform(D).columns) == ["landmarkmds0", "landmarkmds1"]
    with pytest.raises(ValueError, match="output config must be in"):
        LandmarkMDS().set_output(transform="arrow")
    try:
        import polars  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="requires polars to be installed"):
            LandmarkMDS().set_output(transform="polars")
    else:
        out = LandmarkMDS(2).set_output(transform="polars").fit_transform(D)
        assert out.columns == ["landmarkmds0", "landmarkmds1"]
    assert isinstance(pd.DataFrame(LandmarkMDS(2).fit_transform(D)), pd.DataFrame)


def test_get_feature_names_out_checks_input_features() -> None:
    D, _ = _points(m=12)
    ids = [f"m{i}" for i in range(12)]
    est = LandmarkMDS(2).fit(D, landmark_ids=ids)
    assert est.get_feature_names_out(ids).tolist() == ["landmarkmds0", "landmarkmds1"]
    with pytest.raises(ValueError, match="input_features is not equal to feature_names_in_"):
        est.get_feature_names_out(ids[::-1])
    with pytest.raises(ValueError, match="input_features should have length"):
        LandmarkMDS(2).fit(D).get_feature_names_out(["a"])
    with pytest.raises(AttributeError, match="not fitted"):  # streamembed's NotFittedError, like scikit-learn's
        LandmarkMDS().get_feature_names_out()


@pytest.mark.parametrize("method", ["projection", "restricted", "stress", "l1"])
def test_float32_in_gives_float32_out(method: str) -> None:
    D, _ = _points(m=25)
    D32 = D.astype(np.float32)
    est = LandmarkMDS(2, method=method).fit(D32)
    y32 = est.transform(D32[:7])
    assert y32.dtype == np.float32 and est.fit_transform(D32).dtype == np.float32
    assert est.transform(D[:7]).dtype == np.float64
    np.testing.assert_allclose(y32, est.transform(D[:7]), rtol=2e-3, atol=2e-3 * np.abs(y32).max())
    assert est.embed(D32[:7]).y.dtype == np.float64  # the EmbeddingResult keeps float64 numbers
    F = np.random.default_rng(0).normal(size=(25, 3)).astype(np.float32)
    assert LandmarkMDS(2, method=method, metric="euclidean").fit(F).transform(F[:4]).dtype == np.float32
