"""Saving and loading fitted models (portable .npz, schema-versioned, checksummed)."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from streamembed import LandmarkMDS, ModelFileError

from .conftest import landmark_problem


@pytest.fixture
def fitted(rng):
    D, A, _ = landmark_problem(rng, 12, 3, 20, off_span=1.0)
    est = LandmarkMDS(n_components=2, method="restricted").fit(D, landmark_ids=[f"mol-{i}" for i in range(12)])
    est.model_ = est.model_.with_version(7)
    return est, A


def test_round_trip_preserves_everything(fitted, tmp_path):
    est, A = fitted
    path = tmp_path / "model.npz"
    est.save(path)
    back = LandmarkMDS.load(path)
    assert back.get_params() == est.get_params()
    assert back.model_version_ == 7
    assert back.landmark_ids_.tolist() == [f"mol-{i}" for i in range(12)]
    np.testing.assert_array_equal(back.embedding_, est.embedding_)
    np.testing.assert_array_equal(back.transform(A), est.transform(A))
    np.testing.assert_array_equal(back.dissimilarities_, est.dissimilarities_)


def test_file_has_no_pickled_objects(fitted, tmp_path):
    est, _ = fitted
    est.save(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as npz:
        for name in npz.files:
            assert npz[name].dtype != object


def test_corrupted_bytes_fail_the_checksum_or_the_archive(fitted, tmp_path):
    est, _ = fitted
    path = tmp_path / "m.npz"
    est.save(path)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(ModelFileError, match="checksum|not a readable"):
        LandmarkMDS.load(path)


def test_truncated_file(fitted, tmp_path):
    est, _ = fitted
    path = tmp_path / "m.npz"
    est.save(path)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ModelFileError, match="not a readable .npz"):
        LandmarkMDS.load(path)


def _entries(path) -> dict:
    with np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def test_edited_array_fails_checksum(fitted, tmp_path):
    est, _ = fitted
    path = tmp_path / "m.npz"
    est.save(path)
    files = _entries(path)
    files["eigenvalues"] = files["eigenvalues"] * 1.01
    np.savez(path, **files)
    with pytest.raises(ModelFileError, match="fails its checksum"):
        LandmarkMDS.load(path)


def test_other_schema_version_is_refused(fitted, tmp_path):
    est, _ = fitted
    path = tmp_path / "m.npz"
    est.save(path)
    files = _entries(path)
    meta = json.loads(str(files["meta"]))
    meta["schema_version"] = 99
    files["meta"] = np.array(json.dumps(meta))
    np.savez(path, **files)
    with pytest.raises(ModelFileError, match="schema version 99; this streamembed reads 1"):
        LandmarkMDS.load(path)


def test_missing_and_foreign_files(tmp_path):
    with pytest.raises(ModelFileError, match="does not exist"):
        LandmarkMDS.load(tmp_path / "nope.npz")
    np.savez(tmp_path / "other.npz", x=np.arange(3))
    with pytest.raises(ModelFileError, match="no 'meta' entry"):
        LandmarkMDS.load(tmp_path / "other.npz")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(ModelFileError, match="not a streamembed model .*starts with b'hello'"):
        LandmarkMDS.load(tmp_path / "text.npz")
    np.save(tmp_path / "matrix.npy", np.eye(3))
    with pytest.raises(ModelFileError, match=r"single numpy array \(.npy\), not a streamembed model"):
        LandmarkMDS.load(tmp_path / "matrix.npy")
    (tmp_path / "zip.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(ModelFileError, match="not a readable .npz archive"):
        LandmarkMDS.load(tmp_path / "zip.npz")


def test_features_model_round_trip(rng, tmp_path):
    X = rng.normal(size=(15, 4))
    est = LandmarkMDS(n_components=2).fit_features(X, metric="cityblock")
    est.save(tmp_path / "f.npz")
    back = LandmarkMDS.load(tmp_path / "f.npz")
    F = rng.normal(size=(5, 4))
    assert back.metric_ == "cityblock"
    np.testing.assert_allclose(back.dissimilarities_to_landmarks(F), est.dissimilarities_to_landmarks(F))
    assert zipfile.is_zipfile(tmp_path / "f.npz")
