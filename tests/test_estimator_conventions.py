"""What a scikit-learn or pandas user expects of ``LandmarkMDS`` beyond the checks.

Feature rows for a feature-mode model, ``self_similarity`` on every placing method, one default-id
convention with the command line (row numbers; old "L0…" files still load), and the hints ``fit`` gives
for a matrix that is not what it was declared to be: similarities (refused with the hint), squared
distances (a WARNING). Each of these failed or passed silently before.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from streamembed import LandmarkMDS
from streamembed.core.errors import InputError
from streamembed.named_columns import default_ids


def _features(seed: int = 0, n: int = 20, m: int = 8, p: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, p)), rng.normal(size=(m, p))


# --------------------------------------------------------------------------- feature rows


def test_a_feature_model_transforms_feature_rows() -> None:
    # before: "X has 5 features, but LandmarkMDS is expecting 20 features ... one column per landmark"
    L, Z = _features()
    est = LandmarkMDS(2, method="restricted").fit_features(L, metric="cityblock")
    expected = est.transform(est.dissimilarities_to_landmarks(Z))
    np.testing.assert_array_equal(est.transform(Z), expected)
    np.testing.assert_array_equal(est.transform(cdist(Z, L, "cityblock")), expected)  # dissimilarity rows still work
    np.testing.assert_array_equal(LandmarkMDS(2, method="restricted", metric="cityblock").fit(L).transform(Z), expected)
    with pytest.raises(InputError, match="X has 4 features, but LandmarkMDS is expecting 20 features.*or 5 feature"):
        est.transform(Z[:, :4])


def test_feature_rows_as_wide_as_the_landmark_rows_are_ambiguous_unless_metric_says_so() -> None:
    L, Z = _features(n=6, p=6)
    est = LandmarkMDS(2).fit_features(L)
    with pytest.raises(InputError, match="ambiguous.*set_params\\(metric='euclidean'\\)"):
        est.transform(Z)
    np.testing.assert_array_equal(est.embed(cdist(Z, L)).y, est.set_params(metric="euclidean").transform(Z))
    assert est.n_features_in_ == 6


def test_a_feature_model_fitted_on_a_frame_checks_its_feature_names() -> None:
    pd = pytest.importorskip("pandas")
    L, Z = _features()
    cols = [f"f{i}" for i in range(5)]
    est = LandmarkMDS(2, metric="euclidean").fit(pd.DataFrame(L, columns=cols))
    assert est.feature_names_in_.tolist() == cols and est.n_features_in_ == 5
    y = est.transform(pd.DataFrame(Z, columns=cols))
    np.testing.assert_array_equal(est.transform(pd.DataFrame(Z[:, ::-1], columns=cols[::-1])), y)  # any order
    with pytest.raises(ValueError, match="Feature names unseen at fit time:\n- g0"):
        est.transform(pd.DataFrame(Z, columns=["g0"] + cols[1:]))
    # fit_features on a frame, estimator metric left "precomputed": the names say the rows are features
    est2 = LandmarkMDS(2).fit_features(pd.DataFrame(L, columns=cols))
    np.testing.assert_array_equal(est2.transform(pd.DataFrame(Z, columns=cols)), y)


# --------------------------------------------------------------------------- self_similarity


def _kernel(seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    L, Z = rng.normal(size=(15, 4)), rng.normal(size=(6, 4))
    return L @ L.T, Z @ L.T, np.einsum("ij,ij->i", Z, Z)


@pytest.mark.parametrize("method", ["projection", "restricted", "stress", "l1"])
def test_self_similarity_is_taken_by_every_placing_method(method: str) -> None:
    # before: transform(..., self_similarity=...) raised TypeError (only embed took it)
    K, KA, kz = _kernel()
    est = LandmarkMDS(2, method=method, input="similarity").fit(K)
    with_last = np.hstack([KA, kz[:, None]])
    np.testing.assert_array_equal(est.transform(KA, self_similarity=kz), est.transform(with_last))
    assert np.isfinite(est.score(KA, self_similarity=kz)) and est.score(KA, self_similarity=kz) == est.score(with_last)
    if method == "restricted":
        np.testing.assert_array_equal(est.arc(KA, 0.5, self_similarity=kz), est.arc(with_last, 0.5))
    res, _ = est.residuals(KA, self_similarity=kz)
    assert np.isfinite(res.k0).all()


def test_score_without_the_self_similarity_says_what_it_needs() -> None:
    K, KA, _ = _kernel()
    est = LandmarkMDS(2, input="similarity").fit(K)
    with pytest.raises(InputError, match="self-similarity"):
        est.score(KA)


# --------------------------------------------------------------------------- ids


def test_default_landmark_ids_are_row_numbers_like_the_command_line(tmp_path) -> None:
    from streamembed.cli import main

    L, _ = _features(n=12)
    D = cdist(L, L)
    est = LandmarkMDS(2).fit(D)
    assert est.landmark_ids_.tolist() == [str(i) for i in range(12)]
    assert not hasattr(est, "feature_names_in_")  # the defaults are not names
    np.save(tmp_path / "D.npy", D)
    assert main(["fit", "--dissimilarities", str(tmp_path / "D.npy"), "-o", str(tmp_path / "m.npz")]) == 0
    assert LandmarkMDS.load(tmp_path / "m.npz").landmark_ids_.tolist() == est.landmark_ids_.tolist()
    assert default_ids(["0", "1", "2"]) and default_ids(["L0", "L1"]) and not default_ids(["1", "0"])


def test_a_model_saved_with_the_old_default_ids_loads_as_unnamed(tmp_path) -> None:
    pd = pytest.importorskip("pandas")
    L, Z = _features(n=10)
    old = LandmarkMDS(2).fit(cdist(L, L), landmark_ids=[f"L{i}" for i in range(10)])  # what fit wrote before
    old.save(tmp_path / "old.npz")
    back = LandmarkMDS.load(tmp_path / "old.npz")
    assert back.landmark_ids_.tolist() == [f"L{i}" for i in range(10)] and not hasattr(back, "feature_names_in_")
    A = cdist(Z, L)
    with pytest.warns(UserWarning, match="fitted without landmark ids"):
        y = back.transform(pd.DataFrame(A, columns=[f"c{i}" for i in range(10)]))
    np.testing.assert_array_equal(y, old.transform(A))


# --------------------------------------------------------------------------- fit hints


def test_a_similarity_matrix_given_as_dissimilarities_is_refused_with_the_hint() -> None:
    K, _, _ = _kernel()
    with pytest.raises(InputError, match="zero diagonal.*similarity matrix: fit it with input='similarity'"):
        LandmarkMDS().fit(K)
    D = cdist(*_features()[:1] * 2)
    D[0, 0] = 1e-3  # a stray diagonal entry is not a similarity matrix: the plain refusal
    with pytest.raises(InputError, match="zero diagonal: D\\[0, 0\\]") as err:
        LandmarkMDS().fit(D)
    assert "similarity" not in str(err.value)


def test_fit_dissimilarities_on_a_kernel_or_features_says_which_flag_was_meant(tmp_path, capsys) -> None:
    # before: "D must have a zero diagonal" / "must be square", with no word of --similarities / --features
    from streamembed.cli import main

    K, _, _ = _kernel()
    L, _ = _features(n=20, p=5)
    np.save(tmp_path / "K.npy", K)
    np.save(tmp_path / "F.npy", L)
    out = str(tmp_path / "m.npz")
    assert main(["fit", "--dissimilarities", str(tmp_path / "K.npy"), "-o", out]) == 2
    assert f"did you mean --similarities {tmp_path / 'K.npy'}?" in capsys.readouterr().err
    assert main(["fit", "--dissimilarities", str(tmp_path / "F.npy"), "-o", out]) == 2
    assert f"fit them with --features {tmp_path / 'F.npy'}" in capsys.readouterr().err
    assert main(["fit", "--similarities", str(tmp_path / "K.npy"), "-o", out]) == 0  # the hint's command works


@pytest.mark.slow
@pytest.mark.parametrize("name", ["digits", "iris", "stdlib_docstrings", "eeg_dtw"])
def test_squared_euclidean_distances_fit_with_a_warning_and_distances_and_dtw_without(name: str, caplog) -> None:
    """Issue 35: DTW between real series made ``fit`` warn "D looks like squared distances" (0.3 % of triangles
    violate the triangle inequality: ordinary for DTW). Only a square whose root is Euclidean is flagged now; the
    square of an edit distance is not told from a non-metric dissimilarity (core/inputs/hints.py)."""
    pytest.importorskip("sklearn")
    from benchmarks.datasets import load_dataset

    ds = load_dataset(name)
    D = ds.dissimilarities()
    idx = np.linspace(0, D.shape[0] - 1, 120).round().astype(int)
    D = D[np.ix_(idx, idx)]
    with caplog.at_level(logging.WARNING, logger="streamembed"):
        LandmarkMDS(2).fit(D)
        assert not [r for r in caplog.records if "squared" in r.getMessage()]
        LandmarkMDS(2).fit(np.square(D))
    warned = [r.getMessage() for r in caplog.records if "squared" in r.getMessage()]
    if name in ("digits", "iris"):  # squared Euclidean distances
        assert len(warned) == 1 and "np.sqrt(D)" in warned[0]
    else:
        assert warned == []
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="streamembed"):  # an ordinal map needs the order only
        LandmarkMDS(2, method="stress", landmark_map="nonmetric").fit(np.square(D))
    assert not [r for r in caplog.records if "squared" in r.getMessage()]
