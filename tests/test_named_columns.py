"""DataFrames named by landmark id in the Python API (streamembed/named_columns.py): like ``feature_names_in_``.

A model fitted with landmark ids checks a DataFrame's column names: a permutation of the ids is put in model
order by one gather (placements bit-identical to the rows in model order), other names raise in scikit-learn's
words. Before this, the column names were ignored and a reordered frame was placed as if in model order.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from streamembed import LandmarkMDS

pd = pytest.importorskip("pandas")

N = 10
IDS = [f"mol-{i}" for i in range(N)]


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    L, Z = rng.normal(size=(N, 3)), rng.normal(size=(25, 3))
    return cdist(L, L), cdist(Z, L)


def test_fitting_on_a_frame_names_the_landmarks_and_sets_feature_names_in() -> None:
    D, _ = _data()
    est = LandmarkMDS().fit(pd.DataFrame(D, index=IDS, columns=IDS))
    assert isinstance(est.feature_names_in_, np.ndarray) and est.feature_names_in_.dtype == object
    assert est.feature_names_in_.tolist() == IDS == est.landmark_ids_.tolist()
    assert LandmarkMDS().fit(D, landmark_ids=IDS).feature_names_in_.tolist() == IDS
    assert not hasattr(LandmarkMDS().fit(D), "feature_names_in_")  # fitted without ids
    with pytest.raises(ValueError, match="name different landmarks"):
        LandmarkMDS().fit(pd.DataFrame(D, columns=IDS), landmark_ids=IDS[::-1])


@pytest.mark.parametrize("method", ["transform", "embed", "score", "residuals"])
def test_a_permutation_of_the_ids_is_put_in_model_order_exactly(method: str) -> None:
    D, A = _data()
    est = LandmarkMDS(method="restricted").fit(D, landmark_ids=IDS)
    perm = np.random.default_rng(1).permutation(N)
    frame = pd.DataFrame(A[:, perm], columns=[IDS[p] for p in perm])

    def run(x: object) -> np.ndarray:
        if method == "transform":
            return est.transform(x)
        if method == "embed":
            r = est.embed(x)
            return np.column_stack([r.y, r.beta, r.unexplained])
        if method == "score":
            return np.array([est.score(x)])
        return est.residuals(x)[0].k0

    assert np.array_equal(run(frame), run(A))  # bit-identical to the rows in model order
    assert np.array_equal(run(pd.DataFrame(A, columns=IDS)), run(A))


@pytest.mark.parametrize("columns,message", [
    ([f"x{i}" for i in range(N)], "Feature names unseen at fit time:\n- x0\n- x1\n"),
    (IDS[:-1] + ["mol-0"], "Feature names seen at fit time, yet now missing:\n- mol-9\n"),
    (IDS[:-1], "Feature names seen at fit time, yet now missing:\n- mol-9\n"),
])
def test_other_names_raise_in_scikit_learns_words(columns: list[str], message: str) -> None:
    D, A = _data()
    est = LandmarkMDS().fit(D, landmark_ids=IDS)
    frame = pd.DataFrame(A[:, :len(columns)], columns=columns)
    expected = re.escape("The feature names should match those that were passed during fit.\n" + message)
    for call in (est.transform, est.embed, est.score):
        with pytest.raises(ValueError, match=expected):
            call(frame)


def test_a_model_fitted_without_ids_takes_a_frame_in_order_and_says_so() -> None:
    D, A = _data()
    est = LandmarkMDS().fit(D)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = est.transform(pd.DataFrame(A, columns=[f"c{i}" for i in range(N)]))
    assert np.array_equal(y, est.transform(A))
    assert any("fitted without landmark ids" in str(w.message) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.transform(pd.DataFrame(A))  # integer column labels are not names: no warning


def test_a_similarity_frame_carries_its_self_similarity_in_a_named_column() -> None:
    rng = np.random.default_rng(4)
    L, Z = rng.normal(size=(N, 3)), rng.normal(size=(6, 3))
    est = LandmarkMDS(input="similarity").fit_features(L, metric="linear", landmark_ids=IDS)
    K = est.dissimilarities_to_landmarks(Z)  # (6, N + 1), k(z, z) last
    perm = np.random.default_rng(2).permutation(N)
    frame = pd.DataFrame(np.column_stack([K[:, -1], K[:, :-1][:, perm]]),
                         columns=["self_similarity"] + [IDS[p] for p in perm])
    assert np.array_equal(est.transform(frame), est.transform(K))
