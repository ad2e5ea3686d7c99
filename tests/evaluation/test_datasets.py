"""Datasets load offline and give valid dissimilarity matrices."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed.evaluation.datasets import (DatasetUnavailable, load_dataset, novel_cluster, random_strings,
                                             stdlib_docstrings)


def check_dissimilarities(D: np.ndarray) -> None:
    assert D.ndim == 2 and D.shape[0] == D.shape[1]
    assert np.allclose(D, D.T) and (np.diag(D) == 0).all() and (D >= 0).all()


@pytest.mark.parametrize("name", ["swiss_roll", "gaussian_clusters", "plane", "plane_offspan", "novel_cluster"])
def test_synthetic_feature_datasets(name: str) -> None:
    check_dissimilarities(load_dataset(name).dissimilarities())


def test_random_strings_are_non_euclidean() -> None:
    from streamembed import LandmarkMDS

    ds = random_strings(n=60)
    check_dissimilarities(ds.D)
    assert LandmarkMDS(2).fit(ds.D).negative_share_ > 0.01


def test_stdlib_docstrings_corpus() -> None:
    ds = stdlib_docstrings(n=40)
    check_dissimilarities(ds.D)
    assert ds.kind == "real" and ds.D.max() <= 1.0 and ds.labels.shape == (ds.n_objects,)


def test_novel_cluster_landmark_pool_excludes_the_novel_cluster() -> None:
    ds = novel_cluster(n=100)
    assert set(ds.labels[ds.landmark_pool]) == {0, 1, 2, 3}


def test_digits_when_scikit_learn_is_installed() -> None:
    pytest.importorskip("sklearn")
    ds = load_dataset("digits")
    assert ds.X.shape == (1797, 64) and ds.kind == "real"


def test_unknown_name() -> None:
    with pytest.raises(KeyError):
        load_dataset("nope")
    assert issubclass(DatasetUnavailable, RuntimeError)


def test_word_and_identifier_corpora_are_real_distinct_strings_with_edit_distances() -> None:
    from streamembed.evaluation.datasets import english_words, python_identifiers

    for ds in (english_words(n=60), python_identifiers(n=60)):
        check_dissimilarities(ds.D)
        assert ds.kind == "real" and ds.n_objects == 60 and ds.D.min(initial=1, where=~np.eye(60, dtype=bool)) >= 1
        assert np.array_equal(ds.D, np.round(ds.D))  # plain Levenshtein: whole edits


def test_cityblock_breast_cancer_when_scikit_learn_is_installed() -> None:
    pytest.importorskip("sklearn")
    ds = load_dataset("breast_cancer_cityblock")
    assert ds.metric == "cityblock" and ds.X.shape == (569, 30)
    D = ds.dissimilarities()
    np.testing.assert_allclose(D[0, 1], np.abs(ds.X[0] - ds.X[1]).sum())
